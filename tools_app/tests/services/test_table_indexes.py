"""A table's indexed_fields (SPEC §10): the API and its checks, the engine's expression indexes per collection
(tools_app.services.table_indexes, data_access/sql/indexes.py) used by the compiled filters, and slow queries
on unindexed fields (data_access/slow_queries.py; the call log's note of real slow reads is checked in
execution/test_rows_reads.py). On the test database's engine (SQLite, or PostgreSQL with DATABASE_URL)."""

import importlib
import json
import re

import jmespath
import pytest
from django.apps import apps as django_apps
from django.db import connection, transaction
from django.test import override_settings
from django.urls import reverse
from jmespath.parser import Parser
from prometheus_client import REGISTRY

from tests.api_helpers import client_for, db_snapshot, response_json
from tools_app import services
from tools_app.data_access import slow_queries
from tools_app.data_access.sql import indexes
from tools_app.data_access.sql.indexes import COMPOUND_FIELDS, compound_statement, index_statements
from tools_app.data_access.sql.kinds import Known
from tools_app.data_access.sql.plan import build_plan, filtered_fields
from tools_app.data_access.sql.render import dialect_for
from tools_app.data_access.sql.store import field_kinds
from tools_app.data_access.sql_query import compile_sql_expression, run_sql, statement_for
from tools_app.kernel.limits import MAX_DESCRIPTION
from tools_app.models import Table, TableCollection, Tool
from tools_app.services.generated_text import fast_fields_description, generated_edited
from tools_app.services.table_indexes import ensure_indexes
from tools_app.tests import sql_differential as differential
from tools_app.tests.sql_differential import dialect, record_indexes, store, two_indexed_tables
from tools_app.toolsets import generate_tools

RECORDS = differential.RECORDS


# A transactional test starts with no record index: these tests compare the whole set.
pytestmark = pytest.mark.usefixtures("no_leftover_record_indexes")


def _plan_of(expression: str, collection_id: int) -> tuple[str, list]:
    """The engine's plan for the compiled expression over the collection, and the answer."""
    query = compile_sql_expression(expression, dialect(), "array")
    assert query is not None
    statement = query.statement(table=RECORDS, collection_id=collection_id)
    explain = "EXPLAIN " if dialect() == "postgresql" else "EXPLAIN QUERY PLAN "
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE", ())
        cursor.execute(explain + statement.sql, statement.params)
        plan = " ".join(str(column) for row in cursor.fetchall() for column in row)
        answer = run_sql(query, cursor, table=RECORDS, collection_id=collection_id)
    assert answer is not None
    return plan, answer.value


def _compound(collection_id: int, *fields: str) -> set[str]:
    """The name of the collection's compound index on `fields` (of the forms its field kinds give)."""
    with connection.cursor() as cursor:
        known = field_kinds(cursor, collection_id)
    return set(compound_statement(dialect=dialect(), records_table=RECORDS, collection_id=collection_id,
                                  fields=fields, known=known))  # fmt: skip


def _names(collection_id: int, field_name: str) -> list[str]:
    return sorted(index_statements(dialect=dialect(), records_table=RECORDS, collection_id=collection_id,
                                   field_name=field_name))  # fmt: skip


#
# The API
#


@pytest.mark.django_db
def test_a_table_has_no_indexed_fields_until_its_owner_declares_some(owner, table):
    """GET shows `indexed_fields: []`; PATCH sets them (the version stays: no data write) and GET shows them."""
    # given
    client = client_for(owner)
    assert response_json(client.get(f"/api/tables/{table.pk}/"))["indexed_fields"] == []

    # when
    response = client.patch(f"/api/tables/{table.pk}/", {"indexed_fields": ["status", "total"]}, format="json")

    # then
    assert response.status_code == 200
    assert response.json()["indexed_fields"] == ["status", "total"]
    assert response.json()["version"] == 1
    assert response_json(client.get(f"/api/tables/{table.pk}/"))["indexed_fields"] == ["status", "total"]
    assert Table.objects.get(pk=table.pk).indexed_fields == ["status", "total"]


@pytest.mark.django_db
def test_a_table_can_be_created_with_indexed_fields(owner):
    response = client_for(owner).post(
        "/api/tables/", {"name": "orders", "data": [], "indexed_fields": ["customer"]}, format="json"
    )

    assert response.status_code == 201
    assert response.json()["indexed_fields"] == ["customer"]
    assert Table.objects.get().indexed_fields == ["customer"]


