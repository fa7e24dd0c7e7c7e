"""Concurrent writers on one table stored as rows: nothing lost, versions contiguous, and the history (per-record
operations) equals the rows. Threads of one process on PostgreSQL; processes of their own on a migrated SQLite file
and on PostgreSQL, writing through the call pipeline, and restoring and rewriting the data through the services;
reads that never mix versions while writers commit."""

import json
import os
import time
from collections import Counter

import pytest

from tools_app.tests.services.test_concurrency import SPAWN, _database_url, _in_threads, _spawn_pool

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


#
# Writers in processes of their own, through the call pipeline, on both engines
#

PROCESSES = 3
THREADS = 2
ROUNDS = 2
# A client's operations, one per call, in this order each round: its own record created; a key every client
# creates at once (one wins, the others get KEY_EXISTS); the shared counter read and written back one higher at
# the version the client knows; a field of its own merged into a shared record; a record every client deletes at
# once (one deletes it, the others get KEY_NOT_FOUND); one create sent by every client with one idempotency key
# (a retry racing the first attempt: one writes, all get its answer); in even rounds, its record of this round
# deleted at the version it knows. Writes at a version are retried as a client would: on VERSION_CONFLICT, with
# the version the refusal names, after reading again.
OPERATIONS = ("create", "race", "increment", "merge", "doom", "once", "delete")
ATTEMPTS = 200
START = [
    {"id": "counter", "n": 0},
    {"id": "shared"},
    {"id": "kept", "note": "untouched"},
    *({"id": f"doomed-{round_}"} for round_ in range(ROUNDS)),
]


# The barrier that releases the writer processes together (set in each process as it starts).
_writers_ready = None


def _django(database_url: str, writers_ready) -> None:
    """A spawned process set up against `database_url`, its records directory in small blocks."""
    global _writers_ready
    _writers_ready = writers_ready
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolhub.settings")
    import django

    django.setup()
    from tools_app.data_access.sql import store

    store.BLOCK_SPAN = 4 * store.POSITION_GAP  # as execution/conftest.py's small_blocks: records span many blocks


def _stored(table_id: int) -> dict:
    """What the database holds of the table: its version, entries (version, patch, inverse), records (position,
    key, data), the collection's record count, its directory's counts per block and the block's span."""
    from tools_app.data_access.sql import store
    from tools_app.models import Table, TableChange, TableCollection, TableRecord, TableRecordBlock

    collection = TableCollection.objects.get(table_id=table_id)
    return {
        "version": Table.objects.filter(pk=table_id).values_list("version", flat=True).get(),
        "entries": list(
            TableChange.objects.filter(table_id=table_id).order_by("version").values_list("version", "patch", "inverse")
        ),
        "records": list(TableRecord.objects.filter(collection=collection).values_list("position", "key", "data")),
        "record_count": collection.record_count,
        "blocks": dict(TableRecordBlock.objects.filter(collection=collection).values_list("block", "record_count")),
        "block_span": store.BLOCK_SPAN,
    }


def _rows_table_setup() -> dict:
    """An owner, a table stored as rows (START) and its create, update, delete and select tools keyed by id; the
    table as stored once the tools laid it out."""
    from tests import factories

    owner = factories.user("writer")
    table = factories.table(owner, "busy", [dict(record) for record in START], storage="rows")
    tools = {
        kind: factories.tool(owner, table, kind, f"busy_{kind}", json_path="", metadata={"key_field": "id"}).pk
        for kind in ("create", "update", "delete", "select")
    }
    return {"owner": owner.pk, "table": table.pk, "tools": tools, "stored": _stored(table.pk)}


