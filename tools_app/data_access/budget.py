"""Per-call evaluation budgets: CPU time and the logical size of what an evaluation builds or walks.

A budget is entered around one call (`enforced(limits)`, by the call pipeline, or by
tool_types.execute with the server defaults when nothing entered one) and read, through a thread-local,
by whatever evaluates for that call: the JMESPath closures (jmespath_compiler), the data operations
(select, preview) and the registry's loops. They report work as it happens (`charge`), and the budget
stops the call with ToolError(QUERY_TOO_EXPENSIVE) as soon as a limit is passed:

- cpu_ms: the CPU time of the calling thread since the budget was entered (time.thread_time), and, as a
  backstop, the elapsed time since the call began, which may exceed it by WALL_GRACE (on a busy machine a
  call's CPU time grows slower than the time its caller waits: the caller still gets its answer in time),
  checked every CHECK_EVERY units of work, so a stopped evaluation stops consuming CPU within milliseconds;
- max_elements: the elements (list items, object members, containers) the evaluation may build in all,
  and the logical size of any value that is walked whole (a final result, the argument of to_string);
- max_bytes: the logical JSON size of a value walked whole, and of the strings functions build.

"Logical" counts a value shared by several references once per reference, as json.dumps, sorting or
comparing would walk it: `[@,@]|[@,@]|...` builds a few small lists of shared references, but is 2^n
times its input once walked. `measure` sizes such a graph in time linear in its distinct containers
(memoized by id) and stops as soon as it is over the limit, before any C function (json.dumps, sorted,
list equality) gets to walk it uninterruptibly.

Isolation: an evaluation that has used YIELD_AFTER_MS of CPU is heavy (a caller whose
calls were heavy a moment ago: SUSPECT_YIELD_AFTER_MS, tools_app.execution.call_limits decides). Becoming heavy
calls the budget's `on_heavy` hook once (the pipeline's concurrency slot of the caller, which may refuse
with RATE_LIMITED), and from then on it runs only while it holds the one heavy lane of the process,
giving it up (and the GIL: sleep(HEAVY_PAUSE)) every TURN_MS of CPU. So however many heavy calls run at
once, one at a time executes Python, and the event loop and the threads of light calls compete for the
GIL with that one only; time spent waiting for the lane counts against the call's elapsed-time backstop
(docs/budgets.md has the measurements behind these choices).
"""

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

from tools_app.kernel.errors import ErrorCode, ToolError
from tools_app.kernel.limits import QUERY_MAX_DEPTH, QUERY_MAX_LENGTH

__all__ = [
    "DEFAULT_QUERY_DEPTH",
    "DEFAULT_QUERY_LENGTH",
    "Limits",
    "MoveElsewhere",
    "QueryBudget",
    "active",
    "charge",
    "enforced",
    "measure",
    "on_wait",
    "is_over_evaluated_bytes",
    "over_evaluated_bytes",
    "too_expensive",
    "waiting",
]

CHECK_EVERY = 5_000  # units of work between two looks at the clocks (one look costs ~0.5 µs)
DEFAULT_QUERY_LENGTH = QUERY_MAX_LENGTH.default  # characters of a JMESPath expression
DEFAULT_QUERY_DEPTH = QUERY_MAX_DEPTH.default  # levels of its parsed tree
YIELD_AFTER_MS = 20.0  # an evaluation that has run this long releases the GIL at every check
SUSPECT_YIELD_AFTER_MS = (
    2.0  # the same for a caller whose calls were heavy just before (tools_app.execution.call_limits)
)
WALL_GRACE = 0.25  # seconds of elapsed time a call may take beyond its CPU budget (waits, a busy machine)
TURN_MS = 5.0  # CPU milliseconds a heavy evaluation runs before it takes its turn in the heavy lane
HEAVY_PAUSE = 0.0  # sleep(0): releases the GIL to waiting threads without giving up the CPU (docs/budgets.md)

_thread_time = time.thread_time
_monotonic = time.monotonic
_sleep = time.sleep


@dataclass(frozen=True, slots=True)
class Limits:
    """One call's evaluation limits (tools_app.execution.call_limits builds them from the settings and the instance)."""

    cpu_ms: int
    max_elements: int
    max_bytes: int
    max_query_length: int = DEFAULT_QUERY_LENGTH
    max_query_depth: int = DEFAULT_QUERY_DEPTH


