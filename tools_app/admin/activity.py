"""The activity page: /admin/activity/, charts of the call log for every user who may view it.

An owner sees its own instances and calls; a superuser sees everyone's. The numbers come from
tools_app.activity (bounded GROUP BY statements over one time window); the charts are drawn by Chart.js,
served from toolhub's own static files (toolhub/vendor/chartjs, no CDN), with the page's data in a JSON
script element (the Content-Security-Policy allows no inline script).
"""

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse

from tools_app import activity, services
from tools_app.models import CallLog, McpInstance, RefusalCount

__all__ = ["activity_page", "can_view_activity"]


def can_view_activity(user) -> bool:
    """Who may open the page: whoever may view the call log (an owner in `toolhub users`, a superuser)."""
    return bool(user.is_active and user.is_staff and user.has_perm("tools_app.view_calllog"))


def activity_page(request: HttpRequest) -> HttpResponse:
    """Reached through admin.site.admin_view (staff login); 403 without the call log's view permission.
    ?window= one of activity.WINDOWS (default 24h), ?instance= the id of an instance the user may see."""
    if not can_view_activity(request.user):
        raise PermissionDenied
    errors = []
    window_key = request.GET.get("window") or activity.DEFAULT_WINDOW
    window = activity.WINDOWS.get(window_key)
    if window is None:
        errors.append(f"Unknown window {window_key!r}: choose one of {', '.join(activity.WINDOWS)}.")
        window = activity.WINDOWS[activity.DEFAULT_WINDOW]
    instances = list(McpInstance.objects.for_user(request.user).order_by("name", "pk").values("pk", "name", "slug"))
    calls = CallLog.objects.for_user(request.user)
    refused = RefusalCount.objects.for_user(request.user)
    services.refusals.flush()  # what this process counted and has not written yet
    selected = None
    raw_instance = request.GET.get("instance") or ""
    if raw_instance:
        selected = next((item for item in instances if str(item["pk"]) == raw_instance), None)
        if selected is None:
            # Another owner's instance behaves as absent (SPEC §2): the same words as a missing one.
            errors.append(f"No MCP instance with id {raw_instance!r}: showing all your instances.")
        else:
            calls = calls.filter(mcp_instance_id=selected["pk"])
            refused = refused.filter(mcp_instance_id=selected["pk"])
    data = activity.activity(calls, window, refused=refused)
    context = {
        **admin.site.each_context(request),
        "title": "Activity",
        "data": data,
        "windows": list(activity.WINDOWS.values()),
        "window": window,
        "instances": instances,
        "selected": selected,
        "errors": errors,
        "calls_url": reverse("admin:tools_app_calllog_changelist"),
        "budget_codes": activity.BUDGET_CODES,
        "rate_limit_codes": activity.RATE_LIMIT_CODES,
        "top_series": activity.TOP_SERIES,
    }
    return TemplateResponse(request, "admin/tools_app/activity/page.html", context)