def _pipeline_calls(owner_id: int, tool_ids: dict[str, int]):
    """call(kind, arguments) -> (value, None) or (None, (code, details)): the tool of that kind run through the
    call pipeline as the API runs it."""
    from tools_app.execution import pipeline
    from tools_app.models import Surface, Tool

    caller = pipeline.Caller(surface=Surface.API, user_id=owner_id)
    targets = {kind: pipeline.target_of_tool(Tool.objects.get(pk=pk)) for kind, pk in tool_ids.items()}

    def call(kind: str, arguments: dict) -> tuple:
        target = targets[kind]
        outcome = pipeline.run_tool_call(caller=caller, target=target, name=target.tool_name, arguments=arguments)
        return (outcome.value, None) if outcome.ok else (None, (str(outcome.error.code), outcome.error.details))

    return call


class _Client:
    """One client of the table, calling its tools through `call` (_pipeline_calls); every write it
    sends is logged as (tag, operation, key, version answered or None, "ok" or the error's code)."""

    def __init__(self, call, client: int) -> None:
        self.call = call
        self.client = client
        self.known = 1  # the newest version this client was told of
        self.log: list[tuple] = []

    def write(self, operation: str, kind: str, tag: str, key: str, arguments: dict) -> tuple:
        value, error = self.call(kind, arguments)
        if error is None:
            self.known = max(self.known, value["version"])
            self.log.append((tag, operation, key, value["version"], "ok"))
        else:
            self.log.append((tag, operation, key, None, error[0]))
        return value, error

    def write_at_known_version(self, operation: str, kind: str, tag: str, key: str, build) -> None:
        """build(attempt's tag) -> the arguments, read again for each attempt; sent with expected_version."""
        for attempt in range(ATTEMPTS):
            arguments = {**build(f"{tag}r{attempt}"), "expected_version": self.known}
            _, error = self.write(operation, kind, f"{tag}r{attempt}", key, arguments)
            if error is None or error[0] != "VERSION_CONFLICT":
                return
            self.known = error[1]["current_version"]
        raise AssertionError(f"{operation} {key}: {ATTEMPTS} conflicts in a row")

    def counter(self) -> int:
        value, error = self.call("select", {"keys": ["counter"]})
        assert error is None, error
        return value["items"][0]["n"]

    def run(self) -> list[tuple]:
        for round_ in range(ROUNDS):
            for step, operation in enumerate(OPERATIONS):
                tag = f"c{self.client}o{round_ * len(OPERATIONS) + step}"
                own = f"own-{self.client}-{round_}"
                if operation == "create":
                    self.write(operation, "create", tag, own, {"elements": [{"id": own, "tag": tag}]})
                elif operation == "race":
                    race = f"race-{round_}"
                    self.write(operation, "create", tag, race, {"elements": [{"id": race, "tag": tag}]})
                elif operation == "increment":
                    self.write_at_known_version(
                        operation,
                        "update",
                        tag,
                        "counter",
                        lambda attempt: {"elements": [{"id": "counter", "n": self.counter() + 1, attempt: 1}]},
                    )
                elif operation == "merge":
                    self.write(operation, "update", tag, "shared", {"elements": [{"id": "shared", tag: 1}]})
                elif operation == "doom":
                    self.write(operation, "delete", tag, f"doomed-{round_}", {"keys": [f"doomed-{round_}"]})
                elif operation == "once":
                    once = f"once-{round_}"
                    arguments = {"elements": [{"id": once, "tag": once}], "idempotency_key": once}
                    self.write(operation, "create", once, once, arguments)
                elif round_ % 2 == 0:
                    keys = {"keys": [own]}
                    self.write_at_known_version(operation, "delete", tag, own, lambda _attempt, keys=keys: keys)
        return self.log


def _rows_writer(owner_id: int, tool_ids: dict[str, int], process: int) -> tuple[list, list]:
    """THREADS clients (_Client) at once, once every writer process is here (so each runs in its own); (their
    writes' log, the exceptions raised)."""
    _writers_ready.wait(timeout=120)
    results = _in_threads(
        THREADS, lambda thread: _Client(_pipeline_calls(owner_id, tool_ids), process * THREADS + thread).run()
    )
    failures = [repr(result) for result in results if isinstance(result, BaseException)]
    return [entry for result in results if isinstance(result, list) for entry in result], failures


