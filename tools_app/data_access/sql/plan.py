"""A parsed JMESPath expression over a collection of records, as an engine-independent plan.

The plan says what SQL must compute; tools_app.data_access.sql.render writes it for one engine. Building it
refuses (NotCompilable) every shape whose exact jmespath 1.1.0 result it cannot guarantee; the caller then
evaluates the expression in Python over the records.

The collection is the list of records in order (root "array"), or an object of records by key (root
"object", where only `values(@)`, `*`, `keys(@)` and `length(@)` reach the records).

Semantics kept (jmespath/visitor.py and functions.py, 1.1.0):
- a filter keeps an element when its condition is truthy ('' [] {} false null are false) and, with no
  projection after it, when the element is not null; a projection drops null results;
- `==` is jmespath's _equals (deep equality, 1 == 1.0, but 0/1 never equal false/true at the top level);
  `<` `<=` `>` `>=` compare two numbers or two strings, give null (false) for other types, and raise
  TypeError for a number against a string;
- `!x` is true exactly when x is false by the truthiness rule (numbers are true);
- `a && b` / `a || b` evaluate b only when a is truthy / falsy (errors in b count only then);
- contains/starts_with/ends_with, sort_by/min_by/max_by, sum/avg/min/max raise on the types the library
  refuses. Where an error is possible, the plan carries the condition under which it happens; a query whose
  data meets one is answered by the Python evaluator, which raises the library's own error.
"""

from dataclasses import dataclass
from typing import Any

from jmespath import visitor

__all__ = [
    "And",
    "Collect",
    "Compare",
    "Const",
    "Contains",
    "Count",
    "ElemPath",
    "ElemSelect",
    "Fold",
    "Keys",
    "Lit",
    "ListPlan",
    "Map",
    "Not",
    "NotCompilable",
    "Or",
    "Path",
    "PathRef",
    "Pick",
    "Pred",
    "Prefix",
    "Reverse",
    "Scan",
    "Slice",
    "Sort",
    "Truthy",
    "ValuePlan",
    "Where",
    "build_plan",
    "FieldTest",
    "field_tests",
    "filtered_fields",
]

Step = tuple[str, Any]  # ("field", name) or ("index", int)
Path = tuple[Step, ...]


class NotCompilable(Exception):
    """The expression (or a part of it) has no SQL form whose answer is certain to be jmespath's."""


#
# Operands and predicates (paths are relative to the stored record)
#


@dataclass(frozen=True)
class PathRef:
    path: Path


@dataclass(frozen=True)
class Lit:
    value: Any


Operand = PathRef | Lit


@dataclass(frozen=True)
class Const:
    value: bool


@dataclass(frozen=True)
class Truthy:
    path: Path


@dataclass(frozen=True)
class Compare:
    op: str  # eq ne lt lte gt gte
    left: Operand
    right: Operand


@dataclass(frozen=True)
class Contains:
    subject: PathRef
    search: Lit


@dataclass(frozen=True)
class Prefix:
    ends: bool  # ends_with, else starts_with
    text: Operand
    affix: Operand


@dataclass(frozen=True)
class And:
    left: "Pred"
    right: "Pred"


@dataclass(frozen=True)
class Or:
    left: "Pred"
    right: "Pred"


@dataclass(frozen=True)
class Not:
    inner: "Pred"


Pred = Const | Truthy | Compare | Contains | Prefix | And | Or | Not


#
# Elements of a list: the value at a path of the record, or a multi-select of such values
#


@dataclass(frozen=True)
class ElemPath:
    path: Path


@dataclass(frozen=True)
class ElemSelect:
    base: Path
    keys: tuple[str, ...] | None  # a multi-select hash's keys, None for a multi-select list
    paths: tuple[Path, ...]  # relative to base


Elem = ElemPath | ElemSelect


#
# Lists (in order) and the values computed from them
#


@dataclass(frozen=True)
class Scan:
    """Every record of the collection, in order (null records included)."""

    elem: Elem = ElemPath(())


