"""JMESPath compiled to SQL over records stored as rows (tools_app/data_access/sql_query.py), on the test
database's engine (SQLite by default, PostgreSQL with DATABASE_URL): every answer must be exactly
jmespath's, Python types and key order included, or the data must send the query to the evaluator.

The differential parts: the official compliance cases that apply to a collection (the given document is an
array or an object of records, or holds one under the expression's leading field), a seeded fuzz of
generated queries over generated collections, and a hypothesis-driven one. bench/sql_fuzz.py runs the same
comparison at 100,000 pairs.
"""

import copy
import json
import random
from pathlib import Path
from typing import Any

import jmespath
import pytest
from django.db import IntegrityError, connection, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jmespath import exceptions as jmespath_errors
from jmespath.parser import Parser

from tools_app.data_access.sql.codec import (
    jsonb_key_order,
    layout_at,
    layout_from_key,
    layout_key,
    layout_of,
    record_text,
    restore,
)
from tools_app.data_access.sql.indexes import (
    compound_answers,
    compound_statement,
    covering_fields,
    index_statements,
    less_selective_indexes,
    sync_indexes,
)
from tools_app.data_access.sql.plan import FieldTest, field_tests
from tools_app.data_access.sql.store import field_kinds, layouts_by_id, write_records
from tools_app.data_access.sql_query import (
    NotCompilable,
    compile_sql,
    compile_sql_expression,
    finish,
    run_sql,
    statement_for,
)
from tools_app.models import TableRecord
from tools_app.tests import sql_differential as differential
from tools_app.tests.sql_differential import canonical, dialect, reference, sql_outcome, store
from tools_app.validators import record_texts

COMPLIANCE_DIR = Path(__file__).parent / "jmespath_compliance"
# How many official cases apply to a collection and compile, per engine (SQLite refuses deep equality of
# arrays/objects and field names its JSON paths cannot spell).
COMPLIANCE_COMPILED = {"sqlite": 201, "postgresql": 206}
pytestmark = pytest.mark.filterwarnings("ignore:deprecated string literal syntax:PendingDeprecationWarning")


@pytest.fixture
def fuzz_table(make_table, owner):
    return make_table(owner, name="fuzz", data=[])


@pytest.fixture
def stored(fuzz_table):
    """stored(value): the collection written as rows (each call a new mount of one table)."""
    mounts = iter(range(10**6))

    def make(value: list | dict) -> differential.Stored:
        return store(fuzz_table, f"/m{next(mounts)}", value)

    return make


def answer(expression: str, stored_collection: differential.Stored) -> Any:
    """The SQL answer's value; fails when the query did not compile or the data sent it to the evaluator."""
    how, outcome = sql_outcome(expression, stored_collection)
    assert how == "sql", (how, outcome)
    assert outcome is not None
    assert outcome[0] == "ok"
    return outcome[1]


#
# The official compliance suite
#

_LEFT = {"subexpression", "projection", "filter_projection", "index_expression", "pipe", "value_projection"}
_LEFT |= {"flatten", "function_expression"}


def _collection_forms(given: Any, parsed: dict) -> list[tuple[Any, dict]]:
    """Ways to run a case over a collection: the given array or object itself, or the array or object under
    the expression's leading field with that field read as the mount (kept only when jmespath answers the same
    over it as over the whole document)."""
    forms: list[tuple[Any, dict]] = []
    if isinstance(given, list | dict):
        forms.append((given, parsed))
    if isinstance(given, dict):
        rewritten = copy.deepcopy(parsed)
        parent, leaf = None, rewritten
        while leaf.get("type") in _LEFT and leaf.get("children"):
            parent, leaf = leaf, leaf["children"][0]
        if leaf.get("type") == "field" and isinstance(given.get(leaf["value"]), list | dict):
            current = {"type": "current", "children": []}
            if parent is None:
                rewritten = current
            else:
                parent["children"][0] = current
            mounted = given[leaf["value"]]
            if reference(rewritten, copy.deepcopy(mounted)) == reference(parsed, copy.deepcopy(given)):
                forms.append((mounted, rewritten))
    return forms


def _compliance_cases() -> list[tuple[str, Any, dict]]:
    cases = []
    for path in sorted(COMPLIANCE_DIR.glob("*.json")):
        for group_index, group in enumerate(json.loads(path.read_text(encoding="utf-8"))):
            for case_index, case in enumerate(group["cases"]):
                try:
                    parsed = dict(Parser().parse(case["expression"]).parsed)
                except jmespath_errors.JMESPathError:
                    continue  # a syntax case: nothing to run
                for data, tree in _collection_forms(group["given"], parsed):
                    cases.append((f"{path.name}-{group_index}-{case_index}", data, tree))
    return cases


def _compiles(tree: dict, root: str) -> bool:
    try:
        compile_sql(tree, dialect=dialect(), root=root)
    except NotCompilable:
        return False
    return True


@pytest.mark.django_db
def test_compliance_cases_over_collections_answer_as_jmespath(stored):
    """Every official case that compiles over a collection gives jmespath's result or error, exactly."""
    # given
    cases = []
    for case_id, data, tree in _compliance_cases():
        root = "object" if isinstance(data, dict) else "array"
        if case_id not in {case[0] for case in cases} and _compiles(tree, root):
            cases.append((case_id, data, tree))
    differences = []
    answered_in_sql = 0
    # when
    for case_id, data, tree in cases:
        collection = stored(data)
        how, outcome = sql_outcome(tree, collection)
        answered_in_sql += how == "sql"
        expected = reference(tree, copy.deepcopy(data))
        if outcome != expected:
            differences.append((case_id, outcome, expected))
    # then
    assert differences == []
    assert len(cases) == COMPLIANCE_COMPILED[dialect()]
    assert answered_in_sql >= 150, answered_in_sql


#
# Generated queries over generated collections
#


@pytest.mark.django_db
def test_seeded_fuzz_has_no_difference_from_jmespath(stored):
    """600 generated query/collection pairs (seed 7): no difference, and most compiled ones answered in SQL."""
    # given
    rng = random.Random(7)
    tally = differential.Tally()
    # when
    for _ in range(30):
        collection = stored(differential.random_collection(rng))
        for _ in range(20):
            tally.add(differential.query(rng, collection.root), collection)
    # then
    assert tally.differences == []
    assert tally.pairs == 600
    assert tally.sql > tally.evaluator, tally.line()
    assert tally.sql >= 200, tally.line()