def _race_writers_on_a_rows_table(database_url: str) -> tuple[dict, list, dict]:
    """The table set up, PROCESSES x THREADS clients writing at once, and then read: (set up, log, stored)."""
    # Each process sets Django up as it starts, all at once (an interpreter's start is most of the test's time).
    with _spawn_pool(PROCESSES, _django, (database_url, SPAWN.Barrier(PROCESSES))) as pool:
        setup = pool.apply(_rows_table_setup)
        outcomes = pool.starmap(
            _rows_writer, [(setup["owner"], setup["tools"], process) for process in range(PROCESSES)], chunksize=1
        )
        stored = pool.apply(_stored, (setup["table"],))
    assert [failures for _, failures in outcomes] == [[]] * PROCESSES
    return setup, [entry for log, _ in outcomes for entry in log], stored


def _positions(records: list[tuple]) -> dict[int, tuple]:
    return {position: (key, data) for position, key, data in records}


def _assert_nothing_lost(setup: dict, log: list[tuple], stored: dict) -> None:
    """Every acknowledged write is in the rows and every refused one is not; one version per acknowledged write,
    contiguous; the entries replayed forward give the rows and their inverses backward give the rows set up; the
    collection's count and directory are its rows'."""
    clients = PROCESSES * THREADS
    once = [f"once-{round_}" for round_ in range(ROUNDS)]
    acknowledged = [entry for entry in log if entry[4] == "ok"]
    refused = [entry for entry in log if entry[4] != "ok"]
    # Each client's operations were all sent, and the refusals are the ones the race allows.
    by_operation = Counter(operation for _, operation, _, _, code in acknowledged)
    assert by_operation == {
        "create": clients * ROUNDS,
        "race": ROUNDS,
        "increment": clients * ROUNDS,
        "merge": clients * ROUNDS,
        "doom": ROUNDS,
        "once": clients * ROUNDS,
        "delete": clients * len(range(0, ROUNDS, 2)),
    }
    assert Counter((operation, code) for _, operation, _, _, code in refused if code != "VERSION_CONFLICT") == {
        ("race", "KEY_EXISTS"): (clients - 1) * ROUNDS,
        ("doom", "KEY_NOT_FOUND"): (clients - 1) * ROUNDS,
    }
    assert {operation for _, operation, _, _, code in refused if code == "VERSION_CONFLICT"} <= {"increment", "delete"}
    # Versions: one per acknowledged write (the answers to one idempotency key are one write's), contiguous after
    # the set-up's, each entry's.
    answered = {key: {version for _, operation, key_, version, _ in acknowledged if key_ == key} for key in once}
    assert [len(versions) for versions in answered.values()] == [1] * ROUNDS
    start = setup["stored"]["version"]
    versions = sorted(
        [version for _, operation, _, version, _ in acknowledged if operation != "once"]
        + [version for versions in answered.values() for version in versions]
    )
    assert versions == list(range(start + 1, start + 1 + len(versions)))
    assert stored["version"] == versions[-1]
    entries = [entry for entry in stored["entries"] if entry[0] > start]
    assert [version for version, _, _ in entries] == versions
    # The rows: exactly what the acknowledged writes made.
    records = stored["records"]
    rows = _positions(records)
    assert len(rows) == len(records) == len({key for _, key, _ in records})  # positions and keys unique
    by_key = {key: data for key, data in rows.values()}
    created = {key: tag for tag, operation, key, _, _ in acknowledged if operation in ("create", "race", "once")}
    deleted = {key for _, operation, key, _, _ in acknowledged if operation == "delete"}
    assert set(by_key) == {"counter", "shared", "kept"} | (set(created) - deleted)
    for key in set(created) - deleted:
        assert by_key[key] == {"id": key, "tag": created[key]}
    increments = [tag for tag, operation, _, _, _ in acknowledged if operation == "increment"]
    assert by_key["counter"] == {"id": "counter", "n": len(increments), **dict.fromkeys(increments, 1)}
    merges = [tag for tag, operation, _, _, _ in acknowledged if operation == "merge"]
    assert by_key["shared"] == {"id": "shared", **dict.fromkeys(merges, 1)}
    assert by_key["kept"] == {"id": "kept", "note": "untouched"}
    text = json.dumps(records)
    assert [tag for tag, *_ in refused if json.dumps(tag) in text] == []
    # The collection's count and directory.
    assert stored["record_count"] == len(records)
    assert stored["blocks"] == dict(Counter(position // stored["block_span"] for position in rows))
    assert len(stored["blocks"]) > 1
    # History equals the rows: forward from the set-up, and back to it.
    before = _positions(setup["stored"]["records"])
    assert _replayed(before, [patch for _, patch, _ in entries]) == rows
    assert _replayed(rows, [inverse for _, _, inverse in reversed(entries)]) == before


def test_writers_in_processes_on_a_rows_table_on_sqlite_lose_nothing(migrated_sqlite_url):
    """3 processes x 2 clients on a migrated SQLite file, through the call pipeline: creates, a create of one key
    by every client at once, read-and-increment of a counter and deletes at the version the client knows
    (retried on VERSION_CONFLICT), merges into a shared record: see _assert_nothing_lost."""
    _assert_nothing_lost(*_race_writers_on_a_rows_table(migrated_sqlite_url))


@pytest.mark.postgres
def test_writers_in_processes_on_a_rows_table_on_postgresql_lose_nothing(postgres_db):
    """As on SQLite, on the test run's PostgreSQL database: 3 processes x 2 clients, each client its own
    connection."""
    _assert_nothing_lost(*_race_writers_on_a_rows_table(_database_url()))


PLAIN_CALLS = 12
REWRITES = 4


def _plain_writer(owner_id: int, tool_ids: dict[str, int], writer: int) -> list[tuple]:
    """PLAIN_CALLS calls through the call pipeline: creates of this writer's records, fields merged into the shared
    record, deletes of its records created two calls before (KEY_NOT_FOUND when a replace or restore took them
    away first); (kind, version answered or None, "ok" or the error's code) each."""
    call = _pipeline_calls(owner_id, tool_ids)
    log = []
    for index in range(PLAIN_CALLS):
        kind = ("create", "update", "delete")[index % 3]
        if kind == "create":
            arguments = {"elements": [{"id": f"w{writer}-{index}", "n": index}]}
        elif kind == "update":
            arguments = {"elements": [{"id": "shared", f"w{writer}-{index}": index}]}
        else:
            arguments = {"keys": [f"w{writer}-{index - 2}"]}
        value, error = call(kind, arguments)
        log.append((kind, None, error[0]) if error else (kind, value["version"], "ok"))
    return log


def _plain_writers(owner_id: int, tool_ids: dict[str, int]) -> list[tuple]:
    """Once the restorer's process is here too: THREADS _plain_writer at once; their logs."""
    _writers_ready.wait(timeout=120)
    results = _in_threads(THREADS, lambda writer: _plain_writer(owner_id, tool_ids, writer))
    assert not [result for result in results if isinstance(result, BaseException)], results
    return [entry for result in results for entry in result]


def _restorer(table_id: int, start: int) -> list[tuple]:
    """While the writers write: whole-data writes, each followed by a restore to one of the last versions
    (services.table_update, services.table_restore: what the API's PUT and restore run); (what, new version, the
    data written or the version restored) each."""
    import random

    from tools_app import services
    from tools_app.models import Table

    _writers_ready.wait(timeout=120)
    choose = random.Random(29)
    log = []
    for index in range(REWRITES):
        data = [{"id": "shared", "rewrite": index}, {"id": f"rewritten-{index}"}]
        version = services.table_update(table=Table.objects.get(pk=table_id), data=data).version
        log.append(("replace", version, data))
        time.sleep(0.02)  # the writers write in between
        version = Table.objects.filter(pk=table_id).values_list("version", flat=True).get()
        target = choose.randint(max(start, version - 8), version - 1)
        log.append(("restore", services.table_restore(table_id=table_id, version=target), target))
    return log


def _positions_at(before: dict, entries: list) -> dict[int, dict]:
    """Each version's rows, replayed forward from `before` (the rows at the version before the first entry)."""
    at = {entries[0][0] - 1: before}
    for version, patch, _ in entries:
        at[version] = _replayed(at[version - 1], [patch])
    return at


def _race_restores_on_a_rows_table(database_url: str) -> None:
    """THREADS writers in one process and another process rewriting the data and restoring versions, at once: one
    version per answered write, contiguous; every restored version's rows are the rows of the version it names and
    every rewrite's rows the data written (by the history replayed forward, which also gives the rows); the
    inverses back give the rows set up; the collection's count and directory are its rows'."""
    with _spawn_pool(2, _django, (database_url, SPAWN.Barrier(2))) as pool:
        setup = pool.apply(_rows_table_setup)
        start = setup["stored"]["version"]
        writers = pool.apply_async(_plain_writers, (setup["owner"], setup["tools"]))
        rewrites = pool.apply_async(_restorer, (setup["table"], start))
        writes = writers.get(timeout=300)
        rewritten = rewrites.get(timeout=300)
        stored = pool.apply(_stored, (setup["table"],))
    assert {(kind, code) for kind, _, code in writes if code != "ok"} <= {("delete", "KEY_NOT_FOUND")}
    # Creates and updates always answer; a delete may find its record gone with every try (a rewrite or a restore
    # came between its create and it), as a fresh-clone CI run on PostgreSQL saw.
    assert {"create", "update"} <= {kind for kind, _, code in writes if code == "ok"} <= {"create", "update", "delete"}
    assert [what for what, _, _ in rewritten] == ["replace", "restore"] * REWRITES
    versions = sorted([version for _, version, code in writes if code == "ok"] + [v for _, v, _ in rewritten])
    assert versions == list(range(start + 1, start + 1 + len(versions)))
    entries = [entry for entry in stored["entries"] if entry[0] > start]
    assert [version for version, _, _ in entries] == versions == list(range(start + 1, stored["version"] + 1))
    before = _positions(setup["stored"]["records"])
    at = _positions_at(before, entries)
    for what, version, restored in rewritten:
        if what == "restore":
            assert at[version] == at[restored], (version, restored)
        else:
            assert [data for _, (_, data) in sorted(at[version].items())] == restored, version
    rows = _positions(stored["records"])
    assert at[stored["version"]] == rows
    assert _replayed(rows, [inverse for _, _, inverse in reversed(entries)]) == before
    assert len(rows) == len(stored["records"]) == len({key for _, key, _ in stored["records"]})
    assert stored["record_count"] == len(rows)
    assert stored["blocks"] == dict(Counter(position // stored["block_span"] for position in rows))


def test_restores_and_rewrites_racing_writers_on_a_rows_table_on_sqlite_keep_history_equal_to_the_rows(
    migrated_sqlite_url,
):
    """On a migrated SQLite file: see _race_restores_on_a_rows_table."""
    _race_restores_on_a_rows_table(migrated_sqlite_url)


@pytest.mark.postgres
def test_restores_and_rewrites_racing_writers_on_a_rows_table_on_postgresql_keep_history_equal_to_the_rows(
    postgres_db,
):
    """On the test run's PostgreSQL database: see _race_restores_on_a_rows_table."""
    _race_restores_on_a_rows_table(_database_url())
