"""Recording a finished tool call made outside MCP: the API's call endpoint and the admin's try-it.

SPEC §2.2 and §4.4: every call bumps the tool's use count and leaves a call-log row. The call log
belongs to mcp_app, and tools_app never imports mcp_app (STYLE: dependencies point one way), so the
dependency is inverted: this module defines the record of a finished call and the one function both
surfaces call, `record_call`, which bumps the use count (services.tool_use_record) and hands the record
to the recorders registered at start-up (mcp_app registers the one writing the CallLog row in its
AppConfig.ready()).

What belongs here: FinishedCall, record_call, register_recorder/unregister_recorder. Nothing that
knows a recorder's storage, and no DRF or admin (API and admin import this module, not the reverse).
Calls over MCP are recorded by mcp_app.recording, in batches, and do not pass through here.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from django.db import transaction
from django.utils import timezone

from . import services
from .models import Tool

logger = logging.getLogger(__name__)

__all__ = ["CallSource", "FinishedCall", "Recorder", "record_call", "register_recorder", "unregister_recorder"]

CallSource = Literal["api", "admin"]


@dataclass(frozen=True, slots=True)
class FinishedCall:
    """One tool call that has ended, successfully or not."""

    tool: Tool
    source: CallSource
    ok: bool
    duration_ms: float
    error_code: str = ""  # the ToolError code, or the surface's code for an unexpected failure; "" if ok
    error_message: str = ""
    at: datetime = field(default_factory=timezone.now)  # when the record was made, i.e. when the call ended


Recorder = Callable[[FinishedCall], None]

_recorders: list[Recorder] = []


def register_recorder(recorder: Recorder) -> None:
    """Have `recorder` receive every finished call, after those registered before it. Registering twice is a no-op."""
    if recorder not in _recorders:
        _recorders.append(recorder)


def unregister_recorder(recorder: Recorder) -> None:
    if recorder in _recorders:
        _recorders.remove(recorder)


def record_call(call: FinishedCall) -> None:
    """Bump the tool's use count, then pass `call` to each recorder. Never raises.

    The call's own outcome matters more than its bookkeeping: a failure here is logged and the caller's
    response is unchanged; one failing recorder does not keep the others from running. Each step runs in
    its own atomic block, so a database error in one leaves an enclosing transaction usable.
    """
    try:
        with transaction.atomic():
            services.tool_use_record(tool_id=call.tool.pk)
    except Exception:
        logger.exception("Could not bump the use count of tool %s after a call from the %s", call.tool.pk, call.source)
    for recorder in tuple(_recorders):
        try:
            with transaction.atomic():
                recorder(call)
        except Exception:
            logger.exception(
                "Could not record the %s call of tool %s (recorder %r)", call.source, call.tool.pk, recorder
            )