@pytest.mark.django_db
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_generated_pairs_have_no_difference_from_jmespath(stored, seed):
    """Hypothesis-chosen seeds of the generators: no difference."""
    # given
    rng = random.Random(seed)
    collection = stored(differential.random_collection(rng))
    tally = differential.Tally()
    # when
    for _ in range(10):
        tally.add(differential.query(rng, collection.root), collection)
    # then
    assert tally.differences == []


#
# Exact values
#


@pytest.mark.django_db
def test_numbers_come_back_with_their_python_type(stored):
    """3 vs 3.0, integers beyond 64 bits, floats that JSONB would turn into integers, as jmespath returns them."""
    # given
    values = [3, 3.0, 10**20, -(10**19), 1e16, 1e23, 1.5e-07, 0.1, 2**63]
    collection = stored([{"n": value} for value in values])
    # when
    result = answer("[*].n", collection)
    # then
    assert result == canonical(values)
    assert [type(value) for value in jmespath.search("[*].n", collection.read_back())] == [type(v) for v in values]


@pytest.mark.django_db
def test_objects_keep_their_key_order(stored):
    """Records and nested objects come back with their keys in the written order (not JSONB's)."""
    # given
    records = [
        {"status": "new", "id": 1, "nested": {"zz": 1, "a": {"y": 2, "x": 1}}, "items": [{"sku": "A", "qty": 1}]},
        {"id": 2, "status": "shipped", "nested": {"b": 1, "a": 2}, "items": []},
    ]
    collection = stored(records)
    # when
    whole = answer("[?id > `0`]", collection)
    nested = answer("[*].nested", collection)
    picked = answer("max_by(@, &id).nested", collection)
    # then
    assert whole == canonical(records)
    assert nested == canonical([records[0]["nested"], records[1]["nested"]])
    assert picked == canonical({"b": 1, "a": 2})


@pytest.mark.django_db
def test_strings_order_by_code_point(stored):
    """sort_by and string comparisons follow Python's code point order, unicode included."""
    # given
    names = ["é", "z", "😀", "Z", "a", "", "ab", "\u00e9a"]
    collection = stored([{"name": name, "i": index} for index, name in enumerate(names)])
    # when
    ordered = answer("sort_by(@, &name)[*].name", collection)
    greater = answer("[?name > 'z'].i", collection)
    # then
    assert ordered == canonical(sorted(names))
    assert greater == canonical([0, 2, 7])


@pytest.mark.django_db
def test_equality_follows_jmespath(stored):
    """1 == 1.0; "1" != 1; true != 1 at the top level; null matches missing fields."""
    # given
    collection = stored([{"v": 1}, {"v": 1.0}, {"v": "1"}, {"v": True}, {"w": 1}, {"v": None}, {"v": [1]}])
    # when
    ones = answer("[?v == `1`] | length(@)", collection)
    strings = answer("[?v == '1'] | length(@)", collection)
    trues = answer("[?v == `true`] | length(@)", collection)
    nulls = answer("[?v == `null`] | length(@)", collection)
    not_one = answer("[?v != `1`] | length(@)", collection)
    # then
    assert (ones, strings, trues, nulls, not_one) == (("int", 2), ("int", 1), ("int", 1), ("int", 2), ("int", 5))


@pytest.mark.django_db
def test_ordering_of_other_types_is_false_and_of_a_number_with_a_string_goes_to_the_evaluator(stored):
    """`<` with a boolean or null is false; a number against a string raises in jmespath, so the rows send the
    query to the evaluator, which raises jmespath's TypeError."""
    # given
    quiet = stored([{"v": True}, {"v": None}, {"v": [1]}, {"v": 2}])
    mixed = stored([{"v": 2}, {"v": "a"}])
    query = compile_sql_expression("[?v > `1`].v", dialect(), "array")
    assert query is not None
    # when
    quiet_result = answer("[?v > `1`].v", quiet)
    with connection.cursor() as cursor:
        mixed_answer = run_sql(query, cursor, table=differential.RECORDS, collection_id=mixed.collection_id)
    # then
    assert quiet_result == canonical([2])
    assert mixed_answer is None
    with pytest.raises(TypeError, match="not supported between instances of 'str' and 'int'"):
        jmespath.search("[?v > `1`].v", mixed.read_back())


@pytest.mark.django_db
def test_an_error_cut_off_by_short_circuit_is_no_error(stored):
    """`a && b`: b is evaluated only where a is truthy, so a string there raises nothing."""
    # given
    collection = stored([{"ok": False, "v": "a"}, {"ok": True, "v": 5}])
    # when
    result = answer("[?ok && v > `1`].v", collection)
    # then
    assert result == canonical([5])


@pytest.mark.parametrize(
    ("expression", "records", "error"),
    [
        ("sort_by(@, &v)", [{"v": 1}, {"v": "a"}], jmespath_errors.JMESPathTypeError),
        ("sort_by(@, &v)", [{"v": 1}, {"w": 1}], jmespath_errors.JMESPathTypeError),
        ("max_by(@, &v)", [{"v": 1}, {"v": "a"}], TypeError),
        ("sum([*].v)", [{"v": 1}, {"v": "2"}], jmespath_errors.JMESPathTypeError),
        ("max([*].v)", [{"v": 1}, {"v": True}], jmespath_errors.JMESPathTypeError),
        ("[?contains(tags, 'x')]", [{"tags": ["x"]}, {"name": "no tags"}], jmespath_errors.JMESPathTypeError),
        ("[?starts_with(name, 'a')]", [{"name": "ab"}, {"name": 1}], jmespath_errors.JMESPathTypeError),
        ("[?contains(name, `1`)]", [{"name": "a1"}], TypeError),
    ],
)
@pytest.mark.django_db
def test_data_that_makes_jmespath_raise_goes_to_the_evaluator(stored, expression, records, error):
    """Where jmespath raises, run_sql answers None (the evaluator then raises the library's own error)."""
    # given
    collection = stored(records)
    query = compile_sql_expression(expression, dialect(), "array")
    assert query is not None
    # when
    with connection.cursor() as cursor:
        result = run_sql(query, cursor, table=differential.RECORDS, collection_id=collection.collection_id)
    # then
    assert result is None
    with pytest.raises(error):
        jmespath.search(expression, records)


