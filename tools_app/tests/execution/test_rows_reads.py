"""Reads over tables stored as rows, beyond the differential test (test_rows_tables.py): the field kinds a
collection keeps at write time and the statements that rely on them, and the slow-query note of a read (a compiled
statement that answered or was stopped, a streamed evaluation). SQLite and PostgreSQL."""

import jmespath
import pytest
from django.db import DatabaseError, connection

from tools_app.data_access.sql import kinds
from tools_app.data_access.sql.store import field_kinds, write_records
from tools_app.data_access.sql_query import compile_sql_expression, run_sql
from tools_app.execution import records
from tools_app.execution.executors import execute
from tools_app.execution.pipeline import Caller, run_tool_call, target_of_tool
from tools_app.kernel import limits
from tools_app.kernel.errors import ToolError
from tools_app.kernel.telemetry.metrics import SLOW_QUERIES
from tools_app.models import CallLog, Surface, Table, TableCollection, TableRecord, TableRecordLayout

pytestmark = pytest.mark.django_db

ORDERS = [
    {"id": 1, "status": "shipped", "total": 600, "note": None},
    {"id": 2, "status": "shipped", "total": 20.5},
    {"id": 3, "status": "paid", "total": 900},
]
FILTER = "[?status=='shipped' && total > `500`].id"


def _dialect() -> str:
    return "postgresql" if connection.vendor == "postgresql" else "sqlite"


def _facts(collection_id: int) -> dict | None:
    return TableCollection.objects.values_list("field_kinds", flat=True).get(pk=collection_id)


def test_the_collections_table_of_the_facts_is_the_models():
    assert kinds.COLLECTIONS_TABLE == TableCollection._meta.db_table


def test_facts_of_records_list_each_fields_kinds_with_null_where_a_record_lacks_it():
    facts = kinds.of_records([{"a": 1, "b": "x"}, {"a": 2**64, "c": [1]}, "scalar", None])
    assert facts == {
        "rows": True,
        "open": False,
        "records": ["null", "object", "string"],
        "fields": {"a": ["null", "number", "wide"], "b": ["null", "string"], "c": ["array", "null"]},
    }
    grown = kinds.merge(kinds.of_records([{"a": 1}]), kinds.of_records([{"a": "1", "d": True}]))
    assert grown == {
        "rows": True,
        "open": False,
        "records": ["object"],
        "fields": {"a": ["number", "string"], "d": ["null", "true"]},
    }
    assert kinds.merge(None, kinds.of_records([{"a": 1}])) is None
    known = kinds.Known.of(grown)
    assert known is not None
    assert (known.field("a"), known.field("never")) == (frozenset({"number", "string"}), frozenset({"null"}))


def test_facts_of_records_of_one_shape_still_read_each_int_and_bool_value():
    # One shape (keys and value types): the first record's kinds stand for the rest, but an int's range and a
    # bool's value are read from every record.
    records = [{"id": 1, "flag": True, "note": "a"}, {"id": 2, "flag": True, "note": "b"}]
    records += [{"id": 2**64, "flag": False, "note": "c"}, {"note": None, "id": 3, "flag": True}]
    assert kinds.of_records(records) == {
        "rows": True,
        "open": False,
        "records": ["object"],
        "fields": {"flag": ["false", "true"], "id": ["number", "wide"], "note": ["null", "string"]},
    }
    # A field some records of a shape seen again and again lack is null for them.
    assert kinds.of_records([{"a": 1}, {"a": 2, "b": "x"}, {"a": 3, "b": "y"}, {"a": 4}])["fields"] == {
        "a": ["number"],
        "b": ["null", "string"],
    }


def test_facts_beyond_the_field_limit_leave_the_other_fields_unknown():
    many = {f"f{number}": number for number in range(limits.FIELD_KINDS_MAX_FIELDS + 5)}
    known = kinds.Known.of(kinds.of_records([many]))
    assert known is not None
    assert known.open is True
    assert known.field("f0") == frozenset({"number"})
    assert known.field(f"f{limits.FIELD_KINDS_MAX_FIELDS + 1}") is None
    # A later batch that is open itself: a field it left out may hold anything now.
    after = kinds.merge(kinds.of_records([{"f0": 1, "g": 2}]), kinds.of_records([many | {"f0": 1}]))
    assert after is not None
    assert kinds.Known.of(after).field("g") is None


