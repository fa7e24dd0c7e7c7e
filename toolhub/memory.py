"""A server process gives memory back to the system after requests that moved a lot of data (toolhub.asgi).

Python hands freed memory back to the C allocator, and glibc's allocator keeps it: a freed block below a live
one stays in the process (RSS) for good, and each thread that allocates may get an arena of its own (up to 8
per core), each keeping its own free memory. A worker that once parsed a 40 MB upload, or answered a burst of
hundreds of requests (Django runs each in a thread of its own), kept hundreds of MB it no longer used.

Two remedies, both no-ops where the C library is not glibc:

- **Fewer arenas.** `limit_arenas()` (at start, before the server's threads exist) caps glibc's arenas at
  TOOLHUB_MALLOC_ARENA_MAX (default 2; 0 leaves glibc's default). Threads share the arenas, so free memory is
  reused across requests instead of sitting in a thread's own arena. Setting MALLOC_ARENA_MAX in the
  environment does the same and wins over this (glibc reads it first).
- **Trim after large requests and after bursts.** `trim_after_large_requests(app)` counts the bytes each
  HTTP request receives and sends; when a request moved at least TOOLHUB_MALLOC_TRIM_AFTER_BYTES (default
  1 MiB) in total, `malloc_trim(0)` runs once its answer has gone. It also counts the requests in flight:
  when they fall back to none after at least BURST_REQUESTS were in flight at once (each with its thread,
  its buffers and its share of the arenas), it trims too. A trim runs in a thread off the event loop, at
  most one at a time per process (a trim already running covers the requests that end meanwhile). It runs
  the cyclic garbage collector first (what a request built is often held in reference cycles until then),
  then returns the free pages of every arena to the system (a few ms per hundred MB).

And one for the collector's own time: `freeze_startup_objects()` (once the server has started: the lifespan's
startup, toolhub.asgi) moves every object alive then (modules, classes, functions, settings, caches' tables:
about 150,000 objects in a worker) into the collector's permanent generation. A full collection, which a
serving process runs every few hundred requests, then walks only what was made since, not all of them again:
they were 5-7 % of a tools/call's CPU, and the served CPU per call fell by 13-20 % in three of the four
engine/era pairs (bench/README.md, "The collector's full collections").
"""

import asyncio
import ctypes
import ctypes.util
import gc
import logging
import threading
from typing import Any

from tools_app.kernel.limits import MALLOC_ARENA_MAX, MALLOC_TRIM_AFTER_BYTES

__all__ = ["freeze_startup_objects", "limit_arenas", "trim", "trim_after_large_requests"]

logger = logging.getLogger(__name__)

M_ARENA_MAX = -8  # glibc's mallopt parameter number (malloc.h)
BURST_REQUESTS = 32


def _glibc() -> Any:
    """The C library when it is glibc (it has malloc_trim and mallopt), else None."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        libc.malloc_trim, libc.mallopt  # noqa: B018  (glibc only: musl and others lack them)
    except (OSError, AttributeError):
        return None
    return libc


_libc = _glibc()
_trimming = threading.Lock()


def limit_arenas() -> bool:
    """Cap glibc's arenas at TOOLHUB_MALLOC_ARENA_MAX; True when a cap was set."""
    arenas = MALLOC_ARENA_MAX.get()
    if _libc is None or arenas <= 0:
        return False
    return bool(_libc.mallopt(M_ARENA_MAX, arenas))


def trim() -> bool:
    """Give the allocator's free pages back to the system now (glibc's malloc_trim(0)); False when another
    trim is running in this process (it does the same work) or the C library is not glibc."""
    if _libc is None or not _trimming.acquire(blocking=False):
        return False
    try:
        # What a large request built is often held in reference cycles (request, parsed body, frames of a
        # handled error) until the cyclic collector runs: collect first, or the trim finds little to return.
        gc.collect()
        _libc.malloc_trim(0)
        return True
    finally:
        _trimming.release()


def freeze_startup_objects() -> bool:
    """Leave the objects alive now out of every later collection (gc.freeze), after collecting the garbage of
    the start; once per process (True the first time). What is frozen is never collected: the start's garbage
    goes first, and what it made for good (imports, settings, the app) is never garbage anyway."""
    if gc.get_freeze_count():
        return False
    gc.collect()
    gc.freeze()
    return True


class _InFlight:
    """HTTP requests in flight in this process (`now`), and the most at once since the last time there were none
    (`peak`). Counted inline by the wrapper, not through methods: every request passes it."""

    __slots__ = ("now", "peak")

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0


_in_flight = _InFlight()  # the event loop's: touched only from coroutines, no lock needed


def trim_after_large_requests(app: Any) -> Any:
    """`app` (an ASGI application), trimming once a request that moved TOOLHUB_MALLOC_TRIM_AFTER_BYTES or more
    (received plus sent) is over, and once a burst of requests is over."""

    async def counted(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or _libc is None:
            await app(scope, receive, send)
            return
        moved = 0

        async def counting_receive() -> dict:
            nonlocal moved
            message = await receive()
            moved += len(message.get("body", b""))
            return message

        async def counting_send(message: dict) -> None:
            nonlocal moved
            moved += len(message.get("body", b""))
            await send(message)

        in_flight = _in_flight
        in_flight.now += 1
        if in_flight.now > in_flight.peak:
            in_flight.peak = in_flight.now
        try:
            await app(scope, counting_receive, counting_send)
        finally:
            # A burst is over when none is left after BURST_REQUESTS or more at once.
            in_flight.now -= 1
            burst_over = False
            if in_flight.now <= 0:
                burst_over, in_flight.peak = in_flight.peak >= BURST_REQUESTS, 0
            threshold = MALLOC_TRIM_AFTER_BYTES.get()
            large = threshold > 0 and moved >= threshold
            if (large or burst_over) and not _trimming.locked():
                asyncio.get_running_loop().run_in_executor(None, trim)

    return counted
