"""The JMESPath compiler gives exactly what jmespath 1.1.0's interpreter gives (differential tests).

Two sources of expressions: a fixed table over several documents, and a hypothesis grammar of
expressions and JSON documents (the JMESPath compliance suite runs in test_jmespath_compliance.py).
Results are compared by `_canonical`, which tells true from 1 and 1.0 from 1 and keeps key order, so
`[1] == [True]` style coincidences cannot hide a bug. Errors must match too: same exception class and
message.
"""

import json
import math
from typing import Any

import jmespath
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from jmespath import exceptions as jmespath_errors
from jmespath import visitor

from tools_app.data_access.jmespath_compiler import CompiledExpression, compile_ast, compile_query
from tools_app.data_access.query import compile_expression, run_query
from tools_app.kernel.errors import ErrorCode, ToolError


def _canonical(value: Any) -> Any:
    """A comparable form that keeps JSON types apart (True vs 1 vs 1.0) and dict key order."""
    if isinstance(value, visitor._Expression):
        return ("expref",)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return ("float", "nan" if math.isnan(value) else value)
    if isinstance(value, list):
        return ("list", [_canonical(item) for item in value])
    if isinstance(value, dict):
        return ("dict", [(key, _canonical(item)) for key, item in value.items()])
    return (type(value).__name__, value)


def _outcome(search, data: Any) -> tuple:
    try:
        return ("ok", _canonical(search(data)))
    except Exception as exc:  # every exception must match, whatever it is
        return ("error", type(exc).__name__, str(exc))


def _assert_same(expression: str, data: Any) -> tuple:
    """Compile and run `expression` both ways; return the shared outcome."""
    parsed = jmespath.compile(expression)
    expected = _outcome(parsed.search, data)
    actual = _outcome(compile_query(expression).search, data)
    assert actual == expected, f"{expression!r} over {data!r}"
    return actual


ORDERS = {
    "orders": [
        {"id": 1, "customer": "ada", "status": "paid", "total": 10.5, "items": [{"sku": "a", "qty": 2}], "tag": None},
        {"id": 2, "customer": "alan", "status": "shipped", "total": 520, "items": [], "vip": True},
        {"id": 3, "customer": "grace", "status": "shipped", "total": 700.25, "items": [{"sku": "b", "qty": 1}]},
        {"id": 4, "customer": "linus", "status": "new", "total": 0, "items": [{"sku": "a", "qty": 5}, {"sku": "c"}]},
        {"id": 5, "customer": "", "status": "shipped", "total": "n/a", "items": None, "vip": False},
    ],
    "meta": {"count": 5, "flags": [0, 1, True, False, None, "", [], {}], "nested": [[1, 2], [3, [4, 5]], 6]},
    "catalog": {"k1": {"name": "pen", "price": 1}, "k2": {"name": "ink", "price": 2.5}, "k3": "loose"},
}
SCALARS = [None, True, False, 0, 1, -1, 1.0, 0.0, 2.5, "", "x", "10", [], {}, [0, 1, "a", None], {"a": {"b": 0}}]
DOCUMENTS = [ORDERS, *SCALARS, ORDERS["orders"], ORDERS["catalog"], ORDERS["meta"]["flags"]]