def test_every_write_of_records_keeps_the_collections_facts(make_table, make_tool, owner):
    table = make_table(owner, name="orders", data=[dict(order) for order in ORDERS], storage="rows")
    for kind in ("create", "update", "delete"):
        make_tool(owner, table=table, type=kind, name=f"orders_{kind}", json_path="")
    collection = TableCollection.objects.get(table=table)
    assert _facts(collection.pk) == {
        "rows": True,
        "open": False,
        "records": ["object"],
        "fields": {"id": ["number"], "note": ["null"], "status": ["string"], "total": ["number"]},
    }
    caller = Caller(surface=Surface.ADMIN, user_id=owner.pk, user=owner)

    def call(kind, arguments):
        tool = table.tools.get(type=kind)
        assert run_tool_call(caller=caller, target=target_of_tool(tool), name=tool.name, arguments=arguments).ok

    call("create", {"elements": [{"id": 4, "status": "new", "total": "12"}]})
    call("update", {"elements": [{"id": 1, "status": ["odd"]}]})
    call("delete", {"keys": [4]})  # facts only grow: a kind once held is still listed
    assert _facts(collection.pk)["fields"] == {
        "id": ["number"],
        "note": ["null"],
        "status": ["array", "string"],
        "total": ["number", "string"],
    }


@pytest.fixture
def stored_orders():
    """A collection of ORDERS written as rows (its facts kept by the write)."""

    def make(value):
        table = Table.objects.create(owner_id=_owner().pk, name=f"t{Table.objects.count()}")
        collection = TableCollection.objects.create(table=table, mount="", kind="array")
        with connection.cursor() as cursor:
            write_records(
                cursor,
                dialect=_dialect(),
                records_table=TableRecord._meta.db_table,
                layouts_table=TableRecordLayout._meta.db_table,
                collection_id=collection.pk,
                value=value,
            )
        return collection.pk

    return make


def _owner():
    from django.contrib.auth import get_user_model

    user, _ = get_user_model().objects.get_or_create(username="facts-owner")
    return user


def _run(expression, collection_id, known):
    query = compile_sql_expression(expression, _dialect(), "array")
    assert query is not None
    with connection.cursor() as cursor:
        answer = run_sql(
            query, cursor, table=TableRecord._meta.db_table, collection_id=collection_id, known=known, layouts=None
        )
    return query.statement(table=TableRecord._meta.db_table, collection_id=collection_id, known=known), answer


def test_a_filter_over_known_kinds_has_no_type_checks_and_answers_as_jmespath(stored_orders):
    collection_id = stored_orders([dict(order) for order in ORDERS])
    with connection.cursor() as cursor:
        known = field_kinds(cursor, collection_id)
    unknown_statement, unknown = _run(FILTER, collection_id, None)
    statement, answer = _run(FILTER, collection_id, known)
    expected = jmespath.search(FILTER, ORDERS)
    assert expected == [1]
    assert (unknown.value, answer.value) == (expected, expected)
    # Without facts the statement checks that `total` is no string (jmespath raises there); with them it does not.
    if connection.vendor == "postgresql":
        type_check = "jsonb_typeof((data -> 'total')) IN ('string')"
    else:
        type_check = """json_type(data, '$."total"') IN ('text')"""
    assert type_check in unknown_statement.sql
    assert type_check not in statement.sql
    assert "field_kinds" in statement.sql


def test_a_statement_compiled_with_facts_a_later_write_outgrew_leaves_the_answer_to_the_evaluator(stored_orders):
    collection_id = stored_orders([dict(order) for order in ORDERS])
    with connection.cursor() as cursor:
        known = field_kinds(cursor, collection_id)
        # A record whose `total` is a string: over it jmespath raises, which the statement compiled with the
        # old facts no longer checks.
        write_records(
            cursor,
            dialect=_dialect(),
            records_table=TableRecord._meta.db_table,
            layouts_table=TableRecordLayout._meta.db_table,
            collection_id=collection_id,
            value=[{"id": 9, "status": "shipped", "total": "700"}],
            first_position=10**6,
        )
    _statement, stale = _run(FILTER, collection_id, known)
    assert stale is None  # the caller evaluates in Python, which raises jmespath's error
    with connection.cursor() as cursor:
        current = field_kinds(cursor, collection_id)
    assert current is not None
    assert current.field("total") == frozenset({"number", "string"})
    _statement, fresh = _run(FILTER, collection_id, current)
    assert fresh is None  # the error condition holds in the data itself now


