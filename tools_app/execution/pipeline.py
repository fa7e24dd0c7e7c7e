"""THE tool-call pipeline: every surface runs a tool through `run_tool_call`.

    resolve → authorize → validate → execute (under a budget and, once expensive, a slot) → classify → record

- resolve (the surface's part): MCP finds the target by effective name among an instance's bindings
  (selectors.binding_call_target, one SQL statement that also re-checks the key); the API and the admin
  by the tool's id through the ownership rule, then `target_of_tool`.
- authorize: an MCP name must match an enabled binding exactly (TOOL_NOT_FOUND); an external tool runs
  nowhere here (TOOL_NOT_CALLABLE).
- budget and concurrency (tools_app.execution.call_limits): the call runs under its evaluation budget (the
  instance's, else the server's: QUERY_TOO_EXPENSIVE when it is spent); once it turns out expensive it takes
  a concurrency slot of its API key and its user (RATE_LIMITED when none frees up in time).
- validate and execute: tool_types.execute.execute (arguments against the input schema, then the type's
  work).
- classify: a ToolError keeps its code; anything else is INTERNAL_ERROR, logged with the traceback. A read's
  result is measured against the result budget (the instance's max_result_bytes over MCP, the
  TOOLHUB_MAX_RESULT_BYTES setting elsewhere) while it is encoded, never after (tools_app.paging): a list
  over it is paged, `{"items", "total", "next_cursor"}`, and a `cursor` argument continues it; anything
  else over it is RESULT_TOO_LARGE (SPEC §4.4, §9; docs/paging.md).
- audit: a table write's change-log entry names the caller, the key or token, the surface, the tool,
  the binding and the arguments (services.write_audit around the change; docs/history.md).
- record: a CallLog row (surface, caller, instance, key, tool, outcome, duration, and unless the instance
  records metadata only the arguments and an excerpt of the result or error, redacted and bounded:
  tools_app.execution.call_details), the tool's use_count
  +1 and last_used, the key's last use, all committed before run_tool_call returns, so a client reading
  right after its call sees it counted. A tool that changes data has its record written in the same
  transaction as the change: both or neither. A failure to record is never silent: the call answers
  INTERNAL_ERROR (a change is then rolled back with it).

Error codes and their meanings: tools_app.kernel.errors (one table). Surfaces translate a CallOutcome; none of
them times, classifies or records a call itself.
"""

import functools
import json
import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from tools_app.choices import REGISTRY_TYPES, ToolType
from tools_app.data_access.budget import enforced
from tools_app.data_access.slow_queries import current_note, watching
from tools_app.execution import records
from tools_app.execution.call_details import (
    Recorded,
    arguments_max_bytes,
    query_exposes,
    recorded,
    recorded_success,
    result_max_bytes,
    scrub,
    withheld,
)
from tools_app.execution.call_limits import call_slots, limits_for
from tools_app.execution.executors import execute
from tools_app.grants import WHERE, Grant, apply_pins
from tools_app.kernel.caches import LruCache
from tools_app.kernel.errors import ErrorCode, ToolError
from tools_app.kernel.limits import TOOL_ERROR_MAX_MESSAGE_CHARS, default_max_result_bytes
from tools_app.kernel.telemetry import call_finished, call_span, span
from tools_app.models import ApiKey, CallLog, CallStatus, McpInstance, Surface, Table, TableStorage, Tool
from tools_app.models.columns import column
from tools_app.paging import (
    CURSOR,
    MEASURE_FACTOR,
    Cut,
    Page,
    PageWindow,
    encode_within,
    encoded_size,
    list_within,
    page_of,
    read_cursor,
    sign_cursor,
    tool_binding,
    utf8_size,
)
from tools_app.registry.instance_scope import InstanceScope
from tools_app.registry.scope import UserScope
from tools_app.selectors import NO_FIELDS, CallTarget, redact_fields_of
from tools_app.services.call_log import CallLogUpkeep, call_log_prune, call_log_trim
from tools_app.services.locks import key_share
from tools_app.services.refusals import refusals, refusals_prune
from tools_app.services.table_log import WriteAudit, change_transaction, rows_head_known, write_audit
from tools_app.tool_types import TOOL_TYPES, external, is_pageable, is_read

logger = logging.getLogger(__name__)

__all__ = [
    "CallOutcome",
    "CallTarget",
    "Caller",
    "ResultCache",
    "ToolCache",
    "result_cache",
    "run_tool_call",
    "target_of_tool",
    "tool_cache",
    "touch_key",
]

KEY_TOUCH_INTERVAL = 60.0  # seconds: a key's last_used_at is written at most this often per key and process
# Tools that change data: recorded in the transaction of the change, and never refused as RESULT_TOO_LARGE.
# SPEC §4.4 refuses a result over max_result_bytes "with a message saying how to narrow the call": that is
# for reads. A change is made before its result is measured, and the result has nothing to narrow (a count
# and the version, SPEC §8; for register_tool what the caller sent). Refusing it would answer an applied
# write with an isError, which says nothing was written (SPEC §3), and invite a repeat that writes twice.
CHANGING_TYPES = frozenset(value for value, spec in TOOL_TYPES.items() if spec.changes_data)


@dataclass(frozen=True, slots=True)
class Caller:
    """Who calls, and through which surface: the user (over MCP, the instance's owner, whose key it is),
    the API key (MCP only) and the user object when the surface has it (the API's registry scope)."""

    surface: Surface
    user_id: int | None
    api_key_id: int | None = None
    user: Any = None
    oauth_client: str = ""  # over MCP with an OAuth access token: the client's id
    api_token_id: int | None = None  # the API token the request came with (a write's audit)
    # Over MCP: what the key or token may use (tools_app.grants); None elsewhere (the owner's own tools).
    grant: Grant | None = None


def target_of_tool(tool: Tool, *, max_result_bytes: int | None = None) -> CallTarget:
    """The target of a call by tool id (API, admin): the tool as the caller may see it, no instance.

    Its result budget is `max_result_bytes`, by default the TOOLHUB_MAX_RESULT_BYTES setting (the admin's
    "show all" passes a larger one)."""
    return CallTarget(
        owner_id=tool.owner_id,
        max_result_bytes=max_result_bytes or default_max_result_bytes(),
        enabled=True,
        tool_id=tool.pk,
        tool_name=tool.name,
        tool_type=tool.type,
        tool_changed=tool.updated_at,
        table_id=tool.table_id,
        tool=tool,
        redact_arguments=tool.redact_arguments,
    )