@pytest.mark.django_db
@override_settings(TOOLHUB_MAX_INDEXED_FIELDS=2)
@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("status", "indexed_fields must be a list of record field names."),
        ({"status": True}, "indexed_fields must be a list of record field names."),
        (None, "This field may not be null."),
        ([5], "indexed_fields[0] must be a non-empty string (a record field name)."),
        (["status", ""], "indexed_fields[1] must be a non-empty string (a record field name)."),
        (["x" * 201], "indexed_fields[0] is 201 characters long; at most 200."),
        (["status", "status"], "indexed_fields lists 'status' twice."),
        (["a", "b", "c"], "indexed_fields may list at most 2 fields (TOOLHUB_MAX_INDEXED_FIELDS); 3 were given."),
        (
            ['say "hi"'],
            'indexed_fields[0] (\'say "hi"\') holds a quote ("), a backslash or a control character, which no index '
            "can be built on.",
        ),
        (
            ["tab\there"],
            "indexed_fields[0] ('tab\\there') holds a quote (\"), a backslash or a control character, which no index "
            "can be built on.",
        ),
    ],
)
def test_bad_indexed_fields_are_a_400_naming_the_field_and_write_nothing(owner, table, value, message):
    # given
    before = db_snapshot()

    # when
    response = client_for(owner).patch(f"/api/tables/{table.pk}/", {"indexed_fields": value}, format="json")

    # then
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "VALIDATION_ERROR"
    assert body["fields"] == {"indexed_fields": [message]}
    assert db_snapshot() == before
    assert Table.objects.get(pk=table.pk).indexed_fields == []


@pytest.mark.django_db
def test_the_generated_tools_say_which_fields_are_fast(owner, make_table):
    # given
    table = make_table(owner, data=[{"id": 1, "status": "paid", "customer": "ada"}])
    services.table_update(table=table, indexed_fields=["status", "first name"])

    # when
    generated = generate_tools(owner=owner, table=table)

    # then
    by_type = {tool.type: tool.description for tool in generated.tools}
    fast = ' Filters and sorts on status, "first name" are fast (indexed); on other fields slower.'
    assert fast in by_type["query_data"]
    assert fast in by_type["get_data_schema"]
    assert "indexed" not in by_type["preview"]


def _fast(*names: str) -> str:
    return f" Filters and sorts on {', '.join(names)} are fast (indexed); on other fields slower."


def _descriptions(table_id: int) -> dict[str, str]:
    return dict(Tool.objects.filter(table_id=table_id).values_list("name", "description"))


@pytest.mark.django_db
def test_changed_indexed_fields_rewrite_only_the_fast_sentence_of_the_generated_descriptions(owner, make_table):
    """PATCH indexed_fields: the query and schema tools' sentence is put in after its fixed text, replaced, then
    removed (the description as generated again); an owner's words around it are kept, an edited tool stays
    edited and an unedited one unedited (so generating again changes nothing); other tools are untouched."""
    # given
    table = make_table(owner, data=[{"id": 1, "status": "paid"}, {"id": 2, "status": "open"}])
    generate_tools(owner=owner, table=table)
    tools = {tool.type: tool for tool in Tool.objects.filter(table=table)}
    services.tool_create(owner=owner, type="query_data", table=table, name="mine", description="Ask here.")
    generated = _descriptions(table.pk)
    query, schema = generated["orders_query"], generated["orders_schema"]
    client = client_for(owner)

    # when: first fields
    first = client.patch(f"/api/tables/{table.pk}/", {"indexed_fields": ["status", "first name"]}, format="json")
    after_first = _descriptions(table.pk)
    services.tool_update(
        tool=Tool.objects.get(pk=tools["query_data"].pk), description=after_first["orders_query"] + " Mine."
    )
    # and: other fields, then none
    second = client.patch(f"/api/tables/{table.pk}/", {"indexed_fields": ["id"]}, format="json")
    after_second = _descriptions(table.pk)
    third = client.patch(f"/api/tables/{table.pk}/", {"indexed_fields": []}, format="json")
    after_third = _descriptions(table.pk)

    # then
    assert (first.status_code, second.status_code, third.status_code) == (200, 200, 200)
    fast = _fast("status", '"first name"')
    assert after_first["orders_query"] == query.replace("and return its value.", "and return its value." + fast, 1)
    assert after_first["orders_schema"] == schema.replace(
        "before writing a query.", "before writing a query." + fast, 1
    )
    assert (
        after_second["orders_query"]
        == query.replace("and return its value.", "and return its value." + _fast("id"), 1) + " Mine."
    )
    assert after_second["orders_schema"] == schema.replace(
        "before writing a query.", "before writing a query." + _fast("id"), 1
    )
    assert after_third["orders_query"] == query + " Mine."
    assert after_third["orders_schema"] == schema
    for name in set(generated) - {"orders_query", "orders_schema"}:
        assert after_first[name] == after_second[name] == after_third[name] == generated[name]
    assert after_first["mine"] == after_second["mine"] == after_third["mine"] == "Ask here."
    assert generated_edited(Tool.objects.get(pk=tools["query_data"].pk)) is True
    assert generated_edited(Tool.objects.get(pk=tools["get_data_schema"].pk)) is False
    again = generate_tools(owner=owner, table=Table.objects.get(pk=table.pk))
    regenerated = {change.name: change.action for change in again.changes}
    assert regenerated["orders_schema"] == "unchanged"
    assert regenerated["orders_query"] == "kept"


