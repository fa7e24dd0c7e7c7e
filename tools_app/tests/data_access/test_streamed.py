"""Queries evaluated chunk by chunk (tools_app.data_access.streamed): which expressions decompose, and the
differential proof that the chunked answer is jmespath's over the whole collection, errors included, with
chunks of 3 records so that every border is crossed. Over in-memory chunks, then through a rows table's read
(tools_app.execution.records, SQL compilation switched off) on SQLite and PostgreSQL; the kept-result bound,
the time budget per chunk and the narrowing."""

import json
import random
import time
from typing import Any

import jmespath
import pytest

from tools_app.data_access import budget, multiselect, narrowing, streamed
from tools_app.data_access.budget import Limits, enforced
from tools_app.data_access.operations import Mount, get_all_data, query_data
from tools_app.data_access.query import run_query
from tools_app.execution import records
from tools_app.kernel.errors import ErrorCode, ToolError
from tools_app.models import Table, TableCollection, TableRecord

#
# Generated collections and expressions
#

PREDICATES = [
    "a > `2`",
    "a == 'x'",
    "b",
    "!b",
    "a < b",
    "a >= `1` && b",
    "a == `1` || s == 'ab'",
    "length(tags) > `1`",
    "contains(tags, 'x')",
    "starts_with(s, 'a')",
    "x.y",
    "`true`",
]
RIGHTS = ["", ".a", ".x.y", ".{a: a, s: s}", ".[a, b]", ".tags[0]", ".tags[*]", ".length(tags)", ".to_string(a)"]
TAILS = [
    "",
    " | [0]",
    " | [-1]",
    " | [:5]",
    " | [1:7:2]",
    " | length(@)",
    " | reverse(@)",
    " | [?a]",
    " | sort_by(@, &a)",
]
WRAPS = ["length({})", "sort_by({}, &a)", "max_by({}, &a)", "reverse({})", "join(', ', {})", "not_null({}, `1`)"]
OBJECT_HEADS = ["*{right}", "values(@)[?{pred}]{right}", "values(@)[*]{right}", "*[?{pred}]"]
NOT_DECOMPOSED = [
    ("sort_by(@, &a)", "array"),  # the records themselves, then a tail (compiled to SQL): gathered
    ("@", "array"),
    ("*.a", "array"),  # a value projection over an array is null
    ("[?a]", "object"),  # a filter over an object is null
    ("length(@)", "object"),
    ("{n: length([?a])}", "array"),
    ("contains([*].a, s)", "array"),  # two arguments that depend on the data
    ("reverse(@)", "array"),  # the records themselves, then a tail needing them all (compiled to SQL)
    ("a", "array"),
]


# Heads of two or three levels (a projection or filter over the flattening of another head), each able to fail.
LEVEL_HEADS = [
    "[?{p}][]{r}",
    "[?{p}][][?{q}]{r}",
    "[*]{r}[]",
    "[?{p}].tags[][?@ > `0`]",
    "[?{p}]{r}[][?{q}]{r}",
    "@[?{p}][].tags[]",
]
OBJECT_LEVEL_HEADS = ["values(@)[?{p}][]{r}", "*{r}[][?{q}]", "*.tags[]"]


def _value(rng: random.Random, depth: int = 0) -> Any:
    choice = rng.randrange(9)
    if choice == 0:
        return None
    if choice == 1:
        return rng.choice([True, False])
    if choice in (2, 3):
        return rng.choice([0, 1, 2, 3, 2.5, -1])
    if choice in (4, 5):
        return rng.choice(["x", "ab", "b", "", "abc"])
    if choice == 6 and depth < 2:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if choice == 7 and depth < 2:
        return {"y": _value(rng, depth + 1)}
    return rng.choice(["x", 1])


def _record(rng: random.Random) -> Any:
    if rng.random() < 0.05:
        return _value(rng)  # not every element of a collection is a record
    record: dict[str, Any] = {}
    for field in ("a", "b", "s", "tags", "x"):
        if rng.random() < 0.8:
            record[field] = _value(rng)
    if rng.random() < 0.6:
        record["tags"] = [rng.choice(["x", "y", "z"]) for _ in range(rng.randrange(4))]
    if rng.random() < 0.6:
        record["s"] = rng.choice(["ab", "abc", "b", ""])
    return record


def _collection(rng: random.Random) -> list:
    return [_record(rng) for _ in range(rng.randrange(0, 25))]


def _array_expression(rng: random.Random) -> str:
    right = rng.choice(RIGHTS)
    head = rng.choice(
        [f"[?{rng.choice(PREDICATES)}]{right}", f"[*]{right}", f"[]{right}", f"@[?{rng.choice(PREDICATES)}]{right}"]
    )
    if rng.random() < 0.25:
        return rng.choice(WRAPS).format(head) + rng.choice(["", " | [0]"])
    return head + rng.choice(TAILS)


def _levels_expression(rng: random.Random, heads: list[str]) -> str:
    head = rng.choice(heads).format(p=rng.choice(PREDICATES), q=rng.choice(PREDICATES), r=rng.choice(RIGHTS))
    if rng.random() < 0.25:
        return rng.choice(WRAPS).format(head)
    return head + rng.choice(TAILS)


def _object_expression(rng: random.Random) -> str:
    head = rng.choice(OBJECT_HEADS).format(pred=rng.choice(PREDICATES), right=rng.choice(RIGHTS))
    if rng.random() < 0.25:
        return rng.choice(WRAPS).format(head)
    return head + rng.choice(TAILS)


def _rows(collection: list | dict) -> list[tuple[int, str | None, Any, int]]:
    items = collection.items() if isinstance(collection, dict) else ((None, record) for record in collection)
    return [(position, key, record, len(json.dumps(record))) for position, (key, record) in enumerate(items)]


def _in_chunks(rows: list, size: int = 3) -> list[list]:
    return [rows[start : start + size] for start in range(0, len(rows), size)]


def _expected(expression: str, collection: Any) -> tuple[str, Any]:
    """jmespath's answer over the whole collection, or (for a failure) the INVALID_QUERY the evaluator gives."""
    try:
        answer = jmespath.search(expression, collection)
    except (jmespath.exceptions.JMESPathError, TypeError, ValueError):
        with pytest.raises(ToolError) as raised:
            run_query(expression, collection)
        return "error", (raised.value.code, str(raised.value))
    return "answer", json.dumps(answer)


def _streamed(expression: str, collection: Any, kind: str, *, limit: int = 10**9) -> tuple[str, Any]:
    decomposed = streamed.plan(expression, kind)
    assert decomposed is not None, expression
    try:
        answer = streamed.run(expression, decomposed, _in_chunks(_rows(collection)), kind, limit=limit)
    except ToolError as error:
        return "error", (error.code, str(error))
    return "answer", json.dumps(answer)