EXPRESSIONS = [
    # fields, subexpressions, identity, current node
    "orders",
    "meta.count",
    "meta.count.missing",
    "a.b",
    "@",
    "@.meta",
    '"orders"[0].id',
    # indexes, slices
    "orders[0]",
    "orders[-1].id",
    "orders[10]",
    "[0]",
    "[-1]",
    "orders[1:3].id",
    "orders[::-1].id",
    "orders[::2]",
    "orders[:-2]",
    "orders[5:0:-2].id",
    "meta.flags[::0]",
    "[::0]",
    "[1:]",
    # projections, flatten, value projection
    "orders[*].id",
    "orders[*]",
    "orders[*].tag",
    "orders[*].items[*].sku",
    "orders[].items[].sku",
    "orders[].items[]",
    "meta.nested[]",
    "meta.nested[][]",
    "[]",
    "[*]",
    "catalog.*.name",
    "catalog.*",
    "*",
    "*.count",
    "orders.*",
    "orders[*].items[0].sku",
    "orders[*].[id, status]",
    "orders[*].{id: id, s: status}",
    # filters, comparators, truthiness
    "orders[?status=='shipped' && total > `500`].id",
    "orders[?status == 'shipped'].customer",
    "orders[?total > `500`].id",
    "orders[?total >= `0`].id",
    "orders[?total < `20`]",
    "orders[?total <= `0`].id",
    "orders[?total > '5'].id",
    "orders[?customer > 'b'].customer",
    "orders[?customer < total].id",
    "orders[?total == `0`].id",
    "orders[?total == `false`].id",
    "orders[?total != `0`].id",
    "orders[?vip].id",
    "orders[?!vip].id",
    "orders[?vip == `true`].id",
    "orders[?vip == `false`].id",
    "orders[?tag == null].id",
    "orders[?tag == `null`].id",
    "orders[?items].id",
    "orders[?!items].id",
    "orders[?items == `[]`].id",
    "orders[?customer].id",
    "orders[?customer || vip].id",
    "orders[?status == 'new' || total > `600`].id",
    "orders[?!(status == 'shipped')].id",
    "orders[?total]",
    "orders[?`1` == `1.0`].id",
    "orders[?@.id == `2`]",
    "orders[?id == `2`] | [0]",
    "meta.flags[?@]",
    "meta.flags[?!@]",
    "meta.flags[?@ == `0`]",
    "meta.flags[?@ == `1`]",
    "meta.flags[?@ == `true`]",
    "meta.flags[?@ != `false`]",
    "[?@ > `0`]",
    "[?a]",
    "catalog.*[?price > `1`]",
    "`1` == `true`",
    "`0` == `false`",
    "`[1]` == `[true]`",
    "`1.0` == `1`",
    '`"a"` < `"b"`',
    '`1` < `"b"`',
    "`true` < `false`",
    "`null` >= `null`",
    "!`0`",
    "!`0.0`",
    '!`""`',
    "!`[0]`",
    "!@",
    "meta.count && orders[0].id",
    "meta.missing && orders[0].id",
    "meta.missing || 'default'",
    "`[]` || `{}` || `0`",
    "`\"\"` && 'x'",
    # multiselect
    "{a: meta.count, b: orders[0].id}",
    "{a: a, a: meta}",
    "[meta.count, orders[0].id, missing]",
    "orders[0].{id: id, first_sku: items[0].sku}",
    "missing.{a: a}",
    "missing.[a]",
    # pipes
    "orders | [0]",
    "orders[*].id | [1]",
    "orders[*].items | [0]",
    "orders[?status=='shipped'] | length(@)",
    "@ | @ | meta",
    # literals, raw strings
    '`{"a": [1, 2]}`',
    "'raw'",
    '`"json"`',
    "`3.5`",
    # functions, exprefs
    "length(orders)",
    "length(@)",
    "length(meta.count)",
    "sum(orders[*].total)",
    "sum(orders[:4].total)",
    "avg(orders[:4].total)",
    "avg(`[]`)",
    "max(orders[*].id)",
    "min(orders[*].customer)",
    "max(`[]`)",
    "sort(orders[*].customer)",
    "sort(orders[*].total)",
    "sort_by(orders[:4], &total)[*].id",
    "sort_by(orders, &total)",
    "sort_by(orders, &customer)[*].id",
    "sort_by(orders, &vip)",
    "max_by(orders[:4], &total).id",
    "min_by(orders, &customer).id",
    "min_by(orders, &tag)",
    "map(&id, orders)",
    "map(&items[0].sku, orders)",
    "map(&@, `[1, null]`)",
    "keys(catalog)",
    "values(catalog)",
    "keys(orders)",
    'merge(catalog, `{"k1": 0}`)',
    "merge(`{}`)",
    "contains(orders[*].customer, 'ada')",
    "contains('abc', 'b')",
    "contains(`1`, 'b')",
    "starts_with(orders[0].customer, 'a')",
    "ends_with(orders[0].customer, `1`)",
    "join(', ', orders[*].customer)",
    "join(', ', orders[*].id)",
    "reverse(orders[*].id)",
    "reverse('abc')",
    "not_null(missing, orders[0].tag, meta.count)",
    "not_null()",
    "to_array(meta.count)",
    "to_array(orders[*].id)",
    "to_string(meta)",
    "to_string('x')",
    "to_number('12')",
    "to_number('1.5')",
    "to_number('x')",
    "to_number(`true`)",
    "type(@)",
    "type(meta.flags[2])",
    "abs(`-3`)",
    "ceil(`1.2`)",
    "floor(`-1.2`)",
    "unknown_function(@)",
    "length(`1`, `2`)",
    "abs('x')",
    "sum(orders[*].customer)",
    "orders[*].length(items)",
    "orders[?length(items || `[]`) > `0`].id",
    "orders[?contains(customer, 'a')].customer",
    "&id",
    "[&id]",
    "&id == &id",
    "to_array(&id)",
    "type(&id)",
    "sort_by(orders, &id)[?id > `2`].id | reverse(@)",
    "meta.nested[?length(@) > `1`]",
]


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_compiled_expression_matches_interpreter_on_every_document(expression):
    """Each expression of the table gives the interpreter's result or error over every document."""
    # given
    outcomes = []
    # when
    for document in DOCUMENTS:
        outcomes.append(_assert_same(expression, document))
    # then
    assert len(outcomes) == len(DOCUMENTS)


