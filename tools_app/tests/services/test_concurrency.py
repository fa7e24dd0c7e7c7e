"""What must hold under concurrency (SPEC §1, §2.4, §3): no lost write, one version per write, unique names.

Threads each get their own database connection (Django connections are per thread) and close it at
the end; the multi-process variants start fresh interpreters (spawn) that run django.setup()
against the same database. Models are imported inside functions so that a spawned child can
import this module before Django is set up.
"""

import json
import logging
import multiprocessing
import os
import sqlite3
import threading
import time

import pytest
from django.db import connection, connections, transaction

WORKERS = 8
CALLS = 25
NAME_RACERS = 20


def _in_threads(count: int, target) -> list:
    """Run target(i) in `count` threads released together; return each result or the exception raised."""
    barrier = threading.Barrier(count)
    results: list = [None] * count

    def run(index: int) -> None:
        try:
            barrier.wait(timeout=60)
            results[index] = target(index)
        except BaseException as exc:  # noqa: BLE001 - reported to the test, which asserts on it
            results[index] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not any(thread.is_alive() for thread in threads), "a worker thread hung"
    return results


def _write(create_id: int, update_id: int, worker: int, call: int) -> int:
    """One write call: even calls create a record of their own, odd calls add a field to the shared record."""
    from tools_app.execution.executors import execute
    from tools_app.models import Tool

    if call % 2 == 0:
        tool = Tool.objects.get(pk=create_id)
        result = execute(tool=tool, arguments={"elements": [{"id": f"w{worker}-c{call}"}]})
        return result["version"]
    tool = Tool.objects.get(pk=update_id)
    result = execute(tool=tool, arguments={"elements": [{"id": "shared", f"w{worker}_c{call}": call}]})
    return result["version"]


def _assert_no_lost_write(data: list, version: int, versions: list[int], workers: int, calls: int) -> None:
    writes = workers * calls
    assert sorted(versions) == list(range(2, 2 + writes)), "each write call got its own version"
    assert version == 1 + writes
    created = {row["id"] for row in data} - {"shared"}
    assert created == {f"w{w}-c{c}" for w in range(workers) for c in range(0, calls, 2)}
    assert len(data) == 1 + len(created)
    shared = next(row for row in data if row["id"] == "shared")
    assert set(shared) - {"id"} == {f"w{w}_c{c}" for w in range(workers) for c in range(1, calls, 2)}


def _replayed(snapshot: list, snapshot_version: int, log: list[tuple[int, list]], version: int) -> list:
    """The change log holds one entry per version 2..version, contiguous, and the snapshot with the
    entries after it applied (by the jsonpatch library itself) is the document."""
    import jsonpatch

    assert [v for v, _ in log] == list(range(2, version + 1)), "one entry per version, none lost, none twice"
    for entry_version, patch in log:
        if entry_version > snapshot_version:
            snapshot = jsonpatch.apply_patch(snapshot, patch)
    return snapshot


def _stored_document(table_id: int) -> tuple[list, int]:
    """(document, version) of the table as the database holds it: snapshot + log, checked by _replayed."""
    from tools_app.models import Table, TableChange, TableSnapshot

    version = Table.objects.filter(pk=table_id).values_list("version", flat=True).get()
    snapshot_version, data = TableSnapshot.objects.filter(table_id=table_id).values_list("version", "data").get()
    log = list(TableChange.objects.filter(table_id=table_id).order_by("version").values_list("version", "patch"))
    return _replayed(data, snapshot_version, log, version), version


def _write_setup(owner, make_table, make_tool):
    # A document table: the checks replay its log of RFC 6902 patches (a rows table's writers:
    # tools_app/tests/execution/test_records_races.py).
    table = make_table(owner, name="busy", data=[{"id": "shared"}], storage="document")
    create = make_tool(owner, table, type="create", name="busy_create")
    update = make_tool(owner, table, type="update", name="busy_update")
    return table, create, update


#
# (1) Many writers on one table
#


@pytest.mark.postgres
def test_concurrent_writes_lose_nothing(postgres_db, owner, make_table, make_tool):
    """8 threads x 25 create/update calls on one table: every write lands, version +1 per write."""
    from tools_app.models import Table

    # given
    table, create, update = _write_setup(owner, make_table, make_tool)

    # when
    def worker(index: int) -> list[int]:
        return [_write(create.pk, update.pk, index, call) for call in range(CALLS)]

    results = _in_threads(WORKERS, worker)

    # then
    failures = [result for result in results if isinstance(result, BaseException)]
    assert failures == []
    document, version = _stored_document(table.pk)
    _assert_no_lost_write(document, version, [v for r in results for v in r], WORKERS, CALLS)
    assert Table.objects.get(pk=table.pk).data == document


