"""The per-process table cache (SPEC §1): reads parse a document once per version, and see every write.

A read asks the database for the table's version (one small query) and loads the `data` column
only when that version is not cached. "Another worker" is simulated by changing the row behind the
cache's back with a queryset .update(), as a second process would.
"""

import gc
import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tools_app import services
from tools_app.data_access import operations
from tools_app.execution import records
from tools_app.execution.executors import execute
from tools_app.kernel.errors import ErrorCode, ToolError
from tools_app.services.table_cache import ENTRY_BYTES, table_cache
from tools_app.tests.history_helpers import write_elsewhere
from tools_app.validators import TableDocumentDecoder

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
    """The parse of a cold read runs with gc disabled (it halves a 30 MB parse); gc is on again afterwards. (The
    table document's decoder is watched, not json.loads: the call parses other JSON, its tool's fields.)"""
    # given
    states = []
    original_decode = TableDocumentDecoder.decode

    def recording_decode(self, *args, **kwargs):
        states.append(gc.isenabled())
        return original_decode(self, *args, **kwargs)

    monkeypatch.setattr(TableDocumentDecoder, "decode", recording_decode)
    # when
    result = execute(tool=query_tool, arguments=SHIPPED_BIG)
    # then
    assert result == [2, 3]
    assert states == [False]
    assert gc.isenabled() is True


def test_collector_is_resumed_when_the_load_fails(cached_table, monkeypatch):
    """A failing load (here: the parse raises) still turns the collector back on."""

    # given
    def broken_decode(self, *args, **kwargs):
        raise ValueError("broken document")

    monkeypatch.setattr(TableDocumentDecoder, "decode", broken_decode)
    # when
    with pytest.raises(ValueError, match="broken document"):
        services.table_data(cached_table.pk)
    # then
    assert gc.isenabled() is True
    assert table_cache.get(cached_table.pk, 1) is None


#
# The bound in bytes (TOOLHUB_TABLE_CACHE_BYTES)
#

PAD = "x" * 3000


@pytest.fixture
def three_tables(make_table, owner):
    """Three document tables of the same JSON size (3,024 bytes each), in no collection: documents whatever the
    storage default."""
    return [make_table(owner, name=name, data={"name": name, "pad": PAD}, storage="document") for name in "abc"]


def _entry_weight(table) -> int:
    """What the cache weighs the table by: its JSON text and the entry's ENTRY_BYTES."""
    return len(json.dumps({"name": table.name, "pad": PAD})) + ENTRY_BYTES


def _read(tables, *order: int) -> int:
    """Read the tables at the positions `order` whole, one after another; how many snapshot loads that took."""
    with CaptureQueriesContext(connection) as queries:
        for position in order:
            assert services.table_data(tables[position].pk)[1] == {"name": tables[position].name, "pad": PAD}
    return _data_loads(queries)


def test_the_least_recently_read_documents_leave_once_their_bytes_pass_the_bound(three_tables, settings):
    """With room for two of the three tables, a third read makes the least recently read one leave; read again,
    it is loaded again and the next least recently read leaves."""
    # given
    a, b, c = three_tables
    settings.TOOLHUB_TABLE_CACHE_BYTES = 2 * _entry_weight(a) + 100
    table_cache.clear()
    # when
    loads_first = _read(three_tables, 0, 1, 2)
    held_first = table_cache.table_ids()
    loads_again = _read(three_tables, 0)
    held_again = table_cache.table_ids()
    loads_warm = _read(three_tables, 2, 0)
    # then
    assert (_entry_weight(a), _entry_weight(b), _entry_weight(c)) == (4048, 4048, 4048)
    assert (loads_first, held_first) == (3, [b.pk, c.pk])
    assert (loads_again, held_again) == (1, [c.pk, a.pk])
    assert (loads_warm, table_cache.table_ids()) == (0, [c.pk, a.pk])
    assert table_cache.weight == 2 * 4048


def test_each_entry_weighs_its_json_text_as_data_bytes_counts_it(three_tables):
    """An entry parsed from the snapshot weighs the text it was parsed from: the table's data_bytes, on both
    engines."""
    # given
    table_cache.clear()
    # when
    _read(three_tables, 0, 1, 2)
    # then
    assert [table_cache.held(table.pk).size for table in three_tables] == [table.data_bytes for table in three_tables]
    assert [table.data_bytes for table in three_tables] == [3024, 3024, 3024]
    assert table_cache.weight == 3 * 4048


