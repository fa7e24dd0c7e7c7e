"""The burst client of the benchmarks that fire many requests at once at a server (bench/login_burst.py,
bench/auth_burst.py): one request timed, requests released together, percentiles, worker memory.

Two clients release the same requests together. `release_together`: each request runs in a thread of its
own (urllib); all wait at a barrier and are released together, so the server sees them at once rather than
as the client manages to open them. `fire_together`: one asyncio loop opens a connection per request and
writes the request's bytes, all at once, and reads each answer; a quarter of the CPU per request of a thread
with urllib (bench/README.md), so that on a machine of few cores the burst's own client takes less of the CPU the
server and the other user need (bench/README.md). "Another user" working meanwhile runs in a process of its
own, as a client elsewhere would. Standard library only.
"""

import asyncio
import multiprocessing
import os
import resource
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "call",
    "cpu_seconds",
    "fire_together",
    "own_cpu_seconds",
    "percentile",
    "raw_request",
    "release_together",
    "resident_mb",
]


def call(request: urllib.request.Request, timeout: float = 120) -> tuple[int, float]:
    """Send `request`: (status, seconds); status 0 when no HTTP answer came (refused, reset, timed out)."""
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read()
            status = response.status
    except urllib.error.HTTPError as error:
        error.read()
        status = error.code
    except OSError:
        status = 0
    return status, time.monotonic() - started


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile (`fraction` 0.95: p95) of a non-empty list."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def _other_user(meanwhile: Callable[[], urllib.request.Request], start: Any, stop: Any, out: Any) -> None:
    start.wait()
    answers = []
    while not stop.is_set():
        answers.append(call(meanwhile()))
    out.put(answers)


def release_together(
    requests: list[Callable[[], tuple[int, float]]], meanwhile: Callable[[], urllib.request.Request] | None = None
) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """Run every callable of `requests` at once, released together; meanwhile, from the same moment until the
    last has answered, send `meanwhile()` one after another (another user at work) from a process of its own,
    so that its timings do not include waiting for this process's hundreds of threads. Returns the burst's
    (status, seconds) in order, and the meanwhile requests' ones."""
    context = multiprocessing.get_context("fork")  # before any thread of the burst exists
    start, stop, out = context.Event(), context.Event(), context.Queue()
    other = None
    if meanwhile is not None:
        other = context.Process(target=_other_user, args=(meanwhile, start, stop, out), daemon=True)
        other.start()
    gate = threading.Barrier(len(requests), action=start.set)

    def one(send: Callable[[], tuple[int, float]]) -> tuple[int, float]:
        gate.wait()
        return send()

    with ThreadPoolExecutor(max_workers=len(requests)) as pool:
        results = list(pool.map(one, requests))
    stop.set()
    answers: list[tuple[int, float]] = []
    if other is not None:
        answers = out.get(timeout=180)
        other.join(10)
    return results, answers


def raw_request(request: urllib.request.Request) -> bytes:
    """`request` as the bytes of an HTTP/1.1 request on a connection of its own (`Connection: close`)."""
    parts = urlsplit(request.full_url)
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    body = request.data or b""
    assert isinstance(body, bytes)
    headers = {"Host": parts.netloc, **dict(request.header_items()), "Connection": "close"}
    if body or request.get_method() == "POST":
        headers["Content-Length"] = str(len(body))
    head = f"{request.get_method()} {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return (head + "\r\n").encode("latin-1") + body


async def _fire_one(host: str, port: int, payload: bytes, release: asyncio.Event, timeout: float) -> tuple[int, float]:
    await release.wait()
    started = time.monotonic()
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(host, port)
            try:
                writer.write(payload)
                status_line = await reader.readline()
                await reader.read()  # the rest, until the server closes
            finally:
                writer.close()
        status = int(status_line.split()[1])
    except (OSError, TimeoutError, ValueError, IndexError):
        status = 0
    return status, time.monotonic() - started


def fire_together(
    requests: list[urllib.request.Request],
    meanwhile: Callable[[], urllib.request.Request] | None = None,
    timeout: float = 120,
) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """release_together() for plain requests, from one asyncio loop in this thread: every request's
    connection opened and its bytes written at once, each answer read to its end (status, seconds from the
    release). Meanwhile `meanwhile()` as in release_together()."""
    payloads = [raw_request(request) for request in requests]
    address = urlsplit(requests[0].full_url)
    host, port = address.hostname or "127.0.0.1", address.port or 80
    context = multiprocessing.get_context("fork")
    start, stop, out = context.Event(), context.Event(), context.Queue()
    other = None
    if meanwhile is not None:
        other = context.Process(target=_other_user, args=(meanwhile, start, stop, out), daemon=True)
        other.start()

    async def burst() -> list[tuple[int, float]]:
        release = asyncio.Event()
        tasks = [asyncio.create_task(_fire_one(host, port, payload, release, timeout)) for payload in payloads]
        await asyncio.sleep(0)  # every task waiting on the release
        start.set()
        release.set()
        return list(await asyncio.gather(*tasks))

    results = asyncio.run(burst())
    stop.set()
    answers: list[tuple[int, float]] = []
    if other is not None:
        answers = out.get(timeout=180)
        other.join(10)
    return results, answers


def resident_mb(pids: list[int]) -> float:
    """The resident memory (VmRSS) of these processes together, in MB."""
    total_kb = 0
    for pid in pids:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total_kb += int(line.split()[1])
    return total_kb / 1024


def cpu_seconds(pids: list[int]) -> float:
    """The CPU time (user + system) these processes have used so far, in seconds."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of proc(5))
    return total / ticks


def own_cpu_seconds() -> float:
    """The CPU time this process (every thread) has used so far, in seconds."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