_HOW_TO_NARROW = (
    "Narrow the query: filter before projecting ([?field == `value`]), select only the fields needed "
    "({a: a, b: b}), or take a slice ([:100])"
)


def too_expensive(limit: str, value: int | float, unit: str, extra: str = "") -> ToolError:
    """QUERY_TOO_EXPENSIVE naming the limit that was passed and how to narrow the call."""
    message = f"The call was stopped: it went over its {limit} of {value:,} {unit}{extra}. {_HOW_TO_NARROW}."
    return ToolError(ErrorCode.QUERY_TOO_EXPENSIVE, message, {"limit": limit, "value": value, "unit": unit})


def over_evaluated_bytes(limit: int) -> ToolError:
    """QUERY_TOO_EXPENSIVE of a read of a rows table that needs more than `limit` bytes of record JSON in the server
    (TOOLHUB_MAX_EVALUATED_BYTES): records gathered for the evaluator, or a compiled statement's answer received."""
    return ToolError(
        ErrorCode.QUERY_TOO_EXPENSIVE,
        f"This read needs more than {limit} bytes of records evaluated in the server (TOOLHUB_MAX_EVALUATED_BYTES): "
        "narrow it with a filter that compiles to SQL (comparisons on fields), or page it.",
        {"limit": limit},
    )


def is_over_evaluated_bytes(error: ToolError) -> bool:
    """`error` is over_evaluated_bytes's refusal (not a time or count budget's, whose details say their unit)."""
    return error.code == ErrorCode.QUERY_TOO_EXPENSIVE and set(error.details) == {"limit"}


class MoveElsewhere(BaseException):
    """Raised out of an evaluation that became heavy while its budget was `movable()`: whoever made it
    movable (tools_app.execution.heavy) runs it again in the process for expensive evaluations. A BaseException, so
    that no evaluator's `except Exception` takes it for a failure of the query."""


