"""Every per-call budget, and where its value comes from (docs/budgets.md).

- Evaluation budgets (`limits_for`): CPU time, elements and bytes one call may use while it evaluates,
  plus the length and nesting of a JMESPath expression. The server defaults are settings
  (TOOLHUB_QUERY_*); an MCP instance may override the first three (McpInstance.query_cpu_ms,
  query_max_elements, query_max_bytes); API and admin calls have no instance and use the defaults.
  Enforced during evaluation by tools_app.data_access.budget (QUERY_TOO_EXPENSIVE).
- Concurrency (`call_slots`): how many expensive calls one API key, and one user, may run at once in this
  process (TOOLHUB_CONCURRENT_CALLS_PER_KEY / _PER_USER). A call takes a slot when its evaluation becomes
  heavy (data_access.budget.YIELD_AFTER_MS of CPU; light calls, the vast majority, never count, so they keep
  their throughput); over the limit it waits up to TOOLHUB_CONCURRENCY_WAIT_MS for a slot, then is refused
  with RATE_LIMITED naming the limit. Wired by the call pipeline into every call's budget, so it holds on
  MCP, the API and the admin alike.
- Heavy callers (`CallSlots.yield_after_ms`): a caller (its API key, else its user) one of whose calls became
  heavy or went over its budget within the last HEAVY_MEMORY_SECONDS is a heavy caller: its evaluations are
  heavy after data_access.budget.SUSPECT_YIELD_AFTER_MS of CPU instead of YIELD_AFTER_MS, so a flooding
  caller's expensive queries leave the server's interpreter for the heavy worker (tools_app.execution.heavy) within
  ~2 ms while every other caller keeps the long threshold (docs/budgets.md has the measurements).

The result budget sent to clients (max_result_bytes, RESULT_TOO_LARGE, paging) and request rates are not
here: they are the pipeline's classification and the transports' throttles.
"""

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tools_app.data_access.budget import SUSPECT_YIELD_AFTER_MS, Limits, waiting
from tools_app.kernel import limits, telemetry
from tools_app.kernel.errors import ErrorCode, ToolError

__all__ = ["HEAVY_MEMORY_SECONDS", "CallSlots", "call_slots", "default_limits", "limits_for"]

HEAVY_MEMORY_SECONDS = 10.0  # how long a caller counts as heavy after one of its calls was
MAX_HEAVY_CALLERS = 10_000  # heavy callers remembered at once (the oldest is forgotten first)

_clock = time.monotonic


def default_limits() -> Limits:
    """The server's evaluation limits (settings), for calls without an instance and direct executions."""
    return Limits(
        cpu_ms=limits.QUERY_CPU_MS.get(),
        max_elements=limits.QUERY_MAX_ELEMENTS.get(),
        max_bytes=limits.QUERY_MAX_BYTES.get(),
        max_query_length=limits.QUERY_MAX_LENGTH.get(),
        max_query_depth=limits.QUERY_MAX_DEPTH.get(),
    )


def limits_for(target: Any) -> Limits:
    """The limits of a call to `target` (a CallTarget): its instance's overrides over the server defaults."""
    defaults = default_limits()
    cpu_ms = getattr(target, "query_cpu_ms", None)
    max_elements = getattr(target, "query_max_elements", None)
    max_bytes = getattr(target, "query_max_bytes", None)
    if cpu_ms is None and max_elements is None and max_bytes is None:
        return defaults
    return Limits(
        cpu_ms=cpu_ms or defaults.cpu_ms,
        max_elements=max_elements or defaults.max_elements,
        max_bytes=max_bytes or defaults.max_bytes,
        max_query_length=defaults.max_query_length,
        max_query_depth=defaults.max_query_depth,
    )


