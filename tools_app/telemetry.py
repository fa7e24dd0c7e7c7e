"""Operations telemetry (issue 18; docs/operations.md): metrics, traces, request ids and structured logs.

One home for what an operator measures. The call pipeline (tools_app.calls.run_tool_call) reports each
finished call here once (`call_finished`); the rate rule, the budgets, the registry search, the table
writes and the surfaces' authentication report their own events through the small functions below.

- Metrics: prometheus_client, in the Prometheus text format at /metrics (toolhub.operations). With
  PROMETHEUS_MULTIPROC_DIR set in the environment before the server starts, every worker writes its
  numbers to files there and /metrics adds them up (prometheus_client's multiprocess mode). Label values
  come from bounded sets: instance slugs, tool types, surfaces, error codes, rate scopes, search methods.
- Traces: OpenTelemetry spans when tracing is on (OTEL_EXPORTER_OTLP_ENDPOINT set: `setup_tracing` at
  start-up; a test passes its own provider to `enable_tracing`). Off, `span()` hands back one shared
  do-nothing context manager: no SDK, no tracer, no allocation per call.
- Requests: `RequestInfo` in a context variable (its id is the X-Request-ID), filled in by the surfaces
  (toolhub.operations for Django, mcp_app.transport for MCP) and read by the call log line.
- Logs: with TOOLHUB_JSON_LOGS on, one JSON line per request (logger `toolhub.requests`) and per tool call
  (logger `toolhub.calls`): time, request id, user or key id, instance, tool, surface, outcome, duration.
  Never arguments, results or credentials.

Domain module: no DRF, no admin, no MCP SDK.
"""

import contextvars
import json
import logging
import os
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client import multiprocess as prometheus_multiprocess

__all__ = [
    "REQUEST",
    "RequestInfo",
    "auth_failed",
    "call_finished",
    "call_span",
    "enable_tracing",
    "error_request_id",
    "json_logs",
    "log_request",
    "metrics_registry",
    "new_request_id",
    "rate_limited",
    "request_id",
    "search_timer",
    "setup_tracing",
    "span",
    "summary",
    "remember_totals",
    "tracer",
    "database_span_wrapper",
    "table_write_timer",
    "tracing_enabled",
    "update_pool_gauges",
]

requests_logger = logging.getLogger("toolhub.requests")
calls_logger = logging.getLogger("toolhub.calls")

STARTED = time.time()

#
# Metrics. Names and labels are documented in docs/operations.md; a test reads them from /metrics.
#

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