def test_filter_over_orders_returns_shipped_ids_above_500():
    """The filter of the benchmark picks records by status and total; 'n/a' compared with 500 is an error."""
    # given
    data = ORDERS["orders"][:4]
    # when
    result = compile_query("[?status=='shipped' && total > `500`].id").search(data)
    # then
    assert result == [2, 3]


def test_ordering_a_string_against_a_number_raises_typeerror_like_the_interpreter():
    """jmespath 1.1.0 orders strings too, and a string against a number raises TypeError."""
    # given
    expression = "[?total > `500`].id"
    # when
    outcome = _assert_same(expression, ORDERS["orders"])
    # then
    assert outcome[:2] == ("error", "TypeError")


def test_equality_keeps_zero_and_one_apart_from_booleans_only_at_the_top_level():
    """`1` == `true` is false, yet `[1]` == `[true]` is true (Python list equality), as in jmespath."""
    # given
    cases = {"`1` == `true`": False, "`0` == `false`": False, "`[1]` == `[true]`": True, "`1.0` == `1`": True}
    # when
    results = {expression: compile_query(expression).search(None) for expression in cases}
    # then
    assert results == cases


def test_not_of_zero_is_false():
    """0 is a true value in JMESPath, so !0 is false while ![] and !'' are true."""
    # given
    expressions = ["!`0`", "!`[]`", '!`""`', "!`null`"]
    # when
    results = [compile_query(expression).search(None) for expression in expressions]
    # then
    assert results == [False, True, True, True]


def test_unknown_node_type_falls_back_to_the_interpreter():
    """A node type without a compiler is evaluated by jmespath's interpreter (here: visit_field by hand)."""
    # given
    interpreter_only = {"type": "field", "value": "a", "children": []}
    node = {"type": "subexpression", "children": [{"type": "field", "value": "x", "children": []}, interpreter_only]}
    from tools_app.data_access import jmespath_compiler

    original = jmespath_compiler._BUILDERS.pop("field")
    try:
        # when
        evaluate = compile_ast(node)
        result = evaluate({"x": {"a": 42}})
    finally:
        jmespath_compiler._BUILDERS["field"] = original
    # then
    assert result == 42


def test_compile_expression_caches_the_compiled_form():
    """The same expression string compiles once per process."""
    # given
    expression = "orders[?id == `4`].customer"
    # when
    first = compile_expression(expression)
    second = compile_expression(expression)
    # then
    assert isinstance(first, CompiledExpression)
    assert first is second
    assert first.search(ORDERS) == ["linus"]


@pytest.mark.parametrize(
    ("expression", "needle"),
    [
        ("orders[?", "Invalid JMESPath expression"),
        ("", "cannot be empty"),
        ("foo[?a = 1]", "Invalid JMESPath expression"),
        ("foo..bar", "Invalid JMESPath expression"),
    ],
)
def test_syntax_error_is_invalid_query(expression, needle):
    """A malformed expression is INVALID_QUERY naming the problem and the expression."""
    # given
    data = ORDERS
    # when
    with pytest.raises(ToolError) as caught:
        run_query(expression, data)
    # then
    assert caught.value.code == ErrorCode.INVALID_QUERY
    assert needle in caught.value.message
    assert expression in caught.value.message


def test_deeply_nested_expression_is_query_too_expensive():
    """An expression nested beyond the recursion limit is refused as too expensive, not a crash."""
    # given
    expression = "(" * 5000 + "a" + ")" * 5000
    # when
    with pytest.raises(ToolError) as caught:
        run_query(expression, {"a": 1})
    # then
    assert caught.value.code == ErrorCode.QUERY_TOO_EXPENSIVE
    assert "nesting limit of 100 levels" in caught.value.message


