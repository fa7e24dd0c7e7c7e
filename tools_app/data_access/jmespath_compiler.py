"""Compile a JMESPath AST into nested Python closures.

jmespath's TreeInterpreter dispatches through a dict lookup and a method call for every node and
every element: a filter over 100,000 records takes ~200 ms. The closures built here do the same
work with the dispatch decided once, at compile time, and the common shapes (a field compared
with a literal, chains of fields, filters over records) fused into list comprehensions, which
brings that query down to a few tens of milliseconds.

The semantics are jmespath 1.1.0's TreeInterpreter, reproduced exactly, quirks included
(jmespath/visitor.py): ordering comparators accept numbers AND strings and yield null for other
types; number/string mixes raise TypeError just as the interpreter does; `==` treats 0/1 and
false/true as different only at the top level; `!` uses Python truthiness except that 0 is true;
projections drop nulls. Functions run through jmespath's own Functions class, so argument checks
and their errors are the library's. A node type this module does not know is evaluated by the
interpreter for that subtree, so a newer parser never produces wrong results here, only slower ones.

Budgets (tools_app.data_access.budget): when a budget is active on the thread, every closure
that builds or walks a collection charges its size (projections, filters, flatten, slices, multi-selects,
the collection functions), and what a C function would walk whole (json.dumps in to_string, str.join,
deep equality in `==` and contains) is sized first, shared references counted once per reference, so a
query that only looks cheap is stopped before the walk. With no budget active (the compliance suite, a
direct `search`) nothing is checked; one thread-local read per charged closure is all a budget costs.
"""

import operator
from collections.abc import Callable
from numbers import Number
from typing import Any, cast

# jmespath's internals, used so that results and errors are the library's own rather than a copy's:
# visitor._equals and visitor._is_comparable (the comparator semantics), visitor._Expression (the
# class functions check exprefs by), Functions.FUNCTION_TABLE and functions.REVERSE_TYPES_MAP (the
# signatures to type-check arguments with). None of them is public API, so they can change in any
# release: jmespath is pinned to 1.1.0 in requirements.txt, and
# tools_app/tests/data_access/test_jmespath_compliance.py fails on any other installed version.
from jmespath import functions as jmespath_functions
from jmespath import visitor
from jmespath.parser import Parser

from tools_app.data_access.budget import QueryBudget, measure
from tools_app.data_access.budget import _active as _budget_state

__all__ = ["CompiledExpression", "compile_ast", "compile_query"]

Evaluator = Callable[[Any], Any]

_FUNCTIONS = jmespath_functions.Functions()
_INTERPRETER = visitor.TreeInterpreter()
# Private helpers of jmespath's interpreter; its type stubs leave them out.
_equals = visitor._equals  # type: ignore[attr-defined]
_is_comparable = visitor._is_comparable  # type: ignore[attr-defined]
_ORDERING = {"lt": operator.lt, "gt": operator.gt, "lte": operator.le, "gte": operator.ge}
# Exact types whose ordering never raises against a number: the fast path of `total > `500``.
_PLAIN_NUMBERS = (int, float)


def _is_false(value: Any) -> bool:
    # Same equality checks as TreeInterpreter._is_false (0 is true; only '', [], {}, null, false are false).
    return value == "" or value == [] or value == {} or value is None or value is False


def _is_actual_number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, Number)


class CompiledExpression:
    """A compiled JMESPath expression: `.search(data)` returns what `jmespath.search` would."""

    __slots__ = ("expression", "parsed", "_evaluate")

    def __init__(self, expression: str, parsed: dict) -> None:
        self.expression = expression
        self.parsed = parsed
        self._evaluate = compile_ast(parsed)

    def search(self, value: Any) -> Any:
        return self._evaluate(value)

    def __repr__(self) -> str:
        return f"CompiledExpression({self.expression!r})"


def compile_query(expression: str) -> CompiledExpression:
    """Parse with jmespath's parser (its ParseError propagates), then compile the tree."""
    # The parser's nodes are plain dicts (the stubs type them as a TypedDict, which is no `dict`).
    return CompiledExpression(expression, cast(dict, Parser().parse(expression).parsed))


class _ExpressionAdapter:
    """What jmespath's `_Expression.visit(node, value)` calls: the compiled closure of that node."""

    __slots__ = ("_evaluate",)

    def __init__(self, evaluate: Evaluator) -> None:
        self._evaluate = evaluate

    def visit(self, node: dict, value: Any) -> Any:
        return self._evaluate(value)


