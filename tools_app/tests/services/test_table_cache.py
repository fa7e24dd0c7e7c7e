"""The per-process table cache (SPEC §1): reads parse a document once per version, and see every write.

A read asks the database for the table's version (one small query) and loads the `data` column
only when that version is not cached. "Another worker" is simulated by changing the row behind the
cache's back with a queryset .update(), as a second process would.
"""

import gc

import pytest
from django.db import connection
from django.db.models.fields import json as json_field
from django.test.utils import CaptureQueriesContext

from tools_app import services
from tools_app.data_access import operations
from tools_app.execution.executors import execute
from tools_app.kernel.errors import ErrorCode, ToolError
from tools_app.services.table_cache import table_cache
from tools_app.tests.history_helpers import write_elsewhere

RECORDS = [
    {"id": 1, "status": "paid", "total": 10},
    {"id": 2, "status": "shipped", "total": 600},
    {"id": 3, "status": "shipped", "total": 700},
]


def _data_loads(queries: CaptureQueriesContext) -> int:
    """How many queries read the table's `data` column (each one means a JSON parse)."""
    return sum(1 for query in queries.captured_queries if '"data"' in query["sql"] and "SELECT" in query["sql"])


@pytest.fixture
def cached_table(make_table, owner):
    """A document table: the cache holds whole documents (a rows table's records are never cached whole)."""
    return make_table(owner, data=[dict(record) for record in RECORDS], storage="document")


@pytest.fixture
def query_tool(make_tool, owner, cached_table):
    return make_tool(owner, cached_table, type="query_data", name="query_orders")


@pytest.fixture
def create_tool(make_tool, owner, cached_table):
    return make_tool(owner, cached_table, type="create", name="create_order")


SHIPPED_BIG = {"query": "[?status=='shipped' && total > `500`].id"}


def test_first_read_loads_the_document_and_later_reads_do_not(query_tool):
    """Cold: a version query and one data load; warm: the version query only."""
    # given
    table_cache.clear()
    # when
    with CaptureQueriesContext(connection) as cold:
        cold_result = execute(tool=query_tool, arguments=SHIPPED_BIG)
    with CaptureQueriesContext(connection) as warm:
        warm_results = [execute(tool=query_tool, arguments=SHIPPED_BIG) for _ in range(3)]
    # then
    assert cold_result == [2, 3]
    assert warm_results == [[2, 3], [2, 3], [2, 3]]
    assert (len(cold.captured_queries), _data_loads(cold)) == (2, 1)
    assert (len(warm.captured_queries), _data_loads(warm)) == (3, 0)


def test_write_in_this_process_updates_the_cache_without_a_reload(
    query_tool, create_tool, cached_table, django_capture_on_commit_callbacks
):
    """After a committed write the cache holds the new version, so the next read loads nothing."""
    # given
    execute(tool=query_tool, arguments=SHIPPED_BIG)
    # when
    with django_capture_on_commit_callbacks(execute=True):
        outcome = execute(tool=create_tool, arguments={"elements": [{"id": 4, "status": "shipped", "total": 900}]})
    with CaptureQueriesContext(connection) as read:
        result = execute(tool=query_tool, arguments=SHIPPED_BIG)
    # then
    assert outcome == {"created": 1, "version": 2}
    assert result == [2, 3, 4]
    assert (len(read.captured_queries), _data_loads(read)) == (1, 0)
    cached_table.refresh_from_db()
    assert cached_table.version == 2
    assert [record["id"] for record in cached_table.data] == [1, 2, 3, 4]


def test_write_with_a_warm_cache_does_not_reload_the_document(query_tool, create_tool, cached_table):
    """The writer takes the row lock and reads the version; the cached document of that version is reused."""
    # given
    execute(tool=query_tool, arguments=SHIPPED_BIG)
    # when
    with CaptureQueriesContext(connection) as write:
        outcome = execute(tool=create_tool, arguments={"elements": [{"id": 4, "status": "new", "total": 1}]})
    # then
    assert outcome == {"created": 1, "version": 2}
    assert _data_loads(write) == 0
    cached_table.refresh_from_db()
    assert cached_table.version == 2
    assert [record["id"] for record in cached_table.data] == [1, 2, 3, 4]


def test_read_after_an_uncached_version_catches_up_from_the_log(query_tool, create_tool, cached_table):
    """A version the cache has not seen (here: the write's cache update never ran) is the cached older version
    with the change log applied: the version, then the patches; the document is not parsed again."""
    # given
    execute(tool=query_tool, arguments=SHIPPED_BIG)
    execute(tool=create_tool, arguments={"elements": [{"id": 4, "status": "shipped", "total": 900}]})
    # when
    with CaptureQueriesContext(connection) as read:
        result = execute(tool=query_tool, arguments=SHIPPED_BIG)
    # then
    assert result == [2, 3, 4]
    assert (len(read.captured_queries), _data_loads(read)) == (2, 0)


