"""A query evaluated over a collection read in chunks, keeping only what it answers (docs/tables-at-scale.md).

A `query_data` expression over a collection stored as rows that does not run in SQL is evaluated here when it
*decomposes*: its head works record by record over the collection, so that evaluating the head over each chunk
of records and concatenating the parts is the head's value over the whole collection, and what follows it (its
tail) runs once over that concatenation:

- the head: over an array collection, a projection or filter over the records (`[?p]`, `[?p].x`, `[*].x`,
  `[?p].{a: a}`, `@[?p]`) or over their flattening (`[].x`), or the records themselves (`@`); over an object
  collection, a projection of its values (`*.x`, `*[?p]`) or a projection or filter over `values(@)`;
- the tail: whatever is piped after the head (`[?p].x | [0]`, `[?p] | sort_by(@, &x)[:10]`), or a function
  taking the head as its one non-constant argument (`sort_by([?p], &x)`, `length([?p])`);
- `length` applied first to the head counts the head's items, chunk by chunk, without keeping them.

Each chunk goes through the one evaluator (tools_app.data_access.query / jmespath_compiler: the head's node
compiled as the whole expression's is), and the answer is jmespath's over the whole collection, errors
included: the head's only evaluated level works on one record at a time and in the records' order, so the
first record it fails on is the one the whole-list evaluation fails on, and the failure is the same
INVALID_QUERY naming the whole expression (query.failures_as_invalid). A head with two levels that can each
fail (`[?p][].x`: every filter before any projection) is not decomposed.

Bounded by what is kept, not by what is read: the head's results are at most `limit` bytes of JSON (a record
kept whole counts its stored size), else QUERY_TOO_EXPENSIVE; the call's time budget is checked after every
chunk. Anything that does not decompose is left to the caller (None from `plan`).
"""

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from tools_app.data_access import budget
from tools_app.data_access.jmespath_compiler import compile_ast
from tools_app.data_access.query import checked_result, compile_expression, failures_as_invalid
from tools_app.kernel.errors import ErrorCode, ToolError

__all__ = ["Plan", "plan", "run"]

Evaluator = Callable[[Any], Any]
# (position, key, record, size of its JSON) in position order, as tools_app.execution.records reads them.
Row = tuple[int, str | None, Any, int]

_SOURCES = frozenset({"identity", "current"})
_PROJECTIONS = frozenset({"projection", "filter_projection"})
# Arguments that are the same for every record and cannot fail when evaluated.
_CONSTANT_ARGUMENTS = frozenset({"literal", "expref"})


@dataclass(frozen=True)
class Plan:
    """How a decomposable expression runs: `head` over each chunk's value (a list of records, or an object of
    them by key), then `count` (the number of the head's items instead of the items), then `tail` over that."""

    head: Evaluator
    count: bool
    tail: Evaluator | None


def plan(expression: str, kind: str) -> Plan | None:
    """The plan of `expression` over a collection of `kind` ("array" or "object"), or None when it does not
    decompose. The expression is compiled (and refused as the evaluator refuses it) first."""
    compile_expression(expression)
    return _plan(expression, kind)


@lru_cache(maxsize=1024)
def _plan(expression: str, kind: str) -> Plan | None:
    split = _split(compile_expression(expression).parsed, kind)
    if split is None:
        return None
    head, tail = split
    count = bool(tail) and _is_length_of_current(tail[0])
    if count:
        tail = tail[1:]
    if not count and head["type"] in _SOURCES:
        return None  # the records themselves, then a tail: nothing to gain over gathering them
    return Plan(head=compile_ast(head), count=count, tail=compile_ast(_piped(tail)) if tail else None)


def _split(node: dict, kind: str) -> tuple[dict, list[dict]] | None:
    """(head, tail nodes in the order they apply) of `node`, or None."""
    if _is_head(node, kind):
        return node, []
    kind_of = node["type"]
    if kind_of == "pipe":
        inner = _split(node["children"][0], kind)
        return None if inner is None else (inner[0], [*inner[1], node["children"][1]])
    if kind_of == "function_expression":
        arguments = node["children"]
        varying = [index for index, argument in enumerate(arguments) if argument["type"] not in _CONSTANT_ARGUMENTS]
        if len(varying) != 1:
            return None
        inner = _split(arguments[varying[0]], kind)
        if inner is None:
            return None
        over_current = [*arguments]
        over_current[varying[0]] = {"type": "current", "children": []}
        return inner[0], [*inner[1], {**node, "children": over_current}]
    return None


def _is_head(node: dict, kind: str) -> bool:
    kind_of = node["type"]
    if kind == "array":
        if kind_of in _SOURCES:
            return True
        return kind_of in _PROJECTIONS and _is_array_source(node["children"][0])
    if kind_of == "value_projection":
        return node["children"][0]["type"] in _SOURCES
    return kind_of in _PROJECTIONS and _is_values_of_current(node["children"][0])


def _is_array_source(node: dict) -> bool:
    """The records, or their flattening (which fails on nothing): evaluated record by record."""
    while node["type"] == "flatten":
        node = node["children"][0]
    return node["type"] in _SOURCES


def _is_values_of_current(node: dict) -> bool:
    return (
        node["type"] == "function_expression"
        and node.get("value") == "values"
        and len(node["children"]) == 1
        and node["children"][0]["type"] in _SOURCES
    )


def _is_length_of_current(node: dict) -> bool:
    return (
        node["type"] == "function_expression"
        and node.get("value") == "length"
        and len(node["children"]) == 1
        and node["children"][0]["type"] in _SOURCES
    )


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
) -> Any:
    """`expression`'s answer over the collection whose records `chunks` yields (those `keep` keeps), run by
    `plan_`: jmespath's answer over the whole collection (module docstring). QUERY_TOO_EXPENSIVE once the
    head's results pass `limit` bytes, or the call's time budget is spent."""
    current = budget.active()
    counted = 0
    kept_bytes = 0
    results: list = []
    for rows in chunks:
        if keep is not None:
            rows = [row for row in rows if keep(row[2])]
        value: list | dict = [row[2] for row in rows] if kind == "array" else {row[1]: row[2] for row in rows}
        with failures_as_invalid(expression):
            part = plan_.head(value)
        if plan_.count:
            counted += len(part)
        else:
            kept_bytes += _size(part, {id(row[2]): row[3] for row in rows})
            if kept_bytes > limit:
                raise _too_much(limit)
            results.extend(part)
        if current is not None:
            current.check_time()
    answer: Any = counted if plan_.count else results
    if plan_.tail is not None:
        with failures_as_invalid(expression):
            answer = plan_.tail(answer)
    return checked_result(expression, answer)


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