class QueryBudget:
    """The budget of one call: counts work (`charge`), checks the thread's CPU time every CHECK_EVERY units."""

    __slots__ = (
        "limits",
        "spent",
        "bytes_spent",
        "_work",
        "_next_check",
        "_started",
        "_cpu_deadline",
        "_wall_started",
        "_wall_deadline",
        "_yield_at",
        "_in_lane",
        "_on_heavy",
        "_release",
        "_movable",
        "_cpu_before",
        "_yield_after",
    )

    def __init__(
        self,
        limits: Limits,
        *,
        since: float | None = None,
        on_heavy: Callable[[], Callable[[], None]] | None = None,
        cpu_used_ms: float = 0.0,
        yield_after_ms: float | None = None,
    ) -> None:
        self.limits = limits
        self.spent = 0
        self.bytes_spent = 0
        self._work = 0
        self._next_check = CHECK_EVERY
        self._cpu_before = (
            cpu_used_ms / 1000
        )  # CPU spent on this call in another process before (tools_app.execution.heavy)
        self._started = _thread_time()
        self._cpu_deadline = self._started + limits.cpu_ms / 1000 - self._cpu_before
        self._wall_started = _monotonic() if since is None else since
        self._wall_deadline = self._wall_started + limits.cpu_ms / 1000 + WALL_GRACE
        yield_after = YIELD_AFTER_MS if yield_after_ms is None else min(YIELD_AFTER_MS, yield_after_ms)
        self._yield_after = yield_after / 1000
        self._yield_at = self._started + self._yield_after
        self._in_lane = False
        self._on_heavy = on_heavy
        self._release: Callable[[], None] | None = None
        self._movable = False

    def restart_clocks(self) -> None:
        """Count time from now: what came before (loading and parsing the table) was not the evaluation's."""
        started, wall = _thread_time(), _monotonic()
        self._started, self._wall_started = started, wall
        self._cpu_deadline = started + self.limits.cpu_ms / 1000 - self._cpu_before
        self._wall_deadline = wall + self.limits.cpu_ms / 1000 + WALL_GRACE
        self._yield_at = started + self._yield_after

    def charge(self, elements: int) -> None:
        """Count `elements` built; over max_elements, or out of CPU time at a check, is QUERY_TOO_EXPENSIVE."""
        self.spent += elements
        if self.spent > self.limits.max_elements:
            raise too_expensive("element budget", self.limits.max_elements, "elements built")
        self._work += elements
        if self._work >= self._next_check:
            self.check_time()

    def tick(self, work: int) -> None:
        """Count `work` units that build nothing (walking, sizing, string building): only the clocks are checked."""
        self._work += work
        if self._work >= self._next_check:
            self.check_time()

    def charge_bytes(self, size: int) -> None:
        """Count `size` bytes of strings built (join, to_string): together at most max_bytes."""
        self.bytes_spent += size
        if self.bytes_spent > self.limits.max_bytes:
            raise too_expensive("size budget", self.limits.max_bytes, "bytes of strings built")
        self.tick(size >> 6)  # building a string costs about one unit per 64 bytes

    def check_time(self) -> None:
        """QUERY_TOO_EXPENSIVE once the thread's CPU time, or the time since the call began, is over cpu_ms;
        after its yield threshold (YIELD_AFTER_MS) of CPU, take a turn in the heavy lane every TURN_MS."""
        self._next_check = self._work + CHECK_EVERY
        now = _thread_time()
        wall = _monotonic()
        if now > self._cpu_deadline or wall > self._wall_deadline:
            used, waited = round((now - self._started) * 1000), round((wall - self._wall_started) * 1000)
            raise too_expensive(
                "CPU-time budget", self.limits.cpu_ms, "ms", f" (used {used:,} ms of CPU in {waited:,} ms)"
            )
        if now > self._yield_at:
            self._yield_at = now + TURN_MS / 1000
            self._take_turn(wall)

    def _take_turn(self, wall: float) -> None:
        """A heavy evaluation's turn in the heavy lane: give it up and the GIL, then wait for it again."""
        if self._on_heavy is not None:
            on_heavy, self._on_heavy = self._on_heavy, None
            self._release = on_heavy()  # may raise (RATE_LIMITED): the evaluation stops here
        if self._movable:
            self._movable = False
            raise MoveElsewhere
        if self._in_lane:
            _heavy_lane.release()
            self._in_lane = False
            _sleep(HEAVY_PAUSE)  # the GIL goes to a waiting thread: a light call, the event loop, another heavy call
        if not _heavy_lane.acquire(blocking=False):
            with waiting():
                acquired = _heavy_lane.acquire(timeout=max(0.0, self._wall_deadline - wall))
        else:
            acquired = True
        if not acquired:
            waited = round((_monotonic() - self._wall_started) * 1000)
            raise too_expensive(
                "CPU-time budget", self.limits.cpu_ms, "ms", f" (spent {waited:,} ms, waiting behind other heavy calls)"
            )
        self._in_lane = True

    def leave(self) -> None:
        """Give up the heavy lane and the heavy call's slot when the call ends (enforced() calls it)."""
        if self._in_lane:
            self._in_lane = False
            _heavy_lane.release()
        if self._release is not None:
            release, self._release = self._release, None
            release()

    @contextmanager
    def movable(self) -> Iterator[None]:
        """Inside the block, becoming heavy raises MoveElsewhere (once) instead of taking the heavy lane."""
        self._movable = True
        try:
            yield
        finally:
            self._movable = False

    def remaining_ms(self) -> float:
        """What is left of the call's time: the lesser of its CPU budget (a statement the database engine runs
        for the call spends it, while the calling thread waits) and of its elapsed-time deadline."""
        return min(self._cpu_deadline - _thread_time(), self._wall_deadline - _monotonic()) * 1000

    @property
    def wall_started(self) -> float:
        """When the evaluation's elapsed time began (time.monotonic(): the same clock in every process)."""
        return self._wall_started

    @property
    def wall_deadline(self) -> float:
        return self._wall_deadline

    def ensure_size(self, value: Any, what: str = "value") -> None:
        """Refuse `value` when its logical size is over max_elements or max_bytes (see `measure`)."""
        measure(value, self, what)

    @property
    def cpu_used_ms(self) -> float:
        return (_thread_time() - self._started + self._cpu_before) * 1000


_heavy_lane = threading.Lock()


class _Active(threading.local):
    budget: QueryBudget | None = None


_active = _Active()


def active() -> QueryBudget | None:
    """The budget entered on this thread, or None (then nothing is checked: a direct, trusted evaluation)."""
    return _active.budget


class _Waits(threading.local):
    hook: Callable[[], AbstractContextManager[None]] | None = None


_waits = _Waits()


def on_wait(hook: Callable[[], AbstractContextManager[None]] | None) -> None:
    """Set what this thread does around its waits inside a call (`waiting`): the MCP database threads lend
    their place to another thread meanwhile (mcp_app.hops)."""
    _waits.hook = hook


