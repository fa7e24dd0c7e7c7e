"""A query evaluated over a collection read in chunks, keeping only what it answers (docs/tables-at-scale.md).

A `query_data` expression over a collection stored as rows that does not run in SQL is evaluated here when it
*decomposes*: its head works record by record over the collection, so that evaluating the head over each chunk
of records and concatenating the parts is the head's value over the whole collection, and what follows it (its
tail) runs once over that concatenation:

- the head: over an array collection, a projection or filter over the records (`[?p]`, `[?p].x`, `[*].x`,
  `[?p].{a: a}`, `@[?p]`) or over their flattening (`[].x`), or the records themselves (`@`); over an object
  collection, a projection of its values (`*.x`, `*[?p]`) or a projection or filter over `values(@)`; and a
  projection or filter over the flattening of such a head (`[?p][].x`, `[*].tags[][?q]`): its *levels*, the
  innermost head first, each over the previous one's items;
- the tail: the steps applied to the head's value in order, read off the expression by the evaluation order
  jmespath defines (`a | b`, `a.b`, `a[0]` and `a[1:]` evaluate `a`, then the rest over its value; `f(a, &k)`
  evaluates `a`, then `f(@, &k)`): `[?p].x | [0]`, `sort_by([?p], &x)[-5:].id`, `length([?p])`;
- `length` applied first to the head counts the head's items, chunk by chunk, without keeping them.

A tail that starts with a *reduction* keeps, chunk by chunk, only the head's items its answer can depend on,
in the collection's order, and runs the whole tail over those at the end:

- a top-k: an optional `sort_by(@, &key)`, any number of `reverse(@)`, then an index (`[0]`, `[-1]`) or a
  slice whose bounds lie within k items of one end of the list (`[:10]`, `[-5:]`, `[2:8:2]`, `[:-4:-1]`; not
  `[::2]`, `[3:-3]`): the k items that come first (or last) in the order the tail sorts them by, ties broken
  by the collection's order (sort_by is stable), so the tail's sort, slice and projection over them give
  the whole list's answer;
- an extreme: `max_by(@, &key)`, `min_by(@, &key)`, `max(@)`, `min(@)`: the function over the best item so
  far and the chunk's items, which keeps the whole list's first best (Python's max/min keep the earliest) and
  compares every item against the best before it, as the whole list's evaluation does.

Each chunk goes through the one evaluator (tools_app.data_access.query / jmespath_compiler: the head's node
compiled as the whole expression's is), and the answer is jmespath's over the whole collection, errors
included: each level of the head works on one item at a time and in the items' order, and the whole list
evaluates a level over all the items before the next level, so its failure is the first failing item's of the
lowest level that fails anywhere: a level failing in a chunk is remembered (its later items are not needed),
the next chunks go only through the levels below it (one of which may still fail, and wins), and the failure
is raised once every chunk has been read, the same INVALID_QUERY naming the whole expression
(query.failures_as_invalid); the first level's failure is raised at once. A reduction's failure (a sort key
that is not a number or a string, or not of the first item's type; keys max_by cannot compare; an item max
refuses) is the library's own error for the first item that fails, raised by the library's function over
that item (and the first item, or the best before it, that its check compares it with); it is raised once
every chunk has gone through the head, since the whole list's head fails first.

Bounded by what is kept, not by what is read: the head's results (a reduction's kept items) are at most
`limit` bytes of JSON (a record kept whole counts its stored size), else QUERY_TOO_EXPENSIVE; the call's time
budget is checked after every chunk. Anything that does not decompose is left to the caller (None from
`plan`).
"""

import heapq
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from operator import itemgetter
from typing import Any

from jmespath.functions import TYPES_MAP

from tools_app.data_access import budget
from tools_app.data_access.jmespath_compiler import compile_ast
from tools_app.data_access.query import checked_result, compile_expression, failures_as_invalid
from tools_app.kernel.errors import ErrorCode, ToolError

__all__ = ["Every", "Extreme", "Plan", "TopK", "plan", "run", "slice_bound"]

Evaluator = Callable[[Any], Any]
# (position, key, record, size of its JSON) in position order, as tools_app.execution.records reads them.
Row = tuple[int, str | None, Any, int]