def compile_ast(node: dict) -> Evaluator:
    """A function value -> result for one AST node (the dict tree TreeInterpreter walks)."""
    builder = _BUILDERS.get(node["type"])
    if builder is None:
        return _interpreted(node)
    return builder(node)


def compile_predicate(node: dict) -> Callable[[Any], bool]:
    """A function value -> bool equal to jmespath's truthiness of the node's value (filters, and/or)."""
    kind = node["type"]
    if kind == "comparator":
        return _comparator_predicate(node)
    if kind == "and_expression":
        left, right = (compile_predicate(child) for child in node["children"])
        return lambda value: left(value) and right(value)
    if kind == "or_expression":
        left, right = (compile_predicate(child) for child in node["children"])
        return lambda value: left(value) or right(value)
    if kind == "not_expression":
        # not_expression always yields a bool, so its value is its truthiness.
        return compile_ast(node)
    evaluate = compile_ast(node)

    def truthy(value: Any) -> bool:
        result = evaluate(value)
        if result is True:
            return True
        if result is False or result is None:
            return False
        return not (result == "" or result == [] or result == {})

    return truthy


def _interpreted(node: dict) -> Evaluator:
    return lambda value: _INTERPRETER.visit(cast(Any, node), value)


#
# Leaves
#


def _identity(node: dict) -> Evaluator:
    return _identity_function


def _identity_function(value: Any) -> Any:
    return value


def _literal(node: dict) -> Evaluator:
    literal = node["value"]
    return lambda value: literal


def _field(node: dict) -> Evaluator:
    return _field_getter(node["value"])


def _field_getter(name: str) -> Evaluator:
    def field(value: Any) -> Any:
        try:
            return value.get(name)
        except AttributeError:
            return None

    return field


def _index(node: dict) -> Evaluator:
    position = node["value"]

    def index(value: Any) -> Any:
        if not isinstance(value, list):
            return None
        try:
            return value[position]
        except IndexError:
            return None

    return index


def _slice(node: dict) -> Evaluator:
    start, stop, step = node["children"]

    def slice_(value: Any) -> Any:
        if not isinstance(value, list):
            return None
        # slice() is built per call like the interpreter's, so a zero step raises the same ValueError.
        result = value[slice(start, stop, step)]
        budget = _budget_state.budget
        if budget is not None:
            budget.charge(len(result) + 1)
        return result

    return slice_


def _expref(node: dict) -> Evaluator:
    # jmespath's functions type-check exprefs by class name ('_Expression'), so the library's own
    # class carries the compiled closure through an adapter standing in for the interpreter.
    # A new object per evaluation, as in the interpreter (two exprefs never compare equal).
    child = node["children"][0]
    adapter = _ExpressionAdapter(compile_ast(child))
    return lambda value: visitor._Expression(child, adapter)  # type: ignore[arg-type]  # stands in for it


#
# Chains
#


def _chain(node: dict) -> Evaluator:
    """subexpression, index_expression and pipe: each child's result feeds the next."""
    children = node["children"]
    if all(child["type"] == "field" for child in children):
        names = tuple(child["value"] for child in children)

        def fields(value: Any) -> Any:
            for name in names:
                try:
                    value = value.get(name)
                except AttributeError:
                    return None
            return value

        return fields
    steps = tuple(compile_ast(child) for child in children)
    if len(steps) == 2:
        first, second = steps
        return lambda value: second(first(value))

    def chain(value: Any) -> Any:
        for step in steps:
            value = step(value)
        return value

    return chain


def _key_val_pair(node: dict) -> Evaluator:
    return compile_ast(node["children"][0])


def _current(node: dict) -> Evaluator:
    return _identity_function


#
# Projections
#


def _projection(node: dict) -> Evaluator:
    left = compile_ast(node["children"][0])
    right_node = node["children"][1]
    if right_node["type"] == "identity":

        def project_identity(value: Any) -> Any:
            base = left(value)
            if not isinstance(base, list):
                return None
            budget = _budget_state.budget
            if budget is not None:
                budget.charge(len(base) + 1)
            return [element for element in base if element is not None]

        return project_identity
    right = compile_ast(right_node)

    def project(value: Any) -> Any:
        base = left(value)
        if not isinstance(base, list):
            return None
        budget = _budget_state.budget
        if budget is not None:
            budget.charge(len(base) + 1)
        return [current for element in base if (current := right(element)) is not None]

    return project


