"""OpenTelemetry spans: on only after `setup_tracing` (OTEL_EXPORTER_OTLP_ENDPOINT) or `enable_tracing`."""

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

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
    """The execute wrapper for a request's database work (toolhub.observability), or None when tracing is off."""
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