class CallSlots:
    """Calls running at once per API key and per user, in this process; see the module docstring."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._running: dict[tuple[str, int], int] = {}
        self._heavy_lock = threading.Lock()
        self._heavy_until: dict[tuple[str, int], float] = {}  # insertion order is expiry order

    @staticmethod
    def _caller(user_id: int | None, api_key_id: int | None) -> tuple[str, int] | None:
        if api_key_id is not None:
            return ("api_key", api_key_id)
        if user_id is not None:
            return ("user", user_id)
        return None

    def remember_heavy(self, *, user_id: int | None, api_key_id: int | None) -> None:
        """Count the caller as heavy for HEAVY_MEMORY_SECONDS: one of its calls became heavy or went over budget."""
        caller = self._caller(user_id, api_key_id)
        if caller is None:
            return
        now = _clock()
        with self._heavy_lock:
            remembered = self._heavy_until
            remembered.pop(caller, None)
            while remembered and (len(remembered) >= MAX_HEAVY_CALLERS or next(iter(remembered.values())) < now):
                del remembered[next(iter(remembered))]
            remembered[caller] = now + HEAVY_MEMORY_SECONDS

    def forget_heavy_callers(self) -> None:
        with self._heavy_lock:
            self._heavy_until.clear()

    def yield_after_ms(self, *, user_id: int | None, api_key_id: int | None) -> float | None:
        """The CPU time after which this caller's evaluations are heavy: SUSPECT_YIELD_AFTER_MS for a heavy
        caller (remember_heavy), else None (the budget's default, YIELD_AFTER_MS)."""
        caller = self._caller(user_id, api_key_id)
        until = self._heavy_until.get(caller) if caller is not None else None
        if until is None or until < _clock():
            return None
        return SUSPECT_YIELD_AFTER_MS

    @staticmethod
    def _wanted(user_id: int | None, api_key_id: int | None) -> list[tuple[str, int, int]]:
        wanted = []
        if api_key_id is not None:
            wanted.append(("api_key", api_key_id, limits.CONCURRENT_CALLS_PER_KEY.get()))
        if user_id is not None:
            wanted.append(("user", user_id, limits.CONCURRENT_CALLS_PER_USER.get()))
        return wanted

    def on_heavy(self, *, user_id: int | None, api_key_id: int | None) -> Callable[[], Callable[[], None]]:
        """The budget hook of one call: when its evaluation becomes heavy, take its slots (or raise
        RATE_LIMITED after the wait); returns what gives them back."""

        def take() -> Callable[[], None]:
            self.remember_heavy(user_id=user_id, api_key_id=api_key_id)
            slot = self.held(user_id=user_id, api_key_id=api_key_id)
            slot.__enter__()

            def give_back() -> None:
                slot.__exit__(None, None, None)

            return give_back

        return take

    @contextmanager
    def held(self, *, user_id: int | None, api_key_id: int | None) -> Iterator[None]:
        """Hold a slot of the key and of the user while the block runs; ToolError(RATE_LIMITED) when none
        frees up within TOOLHUB_CONCURRENCY_WAIT_MS (raised before the block runs)."""
        wanted = self._wanted(user_id, api_key_id)
        wait_ms = limits.CONCURRENCY_WAIT_MS.get()
        deadline = time.monotonic() + wait_ms / 1000
        with self._changed:
            while True:
                full = next((slot for slot in wanted if self._running.get(slot[:2], 0) >= slot[2]), None)
                if full is None:
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    telemetry.rate_limited(f"concurrent_{full[0]}")
                    raise _busy(full[0], full[2], wait_ms)
                with waiting():
                    self._changed.wait(remaining)
            for scope, ident, _limit in wanted:
                self._running[scope, ident] = self._running.get((scope, ident), 0) + 1
        try:
            yield
        finally:
            with self._changed:
                for scope, ident, _limit in wanted:
                    left = self._running[scope, ident] - 1
                    if left:
                        self._running[scope, ident] = left
                    else:
                        del self._running[scope, ident]
                self._changed.notify_all()

    def running(self, scope: str, ident: int) -> int:
        with self._changed:
            return self._running.get((scope, ident), 0)


_SETTING = {"api_key": "TOOLHUB_CONCURRENT_CALLS_PER_KEY", "user": "TOOLHUB_CONCURRENT_CALLS_PER_USER"}
_WHO = {"api_key": "this API key", "user": "this user"}


def _busy(scope: str, limit: int, wait_ms: int) -> ToolError:
    message = (
        f"Too many expensive calls at once for {_WHO[scope]}: its concurrency limit is {limit} expensive calls "
        f"running at the same time ({_SETTING[scope]}), and none finished within {wait_ms} ms. Wait for a call to "
        "finish, then try again; make queries cheaper (filter first, select fewer fields) so that they finish "
        "sooner."
    )
    return ToolError(
        ErrorCode.RATE_LIMITED, message, {"limit": limit, "scope": scope, "setting": _SETTING[scope], "retry_after": 1}
    )


call_slots = CallSlots()