@dataclass(frozen=True)
class Where:
    source: "ListPlan"
    pred: Pred

    @property
    def elem(self) -> Elem:
        return self.source.elem


@dataclass(frozen=True)
class Map:
    """Each element replaced by `elem`; elements whose new value is null are dropped (a projection), or kept
    (`keep_nulls`: map(&expr, list), whose list is as long as its argument)."""

    source: "ListPlan"
    elem: Elem
    keep_nulls: bool = False


@dataclass(frozen=True)
class Sort:
    source: "ListPlan"
    key: Path  # relative to the record

    @property
    def elem(self) -> Elem:
        return self.source.elem


@dataclass(frozen=True)
class Reverse:
    """The list in the reverse order (reverse(list))."""

    source: "ListPlan"

    @property
    def elem(self) -> Elem:
        return self.source.elem


@dataclass(frozen=True)
class Slice:
    source: "ListPlan"
    start: int | None
    stop: int | None
    step: int

    @property
    def elem(self) -> Elem:
        return self.source.elem


ListPlan = Scan | Where | Map | Sort | Reverse | Slice


@dataclass(frozen=True)
class Collect:
    source: ListPlan


@dataclass(frozen=True)
class Count:
    source: ListPlan


@dataclass(frozen=True)
class Fold:
    source: ListPlan
    function: str  # sum avg min max


@dataclass(frozen=True)
class Pick:
    """One element: at an index, or the first with the greatest/least key (max_by/min_by)."""

    source: ListPlan
    how: str  # index max_by min_by
    index: int = 0
    key: Path = ()
    elem: Elem | None = None  # what is returned of it (default: the list's element)


@dataclass(frozen=True)
class Keys:
    source: ListPlan


ValuePlan = Collect | Count | Fold | Pick | Keys


#
# Building
#


@dataclass(frozen=True)
class _Current:
    plan: ListPlan
    is_object: bool  # the root object of records (only values(@), *, keys(@), length(@) reach them)


def build_plan(parsed: dict, *, root: str = "array") -> ValuePlan:
    """The plan of `parsed` (jmespath's AST) applied to the collection; NotCompilable when it has none."""
    if root not in ("array", "object"):
        raise ValueError(f"root must be 'array' or 'object', not {root!r}")
    return _value(parsed, _Current(Scan(), root == "object"))


def _refuse(node: Any, why: str = "") -> NotCompilable:
    kind = node.get("type") if isinstance(node, dict) else node
    return NotCompilable(f"{kind}: {why}" if why else str(kind))


def _value(node: dict, current: _Current) -> ValuePlan:
    kind = node["type"]
    if kind == "function_expression":
        return _function_value(node, current)
    if kind == "index_expression" and node["children"][1]["type"] == "index":
        source = _list(node["children"][0], current)
        elem: Elem = source.elem
        for step in node["children"][2:]:  # `[0][1]`: the steps after the first apply to the element picked
            if step["type"] != "index" or not isinstance(elem, ElemPath):
                raise _refuse(node)
            elem = ElemPath(elem.path + (("index", step["value"]),))
        return Pick(source, "index", index=node["children"][1]["value"], elem=elem)
    if kind == "subexpression":
        first, rest = node["children"][0], node["children"][1:]
        picked = _value(first, current)
        if not isinstance(picked, Pick) or not isinstance(picked.elem, ElemPath):
            raise _refuse(node, "only a picked element has fields")
        elem = picked.elem
        for child in rest:
            if not isinstance(elem, ElemPath):
                raise _refuse(node)
            elem = _elem(child, elem.path)
        return Pick(picked.source, picked.how, picked.index, picked.key, elem)
    if kind == "pipe":
        left, right = node["children"]
        return _value(right, _Current(_list(left, current), False))
    return Collect(_list(node, current))


