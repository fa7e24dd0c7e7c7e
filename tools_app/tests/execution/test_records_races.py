"""Concurrent writers on one table stored as rows, on PostgreSQL: nothing lost, versions contiguous, and the
history (per-record inverses, newest first) takes the rows back to where they started."""

import pytest

from tools_app.tests.services.test_concurrency import _in_threads

WORKERS = 6
CALLS = 5


def _rows(table_id: int) -> dict[int, tuple]:
    from tools_app.models import TableRecord

    found = TableRecord.objects.filter(collection__table_id=table_id).values_list("position", "key", "data")
    return {position: (key, data) for position, key, data in found}


def _replayed(rows: dict[int, tuple], inverses: list[list]) -> dict[int, tuple]:
    rows = dict(rows)
    for inverse in inverses:
        for operation in inverse:
            position = operation["position"]
            if operation["op"] == "add":
                rows[position] = (operation["key"], operation["value"])
            elif operation["op"] == "remove":
                del rows[position]
            else:
                rows[position] = (rows[position][0], operation["value"])
    return rows


@pytest.mark.postgres
def test_concurrent_writers_on_a_rows_table_lose_nothing(postgres_db, owner, make_table, make_tool):  # noqa: F811
    from tools_app.execution.executors import execute
    from tools_app.models import Table, TableChange, TableCollection, Tool

    table = make_table(owner, name="rows", data=[{"id": 0, "shared": True}, {"id": "gone", "n": 1}], storage="rows")
    for kind in ("create", "update", "delete"):
        make_tool(owner, table=table, type=kind, name=kind, json_path="", metadata={"key_field": "id"})
    before = _rows(table.pk)

    def worker(index: int) -> list:
        tools = {tool.type: tool for tool in Tool.objects.filter(table_id=table.pk)}
        answers = []
        for call in range(CALLS):
            if call % 2 == 0:  # a record of its own
                answers.append(execute(tool=tools["create"], arguments={"elements": [{"id": f"{index}-{call}"}]}))
            else:  # a field of its own on the shared record: a lost update would drop one
                answers.append(
                    execute(tool=tools["update"], arguments={"elements": [{"id": 0, f"w{index}c{call}": 1}]})
                )
        return answers

    results = _in_threads(WORKERS, worker)

    assert not [result for result in results if isinstance(result, BaseException)], results
    versions = sorted(answer["version"] for answers in results for answer in answers)
    assert versions == list(range(2, 2 + WORKERS * CALLS))
    table = Table.objects.get(pk=table.pk)
    assert table.version == 1 + WORKERS * CALLS
    entries = TableChange.objects.filter(table=table).order_by("version")
    assert list(entries.values_list("version", flat=True)) == versions
    rows = _rows(table.pk)
    created = {f"{index}-{call}" for index in range(WORKERS) for call in range(0, CALLS, 2)}
    assert {key for key, _ in rows.values()} == {"0", "gone", *created}
    assert len(rows) == 2 + len(created) == TableCollection.objects.get(table=table).record_count
    shared = next(data for key, data in rows.values() if key == "0")
    assert shared == {
        "id": 0,
        "shared": True,
        **{f"w{index}c{call}": 1 for index in range(WORKERS) for call in range(1, CALLS, 2)},
    }
    inverses = list(entries.order_by("-version").values_list("inverse", flat=True))
    assert _replayed(rows, inverses) == before


RECORDS = 40
WRITERS = 2
READERS = 3
WRITES = 12