#
# Which expressions decompose
#


def test_the_shapes_of_the_brief_decompose_and_a_length_counts_without_keeping():
    for expression in ("[?a > `1`]", "[?a].x", "[*].x", "[?a].{a: a, b: b}", "[].x", "[?a].x | [0]", "[*] | [:10]"):
        shown = streamed.plan(expression, "array")
        assert shown is not None, expression
        assert shown.count is False, expression
    for expression in ("length([?a])", "[?a] | length(@)", "length(@)", "[?a].x | length(@) | to_string(@)"):
        shown = streamed.plan(expression, "array")
        assert shown is not None, expression
        assert shown.count is True, expression
    assert streamed.plan("length(@)", "array").tail is None  # type: ignore[union-attr]
    for expression in ("*", "*.x", "values(@)[?a]", "length(*[?a])"):
        assert streamed.plan(expression, "object") is not None, expression


@pytest.mark.parametrize(("expression", "kind"), NOT_DECOMPOSED)
def test_what_does_not_decompose_is_left_to_the_gathering_path(expression, kind):
    assert streamed.plan(expression, kind) is None


@pytest.mark.parametrize(
    ("expression", "kind", "fields"),
    [
        ("[?a==`1` && contains(tags, 'x')].id", "array", {"a", "tags"}),
        ("[?!a] | length(@)", "array", {"a"}),
        ("[?starts_with(name, 'x') || ends_with(code, 'y')]", "array", {"name", "code"}),
        ("[?a.b==`1`]", "array", set()),  # a path below a field: no declared field's index serves it
        ("[?to_string(total) == '5'].id", "array", set()),  # a field inside a function: no index's expression
        ("sort_by([?s=='a'], &t)[0]", "array", {"s", "t"}),
        ("max_by(@, &t).id", "array", {"t"}),
        ("[?p].x | sort(@)[0]", "array", {"p", "x"}),
        ("[*].total | max(@)", "array", {"total"}),
        ("[?p][].x | max(@)", "array", {"p"}),  # the items of a flattening are no records
        ("values(@)[?a].b", "object", {"a"}),
        ("*[?a]", "object", set()),  # a filter over each record's own values
    ],
)
def test_a_plan_lists_the_record_fields_it_filters_or_sorts_on(expression, kind, fields):
    found = streamed.plan(expression, kind)
    assert found is not None
    assert found.filtered_fields == fields


def test_an_invalid_expression_is_refused_as_the_evaluator_refuses_it():
    with pytest.raises(ToolError) as raised:
        streamed.plan("[?a ==", "array")
    with pytest.raises(ToolError) as reference:
        run_query("[?a ==", [])
    assert (raised.value.code, str(raised.value)) == (ErrorCode.INVALID_QUERY, str(reference.value))


#
# The differential proof over in-memory chunks
#


def test_generated_queries_over_generated_arrays_answer_as_jmespath_in_chunks_of_three():
    rng = random.Random(29)
    outcomes = {"answer": 0, "error": 0}
    for _ in range(3000):
        collection = _collection(rng)
        expression = _array_expression(rng)
        expected = _expected(expression, collection)
        assert _streamed(expression, collection, "array") == expected, (expression, collection)
        outcomes[expected[0]] += 1
    assert outcomes == {"answer": 1840, "error": 1160}  # both sides of the proof exercised


def test_generated_queries_over_generated_objects_answer_as_jmespath_in_chunks_of_three():
    rng = random.Random(2029)
    outcomes = {"answer": 0, "error": 0}
    for _ in range(1500):
        collection = {f"k{number}": _record(rng) for number in rng.sample(range(100), rng.randrange(0, 20))}
        expression = _object_expression(rng)
        expected = _expected(expression, collection)
        assert _streamed(expression, collection, "object") == expected, (expression, collection)
        outcomes[expected[0]] += 1
    assert outcomes == {"answer": 1126, "error": 374}


def test_generated_heads_of_several_levels_answer_as_jmespath_with_the_lowest_levels_failure():
    """A filter, then a projection or filter over its flattening: each level fails where the whole list's
    evaluation of that level fails, and a lower level's failure in a later chunk wins over a higher one's."""
    rng = random.Random(3029)
    outcomes = {"answer": 0, "error": 0}
    for _ in range(2000):
        kind = "object" if rng.random() < 0.25 else "array"
        if kind == "array":
            collection: list | dict = _collection(rng)
            expression = _levels_expression(rng, LEVEL_HEADS)
        else:
            collection = {f"k{number}": _record(rng) for number in rng.sample(range(100), rng.randrange(0, 20))}
            expression = _levels_expression(rng, OBJECT_LEVEL_HEADS)
        decomposed = streamed.plan(expression, kind)
        assert decomposed is not None, expression
        assert len(decomposed.levels) >= 2, expression
        expected = _expected(expression, collection)
        assert _streamed(expression, collection, kind) == expected, (expression, collection)
        outcomes[expected[0]] += 1
    assert outcomes == {"answer": 1240, "error": 760}  # both sides of the proof exercised


def test_a_lower_levels_failure_in_a_later_chunk_is_the_one_raised():
    # The projection's comparison fails on the first record, the filter's on the last: the whole list filters
    # every record first, so the filter's error is jmespath's.
    collection = [{"a": 2, "b": "x"}] * 4 + [{"a": "late"}]
    expression = "[?a > `1`][].[b < `1`]"
    kind, (code, message) = _streamed(expression, collection, "array")
    assert (kind, code) == ("error", ErrorCode.INVALID_QUERY)
    assert message == (
        "INVALID_QUERY: The JMESPath expression failed: '>' not supported between instances of 'str' and 'int'. "
        "Expression: [?a > `1`][].[b < `1`]"
    )
    assert (kind, (code, message)) == _expected(expression, collection)
    assert _streamed(expression, collection[:4], "array")[1][1].startswith(  # without it, the projection's
        "INVALID_QUERY: The JMESPath expression failed: '<' not supported between instances of 'str' and 'int'."
    )


def test_a_type_error_in_a_late_record_is_the_whole_lists_invalid_query():
    collection = [{"a": number} for number in range(9_000)] + [{"a": "9000"}] + [{"a": 1}] * 10
    expression = "[?a > `10`].a | [0]"
    assert _streamed(expression, collection, "array") == _expected(expression, collection)
    kind, (code, message) = _streamed(expression, collection, "array")
    assert (kind, code) == ("error", ErrorCode.INVALID_QUERY)
    assert "'>' not supported between instances of 'str' and 'int'" in message
    assert message.endswith("Expression: [?a > `10`].a | [0]")


