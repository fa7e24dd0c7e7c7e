"""Activity over time from the call log: calls, errors and p95 latency per instance and per tool, top tools,
top error codes, budget and rate-limit refusals (the admin's activity page, docs/activity.md).

Bounded whatever the log holds: one time window of at most MAX_BUCKETS time buckets, counted with GROUP BY
in the database (one statement reading only the window's rows, through a covering index), and
at most TOP_SERIES instances or tools drawn one by one (the rest add up to "other"). The p95 latency is
read from a histogram of LATENCY_BOUNDS_MS counted in SQL: it is the upper bound of the duration bucket
that holds the 95th percentile (nearest rank), so "p95 ≤ X ms", the same number on SQLite and PostgreSQL.
"""

import math
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connections
from django.db.models import Case, Count, F, IntegerField, QuerySet, Sum, Value, When
from django.db.models.expressions import Func
from django.utils import timezone

from tools_app.kernel.errors import ErrorCode
from tools_app.models import McpInstance

__all__ = [
    "BUDGET_CODES",
    "LATENCY_BOUNDS_MS",
    "RATE_LIMIT_CODES",
    "WINDOWS",
    "Window",
    "activity",
    "p95_bound",
    "refused_requests",
]


@dataclass(frozen=True, slots=True)
class Window:
    key: str  # the query parameter's value
    label: str
    seconds: int
    bucket_seconds: int

    @property
    def buckets(self) -> int:
        return self.seconds // self.bucket_seconds


# The windows a page may ask for, each cut into at most 96 buckets.
WINDOWS: dict[str, Window] = {
    window.key: window
    for window in (
        Window("1h", "last hour", 3600, 60),
        Window("6h", "last 6 hours", 6 * 3600, 5 * 60),
        Window("24h", "last 24 hours", 24 * 3600, 15 * 60),
        Window("7d", "last 7 days", 7 * 86400, 3 * 3600),
        Window("30d", "last 30 days", 30 * 86400, 12 * 3600),
    )
}
DEFAULT_WINDOW = "24h"
MAX_BUCKETS = max(window.buckets for window in WINDOWS.values())

# Upper bounds of the latency histogram, in ms: 10 per decade (ratio 10^0.1 ≈ 1.26) from 0.1 ms to 100 s,
# then one open bucket (reported as the last bound). A p95 is at most 26 % above the true nearest-rank value.
LATENCY_BOUNDS_MS: tuple[float, ...] = tuple(float(f"{10 ** (k / 10):.3g}") for k in range(-10, 51))

# The series drawn one by one; the other instances or tools are added up as "other".
TOP_SERIES = 8
# Rows of the top tools and top error codes tables.
TOP_ROWS = 10

# Calls stopped by a budget: an evaluation budget (time, elements, bytes) or the result budget.
BUDGET_CODES = (str(ErrorCode.QUERY_TOO_EXPENSIVE), str(ErrorCode.RESULT_TOO_LARGE))
# Calls refused by the pipeline's concurrency limit. Requests refused by a rate limit never reach the pipeline
# and leave no call-log row (docs/rate-limits.md): they are counted apart (RefusalCount, services.refusals).
RATE_LIMIT_CODES = (str(ErrorCode.RATE_LIMITED),)

LABEL_FORMAT = "%Y-%m-%d %H:%M"
OTHER = "other"
NO_INSTANCE = "(API and admin)"


class EpochSeconds(Func):
    """Whole seconds since 1970-01-01 UTC of a datetime column, as an integer, on SQLite and PostgreSQL (the
    two databases toolhub runs on)."""

    output_field = IntegerField()

    def as_sqlite(self, compiler, connection, **extra_context):
        # Django keeps SQLite datetimes as UTC text; strftime('%s') truncates to whole seconds.
        template = "CAST(strftime('%%%%s', %(expressions)s) AS INTEGER)"
        return self.as_sql(compiler, connection, template=template, **extra_context)

    def as_postgresql(self, compiler, connection, **extra_context):
        template = "FLOOR(EXTRACT(EPOCH FROM %(expressions)s))::bigint"
        return self.as_sql(compiler, connection, template=template, **extra_context)


def _time_bucket(start: datetime, bucket_seconds: int, field: str = "created_at") -> Any:
    """The index of a row's time bucket (0 for the window's first), computed in SQL from its `field`."""
    return (EpochSeconds(F(field)) - Value(int(start.timestamp()))) / Value(bucket_seconds)


def _latency_bucket() -> Case:
    """The index of a row's duration in LATENCY_BOUNDS_MS (len(...) for the open bucket), computed in SQL."""
    whens = [When(duration_ms__lte=bound, then=Value(index)) for index, bound in enumerate(LATENCY_BOUNDS_MS)]
    return Case(*whens, default=Value(len(LATENCY_BOUNDS_MS)), output_field=IntegerField())


