"""Call statistics for the admin: per-tool counts, error rate and latency percentiles.

Computed in Python over a bounded window of the newest calls, so it costs the same on SQLite and
PostgreSQL however long the log grows.
"""

import math
from typing import Any

# How many of the newest matching calls the statistics cover.
WINDOW = 10_000


def percentile(sorted_values: list[float], pct: float) -> float | None:
    """Nearest-rank percentile of already sorted values (None for no values)."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(pct / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def _summary(name: str, durations: list[float], errors: int, last: Any) -> dict[str, Any]:
    durations.sort()
    count = len(durations)
    return {
        "tool_name": name,
        "count": count,
        "errors": errors,
        "error_rate": round(100 * errors / count, 1) if count else 0.0,
        "p50_ms": _round(percentile(durations, 50)),
        "p95_ms": _round(percentile(durations, 95)),
        "last_call": last,
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def call_stats(queryset, window: int = WINDOW) -> dict[str, Any]:
    """{"total": summary, "tools": [summary per tool name, most called first], "window": {...}}."""
    rows = list(
        queryset.order_by("-created_at", "-id").values_list("tool_name", "status", "duration_ms", "created_at")[
            : window + 1
        ]
    )
    truncated = len(rows) > window
    rows = rows[:window]
    per_tool: dict[str, dict[str, Any]] = {}
    all_durations: list[float] = []
    all_errors = 0
    for name, status, duration, created in rows:
        entry = per_tool.setdefault(name, {"durations": [], "errors": 0, "last": created})
        entry["durations"].append(duration)
        all_durations.append(duration)
        if status != "ok":
            entry["errors"] += 1
            all_errors += 1
    tools = [_summary(name, e["durations"], e["errors"], e["last"]) for name, e in per_tool.items()]
    tools.sort(key=lambda item: (-item["count"], item["tool_name"]))
    return {
        "total": _summary("all tools", all_durations, all_errors, rows[0][3] if rows else None),
        "tools": tools,
        "window": {"size": window, "truncated": truncated, "calls": len(rows)},
    }
