"""What mcp_app plugs into tools_app at start-up (STYLE: tools_app never imports mcp_app).

The recorder writing the CallLog row of API and admin calls (tools_app.calls) and the tool pages'
bound-instances and call-statistics panel (tools_app.admin.register_tool_panel).
"""

from datetime import UTC, datetime

import pytest
from django.urls import reverse

from mcp_app.admin import tool_mcp_panel
from mcp_app.models import CallLog
from mcp_app.recording import log_finished_call
from tools_app import calls
from tools_app.admin import ToolAdmin
from tools_app.calls import FinishedCall, record_call

pytestmark = pytest.mark.django_db


def test_mcp_app_registers_its_recorder_and_tool_panel_once():
    """After start-up (McpAppConfig.ready, mcp_app.admin) each hook is registered exactly once."""
    # then
    assert calls._recorders.count(log_finished_call) == 1
    assert ToolAdmin.panel_providers.count(tool_mcp_panel) == 1


def test_recorded_call_becomes_a_call_log_row(owner, table, make_tool):
    """record_call with mcp_app's recorder: one CallLog row with the call's fields, no instance, no key."""
    # given
    tool = make_tool(owner, table, name="orders_query")
    at = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)
    call = FinishedCall(
        tool=tool,
        source="admin",
        ok=False,
        duration_ms=12.34567,
        error_code="E" * 50,
        error_message="m" * 3000,
        at=at,
    )
    # when
    record_call(call)
    # then
    row = CallLog.objects.get()
    assert (
        row.tool_id,
        row.tool_name,
        row.owner_id,
        row.mcp_instance_id,
        row.api_key_id,
        row.source,
        row.status,
        row.error_code,
        row.error_message,
        row.duration_ms,
        row.created_at,
    ) == (tool.pk, "orders_query", owner.pk, None, None, "admin", "error", "E" * 40, "m" * 3000, 12.346, at)
    tool.refresh_from_db()
    assert tool.use_count == 1


def test_successful_call_has_no_error_fields(owner, table, make_tool):
    """An ok call is logged with status "ok" and empty error fields."""
    # given
    tool = make_tool(owner, table)
    # when
    record_call(FinishedCall(tool=tool, source="api", ok=True, duration_ms=0.5))
    # then
    assert list(CallLog.objects.values_list("source", "status", "error_code", "error_message", "duration_ms")) == [
        ("api", "ok", "", "", 0.5)
    ]


def test_tool_panel_lists_bindings_and_stats_of_the_callers_calls_only(
    rf, owner, other_user, table, make_tool, make_instance, bind
):
    """The panel: the tool's bindings by instance name, statistics over the viewer's calls, a filtered log link."""
    # given
    tool = make_tool(owner, table, name="orders_query")
    bind(make_instance(owner, slug="zeta", name="Zeta"), tool, name_override="zeta_query")
    bind(make_instance(owner, slug="alpha", name="Alpha"), tool, enabled=False)
    for duration, status in ((10.0, "ok"), (20.0, "ok"), (40.0, "error")):
        CallLog.objects.create(owner=owner, tool=tool, tool_name=tool.name, status=status, duration_ms=duration)
    request = rf.get("/")
    # when
    request.user = owner
    mine = tool_mcp_panel(request, tool)
    request.user = other_user
    theirs = tool_mcp_panel(request, tool)
    # then
    assert mine.template == "admin/mcp_app/_tool_panels.html"
    assert [(b["instance"].name, b["name"], b["enabled"]) for b in mine.context["tool_bindings"]] == [
        ("Alpha", "orders_query", False),
        ("Zeta", "zeta_query", True),
    ]
    stats = mine.context["tool_stats"]
    assert (stats["count"], stats["errors"], stats["error_rate"], stats["p50_ms"], stats["p95_ms"]) == (
        3,
        1,
        33.3,
        20.0,
        40.0,
    )
    assert mine.context["tool_stats_window"] == {"size": 10_000, "truncated": False, "calls": 3}
    assert mine.context["tool_calls_url"] == reverse("admin:mcp_app_calllog_changelist") + f"?tool__id__exact={tool.pk}"
    assert theirs.context["tool_stats"]["count"] == 0
