"""The burst client of the benchmarks that fire many requests at once at a server (bench/login_burst.py,
bench/auth_burst.py): one request timed, requests released together, percentiles, worker memory.

Each request runs in a thread of its own; all wait at a barrier and are released together, so the server
sees them at once rather than as the client manages to open them. "Another user" working meanwhile runs in a
process of its own, as a client elsewhere would. Standard library only.
"""

import multiprocessing
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

__all__ = ["call", "percentile", "release_together", "resident_mb"]


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


def resident_mb(pids: list[int]) -> float:
    """The resident memory (VmRSS) of these processes together, in MB."""
    total_kb = 0
    for pid in pids:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total_kb += int(line.split()[1])
    return total_kb / 1024