def test_the_kept_results_are_bounded_not_the_records_read():
    collection = [{"id": number, "pad": "p" * 100} for number in range(3_000)]
    limit = 20_000  # the collection is ~350,000 bytes
    assert _streamed("[?id < `5`].id", collection, "array", limit=limit) == ("answer", "[0, 1, 2, 3, 4]")
    assert _streamed("length([?id > `5`])", collection, "array", limit=limit) == ("answer", "2994")
    kind, (code, message) = _streamed("[?id > `5`]", collection, "array", limit=limit)
    assert (kind, code) == ("error", ErrorCode.QUERY_TOO_EXPENSIVE)
    assert message == (
        "QUERY_TOO_EXPENSIVE: This query keeps more than 20000 bytes of results evaluated in the server "
        "(TOOLHUB_MAX_EVALUATED_BYTES): narrow it with a filter, project fewer fields, or page it."
    )


def test_the_time_budget_is_checked_after_every_chunk():
    decomposed = streamed.plan("[?id < `0`]", "array")
    assert decomposed is not None
    seen = []

    def chunks():
        for number in range(1_000):
            seen.append(number)
            yield [(number, None, {"id": number}, 10)]
            if number == 2:
                started = time.thread_time()
                while time.thread_time() - started < 0.04:  # CPU past the budget, spent between two chunks
                    pass

    with enforced(Limits(cpu_ms=20, max_elements=10**9, max_bytes=10**9)):
        with pytest.raises(ToolError) as raised:
            streamed.run("[?id < `0`]", decomposed, chunks(), "array", limit=10**9)
    assert raised.value.code == ErrorCode.QUERY_TOO_EXPENSIVE
    assert "CPU-time budget of 20 ms" in str(raised.value)
    assert seen == [0, 1, 2, 3]


#
# Through a rows table's read, both engines
#


def _rows_tables(owner: Any) -> Any:
    """A maker of rows tables, each made of a collection (records.create_collection)."""

    def make(values: list) -> int:
        table = Table.objects.create(owner=owner, name=f"rows {Table.objects.count()}", data=[])
        records.create_collection(table.pk, values)
        Table.objects.filter(pk=table.pk).update(storage="rows")
        return table.pk

    return make


def _refuse_gathering(monkeypatch: Any) -> None:
    """A read that gathers the collection (records._value: the list the evaluator runs over) fails the test."""
    monkeypatch.setattr(records, "_value", lambda *_args, **_kwargs: pytest.fail("the read gathered the collection"))


@pytest.fixture
def streamed_rows(db, monkeypatch, owner):
    """Rows tables read with SQL compilation switched off and chunks of 3 records, so every query that
    decomposes streams."""
    monkeypatch.setattr(records, "CHUNK", 3)
    monkeypatch.setattr(records, "compile_sql_expression", lambda *_args, **_kwargs: None)
    return _rows_tables(owner)


@pytest.fixture
def ungathered_rows_table(db, monkeypatch, owner):
    """Rows tables read as the tools read them (SQL compilation on), whose reads may not gather the collection."""
    _refuse_gathering(monkeypatch)
    return _rows_tables(owner)


def _read(table_id: int, expression: str, where: dict | None = None) -> tuple[str, Any]:
    try:
        answer = records.read(
            table_id,
            1,
            Mount("", "id"),
            query_data,
            {"query": expression},
            where=where,
            over_collection=records.query_collection,
        )
    except ToolError as error:
        return "error", (error.code, str(error))
    return "answer", json.dumps(answer)


def test_generated_queries_over_a_rows_table_answer_as_jmespath(streamed_rows):
    rng = random.Random(729)
    for _ in range(12):
        collection = [record for record in _collection(rng) if isinstance(record, dict)]
        table_id = streamed_rows(collection)
        for _ in range(25):
            expression = _array_expression(rng)
            assert streamed.plan(expression, "array") is not None
            assert _read(table_id, expression) == _expected(expression, collection), (expression, collection)


def test_a_rows_read_keeps_only_the_narrowings_records_before_the_query(streamed_rows):
    collection = [{"id": number, "team": "red" if number % 3 else "blue", "a": number % 5} for number in range(40)]
    table_id = streamed_rows(collection)
    within = [record for record in collection if record["team"] == "blue"]
    for expression in ("[?a > `2`].id", "length([*])", "[*].a | sort_by(@, &to_string(@)) | [-1]", "[].team"):
        expected = _expected(expression, within)
        assert _read(table_id, expression, where={"team": "blue"}) == expected, expression
    assert _read(table_id, "[*].id | [:3]", where={"team": "blue"}) == ("answer", "[0, 3, 6]")


def test_a_rows_filter_over_more_records_than_the_bound_answers_where_gathering_them_is_refused(
    streamed_rows, settings
):
    settings.TOOLHUB_MAX_EVALUATED_BYTES = 2_000
    collection = [{"id": number, "pad": "p" * 40} for number in range(200)]  # ~12,000 bytes of records
    table_id = streamed_rows(collection)
    assert _read(table_id, "[?id > `195`].id") == ("answer", "[196, 197, 198, 199]")
    assert _read(table_id, "[?id > `9`] | length(@)") == ("answer", "190")
    kind, (code, message) = _read(table_id, "[?id > `9`]")  # what it keeps passes the bound
    assert (kind, code) == ("error", ErrorCode.QUERY_TOO_EXPENSIVE)
    assert "keeps more than 2000 bytes of results" in message
    assert _read(table_id, "sort_by(@, &id)[-1].id") == ("answer", "199")  # a top-k: one record kept
    kind, (code, message) = _read(table_id, "sort_by(@, &id)[1:-1].id")  # does not decompose: gathered, refused
    assert (kind, code) == ("error", ErrorCode.QUERY_TOO_EXPENSIVE)
    assert "needs more than 2000 bytes of records evaluated in the server" in message


def test_heads_of_several_levels_over_a_rows_table_answer_as_jmespath_without_gathering(
    streamed_rows, monkeypatch, settings
):
    rng = random.Random(4029)
    for _ in range(5):
        collection = [record for record in _collection(rng) if isinstance(record, dict)]
        table_id = streamed_rows(collection)
        for _ in range(20):
            expression = _levels_expression(rng, LEVEL_HEADS)
            assert _read(table_id, expression) == _expected(expression, collection), (expression, collection)
    _refuse_gathering(monkeypatch)
    settings.TOOLHUB_MAX_EVALUATED_BYTES = 2_000
    collection = [{"id": number, "pad": "p" * 40, "tags": [number % 3, "t"]} for number in range(200)]
    table_id = streamed_rows(collection)  # ~14,000 bytes of records
    assert _read(table_id, "[?id > `196`][].id") == ("answer", "[197, 198, 199]")
    assert _read(table_id, "[?id > `197`][].tags[]") == ("answer", '[0, "t", 1, "t"]')
    assert _read(table_id, "length([?id > `9`][].tags[] | [?@ == `1`])") == ("answer", "64")
    kind, (code, message) = _read(table_id, "[?id > `100`][].[id < 'x']")
    assert (kind, code) == ("error", ErrorCode.INVALID_QUERY)
    assert "'<' not supported between instances of 'int' and 'str'" in message