@pytest.mark.django_db
def test_aggregates_of_empty_and_equal_values(stored):
    """sum of nothing is 0, avg/max of nothing null; max/min return the first of equal values (1 before 1.0);
    floats add up left to right as in Python."""
    # given
    collection = stored([{"v": 1}, {"v": 1.0}, {"w": 0.1}, {"w": 0.2}, {"w": 0.3}])
    # when
    results = {
        expression: answer(expression, collection)
        for expression in (
            "sum([?x].v)",
            "avg([?x].v)",
            "max([?x].v)",
            "max([*].v)",
            "min([*].v)",
            "sum([*].w)",
            "avg([*].w)",
            "avg([*].v)",
        )
    }
    # then
    assert results == {
        "sum([?x].v)": ("int", 0),
        "avg([?x].v)": ("NoneType", None),
        "max([?x].v)": ("NoneType", None),
        "max([*].v)": ("int", 1),
        "min([*].v)": ("int", 1),
        "sum([*].w)": ("float", repr(0.1 + 0.2 + 0.3)),
        "avg([*].w)": ("float", repr((0.1 + 0.2 + 0.3) / 3)),
        "avg([*].v)": ("float", "1.0"),
    }


@pytest.mark.django_db
def test_the_brief_shapes_compile_and_answer(stored):
    """The shapes tools use most, over order-like records."""
    # given
    records = [
        {"id": index, "status": ["new", "shipped"][index % 2], "total": index * 111.5, "tags": ["t"] * (index % 3)}
        for index in range(12)
    ]
    collection = stored(records)
    expressions = [
        "[?status=='shipped' && total > `500`].id",
        "length([?total > `100`])",
        "sort_by([?status=='new'], &total)[:2].id",
        "[?contains(tags, 't')].{id: id, total: total}",
        "max_by(@, &total).id",
        "min_by([?starts_with(status, 'sh')], &total).[id, status]",
        "sum([*].total)",
        "avg([*].id)",
        "[?!(status == 'new') || ends_with(status, 'ew')] | [-3:].id",
    ]
    # when
    results = {expression: sql_outcome(expression, collection) for expression in expressions}
    # then
    assert results == {expression: ("sql", reference(expression, records)) for expression in expressions}


@pytest.mark.django_db
def test_objects_of_records_by_key(stored):
    """An object of records: values(@), *, keys(@) and length(@) reach the records in order."""
    # given
    records = {"k2": {"n": 2}, "k1": {"n": 1}, "k3": {"m": 3}}
    collection = stored(records)
    expressions = ["keys(@)", "length(@)", "*.n", "values(@)[?n > `1`]", "sort_by(values(@)[?n], &n)[*].n"]
    # when
    results = {expression: sql_outcome(expression, collection) for expression in expressions}
    # then
    assert results == {expression: ("sql", reference(expression, records)) for expression in expressions}


@pytest.mark.parametrize(
    "expression",
    [
        "foo",
        "@.a",
        "[*].a[*]",
        "[::-1]",
        "[?length(a) > `1`]",
        "[?a][:2]",
        "{a: a}",
        "[].a",
        "sort_by(@, &a).b",
        "[?contains(a, `[1]`)]",
        "map(&{a: a}, @)",
        "[*].{a: a || b}",
    ],
)
def test_shapes_without_an_exact_sql_form_do_not_compile(expression):
    """What the compiler cannot answer exactly, it refuses: the caller evaluates in Python."""
    # given
    parsed = dict(Parser().parse(expression).parsed)
    # when / then
    for engine in ("sqlite", "postgresql"):
        with pytest.raises(NotCompilable):
            compile_sql(parsed, dialect=engine)


@pytest.mark.parametrize(
    "expression",
    ['[?"a\\"b" == `1`]', '[?a == `[2, "x"]`]', "[?a == `100000000000000000000`]"],
)
def test_sqlite_refuses_what_its_json_paths_and_comparisons_cannot_do(expression):
    """A field name holding a quote, deep equality of arrays, an integer literal beyond 64 bits: SQLite
    refuses them; PostgreSQL compiles them."""
    # given
    parsed = dict(Parser().parse(expression).parsed)
    # when
    compile_sql(parsed, dialect="postgresql")
    # then
    with pytest.raises(NotCompilable):
        compile_sql(parsed, dialect="sqlite")


def test_values_are_parameters_and_names_are_quoted():
    """A literal travels as a parameter; a field name is inlined quoted, `%` doubled for the driver."""
    # given
    query = compile_sql_expression("[?\"it's %s\" == 'x; DROP TABLE t']", "postgresql", "array")
    assert query is not None
    # when
    statement = query.statement(table="records", collection_id=5)
    # then
    assert "'it''s %%s'" in statement.sql
    assert "DROP" not in statement.sql
    assert statement.params == ("x; DROP TABLE t",)
    assert "collection_id = 5" in statement.sql


#
# Indexes
#


@pytest.mark.django_db
def test_an_expression_index_on_a_field_serves_the_filter(stored):
    """With the collection's index of docs/tables-at-scale.md on `status`, the engine's plan for the filter uses it."""
    # given
    # 40 statuses of 50 records: selective enough that the engines prefer the index to the collection's scan.
    collection = stored([{"id": index, "status": f"status-{index % 40}"} for index in range(2000)])
    table = differential.RECORDS
    where = f"WHERE collection_id = {collection.collection_id}"
    if dialect() == "postgresql":
        index = f"CREATE INDEX status_idx ON {table} (((data ->> 'status') COLLATE \"C\")) {where}"
        explain = "EXPLAIN "
    else:
        index = f"""CREATE INDEX status_idx ON {table} ((data ->> '$."status"')) {where}"""
        explain = "EXPLAIN QUERY PLAN "
    query = compile_sql_expression("[?status=='status-0'].id", dialect(), "array")
    assert query is not None
    statement = query.statement(table=table, collection_id=collection.collection_id)
    with connection.cursor() as cursor:
        if dialect() == "postgresql":
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no CREATE INDEX with deferred checks pending
        cursor.execute(index)
        cursor.execute("ANALYZE")
        # when
        cursor.execute(explain + statement.sql, statement.params)
        plan = " ".join(str(column) for row in cursor.fetchall() for column in row)
        ids = run_sql(query, cursor, table=table, collection_id=collection.collection_id)
    # then
    assert "status_idx" in plan, plan
    assert ids is not None
    assert ids.value == list(range(0, 2000, 40))


@pytest.mark.parametrize(
    ("expression", "tests"),
    [
        ("[?status=='x' && total > `9.5`].id", (FieldTest("status", "eq", "x"), FieldTest("total", "gt", 9.5))),
        ("[?`3` <= total && (a=='x' || b=='y')]", (FieldTest("total", "gte", 3),)),
        ("[?a=='x'] | [?b < 'm'] | [0:3]", (FieldTest("b", "lt", "m"), FieldTest("a", "eq", "x"))),
        ("sort_by([?a=='x'], &b)[0]", (FieldTest("a", "eq", "x"),)),
        ("[?a.b=='x' && !(c > `1`) && d == `true` && e != `2` && f == g]", ()),
        ("sort_by(@, &b)[:5] | [?c > `1`]", ()),
    ],
)
def test_field_tests_are_the_conjuncts_over_the_records(expression, tests):
    """The tests an index of a field can serve: `field <op> literal` conjuncts of filters over the records."""
    # given
    plan = compile_sql(dict(Parser().parse(expression).parsed), dialect="sqlite").plan
    # when
    found = field_tests(plan)
    # then
    assert found == tests