def _writer_process(
    database_url: str, create_id: int, update_id: int, process: int, threads: int, calls: int, compact_every: int = 0
):
    """Child process: set Django up against `database_url`, then write from `threads` threads (compacting the
    table every `compact_every` entries when given, so compactions race with the writers)."""
    os.environ["DATABASE_URL"] = database_url
    if compact_every:
        os.environ["TOOLHUB_TABLE_COMPACT_EVERY"] = str(compact_every)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolhub.settings")
    import django

    django.setup()

    def worker(index: int) -> list[int]:
        return [_write(create_id, update_id, process * threads + index, call) for call in range(calls)]

    results = _in_threads(threads, worker)
    failures = [repr(result) for result in results if isinstance(result, BaseException)]
    return [v for r in results if isinstance(r, list) for v in r], failures


SPAWN = multiprocessing.get_context("spawn")


def _spawn_pool(processes: int, initializer=None, initargs: tuple = ()):
    """A pool of fresh interpreters; each runs initializer(*initargs) as it starts (say, Django set up)."""
    return SPAWN.Pool(processes, initializer, initargs)


def _database_url() -> str:
    """The URL of the test database this session uses (pytest-django's test_<name>)."""
    settings = connection.settings_dict
    user = settings["USER"] or "postgres"
    host = settings["HOST"] or "127.0.0.1"
    port = settings["PORT"] or 5432
    return f"postgres://{user}@{host}:{port}/{settings['NAME']}"


@pytest.mark.postgres
@pytest.mark.parametrize("compact_every", [0, 7], ids=["no-compaction", "compaction-every-7"])
def test_concurrent_writes_from_processes_lose_nothing(postgres_db, owner, make_table, make_tool, compact_every):
    """4 worker processes (own interpreter, own connection) x 25 calls: no lost write, version +1 per write; the
    change log is contiguous and replays to the document, also with compactions racing the writers."""
    from tools_app.models import Table

    # given
    table, create, update = _write_setup(owner, make_table, make_tool)
    processes = 4
    # when
    with _spawn_pool(processes) as pool:
        outcomes = pool.starmap(
            _writer_process,
            [(_database_url(), create.pk, update.pk, p, 1, CALLS, compact_every) for p in range(processes)],
        )
    # then
    assert [failures for _, failures in outcomes] == [[]] * processes
    document, version = _stored_document(table.pk)
    _assert_no_lost_write(document, version, [v for vs, _ in outcomes for v in vs], processes, CALLS)
    assert Table.objects.get(pk=table.pk).data == document


def _sqlite_setup(database_url: str) -> tuple[int, int, int]:
    """Child process: on a migrated file-based SQLite database, create a table with a create and an update
    tool."""
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolhub.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.test import override_settings

    from tools_app import services

    owner = get_user_model().objects.create_user(username="writer")
    with override_settings(TOOLHUB_NEW_TABLE_STORAGE="document"):  # a document table, as _write_setup's
        table = services.table_create(owner=owner, name="busy", data=[{"id": "shared"}])
    kinds = {"create": "Add records.", "update": "Change records."}
    tools = [
        services.tool_create(owner=owner, name=f"busy_{kind}", type=kind, table=table, description=text)
        for kind, text in kinds.items()
    ]
    return table.pk, tools[0].pk, tools[1].pk


@pytest.mark.parametrize("compact_every", [0, 7], ids=["no-compaction", "compaction-every-7"])
def test_concurrent_writes_on_sqlite_file_lose_nothing(migrated_sqlite_url: str, compact_every: int):
    """SQLite too (file database, IMMEDIATE transactions): 2 processes x 4 threads x 25 calls lose nothing; the
    change log holds one entry per version and replays to the document, with compactions racing the writers."""
    # given
    database_url = migrated_sqlite_url
    processes, threads = 2, 4
    with _spawn_pool(processes) as pool:
        table_id, create_id, update_id = pool.apply(_sqlite_setup, (database_url,))
        # when
        outcomes = pool.starmap(
            _writer_process,
            [(database_url, create_id, update_id, p, threads, CALLS, compact_every) for p in range(processes)],
        )
    # then
    assert [failures for _, failures in outcomes] == [[]] * processes
    with sqlite3.connect(database_url.removeprefix("sqlite:///")) as db:
        version, snapshot_version, data = db.execute(
            "SELECT t.version, s.version, s.data FROM tools_app_table t JOIN tools_app_tablesnapshot s"
            " ON s.table_id = t.id WHERE t.id = ?",
            (table_id,),
        ).fetchone()
        log = db.execute(
            "SELECT version, patch FROM tools_app_tablechange WHERE table_id = ? ORDER BY version", (table_id,)
        ).fetchall()
    document = _replayed(json.loads(data), snapshot_version, [(v, json.loads(p)) for v, p in log], version)
    assert (snapshot_version > version - 30) if compact_every else (snapshot_version == 1)  # compactions ran
    _assert_no_lost_write(document, version, [v for vs, _ in outcomes for v in vs], processes * threads, CALLS)


#
# (2) Many binds of same-named tools to one instance
#


def _case_variants(word: str, count: int) -> list[str]:
    """`count` distinct spellings of `word` differing only in letter case."""
    variants = []
    for mask in range(2 ** len(word)):
        variants.append("".join(c.upper() if mask >> i & 1 else c for i, c in enumerate(word)))
        if len(variants) == count:
            return variants
    raise ValueError("word too short")