_SOURCES = frozenset({"identity", "current"})
_PROJECTIONS = frozenset({"projection", "filter_projection"})
# Nodes that evaluate their children in order, each over the previous one's value.
_SEQUENCES = frozenset({"pipe", "subexpression", "index_expression"})
# Arguments that are the same for every record and cannot fail when evaluated.
_CONSTANT_ARGUMENTS = frozenset({"literal", "expref"})
_SORT_KEY_TYPES = frozenset({"number", "string"})
_RANK = itemgetter(0, 1)


@dataclass(frozen=True)
class TopK:
    """Keep the `k` items that come first (`largest` False) or last in the order of (`key`'s value, the
    collection's order); `key` None: the collection's order alone. `check` is the tail's `sort_by(@, &key)`,
    evaluated over the first item and an offending one to raise the library's error."""

    k: int
    largest: bool
    key: Evaluator | None = None
    check: Evaluator | None = None


@dataclass(frozen=True)
class Extreme:
    """Keep the best item: `function` (the tail's max_by/min_by/max/min over @) over [best so far, *items]."""

    function: Evaluator


@dataclass(frozen=True)
class Every:
    """Keep the items a slice whose items depend on the list's length (`[1:-1]`, `[::2]`, `[::-1]`) takes, when
    that length is known before the first chunk (`run`'s `length`: the records themselves, not narrowed): the
    slice's indexes are `range(length)[start:stop:step]`, and `rest` (the tail after the slice) runs over the
    kept items in the slice's order. Without a length, every item is kept and the whole tail runs."""

    start: int | None
    stop: int | None
    step: int | None
    rest: Evaluator | None


@dataclass(frozen=True)
class Plan:
    """How a decomposable expression runs: the head's `levels` over each chunk's value (a list of records, or an
    object of them by key), each over the previous one's items, then `count` (the number of the head's items
    instead of the items), or `reduce` (only the items the answer depends on: module docstring), then `tail`
    over that."""

    levels: tuple[Evaluator, ...]
    count: bool
    tail: Evaluator | None
    reduce: TopK | Extreme | Every | None = None
    # The record fields it filters the records on or orders them by (_filtered_fields): a slow evaluation's
    # report names those the table does not index (data_access.slow_queries).
    filtered_fields: frozenset[str] = frozenset()


def plan(expression: str, kind: str) -> Plan | None:
    """The plan of `expression` over a collection of `kind` ("array" or "object"), or None when it does not
    decompose. The expression is compiled (and refused as the evaluator refuses it) first."""
    compile_expression(expression)
    return _plan(expression, kind)


@lru_cache(maxsize=1024)
def _plan(expression: str, kind: str) -> Plan | None:
    steps = _sequence(compile_expression(expression).parsed, kind)
    head, tail = steps[0], steps[1:]
    if not _is_head(head, kind):
        return None
    count = bool(tail) and _is_length_of_current(tail[0])
    reduce: TopK | Extreme | Every | None = None
    if count:
        tail = tail[1:]
    else:
        reduce = _reduction(tail)
        if reduce is None and head["type"] in _SOURCES and kind == "array":
            reduce = _every(tail)
        if reduce is None and head["type"] in _SOURCES:
            return None  # the records themselves, then a tail that needs them all: nothing to gain over gathering
    return Plan(
        levels=tuple(compile_ast(level) for level in _levels(head)),
        count=count,
        tail=compile_ast(_piped(tail)) if tail else None,
        reduce=reduce,
        filtered_fields=_filtered_fields(head, tail),
    )


# The nodes of a filter's condition whose record-field operands decide its test, as sql.plan lists a compiled
# filter's (a field inside another function, `to_string(f)`, is no index's expression).
_TESTS = frozenset({"comparator", "and_expression", "or_expression", "not_expression"})
_FIELD_TESTS = frozenset({"contains", "starts_with", "ends_with"})