def _plan_text(cursor: Any, statement: Any) -> str:
    cursor.execute("EXPLAIN QUERY PLAN " + statement.sql, statement.params)
    return " ".join(str(column) for row in cursor.fetchall() for column in row)


@pytest.mark.django_db
@pytest.mark.skipif(dialect() != "sqlite", reason="SQLite's planner: PostgreSQL's has extended statistics")
def test_a_filter_on_two_indexed_fields_reads_the_selective_one_s_index(stored):
    """`status == 's-0' && total > 2990` over 3,000 records: 300 have the status, 10 the total. After the
    project's statistics step (sync_indexes builds the indexes and runs ANALYZE), SQLite's planner alone reads
    the `status` index (sqlite_stat1: 300 records a value; a range it takes to keep a quarter, 750); counted
    through each index, the statement reads the `total` index, and answers the same. The fields are declared
    `total` first: their compound index leads with the range, so it cannot answer both tests."""
    # given
    records = [{"id": index, "status": f"s-{index % 10}", "total": index + 0.5} for index in range(3000)]
    collection = stored(records)
    table = differential.RECORDS
    names = {
        field: next(iter(index_statements(dialect="sqlite", records_table=table,
                                          collection_id=collection.collection_id, field_name=field)))
        for field in ("status", "total")
    }  # fmt: skip
    expression = "[?status=='s-0' && total > `2990`].id"
    query = compile_sql_expression(expression, "sqlite", "array")
    assert query is not None
    with connection.cursor() as cursor:
        done = sync_indexes(cursor, dialect="sqlite", records_table=table, in_transaction=True,
                            collection_ids=[collection.collection_id], fields=["total", "status"])  # fmt: skip
        compound = compound_statement(dialect="sqlite", records_table=table, collection_id=collection.collection_id,
                                      fields=["total", "status"])  # fmt: skip
        assert sorted(done.created) == sorted([*names.values(), *compound])
        known = field_kinds(cursor, collection.collection_id)
        planner_alone = _plan_text(
            cursor, query.statement(table=table, collection_id=collection.collection_id, known=known)
        )
        # when
        statement = statement_for(query, cursor, table=table, collection_id=collection.collection_id, known=known)
        plan = _plan_text(cursor, statement)
        ids = run_sql(query, cursor, table=table, collection_id=collection.collection_id, known=known)
    # then
    assert f"USING INDEX {names['status']} " in planner_alone, planner_alone
    # The range's index, or the compound one that leads with it (it also holds each record's status)
    assert any(f"USING INDEX {name} (<expr>>?)" in plan for name in (names["total"], *compound)), plan
    assert names["status"] not in plan, plan
    assert ids is not None
    assert ids.value == jmespath.search(expression, records) == [2990]


@pytest.mark.django_db
@pytest.mark.skipif(dialect() != "sqlite", reason="SQLite's statistics")
def test_a_large_collection_beside_small_ones_reads_its_field_s_index(stored):
    """40 collections of 5 records beside one of 2,000: ANALYZE alone says ~54 records per collection, so
    SQLite would read the large one whole through the `collection_id` index rather than the `total` index (a
    range it takes to keep a quarter, 500). The statistics step says a collection may hold as many as the
    largest index covers: the `total` index is read."""
    # given
    for _ in range(40):
        stored([{"id": index, "total": index} for index in range(5)])
    records = [{"id": index, "total": index} for index in range(2000)]
    collection = stored(records)
    table = differential.RECORDS
    total = next(iter(index_statements(dialect="sqlite", records_table=table,
                                       collection_id=collection.collection_id, field_name="total")))  # fmt: skip
    expression = "[?total >= `1990`].id"
    query = compile_sql_expression(expression, "sqlite", "array")
    assert query is not None
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
        cursor.execute("SELECT stat FROM sqlite_stat1 WHERE idx LIKE %s", ("%collection_id%",))
        averaged = cursor.fetchone()[0]
        # when
        sync_indexes(cursor, dialect="sqlite", records_table=table, in_transaction=True,
                     collection_ids=[collection.collection_id], fields=["total"])  # fmt: skip
        cursor.execute("SELECT stat FROM sqlite_stat1 WHERE idx LIKE %s", ("%collection_id%",))
        stated = cursor.fetchone()[0]
        known = field_kinds(cursor, collection.collection_id)
        statement = statement_for(query, cursor, table=table, collection_id=collection.collection_id, known=known)
        plan = _plan_text(cursor, statement)
        ids = run_sql(query, cursor, table=table, collection_id=collection.collection_id, known=known)
    # then
    assert averaged == "2200 54"
    assert stated == "2200 2200"
    assert f"USING INDEX {total} (<expr>>?)" in plan, plan
    assert ids is not None
    assert ids.value == jmespath.search(expression, records) == list(range(1990, 2000))


@pytest.mark.django_db
@pytest.mark.skipif(dialect() != "sqlite", reason="SQLite's planner: PostgreSQL's has extended statistics")
def test_the_equality_s_index_is_read_when_it_finds_fewer_records_than_the_range(stored):
    """The other way round: `status == 'rare'` (5 records) && `total > 100` (2,899): the `total` index is the one
    kept out; every field reaching the counts' last limit would leave the planner's choice. (Declared `total`
    first, so that their compound index cannot answer both tests.)"""
    # given
    records = [{"id": index, "status": "rare" if index % 600 == 0 else f"s-{index % 7}", "total": index}
               for index in range(3000)]  # fmt: skip
    collection = stored(records)
    table = differential.RECORDS
    expression = "[?total > `100` && status=='rare'].id"
    query = compile_sql_expression(expression, "sqlite", "array")
    assert query is not None
    with connection.cursor() as cursor:
        sync_indexes(cursor, dialect="sqlite", records_table=table, in_transaction=True,
                     collection_ids=[collection.collection_id], fields=["total", "status"])  # fmt: skip
        tests = field_tests(query.plan)
        # when
        unindexed = less_selective_indexes(
            cursor, records_table=table, collection_id=collection.collection_id, tests=tests
        )
        ids = run_sql(query, cursor, table=table, collection_id=collection.collection_id)
    # then
    assert tests == (FieldTest("total", "gt", 100), FieldTest("status", "eq", "rare"))
    assert unindexed == frozenset({"total"})
    assert ids is not None
    assert ids.value == jmespath.search(expression, records) == [600, 1200, 1800, 2400]


