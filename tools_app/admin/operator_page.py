"""The operator's page: /admin/operations/, for superusers only.

Versions, the database and its readiness, Redis, the connection pool, and the calls: calls per minute,
error rate, the slowest tools (instance and tool type) and the most frequent refusals. The call numbers
are read from the same metrics registry as /metrics (tools_app.kernel.telemetry.summary), so the page and a
Prometheus scrape never disagree.
"""

import os

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from tools_app.kernel import health, telemetry

__all__ = ["operations_page"]


def operations_page(request: HttpRequest) -> HttpResponse:
    """Reached through admin.site.admin_view (staff login); anyone but a superuser gets 403."""
    if not request.user.is_superuser:
        raise PermissionDenied
    context = {
        **admin.site.each_context(request),
        "title": "Operations",
        "status": health.status(),
        "calls": telemetry.summary(),
        "tracing": telemetry.tracing_enabled(),
        "json_logs": telemetry.json_logs(),
        "multiprocess": bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR")),
    }
    return TemplateResponse(request, "admin/tools_app/operations/page.html", context)