def _value_projection(node: dict) -> Evaluator:
    left = compile_ast(node["children"][0])
    right = compile_ast(node["children"][1])

    def project_values(value: Any) -> Any:
        base = left(value)
        try:
            base = base.values()
        except AttributeError:
            return None
        budget = _budget_state.budget
        if budget is not None:
            budget.charge(len(base) + 1)
        return [current for element in base if (current := right(element)) is not None]

    return project_values


def _filter_projection(node: dict) -> Evaluator:
    left_node, right_node, condition_node = node["children"]
    left = compile_ast(left_node)
    keep = compile_predicate(condition_node)
    if right_node["type"] == "identity":

        def filter_identity(value: Any) -> Any:
            base = left(value)
            if not isinstance(base, list):
                return None
            budget = _budget_state.budget
            if budget is not None:
                budget.charge(len(base) + 1)
            return [element for element in base if keep(element) and element is not None]

        return filter_identity
    right = compile_ast(right_node)

    def filter_(value: Any) -> Any:
        base = left(value)
        if not isinstance(base, list):
            return None
        budget = _budget_state.budget
        if budget is not None:
            budget.charge(len(base) + 1)
        return [current for element in base if keep(element) and (current := right(element)) is not None]

    return filter_


def _flatten(node: dict) -> Evaluator:
    inner = compile_ast(node["children"][0])

    def flatten(value: Any) -> Any:
        base = inner(value)
        if not isinstance(base, list):
            return None
        budget = _budget_state.budget
        merged: list = []
        for element in base:
            if isinstance(element, list):
                if budget is not None and len(element) > _BIG:
                    budget.charge(len(element))  # before a copy that one list of shared references can make huge
                merged.extend(element)
            else:
                merged.append(element)
        if budget is not None:
            budget.charge(len(merged) + 1)
        return merged

    return flatten


#
# Multi-select
#


def _multi_select_dict(node: dict) -> Evaluator:
    pairs = tuple((child["value"], compile_ast(child)) for child in node["children"])
    width = len(pairs) + 1

    def multi_select_dict(value: Any) -> Any:
        if value is None:
            return None
        budget = _budget_state.budget
        if budget is not None:
            budget.charge(width)
        return {key: evaluate(value) for key, evaluate in pairs}

    return multi_select_dict


def _multi_select_list(node: dict) -> Evaluator:
    items = tuple(compile_ast(child) for child in node["children"])
    width = len(items) + 1

    def multi_select_list(value: Any) -> Any:
        if value is None:
            return None
        budget = _budget_state.budget
        if budget is not None:
            budget.charge(width)
        return [evaluate(value) for evaluate in items]

    return multi_select_list


#
# Logic and comparison
#


def _or(node: dict) -> Evaluator:
    left, right = (compile_ast(child) for child in node["children"])

    def or_(value: Any) -> Any:
        matched = left(value)
        if _is_false(matched):
            matched = right(value)
        return matched

    return or_


def _and(node: dict) -> Evaluator:
    left, right = (compile_ast(child) for child in node["children"])

    def and_(value: Any) -> Any:
        matched = left(value)
        if _is_false(matched):
            return matched
        return right(value)

    return and_


def _not(node: dict) -> Evaluator:
    inner = compile_ast(node["children"][0])

    def not_(value: Any) -> bool:
        result = inner(value)
        if _is_actual_number(result) and result == 0:
            return False  # !0 is false: 0 is a true value in JMESPath
        return not result

    return not_


def _literal_of(node: dict) -> tuple[bool, Any]:
    return (True, node["value"]) if node["type"] == "literal" else (False, None)


def _single_field(node: dict) -> str | None:
    """The name when `node` is a plain field (`status`), the commonest operand of a filter."""
    return node["value"] if node["type"] == "field" else None


def _equality_with_literal(literal: Any) -> Callable[[Any], bool]:
    """x == literal under jmespath's _equals, specialised on the literal's type.

    _equals differs from == only when one side is the number 0 or 1 and the other a boolean.
    """
    if isinstance(literal, bool):
        # Only the same boolean is equal: 0/1 are not, and no other value == True/False.
        return lambda other: other is literal
    if _is_actual_number(literal):
        if literal in (0, 1):
            return lambda other: other == literal and not isinstance(other, bool)
        return lambda other: other == literal
    if isinstance(literal, str | list | dict) or literal is None:
        return lambda other: other == literal
    return lambda other: _equals(other, literal)