def test_shapes_compiled_to_sql_answer_over_a_rows_table_without_gathering(
    ungathered_rows_table, make_table, make_tool, owner
):
    """reverse, sort, map (nulls kept) and the records themselves, over records with missing fields and nulls."""
    collection = [{"id": number, "k": [3, 1, 2, 1.0][number % 4], "s": "abc"[number % 3]} for number in range(12)]
    collection[5] = {"id": 5}
    collection[7] = {"id": 7, "k": None, "s": None}
    table_id = ungathered_rows_table(collection)
    for expression in (
        "@",
        "reverse(@)",
        "reverse(@)[:3].id",
        "map(&k, @)",
        "map(&s, @) | [?@ == 'a']",
        "length(map(&k, @))",
        "sort([*].k)",
        "sort([*].s)[-2:]",
        "sort_by([?k], &k)[*].id",
        "reverse(sort_by([?k], &k))[0]",
        "@ | [?k > `1`].id",
        "max_by(reverse([?k]), &k).id",
    ):
        assert _read(table_id, expression) == _expected(expression, collection), expression
    assert _read(table_id, "map(&k, @)") == ("answer", "[3, 1, 2, 1.0, 3, null, 2, null, 3, 1, 2, 1.0]")
    assert _read(table_id, "max_by(reverse([?k]), &k).id") == ("answer", "8")  # the first best of the reversed
    # Keys in the order PostgreSQL's JSONB keeps a document's (the table is made as a document, then moved).
    members = {"m2": {"id": 4}, "m4": {"id": 2}, "m9": {"id": 9}}
    table = make_table(owner, name="members", data=members, storage="document")
    make_tool(owner, table=table, type="query_data", name="members_query", json_path="")
    assert records.table_to_rows(table.pk) is True
    member_table = table.pk
    for expression in ("keys(@)", "values(@)", "values(@)[?id > `2`].id", "length(@)"):
        assert _read(member_table, expression) == _expected(expression, members), expression


def test_a_rows_filter_failing_on_a_late_record_is_the_whole_lists_invalid_query(streamed_rows):
    collection = [{"id": number, "a": number} for number in range(300)] + [{"id": 300, "a": "300"}]
    table_id = streamed_rows(collection)
    expression = "[?a >= `0`].id | [0]"
    kind, (code, message) = _read(table_id, expression)
    assert _expected(expression, collection) == (kind, (code, message))
    assert code == ErrorCode.INVALID_QUERY
    assert "'>=' not supported between instances of 'str' and 'int'" in message


def test_an_object_collection_streams_its_values_in_the_records_order(streamed_rows, make_table, make_tool, owner):
    members = {f"k{number:02}": {"id": number, "a": number % 4} for number in (5, 1, 9, 3, 7, 2, 8)}
    table = make_table(owner, name="members", data=members, storage="document")
    make_tool(owner, table=table, type="query_data", name="members_query", json_path="")
    assert records.table_to_rows(table.pk) is True  # a root object moves once its tools say it holds records
    assert TableCollection.objects.get(table=table).kind == "object"
    stored = records.read(table.pk, 1, Mount("", "id"), get_all_data, {})  # gathered: the rows' order
    by_position = TableRecord.objects.filter(collection__table=table).order_by("position").values_list("key", flat=True)
    assert list(stored) == list(by_position)
    assert sorted(stored) == sorted(members)
    for expression in ("*.id", "values(@)[?a > `1`].id", "*[?a == `1`] | [0]", "length(*[?a > `0`])"):
        assert streamed.plan(expression, "object") is not None
        assert _read(table.pk, expression) == _expected(expression, stored), expression
    assert _read(table.pk, "*.id") == ("answer", json.dumps([member["id"] for member in stored.values()]))


#
# Reductions: a top-k or an extreme keeps only the items its answer depends on
#

TOPK_HEADS = ["@", "[?{pred}]", "[*]", "[*].{{k: k, s: s, id: id}}", "[?{pred}].{{k: k, id: id}}", "[].n"]
TOPK_PREDICATES = ["k > `0`", "s != 'b'", "`true`", "id < `20`", "v > `1`"]  # `v` mixes numbers and strings
TOPK_KEYS = ["k", "s", "to_number(k)", "length(n)", "to_string(k)", "id", "k || s", "abs(k)", "@"]
TOPK_ORDERS = [
    "sort_by({head}, &{key})",
    "reverse(sort_by({head}, &{key}))",
    "{head} | sort_by(@, &{key}) | reverse(@) | reverse(@)",
    "reverse({head})",
]
BOUNDED_SELECTORS = [
    "[0]", "[-1]", "[2]", "[-3]", "[:3]", "[-3:]", "[1:4]", "[-4:-1]", "[:5:2]", "[-1:-5:-1]", "[3::-1]",
    "[:-3:-1]", "[:0]", "[5:2]", "[-2:]",
]  # fmt: skip
TOPK_AFTER = ["", ".id", ".{id: id, k: k}", " | length(@)", " | [0]", ".s"]
EXTREMES = [
    "max_by({head}, &{key})",
    "min_by({head}, &{key})",
    "max([?{pred}].k)",
    "min([*].s)",
    "max([*].v)",
    "min([].n)",
    "max_by({head}, &{key}).id",
]


def _keyed_record(rng: random.Random, index: int, spoiled: bool) -> Any:
    record: dict[str, Any] = {
        "id": index,
        "k": rng.choice([0, 1, 2, 2.0, 3, -1, 1.5]),  # ties, and 2 / 2.0: equal keys told apart in the answer
        "s": rng.choice(["a", "b", "ab", ""]),
        "n": [rng.choice([1, 2]) for _ in range(rng.randrange(3))],
        "v": rng.choice([1, 2, 3]),
    }
    if spoiled and rng.random() < 0.15:
        field = rng.choice(["k", "s", "n", "v"])
        record[field] = rng.choice([None, True, "x", 7, [1], {"a": 1}])
        if rng.random() < 0.2:
            del record[field]
    if spoiled and rng.random() < 0.03:
        return rng.choice([None, 5, "z"])  # not every element of a collection is a record
    return record


def _keyed_collection(rng: random.Random) -> list:
    spoiled = rng.random() < 0.5
    return [_keyed_record(rng, index, spoiled) for index in range(rng.randrange(0, 30))]