@pytest.mark.postgres
def test_concurrent_binds_of_one_name_let_exactly_one_through(postgres_db, owner, table, make_tool, instance):
    """20 threads bind 20 tools named 'lookup' in different cases to one instance: 1 wins, 19 NAME_CONFLICT."""
    from django.core.exceptions import ValidationError

    from tools_app.kernel.errors import ErrorCode
    from tools_app.models import Binding, McpInstance, Tool
    from tools_app.services import binding_create

    # given
    names = _case_variants("lookup", NAME_RACERS)
    tool_ids = [make_tool(owner, table, type="select", name=name).pk for name in names]

    # when
    def worker(index: int):
        tool = Tool.objects.get(pk=tool_ids[index])
        return binding_create(mcp_instance=McpInstance.objects.get(pk=instance.pk), tool=tool).pk

    results = _in_threads(NAME_RACERS, worker)

    # then
    winners = [r for r in results if isinstance(r, int)]
    refusals = [r for r in results if isinstance(r, ValidationError)]
    assert len(winners) == 1
    assert len(refusals) == NAME_RACERS - 1
    assert all(
        [error.code for errors in refusal.error_dict.values() for error in errors] == [ErrorCode.NAME_CONFLICT]
        for refusal in refusals
    )
    assert list(Binding.objects.filter(mcp_instance=instance).values_list("pk", "name_key")) == [(winners[0], "lookup")]


#
# (3) Rename and bind racing
#


def _assert_names_unique_and_current(instances) -> None:
    """Every instance's effective names, computed from the tools' current names, are unique ignoring case,
    and the stored name keys agree with them."""
    from tools_app.models import Binding

    for instance in instances:
        bindings = list(Binding.objects.filter(mcp_instance=instance).select_related("tool"))
        effective = [binding.effective_name.lower() for binding in bindings]
        assert len(effective) == len(set(effective)), f"duplicate names on {instance.slug}: {effective}"
        assert sorted(binding.name_key for binding in bindings) == sorted(effective)


@pytest.mark.postgres
def test_rename_racing_a_bind_of_the_new_name_keeps_names_unique(postgres_db, owner, table, make_tool, instance, bind):
    """Renaming a bound tool to X while another tool named X is bound: exactly one wins, names stay unique."""

    from tools_app.models import McpInstance, Tool
    from tools_app.services import binding_create, tool_update

    for round_ in range(10):
        # given
        renamed = make_tool(owner, table, name=f"alpha{round_}")
        newcomer = make_tool(owner, table, type="select", name=f"Gamma{round_}")
        bind(instance, renamed)

        # when
        def worker(index: int, renamed=renamed, newcomer=newcomer, round_=round_):
            if index == 0:
                return tool_update(tool=Tool.objects.get(pk=renamed.pk), name=f"gamma{round_}", force=True).pk
            tool = Tool.objects.get(pk=newcomer.pk)
            return binding_create(mcp_instance=McpInstance.objects.get(pk=instance.pk), tool=tool).pk

        results = _in_threads(2, worker)

        # then
        assert sorted(type(r).__name__ for r in results) == ["ValidationError", "int"], results
        _assert_names_unique_and_current([instance])


@pytest.fixture
def rename_and_bind(owner, table, make_tool, make_instance, bind):
    """Tool 'alpha' bound on instance 'home'; instance 'busy' already exposes a tool named 'gamma'."""
    home, busy = make_instance(owner, slug="home"), make_instance(owner, slug="busy")
    renamed = make_tool(owner, table, name="alpha")
    holder = make_tool(owner, table, type="select", name="gamma")
    bind(home, renamed)
    bind(busy, holder)
    return home, busy, renamed, holder


def _rename_to_gamma(tool_id: int) -> int:
    from tools_app.models import Tool
    from tools_app.services import tool_update

    return tool_update(tool=Tool.objects.get(pk=tool_id), name="GAMMA", force=True).pk


def _codes(exc) -> list[str]:
    return [error.code for errors in exc.error_dict.values() for error in errors]


@pytest.mark.postgres
def test_bind_that_read_the_old_name_before_a_rename_is_refused(postgres_db, rename_and_bind, monkeypatch):
    """A bind that read the tool's old name, then lost the race to a rename into a name the instance already
    has, is refused: the tool's name is read again under lock, so 'busy' never exposes two 'gamma'."""
    from tools_app.kernel.errors import ErrorCode
    from tools_app.models import Binding, McpInstance, Tool
    from tools_app.services import binding_create

    # given
    home, busy, renamed, holder = rename_and_bind
    read_old_name, rename_committed = threading.Event(), threading.Event()
    original_full_clean = Binding.full_clean

    def full_clean_then_wait(self, *args, **kwargs):
        original_full_clean(self, *args, **kwargs)
        assert rename_committed.wait(timeout=30)

    monkeypatch.setattr(Binding, "full_clean", full_clean_then_wait)

    # when
    def worker(index: int):
        if index == 0:
            assert read_old_name.wait(timeout=30)
            try:
                return _rename_to_gamma(renamed.pk)
            finally:
                rename_committed.set()
        tool = Tool.objects.get(pk=renamed.pk)
        assert tool.name == "alpha"
        read_old_name.set()
        return binding_create(mcp_instance=McpInstance.objects.get(pk=busy.pk), tool=tool).pk

    renamed_pk, refusal = _in_threads(2, worker)

    # then
    assert renamed_pk == renamed.pk
    assert _codes(refusal) == [ErrorCode.NAME_CONFLICT]
    assert list(Binding.objects.filter(mcp_instance=busy).values_list("tool_id", "name_key")) == [(holder.pk, "gamma")]
    _assert_names_unique_and_current([home, busy])