@pytest.mark.django_db
@pytest.mark.skipif(dialect() != "sqlite", reason="SQLite's statements only")
def test_no_choice_without_two_indexed_fields(stored):
    """One indexed field of the two, or none: nothing is counted and nothing kept from an index."""
    # given
    collection = stored([{"id": index, "status": f"s-{index % 3}", "total": index} for index in range(50)])
    table = differential.RECORDS
    tests = (FieldTest("status", "eq", "s-1"), FieldTest("total", "gt", 10))
    with connection.cursor() as cursor:
        none = less_selective_indexes(cursor, records_table=table, collection_id=collection.collection_id, tests=tests)
        sync_indexes(cursor, dialect="sqlite", records_table=table, in_transaction=True,
                     collection_ids=[collection.collection_id], fields=["status"])  # fmt: skip
        # when
        one = less_selective_indexes(cursor, records_table=table, collection_id=collection.collection_id, tests=tests)
    # then
    assert none == one == frozenset()


@pytest.mark.django_db
@pytest.mark.skipif(dialect() != "sqlite", reason="SQLite's statements only")
@pytest.mark.parametrize(
    "expression",
    [
        "[?a=='x' && b > `1`].id",
        "[?a > 'w' && b <= `2` && `1` < b].id",
        "[?a=='[1]' && b == `2`].id",
        "[?b >= `1.5` && (a == 'x' || a == 'y')].[id, a]",
        "length([?a=='x' && b > `0`])",
        "max_by([?a != 'x' && b > `0`], &b).id",
        "[?a=='x'].id",
        "[?a=='x'] | [1:]",
    ],
)
def test_tests_kept_from_their_index_answer_the_same(stored, expression):
    """A field's tests behind a unary plus (render's `unindexed`), or their matches read by id (render's
    `covered`), keep jmespath's answer over values of every kind, the data's errors included (None: the
    evaluator answers)."""
    # given
    records = [
        {"id": 1, "a": "x", "b": 2},
        {"id": 2, "a": "y", "b": 1.5},
        {"id": 3, "a": "[1]", "b": "2"},
        {"id": 4, "a": ["x"], "b": 2},
        {"id": 5, "a": None, "b": None},
        {"id": 6, "b": 3},
        {"id": 7, "a": "x", "b": True},
        {"id": 8, "a": "z", "b": 2.0},
    ]
    collection = stored(records)
    query = compile_sql_expression(expression, "sqlite", "array")
    assert query is not None
    fields = frozenset(test.field for test in field_tests(query.plan))
    outcomes = []
    by_rowid = []
    with connection.cursor() as cursor:
        for known in (None, field_kinds(cursor, collection.collection_id)):
            for unindexed, covered in ((frozenset(), frozenset()), (fields, frozenset()), (frozenset(), fields)):
                # when
                statement = query.statement(table=differential.RECORDS, collection_id=collection.collection_id,
                                            known=known, unindexed=unindexed, covered=covered)  # fmt: skip
                cursor.execute(statement.sql, statement.params)
                outcome = finish(statement.output, cursor.fetchall())
                outcomes.append(None if outcome is None else outcome.value)
                if unindexed:
                    assert "+(data ->> " in statement.sql
                by_rowid.append("WHERE id IN (SELECT id" in statement.sql)
    # then
    try:
        expected = jmespath.search(expression, records)
    except (jmespath_errors.JMESPathError, TypeError):  # the library raises TypeError for a number > a string
        expected = None
    assert len({repr(outcome) for outcome in outcomes[:3]}) == 1
    assert len({repr(outcome) for outcome in outcomes[3:]}) == 1
    assert {repr(outcome) for outcome in outcomes if outcome is not None} <= {repr(expected)}
    # By id only where the facts leave the filter to the index alone: `a`'s equality with a plain string.
    assert by_rowid == [False] * 5 + [expression.startswith("[?a=='x']")]


@pytest.mark.django_db
@pytest.mark.skipif(dialect() != "sqlite", reason="SQLite's statements only")
def test_covering_fields_are_those_one_index_holds_as_its_leading_columns(stored):
    """One field's own index holds its tests; the compound index (status, total) holds `status ==` with any test
    of `total`, not a range of `status` with `total` (the range must come last), nor a field it lacks."""
    # given
    collection = stored([{"id": index, "status": f"s-{index % 3}", "total": index, "note": "n"} for index in range(9)])
    table, at = differential.RECORDS, collection.collection_id
    eq, gt = FieldTest("status", "eq", "s-1"), FieldTest("total", "gt", 2)
    with connection.cursor() as cursor:
        none = covering_fields(cursor, records_table=table, collection_id=at, tests=(eq,))
        sync_indexes(cursor, dialect="sqlite", records_table=table, in_transaction=True,
                     collection_ids=[at], fields=["status", "total"])  # fmt: skip
        # when
        found = [
            covering_fields(cursor, records_table=table, collection_id=at, tests=tests)
            for tests in [
                (eq,),
                (gt,),
                (eq, gt),
                (gt, eq),
                (FieldTest("status", "gt", "s"), gt),
                (eq, FieldTest("note", "eq", "n")),
                (),
            ]
        ]
    # then
    assert none == frozenset()
    assert found == [
        frozenset({"status"}),
        frozenset({"total"}),
        frozenset({"status", "total"}),
        frozenset({"status", "total"}),
        frozenset(),
        frozenset(),
        frozenset(),
    ]


def _orders_indexed(stored: Any, fields: list[str]) -> tuple[list[dict], int]:
    """400 records (`status` of three values, `total` of 400, `note` x or y) stored as a collection whose `fields`
    have SQLite's record indexes: the records and the collection's id."""
    records = [
        {"id": index, "status": f"s-{index % 3}", "total": (index * 37) % 400, "note": "x" if index % 5 else "y"}
        for index in range(400)
    ]
    collection = stored(records)
    with connection.cursor() as cursor:
        sync_indexes(cursor, dialect="sqlite", records_table=differential.RECORDS, in_transaction=True,
                     collection_ids=[collection.collection_id], fields=fields)  # fmt: skip
    return records, collection.collection_id