def p95_bound(histogram: dict[int, int]) -> float | None:
    """The upper bound (ms) of the latency bucket holding the nearest-rank 95th percentile of `histogram`
    ({bucket index: count}); the last bound for the open bucket; None when it counts nothing."""
    total = sum(histogram.values())
    if not total:
        return None
    rank = max(1, math.ceil(0.95 * total))
    seen = 0
    for index in sorted(histogram):
        seen += histogram[index]
        if seen >= rank:
            return LATENCY_BOUNDS_MS[min(index, len(LATENCY_BOUNDS_MS) - 1)]
    return LATENCY_BOUNDS_MS[-1]  # pragma: no cover - the loop always reaches the rank


def window_bounds(window: Window, now: datetime | None = None) -> tuple[datetime, datetime]:
    """(start, end) of `window` ending at the end of the bucket that holds `now`, aligned on whole buckets
    since the epoch (so a page reloaded a few seconds later draws the same buckets)."""
    now = now or timezone.now()
    size = window.bucket_seconds
    end_epoch = (int(now.timestamp()) // size + 1) * size
    end = datetime.fromtimestamp(end_epoch, tz=UTC)
    return end - timedelta(seconds=window.seconds), end


class _Series:
    """Counts of one instance or tool per time bucket, and its latency histogram per bucket."""

    __slots__ = ("calls", "errors", "histograms", "total")

    def __init__(self, buckets: int) -> None:
        self.calls = [0] * buckets
        self.errors = [0] * buckets
        self.histograms: list[dict[int, int]] = [{} for _ in range(buckets)]
        self.total = 0

    def add(self, bucket: int, latency: int, calls: int, failed: bool) -> None:
        self.calls[bucket] += calls
        if failed:
            self.errors[bucket] += calls
        histogram = self.histograms[bucket]
        histogram[latency] = histogram.get(latency, 0) + calls
        self.total += calls

    def merge(self, other: "_Series") -> None:
        for bucket, histogram in enumerate(other.histograms):
            self.calls[bucket] += other.calls[bucket]
            self.errors[bucket] += other.errors[bucket]
            mine = self.histograms[bucket]
            for latency, calls in histogram.items():
                mine[latency] = mine.get(latency, 0) + calls
        self.total += other.total

    def as_dict(self, name: str) -> dict[str, Any]:
        return {
            "name": name,
            "calls": self.calls,
            "errors": self.errors,
            "p95_ms": [p95_bound(histogram) for histogram in self.histograms],
            "total": self.total,
        }


def _top_series(series: dict[Any, _Series], names: dict[Any, str], buckets: int) -> list[dict[str, Any]]:
    """The TOP_SERIES busiest series (ties by name), then the rest added up as "other"."""
    ranked = sorted(series, key=lambda key: (-series[key].total, names.get(key, str(key))))
    result = [series[key].as_dict(names.get(key, str(key))) for key in ranked[:TOP_SERIES]]
    if len(ranked) > TOP_SERIES:
        other = _Series(buckets)
        for key in ranked[TOP_SERIES:]:
            other.merge(series[key])
        result.append(other.as_dict(OTHER))
    return result


def activity_groups(calls: QuerySet, window: Window, start: datetime) -> QuerySet:
    """The statement of activity(): `calls` of the window counted by (instance, tool name, time bucket, latency
    bucket, status, error code), as tuples of those and the count."""
    return (
        calls.order_by()
        .annotate(bucket=_time_bucket(start, window.bucket_seconds), latency=_latency_bucket())
        .values_list("mcp_instance_id", "tool_name", "bucket", "latency", "status", "error_code")
        .annotate(calls=Count("id"))
    )


def _fetch(groups: QuerySet) -> Iterator[tuple[Any, ...]]:
    """The rows of `groups` as the database driver returns them: the values are ints and strings already, and
    the ORM's per-row converters would cost a fifth of the page's time at 100,000 calls."""
    sql, params = groups.query.sql_with_params()
    with connections[groups.db].cursor() as cursor:
        cursor.execute(sql, params)
        while rows := cursor.fetchmany(10_000):
            yield from rows


def refused_requests(refused: QuerySet, window: Window, start: datetime, end: datetime) -> list[int]:
    """Requests refused by a rate limit before the pipeline, per time bucket of the window: `refused` (a
    RefusalCount queryset, scoped and filtered as the calls are) added up in the database, one statement."""
    counts = [0] * window.buckets
    groups = (
        refused.filter(minute__gte=start, minute__lt=end)
        .order_by()
        .annotate(bucket=_time_bucket(start, window.bucket_seconds, "minute"))
        .values_list("bucket")
        .annotate(total=Sum("count"))
    )
    for bucket, total in groups:
        if 0 <= bucket < window.buckets:
            counts[bucket] += total
    return counts


def activity(
    calls: QuerySet, window: Window, now: datetime | None = None, refused: QuerySet | None = None
) -> dict[str, Any]:
    """The activity of `calls` (a CallLog queryset, already scoped to what the viewer may see and filtered) in
    `window`: {"window", "labels", "by_instance", "by_tool", "top_tools", "top_errors", "refusals", "total"}.
    Time series are lists of len(labels) values, one per bucket, oldest first. `refused`, the RefusalCount rows
    scoped the same way, gives the requests a rate limit refused before any tool ran (none when not given).

    One statement for the calls: the window's rows counted by (instance, tool name, time bucket, latency bucket,
    status, error code) in the database, read through the covering index of the viewer's rows
    (CallLog.Meta.indexes); everything else is added up here from those groups (at most a few tens of
    thousands however many rows the window holds: instances x tools x buckets x latency buckets in use). One
    more for the refused requests (refused_requests).
    """
    start, end = window_bounds(window, now)
    buckets = window.buckets
    groups = activity_groups(calls.filter(created_at__gte=start, created_at__lt=end), window, start)
    by_instance: dict[Any, _Series] = {}
    by_tool: dict[Any, _Series] = {}
    tool_histograms: dict[str, dict[int, int]] = {}
    code_totals: dict[str, int] = defaultdict(int)
    budget = [0] * buckets
    rate_limited = [0] * buckets
    all_histogram: dict[int, int] = defaultdict(int)
    total_calls = total_errors = 0
    for instance_id, tool_name, bucket, latency, status, error_code, count in _fetch(groups):
        if not 0 <= bucket < buckets:  # pragma: no cover - the filter keeps the window's rows only
            continue
        failed = status == "error"
        series = by_instance.get(instance_id)
        if series is None:
            series = by_instance[instance_id] = _Series(buckets)
        series.add(bucket, latency, count, failed)
        series = by_tool.get(tool_name)
        if series is None:
            series = by_tool[tool_name] = _Series(buckets)
        series.add(bucket, latency, count, failed)
        histogram = tool_histograms.setdefault(tool_name, {})
        histogram[latency] = histogram.get(latency, 0) + count
        all_histogram[latency] += count
        total_calls += count
        if failed:
            total_errors += count
            code = error_code or "(no code)"
            code_totals[code] += count
            if code in BUDGET_CODES:
                budget[bucket] += count
            elif code in RATE_LIMIT_CODES:
                rate_limited[bucket] += count

    instance_names: dict[Any, str] = {None: NO_INSTANCE}
    instance_ids = [key for key in by_instance if key is not None]
    instance_names.update(McpInstance.objects.filter(pk__in=instance_ids).values_list("pk", "slug"))

    top_tools = [
        {
            "name": name,
            "calls": series.total,
            "errors": sum(series.errors),
            "error_rate": round(100 * sum(series.errors) / series.total, 1),
            "p95_ms": p95_bound(tool_histograms[name]),
        }
        for name, series in sorted(by_tool.items(), key=lambda item: (-item[1].total, item[0]))[:TOP_ROWS]
    ]
    top_errors = [
        {"code": code, "calls": count}
        for code, count in sorted(code_totals.items(), key=lambda item: (-item[1], item[0]))[:TOP_ROWS]
    ]
    requests = refused_requests(refused, window, start, end) if refused is not None else [0] * buckets
    labels = [(start + timedelta(seconds=i * window.bucket_seconds)).strftime("%Y-%m-%d %H:%M") for i in range(buckets)]
    return {
        "window": {
            "key": window.key,
            "label": window.label,
            "start": start.isoformat(),
            "end": end.isoformat(),
            # as the admin writes a time elsewhere (the call log's list, the chart labels), UTC
            "start_label": start.strftime(LABEL_FORMAT),
            "end_label": end.strftime(LABEL_FORMAT),
            "bucket_seconds": window.bucket_seconds,
        },
        "labels": labels,
        "by_instance": _top_series(by_instance, instance_names, buckets),
        "by_tool": _top_series(by_tool, {}, buckets),
        "top_tools": top_tools,
        "top_errors": top_errors,
        "refusals": {
            "budget": budget,
            "rate_limited": rate_limited,
            "requests": requests,
            "budget_total": sum(budget),
            "rate_limited_total": sum(rate_limited),
            "requests_total": sum(requests),
        },
        "total": {
            "calls": total_calls,
            "errors": total_errors,
            "error_rate": round(100 * total_errors / total_calls, 1) if total_calls else 0.0,
            "p95_ms": p95_bound(all_histogram),
        },
    }
