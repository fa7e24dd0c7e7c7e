"""Where the MCP handlers' database work runs: never on the event loop (MCP_SDK_NOTES, "Django ORM").

Each request does all of its database work in one hop to a thread. Requests that bypass Django's handler
never fire request_started/finished, so connections are checked here (_reset_connections).
"""

import asyncio
import contextvars
import functools
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connections

__all__ = ["DatabaseHops"]

CONNECTION_CHECK_INTERVAL = 1.0  # seconds


def _reset_connections() -> None:
    """What Django does around a request (close_old_connections), for requests Django's handler never sees.

    Done before a hop when the connection saw an error, or at most once a second otherwise: with
    CONN_HEALTH_CHECKS each check costs a `SELECT 1` round trip, as much as the request's own query.
    A connection inside an atomic block belongs to an outer caller (a test's transaction): left alone.
    With PostgreSQL's connection pool (settings, issue 13) CONN_MAX_AGE is 0, so this check hands the
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


class DatabaseHops:
    """Where the handlers' database work runs: never on the event loop.

    With `threads` > 0 (production): a pool of that many threads, each keeping its own connection
    (CONN_MAX_AGE), so the round trips of concurrent requests overlap instead of queueing behind one
    thread. Every hop runs in autocommit and reads the committed state, as any worker would (SPEC §1).
    With 0: Django's one shared thread (sync_to_async, thread_sensitive); in-process tests use it so
    that the handlers see the test's open transaction.

    Why not asgiref's own pool (sync_to_async(thread_sensitive=False), the event loop's default executor):
    measured side by side (bench/mcp_throughput.py, PostgreSQL, 4 rounds each, issue 7), tools/call ran at
    442 vs 337 requests/s in the 2026-07-28 era and 281 vs 248 in 2025-11-25 with this pool of 4: the
    default executor's min(32, cores + 4) threads contend for the two cores and for the database, and
    asgiref copies the context for every hop. This pool also closes its threads' connections at shutdown.
    """

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self._pool: ThreadPoolExecutor | None = None
        self._started = 0
        self._lock = threading.Lock()
        self._shared_thread = sync_to_async(_hop, thread_sensitive=True)

    def start(self) -> None:
        if self.threads > 0 and self._pool is None:
            self._started = 0
            self._pool = ThreadPoolExecutor(
                max_workers=self.threads, thread_name_prefix="toolhub-mcp-db", initializer=self._count_thread
            )

    def _count_thread(self) -> None:
        with self._lock:
            self._started += 1

    def stop(self) -> None:
        """Close each pool thread's connections, then end the threads (blocking: call it from a thread).

        A connection belongs to the thread that opened it, so each thread closes its own: one task per
        started thread, held at a barrier so that no thread takes two.
        """
        pool, self._pool = self._pool, None
        if pool is None:
            return
        with self._lock:
            started = self._started
        if started:
            barrier = threading.Barrier(started)

            def close_own_connections() -> None:
                connections.close_all()
                try:
                    barrier.wait(timeout=10)
                except threading.BrokenBarrierError:
                    pass

            for _ in range(started):
                pool.submit(close_own_connections)
        pool.shutdown(wait=True)

    async def run(self, fn: Any, *args: Any) -> Any:
        pool = self._pool
        if pool is None:
            return await self._shared_thread(fn, *args)
        # The hop runs in the request's context (its id and span: tools_app.telemetry), as asgiref's would.
        context = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(pool, functools.partial(context.run, _hop, fn, *args))
