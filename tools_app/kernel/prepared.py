"""The statement every MCP tools/call starts with, kept planned on PostgreSQL (docs/architecture.md, "A tools/call's
statements").

A tools/call's lookup (tools_app.selectors.binding_call_target) joins six tables and finds each row by its key:
PostgreSQL spends several times longer planning it than running it. Django's psycopg backend binds parameters
on the client and turns psycopg's prepared statements off (prepare_threshold None, so that poolers work); here
the statement goes through a server-binding cursor with `prepare=True`, so each connection parses and plans it
once and then only binds and runs it. Every other statement is untouched: the connection's prepare_threshold is
only set for the duration of this execute, so psycopg never counts (or keeps the text of) any other query.

A prepared statement can go stale under a running server: a migration that changes the type of a column it
returns makes PostgreSQL refuse it ("cached plan must not change result type"), and a DISCARD ALL that psycopg
did not see (a pooler in transaction mode) drops it. Either error is answered by running the statement
unprepared, and by changing the statement's text for the next executions (a comment with a generation number),
so that psycopg prepares it again instead of asking for the stale one. TOOLHUB_PREPARED_STATEMENTS=false turns
this off (a pooler in transaction mode that does not keep prepared statements). SQLite, and a statement inside a
transaction (atomic: a test's, where an error would abort the caller's transaction), run it as before.
"""

import functools
import itertools
from typing import Any, NamedTuple

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.backends.base.base import BaseDatabaseWrapper

from tools_app.kernel.limits import PREPARED_STATEMENTS

__all__ = ["fetch_one"]

# SQLSTATEs of a stale prepared statement: its result type changed (feature_not_supported), or it is gone
# (invalid_sql_statement_name).
STALE = frozenset({"0A000", "26000"})

_generations = itertools.count(1)
_generation = 0


def fetch_one(sql: str, params: dict[str, Any]) -> tuple | None:
    """The first row of `sql` (named `%(name)s` parameters), as a plain Django cursor would return it."""
    db = connections[DEFAULT_DB_ALIAS]  # the proxy `connection` looks it up again at each attribute
    if db.vendor != "postgresql" or db.in_atomic_block or not PREPARED_STATEMENTS.get():
        with db.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchone()
    generation = _generation
    text = f"{sql} /* toolhub {generation} */" if generation else sql
    try:
        return _fetch_prepared(db, text, params, prepare=True)
    except DatabaseError as error:
        if getattr(error.__cause__, "sqlstate", None) not in STALE:
            raise
        _stale(generation)
        return _fetch_prepared(db, text, params, prepare=False)


def _stale(generation: int) -> None:
    """The statement of `generation` is stale on some connection: later executions use a new text."""
    global _generation
    if _generation == generation:
        _generation = next(_generations)


def _fetch_prepared(db: BaseDatabaseWrapper, sql: str, params: dict[str, Any], *, prepare: bool) -> tuple | None:
    # What db.cursor() does (its health check, the thread check), then Django's wrapper around the cursor:
    # its error translation, its query log when on (CaptureQueriesContext) and its execute wrappers (tracing).
    db.close_if_health_check_failed()
    db.ensure_connection()
    db.validate_thread_sharing()
    raw = db.connection
    with db.wrap_database_errors:
        cursor = _preparing_cursor(db, raw, prepare)
    wrapped = _postgresql().debug_wrapper(cursor, db) if db.queries_logged else db.make_cursor(cursor)
    threshold = raw.prepare_threshold
    if threshold is None:
        # psycopg prepares nothing while it is None; set for this execute only, so no other query is counted.
        raw.prepare_threshold = PREPARE_THRESHOLD
    try:
        with wrapped:
            wrapped.execute(sql, params)
            return wrapped.fetchone()
    finally:
        raw.prepare_threshold = threshold


PREPARE_THRESHOLD = 1_000_000  # never reached: the statement is prepared by `prepare=True`, not by counting


def _preparing_cursor(db: BaseDatabaseWrapper, raw: Any, prepare: bool) -> Any:
    """A psycopg cursor binding on the server, with Django's time zone loader as db.cursor() sets it."""
    backend = _postgresql()
    cursor = backend.cursor(raw)
    cursor.prepare = prepare
    if db.timezone != raw.adapters.get_loader(*backend.timestamptz_text).timezone:
        backend.register_tzloader(db.timezone, cursor)
    return cursor


class _Backend(NamedTuple):
    cursor: Any
    debug_wrapper: Any
    timestamptz_text: tuple[int, Any]
    register_tzloader: Any


@functools.cache
def _postgresql() -> _Backend:
    """Django's server-binding cursor, passing `prepare` to psycopg (Django's cursor wrapper does not), and its
    query-logging wrapper logging the statement's text; the timestamptz type's OID and text format (its loader),
    and Django's time zone loader. Imported on first use: a server on SQLite never loads Django's PostgreSQL
    backend."""
    from django.db.backends.postgresql import base
    from django.db.backends.postgresql.psycopg_any import register_tzloader
    from django.db.backends.utils import CursorWrapper
    from psycopg.pq import Format

    server_binding: Any = base.ServerBindingCursor  # a psycopg Cursor; the stubs do not describe it
    debug_wrapper: Any = base.CursorDebugWrapper

    class PreparingCursor(server_binding):
        prepare: bool = True

        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            kwargs.setdefault("prepare", self.prepare)
            return super().execute(query, params, **kwargs)

    class PreparedDebugWrapper(debug_wrapper):
        def execute(self, sql: Any, params: Any = None) -> Any:
            # Django's query log reads the statement from psycopg's last query, which a prepared execution leaves
            # unset: it logs the statement with its values, as the plain cursor sent it.
            with self.debug_sql(self.db.ops.compose_sql(sql, params)):
                return CursorWrapper.execute(self, sql, params)  # without the logging wrapper's own entry

    return _Backend(PreparingCursor, PreparedDebugWrapper, (base.TIMESTAMPTZ_OID, Format.TEXT), register_tzloader)
