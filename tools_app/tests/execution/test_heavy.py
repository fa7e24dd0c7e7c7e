"""Expensive reads in a process of their own (tools_app.execution.heavy), and the MCP database
threads lending their place while a call waits (mcp_app.hops._HopThreads).

The worker processes read the table themselves, so the tests that run a job in a real worker need a
database another process can see: PostgreSQL with committed data (transactional_db). The live-server test
of tests/test_heavy_live.py covers both databases over MCP.
"""

import dataclasses
import os
import signal
import threading
import time

import pytest

from tools_app import services
from tools_app.data_access import budget, operations
from tools_app.data_access.budget import Limits
from tools_app.data_access.operations import Mount
from tools_app.execution import heavy
from tools_app.execution.call_limits import default_limits
from tools_app.kernel.errors import ErrorCode, ToolError
from tools_app.services.table_cache import table_cache

ROWS = [{"id": n, "name": f"item-{n}", "tags": ["a", "b"]} for n in range(1, 301)]
# About 160 ms of CPU on this machine: heavy (over YIELD_AFTER_MS), far within the 2 s budget.
HEAVY_QUERY = "[*].[" + ",".join(["@"] * 40) + "] | [] | [*].to_string(@) | [*].length(@) | sum(@)"


def roomy_limits() -> Limits:
    """The default limits with a CPU-time budget of 2 minutes, for the tests whose point is the value a read gives:
    the budget's elapsed-time backstop (budget + 0.25 s of wall) would otherwise stop HEAVY_QUERY's ~160 ms of CPU
    on a machine where the test process gets under a tenth of a core (seen with parallel suites side by side)."""
    return dataclasses.replace(default_limits(), cpu_ms=120_000)


def job(table, *, query: str = HEAVY_QUERY, version: int | None = None, limits: Limits | None = None):
    return heavy.Job(
        operations.query_data,
        table.pk,
        table.version if version is None else version,
        "",
        "id",
        {"query": query},
        (),
        limits or default_limits(),
        time.monotonic(),
        0.0,
    )


def expected(query: str = HEAVY_QUERY):
    with budget.enforced(roomy_limits()):
        return operations.query_data(ROWS, Mount("", "id"), {"query": query})


@pytest.fixture
def rows_table(make_table, owner):
    """A document table: the heavy lane loads documents (a table stored as rows is read in the server process,
    records.read, and never sent to it)."""
    return make_table(owner, name="rows", data=[dict(row) for row in ROWS], storage="document")


#
# What a worker does with a job (run_job, here in this process)
#


def test_run_job_answers_the_reads_value(rows_table):
    assert heavy.run_job(job(rows_table, limits=roomy_limits())) == ("ok", expected())


def test_run_job_sends_back_a_table_at_another_version_elsewhere(rows_table):
    assert heavy.run_job(job(rows_table, version=rows_table.version + 1)) == ("elsewhere",)


def test_run_job_sends_back_a_missing_table_elsewhere(rows_table):
    gone = job(rows_table)
    rows_table.delete()
    assert heavy.run_job(gone) == ("elsewhere",)


def test_run_job_answers_the_budget_error_with_its_code_and_message(rows_table):
    tiny = Limits(cpu_ms=2000, max_elements=100, max_bytes=64 * 1024 * 1024)
    kind, code, message, details = heavy.run_job(job(rows_table, limits=tiny))
    assert (kind, code) == ("error", "QUERY_TOO_EXPENSIVE")
    assert message.startswith("The call was stopped: it went over its element budget of 100 elements")
    assert details == {"limit": "element budget", "value": 100, "unit": "elements built"}


def test_run_job_deducts_the_cpu_already_spent(rows_table):
    spent = job(rows_table, query="[*].[" + ",".join(["@"] * 40) + "] | [] | length(@)")  # 12,000 elements
    spent = heavy.Job(**{**vars_of(spent), "cpu_used_ms": 1999.9})
    kind, code, message, _details = heavy.run_job(spent)
    assert (kind, code) == ("error", "QUERY_TOO_EXPENSIVE")
    assert "CPU-time budget of 2,000 ms" in message


#
# When a read stays where it is
#


def test_not_usable_inside_the_callers_transaction(rows_table, settings):
    settings.TOOLHUB_HEAVY_WORKERS = 1
    assert heavy.workers.usable() is False  # the test's transaction: a worker could not see the table


@pytest.mark.django_db(transaction=True)
def test_not_usable_when_switched_off(settings):
    settings.TOOLHUB_HEAVY_WORKERS = 0
    assert heavy.workers.usable() is False


def test_a_read_that_stays_gives_the_same_value(rows_table, settings):
    settings.TOOLHUB_HEAVY_WORKERS = 1
    with budget.enforced(roomy_limits()):
        value = heavy.read(
            operations.query_data,
            table_id=rows_table.pk,
            version=rows_table.version,
            data=ROWS,
            mount=Mount("", "id"),
            arguments={"query": HEAVY_QUERY},
        )
    assert value == expected()
    assert heavy.workers._all == []  # nothing was started for it


#
# Real worker processes: hard limits
#


@pytest.fixture
def one_worker(settings):
    settings.TOOLHUB_HEAVY_WORKERS = 1
    workers = heavy.HeavyWorkers()
    workers.start()
    (worker,) = workers._all
    deadline = time.monotonic() + 60
    while not worker.is_ready():
        assert time.monotonic() < deadline, "the worker did not start"
        time.sleep(0.05)
    yield workers
    workers.stop()