@pytest.mark.django_db
def test_indexed_fields_saved_in_the_admin_rewrite_the_fast_sentence(client, owner, make_table):
    """The admin's table form saves through the same service: the generated query tool's description gets the
    sentence, and generating again finds nothing to change."""
    # given
    data = [{"id": 1, "status": "paid"}, {"id": 2, "status": "open"}]
    table = make_table(owner, data=data)
    generate_tools(owner=owner, table=table)
    query = _descriptions(table.pk)["orders_query"]
    client.force_login(owner)

    # when
    posted = client.post(
        reverse("admin:tools_app_table_change", args=[table.pk]),
        {
            "name": table.name,
            "description": "",
            "indexed_fields": '["status"]',
            "redact_fields": "[]",
            "data": json.dumps(data),
        },
    )

    # then
    assert posted.status_code == 302, posted.context["adminform"].form.errors if posted.context else posted
    assert Table.objects.get(pk=table.pk).indexed_fields == ["status"]
    fast = _fast("status")
    assert _descriptions(table.pk)["orders_query"] == query.replace(
        "and return its value.", "and return its value." + fast, 1
    )
    changes = generate_tools(owner=owner, table=Table.objects.get(pk=table.pk)).changes
    assert {change.action for change in changes} == {"unchanged"}


@pytest.mark.parametrize(
    ("description", "tool_type", "fields", "generated", "expected"),
    [
        # the sentence at its place: replaced whatever it named, or removed
        (
            "Run it and return its value." + _fast("a") + " Fields: x.",
            "query_data",
            ["b"],
            False,
            "Run it and return its value." + _fast("b") + " Fields: x.",
        ),
        (
            "Run it and return its value." + _fast('"a, b"', "c") + " Fields.",
            "query_data",
            [],
            False,
            "Run it and return its value. Fields.",
        ),
        # put in only where the generator's unedited text has no sentence
        (
            "Run it and return its value. Fields.",
            "query_data",
            ["a"],
            True,
            "Run it and return its value." + _fast("a") + " Fields.",
        ),
        ("Run it and return its value. Fields.", "query_data", ["a"], False, "Run it and return its value. Fields."),
        (
            "Call it first to learn the fields before writing a query.",
            "get_data_schema",
            ["a b"],
            True,
            "Call it first to learn the fields before writing a query." + _fast('"a b"'),
        ),
        # the owner's words: a reworded sentence or fixed text, another type, data text after the fixed text
        (
            "Run it and return its value. Filters on a are fast.",
            "query_data",
            ["b"],
            False,
            "Run it and return its value. Filters on a are fast.",
        ),
        (
            "Run it, returning its value." + _fast("a"),
            "query_data",
            ["b"],
            True,
            "Run it, returning its value." + _fast("a"),
        ),
        (
            "Preview it and return its value." + _fast("a"),
            "preview",
            ["b"],
            True,
            "Preview it and return its value." + _fast("a"),
        ),
        (
            'Run it and return its value. Data: "x' + _fast("a") + '".',
            "query_data",
            ["b"],
            False,
            'Run it and return its value. Data: "x' + _fast("a") + '".',
        ),
    ],
)
def test_the_fast_sentence_is_rewritten_only_at_its_place(description, tool_type, fields, generated, expected):
    assert fast_fields_description(description, tool_type, fields, generated=generated) == expected