@contextmanager
def waiting() -> Iterator[None]:
    """Around a wait of a call for what other calls hold: a concurrency slot (tools_app.execution.call_limits),
    the heavy lane, a heavy worker (tools_app.execution.heavy). Runs the thread's `on_wait` hook, if any."""
    hook = _waits.hook
    if hook is None:
        yield
        return
    with hook():
        yield


def charge(elements: int) -> None:
    """Charge `elements` of work to the budget active on this thread, if any (QueryBudget.charge)."""
    budget = _active.budget
    if budget is not None:
        budget.charge(elements)


@contextmanager
def enforced(
    limits: Limits,
    *,
    since: float | None = None,
    on_heavy: Callable[[], Callable[[], None]] | None = None,
    cpu_used_ms: float = 0.0,
    yield_after_ms: float | None = None,
) -> Iterator[QueryBudget]:
    """Enter a budget for the calls made on this thread inside the block; the outer one is restored after.
    `since` (time.monotonic()) is when the call began, if earlier: its wall-clock time counts from then.
    `on_heavy` is called once if the evaluation becomes heavy; what it returns is called when the block ends.
    `cpu_used_ms`: CPU time the call already spent elsewhere (another process), deducted from its budget.
    `yield_after_ms`: CPU time after which the evaluation is heavy, if shorter than YIELD_AFTER_MS."""
    outer = _active.budget
    budget = QueryBudget(limits, since=since, on_heavy=on_heavy, cpu_used_ms=cpu_used_ms, yield_after_ms=yield_after_ms)
    _active.budget = budget
    try:
        yield budget
    finally:
        budget.leave()
        _active.budget = outer


# Logical JSON bytes of scalars, as json.dumps writes them (close enough to compare with a limit).
_SCALAR_BYTES = {bool: 5, type(None): 4, int: 8, float: 12}


def measure(value: Any, budget: QueryBudget, what: str = "value") -> tuple[int, int]:
    """The logical (elements, bytes) of `value`, each shared container counted once per reference.

    Linear in the distinct containers (sizes are memoized by id); raises QUERY_TOO_EXPENSIVE as soon as a
    total passes the budget's max_elements or max_bytes, and checks the CPU time as it goes.
    """
    limits = budget.limits
    max_elements, max_bytes = limits.max_elements, limits.max_bytes
    kind = type(value)
    if kind is not list and kind is not dict:
        size = len(value) + 2 if kind is str else _SCALAR_BYTES.get(kind, 8)
        if size > max_bytes:
            raise too_expensive("size budget", max_bytes, "bytes", f" ({what} is larger)")
        return 1, size
    sizes: dict[int, tuple[int, int]] = {}
    visited = [0]

    def over(limit: str, maximum: int, unit: str) -> ToolError:
        return too_expensive(limit, maximum, unit, f" ({what} is larger)")

    def size_of(node: Any) -> tuple[int, int]:
        known = sizes.get(id(node))
        if known is not None:
            return known
        if len(node) > max_elements:
            raise over("element budget", max_elements, "elements")
        elements, size = 1, 2
        if type(node) is dict:
            for name in node:
                size += len(name) + 4
            children: Any = node.values()
        else:
            children = node
        for child in children:
            kind = type(child)
            if kind is str:
                elements += 1
                size += len(child) + 3
            elif kind is list or kind is dict:
                child_elements, child_size = size_of(child)
                elements += child_elements
                size += child_size + 1
                if elements > max_elements:
                    raise over("element budget", max_elements, "elements")
                if size > max_bytes:
                    raise over("size budget", max_bytes, "bytes")
            else:
                elements += 1
                size += _SCALAR_BYTES.get(kind, 8) + 1
        if elements > max_elements:
            raise over("element budget", max_elements, "elements")
        if size > max_bytes:
            raise over("size budget", max_bytes, "bytes")
        sizes[id(node)] = (elements, size)  # every node stays alive inside `value`, so no id is reused
        visited[0] += len(node) + 1
        if visited[0] >= 1_000:
            budget.tick(visited[0])
            visited[0] = 0
        return elements, size

    try:
        sized = size_of(value)
        budget.tick(visited[0])
        return sized
    except RecursionError:
        raise over("nesting limit", sys.getrecursionlimit(), "levels") from None