@pytest.mark.postgres
def test_rename_waiting_on_a_bind_in_progress_is_refused(postgres_db, rename_and_bind, monkeypatch):
    """A rename that starts while a bind of the same tool is being saved waits for it, then sees the new
    binding and is refused (NAME_CONFLICT); 'busy' never exposes two 'gamma'."""
    from tools_app.kernel.errors import ErrorCode
    from tools_app.models import Binding, McpInstance, Tool
    from tools_app.services import binding_create

    # given
    home, busy, renamed, holder = rename_and_bind
    saving, rename_started, rename_done = threading.Event(), threading.Event(), threading.Event()
    rename_pid: list[int] = []
    original_save = Binding.save

    def save_slowly(self, *args, **kwargs):
        saving.set()
        assert rename_started.wait(timeout=30)
        # The save goes on once the rename waits for a lock (it reached the tool row) or has finished without
        # waiting (which the test refuses below). Watched from a connection of its own: this thread's
        # transaction would keep seeing the activity it saw first.
        [reached] = _in_threads(1, lambda _: _finished_or_blocked(rename_done, rename_pid))
        assert reached in ("blocked", "finished"), reached
        return original_save(self, *args, **kwargs)

    monkeypatch.setattr(Binding, "save", save_slowly)

    # when
    def worker(index: int):
        if index == 0:
            assert saving.wait(timeout=30)
            rename_pid.append(_backend_pid())
            rename_started.set()
            try:
                return _rename_to_gamma(renamed.pk)
            finally:
                rename_done.set()
        tool = Tool.objects.get(pk=renamed.pk)
        return binding_create(mcp_instance=McpInstance.objects.get(pk=busy.pk), tool=tool).pk

    refusal, binding_pk = _in_threads(2, worker)

    # then
    assert _codes(refusal) == [ErrorCode.NAME_CONFLICT]
    assert Tool.objects.get(pk=renamed.pk).name == "alpha"
    assert sorted(Binding.objects.filter(mcp_instance=busy).values_list("pk", "name_key")) == sorted(
        [(binding_pk, "alpha"), (Binding.objects.get(mcp_instance=busy, tool=holder).pk, "gamma")]
    )
    _assert_names_unique_and_current([home, busy])


#
# (4) Recording calls while tools, instances and keys are deleted or edited (SPEC §4.4, §2.2)
#