def _reduced_expression(rng: random.Random) -> str:
    head = rng.choice(TOPK_HEADS).format(pred=rng.choice(TOPK_PREDICATES))
    key = rng.choice(TOPK_KEYS)
    if rng.random() < 0.25:
        return rng.choice(EXTREMES).format(head=head, key=key, pred=rng.choice(TOPK_PREDICATES))
    ordered = rng.choice(TOPK_ORDERS).format(head=head, key=key)
    selector = rng.choice(BOUNDED_SELECTORS)
    shaped = f"({ordered}){selector}" if "|" in ordered else f"{ordered}{selector}"
    return shaped + rng.choice(TOPK_AFTER)


def _reduced(expression: str, collection: list, chunk: int, *, limit: int = 10**9) -> tuple[str, Any]:
    decomposed = streamed.plan(expression, "array")
    assert decomposed is not None, expression
    assert decomposed.reduce is not None, expression
    try:
        answer = streamed.run(expression, decomposed, _in_chunks(_rows(collection), chunk), "array", limit=limit)
    except ToolError as error:
        return "error", (error.code, str(error))
    return "answer", json.dumps(answer)


def test_a_slice_bound_names_the_items_it_can_take_and_the_same_slice_of_them_is_the_whole_lists():
    bounds = [None, *range(-7, 8)]
    checked = 0
    for start in bounds:
        for stop in bounds:
            for step in (None, 1, 2, 3, -1, -2, -3):
                bound = streamed.slice_bound(start, stop, step)
                if bound is None:
                    continue
                end, k = bound
                for length in range(12):
                    whole = list(range(length))
                    kept = whole[:k] if end == "first" else whole[max(0, length - k) :]
                    assert kept[start:stop:step] == whole[start:stop:step], (start, stop, step, length)
                    checked += 1
    assert checked == 10_752
    assert streamed.slice_bound(None, None, None) is None
    assert streamed.slice_bound(None, None, -1) is None
    assert streamed.slice_bound(2, -2, None) is None
    assert streamed.slice_bound(0, 5, 0) is None  # the library's own error, from the gathered list
    assert streamed.slice_bound(-5, None, None) == ("last", 5)
    assert streamed.slice_bound(None, 10, None) == ("first", 10)


def test_the_shapes_that_do_not_decompose_per_record_reduce():
    shapes = {
        "sort_by(@, &length(items))[:10]": streamed.TopK(k=10, largest=False),
        "sort_by([?status=='paid'], &to_number(total))[-5:].id": streamed.TopK(k=5, largest=True),
        "reverse(sort_by(@, &x))[:3]": streamed.TopK(k=3, largest=True),
        "sort_by(@, &x) | reverse(@) | [-2]": streamed.TopK(k=2, largest=False),
        "sort_by(@, &x)[0].id": streamed.TopK(k=1, largest=False),
        "[?a] | [-3:]": streamed.TopK(k=3, largest=True),
        "[3::-1]": streamed.TopK(k=4, largest=False),
    }
    for expression, expected in shapes.items():
        found = streamed.plan(expression, "array")
        assert found is not None, expression
        assert isinstance(found.reduce, streamed.TopK), expression
        assert (found.reduce.k, found.reduce.largest) == (expected.k, expected.largest), expression
        assert (found.reduce.key is None) == ("sort_by" not in expression), expression
    for expression in ("max_by(@, &length(items))", "min_by([?a], &b).id", "max([*].total)", "min([].x)"):
        found = streamed.plan(expression, "array")
        assert found is not None, expression
        assert isinstance(found.reduce, streamed.Extreme), expression
    found = streamed.plan("sort_by(*, &a)[:2]", "object")
    assert found is not None
    assert isinstance(found.reduce, streamed.TopK)
    for expression in ("sort_by(@, &x)[1:-1]", "sort_by(@, &x)[::2]", "sort_by(@, &x) | [?a] | [0]", "sort(@)"):
        assert streamed.plan(expression, "array") is None, expression
    for expression, (k, largest) in {"sort(@)[0]": (1, False), "sort([*].k)[-3:]": (3, True)}.items():
        found = streamed.plan(expression, "array")
        assert found is not None, expression
        assert isinstance(found.reduce, streamed.TopK), expression
        assert (found.reduce.k, found.reduce.largest) == (k, largest), expression
    for expression in ("[1:-1]", "[::2]", "[::-1].id", "[-2:1:-1] | length(@)"):
        found = streamed.plan(expression, "array")
        assert found is not None, expression
        assert isinstance(found.reduce, streamed.Every), expression
    assert streamed.plan("[::0]", "array") is None  # the library's own error, from the gathered list
    found = streamed.plan("sort_by([?a], &x)[1:-1]", "array")  # decomposes, keeps every match: no reduction
    assert found is not None
    assert found.reduce is None


def _generated_reductions(rng: random.Random, count: int, expression_of: Any) -> dict[str, int]:
    """`count` generated reductions over generated collections in chunks of 1, 2, 3 or 7, each answering as
    jmespath over the whole list; how many answered and failed."""
    outcomes = {"answer": 0, "error": 0}
    for _ in range(count):
        collection = _keyed_collection(rng)
        expression = expression_of(rng)
        expected = _expected(expression, collection)
        assert _reduced(expression, collection, rng.choice([1, 2, 3, 7])) == expected, (expression, collection)
        outcomes[expected[0]] += 1
    return outcomes


def test_generated_top_k_and_extreme_queries_answer_as_jmespath_in_small_chunks():
    outcomes = _generated_reductions(random.Random(1729), 4000, _reduced_expression)
    assert outcomes == {"answer": 2765, "error": 1235}  # both sides of the proof exercised


def test_ties_keep_the_collections_order_and_equal_numbers_stay_the_ones_met_first():
    collection = [{"id": index, "k": [2, 2.0, 1, 2, 1.0, 3][index % 6]} for index in range(60)]
    for expression in (
        "sort_by(@, &k)[:7].[id, k]",
        "sort_by(@, &k)[-7:].[id, k]",
        "reverse(sort_by(@, &k))[:4].[id, k]",
        "max_by(@, &k).id",
        "min_by(@, &k).id",
        "max([*].k)",
        "min([*].k)",
    ):
        assert _reduced(expression, collection, 4) == _expected(expression, collection), expression
    assert _reduced("sort_by(@, &k)[:3].[id, k]", collection, 4) == ("answer", "[[2, 1], [4, 1.0], [8, 1]]")
    assert _reduced("max([*].k)", collection, 4) == ("answer", "3")


def test_a_sort_key_of_another_type_fails_as_the_library_does_wherever_it_is_and_whatever_k_is():
    collection = [{"id": index, "k": index} for index in range(100)]
    collection[71]["k"] = "71"
    for expression in ("sort_by(@, &k)[:1].id", "sort_by(@, &k)[-1]", "max_by(@, &k)", "min([*].k)"):
        kind, (code, message) = _reduced(expression, collection, 3)
        assert (kind, (code, message)) == _expected(expression, collection), expression
        assert code == ErrorCode.INVALID_QUERY
    assert _reduced("sort_by(@, &k)[0].id", collection, 3)[1][1] == (
        "INVALID_QUERY: The JMESPath expression failed: In function sort_by(), invalid type for value: 71, "
        "expected one of: ['number'], received: \"string\". Expression: sort_by(@, &k)[0].id"
    )
    assert "'>' not supported between instances of 'str' and 'int'" in _reduced("max_by(@, &k)", collection, 3)[1][1]


