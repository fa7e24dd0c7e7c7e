"""Recording MCP calls (SPEC §2.2, §4.4): use count, last used, a CallLog row per call, key last-used time.

A call only appends to an in-memory queue; a background thread (started by the ASGI lifespan) writes
the queue in batches: one bulk insert of call-log rows, one `F()` update per tool (`use_count + n`),
one update per key. So recording costs a call microseconds, not database round trips. The queue is
flushed at lifespan shutdown; `flush()` writes it at once (tests, management code). Without a running
thread (e.g. no lifespan), a call that finds the queue full flushes it itself, so nothing piles up.

A tool, instance, key or user deleted while its calls wait in the queue must not cost other calls their
records (SPEC §4.4 "every call is recorded"). The batch is written as above; only if the database refuses
it (a foreign key to a row deleted meanwhile) is it written again, after reading which of the rows it
refers to still exist (in the same transaction, under the lock a foreign-key check takes, so a delete in
progress is waited for, not seen half-way), as the foreign keys' on_delete says: a deleted tool or key
leaves the row with no tool or key (SET_NULL), a deleted instance or owner takes its rows with it
(CASCADE), a deleted tool's use count is gone with it. Should that fail too, the rows are written in ever
smaller pieces, so that one bad row costs only itself. The delete services lock the row they delete first,
so a batch that refers to it waits for the delete and then takes this path instead of making the delete
fail.

Calls from the JSON API and the admin's try-it reach mcp_app through tools_app.calls (tools_app never
imports mcp_app): `log_finished_call` is the recorder McpAppConfig.ready() registers there; it writes
their CallLog row at once, with no instance and no key.
"""

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime

from django.contrib.auth import get_user_model
from django.db import DatabaseError, DataError, IntegrityError, close_old_connections, transaction
from django.db.models import F
from django.utils import timezone

from tools_app.calls import FinishedCall
from tools_app.models import Tool
from tools_app.services import key_share

from .models import ApiKey, CallLog, CallStatus, McpInstance

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
        """Write everything queued so far; return the number of call-log rows written. Never raises."""
        with self._flush_lock:
            with self._lock:
                calls, self._calls = self._calls, []
                keys, self._keys = self._keys, {}
            if not calls and not keys:
                return 0
            try:
                return _write(calls, keys)
            except Exception:
                logger.exception("Could not record %d MCP call(s); they are dropped.", len(calls))
                return 0

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


Uses = dict[int, tuple[int, datetime]]  # tool id -> (calls to add to use_count, latest call time)


@dataclass(frozen=True, slots=True)
class _Live:
    """Which of the rows a batch refers to exist now."""

    tools: set[int]
    instances: set[int]
    keys: set[int]
    owners: set[int]


def _uses(calls: Iterable[CallRecord]) -> Uses:
    uses: Uses = {}
    for call in calls:
        if call.tool_id is not None and call.bump_use:
            count, last = uses.get(call.tool_id, (0, call.at))
            uses[call.tool_id] = (count + 1, max(last, call.at))
    return uses


