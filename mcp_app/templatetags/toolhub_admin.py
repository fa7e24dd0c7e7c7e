"""Template tags for the admin: the first-run dashboard on the admin index and the demo-login hint (issue 6).

They live in mcp_app because the dashboard counts both apps' objects (tables and tools, MCP instances and
calls) and mcp_app is the app that builds on tools_app (STYLE: tools_app never imports mcp_app). The
library keeps its name, so templates/admin/*.html load it with `{% load toolhub_admin %}`.
"""

from datetime import timedelta

from django import template
from django.urls import reverse
from django.utils import timezone

from tools_app.models import Table, Tool

from ..models import CallLog, CallStatus, McpInstance

register = template.Library()


@register.inclusion_tag("admin/toolhub_dashboard.html", takes_context=True)
def toolhub_dashboard(context):
    """What the user owns, its endpoints, and the next step to take."""
    request = context["request"]
    user = request.user
    tables = Table.objects.for_user(user)
    tools = Tool.objects.for_user(user)
    instances = list(McpInstance.objects.for_user(user).order_by("name")[:5])
    since = timezone.now() - timedelta(hours=24)
    calls = CallLog.objects.for_user(user).filter(created_at__gte=since)
    counts = {
        "tables": tables.count(),
        "tools": tools.count(),
        "instances": McpInstance.objects.for_user(user).count(),
        "calls": calls.count(),
        "errors": calls.filter(status=CallStatus.ERROR).count(),
    }
    first_tool = tools.exclude(type="external").order_by("name").first()
    steps = []
    if not counts["tables"]:
        steps.append(("Add a table: paste a JSON document (an array of records works best).", "tools_app_table_add"))
    if not counts["tools"]:
        steps.append(('Add a tool on the table, e.g. a query_data tool with json_path "".', "tools_app_tool_add"))
    if not counts["instances"]:
        steps.append(("Create an MCP instance and bind your tools to it.", "mcp_app_mcpinstance_add"))
    return {
        "counts": counts,
        "instances": [
            {
                "name": instance.name,
                "path": instance.endpoint_path,
                "enabled": instance.enabled,
                "url": reverse("admin:mcp_app_mcpinstance_change", args=[instance.pk]),
                "bindings": instance.bindings.filter(enabled=True).count(),
            }
            for instance in instances
        ],
        "steps": [{"text": text, "url": reverse(f"admin:{name}")} for text, name in steps],
        "try_url": reverse("admin:tools_app_tool_try", args=[first_tool.pk]) if first_tool else None,
        "try_name": first_tool.name if first_tool else None,
        "calls_url": reverse("admin:mcp_app_calllog_changelist"),
    }


_demo_login_checked: dict[str, bool] = {}


@register.inclusion_tag("admin/toolhub_demo_login.html")
def toolhub_demo_login():
    """First run (issue 6): in development, say how to log in when the demo user still has its default password."""
    import os

    from django.conf import settings
    from django.contrib.auth import get_user_model

    from ..management.commands.seed_demo import DEMO_PASSWORD, DEMO_USERNAME

    development = settings.DEBUG or os.environ.get("TOOLHUB_DEV", "").strip().lower() in {"1", "true", "yes", "on"}
    if not development:
        return {"show": False}
    user = get_user_model().objects.filter(username=DEMO_USERNAME, is_active=True).first()
    if user is None:
        return {"show": False}
    # Checking a password costs a slow hash: remember the answer per stored hash.
    if user.password not in _demo_login_checked:
        _demo_login_checked[user.password] = user.check_password(DEMO_PASSWORD)
    return {"show": _demo_login_checked[user.password], "username": DEMO_USERNAME, "password": DEMO_PASSWORD}
