"""Expensive reads run in a process of their own (measurements in docs/budgets.md).

A read (query_data, select, preview, get_all_data, get_data_schema) starts where it is called, under its
call's budget. Most finish within a few milliseconds. One that becomes heavy (data_access.budget:
YIELD_AFTER_MS of CPU, or SUSPECT_YIELD_AFTER_MS for a caller that was heavy a moment ago
(tools_app.execution.call_limits),
after it took its caller's concurrency slot) is stopped there (MoveElsewhere) and run
again from the start in a **heavy worker**: a separate process, started with the server, that reads the
table itself (at the same version) and evaluates under the rest of the same budget. So an expensive query
no longer shares the server's interpreter lock with light calls: while it runs, the thread that asked waits
without holding the lock, and the event loop, the database threads and every light call keep their speed.

Hard limits, beyond the cooperative budget checks: a worker that has not answered by the call's deadline
(its CPU budget + WALL_GRACE + KILL_GRACE) is killed and replaced, so a stopped evaluation stops consuming
CPU; a worker's address space is capped (TOOLHUB_HEAVY_WORKER_MEMORY_MB), and running out of it is
QUERY_TOO_EXPENSIVE. The workers are TOOLHUB_HEAVY_WORKERS processes (default 1: one heavy evaluation at a
time per server process, as the in-process heavy lane allowed); heavy calls wait for a free one within
their own deadline.

When no worker can take the call — workers switched off (0), still starting after READY_WAIT, just
replaced, the table moved to another version meanwhile, or a database the worker cannot see (an in-memory
SQLite database, or an open transaction of the caller, as in the in-process tests) — the read goes on where
it was, in the in-process heavy lane, exactly as before this module existed. A read's result is the same
wherever it ran.

A worker keeps its own cache of the tables it has read (services.table_data): the first expensive read of
a table version parses it there once (not charged to the call), and a table that expensive reads keep
hitting is held twice, in the server process and in its worker.
"""

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing import get_context
from multiprocessing.connection import Connection
from typing import Any

from django.conf import settings
from django.db import connection

from tools_app.data_access import budget
from tools_app.data_access.budget import Limits, too_expensive
from tools_app.data_access.operations import Mount
from tools_app.kernel.errors import ErrorCode, ToolError
from tools_app.kernel.limits import HEAVY_WORKER_MEMORY_MB, HEAVY_WORKERS

__all__ = ["HeavyWorkers", "read", "workers"]

KILL_GRACE = 0.25  # seconds after a call's own deadline before its worker is killed
READY_WAIT = 1.0  # seconds a call waits for a worker that is still starting, before it evaluates in-process


@dataclass(frozen=True, slots=True)
class Job:
    """One read, as a heavy worker runs it again: what it reads, at which version, under which budget."""

    operation: Callable[..., Any]  # a read of data_access.operations (pickled by its qualified name)
    table_id: int
    version: int
    json_path: str
    key_field: str
    arguments: dict
    extra: tuple
    limits: Limits
    since: float
    cpu_used_ms: float


def read(
    operation: Callable[..., Any], *, table_id: int, version: int, data: Any, mount: Mount, arguments: dict, extra=()
) -> Any:
    """`operation(data, mount, arguments, *extra)` (a read of data_access.operations) under the active
    budget, moved to a heavy worker if it becomes heavy (module docstring)."""
    run = operation
    current = budget.active()
    if current is None or not workers.usable():
        return run(data, mount, arguments, *extra)
    try:
        with current.movable():
            return run(data, mount, arguments, *extra)
    except budget.MoveElsewhere:
        pass
    job = Job(
        operation,
        table_id,
        version,
        mount.json_path,
        mount.key_field,
        arguments,
        tuple(extra),
        current.limits,
        current.wall_started,
        current.cpu_used_ms,
    )
    found, value = workers.run(job, deadline=current.wall_deadline)
    if found:
        return value
    return run(data, mount, arguments, *extra)  # no worker could take it: here, in the heavy lane