def _filtered_fields(head: dict, tail: list[dict]) -> frozenset[str]:
    """The top-level record fields whose values decide which records the plan keeps or in what order, as
    sql.plan.filtered_fields lists a compiled plan's (the fields an index of a declared field can serve): the
    tests of a filter over the records (`[?status=='x']`, `values(@)[?total > `5`]`), the key of a reduction
    over the records themselves (`sort_by(@, &f)`, `max_by(@, &f)`), and the field whose values `max`, `min` or
    `sort` rank (`[*].f | max(@)`). Paths below a field (`a.b`) and fields of flattened items are not listed."""
    found: set[str] = set()
    items: str | None = None  # "@" when the head's items are the records, a field's name when that field's values
    levels = _levels(head)
    first_level = levels[0]  # the one over the records
    if _over_records(first_level):
        items = "@"
    elif first_level["type"] in _PROJECTIONS and _over_records(first_level["children"][0]):
        if first_level["type"] == "filter_projection":
            _test_fields(first_level["children"][2], found)
        right = first_level["children"][1]
        items = "@" if right["type"] in _SOURCES else right["value"] if right["type"] == "field" else None
    if len(levels) > 1:
        items = None  # the items of a flattening
    first = tail[0] if tail else None
    if first is not None and items == "@":
        for name in ("sort_by", "max_by", "min_by"):
            if _is_function_of_current(first, name, 2):
                key = first["children"][1]["children"][0]
                if key["type"] == "field":
                    found.add(key["value"])
    elif first is not None and items is not None:
        if any(_is_function_of_current(first, name, 1) for name in ("max", "min", "sort")):
            found.add(items)
    return frozenset(found)


def _over_records(node: dict) -> bool:
    return node["type"] in _SOURCES or _is_values_of_current(node)


def _test_fields(node: dict, found: set[str]) -> None:
    if node["type"] == "field":
        found.add(node["value"])
    elif node["type"] in _TESTS or (node["type"] == "function_expression" and node["value"] in _FIELD_TESTS):
        for child in node["children"]:
            _test_fields(child, found)


def _sequence(node: dict, kind: str) -> list[dict]:
    """`node` as steps, each evaluated over the previous one's value, the first over the collection: jmespath
    evaluates a pipe, a subexpression and an index expression child after child; a projection `L.R` as `L`,
    then `R` over each of its items (`L | @.R`... as projection(@, R)); a function of one argument that depends
    on the data as that argument, then the function over it. A step that does nothing (`@`) after the first is
    left out; a head stays whole."""
    kind_of = node["type"]
    if _is_head(node, kind):
        steps = [node]
    elif kind_of in _SEQUENCES:
        steps = [step for child in node["children"] for step in _sequence(child, kind)]
    elif kind_of == "projection":
        left, right = node["children"]
        steps = [
            *_sequence(left, kind),
            {"type": "projection", "children": [{"type": "current", "children": []}, right]},
        ]
    elif kind_of == "function_expression":
        arguments = node["children"]
        varying = [index for index, argument in enumerate(arguments) if argument["type"] not in _CONSTANT_ARGUMENTS]
        if len(varying) != 1:
            return [node]
        over_current = [*arguments]
        over_current[varying[0]] = {"type": "current", "children": []}
        steps = [*_sequence(arguments[varying[0]], kind), {**node, "children": over_current}]
    else:
        steps = [node]
    return steps[:1] + [step for step in steps[1:] if step["type"] not in _SOURCES]


def _is_head(node: dict, kind: str) -> bool:
    kind_of = node["type"]
    if kind == "array" and kind_of in _SOURCES:
        return True
    if kind == "object" and kind_of == "value_projection":
        return node["children"][0]["type"] in _SOURCES
    return kind_of in _PROJECTIONS and _is_items_of(node["children"][0], kind)


def _is_items_of(node: dict, kind: str) -> bool:
    """The records (an array's, or an object's `values(@)`), or a head over them, or the flattening of either
    (which fails on nothing): evaluated item by item."""
    node = _unflattened(node)
    if node["type"] in _SOURCES:
        return kind == "array"
    return (kind == "object" and _is_values_of_current(node)) or _is_head(node, kind)


def _unflattened(node: dict) -> dict:
    while node["type"] == "flatten":
        node = node["children"][0]
    return node


def _levels(head: dict) -> list[dict]:
    """The head as levels, the innermost first, each evaluated over the previous one's value: a projection over
    (the flattening of) an inner head is that head's levels, then the projection over (the flattening of) @."""
    if head["type"] not in _PROJECTIONS:
        return [head]
    left = head["children"][0]
    inner = _unflattened(left)
    if inner["type"] in _SOURCES or _is_values_of_current(inner):
        return [head]
    return [*_levels(inner), {**head, "children": [_over_current(left), *head["children"][1:]]}]


