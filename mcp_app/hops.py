"""Where the MCP handlers' database work runs: never on the event loop (MCP_SDK_NOTES, "Django ORM").

Each request does all of its database work in one hop to a thread. Requests that bypass Django's handler
never fire request_started/finished, so connections are checked here (_reset_connections).
"""

import asyncio
import contextvars
import queue
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any

from asgiref.sync import sync_to_async
from django.db import DEFAULT_DB_ALIAS, connections

from tools_app.data_access import budget
from tools_app.kernel.limits import HOP_MAX_LENT_THREADS

__all__ = ["DatabaseHops"]

CONNECTION_CHECK_INTERVAL = 1.0  # seconds


def _reset_connections() -> None:
    """What Django does around a request (close_old_connections), for requests Django's handler never sees.

    Done before a hop when the connection saw an error, or at most once a second otherwise: with
    CONN_HEALTH_CHECKS each check costs a `SELECT 1` round trip, as much as the request's own query.
    A connection inside an atomic block belongs to an outer caller (a test's transaction): left alone.
    With PostgreSQL's connection pool (settings) CONN_MAX_AGE is 0, so this check hands the
    thread's connection back to the pool: a thread holds one for at most this interval between requests,
    and the pool's own health check (CONN_HEALTH_CHECKS) runs when the next hop takes one, once a second.
    """
    now = time.monotonic()
    for conn in connections.all(initialized_only=True):
        if conn.in_atomic_block:
            continue
        checked = getattr(conn, "_toolhub_checked_at", None)
        if conn.errors_occurred or checked is None or now - checked > CONNECTION_CHECK_INTERVAL:
            conn.close_if_unusable_or_obsolete()
            conn._toolhub_checked_at = now


def _hop(fn: Any, *args: Any) -> Any:
    _reset_connections()
    return fn(*args)


class _HopThreads:
    """A pool of `size` threads that lends an extra thread while one of its threads waits (`waiting`).

    Like concurrent.futures.ThreadPoolExecutor (threads start when work comes and no thread is idle, up to
    `size`), except that a thread blocked in `waiting()` — a call waiting for its concurrency slot, the heavy
    lane or a heavy worker (tools_app.execution.heavy) — does not count: while it waits, another thread may start, so
    that `size` threads stay free for light calls however many expensive calls wait (docs/budgets.md). A lent
    thread ends when it finds more than `size` threads unblocked after its task. At most `cap` threads.
    """

    def __init__(self, size: int, cap: int) -> None:
        self.size, self.cap = size, cap
        self._tasks: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._blocked = 0
        self._stopping = False

    def _grow_locked(self) -> None:
        """Start a thread when a task may wait with no idle thread, fewer than `size` unblocked, below `cap`."""
        if self._stopping or self._idle > 0 or len(self._threads) - self._blocked >= self.size:
            return
        if len(self._threads) >= self.cap:
            return
        thread = threading.Thread(target=self._work, name=f"toolhub-mcp-db-{len(self._threads)}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def submit(self, fn: Any, *args: Any) -> Future:
        future: Future = Future()
        self._tasks.put((future, fn, args))
        with self._lock:
            self._grow_locked()
        return future

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """Around a wait of one of this pool's threads: another thread may serve the queue meanwhile. On
        PostgreSQL the thread's connection goes back to the pool while it waits (the lent thread needs one)."""
        connection = connections[DEFAULT_DB_ALIAS]
        if connection.vendor == "postgresql" and not connection.in_atomic_block:
            connection.close()
        with self._lock:
            self._blocked += 1
            if not self._tasks.empty():
                self._grow_locked()
        try:
            yield
        finally:
            with self._lock:
                self._blocked -= 1

    def _work(self) -> None:
        budget.on_wait(self.waiting)  # this thread's waits inside a call lend its place (docstring)
        me = threading.current_thread()
        while True:
            with self._lock:
                self._idle += 1
            task = self._tasks.get()
            with self._lock:
                self._idle -= 1
            if task is None:
                break
            future, fn, args = task
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as exc:  # the awaiting request gets it, as from an executor
                    future.set_exception(exc)
            del task, future, fn, args
            with self._lock:
                if len(self._threads) - self._blocked > self.size:  # a lent thread, no longer needed
                    break
        with self._lock:
            self._threads.remove(me)
        connections.close_all()

    def threads(self) -> int:
        with self._lock:
            return len(self._threads)

    def shutdown(self) -> None:
        """End every thread (each closes its own connections on the way out) and wait for them."""
        with self._lock:
            self._stopping = True
            threads = list(self._threads)
        for _ in threads:
            self._tasks.put(None)
        for thread in threads:
            thread.join(timeout=10)


class DatabaseHops:
    """Where the handlers' database work runs: never on the event loop.

    With `threads` > 0 (production): a pool of that many threads, each keeping its own connection
    (CONN_MAX_AGE), so the round trips of concurrent requests overlap instead of queueing behind one
    thread. Every hop runs in autocommit and reads the committed state, as any worker would (SPEC §1).
    A thread that waits inside a call (for a concurrency slot or an expensive evaluation elsewhere,
    tools_app.data_access.budget.waiting) lends its place to another thread meanwhile (_HopThreads), so
    expensive calls cannot take the threads light calls need (docs/budgets.md).
    With 0: Django's one shared thread (sync_to_async, thread_sensitive); in-process tests use it so
    that the handlers see the test's open transaction.

    Why not asgiref's own pool (sync_to_async(thread_sensitive=False), the event loop's default executor):
    measured side by side (bench/mcp_throughput.py, PostgreSQL, 4 rounds each), tools/call ran at
    442 vs 337 requests/s in the 2026-07-28 era and 281 vs 248 in 2025-11-25 with this pool of 4: the
    default executor's min(32, cores + 4) threads contend for the two cores and for the database, and
    asgiref copies the context for every hop. This pool also closes its threads' connections at shutdown.
    """

    def __init__(self, threads: int, cap: int = HOP_MAX_LENT_THREADS) -> None:
        self.threads = threads
        self.cap = threads + cap
        self._pool: _HopThreads | None = None
        self._shared_thread = sync_to_async(_hop, thread_sensitive=True)

    def start(self) -> None:
        if self.threads > 0 and self._pool is None:
            self._pool = _HopThreads(self.threads, self.cap)

    def stop(self) -> None:
        """End the pool's threads, each closing its own connections (blocking: call it from a thread)."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        pool.shutdown()

    async def run(self, fn: Any, *args: Any) -> Any:
        pool = self._pool
        if pool is None:
            return await self._shared_thread(fn, *args)
        # The hop runs in the request's context (its id and span: tools_app.kernel.telemetry), as asgiref's would.
        context = contextvars.copy_context()
        return await asyncio.wrap_future(pool.submit(context.run, _hop, fn, *args))