def call_finished(
    *, surface: str, instance: str, tool_type: str | None, name: str, outcome: Any, user_id: int | None,
    api_key_id: int | None,
) -> None:  # fmt: skip
    """Count one finished call (the pipeline's only report): outcome, duration, result size, refusals;
    and its JSON log line when those are on. `outcome` is a tools_app.calls.CallOutcome."""
    error = outcome.error
    code = "ok" if error is None else str(error.code)
    kind = tool_type or ""
    seconds = outcome.duration_ms / 1000
    TOOL_CALLS.labels(instance, kind, surface, code).inc()
    CALL_DURATION.labels(instance, kind, surface).observe(seconds)
    if error is None:
        text = outcome._text
        if text is not None:
            RESULT_BYTES.labels(kind, surface).observe(
                len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
            )
    elif code == "QUERY_TOO_EXPENSIVE":
        BUDGET_REFUSALS.labels(instance, kind, surface).inc()
    if _json_logs:
        current = REQUEST.get()
        _emit(
            calls_logger,
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


def rate_limited(scope: str) -> None:
    """A request or call refused RATE_LIMITED; `scope` is a rate scope (tools_app.rate_limits) or a
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


#
# Requests: id, who, and the request log line
#

REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


@dataclass(slots=True)
class RequestInfo:
    id: str
    surface: str
    user_id: int | None = None
    api_key_id: int | None = None
    instance: str | None = None


REQUEST: contextvars.ContextVar[RequestInfo | None] = contextvars.ContextVar("toolhub_request", default=None)


def new_request_id(sent: str | None = None) -> str:
    """The request's id: the client's X-Request-ID when it is a short token of safe characters, else new."""
    if sent is not None and REQUEST_ID_RE.match(sent):
        return sent
    return uuid.uuid4().hex


def request_id() -> str | None:
    current = REQUEST.get()
    return current.id if current is not None else None


def error_request_id() -> str | None:
    """The id an error body carries as `request_id` (API error bodies, MCP error data), or None: when there
    is no request, or settings.TOOLHUB_REQUEST_ID_IN_ERRORS is off (the test suite's default, so that its
    exact comparisons of error bodies hold; the X-Request-ID header is always sent)."""
    current = REQUEST.get()
    if current is None:
        return None
    from django.conf import settings

    return current.id if getattr(settings, "TOOLHUB_REQUEST_ID_IN_ERRORS", True) else None


def log_request(info: RequestInfo, *, method: str, path: str, status: int, duration_ms: float) -> None:
    """The request's JSON log line (when TOOLHUB_JSON_LOGS is on). `path` is logged without its query."""
    if not _json_logs:
        return
    _emit(
        requests_logger,
        {
            "event": "request",
            "request_id": info.id,
            "surface": info.surface,
            "method": method[:16],
            "path": path[:200],
            "status": status,
            "user_id": info.user_id,
            "api_key_id": info.api_key_id,
            "instance": info.instance,
            "duration_ms": round(duration_ms, 3),
        },
    )


_json_logs = False


def json_logs(on: bool | None = None) -> bool:
    """Whether the JSON log lines are written (settings.TOOLHUB_JSON_LOGS, read at start-up by the app
    config); `on` changes it (tests)."""
    global _json_logs
    if on is not None:
        _json_logs = on
    return _json_logs


def _emit(logger: logging.Logger, fields: dict[str, Any]) -> None:
    fields = {"time": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"), **fields}
    logger.info(json.dumps(fields, separators=(",", ":"), ensure_ascii=False, default=str))


#
# Traces
#

_NO_SPAN = nullcontext()
_tracer: Any = None
_tracing_lock = threading.Lock()


def tracing_enabled() -> bool:
    return _tracer is not None


def span(name: str, attributes: dict[str, Any] | None = None) -> Any:
    """A span as the current one while the block runs, or a shared do-nothing context when tracing is off."""
    tracer = _tracer
    if tracer is None:
        return _NO_SPAN
    return tracer.start_as_current_span(name, attributes=attributes)


@contextmanager
def _traced_call(tracer: Any, attributes: dict[str, Any]) -> Iterator[Any]:
    from django.db import connection

    with tracer.start_as_current_span("toolhub.call", attributes=attributes) as current:
        with connection.execute_wrapper(_database_span):
            yield current


def call_span(*, surface: str, tool: str, instance: str) -> Any:
    """The pipeline's span of one call, with a span for each database statement it runs."""
    tracer = _tracer
    if tracer is None:
        return _NO_SPAN
    attributes = {"toolhub.surface": surface, "toolhub.tool": tool[:64], "toolhub.instance": instance}
    return _traced_call(tracer, attributes)


def _database_span(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
    """A Django execute wrapper: one span per statement, named by its first word (never its parameters)."""
    tracer = _tracer
    if tracer is None:
        return execute(sql, params, many, context)
    verb = sql.lstrip().split(" ", 1)[0].upper()[:16] if sql else "SQL"
    vendor = context["connection"].vendor
    with tracer.start_as_current_span(f"db {verb}", attributes={"db.system": vendor, "db.operation": verb}):
        return execute(sql, params, many, context)


def database_span_wrapper() -> Any:
    """The execute wrapper for a request's database work (toolhub.operations), or None when tracing is off."""
    return _database_span if _tracer is not None else None


def enable_tracing(provider: Any | None) -> None:
    """Trace with `provider` (an OpenTelemetry SDK TracerProvider), which becomes the global one so that the
    MCP SDK's spans join the same traces; None turns toolhub's spans off again (tests)."""
    global _tracer
    with _tracing_lock:
        if provider is None:
            _tracer = None
            return
        from opentelemetry import trace

        if not isinstance(trace.get_tracer_provider(), type(provider)):
            trace.set_tracer_provider(provider)
        _tracer = provider.get_tracer("toolhub")


def setup_tracing() -> bool:
    """At start-up: trace to OTLP over HTTP when OTEL_EXPORTER_OTLP_ENDPOINT (or the traces-only
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set; the other standard OTEL_* variables (service name,
    headers, sampler) are read by the OpenTelemetry SDK itself. Returns whether tracing is on."""
    if not (os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")):
        return False
    if _tracer is not None:
        return True
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "toolhub")})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    enable_tracing(provider)
    return True


def tracer() -> Any:
    """The tracer while tracing is on (None when off)."""
    return _tracer


#
# The operator's page (tools_app.admin.operations): the same numbers as /metrics, summed up
#

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