@pytest.mark.parametrize(
    ("expression", "needle"),
    [
        ("abs(customer)", "invalid type for value: ada"),
        ("length(`1`, `2`)", "Expected 1 argument for function length(), received 2"),
        ("nope(@)", "Unknown function: nope()"),
        ("[?total > `5`]", "not supported between instances of 'str' and 'int'"),
        ("[::0]", "slice step cannot be zero"),
        ("ceil(to_number('1e999'))", "cannot convert float infinity to integer"),
        ("sort_by(@, &tag)", "expected one of: ['string', 'number'], received: \"null\""),
    ],
)
def test_runtime_error_is_invalid_query(expression, needle):
    """Errors raised while evaluating (argument types, arity, unknown functions, mixed ordering) are INVALID_QUERY."""
    # given
    data = [{"customer": "ada", "total": "n/a", "tag": None}]
    # when
    with pytest.raises(ToolError) as caught:
        run_query(expression, data if expression.startswith(("[", "sort")) else data[0])
    # then
    assert caught.value.code == ErrorCode.INVALID_QUERY
    assert needle in caught.value.message
    assert caught.value.message.endswith(f"Expression: {expression}")


@pytest.mark.parametrize("expression", ["&id", "[&id]", "{a: &id}", "to_array(&id)"])
def test_expression_reference_as_result_is_invalid_query(expression):
    """An expref that ends up in the result is not JSON: INVALID_QUERY instead of a serialisation crash."""
    # given
    data = {"id": 1}
    # when
    with pytest.raises(ToolError) as caught:
        run_query(expression, data)
    # then
    assert caught.value.code == ErrorCode.INVALID_QUERY
    assert "expression reference" in caught.value.message


def test_exprefs_consumed_by_functions_are_fine():
    """sort_by/max_by/map take exprefs and return JSON."""
    # given
    data = ORDERS["orders"][:4]
    # when
    result = run_query("{s: sort_by(@, &customer)[*].id, m: max_by(@, &total).id, ids: map(&id, @)}", data)
    # then
    assert result == {"s": [1, 2, 3, 4], "m": 3, "ids": [1, 2, 3, 4]}


#
# Hypothesis: a grammar of expressions over a small vocabulary, and JSON documents using it
#

NAMES = ["a", "b", "c", "foo"]
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, 1, -1, 2, 0.0, 1.0, 2.5]),
    st.integers(min_value=-3, max_value=3),
    st.sampled_from(["", "a", "b", "foo", "0"]),
)
documents = st.recursive(
    _scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.sampled_from(NAMES), children, max_size=4)
    ),
    max_leaves=20,
)
_literal_json = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=2) | st.dictionaries(st.sampled_from(NAMES), children, max_size=2),
    max_leaves=4,
)


def _literal(value: Any) -> str:
    return "`" + json.dumps(value).replace("`", "\\`") + "`"


FUNCTIONS = {
    # name: builder of the argument list from sub-expressions
    "length": 1,
    "abs": 1,
    "sum": 1,
    "avg": 1,
    "max": 1,
    "min": 1,
    "sort": 1,
    "keys": 1,
    "values": 1,
    "reverse": 1,
    "to_array": 1,
    "to_string": 1,
    "to_number": 1,
    "type": 1,
    "not_null": 2,
    "contains": 2,
    "starts_with": 2,
    "join": 2,
    "merge": 2,
}