def _field_equals_literal(name: str, literal: Any) -> Callable[[Any], bool]:
    """`name == literal` fused into one closure: the filter of a 100k-record query runs it per record."""
    test = _equality_with_literal(literal)
    missing = test(None)  # what a non-object (no such field) compares as
    if isinstance(literal, str) or literal is None or (_is_actual_number(literal) and literal not in (0, 1)):

        def equals(value: Any) -> bool:
            try:
                return value.get(name) == literal
            except AttributeError:
                return missing

        return equals

    def equals_special(value: Any) -> bool:
        try:
            return test(value.get(name))
        except AttributeError:
            return missing

    return equals_special


def _comparator(node: dict) -> Evaluator:
    name = node["value"]
    left_node, right_node = node["children"]
    if name in ("eq", "ne"):
        equal = _equality_test(left_node, right_node)
        if name == "eq":
            return equal
        return lambda value: not equal(value)
    return _ordering(name, left_node, right_node, predicate=False)


def _equality_test(left_node: dict, right_node: dict) -> Callable[[Any], bool]:
    left_is_literal, left_literal = _literal_of(left_node)
    right_is_literal, right_literal = _literal_of(right_node)
    if left_is_literal != right_is_literal:
        # _equals is symmetric, so the literal may go on either side.
        operand_node, literal = (left_node, right_literal) if right_is_literal else (right_node, left_literal)
        field = _single_field(operand_node)
        if field is not None:
            return _field_equals_literal(field, literal)
        operand, test = compile_ast(operand_node), _equality_with_literal(literal)
        return lambda value: test(operand(value))
    left, right = compile_ast(left_node), compile_ast(right_node)

    def equals(value: Any) -> bool:
        first, second = left(value), right(value)
        if type(first) in _CONTAINERS and type(second) in _CONTAINERS:
            budget = _budget_state.budget
            if budget is not None:  # a deep comparison in C walks both: sized first
                measure(first, budget, "an operand of ==")
                measure(second, budget, "an operand of ==")
        return _equals(first, second)

    return equals


def _ordering(name: str, left_node: dict, right_node: dict, *, predicate: bool) -> Evaluator:
    """<, <=, >, >=: numbers and strings compare, anything else is null (false in a filter).

    With `predicate`, null becomes False, so a filter needs no extra truthiness call.
    """
    compare = _ORDERING[name]
    incomparable = False if predicate else None
    right_is_literal, literal = _literal_of(right_node)
    field = _single_field(left_node)
    if right_is_literal and type(literal) in _PLAIN_NUMBERS and field is not None:

        def field_against_number(value: Any) -> Any:
            try:
                operand = value.get(field)
            except AttributeError:
                return incomparable
            if type(operand) in _PLAIN_NUMBERS:
                return compare(operand, literal)
            if not _is_comparable(operand):
                return incomparable
            return compare(operand, literal)  # a string against a number raises TypeError, as in jmespath

        return field_against_number
    left, right = compile_ast(left_node), compile_ast(right_node)

    def order(value: Any) -> Any:
        # Both sides are evaluated before either is checked, in the interpreter's order.
        first = left(value)
        second = right(value)
        if not (_is_comparable(first) and _is_comparable(second)):
            return incomparable
        return compare(first, second)

    return order


def _comparator_predicate(node: dict) -> Callable[[Any], bool]:
    # Equality yields a bool already; ordering yields a bool or None, and None is false.
    if node["value"] in ("eq", "ne"):
        return _comparator(node)
    left_node, right_node = node["children"]
    return _ordering(node["value"], left_node, right_node, predicate=True)


#
# Functions
#


def _function(node: dict) -> Evaluator:
    name = node["value"]
    arguments = tuple(compile_ast(child) for child in node["children"])
    call = _FUNCTIONS.call_function
    checks = _argument_checks(name, len(arguments))
    guard = _GUARDS.get(name)
    guarded_types = _GUARDED_TYPES.get(name)
    if checks is None:
        # Unknown function, wrong arity or element-typed parameters: the library checks (and raises) per call.
        if len(arguments) == 1 and guard is None:
            (only,) = arguments
            return lambda value: call(name, [only(value)])
        if guard is None:
            return lambda value: call(name, [argument(value) for argument in arguments])

        def guarded_library_call(value: Any) -> Any:
            resolved = [argument(value) for argument in arguments]
            budget = _budget_state.budget
            if budget is not None:
                guard(budget, resolved)
            return call(name, resolved)

        return guarded_library_call
    function = _FUNCTIONS.FUNCTION_TABLE[name]["function"]

    def checked_call(value: Any) -> Any:
        resolved = [argument(value) for argument in arguments]
        for index, allowed in checks:
            if type(resolved[index]).__name__ not in allowed:
                return call(name, resolved)  # raises the library's own type error
        if guard is not None and (guarded_types is None or type(resolved[0]) in guarded_types):
            budget = _budget_state.budget
            if budget is not None:
                guard(budget, resolved)
        return function(_FUNCTIONS, *resolved)

    return checked_call