def _function_value(node: dict, current: _Current) -> ValuePlan:
    name, arguments = node["value"], node["children"]
    if name == "length" and len(arguments) == 1:
        argument = arguments[0]
        if current.is_object and argument["type"] in ("current", "identity"):
            return Count(current.plan)  # the number of keys: one per record
        return Count(_list(argument, current))
    if name in ("sum", "avg", "min", "max") and len(arguments) == 1:
        source = _list(arguments[0], current)
        if not isinstance(source.elem, ElemPath):
            raise _refuse(node, "a multi-select is no number or string")
        return Fold(source, name)
    if name in ("max_by", "min_by") and len(arguments) == 2:
        source = _list(arguments[0], current)
        if not isinstance(source.elem, ElemPath):
            raise _refuse(node, "keys of a multi-select")
        return Pick(source, name, key=source.elem.path + _expref_path(arguments[1]), elem=source.elem)
    if name == "keys" and len(arguments) == 1 and current.is_object:
        if arguments[0]["type"] in ("current", "identity"):
            return Keys(current.plan)
    return Collect(_list(node, current))


def _expref_path(node: dict) -> Path:
    if node["type"] != "expref":
        raise _refuse(node, "expected &expression")
    return _path(node["children"][0])


def _list(node: dict, current: _Current) -> ListPlan:
    """The list `node` evaluates to, from the current list."""
    kind = node["type"]
    if kind in ("current", "identity"):
        if current.is_object:
            raise _refuse(node, "the object of records itself")
        return current.plan
    if kind == "filter_projection":
        left, right, condition = node["children"]
        base = _list(left, current)
        if not isinstance(base.elem, ElemPath):
            raise _refuse(node, "a filter over multi-selects")
        return _project(Where(base, _pred(condition, base.elem.path)), right)
    if kind == "projection":
        left, right = node["children"]
        if left["type"] == "index_expression" and [child["type"] for child in left["children"][1:]] == ["slice"]:
            base = _slice(_list(left["children"][0], current), left["children"][1])
        else:
            base = _list(left, current)
        return _project(base, right)
    if kind == "value_projection":
        left, right = node["children"]
        if not (current.is_object and left["type"] in ("current", "identity")):
            raise _refuse(node, "* applies to the object of records only")
        return _project(current.plan, right)
    if kind == "function_expression":
        name, arguments = node["value"], node["children"]
        if name == "sort_by" and len(arguments) == 2:
            base = _list(arguments[0], current)
            if not isinstance(base.elem, ElemPath):
                raise _refuse(node, "sort_by over multi-selects")
            return Sort(base, base.elem.path + _expref_path(arguments[1]))
        if name == "sort" and len(arguments) == 1:
            # sort(list) is sort_by(list, &@): both sort stably by the items' values, and both raise on the same
            # lists (an item, or key, that is no number or string, or not of the first one's type), each with its
            # own message, which the evaluator gives when the statement flags the error.
            base = _list(arguments[0], current)
            if not isinstance(base.elem, ElemPath):
                raise _refuse(node, "sort over multi-selects")
            return Sort(base, base.elem.path)
        if name == "reverse" and len(arguments) == 1:
            return Reverse(_list(arguments[0], current))
        if name == "map" and len(arguments) == 2:
            # map(&expr, list): expr over each element, nulls kept (a multi-select over a null element is null,
            # which a row's multi-select columns cannot say: refused).
            base = _list(arguments[1], current)
            if not isinstance(base.elem, ElemPath):
                raise _refuse(node, "map over multi-selects")
            return Map(base, ElemPath(base.elem.path + _expref_path(arguments[0])), keep_nulls=True)
        if name == "values" and len(arguments) == 1 and current.is_object:
            if arguments[0]["type"] in ("current", "identity"):
                return current.plan
        raise _refuse(node, f"function {name}")
    if kind == "pipe":
        left, right = node["children"]
        return _list(right, _Current(_list(left, current), False))
    raise _refuse(node)


def _slice(base: ListPlan, node: dict) -> ListPlan:
    start, stop, step = node["children"]
    step = 1 if step is None else step
    if step <= 0:
        raise _refuse(node, "a zero or negative step")
    return Slice(base, start, stop, step)


