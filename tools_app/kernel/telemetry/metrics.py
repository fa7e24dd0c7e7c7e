"""The metrics (prometheus_client): names, labels and the functions that count; docs/operations.md lists them."""

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client import multiprocess as prometheus_multiprocess

from tools_app.kernel.limits import METRICS_MAX_FIELD_LABEL_CHARS, METRICS_MAX_FIELD_LABELS
from tools_app.kernel.telemetry import context
from tools_app.kernel.telemetry.context import REQUEST, emit
from tools_app.kernel.telemetry.tracing import span

STARTED = time.time()  # when this process began counting

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
SIZE_BUCKETS = (100, 1_000, 10_000, 40_000, 100_000, 1_000_000, 10_000_000)

TOOL_CALLS = Counter(
    "toolhub_tool_calls",
    "Tool calls by instance (slug; empty off MCP), tool type, surface and outcome (ok or the error code).",
    ["instance", "tool_type", "surface", "outcome"],
)
CALL_DURATION = Histogram(
    "toolhub_tool_call_duration_seconds",
    "Duration of tool calls through the pipeline, by instance, tool type and surface.",
    ["instance", "tool_type", "surface"],
    buckets=LATENCY_BUCKETS,
)
RESULT_BYTES = Histogram(
    "toolhub_tool_result_bytes",
    "Size of successful tool results as compact JSON (bytes), by tool type and surface.",
    ["tool_type", "surface"],
    buckets=SIZE_BUCKETS,
)
BUDGET_REFUSALS = Counter(
    "toolhub_budget_refusals",
    "Calls stopped over their evaluation budget (QUERY_TOO_EXPENSIVE), by instance, tool type and surface.",
    ["instance", "tool_type", "surface"],
)
RATE_LIMIT_REFUSALS = Counter(
    "toolhub_rate_limit_refusals",
    "Requests and calls refused by a rate or concurrency limit (RATE_LIMITED), by scope.",
    ["scope"],
)
AUTH_FAILURES = Counter(
    "toolhub_auth_failures",
    "Refused credentials: an MCP key, an API token, a login, a metrics token; by surface.",
    ["surface"],
)
SEARCH_DURATION = Histogram(
    "toolhub_search_duration_seconds",
    "Registry search latency by method.",
    ["method"],
    buckets=LATENCY_BUCKETS,
)
TABLE_WRITE_DURATION = Histogram(
    "toolhub_table_write_duration_seconds",
    "Duration of a table write (read, change and save under the row lock).",
    buckets=LATENCY_BUCKETS,
)
SLOW_QUERIES = Counter(
    "toolhub_slow_queries",
    "Table queries answered in SQL over TOOLHUB_SLOW_QUERY_MS that filter or sort on a record field the table does"
    " not declare in indexed_fields, by field (each such field once per query).",
    ["field"],
)
INDEX_BUILD_FAILURES = Counter(
    "toolhub_index_builds_failed",
    "Record index builds or drops that failed (tools_app.services.table_indexes); the next sync retries them.",
)
DB_POOL = Gauge(
    "toolhub_db_pool_connections",
    "PostgreSQL connection pool of each worker (summed over live workers): size, idle (available), waiting.",
    ["state"],
    multiprocess_mode="livesum",
)

# Bounded label values: anything else is reported as "other".
SEARCH_METHODS = frozenset({"bm25", "regex", "embedding", "hybrid"})
AUTH_SURFACES = frozenset({"mcp", "api", "login", "metrics"})


def _bounded(value: str | None, allowed: frozenset[str]) -> str:
    return value if value in allowed else "other"