def test_a_description_the_sentence_would_grow_past_the_limit_is_cut_as_generation_cuts():
    description = "Run it and return its value." + "x" * (MAX_DESCRIPTION - 30)
    updated = fast_fields_description(description, "query_data", ["status"], generated=True)
    assert len(updated) == MAX_DESCRIPTION
    assert (
        updated
        == ("Run it and return its value." + _fast("status") + "x" * MAX_DESCRIPTION)[: MAX_DESCRIPTION - 1] + "…"
    )


@pytest.mark.django_db
@pytest.mark.parametrize("value", [{}, {"status": 1}, "", ["a", "a"]])
def test_a_table_created_with_bad_indexed_fields_is_refused_whole(owner, value):
    before = db_snapshot()

    response = client_for(owner).post("/api/tables/", {"name": "orders", "indexed_fields": value}, format="json")

    assert response.status_code == 400
    assert response.json()["error"] == "VALIDATION_ERROR"
    assert list(response.json()["fields"]) == ["indexed_fields"]
    assert db_snapshot() == before


#
# The engine's indexes
#


def test_index_names_are_deterministic_and_bounded_and_expressions_are_the_renderers():
    """Names: tr_<collection>_<12 hex of the field's SHA-256>[_s|_n], at most 63 characters at the largest ids
    and longest names; expressions: exactly what the renderer writes for the field."""
    long_name = "é" * 200
    for engine in ("sqlite", "postgresql"):
        statements = index_statements(
            dialect=engine, records_table=RECORDS, collection_id=2**63 - 1, field_name=long_name
        )
        again = index_statements(dialect=engine, records_table=RECORDS, collection_id=2**63 - 1, field_name=long_name)
        assert statements == again
        assert all(len(name) <= 63 for name in statements)
        assert all(name.startswith("tr_9223372036854775807_") for name in statements)
    path = (("field", "status"),)
    sqlite = index_statements(dialect="sqlite", records_table=RECORDS, collection_id=7, field_name="status")
    assert list(sqlite.values()) == [
        f'CREATE INDEX IF NOT EXISTS "{next(iter(sqlite))}" ON "{RECORDS}" ((data ->> \'$."status"\'))'
        " WHERE collection_id = 7"
    ]
    assert dialect_for("sqlite").value(path).text == "(data ->> '$.\"status\"')"
    postgres = index_statements(dialect="postgresql", records_table=RECORDS, collection_id=7, field_name="status")
    number_index, string_index = sorted(postgres)
    assert number_index.endswith("_n")
    assert string_index.endswith("_s")
    assert postgres[number_index].endswith(
        "((CASE WHEN jsonb_typeof((data -> 'status')) = 'number' THEN (data ->> 'status')::numeric END))"
        " WHERE collection_id = 7"
    )
    assert postgres[string_index].endswith("""(((data ->> 'status') COLLATE "C")) WHERE collection_id = 7""")
    assert dialect_for("postgresql").string(path).text == """(data ->> 'status') COLLATE "C\""""