def _project(base: ListPlan, right: dict) -> ListPlan:
    if right["type"] == "identity":
        return Map(base, base.elem)  # drops the null elements
    if not isinstance(base.elem, ElemPath):
        raise _refuse(right, "a projection over multi-selects")
    return Map(base, _elem(right, base.elem.path))


def _elem(node: dict, prefix: Path) -> Elem:
    kind = node["type"]
    if kind in ("multi_select_dict", "multi_select_list"):
        keys = tuple(child["value"] for child in node["children"]) if kind == "multi_select_dict" else None
        values = [child["children"][0] if kind == "multi_select_dict" else child for child in node["children"]]
        return ElemSelect(prefix, keys, tuple(_path(value) for value in values))
    if kind == "subexpression" and node["children"][-1]["type"] in ("multi_select_dict", "multi_select_list"):
        *head, last = node["children"]
        base = prefix
        for child in head:
            base = base + _path(child)
        return _elem(last, base)
    return ElemPath(prefix + _path(node))


def _path(node: dict) -> Path:
    """The path of a chain of fields and indexes (`a.b[0]`, `@`); NotCompilable for anything else."""
    kind = node["type"]
    if kind in ("current", "identity"):
        return ()
    if kind == "field":
        return (("field", node["value"]),)
    if kind == "subexpression":
        path: Path = ()
        for child in node["children"]:
            path = path + _path(child)
        return path
    if kind == "index_expression" and all(child["type"] == "index" for child in node["children"][1:]):
        return _path(node["children"][0]) + tuple(("index", child["value"]) for child in node["children"][1:])
    raise _refuse(node, "not a path")


_INTERPRETER = visitor.TreeInterpreter()


def _is_true(value: Any) -> bool:
    return not (value == "" or value == [] or value == {} or value is None or value is False)


def _pred(node: dict, prefix: Path) -> Pred:
    """The condition `node` (truthiness of its value) over the element at `prefix` of each record."""
    kind = node["type"]
    children = node.get("children") or []
    if kind == "and_expression":
        return _and(_pred(children[0], prefix), _pred(children[1], prefix))
    if kind == "or_expression":
        return _or(_pred(children[0], prefix), _pred(children[1], prefix))
    if kind == "not_expression":
        inner = _pred(children[0], prefix)
        return Const(not inner.value) if isinstance(inner, Const) else Not(inner)
    if kind == "literal":
        return Const(_is_true(node["value"]))
    if kind == "comparator":
        left, right = (_operand(child, prefix) for child in children)
        if isinstance(left, Lit) and isinstance(right, Lit):
            try:
                return Const(_is_true(_INTERPRETER.visit(node, None)))  # type: ignore[arg-type]
            except Exception as exc:  # it raises for every element: left to the evaluator
                raise _refuse(node, "a comparison that always raises") from exc
        return Compare(node["value"], left, right)
    if kind == "function_expression":
        return _function_pred(node, prefix)
    return Truthy(prefix + _path(node))


def _and(left: Pred, right: Pred) -> Pred:
    if isinstance(left, Const):
        return right if left.value else left
    return And(left, right)


def _or(left: Pred, right: Pred) -> Pred:
    if isinstance(left, Const):
        return left if left.value else right
    return Or(left, right)


def _operand(node: dict, prefix: Path) -> Operand:
    if node["type"] == "literal":
        return Lit(node["value"])
    return PathRef(prefix + _path(node))


def _function_pred(node: dict, prefix: Path) -> Pred:
    name, arguments = node["value"], node["children"]
    if len(arguments) != 2 or name not in ("contains", "starts_with", "ends_with"):
        raise _refuse(node, f"function {name} in a filter")
    first, second = (_operand(argument, prefix) for argument in arguments)
    if name == "contains":
        if not isinstance(first, PathRef) or not isinstance(second, Lit):
            raise _refuse(node, "contains(path, literal) only")
        if isinstance(second.value, list | dict):
            raise _refuse(node, "contains of an array or object")
        return Contains(first, second)
    if isinstance(first, Lit) and isinstance(second, Lit):
        raise _refuse(node, "a constant call")
    return Prefix(name == "ends_with", first, second)