@pytest.mark.postgres
def test_reads_of_a_rows_table_never_mix_versions_under_concurrent_writers(
    postgres_db, owner, make_table, make_tool, monkeypatch
):
    """Each write stamps every record with its own mark, so a read that mixed two versions would show two marks.
    Reads run while writers commit, in statements of 7 rows (a gathered read takes 6 statements): every read shows
    one mark, the mark of the version it reports (records.versions_read), and every result cached by the call
    pipeline holds the records of the version in its key."""
    import threading

    from tools_app.execution import pipeline as calls
    from tools_app.execution import records
    from tools_app.execution.executors import execute
    from tools_app.models import Surface, TableChange, Tool

    monkeypatch.setattr(records, "CHUNK", 7)
    table = make_table(owner, name="stamped", data=[{"id": n, "mark": "start"} for n in range(RECORDS)], storage="rows")
    make_tool(owner, table=table, type="update", name="stamp", json_path="", metadata={"key_field": "id"})
    make_tool(owner, table=table, type="get_all_data", name="everything", json_path="")
    make_tool(owner, table=table, type="query_data", name="marks", json_path="")
    calls.result_cache.clear()
    done = threading.Event()
    finished = []

    def writer(index: int) -> int:
        stamp = Tool.objects.get(table=table, name="stamp")
        for call in range(WRITES):
            mark = f"w{index}-{call}"
            execute(tool=stamp, arguments={"elements": [{"id": n, "mark": mark} for n in range(RECORDS)]})
        finished.append(index)
        if len(finished) == WRITERS:
            done.set()
        return WRITES

    def reader(index: int) -> list:
        everything = Tool.objects.get(table=table, name="everything")
        marks = Tool.objects.get(table=table, name="marks")
        caller = calls.Caller(surface=Surface.API, user_id=owner.pk)
        seen = []
        while not done.is_set() or len(seen) < 3:
            with records.versions_read() as versions:
                answer = execute(tool=everything, arguments={})
            seen.append((versions[-1], {record["mark"] for record in answer}, len(answer)))
            with records.versions_read() as versions:
                answer = execute(tool=marks, arguments={"query": "[*].mark"})  # one compiled statement
            seen.append((versions[-1], set(answer), len(answer)))
            # Through the pipeline, which caches the answer under the version it read.
            query = f"[?id < `{RECORDS}`]"
            outcome = calls.run_tool_call(
                caller=caller, target=calls.target_of_tool(marks), name="marks", arguments={"query": query}
            )
            assert outcome.ok, outcome.error
        return seen

    results = _in_threads(WRITERS + READERS, lambda index: writer(index) if index < WRITERS else reader(index))
    assert not [result for result in results if isinstance(result, BaseException)], results
    mark_at = {1: "start"}
    for version, patch in TableChange.objects.filter(table=table).values_list("version", "patch"):
        mark_at[version] = patch[0]["value"]["mark"]
    assert sorted(mark_at) == list(range(1, 2 + WRITERS * WRITES))
    reads = [read for result in results[WRITERS:] for read in result]
    assert len(reads) >= READERS * 3
    for version, marks, count in reads:
        assert (marks, count) == ({mark_at[version]}, RECORDS), version
    assert len({version for version, _marks, _count in reads}) > 1  # the reads did run while the writers wrote
    cached = [key for key in calls.result_cache._store.keys() if key[2] == table.pk]
    assert cached
    for key in cached:
        value = calls.result_cache.get(key)[0]
        assert {record["mark"] for record in value} == {mark_at[key[3]]}, key[3]


@pytest.mark.postgres
def test_a_snapshot_is_one_repeatable_read_read_only_transaction(postgres_db, owner, make_table):
    """Opened by psycopg's BEGIN with the isolation level and read-only flag, which are put back afterwards."""
    from django.db import connection

    from tools_app.execution import records

    table = make_table(owner, name="t", data=[{"id": 1}], storage="rows")
    connection.ensure_connection()
    before = (connection.connection.isolation_level, connection.connection.read_only)
    with records.snapshot(table.pk) as version, connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('transaction_isolation'), current_setting('transaction_read_only')")
        assert cursor.fetchone() == ("repeatable read", "on")
        assert version == 1
        assert set(records.collections(table.pk)) == {""}
    assert (connection.connection.isolation_level, connection.connection.read_only) == before
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('transaction_isolation'), current_setting('transaction_read_only')")
        assert cursor.fetchone() == ("read committed", "off")


@pytest.mark.postgres
def test_a_streamed_export_is_one_version_while_a_writer_commits(
    postgres_db, owner, make_table, make_tool, monkeypatch
):
    """The export is read in statements of 3 rows; a write that stamps every record commits after its first pieces
    were sent: the whole text is the version the export started at."""
    import json
    import threading

    from django.db import connection

    from tools_app.execution import records
    from tools_app.execution.executors import execute
    from tools_app.models import Table

    monkeypatch.setattr(records, "CHUNK", 3)
    table = make_table(
        owner,
        name="export",
        data={"note": "n", "items": [{"id": n, "mark": "a"} for n in range(20)]},
        storage="document",  # moved below, with the tool at /items: one layout, no new version
    )
    stamp = make_tool(owner, table=table, type="update", name="stamp", json_path="/items", metadata={"key_field": "id"})
    assert records.table_to_rows(table.pk) is True
    before = Table.objects.get(pk=table.pk).data
    pieces = records.document_chunks(table.pk)
    text = "".join(next(pieces) for _ in range(3))

    def write() -> None:
        try:
            execute(tool=stamp, arguments={"elements": [{"id": n, "mark": "b"} for n in range(20)]})
        finally:
            connection.close()  # this thread's own connection

    writer = threading.Thread(target=write)
    writer.start()
    writer.join(timeout=60)
    assert Table.objects.filter(pk=table.pk).values_list("version", flat=True).get() == 1  # still in the snapshot
    text += "".join(pieces)
    assert json.loads(text) == before
    assert Table.objects.get(pk=table.pk).version == 2
    assert {item["mark"] for item in Table.objects.get(pk=table.pk).data["items"]} == {"b"}