class _Worker:
    """One heavy worker process and the pipe to it."""

    def __init__(self) -> None:
        context = get_context("spawn")  # a fresh interpreter: nothing of this process's threads or locks
        self.pipe, child = context.Pipe()
        self.process = context.Process(
            target=serve,
            args=(child, _worker_databases(), HEAVY_WORKER_MEMORY_MB.get()),
            name="toolhub-heavy",
            daemon=True,
        )
        self.process.start()
        child.close()
        self.ready = False

    def is_ready(self) -> bool:
        """Whether the worker has set itself up (it says "ready" once): never waits."""
        if not self.ready and self.process.is_alive():
            try:
                if self.pipe.poll(0):
                    self.ready = self.pipe.recv() == "ready"
            except (EOFError, OSError):
                return False
        return self.ready and self.process.is_alive()

    def end(self) -> None:
        self.process.kill()
        self.process.join(timeout=5)
        self.pipe.close()


class HeavyWorkers:
    """The heavy worker processes of this server process, started on first use or by `start()`."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._idle: list[_Worker] = []
        self._all: list[_Worker] = []
        self._pid = 0

    @staticmethod
    def wanted() -> int:
        return HEAVY_WORKERS.get()

    def usable(self) -> bool:
        """Whether a heavy worker could read what this thread's connection reads: a database another process
        can open, and no transaction of the caller's that it could not see."""
        if self.wanted() <= 0 or connection.in_atomic_block:
            return False
        return not (connection.vendor == "sqlite" and connection.is_in_memory_db())  # type: ignore[attr-defined]

    def start(self) -> None:
        """Start the workers (they set themselves up in the background); idempotent."""
        with self._changed:
            self._start_locked()

    def _start_locked(self) -> None:
        if self._pid != os.getpid():  # a forked server worker: the parent's workers are not ours
            self._idle, self._all, self._pid = [], [], os.getpid()
        while len(self._all) < self.wanted():
            worker = _Worker()
            self._all.append(worker)
            self._idle.append(worker)

    def stop(self) -> None:
        with self._changed:
            for worker in self._all:
                worker.end()
            self._idle, self._all = [], []
            self._changed.notify_all()

    def _take(self, deadline: float, limits: Limits) -> _Worker | None:
        """An idle, ready worker, waiting for one until `deadline`; None when none is set up yet (the caller
        then evaluates in this process). QUERY_TOO_EXPENSIVE when every worker stayed busy until the deadline."""
        ready_by = min(deadline, time.monotonic() + READY_WAIT)
        with self._changed:
            self._start_locked()
            while True:
                for worker in list(self._idle):
                    if not worker.process.is_alive():
                        self._replace_locked(worker)
                ready = next((worker for worker in self._idle if worker.is_ready()), None)
                if ready is not None:
                    self._idle.remove(ready)
                    return ready
                if not self._all:
                    return None
                if self._idle:  # idle but still starting: wait for one a little, else evaluate here
                    remaining = ready_by - time.monotonic()
                    if remaining <= 0:
                        return None
                    starting = self._idle[0]
                    self._changed.release()
                    try:
                        with budget.waiting():
                            starting.pipe.poll(remaining)  # it says "ready" (is_ready reads it)
                    finally:
                        self._changed.acquire()
                    continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    waiting = " (waiting behind other expensive calls)"
                    raise too_expensive("CPU-time budget", limits.cpu_ms, "ms", waiting)
                with budget.waiting():
                    self._changed.wait(remaining)

    def _give_back(self, worker: _Worker) -> None:
        with self._changed:
            if worker in self._all:
                self._idle.append(worker)
            self._changed.notify()

    def _replace_locked(self, worker: _Worker) -> None:
        worker.end()
        if worker in self._idle:
            self._idle.remove(worker)
        if worker in self._all:
            self._all.remove(worker)
        self._start_locked()
        self._changed.notify()

    def _replace(self, worker: _Worker) -> None:
        with self._changed:
            self._replace_locked(worker)

    def run(self, job: Job, *, deadline: float) -> tuple[bool, Any]:
        """(True, value) when a worker ran the job; (False, None) when none could (the caller goes on itself).
        Raises the job's ToolError, or QUERY_TOO_EXPENSIVE when the worker overran its deadline (killed) or
        ran out of memory."""
        worker = self._take(deadline, job.limits)
        if worker is None:
            return False, None
        try:
            worker.pipe.send(job)
            reply = None
            with budget.waiting():
                while worker.pipe.poll(max(0.0, deadline - time.monotonic()) + KILL_GRACE):
                    reply = worker.pipe.recv()
                    if reply[0] != "loaded":
                        break
                    deadline += reply[1]  # loading the table is not the evaluation's time (read_mount)
                    reply = None
        except (EOFError, OSError):  # the worker died (its memory limit): a new one replaces it
            self._replace(worker)
            raise _out_of_memory() from None
        except BaseException:
            self._replace(worker)  # interrupted mid-exchange: the pipe's state is unknown
            raise
        if reply is None:  # over its deadline: ended, so that it stops consuming CPU
            self._replace(worker)
            waited = round((time.monotonic() - job.since) * 1000)
            raise too_expensive(
                "CPU-time budget", job.limits.cpu_ms, "ms", f" (stopped after {waited:,} ms; its process was ended)"
            )
        self._give_back(worker)
        kind = reply[0]
        if kind == "ok":
            return True, reply[1]
        if kind == "error":
            raise ToolError(reply[1], reply[2], reply[3])
        return False, None  # "elsewhere": the table moved on, or the worker cannot see it


