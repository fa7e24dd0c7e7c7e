"""Slow table queries on fields without an index, made visible (docs/tables-at-scale.md, "Indexes").

Whoever runs a compiled query (tools_app.data_access.sql_query.run_sql) times it and reports it, whether it
answered or was stopped (its budget, a cancellation, the answer's bounds):

    slow = observe_query(query, indexed_fields=table.indexed_fields, duration_ms=elapsed)

and whoever evaluates a query over records read in chunks (tools_app.data_access.streamed) reports the fields its
plan filters or sorts the records on (streamed.Plan.filtered_fields) the same way:

    slow = observe_fields(plan.filtered_fields, indexed_fields=table.indexed_fields, duration_ms=elapsed)

When the read took over TOOLHUB_SLOW_QUERY_MS and filtered or sorted on record fields the table does
not declare (plan.filtered_fields), each such field is counted in `toolhub_slow_queries_total{field=...}`, and
the call in progress (the pipeline's `watching()` block) keeps the suggestion for its call-log row
(CallLog.notes): "declare `f` in indexed_fields". A query whose fields are all indexed is not reported: an
index was there to use.
"""

from collections.abc import Collection
from contextvars import ContextVar
from dataclasses import dataclass

from tools_app.data_access.sql.plan import filtered_fields
from tools_app.data_access.sql_query import SqlQuery
from tools_app.kernel.limits import SLOW_QUERY_MAX_NOTE_CHARS, SLOW_QUERY_MS
from tools_app.kernel.telemetry.metrics import slow_query

__all__ = [
    "CallNotes",
    "SlowQuery",
    "current_note",
    "observe_fields",
    "observe_query",
    "slow_query_ms",
    "suggestion",
    "watching",
]


def slow_query_ms() -> float:
    """TOOLHUB_SLOW_QUERY_MS: a read slower than this, filtering or sorting on an unindexed field, is reported."""
    return SLOW_QUERY_MS.get()


@dataclass(frozen=True)
class SlowQuery:
    fields: tuple[str, ...]  # the unindexed fields it filtered or sorted on, sorted
    duration_ms: float

    @property
    def note(self) -> str:
        return suggestion(self.fields, self.duration_ms)


def suggestion(fields: Collection[str], duration_ms: float) -> str:
    """The call log's note: which fields to declare."""
    named = ", ".join(f"`{name}`" for name in sorted(fields))
    return (
        f"A table query took {duration_ms:.0f} ms filtering or sorting on {named} without an index: "
        f"declare {named} in the table's indexed_fields."
    )[:SLOW_QUERY_MAX_NOTE_CHARS]


class CallNotes(list[SlowQuery]):
    """What one call's queries reported, in order (the first slow query's note is the call's). A list, made
    without a Python call: every call makes one."""

    __slots__ = ()

    @property
    def text(self) -> str:
        if not self:
            return ""
        fields = sorted({name for query in self for name in query.fields})
        return suggestion(fields, max(query.duration_ms for query in self))


_CURRENT: ContextVar[CallNotes | None] = ContextVar("toolhub_call_notes", default=None)


class watching:  # noqa: N801 (used as a function: `with watching() as notes`)
    """Collect the reports of the queries run inside the block (one tool call): the pipeline wraps a call in it
    and writes `current_note()` into the call's log row. A class, not a generator: every call enters it."""

    __slots__ = ("notes", "_token")

    def __enter__(self) -> CallNotes:
        notes = self.notes = CallNotes()
        self._token = _CURRENT.set(notes)
        return notes

    def __exit__(self, *exc_info: object) -> None:
        _CURRENT.reset(self._token)


def current_note() -> str:
    """The note for the call in progress ("" when no slow query on an unindexed field was reported)."""
    notes = _CURRENT.get()
    return notes.text if notes else ""


def observe_query(query: SqlQuery, *, indexed_fields: Collection[str], duration_ms: float) -> SlowQuery | None:
    """Report a compiled query that ran for `duration_ms`: the SlowQuery (counted, and kept for the call in
    progress) when it is slow and filtered or sorted on fields outside `indexed_fields`; else None."""
    if duration_ms <= slow_query_ms():
        return None
    return observe_fields(filtered_fields(query.plan), indexed_fields=indexed_fields, duration_ms=duration_ms)


def observe_fields(fields: Collection[str], *, indexed_fields: Collection[str], duration_ms: float) -> SlowQuery | None:
    """Report a read that ran for `duration_ms` filtering or sorting the records on `fields`: as observe_query."""
    if duration_ms <= slow_query_ms():
        return None
    unindexed = tuple(sorted(set(fields) - set(indexed_fields)))
    if not unindexed:
        return None
    for name in unindexed:
        slow_query(name)
    slow = SlowQuery(unindexed, duration_ms)
    notes = _CURRENT.get()
    if notes is not None:
        notes.append(slow)
    return slow