def _backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def _finished_or_blocked(done: threading.Event, pids: list[int], timeout: float = 30) -> str:
    """'finished' once `done` is set, 'blocked' once the backend in `pids` waits for a lock."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if done.is_set():
            return "finished"
        if pids:
            with connection.cursor() as cursor:
                cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", pids)
                if cursor.fetchone() == ("Lock",):
                    return "blocked"
        time.sleep(0.01)
    return "timed out"


def _refereed(paused: threading.Event, go: threading.Event, action):
    """Two thread roles for a test in which another thread holds its locks, sets `paused` and waits for
    `go`: one runs `action` once `paused` is set; the referee returns whether `action` 'finished' or got
    'blocked' on a lock meanwhile, then sets `go`."""
    pids: list[int] = []
    done = threading.Event()

    def run():
        assert paused.wait(timeout=30)
        pids.append(_backend_pid())
        try:
            return action()
        finally:
            done.set()

    def referee() -> str:
        assert paused.wait(timeout=30)
        try:
            return _finished_or_blocked(done, pids)
        finally:
            go.set()

    return run, referee


def _record_call(instance_id: int, owner_id: int, tool_id: int, name: str, key_id: int | None) -> None:
    """Record one successful call as the pipeline does once the tool answered (tools_app.execution.pipeline)."""
    from django.utils import timezone

    from tools_app.execution import pipeline as calls
    from tools_app.models import Surface

    caller = calls.Caller(surface=Surface.MCP, user_id=owner_id, api_key_id=key_id)
    target = calls.CallTarget(
        owner_id=owner_id,
        instance_id=instance_id,
        enabled=True,
        tool_id=tool_id,
        tool_name=name,
        tool_type="get_all_data",
    )
    outcome = calls.CallOutcome(name=name, tool_type="get_all_data", value=[])
    calls._record(caller, target, outcome, timezone.now(), {})


@pytest.fixture
def recorded_shop(owner, table, make_tool, make_instance, bind, make_api_key):
    """Instance 'shop' (key `key`) and instance 'gone' (key `gone_key`), both exposing tools `kept` and
    `doomed`; 'shop' has a second key `doomed_key`."""
    shop, gone = make_instance(owner, slug="shop"), make_instance(owner, slug="gone")
    kept = make_tool(owner, table, type="get_all_data", name="kept")
    doomed = make_tool(owner, table, type="get_all_data", name="doomed")
    for instance in (shop, gone):
        bind(instance, kept)
        bind(instance, doomed)
    return {
        "owner": owner,
        "shop": shop,
        "gone": gone,
        "kept": kept,
        "doomed": doomed,
        "key": make_api_key(shop, "main")[0],
        "doomed_key": make_api_key(shop, "doomed")[0],
        "gone_key": make_api_key(gone, "gone")[0],
    }


def _delete_through_a_surface(kind: str, objects: dict, superuser) -> int:
    """DELETE the doomed tool or instance through the API, or the doomed key through the admin; the status.
    The tool and the instance are in use (bound, called): the API deletes them with ?force=true."""
    from django.test import Client

    from tests.api_helpers import client_for

    if kind == "tool":
        return client_for(objects["owner"]).delete(f"/api/tools/{objects['doomed'].pk}/?force=true").status_code
    if kind == "instance":
        return client_for(objects["owner"]).delete(f"/api/mcp-instances/{objects['gone'].pk}/?force=true").status_code
    admin = Client()
    admin.force_login(superuser)
    return admin.post(f"/admin/tools_app/apikey/{objects['doomed_key'].pk}/delete/", {"post": "yes"}).status_code


# What each delete takes with it, and the model whose DELETE is paused.
DELETED = {"tool": "Tool", "instance": "ApiKey", "key": "ApiKey"}


@pytest.mark.postgres
@pytest.mark.parametrize("kind", ["tool", "instance", "key"])
def test_calls_recorded_in_the_middle_of_a_delete_neither_fail_it_nor_are_lost(
    postgres_db, recorded_shop, superuser, monkeypatch, kind
):
    """Calls that refer to the tool (instance, key) being deleted, recorded after the delete has nulled or
    removed the old rows and before its DELETE: the delete succeeds (no foreign-key violation, no 409), and
    the calls are recorded as the foreign keys say (row kept without the tool or key, or gone with the
    instance), with every other call recorded and counted."""
    from django.db.models.sql.subqueries import DeleteQuery

    from tools_app.models import ApiKey, CallLog, McpInstance, Tool

    # given
    o = recorded_shop
    shop, gone, kept, doomed, key, doomed_key = (o[n] for n in ("shop", "gone", "kept", "doomed", "key", "doomed_key"))
    in_delete, go = threading.Event(), threading.Event()
    original_delete_batch = DeleteQuery.delete_batch

    def delete_batch_after_a_pause(self, pk_list, using):
        if self.model.__name__ == DELETED[kind] and not in_delete.is_set():
            in_delete.set()
            assert go.wait(timeout=30)
        return original_delete_batch(self, pk_list, using)

    monkeypatch.setattr(DeleteQuery, "delete_batch", delete_batch_after_a_pause)

    def write_batch() -> int:
        _record_call(shop.pk, shop.owner_id, kept.pk, "kept", key.pk)
        _record_call(shop.pk, shop.owner_id, doomed.pk, "doomed", doomed_key.pk)
        _record_call(gone.pk, gone.owner_id, kept.pk, "kept", o["gone_key"].pk)
        _record_call(shop.pk, shop.owner_id, kept.pk, "kept", key.pk)
        return CallLog.objects.count()

    # when: the batch is written once the delete pauses; the delete goes on once the batch is written or
    # waits for a lock the delete holds
    roles = [lambda: _delete_through_a_surface(kind, o, superuser), *_refereed(in_delete, go, write_batch)]
    status, written, refereed = _in_threads(3, lambda index: roles[index]())
    # then
    assert status == {"tool": 204, "instance": 204, "key": 302}[kind]
    assert refereed == "blocked"
    rows = list(CallLog.objects.order_by("id").values_list("mcp_instance_id", "tool_id", "tool_name", "api_key_id"))
    if kind == "tool":
        assert written == 4
        assert not Tool.objects.filter(pk=doomed.pk).exists()
        assert rows == [
            (shop.pk, kept.pk, "kept", key.pk),
            (shop.pk, None, "doomed", doomed_key.pk),
            (gone.pk, kept.pk, "kept", o["gone_key"].pk),
            (shop.pk, kept.pk, "kept", key.pk),
        ]
    elif kind == "instance":
        assert written == 3
        assert not McpInstance.objects.filter(pk=gone.pk).exists()
        assert rows == [
            (shop.pk, kept.pk, "kept", key.pk),
            (shop.pk, doomed.pk, "doomed", doomed_key.pk),
            (shop.pk, kept.pk, "kept", key.pk),
        ]
        assert Tool.objects.get(pk=doomed.pk).use_count == 1
    else:
        assert written == 4
        assert not ApiKey.objects.filter(pk=doomed_key.pk).exists()
        assert rows == [
            (shop.pk, kept.pk, "kept", key.pk),
            (shop.pk, doomed.pk, "doomed", None),
            (gone.pk, kept.pk, "kept", o["gone_key"].pk),
            (shop.pk, kept.pk, "kept", key.pk),
        ]
        assert Tool.objects.get(pk=doomed.pk).use_count == 1
    assert Tool.objects.get(pk=kept.pk).use_count == 3


DOOMED = 12  # tools, instances and keys deleted while calls run


@pytest.mark.postgres
def test_calls_are_all_recorded_while_tools_instances_and_keys_are_deleted(
    postgres_db, owner, table, make_tool, make_instance, bind, make_api_key, caplog
):
    """4 threads record calls without pause (of a kept tool, of tools, instances and keys being deleted)
    while another thread deletes 12 tools, 12 instances and 12 keys: every
    delete succeeds; every call is recorded (without its deleted tool or key, or gone with its deleted
    instance) and counted in the kept tool's use count."""
    from tools_app.models import ApiKey, CallLog, McpInstance, Tool
    from tools_app.services import api_key_delete, instance_delete, tool_delete

    # given
    shop = make_instance(owner, slug="shop")
    key = make_api_key(shop, "main")[0]
    kept = make_tool(owner, table, type="get_all_data", name="kept")
    bind(shop, kept)
    tools = [make_tool(owner, table, type="get_all_data", name=f"doomed_{i}") for i in range(DOOMED)]
    instances = [make_instance(owner, slug=f"gone-{i}") for i in range(DOOMED)]
    instance_keys = [make_api_key(instance, "gone")[0] for instance in instances]
    keys = [make_api_key(shop, f"doomed {i}")[0] for i in range(DOOMED)]
    for i in range(DOOMED):
        bind(shop, tools[i])
        bind(instances[i], kept)
    deleting, stop = threading.Event(), threading.Event()
    callers = 4

    def call_until_stopped(index: int) -> int:
        """Per round, one call of each kind; return the number of rounds."""
        deleting.wait(timeout=30)
        rounds = 0
        while not stop.is_set():
            i = (index + rounds) % DOOMED
            _record_call(shop.pk, owner.pk, kept.pk, "kept", key.pk)
            _record_call(shop.pk, owner.pk, tools[i].pk, f"doomed_{i}", key.pk)
            _record_call(instances[i].pk, owner.pk, kept.pk, "kept", instance_keys[i].pk)
            _record_call(shop.pk, owner.pk, kept.pk, "kept", keys[i].pk)
            rounds += 1
            time.sleep(0.0005)
        return rounds

    def delete_all() -> list[str]:
        deleting.set()
        try:
            for i in range(DOOMED):
                time.sleep(0.02)
                tool_delete(tool=tools[i], force=True)  # in use: called while it goes
                instance_delete(instance=instances[i], force=True)
                api_key_delete(api_key=keys[i])
            time.sleep(0.02)
            return ["deleted"]
        finally:
            stop.set()

    def run(index: int):
        if index < callers:
            return call_until_stopped(index)
        return delete_all()

    # when
    caplog.set_level(logging.INFO, logger="tools_app.execution.pipeline")
    results = _in_threads(callers + 1, run)
    # then
    failures = [result for result in results if isinstance(result, BaseException)]
    assert failures == []
    rounds = sum(results[:callers])
    assert results[callers] == ["deleted"]
    assert Tool.objects.filter(name__startswith="doomed_").count() == 0
    assert list(McpInstance.objects.values_list("slug", flat=True)) == ["shop"]
    assert list(ApiKey.objects.values_list("pk", flat=True)) == [key.pk]
    assert CallLog.objects.count() == 3 * rounds
    assert CallLog.objects.filter(mcp_instance=shop, tool=kept, api_key=key).count() == rounds
    assert CallLog.objects.filter(mcp_instance=shop, tool=kept, api_key=None).count() == rounds
    assert CallLog.objects.filter(mcp_instance=shop, tool=None, tool_name__startswith="doomed_").count() == rounds
    assert Tool.objects.get(pk=kept.pk).use_count == 3 * rounds
    assert any("deleted meanwhile" in record.getMessage() for record in caplog.records)  # the race did happen