def _three_ways(query: Any, at: int) -> tuple[Any, list[Any]]:
    """The statement run_sql renders over collection `at` with its facts, and the answers it gives with them,
    without them and in position order (each answer's value; None where the evaluator answers)."""
    table = differential.RECORDS
    with connection.cursor() as cursor:
        known = field_kinds(cursor, at)
        statement = statement_for(query, cursor, table=table, collection_id=at, known=known)
        answers = [
            run_sql(query, cursor, table=table, collection_id=at, known=known),
            run_sql(query, cursor, table=table, collection_id=at),
            run_sql(query, cursor, table=table, collection_id=at, known=known, position_order=True),
        ]
    return statement, [answer.value if answer is not None else None for answer in answers]


@pytest.mark.django_db
@pytest.mark.skipif(dialect() != "sqlite", reason="SQLite's statements only")
@pytest.mark.parametrize(
    ("expression", "by_rowid"),
    [
        ("[?status=='s-1' && total > `100`].id", True),
        ("[?total > `100` && status=='s-1'].[id, total]", True),
        ("[?status=='s-2'] | [2:5]", True),
        ("[?status=='s-2'].id | [-1]", True),
        ("[?status=='s-2'] | [?total < `200`].id", True),
        ("max_by([?status=='s-1'], &total).id", True),
        ("length([?status=='s-1' && total > `100`])", False),  # a count reads no record
        ("[?status=='s-1' && contains(note, 'x')].id", False),  # the index cannot answer contains
        ("[?status != 's-1'].id", False),
        ("[?note == 'x'].id", False),  # no index of `note`
    ],
)
def test_a_filter_one_index_answers_reads_its_matches_in_rowid_order(stored, expression, by_rowid):
    """With the index (status, total) and the facts, a filter the index answers alone finds its ids in it and
    reads the records by id (`id IN (SELECT id ...)`, the index read in the subquery); the answer is jmespath's,
    as it is without the facts or in position order, where the plain form stays."""
    # given
    records, at = _orders_indexed(stored, ["status", "total"])
    table = differential.RECORDS
    query = compile_sql_expression(expression, "sqlite", "array")
    assert query is not None
    # when
    statement, answers = _three_ways(query, at)
    with connection.cursor() as cursor:
        known = field_kinds(cursor, at)
        plan = _plan_text(cursor, statement)
        plain = [
            statement_for(query, cursor, table=table, collection_id=at),
            statement_for(query, cursor, table=table, collection_id=at, known=known, position_order=True),
        ]
    # then
    assert ("WHERE id IN (SELECT id FROM" in statement.sql) is by_rowid
    if by_rowid:
        assert "USING INTEGER PRIMARY KEY (rowid=?)" in plan, plan
        assert "LIST SUBQUERY" in plan, plan
        assert "USING INDEX tr_" in plan, plan
    assert ["WHERE id IN (SELECT id FROM" in other.sql for other in plain] == [False, False]
    assert answers == [jmespath.search(expression, records)] * 3


def _records_read(cursor: Any, statement: Any, table: str) -> list[str]:
    """The statement's bytecode steps that read a row of the records table (SQLite's EXPLAIN): a column, or a seek
    to the row. A cursor only opened, or a deferred seek never followed by a read, reads nothing."""
    cursor.execute("SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name = %s", (table,))
    (root,) = cursor.fetchone()
    cursor.execute("EXPLAIN " + statement.sql, statement.params)
    steps = cursor.fetchall()
    records = {step[2] for step in steps if step[1] == "OpenRead" and step[3] == root}
    return [f"{step[1]} {step[2]}" for step in steps if step[1] in _ROW_READS and step[2] in records]


_ROW_READS = frozenset(
    {"Column", "SeekRowid", "NotExists", "NotFound", "Found", "Rowid", "RowData", "SeekGE", "SeekGT"}
)


@pytest.mark.django_db
@pytest.mark.skipif(dialect() != "sqlite", reason="SQLite's statements only")
@pytest.mark.parametrize(
    ("expression", "form"),
    [
        ("[?status=='s-1' && total > `100`].id", "index"),
        ("[?total > `100` && status=='s-1'].[id, total]", "index"),
        ("[?status=='s-1' && total >= `100`].{i: id, s: status}", "index"),
        ("[?status=='s-1' && total > `100`].note", "rowid"),  # `note` is not declared: read from the record
        ("[?status=='s-1' && total > `100`]", "rowid"),  # whole records
        ("[?status=='s-1'].id", "rowid"),  # one test: `status`'s own index finds the matches
        ("length([?status=='s-1' && total > `100`])", "plain"),  # a count reads no record
        ("[?status=='s-1' && contains(note, 'x')].id", "plain"),  # the index cannot answer contains
    ],
)
def test_a_filter_the_compound_index_answers_with_all_it_reads_reads_no_record(stored, expression, form):
    """Declared `status, total, id`: SQLite's compound index holds their values, `position` and their JSON text,
    so a filter it serves (an equality on `status`, a test of `total`) projected to declared fields is answered
    from the index alone, in the plain form: its bytecode reads no row of the records table. A filter or a
    projection that needs more of the record keeps its form. The answer is jmespath's in every form."""
    # given
    records, at = _orders_indexed(stored, ["status", "total", "id"])
    query = compile_sql_expression(expression, "sqlite", "array")
    assert query is not None
    # when
    statement, answers = _three_ways(query, at)
    with connection.cursor() as cursor:
        reads = _records_read(cursor, statement, differential.RECORDS)
        plan = _plan_text(cursor, statement)
    # then
    assert ("WHERE id IN (SELECT id FROM" in statement.sql) is (form == "rowid")
    if form == "index":
        assert reads == [], statement.sql
        (compound,) = [name for name in plan.split() if name.startswith("tr_") and name.endswith("_c")]
        assert f"USING INDEX {compound} (<expr>=? AND <expr>>" in plan, plan
    elif form == "rowid":
        assert reads != []
    assert answers == [jmespath.search(expression, records)] * 3


