"""The operator's page (tools_app.admin.operator_page): the same numbers as /metrics, summed up."""

import threading
import time
from collections import deque
from typing import Any

from tools_app.kernel.telemetry.metrics import STARTED, metrics_registry

_samples: deque[tuple[float, float, float]] = deque(maxlen=64)  # (time, calls, failed calls)
_samples_lock = threading.Lock()
SAMPLE_EVERY = 10.0  # seconds between remembered totals
RATE_WINDOW = 300.0  # seconds: calls per minute are measured over at most this much of the past


def _families() -> dict[str, Any]:
    return {family.name: family for family in metrics_registry().collect()}


def _call_totals(families: dict[str, Any]) -> tuple[float, float]:
    calls = failed = 0.0
    family = families.get("toolhub_tool_calls")
    for sample in family.samples if family is not None else ():
        if sample.name.endswith("_total"):
            calls += sample.value
            if sample.labels.get("outcome") != "ok":
                failed += sample.value
    return calls, failed


def remember_totals(families: dict[str, Any] | None = None) -> tuple[float, float]:
    """Keep the current call totals (at most every SAMPLE_EVERY s), for calls per minute; return them."""
    totals = _call_totals(families if families is not None else _families())
    now = time.time()
    with _samples_lock:
        if not _samples or now - _samples[-1][0] >= SAMPLE_EVERY:
            _samples.append((now, *totals))
    return totals


def _per_minute(now: float, calls: float, failed: float) -> tuple[float, float, float]:
    """(calls per minute, error rate in %, seconds measured) over the last RATE_WINDOW s when a remembered
    total is old enough, else since this process started."""
    since, calls_then, failed_then = STARTED, 0.0, 0.0
    with _samples_lock:
        for at, old_calls, old_failed in _samples:
            if now - at <= RATE_WINDOW and now - at >= 5:
                since, calls_then, failed_then = at, old_calls, old_failed
                break
    seconds = max(now - since, 1e-9)
    made = calls - calls_then
    return made * 60 / seconds, (100 * (failed - failed_then) / made if made else 0.0), seconds


def summary(slowest: int = 5, refusals: int = 8) -> dict[str, Any]:
    """Calls, calls per minute, error rate, the slowest (instance, tool type) pairs by mean duration with
    their p95 bucket, and the most frequent refusals: all read from the metrics registry."""
    families = _families()
    calls, failed = remember_totals(families)
    per_minute, error_rate, seconds = _per_minute(time.time(), calls, failed)
    timings: dict[tuple[str, str], dict[str, Any]] = {}
    family = families.get("toolhub_tool_call_duration_seconds")
    for sample in family.samples if family is not None else ():
        key = (sample.labels.get("instance", ""), sample.labels.get("tool_type", ""))
        entry = timings.setdefault(key, {"sum": 0.0, "count": 0.0, "buckets": {}})
        if sample.name.endswith("_sum"):
            entry["sum"] += sample.value
        elif sample.name.endswith("_count"):
            entry["count"] += sample.value
        elif sample.name.endswith("_bucket"):
            bound = float(sample.labels["le"])
            entry["buckets"][bound] = entry["buckets"].get(bound, 0.0) + sample.value
    slow = []
    for (instance, tool_type), entry in timings.items():
        if not entry["count"]:
            continue
        wanted = 0.95 * entry["count"]
        p95 = next((bound for bound in sorted(entry["buckets"]) if entry["buckets"][bound] >= wanted), None)
        slow.append(
            {
                "instance": instance,
                "tool_type": tool_type,
                "calls": int(entry["count"]),
                "mean_ms": round(1000 * entry["sum"] / entry["count"], 2),
                "p95_at_most_ms": None if p95 is None or p95 == float("inf") else round(1000 * p95, 1),
            }
        )
    slow.sort(key=lambda item: -item["mean_ms"])
    counted: dict[str, float] = {}

    def add(label: str, value: float) -> None:
        if value:
            counted[label] = counted.get(label, 0.0) + value

    for name, prefix, label in (
        ("toolhub_rate_limit_refusals", "rate limit", "scope"),
        ("toolhub_auth_failures", "authentication", "surface"),
    ):
        family = families.get(name)
        for sample in family.samples if family is not None else ():
            if sample.name.endswith("_total"):
                add(f"{prefix}: {sample.labels.get(label, '')}", sample.value)
    family = families.get("toolhub_tool_calls")
    for sample in family.samples if family is not None else ():
        outcome = sample.labels.get("outcome", "ok")
        if sample.name.endswith("_total") and outcome != "ok":
            add(f"tool call: {outcome}", sample.value)
    top = sorted(counted.items(), key=lambda item: (-item[1], item[0]))[:refusals]
    return {
        "calls": int(calls),
        "failed": int(failed),
        "calls_per_minute": round(per_minute, 2),
        "error_rate": round(error_rate, 2),
        "measured_seconds": round(seconds),
        "slowest": slow[:slowest],
        "refusals": [{"what": what, "count": int(count)} for what, count in top],
    }