@pytest.mark.postgres
def test_concurrent_edits_lose_no_use_count(postgres_db, owner, table, make_tool, make_instance, bind):
    """4 threads record calls of a tool while 40 PATCHes edit it through the API: its use count is the
    number of calls, and every edit lands."""
    from tests.api_helpers import client_for
    from tools_app.models import Tool

    # given
    shop = make_instance(owner, slug="shop")
    tool = make_tool(owner, table, type="get_all_data", name="catalog_schema")
    bind(shop, tool)
    editing, stop = threading.Event(), threading.Event()
    callers, edits = 4, 40

    def call_until_stopped() -> int:
        editing.wait(timeout=30)
        calls = 0
        while not stop.is_set():
            _record_call(shop.pk, owner.pk, tool.pk, "catalog_schema", None)
            calls += 1
            time.sleep(0.0005)
        return calls

    def edit() -> list[int]:
        client = client_for(owner)
        editing.set()
        try:
            return [
                client.patch(f"/api/tools/{tool.pk}/", {"description": f"v{i}"}, format="json").status_code
                for i in range(edits)
            ]
        finally:
            stop.set()

    def run(index: int):
        if index < callers:
            return call_until_stopped()
        return edit()

    # when
    results = _in_threads(callers + 1, run)
    # then
    assert [r for r in results if isinstance(r, BaseException)] == []
    calls = sum(results[:callers])
    assert results[callers] == [200] * edits
    stored = Tool.objects.get(pk=tool.pk)
    assert (stored.use_count, stored.description) == (calls, f"v{edits - 1}")