def test_compound_answers_only_a_statement_reading_what_the_index_holds():
    """compound_answers reads the index's columns from its CREATE INDEX text: a statement over the record's data
    is answered from it when each term over the data is a column of the index and position is one; the layout
    or key columns, a type test (json_type over the data), a field it does not hold, or an index without
    position, and it is not."""
    # given
    (index,) = compound_statement(dialect="sqlite", records_table="t", collection_id=3,
                                  fields=["status", "total", "id"]).values()  # fmt: skip
    without_position = index.replace(", position,", ",")
    base = 'SELECT position AS k, data, layout_id AS lay, "key" AS rkey FROM "t" WHERE collection_id = 3'
    filtered = f"""{base} AND ((data ->> '$."status"') = %s AND (data ->> '$."total"') > %s)"""

    def over(columns: str) -> str:
        return f"SELECT u.* FROM (SELECT k AS o, {columns} FROM ({filtered}) AS s) AS u ORDER BY +u.o"

    # when
    answered = {
        columns: compound_answers(index, "t", over(columns))
        for columns in [
            """(data -> '$."id"') AS v0""",
            """(data -> '$."id"') AS v0, (data -> '$."status"') AS v1, (data ->> '$."total"') AS v2""",
            """(data -> '$."note"') AS v0""",
            "data AS v0",
            """(data -> '$."id"') AS v0, lay AS v1""",
            "rkey AS v0",
            """json_type(data, '$."id"') AS v0""",
        ]
    }
    # then
    assert list(answered.values()) == [True, True, False, False, False, False, False]
    assert compound_answers(without_position, "t", over("""(data -> '$."id"') AS v0""")) is False
    assert compound_answers(index, "other", over("""(data -> '$."id"') AS v0""")) is False


#
# Storage
#


def test_postgresql_text_keeps_floats_floats():
    """Floats that json.dumps writes with an exponent are written positionally (JSONB would read 1e+16 as an
    integer); strings that look like numbers are left alone."""
    # given
    value = {"a": 1e16, "b": [1.5e-07, -1e23, 2.5], "c": "1e+16", "d": 10**20}
    # when
    text = record_text(value, dialect="postgresql")
    # then
    assert text == (
        '{"a":10000000000000000.0,"b":[0.00000015,-99999999999999991611392.0,2.5],'
        '"c":"1e+16","d":100000000000000000000}'
    )
    assert json.loads(text) == value
    assert record_text(value, dialect="sqlite") == json.dumps(value, separators=(",", ":"))


@pytest.mark.parametrize(
    "value",
    [
        {"id": 1, "note": "a, b: c", "items": [{"sku": "K-1", "price": 1e16}, None, True, -0.0], "d": 10**20},
        {"ascii": "".join(map(chr, range(128))), "k\x7f": "\x7f", "\x00key": "x\ty"},
        {"latin": "caf\u00e9", "cjk": "\u6f22", "emoji": "\U0001f600", "sep": "\u2028"},
        ["a", [[], {}], 1.5e-07, {"": ""}],
        "a string",
        7,
    ],
    ids=["commas and colons in strings", "every ASCII character", "beyond ASCII", "an array", "a string", "a number"],
)
def test_record_texts_are_the_two_encodings_of_a_record(value):
    """One encoding gives both texts an import writes: the document's (json.JSONEncoder()'s) and the stored one."""
    # when
    document, compact = record_texts(value)
    # then
    assert document == json.JSONEncoder().encode(value)
    assert compact == json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for engine in ("sqlite", "postgresql"):
        assert record_text(value, dialect=engine, compact=compact) == record_text(value, dialect=engine)


def test_record_texts_leave_a_record_holding_nan_or_infinity_to_record_text():
    """A record holding NaN or Infinity has its document text (which writes them) and no stored text: record_text
    refuses it. Its text alone decides: the words in a string leave the stored text to record_text too."""
    for value in ({"x": float("inf")}, [float("nan")], {"x": -float("inf")}):
        document, compact = record_texts(value)
        assert (document, compact) == (json.JSONEncoder().encode(value), None)
        with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
            record_text(value, dialect="sqlite")
    assert record_texts({"note": "NaN, Infinity"}) == ('{"note": "NaN, Infinity"}', None)
    assert record_text({"note": "NaN, Infinity"}, dialect="sqlite", compact=None) == '{"note":"NaN, Infinity"}'


def test_layouts_give_the_key_order_back():
    """A value reordered the way JSONB orders keys is restored by its layout; paths reach nested layouts."""
    # given
    value = {"status": 1, "id": 2, "items": [{"sku": "a", "qty": 1}, 3], "x": {"bb": 1, "a": {"d": 1, "c": 2}}}

    def jsonb_order(node: Any) -> Any:
        if isinstance(node, dict):
            return {key: jsonb_order(node[key]) for key in jsonb_key_order(list(node))}
        if isinstance(node, list):
            return [jsonb_order(item) for item in node]
        return node

    layout = layout_of(value)
    # when
    restored = restore(jsonb_order(value), layout)
    nested = restore(jsonb_order(value["x"]["a"]), layout_at(layout, (("field", "x"), ("field", "a"))))
    flat = restore(
        jsonb_order({"status": "paid", "id": 7, "total": None}), layout_of({"status": 0, "id": 0, "total": 0})
    )
    # then
    assert canonical(restored) == canonical(value)
    assert list(restored) == ["status", "id", "items", "x"]
    assert list(restored["items"][0]) == ["sku", "qty"]
    assert list(nested) == ["d", "c"]
    assert list(flat.items()) == [("status", "paid"), ("id", 7), ("total", None)]
    assert layout_of({"a": 1, "bb": [1, {"c": 1}]}) is None


def test_a_layout_key_stands_for_its_layout_and_is_shared_by_records_of_one_shape():
    """Records whose objects have the same keys in the same order share one hashable key, whatever their values;
    the key gives their layout back."""
    # given
    first = {"status": "paid", "id": 1, "items": [{"sku": "a", "qty": 1}, 3]}
    second = {"status": "new", "id": 2, "items": [{"sku": "b", "qty": 9}, "x"]}
    other = {"status": "new", "id": 2, "items": [{"qty": 9, "sku": "b"}, "x"]}
    # when
    keys = [layout_key(record) for record in (first, second, other)]
    # then
    assert keys[0] == keys[1] != keys[2]
    assert len({keys[0], keys[1], keys[2]}) == 2
    assert (
        layout_from_key(keys[0])
        == layout_of(first)
        == {
            "k": ["status", "id", "items"],
            "c": [None, None, {"e": [{"k": ["sku", "qty"]}, None]}],
        }
    )
    assert layout_from_key(keys[2]) == {"k": ["status", "id", "items"]}
    assert layout_key({"a": 1, "id": [{"b": 1}]}) is None


@pytest.mark.django_db
def test_rows_hold_one_record_each_in_order(stored):
    """Writing a collection gives one row per record, positions spaced in order, keys of an object kept."""
    # given
    collection = stored({"b": {"n": 1}, "a": None, "": [1]})
    # when
    rows = list(
        TableRecord.objects.filter(collection_id=collection.collection_id)
        .order_by("position")
        .values_list("position", "key")
    )
    # then
    assert rows == [(0, "b"), (1024, "a"), (2048, "")]
    assert canonical(collection.read_back()) == canonical({"b": {"n": 1}, "a": None, "": [1]})