def test_write_by_another_worker_is_seen_by_the_next_read(query_tool, cached_table):
    """Another process's write (an entry and version +1) shows on this process's next read, caught up from the log."""
    # given
    assert execute(tool=query_tool, arguments=SHIPPED_BIG) == [2, 3]
    # when
    write_elsewhere(
        cached_table.pk, [{"op": "add", "path": "/-", "value": {"id": 9, "status": "shipped", "total": 999}}]
    )
    with CaptureQueriesContext(connection) as read:
        result = execute(tool=query_tool, arguments=SHIPPED_BIG)
    with CaptureQueriesContext(connection) as again:
        repeated = execute(tool=query_tool, arguments=SHIPPED_BIG)
    # then
    assert result == [2, 3, 9]
    assert repeated == [2, 3, 9]
    assert _data_loads(read) == 0
    assert (len(again.captured_queries), _data_loads(again)) == (1, 0)


def test_write_after_another_workers_write_keeps_both(query_tool, create_tool, cached_table):
    """A write never applies its change to a stale cached document: the other worker's record survives."""
    # given
    execute(tool=query_tool, arguments=SHIPPED_BIG)
    write_elsewhere(
        cached_table.pk, [{"op": "add", "path": "/-", "value": {"id": 9, "status": "shipped", "total": 999}}]
    )
    # when
    outcome = execute(tool=create_tool, arguments={"elements": [{"id": 4, "status": "new", "total": 1}]})
    # then
    assert outcome == {"created": 1, "version": 3}
    cached_table.refresh_from_db()
    assert cached_table.version == 3
    assert [record["id"] for record in cached_table.data] == [1, 2, 3, 9, 4]


def test_failed_write_leaves_the_cached_document_untouched(query_tool, create_tool, cached_table):
    """A create refused with KEY_EXISTS changes neither the row nor what readers get from the cache."""
    # given
    execute(tool=query_tool, arguments=SHIPPED_BIG)
    # when
    with pytest.raises(ToolError) as caught:
        execute(tool=create_tool, arguments={"elements": [{"id": 5}, {"id": 2}]})
    result = execute(tool=query_tool, arguments={"query": "[*].id"})
    # then
    assert caught.value.code == ErrorCode.KEY_EXISTS
    assert result == [1, 2, 3]
    cached_table.refresh_from_db()
    assert cached_table.version == 1
    assert cached_table.data == RECORDS


def test_data_schema_is_computed_once_per_version(make_tool, owner, cached_table, monkeypatch):
    """get_data_schema is derived once per cached version, and again after the version changes."""
    # given
    tool = make_tool(owner, cached_table, type="get_data_schema", name="orders_schema")
    calls = []
    original = operations.describe

    def counting_describe(value):
        calls.append(1)
        return original(value)

    monkeypatch.setattr(operations, "describe", counting_describe)
    # when
    first = execute(tool=tool, arguments={})
    second = execute(tool=tool, arguments={})
    write_elsewhere(cached_table.pk, [{"op": "replace", "path": "", "value": [{"id": 1}]}])
    third = execute(tool=tool, arguments={})
    # then
    assert first == second
    assert first["item_count"] == 3
    assert third["item_count"] == 1
    assert len(calls) == 2


def test_document_is_parsed_with_the_cyclic_collector_paused_and_resumed_after(query_tool, monkeypatch):
    """The parse of a cold read runs with gc disabled (it halves a 30 MB parse); gc is on again afterwards."""
    # given
    states = []
    original_loads = json_field.json.loads

    def recording_loads(*args, **kwargs):
        states.append(gc.isenabled())
        return original_loads(*args, **kwargs)

    monkeypatch.setattr(json_field.json, "loads", recording_loads)
    # when
    result = execute(tool=query_tool, arguments=SHIPPED_BIG)
    # then
    assert result == [2, 3]
    assert states == [False]
    assert gc.isenabled() is True


def test_collector_is_resumed_when_the_load_fails(cached_table, monkeypatch):
    """A failing load (here: the parse raises) still turns the collector back on."""

    # given
    def broken_loads(*args, **kwargs):
        raise ValueError("broken document")

    monkeypatch.setattr(json_field.json, "loads", broken_loads)
    # when
    with pytest.raises(ValueError, match="broken document"):
        services.table_data(cached_table.pk)
    # then
    assert gc.isenabled() is True
    assert table_cache.get(cached_table.pk, 1) is None