def test_a_failure_of_the_head_after_a_sort_keys_failure_is_the_one_raised():
    """The whole list's evaluation runs the filter over every record before sort_by sees a key."""
    collection = [{"id": index, "k": index, "v": 1} for index in range(50)]
    collection[4]["k"] = None  # sort_by fails on it...
    collection[40]["v"] = "1"  # ...but the filter fails first, on this later record
    expression = "sort_by([?v > `0`], &k)[:2].id"
    kind, (code, message) = _reduced(expression, collection, 3)
    assert (kind, (code, message)) == _expected(expression, collection)
    assert "'>' not supported between instances of 'str' and 'int'" in message
    collection[40]["v"] = 1
    kind, (code, message) = _reduced(expression, collection, 3)
    assert (kind, (code, message)) == _expected(expression, collection)
    assert (
        "In function sort_by(), invalid type for value: None, expected one of: ['number'], received: \"null\""
        in message
    )


def test_a_top_k_keeps_k_items_whatever_the_collection_and_is_refused_when_k_items_pass_the_bound():
    collection = [{"id": number, "pad": "p" * 100, "k": (number * 7919) % 3001} for number in range(3_000)]
    limit = 20_000  # the collection is ~380,000 bytes; ten records ~1,300
    expected = _expected("sort_by(@, &k)[-10:].id", collection)
    assert _reduced("sort_by(@, &k)[-10:].id", collection, 100, limit=limit) == expected
    assert _reduced("max_by(@, &k).id", collection, 100, limit=limit) == _expected("max_by(@, &k).id", collection)
    kind, (code, message) = _reduced("sort_by(@, &k)[:1000].id", collection, 100, limit=limit)
    assert (kind, code) == ("error", ErrorCode.QUERY_TOO_EXPENSIVE)
    assert "keeps more than 20000 bytes of results" in message


def test_generated_top_k_queries_over_a_rows_table_answer_as_jmespath(streamed_rows):
    rng = random.Random(1730)
    for _ in range(10):
        collection = [record for record in _keyed_collection(rng) if isinstance(record, dict)]
        table_id = streamed_rows(collection)
        for _ in range(25):
            expression = _reduced_expression(rng)
            assert streamed.plan(expression, "array") is not None
            assert _read(table_id, expression) == _expected(expression, collection), (expression, collection)


def test_a_rows_top_k_over_more_records_than_the_bound_answers_and_honours_the_narrowing(streamed_rows, settings):
    settings.TOOLHUB_MAX_EVALUATED_BYTES = 2_000
    collection = [
        {"id": number, "items": [0] * (number % 7), "team": ["red", "blue"][number % 2]} for number in range(200)
    ]
    table_id = streamed_rows(collection)
    assert _read(table_id, "sort_by(@, &length(items))[-3:].id") == ("answer", "[181, 188, 195]")
    assert _read(table_id, "max_by(@, &length(items)).id") == ("answer", "6")
    blue = {"team": "blue"}
    assert _read(table_id, "sort_by(@, &length(items))[-3:].id", blue) == ("answer", "[167, 181, 195]")
    assert _read(table_id, "reverse(sort_by(@, &length(items)))[:2].id", blue) == ("answer", "[195, 181]")
    kind, (code, message) = _read(table_id, "sort_by(@, &id)[1:-1].id")  # not bounded: gathered, refused
    assert (kind, code) == ("error", ErrorCode.QUERY_TOO_EXPENSIVE)
    assert "needs more than 2000 bytes of records evaluated in the server" in message


SORT_HEADS = ["@", "[*].k", "[*].s", "[*].v", "[].n", "[?{pred}].k", "[*].to_number(k)"]
SORT_ORDERS = ["sort({head})", "reverse(sort({head}))", "{head} | sort(@) | reverse(@)"]
SORT_AFTER = ["", " | length(@)", " | [0]", " | to_string(@)"]
ANY_SLICE_BOUNDS = [None, -4, -2, -1, 0, 1, 2, 5]
RECORD_AFTER = ["", ".id", ".k", " | length(@)", " | [0]", ".{id: id, s: s}", " | [?k > `1`].id"]


def _sorted_expression(rng: random.Random) -> str:
    head = rng.choice(SORT_HEADS).format(pred=rng.choice(TOPK_PREDICATES))
    ordered = rng.choice(SORT_ORDERS).format(head=head)
    selector = rng.choice(BOUNDED_SELECTORS)
    shaped = f"({ordered}){selector}" if "|" in ordered else f"{ordered}{selector}"
    return shaped + rng.choice(SORT_AFTER)


def _any_slice(rng: random.Random) -> str:
    start, stop = rng.choice(ANY_SLICE_BOUNDS), rng.choice(ANY_SLICE_BOUNDS)
    step = rng.choice([None, 1, 2, 3, -1, -2, -3])
    text = f"[{'' if start is None else start}:{'' if stop is None else stop}"
    return text + ("]" if step is None else f":{step}]")


def test_generated_sort_selections_and_any_slice_of_the_records_answer_as_jmespath_in_small_chunks():
    """`sort(@)` before a bounded selector is a top-k on the items themselves (sort's own type checks and errors);
    a slice of the records whose items depend on the length keeps only its items when the length is known (and
    every item, the whole tail run after, when it is not)."""
    rng = random.Random(2929)
    outcomes = _generated_reductions(rng, 2000, _sorted_expression)
    assert outcomes == {"answer": 1254, "error": 746}  # both sides of the proof exercised
    outcomes = {"answer": 0, "error": 0}
    for _ in range(2000):
        collection = _keyed_collection(rng)
        expression = _any_slice(rng) + rng.choice(RECORD_AFTER)
        expected = _expected(expression, collection)
        decomposed = streamed.plan(expression, "array")
        assert decomposed is not None, expression
        assert isinstance(decomposed.reduce, (streamed.Every, streamed.TopK)), expression  # TopK: within k of an end
        chunks = _in_chunks(_rows(collection), rng.choice([1, 2, 3, 7]))
        for length in (len(collection), None):
            try:
                answer = (
                    "answer",
                    json.dumps(streamed.run(expression, decomposed, chunks, "array", limit=10**9, length=length)),
                )
            except ToolError as error:
                answer = ("error", (error.code, str(error)))
            assert answer == expected, (expression, collection, length)
        outcomes[expected[0]] += 1
    assert outcomes == {"answer": 1999, "error": 1}  # a slice fails on nothing; the tail after it can