#
# (5) Binding the same tool twice at once (SPEC §2.4): "already bound", not a name conflict with itself
#


@pytest.mark.postgres
def test_concurrent_binds_of_one_tool_let_one_through_and_say_already_bound(postgres_db, owner, table, make_tool):
    """20 threads bind the same tool to one instance: 1 wins; the 19 others get the answer a duplicate bind
    gets without a race ("already bound", on `tool`), never a NAME_CONFLICT naming the tool itself."""
    from django.core.exceptions import ValidationError

    from tools_app.models import Binding, McpInstance, Tool
    from tools_app.services import binding_create, instance_create

    # given
    instance = instance_create(owner=owner, name="Shop", slug="shop")
    tool = make_tool(owner, table, type="select", name="lookup")

    # when
    def worker(index: int):
        return binding_create(
            mcp_instance=McpInstance.objects.get(pk=instance.pk), tool=Tool.objects.get(pk=tool.pk)
        ).pk

    results = _in_threads(NAME_RACERS, worker)

    # then
    winners = [r for r in results if isinstance(r, int)]
    refusals = [r for r in results if isinstance(r, ValidationError)]
    assert (len(winners), len(refusals)) == (1, NAME_RACERS - 1), results
    assert {
        (field, error.code, error.messages[0])
        for refusal in refusals
        for field, errors in refusal.error_dict.items()
        for error in errors
    } == {("tool", "unique", "The tool 'lookup' is already bound to the instance 'Shop'.")}
    assert list(Binding.objects.values_list("pk", "tool_id", "name_key")) == [(winners[0], tool.pk, "lookup")]


@pytest.mark.postgres
def test_concurrent_api_binds_of_one_tool_are_one_201_and_400s(postgres_db, owner, table, make_tool):
    """The same race through the API: one 201; every other request is the 400 that a duplicate POST gets
    without a race (whether it lost before or after the serializer's check), never a 409."""
    from tests.api_helpers import client_for
    from tools_app.models import Binding
    from tools_app.services import instance_create

    # given
    instance = instance_create(owner=owner, name="Shop", slug="shop")
    tool = make_tool(owner, table, type="select", name="lookup")
    body = {"mcp_instance": instance.pk, "tool": tool.pk}

    # when
    def worker(index: int):
        response = client_for(owner).post("/api/bindings/", body, format="json")
        return response.status_code, response.json()

    results = _in_threads(NAME_RACERS, worker)

    # then
    statuses = sorted(status for status, _ in results)
    assert statuses == [201] + [400] * (NAME_RACERS - 1), results
    assert {json.dumps(body, sort_keys=True) for status, body in results if status == 400} == {
        json.dumps(
            {
                "error": "VALIDATION_ERROR",
                "message": "Invalid input.",
                "fields": {"tool": ["The tool 'lookup' is already bound to the instance 'Shop'."]},
            },
            sort_keys=True,
        )
    }
    assert Binding.objects.filter(mcp_instance=instance).count() == 1


#
# (6) Binds and recorded calls at once: no deadlock, and neither waits for the other (SPEC §2.4, §4.4)
#


BINDERS = 3  # threads that bind, and threads that record calls
BIND_ROUNDS = 15