def test_a_rows_query_raises_jmespaths_error_once_a_field_holds_a_string(make_table, make_tool, owner):
    added = {"id": 4, "status": "shipped", "total": "9"}
    document = make_table(
        owner, name="as document", data=[*(dict(order) for order in ORDERS), added], storage="document"
    )
    document_query = make_tool(owner, table=document, type="query_data", name="document_query", json_path="")
    table = make_table(owner, name="orders", data=[dict(order) for order in ORDERS], storage="rows")
    query = make_tool(owner, table=table, type="query_data", name="orders_query", json_path="")
    create = make_tool(owner, table=table, type="create", name="orders_create", json_path="")
    assert execute(tool=query, arguments={"query": FILTER}) == [1]
    execute(tool=create, arguments={"elements": [added]})
    with pytest.raises(ToolError) as raised:
        execute(tool=query, arguments={"query": FILTER})
    with pytest.raises(ToolError) as reference:
        execute(tool=document_query, arguments={"query": FILTER})
    assert (raised.value.code, str(raised.value)) == (reference.value.code, str(reference.value))
    assert "'>' not supported between instances of 'str' and 'int'" in str(raised.value)


def _slow_count(field: str) -> float:
    return SLOW_QUERIES.labels(field)._value.get()


def test_a_slow_unindexed_filter_leaves_its_note_in_the_call_log_and_an_indexed_one_does_not(
    settings, make_table, make_tool, owner
):
    table = make_table(owner, name="orders", data=[dict(order) for order in ORDERS], storage="rows")
    tool = make_tool(owner, table=table, type="query_data", name="orders_query", json_path="")
    Table.objects.filter(pk=table.pk).update(indexed_fields=["status"])
    settings.TOOLHUB_SLOW_QUERY_MS = 0  # every compiled statement counts as slow
    caller = Caller(surface=Surface.ADMIN, user_id=owner.pk, user=owner)
    before = (_slow_count("total"), _slow_count("status"))

    unindexed = run_tool_call(caller=caller, target=target_of_tool(tool), name=tool.name, arguments={"query": FILTER})
    indexed = run_tool_call(
        caller=caller, target=target_of_tool(tool), name=tool.name, arguments={"query": "[?status=='paid'].id"}
    )

    assert (unindexed.ok, indexed.ok) == (True, True)
    notes = list(CallLog.objects.order_by("id").values_list("notes", flat=True))
    assert len(notes) == 2
    assert notes[0].startswith("A table query took ")
    assert notes[0].endswith(NOTE_ON.format(field="total"))
    assert notes[1] == ""
    assert (_slow_count("total"), _slow_count("status")) == (before[0] + 1, before[1])


def test_a_fast_unindexed_filter_leaves_no_note(settings, make_table, make_tool, owner):
    table = make_table(owner, name="orders", data=[dict(order) for order in ORDERS], storage="rows")
    tool = make_tool(owner, table=table, type="query_data", name="orders_query", json_path="")
    settings.TOOLHUB_SLOW_QUERY_MS = 60_000
    caller = Caller(surface=Surface.ADMIN, user_id=owner.pk, user=owner)
    before = _slow_count("total")
    assert run_tool_call(caller=caller, target=target_of_tool(tool), name=tool.name, arguments={"query": FILTER}).ok
    assert list(CallLog.objects.values_list("notes", flat=True)) == [""]
    assert _slow_count("total") == before


NOTE_ON = "ms filtering or sorting on `{field}` without an index: declare `{field}` in the table's indexed_fields."