def test_the_compound_index_covers_the_first_declared_fields_in_the_forms_their_values_take():
    """Two or more fields: one compound index on the first COMPOUND_FIELDS, in their declared order, each
    column the renderer's own expression: SQLite's one value, then `position` and each field's JSON text (the
    covering columns); PostgreSQL's number form for a field of numbers
    (nulls aside), else its string form (unknown kinds too). The name follows the fields, their order and
    forms, so new kinds make a new index."""
    known = Known.of({"fields": {"status": ["string"], "total": ["number", "null"], "flag": ["boolean"]},
                      "rows": True, "open": False, "records": ["object"]})  # fmt: skip
    fields = ["status", "total", "flag", "a", "b"]
    sqlite = compound_statement(dialect="sqlite", records_table=RECORDS, collection_id=7, fields=fields)
    postgres = compound_statement(dialect="postgresql", records_table=RECORDS, collection_id=7, fields=fields,
                                  known=known)  # fmt: skip
    unknown = compound_statement(dialect="postgresql", records_table=RECORDS, collection_id=7, fields=fields)
    (sqlite_name, sqlite_sql), (name, sql) = next(iter(sqlite.items())), next(iter(postgres.items()))
    assert sqlite_sql == (
        f'CREATE INDEX IF NOT EXISTS "{sqlite_name}" ON "{RECORDS}" ((data ->> \'$."status"\'), '
        """(data ->> '$."total"'), (data ->> '$."flag"'), (data ->> '$."a"'), position, (data -> '$."status"'), """
        """(data -> '$."total"'), (data -> '$."flag"'), (data -> '$."a"')) WHERE collection_id = 7"""
    )
    assert sql == (
        f'CREATE INDEX IF NOT EXISTS "{name}" ON "{RECORDS}" (((data ->> \'status\') COLLATE "C"), '
        "(CASE WHEN jsonb_typeof((data -> 'total')) = 'number' THEN (data ->> 'total')::numeric END), "
        """((data ->> 'flag') COLLATE "C"), ((data ->> 'a') COLLATE "C")) WHERE collection_id = 7"""
    )
    assert COMPOUND_FIELDS == 4
    assert sqlite_name.startswith("tr_7_")
    assert sqlite_name.endswith("_c")
    assert len(sqlite_name) == len("tr_7_") + 12 + len("_c")
    assert len({sqlite_name, name, *unknown}) == 3
    assert set(unknown.values()) != set(postgres.values())
    assert compound_statement(dialect="sqlite", records_table=RECORDS, collection_id=7, fields=["total", "status"])
    assert not set(compound_statement(dialect="sqlite", records_table=RECORDS, collection_id=7,
                                      fields=["total", "status"])) & set(sqlite)  # fmt: skip
    assert compound_statement(dialect="sqlite", records_table=RECORDS, collection_id=7, fields=["status"]) == {}