#
# Budget guards of the functions: run before the function, with its resolved arguments
#

_CONTAINERS = frozenset({list, dict})
_BIG = 4096  # a list longer than this is charged before flatten copies it


def _charge_first(budget: QueryBudget, resolved: list) -> None:
    # sort, sort_by, min_by, max_by, map, reverse, keys, values, min, max, sum, avg: work in the first
    # (array or object) argument's length; `map` takes it second.
    for argument in resolved:
        if type(argument) in _CONTAINERS:
            budget.charge(len(argument) + 1)
            return
        if type(argument) is str:
            budget.charge_bytes(len(argument))
            return


def _guard_to_string(budget: QueryBudget, resolved: list) -> None:
    # json.dumps walks the whole value in C, shared references included: sized first.
    _elements, size = measure(resolved[0], budget, "the argument of to_string")
    budget.charge_bytes(size)


def _guard_join(budget: QueryBudget, resolved: list) -> None:
    separator, array = resolved[0], resolved[1] if len(resolved) > 1 else None
    if type(array) is not list or type(separator) is not str:
        return  # the library refuses the types
    try:
        size = sum(map(len, array)) + len(separator) * len(array)
    except TypeError:
        return  # not all strings: the library's own type error follows
    budget.charge(len(array) + 1)
    budget.charge_bytes(size)


def _guard_contains(budget: QueryBudget, resolved: list) -> None:
    subject = resolved[0]
    budget.charge(len(subject) + 1)
    if len(resolved) > 1 and type(resolved[1]) in _CONTAINERS:
        # `search in subject` compares deeply in C: at most the subject's logical size.
        measure(subject, budget, "the array given to contains")


def _guard_merge(budget: QueryBudget, resolved: list) -> None:
    budget.charge(sum(len(argument) for argument in resolved if type(argument) is dict) + 1)


_GUARDS: dict[str, Callable[[QueryBudget, list], None]] = {
    **dict.fromkeys(
        ("sort", "sort_by", "min_by", "max_by", "map", "reverse", "keys", "values", "min", "max", "sum", "avg"),
        _charge_first,
    ),
    "to_string": _guard_to_string,
    "join": _guard_join,
    "contains": _guard_contains,
    "merge": _guard_merge,
}
# Functions whose guard matters only for some types of the first argument (checked inline, per call).
_GUARDED_TYPES: dict[str, frozenset[type]] = {"contains": _CONTAINERS, "to_string": _CONTAINERS}


def _argument_checks(name: str, count: int) -> tuple[tuple[int, frozenset[str]], ...] | None:
    """The type checks jmespath's Functions._validate_arguments makes, when they are plain type names.

    Mirrors the library: the arity must fit (variadic: at least the declared parameters), only the
    declared parameters are type-checked, by Python type name, and an empty type list accepts anything.
    None when the checks cannot be taken over (unknown function, bad arity, 'array-number'-style types).
    """
    spec = _FUNCTIONS.FUNCTION_TABLE.get(name)
    if spec is None:
        return None
    signature = spec["signature"]
    variadic = bool(signature) and bool(signature[-1].get("variadic"))
    if (count < len(signature)) if variadic else (count != len(signature)):
        return None
    checks = []
    for index, parameter in enumerate(signature):
        types = parameter["types"]
        if not types:
            continue
        if any("-" in kind for kind in types):
            return None
        checks.append((index, frozenset(py for kind in types for py in jmespath_functions.REVERSE_TYPES_MAP[kind])))
    return tuple(checks)


_BUILDERS: dict[str, Callable[[dict], Evaluator]] = {
    "and_expression": _and,
    "comparator": _comparator,
    "current": _current,
    "expref": _expref,
    "field": _field,
    "filter_projection": _filter_projection,
    "flatten": _flatten,
    "function_expression": _function,
    "identity": _identity,
    "index": _index,
    "index_expression": _chain,
    "key_val_pair": _key_val_pair,
    "literal": _literal,
    "multi_select_dict": _multi_select_dict,
    "multi_select_list": _multi_select_list,
    "not_expression": _not,
    "or_expression": _or,
    "pipe": _chain,
    "projection": _projection,
    "slice": _slice,
    "subexpression": _chain,
    "value_projection": _value_projection,
}