class CallOutcome:
    """A finished call: its value (and the value's JSON text, made once on demand) or its error. `page` says
    which items of a paged list the value holds (docs/paging.md); None for any other result."""

    __slots__ = ("_text", "duration_ms", "error", "name", "page", "refused", "tool_type", "value")

    def __init__(
        self, *, name: str, tool_type: str | None, value: Any = None, error: ToolError | None = None, text=None
    ) -> None:
        self.name = name
        self.tool_type = tool_type
        self.value = value
        self.error = error
        self.duration_ms = 0.0
        self._text: str | None = text
        self.page: Page | None = None
        # True when the pipeline refused to run the call (no such enabled tool, an external tool); a
        # tool's own error (e.g. get_tool_definition's TOOL_NOT_FOUND for the tool it describes) is not.
        self.refused = False

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def text(self) -> str:
        """The value as compact JSON (UTF-8 kept): what MCP sends and max_result_bytes measures."""
        if self._text is None:
            self._text = json.dumps(self.value, ensure_ascii=False, separators=(",", ":"))
        return self._text

    @property
    def size(self) -> int:
        return utf8_size(self.text)


#
# Per-process caches: read through the version the target's query returned, so an edit or a write through
# any worker is a miss on the next call (SPEC §1).
#


class ResultCache:
    """Read results per (tool, its last edit, table, table version, arguments), bounded by bytes: the value
    and its JSON text, or (a list over a budget, never encoded whole) the value alone, weighed by its
    estimated JSON size. Pages of one list are cut from its entry, not by running the tool again; each page
    cut is kept too (under the same key with the budget and its offset, weighed by its text), so a page asked
    again is served as cut, neither read nor measured again.

    A table version is immutable data, so a hit is exactly what running the tool again would return.
    """

    def __init__(self, max_bytes: int = 32 * 1024 * 1024, max_entry_bytes: int = 1024 * 1024):
        self._store: LruCache[tuple, tuple[Any, str | None, int]] = LruCache(
            "results", max_weight=max_bytes, max_entry_weight=max_entry_bytes, weigh=lambda entry: entry[2]
        )

    def get(self, key: tuple) -> tuple[Any, str | None] | None:
        entry = self._store.get(key)
        return None if entry is None else (entry[0], entry[1])

    def put(self, key: tuple, value: Any, text: str | None, *, weight: int | None = None) -> None:
        """Keep `value` with its JSON `text`, or without it (None) at the given estimated `weight` in bytes."""
        if text is None and weight is None:
            raise ValueError("A result kept without its text needs its estimated weight.")
        self._store.put(key, (value, text, len(text) if text is not None else weight or 0))

    def get_page(self, key: tuple, limit: int, offset: int) -> Page | None:
        """The page of the result under `key` cut for the budget `limit` at `offset`, when it was cut before."""
        entry = self._store.get(("page", key, limit, offset))
        return None if entry is None else entry[0]

    def put_page(self, key: tuple, limit: int, page: Page) -> None:
        self._store.put(("page", key, limit, page.offset), (page, page.text, len(page.text)))

    def clear(self) -> None:
        self._store.clear()


class ToolCache:
    """Tool rows by (id, updated_at). Every edit goes through Tool.save() (services), which moves updated_at,
    so an edit through any worker is a miss on the next call. Cached tools are only read, never changed."""

    def __init__(self, capacity: int = 1024):
        self._store: LruCache[tuple, Tool] = LruCache("tools", capacity=capacity)

    def get(self, tool_id: int, changed: Any) -> Tool:
        key = (tool_id, changed)
        tool = self._store.get(key)
        if tool is None:
            tool = self._store.put(key, Tool.objects.get(pk=tool_id))
        return tool

    def clear(self) -> None:
        self._store.clear()