@pytest.mark.postgres
def test_binds_and_recorded_calls_at_once_never_deadlock(
    postgres_db, owner, table, make_tool, make_instance, make_api_key, caplog
):
    """3 threads each bind 6 tools to their own instance in one transaction (highest id first, as an admin
    form may), disable them in another and unbind them in a third, 15 times over, while 3 threads record
    calls of those tools on those instances: no thread fails (no deadlock), no call has to be recorded
    again, and every call is recorded and counted."""
    from django.db import transaction

    from tools_app.models import Binding, CallLog, Tool
    from tools_app.services import binding_create, binding_delete, binding_update

    # given
    instances = [make_instance(owner, slug=f"shop-{i}") for i in range(BINDERS)]
    keys = [make_api_key(instance)[0] for instance in instances]
    tools = [make_tool(owner, table, type="get_all_data", name=f"tool_{i}") for i in range(6)]
    started, stop = threading.Event(), threading.Event()
    done = threading.Barrier(BINDERS, action=stop.set)

    def bind_and_unbind(index: int) -> int:
        instance = instances[index]
        started.set()
        try:
            for _ in range(BIND_ROUNDS):
                with transaction.atomic():
                    bindings = [binding_create(mcp_instance=instance, tool=tool) for tool in reversed(tools)]
                with transaction.atomic():
                    for binding in bindings:
                        binding_update(binding=binding, enabled=False)
                with transaction.atomic():
                    for binding in bindings:
                        binding_delete(binding=binding, force=True)
            return BIND_ROUNDS
        finally:
            done.wait(timeout=120)

    def call_until_stopped(index: int) -> int:
        started.wait(timeout=30)
        calls = 0
        while not stop.is_set():
            for offset, tool in enumerate(tools):
                shop = (index + offset) % BINDERS
                _record_call(instances[shop].pk, owner.pk, tool.pk, tool.name, keys[shop].pk)
                calls += 1
            time.sleep(0.001)
        return calls

    def run(index: int):
        if index < BINDERS:
            return bind_and_unbind(index)
        return call_until_stopped(index - BINDERS)

    # when
    results = _in_threads(2 * BINDERS, run)
    # then
    assert [r for r in results if isinstance(r, BaseException)] == []
    assert results[:BINDERS] == [BIND_ROUNDS] * BINDERS
    calls = sum(results[BINDERS : 2 * BINDERS])
    assert Binding.objects.count() == 0
    assert CallLog.objects.filter(status="ok").count() == calls
    assert sum(Tool.objects.values_list("use_count", flat=True)) == calls
    assert [r.getMessage() for r in caplog.records if r.name == "tools_app.execution.pipeline"] == []


def _write_holding_the_lock(table_id: int, paused: threading.Event, go: threading.Event) -> int:
    """A data write that pauses, the table row locked, until `go`; returns the new version."""
    from tools_app.services import table_write

    def change(data, derived):
        paused.set()
        assert go.wait(timeout=60)
        return _appended(data, {"id": "late"})

    return table_write(table_id=table_id, change=change).version


def _appended(data: list, record: dict) -> tuple:
    """A table_write change appending `record` (the new data, the outcome, the patch and its inverse)."""
    patch = [{"op": "add", "path": "/-", "value": record}]
    return [*data, record], None, patch, [{"op": "remove", "path": f"/{len(data)}"}], {}


# table_write with a change of the whole document: the document storage's write primitive.
@pytest.mark.usefixtures("document_storage")
@pytest.mark.postgres
def test_tool_saves_on_a_table_do_not_wait_for_its_data_write(postgres_db, owner, table):
    """A data write holds the table row (FOR NO KEY UPDATE) for as long as the document takes to write:
    creating a tool on that table (a foreign-key check, KEY SHARE) goes on meanwhile; the write still lands."""
    from tools_app.models import Table, Tool
    from tools_app.services import tool_create

    # given
    paused, go = threading.Event(), threading.Event()
    version = table.version

    def create_tool() -> int:
        return tool_create(
            owner=owner, name="late_reader", type="get_all_data", table=table, description="Every order."
        ).pk

    # when
    roles = [lambda: _write_holding_the_lock(table.pk, paused, go), *_refereed(paused, go, create_tool)]
    new_version, tool_pk, refereed = _in_threads(3, lambda index: roles[index]())
    # then
    assert (refereed, new_version) == ("finished", version + 1), tool_pk
    assert Tool.objects.get(pk=tool_pk).table_id == table.pk
    stored = Table.objects.get(pk=table.pk)
    assert (stored.version, stored.data[-1]) == (version + 1, {"id": "late"})


# table_write with a change of the whole document: the document storage's write primitive.
@pytest.mark.usefixtures("document_storage")
@pytest.mark.postgres
def test_a_second_data_write_waits_for_the_first(postgres_db, owner, table):
    """Writers of one table still queue behind each other's row lock: no write is lost."""
    from tools_app.models import Table
    from tools_app.services import table_write

    # given
    paused, go = threading.Event(), threading.Event()
    version = table.version

    def second_write() -> int:
        return table_write(table_id=table.pk, change=lambda data, derived: _appended(data, {"id": "second"})).version

    # when
    roles = [lambda: _write_holding_the_lock(table.pk, paused, go), *_refereed(paused, go, second_write)]
    first_version, second_version, refereed = _in_threads(3, lambda index: roles[index]())
    # then
    assert (refereed, first_version, second_version) == ("blocked", version + 1, version + 2)
    assert [row["id"] for row in Table.objects.get(pk=table.pk).data[-2:]] == ["late", "second"]


def _delete_and_hold(tool_id: int, writer_pid: int, deleted: threading.Event) -> None:
    """Delete a tool in a transaction that commits only once the writer's backend waits for a lock (or 10 s)."""
    from tools_app.models import Tool
    from tools_app.services import tool_delete

    try:
        with transaction.atomic():
            tool_delete(tool=Tool.objects.get(pk=tool_id))
            deleted.set()
            _finished_or_blocked(threading.Event(), [writer_pid], timeout=10)
    finally:
        connections.close_all()