def test_a_worker_that_overruns_its_deadline_is_killed_and_replaced(one_worker, rows_table):
    (stuck,) = one_worker._all
    os.kill(stuck.process.pid, signal.SIGSTOP)  # as if an evaluation never reached a budget check
    started = time.monotonic()
    with pytest.raises(ToolError) as refused:
        one_worker.run(job(rows_table), deadline=started + 0.2)
    took = time.monotonic() - started
    assert refused.value.code == ErrorCode.QUERY_TOO_EXPENSIVE
    assert "its process was ended" in refused.value.message
    assert 0.2 + heavy.KILL_GRACE <= took < 5
    stuck.process.join(timeout=5)
    assert stuck.process.exitcode == -signal.SIGKILL  # it stops consuming CPU
    (replacement,) = one_worker._all
    assert replacement is not stuck
    assert replacement.process.is_alive()


def test_a_dead_worker_is_replaced_and_the_read_stays(one_worker, rows_table):
    (dead,) = one_worker._all
    dead.process.kill()
    dead.process.join(timeout=5)
    assert one_worker.run(job(rows_table), deadline=time.monotonic() + 2) == (False, None)
    (replacement,) = one_worker._all
    assert replacement is not dead
    assert replacement.process.is_alive()


def test_a_worker_dying_mid_job_is_the_memory_limit(one_worker, rows_table):
    (worker,) = one_worker._all
    os.kill(worker.process.pid, signal.SIGSTOP)
    threading.Timer(0.3, lambda: os.kill(worker.process.pid, signal.SIGKILL)).start()
    with pytest.raises(ToolError) as refused:
        one_worker.run(job(rows_table), deadline=time.monotonic() + 10)
    assert refused.value.code == ErrorCode.QUERY_TOO_EXPENSIVE
    assert refused.value.details == {"limit": "memory limit", "value": 2048, "unit": "MiB"}
    assert one_worker._all[0] is not worker


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_heavy_read_runs_in_the_worker_with_the_same_value(owner, settings):
    settings.TOOLHUB_HEAVY_WORKERS = 1
    table = services.table_create(owner=owner, name="rows", data=[dict(row) for row in ROWS])
    workers = heavy.workers
    workers.start()
    try:
        (worker,) = workers._all
        deadline = time.monotonic() + 60
        while not worker.is_ready():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        cpu_before = _cpu_seconds(worker.process.pid)
        with budget.enforced(roomy_limits()):
            value = heavy.read(
                operations.query_data,
                table_id=table.pk,
                version=table.version,
                data=ROWS,
                mount=Mount("", "id"),
                arguments={"query": HEAVY_QUERY},
            )
        assert value == expected() == 531_360
        assert _cpu_seconds(worker.process.pid) > cpu_before  # it was evaluated there
    finally:
        workers.stop()


def test_a_memory_error_in_the_worker_is_query_too_expensive(rows_table, monkeypatch):
    def exhausted(*args):
        raise MemoryError

    kind, code, message, details = heavy.run_job(heavy.Job(**{**vars_of(job(rows_table)), "operation": exhausted}))
    assert (kind, code) == ("error", "QUERY_TOO_EXPENSIVE")
    assert details == {"limit": "memory limit", "value": 2048, "unit": "MiB"}


def vars_of(job: heavy.Job) -> dict:
    return {name: getattr(job, name) for name in job.__dataclass_fields__}


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


#
# The MCP database threads lend their place while one waits
#


def test_a_waiting_hop_thread_lends_its_place():
    from mcp_app.hops import _HopThreads

    pool = _HopThreads(size=1, cap=3)
    release = threading.Event()
    entered = threading.Event()

    def waits() -> str:
        with budget.waiting():
            entered.set()
            release.wait(10)
        return "waited"

    first = pool.submit(waits)
    assert entered.wait(10)
    second = pool.submit(lambda: "light")
    assert second.result(timeout=10) == "light"  # served while the only thread waits
    assert pool.threads() == 2
    release.set()
    assert first.result(timeout=10) == "waited"
    deadline = time.monotonic() + 10
    while pool.threads() > 1 and time.monotonic() < deadline:
        pool.submit(lambda: None).result(timeout=10)  # a lent thread ends after a task once not needed
        time.sleep(0.01)
    assert pool.threads() == 1
    pool.shutdown()
    assert pool.threads() == 0


def test_a_busy_hop_thread_does_not_lend_its_place():
    from mcp_app.hops import _HopThreads

    pool = _HopThreads(size=1, cap=3)
    release = threading.Event()
    order: list[str] = []

    def busy() -> None:
        release.wait(10)  # working, not waiting for another call
        order.append("busy")

    first = pool.submit(busy)
    second = pool.submit(lambda: order.append("queued"))
    time.sleep(0.2)
    assert order == []
    assert pool.threads() == 1
    release.set()
    first.result(timeout=10)
    second.result(timeout=10)
    assert order == ["busy", "queued"]
    pool.shutdown()


def test_loading_the_table_is_told_and_not_charged(make_table, owner):
    big = make_table(
        owner, name="big", data=[{"id": n, "name": f"item-{n}"} for n in range(20_000)], storage="document"
    )  # the heavy lane loads documents
    told: list[float] = []
    table_cache.clear()  # as in a worker that has not read this version yet
    cold = heavy.run_job(job(big, query="length(@)"), told.append)
    assert cold == ("ok", 20_000)
    assert len(told) == 1
    assert told[0] > 0.001  # a parse of 20,000 records
    warm = heavy.run_job(job(big, query="length(@)"), told.append)
    assert warm == ("ok", 20_000)
    assert len(told) == 2  # told every time (a version check at least)