def test_a_slice_of_the_records_keeps_only_its_items_and_the_bound_counts_those(streamed_rows, settings):
    settings.TOOLHUB_MAX_EVALUATED_BYTES = 2_000
    collection = [{"id": number, "pad": "p" * 20, "k": number % 7} for number in range(200)]  # ~7,800 bytes
    table_id = streamed_rows(collection)
    for expression in ("[::50].id", "[-3::-60].id", "[1:-1:40]", "sort([*].k)[-2:]", "sort([*].k)[0]"):
        assert _read(table_id, expression) == _expected(expression, collection), expression
    assert _read(table_id, "[::50].id") == ("answer", "[0, 50, 100, 150]")
    assert _read(table_id, "[::-1].id | [0]")[0] == "error"  # every record kept: over the bound
    kind, (code, message) = _read(table_id, "[::-1].id | [0]")
    assert (kind, code) == ("error", ErrorCode.QUERY_TOO_EXPENSIVE)
    assert "keeps more than 2000 bytes of results" in message
    settings.TOOLHUB_MAX_EVALUATED_BYTES = 10**6
    narrowed = [record for record in collection if record["k"] == 3]  # a narrowing: the length is not known first
    for expression in ("[::-1].id", "[1:-1].id", "[::3] | length(@)"):
        assert _read(table_id, expression, {"k": 3}) == _expected(expression, narrowed), expression
        assert _read(table_id, expression) == _expected(expression, collection), expression


#
# Multi-selects over the whole collection, branch by branch (tools_app.data_access.multiselect)
#

# Branches over the records, each answered by the path it takes alone: compiled to SQL, streamed (a head and its
# tail, a top-k, an extreme, a sort), gathered (neither: `to_array(@)`, two arguments that depend on the data).
BRANCH_SHAPES = [
    "length(@)",
    "[0]",
    "[?k > `1`].id",
    "map(&k, @)",
    "sort_by(@, &k)[1:-1].id",
    "to_array(@)[1].id",
    "contains([*].k, [0].k)",
    "[*].s | join(',', @)",
    "{inner: length([?v > `1`]), last: [-1].id}",
]
# What a multi-select is piped into from: values that are never null (a split is made), and some that may be.
PIPED_HEADS = ["[?{pred}]", "[*].{{k: k, id: id, v: v}}", "reverse(@)", "sort_by(@, &k)", "[].n", "[0]", "[-1].n"]
PIPED_BRANCHES = ["length(@)", "[:3]", "[0]", "max_by(@, &k)", "sort_by(@, &s)[-2:]", "[?v > `1`] | length(@)", "@"]


def _branch(rng: random.Random) -> str:
    return rng.choice(
        [rng.choice(BRANCH_SHAPES), _reduced_expression(rng), _sorted_expression(rng), _array_expression(rng)]
    )


def _multiselect_expression(rng: random.Random) -> str:
    if rng.random() < 0.3:
        head = rng.choice(PIPED_HEADS).format(pred=rng.choice(TOPK_PREDICATES))
        branches = [rng.choice(PIPED_BRANCHES) for _ in range(rng.randrange(1, 4))]
    else:
        head, branches = "", [_branch(rng) for _ in range(rng.randrange(1, 4))]
    if rng.random() < 0.5:
        selected = "[" + ", ".join(branches) + "]"
    else:
        selected = "{" + ", ".join(f"b{index}: {branch}" for index, branch in enumerate(branches)) + "}"
    return f"{head} | {selected}" if head else selected


def test_every_generated_expression_written_out_parses_back_to_its_tree():
    rng = random.Random(4242)
    generators = [_array_expression, _reduced_expression, _sorted_expression, _multiselect_expression]
    generators += [lambda rng: _levels_expression(rng, LEVEL_HEADS), _object_expression]
    for _ in range(3000):
        expression = rng.choice(generators)(rng)
        tree = jmespath.compile(expression).parsed
        assert jmespath.compile(multiselect.expression_text(tree)).parsed == tree, expression


def test_what_splits_into_branches_and_what_stays_whole():
    assert multiselect.split("{n: length(@), first: [0]}", "array") == multiselect.Split(
        ("n", "first"), ("length(@)", "[0]")
    )
    assert multiselect.split("[?p] | [length(@), [:3].id]", "array") == multiselect.Split(
        None, ("[?p] | length(@)", "[?p] | [:3].id")
    )
    assert multiselect.split("{n: length(@)}", "object") == multiselect.Split(("n",), ("length(@)",))
    for expression, kind in (
        ("[0] | {a: x}", "array"),  # the first record may be null: the multi-select is then null
        ("[?p] | {a: x}", "object"),  # a filter over an object is null
        ("foo | [a, b]", "array"),
        ("[*].{a: a}", "array"),  # a multi-select per record: a projection
        ("{a: a} | b", "array"),
    ):
        assert multiselect.split(expression, kind) is None, expression


@pytest.fixture
def counted_paths(monkeypatch: Any) -> dict[str, int]:
    """How many reads each path answered: a compiled statement's answer, a streamed run, a gathered collection."""
    paths = {"compiled": 0, "streamed": 0, "gathered": 0}

    def counting(name: str, function: Any, answered: Any = lambda _answer: True) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            answer = function(*args, **kwargs)
            paths[name] += bool(answered(answer))
            return answer

        return counted

    monkeypatch.setattr(records, "_run_compiled", counting("compiled", records._run_compiled, lambda a: a is not None))
    monkeypatch.setattr(streamed, "run", counting("streamed", streamed.run))
    monkeypatch.setattr(records, "_value", counting("gathered", records._value))
    return paths


def test_generated_multi_selects_over_a_rows_table_answer_as_jmespath_branch_by_branch(
    db, monkeypatch, owner, counted_paths
):
    """Compiled, streamed and gathered branches side by side, and pipes into multi-selects, in chunks of 3, over
    the whole collection and under a narrowing."""
    monkeypatch.setattr(records, "CHUNK", 3)
    make = _rows_tables(owner)
    rng = random.Random(3129)
    outcomes = {"answer": 0, "error": 0}
    keep = narrowing.keeps({"v": 1})
    for _ in range(8):
        collection = _keyed_collection(rng)
        table_id = make(collection)
        for _ in range(25):
            expression = _multiselect_expression(rng)
            expected = _expected(expression, collection)
            assert _read(table_id, expression) == expected, (expression, collection)
            outcomes[expected[0]] += 1
            within = [record for record in collection if keep(record)]  # each branch narrowed the same way
            assert _read(table_id, expression, {"v": 1}) == _expected(expression, within), (expression, within)
    assert outcomes == {"answer": 110, "error": 90}  # both sides of the proof exercised
    assert counted_paths == {"compiled": 282, "streamed": 210, "gathered": 38}  # every path answered branches