@pytest.mark.django_db(transaction=True)
def test_a_filter_testing_the_leading_declared_fields_reads_their_compound_index(owner, make_table):
    """`status == 'status-0' && total > 1000` over 2,000 records: 500 have the status, 999 the total, 250 both.
    Declared `status` then `total`, the compound index finds the 250 (an equality on its first column, a range
    on its second): SQLite's statement reads it; PostgreSQL gets it, valid, for its planner to weigh (which
    index a plan takes there depends on the statistics of every collection's records, bench/README.md has the
    100,000-record plan). The answer is jmespath's; a filter on the second field alone never reads it."""
    # given
    table = make_table(owner, name="orders", data=[], storage="document")  # no collection: `store` adds them
    records = [{"id": index, "status": f"status-{index % 4}", "total": index} for index in range(2000)]
    collection = store(table, "/orders", records)
    expression = "[?status=='status-0' && total > `1000`].id"

    # when
    services.table_update(table=table, indexed_fields=["status", "total"])

    # then
    (compound,) = _compound(collection.collection_id, "status", "total")
    assert compound in record_indexes()
    query = compile_sql_expression(expression, dialect(), "array")
    assert query is not None
    with connection.cursor() as cursor:
        known = field_kinds(cursor, collection.collection_id)
        statement = statement_for(query, cursor, table=RECORDS, collection_id=collection.collection_id, known=known)
        assert "+(data" not in statement.sql  # SQLite: no test kept from its index
        cursor.execute(("EXPLAIN " if dialect() == "postgresql" else "EXPLAIN QUERY PLAN ") + statement.sql,
                       statement.params)  # fmt: skip
        plan = " ".join(str(column) for row in cursor.fetchall() for column in row)
        answer = run_sql(query, cursor, table=RECORDS, collection_id=collection.collection_id, known=known)
    if dialect() == "sqlite":  # the statement's choice (less_selective_indexes), not the planner's guess
        assert f"USING INDEX {compound} (<expr>=? AND <expr>>?)" in plan, plan
    else:  # PostgreSQL's planner chooses by the statistics of the whole records table: the index exists, valid
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = %s",
                (compound,),
            )
            assert cursor.fetchall() == [(True,)]
    assert answer is not None
    assert answer.value == jmespath.search(expression, records) == list(range(1004, 2000, 4))
    plan, ids = _plan_of("[?total > `1990`].id", collection.collection_id)
    assert compound not in plan, plan
    assert ids == list(range(1991, 2000))


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(dialect() != "sqlite", reason="only SQLite's compound indexes changed")
def test_the_migration_builds_sqlite_compound_indexes_again_with_their_covering_columns(owner, make_table):
    """A compound index made before it carried `position` and its fields' JSON text (its columns the fields'
    values alone, its name spelled over their forms alone) is replaced by the migration with the one
    compound_statement makes now; a table declaring one field, and its indexes, are left as they are; a second
    run changes nothing."""
    # given
    migration = importlib.import_module("tools_app.migrations.0034_sqlite_covering_compound_indexes")
    _table, collection, _single, alone = two_indexed_tables(owner, make_table, 30)
    (current,) = _compound(collection.collection_id, "status", "total")
    old = f"tr_{collection.collection_id}_{indexes._field_hash(chr(0).join(['vstatus', 'vtotal']))}_c"
    with connection.cursor() as cursor:
        cursor.execute(f'DROP INDEX "{current}"')
        cursor.execute(
            f'CREATE INDEX "{old}" ON "{RECORDS}" ((data ->> \'$."status"\'), (data ->> \'$."total"\'))'
            f" WHERE collection_id = {collection.collection_id}"
        )
    before = record_indexes()

    # when
    with connection.schema_editor() as editor:
        migration.covering_compound_indexes(django_apps, editor)
    after = record_indexes()
    with connection.schema_editor() as editor:
        migration.covering_compound_indexes(django_apps, editor)

    # then
    assert old in before
    assert after == before - {old} | {current}
    assert record_indexes() == after
    assert set(_names(alone.collection_id, "total")) <= after
    with connection.cursor() as cursor:
        cursor.execute("SELECT sql FROM sqlite_master WHERE name = %s", (current,))
        assert ", position, (data -> '$.\"status\"'), (data -> '$.\"total\"')) WHERE" in cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_a_slice_of_a_sorted_list_reads_the_key_index_and_answers_as_jmespath(owner, make_table):
    """sort_by(...)[a:b], [-n:] and an index of the sorted list are ORDER BY ... LIMIT over the rows, and
    max_by/min_by/max on SQLite the greatest/least key then its first row: with the collection's field kinds
    (as the tools compile) and `total` declared, the plans read the key's index (PostgreSQL: numeric, _n; SQLite
    for the greatest/least key), and every answer is jmespath's, ties in list order included."""
    # given
    table = make_table(owner, name="orders", data=[], storage="document")  # no collection: `store` adds them
    records = [{"id": index, "total": (index * 7) % 500} for index in range(2000)]  # each total held 4 times
    collection = store(table, "/orders", records)
    services.table_update(table=table, indexed_fields=["total"])
    total_names = _names(collection.collection_id, "total")
    with connection.cursor() as cursor:
        known = field_kinds(cursor, collection.collection_id)
        # the build left the planner statistics of the new indexes (no ANALYZE here)
        if dialect() == "postgresql":
            cursor.execute("SELECT count(*) FROM pg_stats WHERE tablename = %s", (total_names[0],))
        else:
            cursor.execute("SELECT count(*) FROM sqlite_stat1 WHERE idx = %s", (total_names[0],))
        assert cursor.fetchone()[0] == 1
    assert known is not None
    explain = "EXPLAIN " if dialect() == "postgresql" else "EXPLAIN QUERY PLAN "
    for expression in [
        "sort_by(@, &total)[-3:].id",
        "sort_by(@, &total)[:5].id",
        "sort_by(@, &total)[2:6].id",
        "sort_by(@, &total)[-6:-2].id",
        "sort_by(@, &total)[-1]",
        "sort_by(@, &total)[0].id",
        "sort_by(@, &total)[-2].id",
        "sort_by(@, &total)[4000]",
        "max_by(@, &total).id",
        "min_by(@, &total).id",
        "max([*].total)",
    ]:
        query = compile_sql_expression(expression, dialect(), "array")
        assert query is not None
        statement = query.statement(table=RECORDS, collection_id=collection.collection_id, known=known)
        with connection.cursor() as cursor:
            cursor.execute(explain + statement.sql, statement.params)
            plan = " ".join(str(column) for row in cursor.fetchall() for column in row)
            answer = run_sql(query, cursor, table=RECORDS, collection_id=collection.collection_id, known=known)
        # then
        assert answer is not None
        assert answer.value == jmespath.search(expression, records), expression
        if dialect() == "postgresql" and "4000" not in expression:  # past the end: the planner rather scans
            assert total_names[0] in plan, (expression, plan)
        if dialect() == "sqlite" and not expression.startswith("sort_by"):
            assert total_names[0] in plan, (expression, plan)
    assert jmespath.search("sort_by(@, &total)[-3:].id", records) == [857, 1357, 1857]