workers = HeavyWorkers()


def _out_of_memory() -> ToolError:
    limit = HEAVY_WORKER_MEMORY_MB.get()
    return too_expensive("memory limit", limit, "MiB", " of the process that evaluates expensive queries")


def _worker_databases() -> dict:
    """This process's database settings for a worker (a test database's name included), without the
    connection pool: a worker holds one connection of its own."""
    databases: dict[str, dict[str, Any]] = {}
    for alias, config in settings.DATABASES.items():
        options = dict(config.get("OPTIONS") or {})
        options.pop("pool", None)
        databases[alias] = {**config, "OPTIONS": options, "CONN_MAX_AGE": 60}
    return databases


#
# The worker process
#


def serve(pipe: Connection, databases: dict, memory_mb: int) -> None:  # pragma: no cover - runs in the worker
    """A heavy worker's life: set Django up on the server's databases, say "ready", then run jobs."""
    import resource

    if memory_mb > 0:
        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolhub.settings")
    import django

    # Before setup: the database connections are configured on their first use, from the settings as they are
    # then (set afterwards, the worker would read the configured database, not the server's - a test's one).
    settings.DATABASES = databases
    django.setup()
    from django.db import close_old_connections

    pipe.send("ready")
    while True:
        try:
            job = pipe.recv()
        except (EOFError, OSError):
            return
        close_old_connections()  # as Django does around a request: a broken or old connection is replaced
        pipe.send(run_job(job, lambda seconds: pipe.send(("loaded", seconds))))


def run_job(job: Job, loaded: Callable[[float], None] = lambda seconds: None) -> tuple:
    """One job, as `serve` runs it: ("ok", value), ("error", code, message, details), or ("elsewhere",).
    Loading the table (a parse when this worker has not seen its version yet) is not charged to the call:
    its elapsed time is added to the deadline, and told to the server through `loaded`."""
    # Here, not at the top: a spawned worker imports this module before django.setup() (serve).
    from tools_app import services

    started = time.monotonic()
    try:
        version, data = services.table_data(job.table_id)
    except Exception:  # the table is gone, or this database is not the caller's: the caller goes on itself
        return ("elsewhere",)
    if version != job.version:
        return ("elsewhere",)
    loading = time.monotonic() - started
    loaded(loading)
    run = job.operation
    try:
        with budget.enforced(job.limits, since=job.since + loading, cpu_used_ms=job.cpu_used_ms):
            value = run(data, Mount(job.json_path, job.key_field), job.arguments, *job.extra)
    except ToolError as exc:
        return ("error", str(exc.code), exc.message, exc.details)
    except MemoryError:
        error = _out_of_memory()
        return ("error", str(ErrorCode.QUERY_TOO_EXPENSIVE), error.message, error.details)
    return ("ok", value)
