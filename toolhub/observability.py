"""What an operator runs toolhub with (docs/operations.md): health, readiness, metrics, and the
request middleware that gives every Django request its id, its span and its log line.

- GET /healthz: 200 {"status": "ok"} from the process alone (liveness: no database, no cache).
- GET /readyz: 200 when the database answers and every migration is applied; 503 naming what is not
  ready otherwise, within READY_TIMEOUT seconds even when the database does not answer at all.
- GET /metrics: the Prometheus text format, for a superuser's session or `Authorization: Bearer
  <TOOLHUB_METRICS_TOKEN>`; anything else 401 (no or wrong credentials) or 403 (a user who is not a
  superuser).

None of them names a version, a host or a setting. The MCP endpoint, which Django never sees, does the
same per request in mcp_app.transport.
"""

import hmac
import time
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_safe
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from tools_app.kernel import telemetry
from tools_app.kernel.health import readiness
from tools_app.kernel.limits import METRICS_TOKEN

__all__ = ["RequestMiddleware", "healthz", "metrics", "readyz"]


def _no_store(response: HttpResponse) -> HttpResponse:
    response["Cache-Control"] = "no-store"
    return response


@require_safe
def healthz(request: HttpRequest) -> HttpResponse:
    return _no_store(JsonResponse({"status": "ok"}))


@require_safe
def readyz(request: HttpRequest) -> HttpResponse:
    ready, checks = readiness()
    body: dict[str, Any] = {"status": "ok" if ready else "unavailable", "checks": checks}
    return _no_store(JsonResponse(body, status=200 if ready else 503))


#
# Metrics
#


def _refusal(status: int, code: str, message: str) -> HttpResponse:
    body: dict[str, Any] = {"error": code, "message": message}
    if (rid := telemetry.error_request_id()) is not None:
        body["request_id"] = rid
    response = JsonResponse(body, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
    return _no_store(response)


def metrics_access(request: HttpRequest) -> HttpResponse | None:
    """None when the request may read the metrics, else the refusal."""
    header = request.headers.get("Authorization", "")
    scheme, _, sent = header.partition(" ")
    if scheme.lower() == "bearer" and sent.strip():
        expected = METRICS_TOKEN.get()
        if expected and hmac.compare_digest(sent.strip().encode(), expected.encode()):
            return None
        telemetry.auth_failed("metrics")
        return _refusal(401, "AUTHENTICATION_FAILED", "Invalid metrics token.")
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        if user.is_active and user.is_superuser:
            return None
        return _refusal(403, "PERMISSION_DENIED", "Only superusers and the metrics token read /metrics.")
    return _refusal(401, "NOT_AUTHENTICATED", "Send Authorization: Bearer <TOOLHUB_METRICS_TOKEN>.")


@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    refused = metrics_access(request)
    if refused is not None:
        return refused
    telemetry.update_pool_gauges()
    telemetry.remember_totals()
    return _no_store(HttpResponse(generate_latest(telemetry.metrics_registry()), content_type=CONTENT_TYPE_LATEST))


#
# Every Django request: id, span, log line
#


def _surface(path: str) -> str:
    if path.startswith("/api/"):
        return "api"
    if path.startswith("/admin/"):
        return "admin"
    return "other"


class RequestMiddleware:
    """First in MIDDLEWARE: the request's id (a well-formed X-Request-ID from the client, else a new one),
    returned as X-Request-ID and put in error bodies; its span when tracing is on (continuing a
    `traceparent` header); its JSON log line when those are on."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        info = telemetry.RequestInfo(
            id=telemetry.new_request_id(request.headers.get("X-Request-ID")), surface=_surface(request.path)
        )
        token = telemetry.REQUEST.set(info)
        started = time.perf_counter()
        status = 500
        try:
            if telemetry.tracing_enabled():
                response = self._traced(request, info)
            else:
                response = self.get_response(request)
            status = response.status_code
            response["X-Request-ID"] = info.id
            return response
        finally:
            user = getattr(request, "user", None)
            if user is not None and getattr(user, "is_authenticated", False):
                info.user_id = user.pk
            telemetry.log_request(
                info,
                method=request.method or "",
                path=request.path,
                status=status,
                duration_ms=(time.perf_counter() - started) * 1000,
            )
            telemetry.REQUEST.reset(token)

    def _traced(self, request: HttpRequest, info: telemetry.RequestInfo) -> HttpResponse:
        from opentelemetry import propagate
        from opentelemetry.trace import SpanKind

        parent = propagate.extract({"traceparent": request.headers.get("traceparent", "")})
        tracer = telemetry.tracer()
        name = f"{request.method} {info.surface}"
        attributes = {"http.request.method": request.method or "", "toolhub.request_id": info.id}
        with tracer.start_as_current_span(name, context=parent, kind=SpanKind.SERVER, attributes=attributes) as span:
            wrapper = telemetry.database_span_wrapper()
            if wrapper is not None:
                with connections[DEFAULT_DB_ALIAS].execute_wrapper(wrapper):
                    response = self.get_response(request)
            else:
                response = self.get_response(request)
            span.set_attribute("http.response.status_code", response.status_code)
            return response