def _over_current(node: dict) -> dict:
    """A chain of flattens over its innermost node, over @ instead."""
    if node["type"] != "flatten":
        return {"type": "current", "children": []}
    return {**node, "children": [_over_current(node["children"][0])]}


def _is_values_of_current(node: dict) -> bool:
    return (
        node["type"] == "function_expression"
        and node.get("value") == "values"
        and len(node["children"]) == 1
        and node["children"][0]["type"] in _SOURCES
    )


def _is_length_of_current(node: dict) -> bool:
    return _is_function_of_current(node, "length", 1)


def _is_function_of_current(node: dict, name: str, arity: int) -> bool:
    """`name(@)`, or `name(@, &key)` for arity 2."""
    if node["type"] != "function_expression" or node.get("value") != name or len(node["children"]) != arity:
        return False
    first, *rest = node["children"]
    return first["type"] in _SOURCES and all(argument["type"] == "expref" for argument in rest)


def _reduction(tail: list[dict]) -> TopK | Extreme | None:
    """The reduction a tail starts with (module docstring), or None."""
    if not tail:
        return None
    first = tail[0]
    if any(_is_function_of_current(first, name, 2) for name in ("max_by", "min_by")) or any(
        _is_function_of_current(first, name, 1) for name in ("max", "min")
    ):
        return Extreme(function=compile_ast(first))
    at = 0
    key = check = None
    if _is_function_of_current(first, "sort_by", 2):
        key, check = compile_ast(first["children"][1]["children"][0]), compile_ast(first)
        at = 1
    elif _is_function_of_current(first, "sort", 1):  # sort_by(@, &@), with sort's own checks and errors
        key, check = compile_ast({"type": "current", "children": []}), compile_ast(first)
        at = 1
    reversals = 0
    while at < len(tail) and _is_function_of_current(tail[at], "reverse", 1):
        reversals += 1
        at += 1
    bound = _selection_bound(tail[at]) if at < len(tail) else None
    if bound is None:
        return None
    end, k = bound
    return TopK(k=k, largest=(end == "last") != (reversals % 2 == 1), key=key, check=check)


def _every(tail: list[dict]) -> Every | None:
    """The slice (with a non-zero step) a tail over the records themselves starts with, or None."""
    if not tail or tail[0]["type"] != "slice":
        return None
    start, stop, step = tail[0]["children"]
    if step == 0:
        return None
    return Every(start=start, stop=stop, step=step, rest=compile_ast(_piped(tail[1:])) if len(tail) > 1 else None)


def _selection_bound(node: dict) -> tuple[str, int] | None:
    kind_of = node["type"]
    if kind_of == "index":
        index = node["value"]
        return ("first", index + 1) if index >= 0 else ("last", -index)
    if kind_of == "slice":
        start, stop, step = node["children"]
        return slice_bound(start, stop, step)
    return None


def slice_bound(start: int | None, stop: int | None, step: int | None) -> tuple[str, int] | None:
    """("first", k) when `[start:stop:step]` takes its items among the first k of any list, whatever its length,
    and the same items from the list's first k alone; ("last", k) likewise for the last k; None for a slice
    whose items depend on the length (`[::2]`, `[2:-2]`) or with a zero step (the library's error)."""
    step = 1 if step is None else step
    if step > 0:
        if stop is not None and stop >= 0 and (start is None or start >= 0):
            return "first", stop
        if start is not None and start < 0 and (stop is None or stop < 0):
            return "last", -start
    elif step < 0:
        if start is not None and start >= 0 and (stop is None or stop >= 0):
            return "first", start + 1
        if stop is not None and stop < 0 and (start is None or start < 0):
            return "last", -stop
    return None


def _piped(nodes: list[dict]) -> dict:
    """One node applying `nodes` in order (a pipe is associative: (a | b) | c is a | (b | c))."""
    result = nodes[0]
    for node in nodes[1:]:
        result = {"type": "pipe", "children": [result, node]}
    return result