def _extend(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    binary = st.sampled_from(["==", "!=", "<", "<=", ">", ">=", "&&", "||", "|"])
    comparison = st.sampled_from(["==", "!=", "<", "<=", ">", ">="])
    scalar_literal = _scalars.map(_literal)
    index = st.integers(min_value=-3, max_value=3)
    slice_part = st.one_of(st.just(""), index.map(str))
    return st.one_of(
        st.tuples(children, st.sampled_from(NAMES)).map(lambda t: f"({t[0]}).{t[1]}"),
        st.tuples(children, index).map(lambda t: f"({t[0]})[{t[1]}]"),
        st.tuples(children, slice_part, slice_part, st.sampled_from(["", ":1", ":-1", ":2"])).map(
            lambda t: f"({t[0]})[{t[1]}:{t[2]}{t[3]}]"
        ),
        st.tuples(children, children).map(lambda t: f"({t[0]})[*].({t[1]})"),
        children.map(lambda c: f"({c})[]"),
        st.tuples(children, children).map(lambda t: f"({t[0]})[].({t[1]})"),
        st.tuples(children, children).map(lambda t: f"({t[0]}).*.({t[1]})"),
        st.tuples(children, children, children).map(lambda t: f"({t[0]})[?{t[1]}].({t[2]})"),
        st.tuples(children, children).map(lambda t: f"({t[0]})[?{t[1]}]"),
        st.tuples(children, binary, children).map(lambda t: f"({t[0]}) {t[1]} ({t[2]})"),
        children.map(lambda c: f"!({c})"),
        # Comparisons with scalar literals (0/1 against booleans, strings against numbers) inside filters.
        st.tuples(children, comparison, scalar_literal).map(lambda t: f"({t[0]}) {t[1]} {t[2]}"),
        st.tuples(children, children, comparison, scalar_literal).map(lambda t: f"({t[0]})[?({t[1]}) {t[2]} {t[3]}]"),
        st.tuples(scalar_literal, comparison, children).map(lambda t: f"{t[0]} {t[1]} ({t[2]})"),
        st.lists(children, min_size=1, max_size=3).map(lambda items: "[" + ", ".join(items) + "]"),
        st.lists(st.tuples(st.sampled_from(NAMES), children), min_size=1, max_size=3).map(
            lambda pairs: "{" + ", ".join(f"{key}: {value}" for key, value in pairs) + "}"
        ),
        st.tuples(st.sampled_from(sorted(FUNCTIONS)), st.lists(children, min_size=1, max_size=2)).map(
            lambda t: f"{t[0]}({', '.join(t[1][: FUNCTIONS[t[0]]])})"
        ),
        st.tuples(st.sampled_from(["sort_by", "max_by", "min_by"]), children, children).map(
            lambda t: f"{t[0]}({t[1]}, &({t[2]}))"
        ),
        st.tuples(children, children).map(lambda t: f"map(&({t[0]}), {t[1]})"),
    )


_operands = st.sampled_from([*NAMES, "@", "a.b", "foo[0]", "b[-1]"])
_quirk_literals = st.sampled_from([0, 1, 0.0, 1.0, 2, True, False, None, "", "a", "0", [], {}, [1]]).map(_literal)
expressions = st.recursive(
    st.one_of(
        st.sampled_from([*NAMES, "@", "*", "[*]", "[]", "a.b", "foo[0]", "b[-1]"]),
        st.tuples(_operands, st.sampled_from(["==", "!=", "<", "<=", ">", ">="]), _quirk_literals).map(" ".join),
        _operands.map(lambda operand: f"!{operand}"),
        _literal_json.map(_literal),
        st.sampled_from(NAMES).map(lambda name: f"'{name}'"),
    ),
    _extend,
    max_leaves=8,
)


# Every generated expression also runs over these: where 0/1 meet booleans, strings meet numbers,
# and false-like values ('', [], {}, null) sit next to true-like ones.
QUIRK_DOCUMENTS = [
    {"a": 0, "b": 1, "c": True, "foo": False},
    {"a": 1.0, "b": 0.0, "c": "", "foo": None},
    {
        "a": [0, 1, True, False, 1.0, 0.0, None, "", "a", [], {}],
        "b": {"a": 1, "b": True, "c": "0"},
        "c": "b",
        "foo": [{"a": 0}, {"a": True}, {"a": "x"}, {"a": 2}, {"a": [1]}, {"b": False}],
    },
    [0, 1, True, False, None, "a", {"a": 1, "b": "b"}, [1, True], [[0], [False]]],
]


def test_every_operand_comparator_literal_combination_matches_interpreter():
    """Exhaustively: each operand compared with each quirky literal, bare, negated and as a filter."""
    # given
    operands = ["a", "b", "c", "foo", "@", "a.b", "foo[0]", "b[-1]", "a[0]"]
    comparators = ["==", "!=", "<", "<=", ">", ">="]
    literals = ["`0`", "`1`", "`0.0`", "`1.0`", "`2`", "`true`", "`false`", "`null`", "''", "'a'", "`[]`", "`{}`"]
    expressions_ = [f"{operand} {op} {literal}" for operand in operands for op in comparators for literal in literals]
    expressions_ += [f"{literal} {op} {operand}" for operand in operands for op in comparators for literal in literals]
    expressions_ += [f"!{operand}" for operand in operands] + [f"[?!{operand}]" for operand in operands]
    filters = [f"[?{expression}]" for expression in expressions_] + [f"*[?{expression}]" for expression in expressions_]
    checked = 0
    # when
    for expression in expressions_ + filters:
        for document in QUIRK_DOCUMENTS:
            _assert_same(expression, document)
            checked += 1
    # then
    assert checked == 4 * (len(expressions_) + len(filters))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(expression=expressions, data=documents)
def test_generated_expressions_match_interpreter(expression, data):
    """Any generated expression over any generated document gives the interpreter's result or error."""
    # given
    try:
        jmespath.compile(expression)
    except jmespath_errors.JMESPathError:
        assume(False)
    # when
    outcomes = [_assert_same(expression, document) for document in [data, *QUIRK_DOCUMENTS]]
    # then
    assert len(outcomes) == 1 + len(QUIRK_DOCUMENTS)