@pytest.mark.django_db
def test_negative_zero_reads_back_as_stored(stored, fuzz_table):
    """SQLite keeps -0.0; PostgreSQL's numeric has no negative zero, so JSONB gives 0.0 back (a documented
    limit; the answer of SQL and of the evaluator over the rows is the same)."""
    # given
    collection = stored([{"v": -0.0}])
    # when
    read = collection.read_back()
    via_sql = answer("[*].v", collection)
    # then
    expected = "-0.0" if dialect() == "sqlite" else "0.0"
    assert repr(read[0]["v"]) == expected
    assert via_sql == ("list", [("float", expected)])


@pytest.mark.django_db
def test_writing_into_a_collection_refuses_a_second_record_at_a_position(stored):
    """Positions are unique per collection: a writer that lost track of them fails, nothing is half written."""
    # given
    collection = stored([{"n": 1}])
    before = TableRecord.objects.filter(collection_id=collection.collection_id).count()

    def write_again() -> None:
        with transaction.atomic(), connection.cursor() as cursor:
            write_records(
                cursor,
                dialect=dialect(),
                records_table=differential.RECORDS,
                layouts_table=differential.LAYOUTS,
                collection_id=collection.collection_id,
                value=[{"n": 2}, {"n": 3}],
            )

    # when
    with pytest.raises(IntegrityError):
        write_again()
    # then
    assert TableRecord.objects.filter(collection_id=collection.collection_id).count() == before == 1


@pytest.mark.django_db
@pytest.mark.skipif(dialect() != "postgresql", reason="PostgreSQL's planner pulls subqueries up")
def test_the_error_flag_is_computed_once_not_for_every_row(stored):
    """The statement's checks (here the field kinds compared with the statement's own) are computed once, as the
    one-time filter of the flag's own row (a Result, one arm of the answer's Append), and are no column of the
    answer's rows: each row is its order and the projected value, with no layout id (ids are numbers by the
    facts). The answer is jmespath's."""
    # given
    records = [{"id": index, "status": f"s-{index % 3}", "total": index} for index in range(30)]
    collection = stored(records)
    expression = "[?status=='s-1' && total > `3`].id"
    query = compile_sql_expression(expression, "postgresql", "array")
    assert query is not None
    with connection.cursor() as cursor:
        known = field_kinds(cursor, collection.collection_id)
        statement = query.statement(table=differential.RECORDS, collection_id=collection.collection_id, known=known)
        # when
        cursor.execute("EXPLAIN (VERBOSE, FORMAT JSON) " + statement.sql, statement.params)
        plan = cursor.fetchone()[0]
        answer = run_sql(query, cursor, table=differential.RECORDS, collection_id=collection.collection_id, known=known)
    # then
    nodes = [(plan if isinstance(plan, list) else json.loads(plan))[0]["Plan"]]
    for node in nodes:
        nodes.extend(node.get("Plans", []))
    assert len(nodes[0]["Output"]) == 2, nodes[0]["Output"]  # the order and the id
    (flagged,) = [node for node in nodes if "COALESCE" in node.get("One-Time Filter", "")]
    assert flagged["Node Type"] == "Result", flagged
    assert [node for node in nodes if "COALESCE" in json.dumps(node.get("Output", []))] == []
    assert answer is not None
    assert answer.value == jmespath.search(expression, records) == [4, 7, 10, 13, 16, 19, 22, 25, 28]


@pytest.mark.django_db
@pytest.mark.skipif(dialect() != "postgresql", reason="PostgreSQL's statements only")
def test_a_field_that_is_always_a_number_or_a_boolean_is_projected_as_its_text(stored):
    """A projected (or summed) top-level field that the facts say is always a number or a boolean is read by `->>`
    (its text is its JSON text); one that may be a string, a null or a container as the jsonb's text. The answers
    are jmespath's, Python types included (1 and 1.0, a float from 1e16 up, an integer beyond 64 bits)."""
    # given
    records = [
        {"n": 1, "f": 1.0, "b": True, "s": "1", "m": 2**70, "x": 1},
        {"n": -7, "f": 1e16, "b": False, "s": 'a"b', "m": 5, "x": None},
        {"n": 0, "f": -2.5, "b": True, "s": "", "m": -(2**64), "x": [1]},
    ]
    collection = stored(records)
    with connection.cursor() as cursor:
        known = field_kinds(cursor, collection.collection_id)
    # when
    projected = {}
    for name in ("n", "f", "b", "m", "s", "x"):
        expression = f"[*].{name}"
        query = compile_sql_expression(expression, "postgresql", "array")
        assert query is not None
        statement = query.statement(table=differential.RECORDS, collection_id=collection.collection_id, known=known)
        with connection.cursor() as cursor:

            def layouts(ids: Any, cursor: Any = cursor) -> Any:
                return layouts_by_id(cursor, differential.LAYOUTS, ids)

            answer = run_sql(query, cursor, table=differential.RECORDS, collection_id=collection.collection_id,
                             known=known, layouts=layouts)  # fmt: skip
        assert answer is not None
        assert canonical(answer.value) == canonical(jmespath.search(expression, records))
        column = statement.sql.split(" AS v0")[0].rsplit("SELECT k AS o, ", 1)[1]
        projected[name] = (column, answer.value)
    # then
    assert projected == {
        "n": ("(data ->> 'n')", [1, -7, 0]),
        "f": ("(data ->> 'f')", [1.0, 1e16, -2.5]),
        "b": ("(data ->> 'b')", [True, False, True]),
        "m": ("(data ->> 'm')", [2**70, 5, -(2**64)]),
        "s": ("(data -> 's')::text", ["1", 'a"b', ""]),
        "x": ("(data -> 'x')::text", [1, [1]]),
    }
    assert [type(value) for value in projected["f"][1]] == [float, float, float]
    summed = {}
    for expression in ("sum([*].f)", "avg([*].n)"):
        query = compile_sql_expression(expression, "postgresql", "array")
        assert query is not None
        statement = query.statement(table=differential.RECORDS, collection_id=collection.collection_id, known=known)
        with connection.cursor() as cursor:
            answer = run_sql(query, cursor, table=differential.RECORDS, collection_id=collection.collection_id,
                             known=known)  # fmt: skip
        assert answer is not None
        summed[expression] = (statement.sql.split(" AS v0")[0].rsplit(" AS ok, ", 1)[1], answer.value)
    assert summed == {
        "sum([*].f)": ("(data ->> 'f')", 9999999999999998.0),
        "avg([*].n)": ("(data ->> 'n')", -2.0),
    }