def _row(call: CallRecord) -> CallLog:
    return CallLog(
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


def _save(calls: list[CallRecord], uses: Uses, keys: dict[int, datetime]) -> None:
    """One transaction: one bulk insert of call-log rows, one F() update per tool, one update per key.

    Tools and keys are updated in id order, the order in which the delete services lock several rows.
    The rows' foreign keys are checked at commit (KEY SHARE on the instances, tools, keys and owners they
    name). Binds lock only in modes compatible with all of this (services._lock_for_binding), so a batch
    and a bind never wait for each other.
    """
    with transaction.atomic():
        CallLog.objects.bulk_create([_row(call) for call in calls])
        for tool_id, (count, last) in sorted(uses.items()):
            Tool.objects.filter(pk=tool_id).update(use_count=F("use_count") + count, last_used=last)
        for key_id, at in sorted(keys.items()):
            ApiKey.objects.filter(pk=key_id).update(last_used_at=at)


def _existing(model, ids: set) -> set[int]:
    """Which of `ids` exist, locked FOR KEY SHARE (tools_app.services.key_share) until the caller's
    transaction ends: the lock a call-log row's foreign-key check takes at commit, taken now. A delete in
    progress (its row locked FOR UPDATE, still visible to a plain read) is waited for and its row left out,
    and no delete can start before the rows referring to what is read here are in."""
    ids.discard(None)
    if not ids:
        return set()
    return {pk for (pk,) in key_share(model._base_manager.filter(pk__in=ids).order_by("pk").values_list("pk"))}


def _live(calls: list[CallRecord], key_ids: Iterable[int] = ()) -> _Live:
    """Which of the tools, instances, keys and owners that `calls` (and `key_ids`) name still exist; call it
    inside the transaction that writes the rows (see _existing). Rows are locked in the delete services'
    order (keys, then instances; tools; users last), so a delete and this read never wait for each other
    in a circle."""
    keys = _existing(ApiKey, {call.api_key_id for call in calls} | set(key_ids))
    instances = _existing(McpInstance, {call.instance_id for call in calls})
    tools = _existing(Tool, {call.tool_id for call in calls})
    owners = _existing(get_user_model(), {call.owner_id for call in calls})
    return _Live(tools=tools, instances=instances, keys=keys, owners=owners)


def _as_now(calls: list[CallRecord], live: _Live) -> list[CallRecord]:
    """`calls` as the foreign keys' on_delete makes them for what was deleted since they were queued.

    CallLog.tool and .api_key are SET_NULL: the row stays, without them. CallLog.mcp_instance and .owner
    are CASCADE: the deleted instance's (or user's) rows were deleted with it, so its calls get none.
    """
    kept = []
    for call in calls:
        instance_gone = call.instance_id is not None and call.instance_id not in live.instances
        if instance_gone or call.owner_id not in live.owners:
            continue
        tool_id = call.tool_id if call.tool_id in live.tools else None
        api_key_id = call.api_key_id if call.api_key_id in live.keys else None
        if (tool_id, api_key_id) != (call.tool_id, call.api_key_id):
            call = replace(call, tool_id=tool_id, api_key_id=api_key_id)
        kept.append(call)
    return kept


def _write(calls: list[CallRecord], keys: dict[int, datetime]) -> int:
    """Write a batch; return the number of call-log rows written. See the module docstring.

    Raises only if the database cannot be reached at all (the caller logs and drops the batch).
    """
    uses = _uses(calls)
    try:
        _save(calls, uses, keys)
        return len(calls)
    except DatabaseError as exc:
        logger.warning(
            "Could not record %d MCP call(s) in one batch (%s); writing them again as they are now.",
            len(calls),
            exc,
        )
    kept = calls
    try:
        with transaction.atomic():
            live = _live(calls, keys)
            kept = _as_now(calls, live)
            # A deleted tool's use count and a deleted key's last use went with them.
            uses = {tool_id: use for tool_id, use in uses.items() if tool_id in live.tools}
            keys = {key_id: at for key_id, at in keys.items() if key_id in live.keys}
            _save(kept, uses, keys)
        if len(kept) < len(calls):
            logger.info("%d MCP call(s) of deleted instances or users are not recorded.", len(calls) - len(kept))
        return len(kept)
    except DatabaseError as exc:
        logger.warning("Could not record %d MCP call(s) again (%s); writing them in pieces.", len(kept), exc)
    # Counters and key times cannot break on a deleted row: a missing one updates nothing.
    _save([], _uses(kept), keys)
    return _save_in_pieces(kept)


def _save_in_pieces(calls: list[CallRecord]) -> int:
    """Insert the rows in halves, then quarters, …, each piece checked again for deleted rows, so one bad
    row costs only itself. Return the number of rows written.

    Only a refusal of the rows themselves (IntegrityError, DataError) splits a piece; any other error (the
    connection lost, say) would refuse every piece alike, so the rest is dropped at once, with one log line.
    """
    written = 0
    pieces = [calls]
    while pieces:
        piece = pieces.pop()
        try:
            with transaction.atomic():
                piece = _as_now(piece, _live(piece))
                CallLog.objects.bulk_create([_row(call) for call in piece])
        except (IntegrityError, DataError) as exc:
            if len(piece) > 1:
                half = len(piece) // 2
                pieces += [piece[half:], piece[:half]]
            else:
                logger.error("Could not record the MCP call %r (%s); it is dropped.", piece[0], exc)
            continue
        except DatabaseError:
            dropped = len(piece) + sum(len(rest) for rest in pieces)
            logger.exception("Could not record %d MCP call(s); they are dropped.", dropped)
            break
        written += len(piece)
    return written


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