@pytest.mark.django_db(transaction=True)
def test_a_statement_the_budget_stops_leaves_its_note_in_the_call_log(
    settings, make_table, make_tool, owner, monkeypatch
):
    """A compiled statement on an unindexed field that the call's CPU budget stops inside the engine (in the read's
    own snapshot, outside any transaction, as a server runs it: on PostgreSQL the cancel aborts that transaction) is
    reported as one that answered: the call log's row is QUERY_TOO_EXPENSIVE with the note, the field counted. The
    declared fields come with the snapshot: nothing is read after the cancel."""
    # given
    data = [{"id": n, "name": f"name {n * 7919 % 40_000:05d}", "text": "x" * 60} for n in range(40_000)]
    table = make_table(owner, name="orders", data=data, storage="rows")
    tool = make_tool(owner, table=table, type="query_data", name="orders_query", json_path="")
    Table.objects.filter(pk=table.pk).update(indexed_fields=["id"])  # declared, no index built: not the filter's
    settings.TOOLHUB_SLOW_QUERY_MS = 0
    settings.TOOLHUB_QUERY_CPU_MS = 20
    statements = []

    def counted_run_sql(*args, **kwargs):
        statements.append(args[0])
        return run_sql(*args, **kwargs)

    monkeypatch.setattr(records, "run_sql", counted_run_sql)
    caller = Caller(surface=Surface.ADMIN, user_id=owner.pk, user=owner)
    before = (_slow_count("name"), _slow_count("id"))
    # when
    stopped = run_tool_call(
        caller=caller,
        target=target_of_tool(tool),
        name=tool.name,
        arguments={"query": "sort_by([?contains(name, '9')], &name)[*].{n: name, t: text}"},
    )
    # then
    assert stopped.error is not None
    assert stopped.error.code == "QUERY_TOO_EXPENSIVE"
    assert isinstance(stopped.error.__cause__, DatabaseError)  # stopped in the engine, not before the statement
    assert len(statements) == 1
    code, note = CallLog.objects.values_list("error_code", "notes").get()
    assert code == "QUERY_TOO_EXPENSIVE"
    assert note.startswith("A table query took ")
    assert note.endswith(NOTE_ON.format(field="name"))
    assert (_slow_count("name"), _slow_count("id")) == (before[0] + 1, before[1])


def test_a_slow_streamed_evaluation_on_an_unindexed_field_leaves_its_note_in_the_call_log(
    settings, make_table, make_tool, owner
):
    """A query that does not compile (`to_string` has no SQL) but decomposes is evaluated over the records in
    chunks (data_access.streamed: 6,000 records, three chunks, well over 1 ms); slow, it is reported on the fields
    its filter tests: `status` while undeclared, nothing once declared (`to_string(total)` is no index's
    expression, so `total` is never named)."""
    # given
    data = [{"id": n, "status": "shipped" if n % 5 == 0 else "paid", "total": n} for n in range(6_000)]
    table = make_table(owner, name="orders", data=data, storage="rows")
    tool = make_tool(owner, table=table, type="query_data", name="orders_query", json_path="")
    expression = "[?status=='shipped' && to_string(total) == '600'].id"
    assert compile_sql_expression(expression, _dialect(), "array") is None
    settings.TOOLHUB_SLOW_QUERY_MS = 1
    caller = Caller(surface=Surface.ADMIN, user_id=owner.pk, user=owner)
    before = (_slow_count("status"), _slow_count("total"))
    # when
    unindexed = run_tool_call(
        caller=caller, target=target_of_tool(tool), name=tool.name, arguments={"query": expression}
    )
    Table.objects.filter(pk=table.pk).update(indexed_fields=["status"])
    indexed = run_tool_call(caller=caller, target=target_of_tool(tool), name=tool.name, arguments={"query": expression})
    # then
    assert (unindexed.value, indexed.value) == ([600], [600])
    notes = list(CallLog.objects.order_by("id").values_list("notes", flat=True))
    assert len(notes) == 2
    assert notes[0].startswith("A table query took ")
    assert notes[0].endswith(NOTE_ON.format(field="status"))
    assert notes[1] == ""
    assert (_slow_count("status"), _slow_count("total")) == (before[0] + 1, before[1])


def test_a_read_whose_rows_head_was_read_with_its_target_answers_from_its_snapshot(make_table, make_tool, owner):
    """Within rows_head_known (the call's target query read the version and storage) a rows read sends no head
    statement: it answers the version its snapshot reads, and a table deleted since is MOUNT_NOT_FOUND."""
    from django.test.utils import CaptureQueriesContext

    from tools_app.services.table_log import rows_head_known

    # given
    table = make_table(owner, name="orders", data=[dict(order) for order in ORDERS], storage="rows")
    tool = make_tool(owner, table, type="select", name="orders_by_id")
    version = Table.objects.get(pk=table.pk).version
    # when
    with rows_head_known(table.pk, version - 1), CaptureQueriesContext(connection) as queries:
        found = execute(tool=tool, arguments={"keys": [2]})
    Table.objects.filter(pk=table.pk).delete()
    with rows_head_known(table.pk, version), pytest.raises(ToolError) as gone:
        execute(tool=tool, arguments={"keys": [2]})
    # then
    assert found == {"items": [ORDERS[1]], "not_found": []}
    assert not any('FROM "tools_app_table" WHERE' in query["sql"] for query in queries.captured_queries)
    assert gone.value.code == "MOUNT_NOT_FOUND"
    assert (Table.objects.filter(pk=table.pk).exists(), CallLog.objects.count()) == (False, 0)