def test_the_first_failing_branch_is_the_error_whatever_the_later_branches_do(ungathered_rows_table):
    collection = [{"id": number, "k": number, "s": "abc"[number % 3]} for number in range(20)]
    collection[15] = {"id": 15, "k": "15", "s": 1}
    table_id = ungathered_rows_table(collection)
    for expression in (
        "{a: [?k > `1`].id, b: [?s > `1`].id}",  # both fail: the first one's error
        "{b: [?s > `1`].id, a: [?k > `1`].id}",
        "[length(@), max_by(@, &k), sort_by(@, &s)]",
        "[?k > `1`] | {n: length(@), ids: [:3].id}",  # what is piped in fails first
        "[?id > `10`] | {n: length(@), top: max_by(@, &k).id}",  # a branch after a first that answers
    ):
        expected = _expected(expression, collection)
        assert expected[0] == "error", expression
        assert _read(table_id, expression) == expected, expression
    kind, (code, message) = _read(table_id, "{a: [?k > `1`].id, b: [?s > `1`].id}")
    assert "'>' not supported between instances of 'str' and 'int'" in message
    assert message.endswith("Expression: {a: [?k > `1`].id, b: [?s > `1`].id}")


def test_a_summary_over_more_records_than_the_bound_answers_and_a_branch_over_it_still_refuses(
    ungathered_rows_table, settings, monkeypatch
):
    settings.TOOLHUB_MAX_EVALUATED_BYTES = 2_000
    statuses = ["shipped", "paid", "new"]
    collection = [
        {"id": number, "status": statuses[number % 3], "total": (number * 37) % 101, "pad": "p" * 30}
        for number in range(200)
    ]  # ~14,000 bytes of records
    table_id = ungathered_rows_table(collection)
    summaries = []
    for expression, answer in (
        ("{n: length(@), first: [0].id}", {"n": 200, "first": 0}),
        (
            "{total: length(@), shipped: length([?status=='shipped']), top: max_by(@, &total).id}",
            {"total": 200, "shipped": 67, "top": 30},
        ),
        ("[length(@), sum([*].total)]", [200, 10009]),
        ("[?status=='shipped'] | {n: length(@), ids: [:3].id}", {"n": 67, "ids": [0, 3, 6]}),
    ):
        assert _read(table_id, expression) == _expected(expression, collection) == ("answer", json.dumps(answer))
        summaries.append(expression)
        within = [record for record in collection if record["status"] == "paid"]
        assert _read(table_id, expression, {"status": "paid"}) == _expected(expression, within), expression
    refused = _read(table_id, "[*].pad")
    assert refused[0] == "error"
    assert refused[1][0] == ErrorCode.QUERY_TOO_EXPENSIVE
    assert _read(table_id, "{n: length(@), pads: [*].pad}") == refused
    # A refused branch is the answer even when a later branch fails (jmespath answers that branch first).
    assert _read(table_id, "[[*].pad, [?id > 'x']]") == refused
    monkeypatch.undo()  # gathering allowed again, and the expressions kept whole: refused, as before the split
    monkeypatch.setattr(multiselect, "split", lambda *_args: None)
    for expression in summaries:
        kind, (code, message) = _read(table_id, expression)
        assert (kind, code) == ("error", ErrorCode.QUERY_TOO_EXPENSIVE), expression
        assert "more than 2000 bytes" in message


def test_a_multi_select_whose_every_branch_would_gather_is_gathered_once(db, owner, counted_paths):
    collection = [{"id": number, "k": number % 4} for number in range(10)]
    table_id = _rows_tables(owner)(collection)
    expression = "{a: to_array(@)[1].id, b: contains([*].k, [0].k), c: [to_array(@)[-1].k]}"
    expected = ("answer", '{"a": 1, "b": true, "c": [1]}')
    assert _read(table_id, expression) == _expected(expression, collection) == expected
    assert counted_paths == {"compiled": 0, "streamed": 0, "gathered": 1}


def test_multi_selects_over_an_object_collection_answer_as_jmespath(streamed_rows, make_table, make_tool, owner):
    # Keys in the order PostgreSQL's JSONB keeps a document's (the table is made as a document, then moved).
    members = {f"k{number:02}": {"id": number, "a": number % 4} for number in (1, 2, 3, 5, 7, 8, 9)}
    members["k10"] = {"id": 10, "a": "x"}
    table = make_table(owner, name="members", data=members, storage="document")
    make_tool(owner, table=table, type="query_data", name="members_query", json_path="")
    assert records.table_to_rows(table.pk) is True
    for expression, answer in (
        ("{n: length(@), ks: keys(@)[:2], ids: *.id | [-2:]}", '{"n": 8, "ks": ["k01", "k02"], "ids": [9, 10]}'),
        ("values(@) | {n: length(@), first: [0].id}", '{"n": 8, "first": 1}'),
        ("[?a] | {n: length(@)}", "null"),  # a filter over an object is null, and so is a multi-select over it
        ("[[0], length(@)]", "[null, 8]"),
    ):
        assert _read(table.pk, expression) == _expected(expression, members) == ("answer", answer), expression
    expression = "{n: length(@), big: *.abs(a)}"  # abs fails on "x"
    assert _read(table.pk, expression) == _expected(expression, members)
    assert _read(table.pk, expression)[0] == "error"


def test_every_branch_runs_in_the_reads_one_snapshot_under_the_calls_one_budget(db, owner, monkeypatch):
    collection = [{"id": number, "k": number % 5} for number in range(30)]
    table_id = _rows_tables(owner)(collection)
    snapshots: list[int] = []
    budgets: list[Any] = []
    opened = records.snapshot
    run_compiled = records._run_compiled

    def counted_snapshot(table: int) -> Any:
        snapshots.append(table)
        return opened(table)

    def seen_budget(*args: Any, **kwargs: Any) -> Any:
        budgets.append(budget.active())
        return run_compiled(*args, **kwargs)

    monkeypatch.setattr(records, "snapshot", counted_snapshot)
    monkeypatch.setattr(records, "_run_compiled", seen_budget)
    expression = "{n: length(@), top: max_by(@, &k).id, ids: [?k == `4`].id | [:2], m: [length(@), [0].id]}"
    with enforced(Limits(cpu_ms=10**6, max_elements=10**9, max_bytes=10**9)) as current:
        assert _read(table_id, expression) == _expected(expression, collection)
    assert _read(table_id, expression) == ("answer", '{"n": 30, "top": 4, "ids": [4, 9], "m": [30, 0]}')
    assert snapshots == [table_id, table_id]  # one per read
    assert len(budgets) == 10  # every branch of both reads compiled, the nested list's two included
    assert all(seen is current for seen in budgets[:5])