@pytest.mark.django_db(transaction=True)
def test_declared_fields_are_indexed_per_collection_and_the_compiled_filter_uses_them(owner, make_table):
    """Records written with store.write_records; `status` declared → the collection's index exists after the
    commit and the engine's plan for the compiled filter uses it (the same answer); removing the field drops it."""
    # given
    table = make_table(owner, name="orders", data=[], storage="document")  # no collection: `store` adds them
    records = [{"id": index, "status": f"status-{index % 40}", "total": index} for index in range(2000)]
    collection = store(table, "/orders", records)
    status_names = _names(collection.collection_id, "status")
    before, expected = _plan_of("[?status=='status-0'].id", collection.collection_id)
    assert not any(name in before for name in status_names)

    # when
    services.table_update(table=table, indexed_fields=["status", "total"])

    # then
    total_names = _names(collection.collection_id, "total")
    assert record_indexes() == set(status_names) | set(total_names) | _compound(
        collection.collection_id, "status", "total"
    )
    plan, ids = _plan_of("[?status=='status-0'].id", collection.collection_id)
    # SQLite's one index, PostgreSQL's string (_s) index, or the compound index that leads with the field
    assert any(name in plan for name in (status_names[-1], *_compound(collection.collection_id, "status", "total")))
    assert ids == expected == list(range(0, 2000, 40))
    plan, ids = _plan_of("[?total == `1990`].id", collection.collection_id)
    if dialect() == "postgresql":  # SQLite's statement also checks for integers beyond 64 bits (an OR): a scan
        assert total_names[0] in plan, plan  # the numeric (_n) index (sorted: _n before _s)
    assert ids == [1990]

    # when
    services.table_update(table=table, indexed_fields=["total"])

    # then
    assert record_indexes() == set(total_names)
    plan, ids = _plan_of("[?status=='status-0'].id", collection.collection_id)
    assert not any(name in plan for name in status_names)
    assert ids == expected


@pytest.mark.django_db(transaction=True)
def test_a_new_collection_gets_the_indexes_and_a_deleted_table_loses_them(owner, make_table):
    # given
    table = make_table(owner, name="orders", data=[], storage="document")  # no collection: `store` adds them
    first = store(table, "/a", [{"id": 1, "status": "paid"}])
    services.table_update(table=table, indexed_fields=["status"])
    assert record_indexes() == set(_names(first.collection_id, "status"))

    # when: the storage creates another collection and calls ensure_indexes
    second = store(table, "/b", [{"id": 2, "status": "new"}])
    ensure_indexes(table.pk)

    # then
    assert record_indexes() == set(_names(first.collection_id, "status")) | set(_names(second.collection_id, "status"))

    # when
    services.table_delete(table=table)

    # then
    assert TableCollection.objects.count() == 0
    assert record_indexes() == set()


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_declaration_builds_no_index(owner, make_table):
    """Inside a transaction the build waits for the commit: a rollback leaves neither fields nor indexes."""
    table = make_table(owner, name="orders", data=[], storage="document")  # no collection: `store` adds them
    store(table, "/a", [{"id": 1, "status": "paid"}])

    def declare_then_fail() -> None:
        with transaction.atomic():
            services.table_update(table=table, indexed_fields=["status"])
            raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError):
        declare_then_fail()

    assert Table.objects.get(pk=table.pk).indexed_fields == []
    # This table's collections only: a transactional test's flush empties the tables, not the indexes an
    # earlier test on the same worker built.
    ours = tuple(f"tr_{pk}_" for pk in TableCollection.objects.filter(table=table).values_list("pk", flat=True))
    assert ours
    assert {name for name in record_indexes() if name.startswith(ours)} == set()


#
# Slow queries on unindexed fields
#


@pytest.mark.parametrize(
    ("expression", "fields"),
    [
        ("[?status=='paid'].id", {"status"}),
        ("[?status=='paid' && total > `5`] | sort_by(@, &customer)[:3].id", {"status", "total", "customer"}),
        ("[?!(a.b == `1`) || starts_with(name, 'x')]", {"name"}),
        ("max_by(@, &total).id", {"total"}),
        ("[*].total | max(@)", {"total"}),
        ("[*].id", set()),
        ("length([?contains(tags, 'x')])", {"tags"}),
    ],
)
def test_a_plan_lists_the_fields_it_filters_or_sorts_on(expression, fields):
    assert filtered_fields(build_plan(Parser().parse(expression).parsed)) == fields


