"""The call log's detail page: one call as its client saw it (request, response excerpt, timing, caller, surface),
with a link that opens the tool's try-it form with the same arguments (docs/call-log.md).

What is shown was redacted and bounded when the call was recorded (tools_app.execution.call_details).
"""

import json
from typing import Any
from urllib.parse import urlencode

from django.template.response import TemplateResponse
from django.urls import reverse

from tools_app.models import CallLog, CallStatus, Tool

__all__ = ["call_detail_view", "try_it_link"]


def _pretty(text: str) -> str:
    return json.dumps(json.loads(text), indent=2, ensure_ascii=False) if text else ""


def try_it_link(request, call: CallLog) -> str | None:
    """The try-it page of the call's tool with the call's arguments filled in, when the tool is still there and
    the user may see it, and the arguments were recorded whole."""
    if call.tool_id is None or not call.arguments or call.arguments_truncated:
        return None
    tool = Tool.objects.for_user(request.user).filter(pk=call.tool_id).only("type").first()
    if tool is None or tool.is_external:
        return None
    return reverse("admin:tools_app_tool_try", args=[call.tool_id]) + "?" + urlencode({"arguments": call.arguments})


def call_detail_view(model_admin: Any, request, object_id: str) -> TemplateResponse:
    call: CallLog = model_admin.get_object_or_404(request, object_id)
    result = call.result_value
    context = model_admin.admin_context(
        request,
        title=f"Call of {call.tool_name}",
        original=call,
        call=call,
        ok=call.status == CallStatus.OK,
        arguments=_pretty(call.arguments),
        result=_pretty(call.result_excerpt) if call.status == CallStatus.OK else "",
        error_details=json.dumps(result.get("details"), indent=2, ensure_ascii=False)
        if isinstance(result, dict) and result.get("details")
        else "",
        has_redactions="[redacted]" in call.arguments or "[redacted]" in call.result_excerpt,
        try_it_url=try_it_link(request, call),
        tool_url=reverse("admin:tools_app_tool_change", args=[call.tool_id]) if call.tool_id else None,
        instance_url=reverse("admin:tools_app_mcpinstance_change", args=[call.mcp_instance_id])
        if call.mcp_instance_id
        else None,
        calls_url=reverse("admin:tools_app_calllog_changelist"),
        api_url=f"/api/calls/{call.pk}/",
        has_view_permission=True,
    )
    return TemplateResponse(request, "admin/tools_app/calllog/detail.html", context)