def metrics_registry() -> CollectorRegistry:
    """The registry /metrics exposes: every worker's numbers in multiprocess mode, this process's otherwise."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        prometheus_multiprocess.MultiProcessCollector(registry)
        return registry
    from prometheus_client import REGISTRY

    return REGISTRY


# The labelled children of one (instance, tool type, surface, outcome): looked up once, not per call
# (prometheus_client's labels() validates and locks each time). Bounded: cleared when it grows past the limit.
_call_children: dict[tuple[str, str, str, str], tuple[Any, Any, Any]] = {}
MAX_CHILDREN = 10_000


def _children_of(key: tuple[str, str, str, str]) -> tuple[Any, Any, Any]:
    instance, kind, surface, code = key
    children = (
        TOOL_CALLS.labels(instance, kind, surface, code),
        CALL_DURATION.labels(instance, kind, surface),
        RESULT_BYTES.labels(kind, surface),
    )
    if len(_call_children) >= MAX_CHILDREN:
        _call_children.clear()
    _call_children[key] = children
    return children


def call_finished(
    *, surface: str, instance: str, tool_type: str | None, name: str, outcome: Any, user_id: int | None,
    api_key_id: int | None,
) -> None:  # fmt: skip
    """Count one finished call (the pipeline's only report): outcome, duration, result size, refusals;
    and its JSON log line when those are on. `outcome` is a tools_app.execution.pipeline.CallOutcome."""
    error = outcome.error
    code = "ok" if error is None else str(error.code)
    kind = tool_type or ""
    key = (instance, kind, surface, code)
    children = _call_children.get(key)
    if children is None:
        children = _children_of(key)
    calls, duration, sizes = children
    calls.inc()
    duration.observe(outcome.duration_ms / 1000)
    if error is None:
        text = outcome._text
        if text is not None:
            sizes.observe(len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass")))
    elif code == "QUERY_TOO_EXPENSIVE":
        BUDGET_REFUSALS.labels(instance, kind, surface).inc()
    if context.json_logs_on:
        current = REQUEST.get()
        emit(
            context.calls_logger,
            {
                "event": "tool_call",
                "request_id": current.id if current is not None else None,
                "surface": surface,
                "user_id": user_id,
                "api_key_id": api_key_id,
                "instance": instance or None,
                "tool": name[:64],
                "tool_type": kind or None,
                "outcome": code,
                "duration_ms": round(outcome.duration_ms, 3),
            },
        )


_field_labels: set[str] = set()


def slow_query(field: str) -> None:
    """Count one slow query that read the unindexed record field `field`."""
    label = field[:METRICS_MAX_FIELD_LABEL_CHARS]
    if label not in _field_labels:
        if len(_field_labels) >= METRICS_MAX_FIELD_LABELS:
            label = "other"
        else:
            _field_labels.add(label)
    SLOW_QUERIES.labels(label).inc()


def index_build_failed() -> None:
    INDEX_BUILD_FAILURES.inc()


def rate_limited(scope: str) -> None:
    """A request or call refused RATE_LIMITED; `scope` is a rate scope (tools_app.kernel.rate_limits) or a
    concurrency scope (`concurrent_api_key`, `concurrent_user`)."""
    RATE_LIMIT_REFUSALS.labels(scope).inc()


def auth_failed(surface: str) -> None:
    """Refused credentials on `surface` (mcp, api, login, metrics)."""
    AUTH_FAILURES.labels(_bounded(surface, AUTH_SURFACES)).inc()


@contextmanager
def search_timer(method: str) -> Iterator[None]:
    """Time one registry search (`method` already validated)."""
    started = time.perf_counter()
    with span("toolhub.search", {"toolhub.search.method": method}):
        try:
            yield
        finally:
            SEARCH_DURATION.labels(_bounded(method, SEARCH_METHODS)).observe(time.perf_counter() - started)


@contextmanager
def table_write_timer() -> Iterator[None]:
    started = time.perf_counter()
    with span("toolhub.table_write"):
        try:
            yield
        finally:
            TABLE_WRITE_DURATION.observe(time.perf_counter() - started)


def update_pool_gauges() -> dict[str, int] | None:
    """Read this worker's PostgreSQL pool (None without one: SQLite, or DATABASE_POOL_MAX_SIZE=0) into the
    pool gauge; returns what it read."""
    from django.db import connection

    pool = getattr(connection, "pool", None) if connection.vendor == "postgresql" else None
    if pool is None:
        return None
    stats = pool.get_stats()
    numbers = {
        "size": int(stats.get("pool_size", 0)),
        "available": int(stats.get("pool_available", 0)),
        "waiting": int(stats.get("requests_waiting", 0)),
    }
    for state, value in numbers.items():
        DB_POOL.labels(state).set(value)
    return numbers