#
# What a plan reads
#


def filtered_fields(plan: ValuePlan) -> frozenset[str]:
    """The record fields whose values decide which records a plan keeps or in what order (filter conditions,
    sort_by / max_by / min_by keys, min / max of a field): the fields an index on `data`'s top-level field
    (tools_app.data_access.sql.indexes) can serve. Paths below a field (`a.b`) and what is only projected are
    not listed: no index of a declared field serves them."""
    found: set[str] = set()
    _list_fields(plan.source, found)
    if isinstance(plan, Pick) and plan.how != "index":
        _path_field(plan.key, found)
    if isinstance(plan, Fold) and plan.function in ("min", "max") and isinstance(plan.source.elem, ElemPath):
        _path_field(plan.source.elem.path, found)
    return frozenset(found)


def _list_fields(plan: ListPlan, found: set[str]) -> None:
    if isinstance(plan, Scan):
        return
    if isinstance(plan, Where):
        _pred_fields(plan.pred, found)
    elif isinstance(plan, Sort):
        _path_field(plan.key, found)
    _list_fields(plan.source, found)


def _pred_fields(pred: Pred, found: set[str]) -> None:
    if isinstance(pred, And | Or):
        _pred_fields(pred.left, found)
        _pred_fields(pred.right, found)
    elif isinstance(pred, Not):
        _pred_fields(pred.inner, found)
    elif isinstance(pred, Truthy):
        _path_field(pred.path, found)
    elif isinstance(pred, Compare):
        for operand in (pred.left, pred.right):
            if isinstance(operand, PathRef):
                _path_field(operand.path, found)
    elif isinstance(pred, Contains):
        _path_field(pred.subject.path, found)
    elif isinstance(pred, Prefix):
        for operand in (pred.text, pred.affix):
            if isinstance(operand, PathRef):
                _path_field(operand.path, found)


def _path_field(path: Path, found: set[str]) -> None:
    if len(path) == 1 and path[0][0] == "field":
        found.add(path[0][1])


@dataclass(frozen=True)
class FieldTest:
    """`<field> <op> <literal>` (op: eq lt lte gt gte; the literal a number or a string): a test an index of
    the record field (tools_app.data_access.sql.indexes) can serve."""

    field: str
    op: str
    value: int | float | str


def field_tests(plan: ValuePlan) -> tuple[FieldTest, ...]:
    """The tests of a record field against a literal that every record the plan reads passes: the conjuncts
    (`&&`) of the filters over the collection's records themselves (`[?a][?b]` too), which the renderer puts in
    the WHERE of the records table. A filter over the result of a sort or a slice is not listed."""
    chain: list[Where] = []
    source = plan.source
    while not isinstance(source, Scan):
        if isinstance(source, Where):
            chain.append(source)
        elif not isinstance(source, Map):  # a projection keeps the rows (its nulls dropped): filters below count
            chain = []
        source = source.source
    tests: list[FieldTest] = []
    for where in chain:
        _conjunct_tests(where.pred, tests)
    return tuple(tests)


_FLIPPED = {"eq": "eq", "lt": "gt", "gt": "lt", "lte": "gte", "gte": "lte"}


def _conjunct_tests(pred: Pred, found: list[FieldTest]) -> None:
    if isinstance(pred, And):
        _conjunct_tests(pred.left, found)
        _conjunct_tests(pred.right, found)
        return
    if not isinstance(pred, Compare) or pred.op not in _FLIPPED:
        return
    op, left, right = pred.op, pred.left, pred.right
    if isinstance(left, Lit):
        op, left, right = _FLIPPED[op], right, left
    if not (isinstance(left, PathRef) and isinstance(right, Lit)):
        return
    value = right.value
    if len(left.path) == 1 and left.path[0][0] == "field" and type(value) in (int, float, str):
        found.append(FieldTest(left.path[0][1], op, value))
