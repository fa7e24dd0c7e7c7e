"""Recording MCP calls (SPEC §2.2, §4.4): use count, last used, a CallLog row per call, key last-used time.

A call only appends to an in-memory queue; a background thread (started by the ASGI lifespan) writes
the queue in batches: one bulk insert of call-log rows, one `F()` update per tool (`use_count + n`),
one update per key. So recording costs a call microseconds, not database round trips. The queue is
flushed at lifespan shutdown; `flush()` writes it at once (tests, management code). Without a running
thread (e.g. no lifespan), a call that finds the queue full flushes it itself, so nothing piles up.

Calls from the JSON API and the admin's try-it reach mcp_app through tools_app.calls (tools_app never
imports mcp_app): `log_finished_call` is the recorder McpAppConfig.ready() registers there; it writes
their CallLog row at once, with no instance and no key.
"""

import logging
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from django.db import close_old_connections, transaction
from django.db.models import F
from django.utils import timezone

from tools_app.calls import FinishedCall
from tools_app.models import Tool

from .models import ApiKey, CallLog, CallStatus

logger = logging.getLogger(__name__)

FLUSH_INTERVAL = 0.5  # seconds between background flushes
INLINE_FLUSH_AT = 200  # queued records that make a call flush inline when no thread runs
MAX_ERROR_MESSAGE = 2000


@dataclass(slots=True)
class CallRecord:
    instance_id: int
    owner_id: int
    tool_id: int | None
    tool_name: str
    api_key_id: int | None
    status: str
    duration_ms: float
    error_code: str = ""
    error_message: str = ""
    source: str = "mcp"
    bump_use: bool = True
    at: datetime = field(default_factory=timezone.now)  # when the call started


class Recorder:
    """Batches call records and key touches; thread-safe."""

    def __init__(self) -> None:
        self._calls: list[CallRecord] = []
        self._keys: dict[int, datetime] = {}
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- producers (called on the request's thread) --

    def record(self, record: CallRecord) -> None:
        with self._lock:
            self._calls.append(record)
            pending = len(self._calls)
        if pending >= INLINE_FLUSH_AT and not self.running:
            self.flush()

    def touch_key(self, api_key_id: int) -> None:
        with self._lock:
            self._keys[api_key_id] = timezone.now()

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._calls) + len(self._keys)

    # -- writing --

    def flush(self) -> int:
        """Write everything queued so far; return the number of call records written. Never raises."""
        with self._flush_lock:
            with self._lock:
                calls, self._calls = self._calls, []
                keys, self._keys = self._keys, {}
            if not calls and not keys:
                return 0
            try:
                self._write(calls, keys)
            except Exception:
                logger.exception("Could not record %d MCP call(s); they are dropped.", len(calls))
                return 0
            return len(calls)

    @staticmethod
    def _write(calls: list[CallRecord], keys: dict[int, datetime]) -> None:
        uses: dict[int, list] = defaultdict(lambda: [0, None])
        for call in calls:
            if call.tool_id is not None and call.bump_use:
                entry = uses[call.tool_id]
                entry[0] += 1
                entry[1] = call.at if entry[1] is None or call.at > entry[1] else entry[1]
        with transaction.atomic():
            CallLog.objects.bulk_create(
                [
                    CallLog(
                        mcp_instance_id=call.instance_id,
                        tool_id=call.tool_id,
                        tool_name=call.tool_name[:64],
                        api_key_id=call.api_key_id,
                        owner_id=call.owner_id,
                        source=call.source,
                        status=call.status,
                        error_code=call.error_code[:40],
                        error_message=call.error_message[:MAX_ERROR_MESSAGE],
                        duration_ms=round(call.duration_ms, 3),
                        created_at=call.at,  # when the call started, not this (later) write
                    )
                    for call in calls
                ]
            )
            for tool_id, (count, last) in uses.items():
                Tool.objects.filter(pk=tool_id).update(use_count=F("use_count") + count, last_used=last)
            for key_id, at in keys.items():
                ApiKey.objects.filter(pk=key_id).update(last_used_at=at)

    # -- background thread --

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self.running:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="toolhub-mcp-recorder", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and write what is left (call from a thread, not the event loop)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        close_old_connections()
        self.flush()

    def _loop(self) -> None:
        while not self._stop.wait(FLUSH_INTERVAL):
            close_old_connections()
            self.flush()
        close_old_connections()

    def clear(self) -> None:
        with self._lock:
            self._calls.clear()
            self._keys.clear()


recorder = Recorder()


def log_finished_call(call: FinishedCall) -> None:
    """The CallLog row of an API or admin call (SPEC §4.4); tools_app.calls has already bumped the use count."""
    CallLog.objects.create(
        mcp_instance=None,
        tool=call.tool,
        tool_name=call.tool.name[:64],
        owner_id=call.tool.owner_id,
        source=call.source,
        status=CallStatus.OK if call.ok else CallStatus.ERROR,
        error_code="" if call.ok else call.error_code[:40],
        error_message="" if call.ok else call.error_message,
        duration_ms=round(call.duration_ms, 3),
        created_at=call.at,
    )


__all__ = ["CallRecord", "CallStatus", "Recorder", "log_finished_call", "recorder"]