def run(
    expression: str,
    plan_: Plan,
    chunks: Iterable[list[Row]],
    kind: str,
    *,
    limit: int,
    keep: Callable[[Any], bool] | None = None,
    length: int | None = None,
) -> Any:
    """`expression`'s answer over the collection whose records `chunks` yields (those `keep` keeps), run by
    `plan_`: jmespath's answer over the whole collection (module docstring). QUERY_TOO_EXPENSIVE once the
    head's results (or a reduction's kept items) pass `limit` bytes, or the call's time budget is spent.
    `length`: how many records `chunks` yields, when the caller knows it (an Every reduction uses it)."""
    current = budget.active()
    counted = 0
    kept_bytes = 0
    results: list = []
    tail = plan_.tail
    reducer: _Best | _Extreme | _Every | None = None
    head = _Head(expression, plan_.levels)
    if isinstance(plan_.reduce, TopK):
        reducer = _Best(expression, plan_.reduce)
    elif isinstance(plan_.reduce, Extreme):
        reducer = _Extreme(expression, plan_.reduce)
    elif isinstance(plan_.reduce, Every):
        reducer = _Every(plan_.reduce, None if keep is not None else length)
        if reducer.wanted is not None:
            tail = plan_.reduce.rest
    for rows in chunks:
        if keep is not None:
            rows = [row for row in rows if keep(row[2])]
        value: list | dict = [row[2] for row in rows] if kind == "array" else {row[1]: row[2] for row in rows}
        part = head.evaluate(value)
        if part is None:  # a level failed: the answer is a failure, which the next chunks may only lower
            pass
        elif plan_.count:
            counted += len(part)
        elif reducer is not None:
            if reducer.failure is None and part:
                reducer.add(part, {id(row[2]): row[3] for row in rows})
                if reducer.kept_bytes > limit:
                    raise _too_much(limit)
        else:
            kept_bytes += _size(part, {id(row[2]): row[3] for row in rows})
            if kept_bytes > limit:
                raise _too_much(limit)
            results.extend(part)
        if current is not None:
            current.check_time()
    if head.failure is not None:
        raise head.failure
    answer: Any = counted if plan_.count else results
    if reducer is not None:
        if reducer.failure is not None:
            raise reducer.failure
        answer = reducer.items()
    if tail is not None:
        with failures_as_invalid(expression):
            answer = tail(answer)
    return checked_result(expression, answer)


class _Head:
    """The head's levels over each chunk, with the whole list's failure: the first failing item's of the lowest
    level that fails (module docstring)."""

    def __init__(self, expression: str, levels: tuple[Evaluator, ...]) -> None:
        self.expression = expression
        self.levels = levels
        self.failure: ToolError | None = None
        self.failed_at = len(levels)  # the levels from here on are no longer evaluated

    def evaluate(self, value: Any) -> Any:
        """The last level's value over the chunk's `value`; None once a level has failed (in this or an earlier
        chunk). A failure of the first level is raised at once: no later item can come before it."""
        for at, level in enumerate(self.levels[: self.failed_at]):
            try:
                with failures_as_invalid(self.expression):
                    value = level(value)
            except ToolError as error:
                if error.code != ErrorCode.INVALID_QUERY or at == 0:
                    raise
                self.failure, self.failed_at = error, at
                return None
        return None if self.failure is not None else value


class _Every:
    """An Every's kept items by their index in the head's items: those of the slice's range over `length` items,
    or all of them when the length is not known."""

    def __init__(self, shape: Every, length: int | None) -> None:
        self.wanted = None if length is None else range(length)[slice(shape.start, shape.stop, shape.step)]
        self.length = length
        self.kept: list = []  # in the head's order: the range's own order, or its reverse for a negative step
        self.kept_bytes = 0
        self.failure: ToolError | None = None
        self.seen = 0

    def add(self, part: list, stored: dict[int, int]) -> None:
        for item in part:
            if self.wanted is None or self.seen in self.wanted:
                self.kept.append(item)
                self.kept_bytes += _item_size(item, stored)
            self.seen += 1

    def items(self) -> list:
        if self.wanted is None:
            return self.kept
        if self.seen != self.length:  # the caller's count is of the rows it read, in the same snapshot
            raise RuntimeError(f"{self.seen} records read where {self.length} were counted")
        return self.kept if self.wanted.step > 0 else self.kept[::-1]