def _slow_count(field_name: str) -> float:
    return REGISTRY.get_sample_value("toolhub_slow_queries_total", {"field": field_name}) or 0.0


@override_settings(TOOLHUB_SLOW_QUERY_MS=50)
def test_a_slow_query_on_an_unindexed_field_is_counted_and_suggests_the_field():
    query = compile_sql_expression("[?status=='paid' && total > `5`].id", "sqlite", "array")
    assert query is not None
    status_before, total_before = _slow_count("status"), _slow_count("total")

    with slow_queries.watching() as notes:
        fast = slow_queries.observe_query(query, indexed_fields=[], duration_ms=50)
        covered = slow_queries.observe_query(query, indexed_fields=["status", "total"], duration_ms=900)
        slow = slow_queries.observe_query(query, indexed_fields=["status"], duration_ms=120.4)
        note = slow_queries.current_note()

    assert fast is None
    assert covered is None
    assert slow == slow_queries.SlowQuery(("total",), 120.4)
    assert note == (
        "A table query took 120 ms filtering or sorting on `total` without an index: declare `total` in the "
        "table's indexed_fields."
    )
    assert notes == [slow]
    assert _slow_count("total") == total_before + 1
    assert _slow_count("status") == status_before
    assert slow_queries.current_note() == ""  # outside a call


def _statistics(collection_id: int) -> set[str]:
    """The extended statistics of the collection (an earlier transactional test's flush keeps others')."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT stxname FROM pg_statistic_ext WHERE stxrelid = %s::regclass", (RECORDS,))
        return {row[0] for row in cursor.fetchall() if row[0].startswith(f"tr_{collection_id}_")}


@pytest.mark.django_db(transaction=True)
def test_a_filter_on_two_indexed_fields_reads_the_index_of_the_selective_one(owner, make_table):
    """PostgreSQL takes no statistics from a partial index: the fields' extended statistics (made with their
    indexes, dropped with them) let its planner see that `total > 1950` matches a few dozen records where
    `status == 'status-0'` matches 500, and read the `total` index (with a fixed guess for each condition it
    reads the `status` index and every record it lists). SQLite: the same answer."""
    # given
    table = make_table(owner, name="orders", data=[])
    records = [{"id": index, "status": f"status-{index % 4}", "total": index} for index in range(2000)]
    collection = store(table, "/orders", records)
    expression = "[?status=='status-0' && total > `1950`].id"

    # when
    services.table_update(table=table, indexed_fields=["status", "total"])

    # then: the statement as the tools run it (with the collection's field kinds: `total` is only ever a number)
    query = compile_sql_expression(expression, dialect(), "array")
    assert query is not None
    with connection.cursor() as cursor:
        known = field_kinds(cursor, collection.collection_id)
        answer = run_sql(query, cursor, table=RECORDS, collection_id=collection.collection_id, known=known)
        statement = query.statement(table=RECORDS, collection_id=collection.collection_id, known=known)
        cursor.execute(("EXPLAIN " if dialect() == "postgresql" else "EXPLAIN QUERY PLAN ") + statement.sql,
                       statement.params)  # fmt: skip
        plan = " ".join(str(column) for row in cursor.fetchall() for column in row)
    assert answer is not None
    assert answer.value == list(range(1952, 2000, 4))
    if dialect() != "postgresql":
        return
    status_names, total_names = _names(collection.collection_id, "status"), _names(collection.collection_id, "total")
    prefix = total_names[0].removesuffix("_n")
    assert _statistics(collection.collection_id) == {status_names[0].removesuffix("_n") + "_x", prefix + "_x"}
    # The `total` index, or the compound index of the two declared fields (its range on `total` within the
    # equality on `status`): either lists a few dozen records. Never the `status` index alone.
    compound = re.search(rf"tr_{collection.collection_id}_[0-9a-f]{{12}}_c", plan)
    assert total_names[0] in plan or compound is not None, plan
    assert status_names[1] not in plan, plan

    # when
    services.table_update(table=table, indexed_fields=["status"])

    # then
    assert _statistics(collection.collection_id) == {status_names[0].removesuffix("_n") + "_x"}