class KeyTouches:
    """When a key's last_used_at is worth writing: at most once per KEY_TOUCH_INTERVAL per key and process."""

    def __init__(self) -> None:
        self._last: LruCache[int, float] = LruCache("key-touches", capacity=100_000)
        self._lock = threading.Lock()

    def due(self, api_key_id: int, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        with self._lock:
            last = self._last.get(api_key_id)
            if last is not None and now - last < KEY_TOUCH_INTERVAL:
                return False
            self._last.put(api_key_id, now)
            return True

    def clear(self) -> None:
        self._last.clear()


result_cache = ResultCache()
tool_cache = ToolCache()
key_touches = KeyTouches()


def touch_key(api_key_id: int) -> None:
    """Write the key's last use now, when due (KeyTouches): for requests that are not tool calls."""
    if key_touches.due(api_key_id):
        ApiKey.objects.filter(pk=api_key_id).update(last_used_at=timezone.now())


#
# The pipeline
#


def narrowing_hint(tool_type: str) -> str:
    """How to ask a tool of `tool_type` for less (its declaration's narrowing_hint), or the general advice."""
    spec = TOOL_TYPES.get(tool_type)
    return (spec.narrowing_hint if spec is not None else None) or "ask for less in one call"


def over_limit(tool_type: str | None, size: int, limit: int | None) -> bool:
    """Whether a result of `size` bytes is refused (RESULT_TOO_LARGE); never for CHANGING_TYPES."""
    return limit is not None and size > limit and tool_type not in CHANGING_TYPES


def too_large(tool_type: str, size: int, limit: int, *, complete: bool = True, on_instance: bool = True) -> ToolError:
    """SPEC §4.4: RESULT_TOO_LARGE, naming the size and the budget and saying how to narrow a call of this
    (reading) tool type. `complete` False: measuring stopped at `size` bytes, the result is larger."""
    where = "this instance's limit" if on_instance else "the result budget"
    measured = f"{size} bytes" if complete else f"more than {size} bytes (measuring stopped there)"
    message = f"The result is {measured}, over {where} of {limit} bytes. Narrow the call: {narrowing_hint(tool_type)}."
    details: dict[str, Any] = {"size": size, "max_result_bytes": limit}
    if not complete:
        details["size_is_lower_bound"] = True
    return ToolError(ErrorCode.RESULT_TOO_LARGE, message, details)


def _item_too_large(tool_type: str, index: int, limit: int, *, on_instance: bool) -> ToolError:
    where = "this instance's limit" if on_instance else "the result budget"
    message = (
        f"The result is a list whose item {index} alone is over {where} of {limit} bytes, so no page can"
        f" hold it. Narrow the call: {narrowing_hint(tool_type)}."
    )
    return ToolError(ErrorCode.RESULT_TOO_LARGE, message, {"item": index, "max_result_bytes": limit})


def _not_found(name: str, target: CallTarget) -> ToolError:
    shown = repr(name) if len(name) <= 80 else repr(name[:80]) + "…"
    message = f"Unknown tool {shown}: it is not enabled on this instance."
    details: dict[str, Any] = {}
    if target.found and target.enabled and target.effective_name != name:
        message += f" Tool names are case-sensitive; did you mean {target.effective_name!r}?"
        details["suggestion"] = target.effective_name
    return ToolError(ErrorCode.TOOL_NOT_FOUND, message, details)


def _scope(caller: Caller, target: CallTarget) -> Any:
    """What a registry tool works over (SPEC §5): the instance's bindings over MCP, the caller's tools else."""
    if target.instance_id is not None:
        instance = McpInstance.objects.select_related("owner").get(pk=target.instance_id)
        return InstanceScope(instance) if caller.grant is None else InstanceScope(instance, caller.grant)
    user = caller.user
    if user is None and caller.user_id is not None:
        user = get_user_model().objects.get(pk=caller.user_id)
    return UserScope(user)


def _with_table_version(target: CallTarget) -> CallTarget:
    """A read's target with its table's current version (MCP's target query reads it; the API's and the
    admin's targets come without): what the result cache and the paging cursors are keyed by. The table's
    redact_fields come with it, for the call's record."""
    if not is_read(target.tool_type) or target.table_id is None or target.table_version is not None:
        return target
    row = Table.objects.filter(pk=target.table_id).values_list("version", "redact_fields").first()
    version, fields = row if row is not None else (None, [])
    return replace(target, table_version=version, redact_fields=fields)


# json.dumps(arguments, sort_keys=True, separators=(",", ":")) with its encoder made once, not on every call.
_arguments_key = json.JSONEncoder(sort_keys=True, separators=(",", ":")).encode


def _cache_key(target: CallTarget, arguments: Any) -> tuple | None:
    if not is_read(target.tool_type) or target.table_id is None or target.table_version is None:
        return None
    arguments_key = _arguments_key(arguments)
    if len(arguments_key) > 4096:
        return None
    return (target.tool_id, target.tool_changed, target.table_id, target.table_version, arguments_key)


def run_tool_call(
    *, caller: Caller, target: CallTarget, name: str, arguments: Any, progress: Callable[[str], None] | None = None
) -> CallOutcome:
    """Run the call `name`(`arguments`) that resolved to `target`, classify it and record it; never raises
    for the call's own failures (they are the outcome's `error`). See the module docstring.

    Each finished call is reported once to tools_app.kernel.telemetry (metrics, and its log line when on); with
    tracing on it runs in a `toolhub.call` span, with a span per stage and per database statement.
    `progress`, when given, is told (from the calling thread) when the tool starts running and when it has
    run: MCP sends these as progress notifications to a client that asked for them."""
    surface = str(caller.surface)
    with call_span(surface=surface, tool=name, instance=target.instance_slug), watching():
        outcome = _run_tool_call(caller, target, name, arguments, progress)
    call_finished(
        surface=surface,
        instance=target.instance_slug,
        tool_type=outcome.tool_type or target.tool_type,
        name=name,
        outcome=outcome,
        user_id=caller.user_id,
        api_key_id=caller.api_key_id,
    )
    return outcome


def _run_tool_call(
    caller: Caller, target: CallTarget, name: str, arguments: Any, progress: Callable[[str], None] | None
) -> CallOutcome:
    started = time.perf_counter()
    began = time.monotonic()  # the call's time budget counts from here, waits for a slot included
    at = timezone.now()
    with span("toolhub.call.authorize"):
        outcome = _authorize(caller, target, name)
    if outcome is None and target.pinned_arguments:
        # From here on the arguments are the effective ones: what runs, is audited and recorded.
        arguments, outcome = _pinned(caller, target, name, arguments)
    if outcome is None and progress is not None:
        progress(f"running {name}")
    if outcome is None and target.tool_type in CHANGING_TYPES:
        outcome, done = _run_changing(caller, target, name, arguments, started, at, began)
        if done:
            if progress is not None:
                progress(f"{name} ran and was recorded")
            return outcome
    elif outcome is None:
        target = _with_table_version(target)
        outcome = _run(caller, target, name, arguments, began)
    if progress is not None and not outcome.refused:
        progress(f"{name} ran; recording the call")
    _finish(caller, target, outcome, started, at, arguments)
    return outcome


def _authorize(caller: Caller, target: CallTarget, name: str) -> CallOutcome | None:
    """An outcome refusing the call, or None when it may run. A tool outside the caller's set (tools_app.grants:
    a write through a read-only key, instance or binding; pins naming a value the caller lacks) is refused
    as TOOL_NOT_FOUND, as it is absent from its tools/list."""
    error = None
    grant = caller.grant
    if not target.found or not target.enabled or (target.instance_id is not None and target.effective_name != name):
        error = _not_found(name, target)
    elif grant is not None and (
        why := grant.refusal(name, target.tool_type, read_only=target.read_only, pins=target.pinned_arguments)
    ):
        error = ToolError(ErrorCode.TOOL_NOT_FOUND, why)
    elif target.tool_type == ToolType.EXTERNAL:
        try:
            error = external.refusal(_tool(target), name)
        except Tool.DoesNotExist:  # deleted since it was resolved
            error = _not_found(name, replace(target, tool_id=None))
    if error is None:
        return None
    refusal = CallOutcome(
        name=name, tool_type=None if error.code == ErrorCode.TOOL_NOT_FOUND else target.tool_type, error=error
    )
    refusal.refused = True
    return refusal


def _pinned(caller: Caller, target: CallTarget, name: str, arguments: Any) -> tuple[Any, CallOutcome | None]:
    """The effective arguments of a call through a binding with pinned arguments (tools_app.grants), or the
    outcome refusing it: INVALID_ARGUMENTS when the caller sent a pinned argument; TOOL_NOT_CALLABLE when the
    tool's input schema no longer declares one (the pin would not narrow the call: it fails closed)."""
    pins = target.pinned_arguments or {}
    try:
        tool = _tool(target)
    except Tool.DoesNotExist:
        return arguments, None  # deleted since it was resolved: executing says so
    properties = (tool.input_schema or {}).get("properties") or {}
    undeclared = sorted(argument for argument in pins if argument not in properties and argument != WHERE)
    if undeclared:
        error = ToolError(
            ErrorCode.TOOL_NOT_CALLABLE,
            f"The tool {name!r} cannot run here: its binding pins {', '.join(map(repr, undeclared))}, which its "
            "input schema no longer declares. The owner must change the binding or the tool.",
        )
        return arguments, CallOutcome(name=name, tool_type=target.tool_type, error=error)
    grant = caller.grant or Grant()
    try:
        return apply_pins(arguments, grant.pinned_values(pins, tool.input_schema)), None
    except ToolError as exc:
        return arguments, CallOutcome(name=name, tool_type=target.tool_type, error=exc)


def _narrowing(target: CallTarget, arguments: Any) -> tuple[Any, dict[str, Any] | None]:
    """The tool's own arguments and the records' narrowing, for a binding that narrows (tools_app.grants.WHERE):
    the effective arguments carry it (so the call log, the result cache and cursors are per narrowing); the tool
    runs with it taken out. A narrowing binding whose call lacks it fails closed (INVALID_ARGUMENTS)."""
    if WHERE not in (target.pinned_arguments or {}):
        return arguments, None
    if not isinstance(arguments, dict) or not isinstance(arguments.get(WHERE), dict):
        raise ToolError(ErrorCode.INVALID_ARGUMENTS, "Invalid arguments: they must be a JSON object.")
    return {key: value for key, value in arguments.items() if key != WHERE}, arguments[WHERE]


def _tool(target: CallTarget) -> Tool:
    if target.tool is not None:
        return target.tool
    assert target.tool_id is not None, "only a found target has a tool"
    return tool_cache.get(target.tool_id, target.tool_changed)


def _execute(
    caller: Caller, target: CallTarget, name: str, arguments: Any, began: float, window: PageWindow | None = None
) -> CallOutcome:
    """Validate and execute; a ToolError (or anything else, as INTERNAL_ERROR) becomes the outcome's error.
    With `window`, a reader that can read only its page's items may answer a paging.Cut (_limited)."""
    try:
        tool = _tool(target)
        scope = _scope(caller, target) if tool.type in REGISTRY_TYPES else None
        arguments, where = _narrowing(target, arguments)
        # The call's budget, and its concurrency slot once it turns out expensive (RATE_LIMITED when none);
        # a caller whose calls were heavy a moment ago turns heavy sooner (budgets module docstring).
        slot = call_slots.on_heavy(user_id=caller.user_id, api_key_id=caller.api_key_id)
        yield_after = call_slots.yield_after_ms(user_id=caller.user_id, api_key_id=caller.api_key_id)
        with (
            span("toolhub.call.execute"),
            enforced(limits_for(target), since=began, on_heavy=slot, yield_after_ms=yield_after),
            _head_known(target),
        ):
            # A window only when there is one: a stand-in `execute` of another read need not take it.
            paged = {} if window is None else {"window": window}
            value = execute(tool=tool, arguments=arguments, scope=scope, where=where, **paged)
        return CallOutcome(name=name, tool_type=tool.type, value=value)
    except ToolError as exc:
        if exc.code == ErrorCode.QUERY_TOO_EXPENSIVE:
            call_slots.remember_heavy(user_id=caller.user_id, api_key_id=caller.api_key_id)
        return CallOutcome(name=name, tool_type=target.tool_type, error=exc)
    except Exception:
        logger.exception(
            "Tool %r (id %s) failed unexpectedly on the %s surface", target.tool_name, target.tool_id, caller.surface
        )
        error = ToolError(ErrorCode.INTERNAL_ERROR, "The tool failed unexpectedly; the error was logged on the server.")
        return CallOutcome(name=name, tool_type=target.tool_type, error=error)


def _head_known(target: CallTarget) -> Any:
    """A rows table's version as the call's target query read it, for a read's table_head (one statement less:
    services.rows_head_known); nothing for a write (its head is read under the table's lock), a document table or
    a target read without its storage."""
    if (
        not is_read(target.tool_type)
        or target.table_storage != TableStorage.ROWS
        or target.table_id is None
        or target.table_version is None
    ):
        return nullcontext()
    return rows_head_known(target.table_id, target.table_version)


def _run(caller: Caller, target: CallTarget, name: str, arguments: Any, began: float) -> CallOutcome:
    """A read of a target with its table version (_with_table_version): from the result cache when this version
    of the table answered these arguments before; its result within the budget, paged, or refused (classify)."""
    paging = _Paging.of(target, arguments)
    if paging.error is not None:
        return CallOutcome(name=name, tool_type=target.tool_type, error=paging.error)
    arguments = paging.arguments
    cache_key = _cache_key(target, arguments)
    limit = target.max_result_bytes
    if paging.pageable and cache_key is not None and limit is not None:
        page = result_cache.get_page(cache_key, limit, paging.offset or 0)
        if page is not None:  # cut before for this budget: served as cut
            return _page_outcome(name, target.tool_type, page)
    cached = result_cache.get(cache_key) if cache_key is not None else None
    if cached is not None:
        outcome = CallOutcome(name=name, tool_type=target.tool_type, value=cached[0], text=cached[1])
    else:
        with records.versions_read() as seen:
            outcome = _execute(caller, target, name, arguments, began, _window(target, paging, seen))
        if seen and target.table_version is not None and seen[-1] != target.table_version:
            # A write committed after the version was read above: the answer is of the version the read ran over,
            # and is cached and paged under it. A cursor of the earlier version pages a list that is gone.
            if paging.offset is not None:
                expired = ToolError(ErrorCode.CURSOR_EXPIRED, "The table changed since this cursor's page was read.")
                return _failed(outcome, expired)
            target = replace(target, table_version=seen[-1])
            cache_key = _cache_key(target, arguments)
    with span("toolhub.call.classify"):
        return _limited(target, outcome, paging, cache_key, keep=cached is None or cached[1] is None)


@dataclass(frozen=True, slots=True)
class _Paging:
    """A pageable call's `cursor`, taken out of its arguments before they are validated (a tool's own schema
    need not declare it): the offset it names (checked against the tool, the arguments and the table
    version), or the error refusing it. `binding` (what a cursor is bound to) is computed only when a cursor
    came or a page must be cut (_paged), never for the common call whose result fits."""

    arguments: Any
    pageable: bool = False
    offset: int | None = None  # None: no cursor, the first page when the result is paged at all
    binding: str = ""
    error: ToolError | None = None

    @classmethod
    def of(cls, target: CallTarget, arguments: Any) -> "_Paging":
        if not is_pageable(target.tool_type) or not isinstance(arguments, dict):
            return cls(arguments)
        if CURSOR not in arguments:
            return cls(arguments, pageable=True)
        cursor = arguments[CURSOR]
        arguments = {key: value for key, value in arguments.items() if key != CURSOR}
        if cursor is None:  # null: the first page
            return cls(arguments, pageable=True)
        try:
            binding = _binding(target, arguments)
            offset = read_cursor(cursor, binding=binding, version=target.table_version)
        except ToolError as exc:
            return cls(arguments, error=exc)
        except Tool.DoesNotExist:  # deleted since it was resolved: executing says so
            return cls(arguments)
        return cls(arguments, pageable=True, offset=offset, binding=binding)


def _window(target: CallTarget, paging: _Paging, seen: list[int]) -> PageWindow | None:
    """What a pageable read may answer instead of its whole list (paging.PageWindow): the cursor's offset,
    the budget, and cursors bound as _paged binds them (the binding computed only when a cursor is signed), to
    the version the read answered from (`seen`, records.versions_read), which a write may have moved past the
    target's."""
    limit = target.max_result_bytes
    if not paging.pageable or limit is None or not is_read(target.tool_type):
        return None
    bound = [paging.binding] if paging.binding else []

    def cursor_at(index: int) -> str:
        if not bound:
            bound.append(_binding(target, paging.arguments))
        version = seen[-1] if seen else target.table_version or 0
        return sign_cursor(binding=bound[0], version=version, offset=index)

    return PageWindow(offset=paging.offset, limit=limit, cursor_at=cursor_at)


def _binding(target: CallTarget, arguments: Any) -> str:
    """What a cursor of this call is bound to: the tool, its last edit and the arguments (paging.tool_binding)."""
    return tool_binding(tool_id=target.tool_id, tool_changed=_tool(target).updated_at.isoformat(), arguments=arguments)


def _limited(
    target: CallTarget, outcome: CallOutcome, paging: _Paging, cache_key: tuple | None, *, keep: bool = True
) -> CallOutcome:
    """Classify a read's result against the budget, encoding no more of it than the budget (docs/paging.md):
    within it, the result unchanged; a list over it (or any call with a cursor), a page; anything else over
    it, RESULT_TOO_LARGE naming its size. What was encoded goes to the result cache under `cache_key`: the
    result when `keep` (the entry is new or had no text), a page always (each page is cut once)."""
    limit = target.max_result_bytes
    if not outcome.ok or limit is None or target.tool_type in CHANGING_TYPES:
        return outcome
    value, known = outcome.value, outcome._text
    if isinstance(value, Cut):
        return _from_cut(target, outcome, value, limit, cache_key)
    start: tuple[str, int] | None = None  # the numbers list_within encoded, for the first page
    if paging.offset is None:
        if known is not None and not over_limit(target.tool_type, utf8_size(known), limit):
            return outcome
        within = None
        if known is None:
            if paging.pageable and isinstance(value, list):
                # A list over the budget is encoded once: its first page is cut from what was encoded.
                within, start = list_within(value, limit)
            else:
                within = encode_within(value, limit)
        if within is not None:
            outcome._text = within
            if cache_key is not None and keep:
                result_cache.put(cache_key, value, within)
            return outcome
    if paging.pageable and isinstance(value, list):
        try:
            binding = paging.binding or _binding(target, paging.arguments)
        except Tool.DoesNotExist:  # deleted since it ran: no cursor can be bound to it, so no page either
            binding = ""
        if binding:
            return _paged(target, outcome, paging, binding, limit, cache_key, keep=keep, start=start)
    if paging.offset is not None:  # a cursor whose list is gone: only a change of the data does that
        return _failed(outcome, ToolError(ErrorCode.CURSOR_EXPIRED, "The result this cursor pages is gone."))
    size, complete = (utf8_size(known), True) if known is not None else encoded_size(value, limit * MEASURE_FACTOR)
    on_instance = target.instance_id is not None
    return _failed(outcome, too_large(target.tool_type or "", size, limit, complete=complete, on_instance=on_instance))


def _paged(
    target: CallTarget,
    outcome: CallOutcome,
    paging: _Paging,
    binding: str,
    limit: int,
    cache_key: tuple | None,
    *,
    keep: bool,
    start: tuple[str, int] | None = None,
) -> CallOutcome:
    """The page of the list result at the cursor's offset, with cursors bound to `binding` (_binding); `start`, the
    numbers from the list's first item already encoded against the whole budget (paging.list_within)."""
    items: list = outcome.value
    offset = paging.offset or 0
    if offset > len(items):
        return _failed(outcome, ToolError(ErrorCode.CURSOR_EXPIRED, "The result this cursor pages is shorter now."))
    version = target.table_version or 0

    def cursor_at(index: int) -> str:
        return sign_cursor(binding=binding, version=version, offset=index)

    page = page_of(items, offset=offset, limit=limit, cursor_at=cursor_at, start=start if offset == 0 else None)
    if page is None:
        error = _item_too_large(target.tool_type or "", offset, limit, on_instance=target.instance_id is not None)
        return _failed(outcome, error)
    if cache_key is not None:
        if keep and outcome._text is None:
            result_cache.put(cache_key, items, None, weight=page.estimated_bytes)
        result_cache.put_page(cache_key, limit, page)
    return _page_outcome(outcome.name, outcome.tool_type, page)


def _from_cut(target: CallTarget, outcome: CallOutcome, cut: Cut, limit: int, cache_key: tuple | None) -> CallOutcome:
    """A windowed reader's answer (paging.PageWindow.cut), classified as _limited classifies the whole list: the list
    when it fits, else its page (kept in the result cache as cut), the item too large for any page, or an object
    over the budget."""
    on_instance = target.instance_id is not None
    tool_type = target.tool_type or ""
    if cut.whole is not None:
        if cache_key is not None and cut.text is not None:
            result_cache.put(cache_key, cut.whole, cut.text)
        return CallOutcome(name=outcome.name, tool_type=outcome.tool_type, value=cut.whole, text=cut.text)
    if cut.over is not None:
        return _failed(outcome, too_large(tool_type, cut.over, limit, complete=False, on_instance=on_instance))
    if cut.page is None:
        return _failed(outcome, _item_too_large(tool_type, cut.offset, limit, on_instance=on_instance))
    if cache_key is not None:
        result_cache.put_page(cache_key, limit, cut.page)
    return _page_outcome(outcome.name, outcome.tool_type, cut.page)


def _page_outcome(name: str, tool_type: str | None, page: Page) -> CallOutcome:
    paged = CallOutcome(name=name, tool_type=tool_type, value=page.value, text=page.text)
    paged.page = page
    return paged


def _failed(outcome: CallOutcome, error: ToolError) -> CallOutcome:
    return CallOutcome(name=outcome.name, tool_type=outcome.tool_type, error=error)


class _RolledBack(Exception):
    """Leaves the change's transaction when the tool failed, so that nothing of it is kept."""

    def __init__(self, outcome: CallOutcome) -> None:
        super().__init__(outcome.name)
        self.outcome = outcome


def _run_changing(
    caller: Caller, target: CallTarget, name: str, arguments: Any, started: float, at: datetime, began: float
) -> tuple[CallOutcome, bool]:
    """A change and its record in one transaction: (outcome, True) when both were committed; (outcome, False)
    when the change failed or could not be recorded, and nothing of it was kept (record it on its own)."""
    audit = WriteAudit(
        surface=str(caller.surface),
        user_id=caller.user_id,
        api_key_id=caller.api_key_id,
        api_token_id=caller.api_token_id,
        oauth_client=caller.oauth_client,
        tool_id=target.tool_id,
        tool_name=_loggable(target.tool_name or name),
        instance_id=target.instance_id,
        binding_name=_loggable(target.effective_name) if target.instance_id is not None else "",
        arguments=arguments,
    )
    try:
        with _writer(), change_transaction(), write_audit(audit):
            outcome = _execute(caller, target, name, arguments, began)
            if not outcome.ok:
                raise _RolledBack(outcome)
            outcome.duration_ms = (time.perf_counter() - started) * 1000
            size = _record(caller, target, outcome, at, arguments)
        _upkeep(target.owner_id, size)
        return outcome, True
    except _RolledBack as failed:
        return failed.outcome, False
    except Exception:
        logger.exception("Could not record the %s call of %r; its change was rolled back.", caller.surface, name)
        error = ToolError(
            ErrorCode.INTERNAL_ERROR,
            "The call could not be recorded, so its change was not kept; the error was logged on the server.",
        )
        return CallOutcome(name=name, tool_type=target.tool_type, error=error), False


def _finish(
    caller: Caller, target: CallTarget, outcome: CallOutcome, started: float, at: datetime, arguments: Any
) -> None:
    """Record a call that changed nothing; a failure to record turns the outcome into INTERNAL_ERROR."""
    outcome.duration_ms = (time.perf_counter() - started) * 1000
    try:
        size = _record(caller, target, outcome, at, arguments)
        _upkeep(target.owner_id, size)
    except Exception:
        logger.exception("Could not record the %s call of %r.", caller.surface, outcome.name)
        outcome.value = None
        outcome.error = ToolError(
            ErrorCode.INTERNAL_ERROR, "The call could not be recorded; the error was logged on the server. Try again."
        )


#
# Recording
#


@dataclass(frozen=True, slots=True)
class _Row:
    instance_id: int | None
    tool_id: int | None
    api_key_id: int | None
    owner_id: int
    user_id: int | None
    logged: bool = True  # False: the instance or the owner is gone, and their call log with them


class _Details:
    """What the row keeps of the call beyond its metadata (tools_app.execution.call_details), and `size`, what
    the owner's storage bound counts (CallLog.recorded_bytes), measured once: the arguments', the result's and
    the error message's UTF-8 bytes when the details are kept, else 0. A plain class: every call makes one."""

    __slots__ = ("arguments", "result", "error_message", "size")

    def __init__(self, arguments: Recorded | None, result: Recorded | None, error_message: str) -> None:
        self.arguments, self.result, self.error_message = arguments, result, error_message
        if arguments is None or result is None:
            self.size = 0
        else:
            self.size = utf8_size(arguments.text + result.text)
            if error_message:
                self.size += len(error_message.encode("utf-8", "replace"))


def _details(target: CallTarget, outcome: CallOutcome, arguments: Any) -> _Details:
    """The call's arguments and result (or error, as the client got it), redacted and bounded; None for both
    when the instance records metadata only. The error message is scrubbed of the call's redacted values and
    credentials in either case."""
    error = outcome.error
    fields = _redact_fields(target)
    keep = target.record_details
    if not keep and error is None:
        return _Details(None, None, "")
    # The names redacted in the arguments: the table's fields and the tool's redact_arguments.
    named = redact_fields_of(target.redact_arguments)
    sent_fields = fields | named if named else fields
    if (
        error is None
        and fields
        and target.tool_type == ToolType.QUERY_DATA
        and query_exposes(arguments.get("query") if isinstance(arguments, dict) else None, fields)
    ):
        # The expression shows a redacted field's values without their key (`[].ssn`, `[].{s: ssn}`, `[0].*`):
        # redaction by key cannot see them, so the result is not kept, only its shape.
        sent = recorded(arguments, max_bytes=arguments_max_bytes(), fields=sent_fields, small=True)
        return _Details(sent, withheld(outcome.value), "")
    if error is None:
        # The text of the result is the one the client got, usually made already.
        sent, result = recorded_success(
            arguments, outcome.value, fields=fields, sent_fields=sent_fields, text=outcome._text
        )
        return _Details(sent, result, "")
    sent = recorded(arguments, max_bytes=arguments_max_bytes(), fields=sent_fields, small=True)
    message = scrub(error.message[:TOOL_ERROR_MAX_MESSAGE_CHARS], sent.secrets)
    if not keep:
        return _Details(None, None, message)
    got = recorded(error.as_dict(), max_bytes=result_max_bytes(), fields=fields, secrets=sent.secrets)
    return _Details(sent, got, message)


def _redact_fields(target: CallTarget) -> frozenset[str]:
    """The redact_fields of the call's table: from the target when its query read them, else read now."""
    if target.table_id is None:
        return NO_FIELDS
    stored = target.redact_fields
    if stored is None:
        stored = Table.objects.filter(pk=target.table_id).values_list("redact_fields", flat=True).first()
    return redact_fields_of(stored)


upkeep = CallLogUpkeep()


def _upkeep(owner_id: int, recorded_bytes: int) -> None:
    """The call log's retention and the owner's storage bound, when due (services.call_log), and the refused
    requests' counts (services.refusals); after the call's record is committed, and never its failure: a prune
    that fails is logged and tried at the next due time."""
    if refusals.due():  # the rate-limit refusals this process counted (services.refusals); none: a dict test
        with _writer():
            refusals.flush()
    prune, trim = upkeep.due(owner_id, recorded_bytes)
    if not (prune or trim):
        return
    try:
        with span("toolhub.call.upkeep"), _writer():
            if prune:
                call_log_prune()
                refusals_prune()
            if trim:
                call_log_trim(owner_id)
    except Exception:
        logger.exception("Keeping the call log within its retention and storage bound failed; tried again later.")


def _record(caller: Caller, target: CallTarget, outcome: CallOutcome, at: datetime, arguments: Any) -> int:
    """The CallLog row, the use count and the key's last use, atomically (one statement on PostgreSQL); returns
    the row's recorded_bytes.

    Counts a use when the call reached a callable tool (SPEC §2.2), whatever its outcome; not when no tool
    answered to the name or the tool is external (nothing was used). A tool, key, instance or user deleted
    since the call was resolved costs only its own link: the insert then fails on the foreign key (on
    PostgreSQL after waiting for the delete in progress), and the row is written as the foreign keys'
    on_delete says (tool and key SET_NULL; a deleted instance or owner takes its calls with it).
    """
    # A disabled or misspelt binding's tool was not called; an external tool was named but not used.
    resolved = not (outcome.refused and outcome.error is not None and outcome.error.code == ErrorCode.TOOL_NOT_FOUND)
    row = _Row(
        instance_id=target.instance_id,
        tool_id=target.tool_id if resolved else None,
        api_key_id=caller.api_key_id,
        owner_id=target.owner_id,
        user_id=caller.user_id,
    )
    count_use = not outcome.refused
    touch_key = caller.api_key_id is not None and key_touches.due(caller.api_key_id)
    with span("toolhub.call.record"):
        details = _details(target, outcome, arguments)
        with _writer():
            try:
                with _one_unit():
                    _write(caller, outcome, row, at, details, count_use=count_use, touch_key=touch_key)
                return details.size
            except IntegrityError as exc:
                logger.info("Recording a call found a row deleted meanwhile (%s); writing it as it is now.", exc)
            with transaction.atomic():
                _write(caller, outcome, _as_now(row), at, details, count_use=count_use, touch_key=touch_key)
    return details.size


_sqlite_writer = threading.RLock()
_NOTHING = nullcontext()


def _writer() -> AbstractContextManager[Any]:
    """SQLite: one writing thread per process at a time. Its IMMEDIATE transactions queue on the database's
    write lock through a busy handler that sleeps 1, 2, 5, 10, ... ms between tries, which under concurrent
    calls cost more than the writes (bench/mcp_throughput.py); threads of one process queue here instead.
    PostgreSQL takes row locks and needs nothing. The lock itself, or one shared no-op: no generator per call."""
    return _sqlite_writer if connection.vendor == "sqlite" else _NOTHING


def _one_unit() -> AbstractContextManager[Any]:
    """What makes the record's statements one unit. On PostgreSQL nothing: the record is one statement, committed
    by itself outside a transaction (one round trip instead of BEGIN, the statement and COMMIT); inside the
    change's transaction its foreign keys are checked at the commit (DEFERRABLE INITIALLY DEFERRED), so the
    statement cannot be refused on them and a savepoint would guard nothing (two round trips). SQLite: an atomic
    block (its up to three statements)."""
    if connection.vendor == "postgresql":
        return _NOTHING
    return transaction.atomic()


# The call-log columns a record writes, each bound by its own name (_record_sql).
_RECORD_COLUMNS = (
    "surface", "user", "mcp_instance", "tool", "tool_name", "api_key", "owner", "status", "error_code",
    "error_message", "duration_ms", "created_at", "oauth_client", "arguments", "arguments_truncated",
    "result_excerpt", "result_truncated", "recorded_bytes", "notes",
)  # fmt: skip


@functools.cache
def _record_sql(vendor: str) -> tuple[str, str, str, tuple[str, str] | None]:
    """The statements of one record, built once from the models' tables and columns: the call-log INSERT, the
    use count (THE use-count rule, as services.tool_use_record) and the key's last use. PostgreSQL runs
    them as one statement (data-modifying WITH clauses always run): with the key's last use, and without it
    (most calls: the key was touched a moment ago), so that no parameter is sent for nothing; SQLite as up to
    three. A use that is not due names id NULL, which matches no row (and is not sent at all on SQLite).

    Parameters are named (`%(name)s`, bound from a dict): Django's SQLite cursor turns positional `%s` into
    `?` with a regular expression over the whole statement on every execution, which cost more than the
    INSERT itself; named ones are one `%` formatting (bench/mcp_throughput.py)."""
    quote = connection.ops.quote_name

    names = ", ".join(column(CallLog, name) for name in _RECORD_COLUMNS)
    values = ", ".join(f"%({name})s" for name in _RECORD_COLUMNS)
    insert = f"INSERT INTO {quote(CallLog._meta.db_table)} ({names}) VALUES ({values})"
    use_count, last_used = column(Tool, "use_count"), column(Tool, "last_used")
    use = (
        f"UPDATE {quote(Tool._meta.db_table)} SET {use_count} = {use_count} + 1, {last_used} = %(used_at)s"
        f" WHERE {column(Tool, 'id')} = %(used_tool)s"
    )
    touch = (
        f"UPDATE {quote(ApiKey._meta.db_table)} SET {column(ApiKey, 'last_used_at')} = %(touched_at)s"
        f" WHERE {column(ApiKey, 'id')} = %(touched_key)s"
    )
    touching = f"WITH used AS ({use} RETURNING 1), touched AS ({touch} RETURNING 1) {insert}"
    combined = (touching, f"WITH used AS ({use} RETURNING 1) {insert}")
    return use, touch, insert, combined if vendor == "postgresql" else None


def _write(
    caller: Caller, outcome: CallOutcome, row: _Row, at: datetime, details: _Details, *, count_use: bool,
    touch_key: bool,
) -> None:  # fmt: skip
    error = outcome.error
    sent, got = details.arguments, details.result
    when = connection.ops.adapt_datetimefield_value(at)
    use: dict[str, Any] = {"used_at": when, "used_tool": row.tool_id if count_use else None}
    touch: dict[str, Any] = {"touched_at": when, "touched_key": row.api_key_id if touch_key else None}
    values: dict[str, Any] = {
        "surface": str(caller.surface),
        "user": row.user_id,
        "mcp_instance": row.instance_id,
        "tool": row.tool_id,
        "tool_name": _loggable(outcome.name),
        "api_key": row.api_key_id,
        "owner": row.owner_id,
        "status": str(CallStatus.OK if error is None else CallStatus.ERROR),
        "error_code": "" if error is None else str(error.code)[:40],
        "error_message": details.error_message,
        "duration_ms": round(outcome.duration_ms, 3),
        "created_at": when,
        "oauth_client": caller.oauth_client[:255],
        "arguments": "" if sent is None else sent.text,
        "arguments_truncated": sent is not None and sent.truncated,
        "result_excerpt": "" if got is None else got.text,
        "result_truncated": got is not None and got.truncated,
        "recorded_bytes": details.size,
        "notes": current_note(),
    }
    use_sql, touch_sql, insert_sql, combined = _record_sql(connection.vendor)
    with connection.cursor() as cursor:
        if combined is not None and row.logged:
            if touch_key:
                cursor.execute(_unflushed(combined[0]), {**use, **touch, **values})
            else:
                cursor.execute(_unflushed(combined[1]), {**use, **values})
            return
        if use["used_tool"] is not None:
            cursor.execute(use_sql, use)
        if touch["touched_key"] is not None:
            cursor.execute(touch_sql, touch)
        if row.logged:
            cursor.execute(insert_sql, values)


# Prefixed to a record committed by itself (simple query protocol: both statements run as one implicit transaction).
ASYNC_COMMIT = "SET LOCAL synchronous_commit TO OFF; "


def _unflushed(statement: str) -> str:
    """`statement` committed without waiting for the WAL flush when it is a transaction of its own on PostgreSQL:
    the record of a call that changed no table data (a read, a refusal, a failed or rolled-back write).

    What that risks is the call log alone: the record, the tool's use count and last use, the key's last use.
    A crash of PostgreSQL itself (not of toolhub) can lose the records committed in the last moments before it
    (at most 3 x wal_writer_delay, 600 ms by default), never table data or history, and never out of order: the
    database stays consistent (PostgreSQL's asynchronous commit). Each read's record otherwise waited for an
    fdatasync of its own (about 5 ms on a shared disk, more than the read: bench/README.md). Inside a
    transaction (a write's change and its record, or a caller's atomic block) nothing is prefixed: the record
    then commits with data that must be durable, and the transaction's own setting holds.

    SET LOCAL needs a transaction block: Django's psycopg cursors bind parameters client-side and send the two
    statements in one simple-protocol message, which PostgreSQL runs as one implicit transaction, so the setting
    ends with it, never the connection's (as records.engine_cursor sends a statement's timeout)."""
    if connection.in_atomic_block or not connection.get_autocommit():
        return statement
    return ASYNC_COMMIT + statement


def _existing(model: Any, pk: int | None) -> bool:
    """Whether row `pk` exists, locked FOR KEY SHARE until the transaction ends (the lock a foreign-key check
    takes): a delete in progress is waited for, and none can start before the row referring to it is in."""
    if pk is None:
        return False
    return bool(key_share(model._base_manager.filter(pk=pk).values_list("pk")))


def _as_now(row: _Row) -> _Row:
    """`row` as the foreign keys' on_delete makes it for what was deleted since the call was resolved: a
    deleted tool, key or caller leaves the row without it (SET_NULL); a deleted instance or owner takes its
    calls with it (CASCADE: not `logged`), though the tool, if it is still there, was used all the same.
    Locks in the delete services' order (keys, then instances; tools; users last), so a delete and this
    read never deadlock."""
    key_live = _existing(ApiKey, row.api_key_id)
    instance_live = row.instance_id is None or _existing(McpInstance, row.instance_id)
    tool_live = _existing(Tool, row.tool_id)
    users = get_user_model()
    owner_live = _existing(users, row.owner_id)
    user_live = _existing(users, row.user_id)
    return replace(
        row,
        tool_id=row.tool_id if tool_live else None,
        api_key_id=row.api_key_id if key_live else None,
        user_id=row.user_id if user_live else None,
        logged=instance_live and owner_live,
    )


def _loggable(name: str) -> str:
    """A name as the call log keeps it: unprintable characters escaped, 64 characters at most."""
    if name.isprintable():
        return name[:64]
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in name)[:64]