class _Best:
    """A top-k's kept items: (key, index in the head's items, item, size) of at most k of them."""

    def __init__(self, expression: str, shape: TopK) -> None:
        self.expression = expression
        self.shape = shape
        self.kept: list[tuple[Any, int, Any, int]] = []
        self.kept_bytes = 0
        self.failure: ToolError | None = None
        self.seen = 0
        self.first: Any = None
        self.required: str | None = None  # the first item's key type, which every key must have (sort_by)

    def add(self, part: list, stored: dict[int, int]) -> None:
        candidates: list[tuple[Any, int, Any, int]] = [*self.kept]
        key_of = self.shape.key
        for item in part:
            index = self.seen
            self.seen += 1
            if key_of is None:
                candidates.append((0, index, item, -1))
                continue
            if not self._keyed(item, key_of, candidates, index):
                return
        k = self.shape.k
        if len(candidates) > k:
            candidates = (heapq.nlargest if self.shape.largest else heapq.nsmallest)(k, candidates, key=_RANK)
        self.kept = [entry if entry[3] >= 0 else (*entry[:3], _item_size(entry[2], stored)) for entry in candidates]
        self.kept_bytes = sum(entry[3] for entry in self.kept)

    def _keyed(self, item: Any, key_of: Evaluator, candidates: list, index: int) -> bool:
        """Append the item with its sort key; False (and the failure set) when sort_by fails on it."""
        try:
            key = key_of(item)
        except ToolError:
            raise  # the call's budget, not the expression's failure
        except Exception:
            key, type_of = None, None
        else:
            type_of = TYPES_MAP.get(type(key).__name__, "unknown")
        if self.required is None:
            if type_of not in _SORT_KEY_TYPES:
                self.failure = self._library_failure([item])
                return False
            self.required, self.first = type_of, item
        elif type_of != self.required:
            self.failure = self._library_failure([self.first, item])
            return False
        candidates.append((key, index, item, -1))
        return True

    def _library_failure(self, items: list) -> ToolError:
        """The error the library's sort_by raises over `items`, whose last item fails."""
        assert self.shape.check is not None
        try:
            with failures_as_invalid(self.expression):
                self.shape.check(items)
        except ToolError as error:
            if error.code != ErrorCode.INVALID_QUERY:
                raise
            return error
        raise AssertionError(f"sort_by accepted the item its key refused: {self.expression}")

    def items(self) -> list:
        return [entry[2] for entry in sorted(self.kept, key=itemgetter(1))]


class _Extreme:
    """An extreme's kept item: the best of the head's items so far."""

    def __init__(self, expression: str, shape: Extreme) -> None:
        self.expression = expression
        self.shape = shape
        self.best: list = []  # none or one item
        self.kept_bytes = 0
        self.failure: ToolError | None = None

    def add(self, part: list, stored: dict[int, int]) -> None:
        try:
            with failures_as_invalid(self.expression):
                best = self.shape.function([*self.best, *part])
        except ToolError as error:
            if error.code != ErrorCode.INVALID_QUERY:
                raise
            self.failure = error
            return
        if not self.best or best is not self.best[0]:
            self.best = [best]
            self.kept_bytes = _item_size(best, stored)

    def items(self) -> list:
        return self.best


def _item_size(item: Any, stored: dict[int, int]) -> int:
    size = stored.get(id(item))
    return len(json.dumps(item, default=repr)) if size is None else size


def _size(part: list, stored: dict[int, int]) -> int:
    """Bytes of JSON of the head's results: a record kept whole counts its stored size."""
    total = 0
    others = []
    for item in part:
        size = stored.get(id(item))
        if size is None:
            others.append(item)
        else:
            total += size
    if others:
        # `default`: an expression reference is refused as a result after the tail (query.checked_result).
        total += len(json.dumps(others, default=repr))
    return total


def _too_much(limit: int) -> ToolError:
    return ToolError(
        ErrorCode.QUERY_TOO_EXPENSIVE,
        f"This query keeps more than {limit} bytes of results evaluated in the server "
        "(TOOLHUB_MAX_EVALUATED_BYTES): narrow it with a filter, project fewer fields, or page it.",
        {"limit": limit},
    )