def test_a_write_here_and_a_write_elsewhere_move_the_entrys_size_with_data_bytes(
    query_tool, create_tool, cached_table, django_capture_on_commit_callbacks
):
    """A write in this process and a catch-up over another worker's entry both weigh the new version by the size
    change of its patch, as data_bytes counts it."""
    # given
    table_cache.clear()
    execute(tool=query_tool, arguments=SHIPPED_BIG)
    loaded = table_cache.held(cached_table.pk).size
    # when: a write here
    with django_capture_on_commit_callbacks(execute=True):
        execute(tool=create_tool, arguments={"elements": [{"id": 4, "status": "shipped", "total": 900}]})
    written = table_cache.held(cached_table.pk)
    cached_table.refresh_from_db()
    written_bytes = cached_table.data_bytes
    # when: a write elsewhere (its entry as table_write makes it: the patch and its inverse)
    record = {"id": 9, "status": "new", "total": 1}
    write_elsewhere(cached_table.pk, [{"op": "add", "path": "/4", "value": record}], [{"op": "remove", "path": "/4"}])
    version, data = services.table_data(cached_table.pk)
    caught_up = table_cache.held(cached_table.pk)
    # then
    expected = RECORDS + [{"id": 4, "status": "shipped", "total": 900}]
    assert loaded == len(json.dumps(RECORDS)) == 134
    assert (written.version, written.size, written_bytes) == (2, 180, 180)
    assert len(json.dumps(expected)) == 180
    assert (version, data) == (3, [*expected, record])
    assert (caught_up.version, caught_up.size) == (3, len(json.dumps([*expected, record])))


def test_a_document_over_the_whole_bound_is_answered_and_not_kept(three_tables, settings):
    """A table heavier than TOOLHUB_TABLE_CACHE_BYTES is read and answered every time (each read loads it) and never
    kept; the documents already held stay."""
    # given
    a, b, c = three_tables
    table_cache.clear()
    settings.TOOLHUB_TABLE_CACHE_BYTES = 2 * _entry_weight(a) + 100
    _read(three_tables, 0)
    grown = [{"op": "replace", "path": "/pad", "value": PAD * 3}]
    # b: 9,024 bytes, over the bound (weighed 12,033: a catch-up counts what a patch writes, not what it removes)
    write_elsewhere(b.pk, grown, [{"op": "replace", "path": "/pad", "value": PAD}])
    # when
    with CaptureQueriesContext(connection) as first:
        first_answer = services.table_data(b.pk)
    with CaptureQueriesContext(connection) as second:
        second_answer = services.table_data(b.pk)
    # then
    assert first_answer == second_answer == (2, {"name": "b", "pad": PAD * 3})
    assert (_data_loads(first), _data_loads(second)) == (1, 1)
    assert table_cache.table_ids() == [a.pk]


def test_a_bound_of_zero_keeps_no_document(three_tables, settings):
    """TOOLHUB_TABLE_CACHE_BYTES = 0: every read loads its document; nothing is kept."""
    # given
    settings.TOOLHUB_TABLE_CACHE_BYTES = 0
    table_cache.clear()
    # when
    loads = _read(three_tables, 0, 0, 1)
    # then
    assert loads == 3
    assert (table_cache.table_ids(), table_cache.weight) == ([], 0)


def test_a_lowered_bound_is_applied_at_the_next_put(three_tables, settings):
    """The setting is read on every put: lowered at run time, the next document kept makes the others leave until
    the rest fit."""
    # given
    a, b, c = three_tables
    table_cache.clear()
    _read(three_tables, 0, 1)
    # when
    settings.TOOLHUB_TABLE_CACHE_BYTES = _entry_weight(c)
    _read(three_tables, 2)
    # then
    assert table_cache.table_ids() == [c.pk]


def test_a_rows_table_laid_out_again_is_cached_by_its_document_without_records(
    make_table, make_tool, owner, settings, django_capture_on_commit_callbacks
):
    """A rows table's cached document holds no records, and weighs its own JSON text: after a tool lays the table
    out again, the new version is kept at the size of that document."""
    # given
    settings.TOOLHUB_NEW_TABLE_STORAGE = "document"
    table = make_table(owner, name="rows", data={"orders": [{"id": 1}], "tags": [{"id": "a"}]})
    make_tool(owner, table=table, type="get_all_data", json_path="/orders")
    records.table_to_rows(table.pk)
    table_cache.clear()
    # when
    with django_capture_on_commit_callbacks(execute=True):
        make_tool(owner, table=table, type="create", json_path="/tags")
    # then
    held = table_cache.held(table.pk)
    assert (held.version, held.data, held.size) == (2, {"orders": [], "tags": []}, 26)


def test_a_catch_up_counts_what_patches_write_and_a_whole_replace_sets_the_size(query_tool, cached_table):
    """Caught up from another worker's entries, an entry counts what their patches write (a replace of one value
    counts high: what it removes is in the inverse, not read), and a replace of the whole document sets it."""
    # given
    table_cache.clear()
    execute(tool=query_tool, arguments=SHIPPED_BIG)
    # when
    write_elsewhere(cached_table.pk, [{"op": "replace", "path": "/0/status", "value": "new"}])
    services.table_data(cached_table.pk)
    replaced_one = table_cache.held(cached_table.pk)
    write_elsewhere(cached_table.pk, [{"op": "replace", "path": "", "value": [{"id": 1}]}])
    services.table_data(cached_table.pk)
    replaced_whole = table_cache.held(cached_table.pk)
    # then
    assert (replaced_one.version, replaced_one.size) == (2, 134 + len('"new"') + 2 + len('"status"') + 2)
    assert (replaced_whole.version, replaced_whole.data, replaced_whole.size) == (3, [{"id": 1}], 11)
