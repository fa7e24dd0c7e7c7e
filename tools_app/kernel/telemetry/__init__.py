"""Operations telemetry (docs/operations.md): metrics, traces, request ids and structured logs.

One home for what an operator measures. The call pipeline (tools_app.execution.pipeline.run_tool_call) reports each
finished call here once (`call_finished`); the rate rule, the budgets, the registry search, the table
writes and the surfaces' authentication report their own events through the small functions below.

- Metrics: prometheus_client, in the Prometheus text format at /metrics (toolhub.observability). With
  PROMETHEUS_MULTIPROC_DIR set in the environment before the server starts, every worker writes its
  numbers to files there and /metrics adds them up (prometheus_client's multiprocess mode). Label values
  come from bounded sets: instance slugs, tool types, surfaces, error codes, rate scopes, search methods.
- Traces: OpenTelemetry spans when tracing is on (OTEL_EXPORTER_OTLP_ENDPOINT set: `setup_tracing` at
  start-up; a test passes its own provider to `enable_tracing`). Off, `span()` hands back one shared
  do-nothing context manager: no SDK, no tracer, no allocation per call.
- Requests: `RequestInfo` in a context variable (its id is the X-Request-ID), filled in by the surfaces
  (toolhub.observability for Django, mcp_app.transport for MCP) and read by the call log line.
- Logs: with TOOLHUB_JSON_LOGS on, one JSON line per request (logger `toolhub.requests`) and per tool call
  (logger `toolhub.calls`): time, request id, user or key id, instance, tool, surface, outcome, duration.
  Never arguments, results or credentials.

Domain module: no DRF, no admin, no MCP SDK.
"""

from tools_app.kernel.telemetry.context import (
    REQUEST,
    RequestInfo,
    error_request_id,
    json_logs,
    log_request,
    new_request_id,
    request_id,
)
from tools_app.kernel.telemetry.metrics import (
    auth_failed,
    call_finished,
    metrics_registry,
    rate_limited,
    search_timer,
    table_write_timer,
    update_pool_gauges,
)
from tools_app.kernel.telemetry.summary import remember_totals, summary
from tools_app.kernel.telemetry.tracing import (
    call_span,
    database_span_wrapper,
    enable_tracing,
    setup_tracing,
    span,
    tracer,
    tracing_enabled,
)

__all__ = [
    "REQUEST",
    "RequestInfo",
    "auth_failed",
    "call_finished",
    "call_span",
    "database_span_wrapper",
    "enable_tracing",
    "error_request_id",
    "json_logs",
    "log_request",
    "metrics_registry",
    "new_request_id",
    "rate_limited",
    "remember_totals",
    "request_id",
    "search_timer",
    "setup_tracing",
    "span",
    "summary",
    "table_write_timer",
    "tracer",
    "tracing_enabled",
    "update_pool_gauges",
]
