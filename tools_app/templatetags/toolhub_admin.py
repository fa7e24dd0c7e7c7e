"""Template tags for the admin: the first-run dashboard on the admin index and the demo-login hint.

Part of the admin interface (beside tools_app.admin): the dashboard counts tables and tools, MCP
instances and calls. Templates load the library with `{% load toolhub_admin %}`.
"""

from datetime import timedelta

from django import template
from django.contrib import admin
from django.contrib.admin.models import ADDITION, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.db.models import Case, IntegerField, Value, When
from django.urls import reverse
from django.utils import timezone

from tools_app.choices import ToolType
from tools_app.kernel.errors import ErrorCode, ToolhubError
from tools_app.management.commands.seed_demo import DEMO_PASSWORD, DEMO_USERNAME, is_development
from tools_app.models import ApiToken, CallLog, CallStatus, McpInstance, Table, Tool

register = template.Library()


# The first tool the dashboard suggests trying: a read tool (it changes nothing), the most telling type first.
TRY_FIRST = [ToolType.QUERY_DATA, ToolType.PREVIEW, ToolType.GET_DATA_SCHEMA, ToolType.SELECT, ToolType.GET_ALL_DATA]
NO_ACCESS_NOTICE = (
    "Your account cannot manage toolhub objects yet: an administrator adds it to the group "
    "“toolhub users” (see “Users” in the README)."
)


def _can(request, model, action: str, obj=None) -> bool:
    """Whether the admin would let the user `action` ("add", "view", "change") `obj` (or any `model`)."""
    model_admin = admin.site._registry.get(model)
    if model_admin is None:
        return False
    if action == "add":
        return model_admin.has_add_permission(request)
    return getattr(model_admin, f"has_{action}_permission")(request, obj)


@register.inclusion_tag("admin/toolhub_dashboard.html", takes_context=True)
def toolhub_dashboard(context):
    """What the user owns, its endpoints, and the next step to take: only links the user may follow."""
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
    try_order = Case(*[When(type=kind, then=Value(i)) for i, kind in enumerate(TRY_FIRST)], output_field=IntegerField())
    first_tool = tools.filter(type__in=TRY_FIRST).annotate(try_order=try_order).order_by("try_order", "name").first()
    steps = []
    if not counts["tables"] and _can(request, Table, "add"):
        steps.append(("Add a table: paste a JSON document (an array of records works best).", "tools_app_table_add"))
    if not counts["tools"] and _can(request, Tool, "add"):
        steps.append(
            (
                "Add a tool on the table, e.g. a query_data tool; leave json_path empty to mount the whole document.",
                "tools_app_tool_add",
            )
        )
    if not counts["instances"] and _can(request, McpInstance, "add"):
        steps.append(("Create an MCP instance and bind your tools to it.", "tools_app_mcpinstance_add"))
    can_try = first_tool is not None and _can(request, Tool, "change", first_tool)
    models = (Table, Tool, McpInstance, CallLog)
    return {
        "counts": counts,
        "notice": "" if any(_can(request, model, "view") for model in models) else NO_ACCESS_NOTICE,
        "instances": [
            {
                "name": instance.name,
                "path": instance.endpoint_path,
                "enabled": instance.enabled,
                "url": reverse("admin:tools_app_mcpinstance_change", args=[instance.pk])
                if _can(request, McpInstance, "view", instance)
                else None,
                "can_add_key": _can(request, McpInstance, "change", instance),
                "bindings": instance.bindings.filter(enabled=True).count(),
            }
            for instance in instances
        ],
        "steps": [{"text": text, "url": reverse(f"admin:{name}")} for text, name in steps],
        "try_url": reverse("admin:tools_app_tool_try", args=[first_tool.pk]) if can_try else None,
        "try_name": first_tool.name if can_try else None,
        "calls_url": reverse("admin:tools_app_calllog_changelist") if _can(request, CallLog, "view") else None,
    }


_demo_login_checked: dict[str, bool] = {}


@register.inclusion_tag("admin/toolhub_demo_login.html")
def toolhub_demo_login():
    """First run: in development, say how to log in when the demo user still has its default password."""
    if not is_development():
        return {"show": False}
    user = get_user_model().objects.filter(username=DEMO_USERNAME, is_active=True).first()
    if user is None:
        return {"show": False}
    # Checking a password costs a slow hash: remember the answer per stored hash.
    if user.password not in _demo_login_checked:
        try:
            _demo_login_checked[user.password] = user.check_password(DEMO_PASSWORD)
        except ToolhubError as error:
            if error.code != ErrorCode.RATE_LIMITED:
                raise
            # Every password-hashing slot is busy (a login burst): the page shows without the hint this time
            # rather than answering 429, and the next page asks again.
            return {"show": False}
    return {"show": _demo_login_checked[user.password], "username": DEMO_USERNAME, "password": DEMO_PASSWORD}


@register.simple_tag
def toolhub_recent_actions(user, limit: int = 10):
    """The admin index's "Recent actions": the user's history (LogEntry) without the tokens that API logins
    issue. Each `POST /api/auth/token/` records one (the token's own history keeps it), and a script that logs
    in would push every action of the user's out of the list."""
    if not getattr(user, "pk", None):
        return []
    tokens = ContentType.objects.get_for_model(ApiToken)
    entries = LogEntry.objects.filter(user=user).exclude(content_type=tokens, action_flag=ADDITION)
    return list(entries.select_related("content_type", "user")[:limit])
