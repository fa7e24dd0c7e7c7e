"""Tables whose record collections are stored as rows (docs/tables-at-scale.md): moving a table to rows, and
every read of a data tool over such a table. The one home of both; the executors call `read` and `schema` for a
table whose storage is "rows", and `table_to_rows` is what `manage.py tables_to_rows` runs.

- A *collection* is the array of records, or the object of records by key, at a mount of one of the table's
  tools (the shallowest one where mounts nest: a record is never split further), or at the root when no tool
  mounts below it. Its records become TableRecord rows (tools_app.data_access.sql.store); the document keeps
  an empty `[]` / `{}` at its mount.
- A read over exactly a collection touches only the rows it needs: `query_data` runs as one SQL statement when
  the expression compiles (tools_app.data_access.sql_query; its answer is jmespath's exactly); otherwise, when it
  decomposes (tools_app.data_access.streamed: a per-record head, then a tail over its results), the records
  stream through the evaluator chunk by chunk and only the head's results are kept (of a top-k or an extreme,
  only the k items or the best one its answer depends on), at most TOOLHUB_MAX_EVALUATED_BYTES; a multi-select
  over the collection or piped into from it (tools_app.data_access.multiselect: `{n: length(@), first: [0]}`,
  `[?p] | [length(@), [:3]]`) is answered branch by branch, each branch by the path it takes alone, in the same
  snapshot and budget; anything else reads the records in chunks of CHUNK rows into the list the evaluator runs
  over, at most TOOLHUB_MAX_EVALUATED_BYTES of their JSON (QUERY_TOO_EXPENSIVE beyond in both
  cases); `select` by the collection's key field is an index lookup; `preview` reads its window (its first
  position found by the collection's directory of counts per block of positions, `_position_at`, then
  `position >= first ORDER BY position LIMIT`); `get_all_data` (and `preview` without preview keys) called with
  the pipeline's page request (paging.PageWindow) reads only the rows of its page, and so does `query_data` whose
  compiled answer is one item per record (sql_query.windowed); `get_data_schema` describes the
  first SCHEMA_SAMPLE records, with the true count.
- A read at any other mount (above a collection, or inside one of its records) runs over the document with
  the collections it reaches spliced in, under the same byte bound.
- A read narrowed by its binding (`where`, tools_app.data_access.narrowing) over an array collection runs
  `query_data` as one SQL statement with the narrowing as its first filter when that compiles, and
  `get_data_schema` as two (the count within it, its first SCHEMA_SAMPLE records); otherwise, and for the
  other reads, the records are streamed in chunks and only those within the narrowing are kept (and counted
  against the byte bound); `select` still looks its keys up by index, then drops what is outside.
"""

import json
import re
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache, partial
from typing import Any

from django.db import connection, transaction
from django.db.models import F

from tools_app import services
from tools_app.data_access import budget, multiselect, narrowing, operations, pointer, slow_queries, sql_query, streamed
from tools_app.data_access.operations import Mount
from tools_app.data_access.query import compile_expression
from tools_app.data_access.shape import describe
from tools_app.data_access.sql import store
from tools_app.data_access.sql.chunked import ChunkedCursor
from tools_app.data_access.sql.codec import Layout, restore
from tools_app.data_access.sql.kinds import COLLECTIONS_TABLE, Known
from tools_app.data_access.sql_query import (
    SqlAnswer,
    SqlQuery,
    compile_sql_expression,
    run_sql,
    windowed,
)
from tools_app.kernel import json_patch
from tools_app.kernel.errors import ErrorCode, ToolError
from tools_app.kernel.limits import max_evaluated_bytes, max_record_bytes, max_table_records
from tools_app.models import (
    Table,
    TableChange,
    TableCollection,
    TableRecord,
    TableRecordLayout,
    TableSnapshot,
    TableStorage,
    Tool,
)
from tools_app.models.columns import column
from tools_app.paging import MEASURE_FACTOR, Cut, PageWindow, encoded_size, utf8_size
from tools_app.services import table_log

__all__ = [
    "CHUNK",
    "GATHER",
    "apply_operations",
    "SCHEMA_SAMPLE",
    "Collection",
    "CollectionReader",
    "collection_mounts",
    "collection_value",
    "collections",
    "create_collection",
    "dialect",
    "document_chunks",
    "document_text",
    "max_evaluated_bytes",
    "position_at",
    "preview_collection",
    "query_collection",
    "read",
    "records_table",
    "relayout",
    "replace_data",
    "report_version",
    "sample_document",
    "schema",
    "start_as_rows",
    "select_collection",
    "select_records",
    "snapshot",
    "table_to_rows",
    "unique_fields",
    "version_document",
    "versions_read",
    "whole_collection",
    "whole_document",
    "write",
]

CHUNK = 2_000
SCHEMA_SAMPLE = 10_000
# SQLite virtual-machine instructions between two looks at the call's clocks (one look costs ~1 µs; 10,000
# instructions take ~0.1-1 ms), so a statement over its budget stops within about a millisecond.
PROGRESS_EVERY = 10_000
QUERY_CANCELED = "57014"  # PostgreSQL's SQLSTATE of a statement stopped by statement_timeout


def _records_table() -> str:
    return TableRecord._meta.db_table


def _layouts_table() -> str:
    return TableRecordLayout._meta.db_table


def _dialect() -> str:
    return "postgresql" if connection.vendor == "postgresql" else "sqlite"


@dataclass(frozen=True)
class Collection:
    id: int
    mount: str
    kind: str  # "array" | "object"
    key_field: str
    record_count: int
    known: Known | None = None  # its field kinds (tools_app.data_access.sql.kinds); None: not known
    # The table's indexed_fields as the read's snapshot holds them (a JSON column's value: decoded only for a slow
    # read's report, _declared); None: not read with the collection (the report reads them).
    declared: Any = None

    @property
    def tokens(self) -> tuple[str, ...]:
        return pointer.parse(self.mount)


def collections(table_id: int) -> dict[str, Collection]:
    """The table's collections by mount (inside a snapshot of the table, as read by its first statement)."""
    held = _held.get()
    if held is not None and held[0] == table_id:
        return held[2]
    with connection.cursor() as cursor:  # a plain statement: every write at a rows table runs it
        cursor.execute(
            f'SELECT id, mount, kind, key_field, record_count, field_kinds FROM "{COLLECTIONS_TABLE}"'
            " WHERE table_id = %s",
            (table_id,),
        )
        rows = cursor.fetchall()
    return {
        row[1]: Collection(row[0], row[1], row[2], row[3], row[4], known=Known.of(store.json_value(row[5])))
        for row in rows
    }


#
# One snapshot per read
#

# (table id, version, its collections) of the snapshot this context reads in: nested reads of the same table share
# it, and read its collections from it.
_held: ContextVar[tuple[int, int, dict[str, "Collection"]] | None] = ContextVar("records_snapshot", default=None)
REPEATABLE_READ = 3  # psycopg.IsolationLevel.REPEATABLE_READ
# The versions the reads of this context ran over (versions_read), newest last; None when nobody collects them.
_seen: ContextVar[list[int] | None] = ContextVar("records_versions_read", default=None)


@contextmanager
def versions_read() -> Iterator[list[int]]:
    """Collect the table versions that the reads run inside this block answered from (each read's snapshot, and a
    document table's version as the executors read it), newest last: what the caller labels the answer with (the
    result cache's key, a cursor's version)."""
    seen: list[int] = []
    token = _seen.set(seen)
    try:
        yield seen
    finally:
        _seen.reset(token)


def report_version(version: int) -> None:
    """Note that a read answered from `version` of its table (versions_read)."""
    seen = _seen.get()
    if seen is not None:
        seen.append(version)


@contextmanager
def snapshot(table_id: int) -> Iterator[int]:
    """One snapshot of the database for a read of a rows table: its version, its document and its rows (and its log)
    are read as of one moment, so a write committed meanwhile is either wholly in the answer or not at all, and
    the version yielded is the one the answer belongs to. Reported to versions_read.

    - PostgreSQL: the statements run in one REPEATABLE READ, READ ONLY transaction (the time budget's
      statement_timeout is local to a savepoint inside it).
    - SQLite: one deferred (read) transaction; in WAL mode its snapshot is taken at its first read (the version),
      and writers go on meanwhile.
    - Inside a caller's transaction (a write holding the table's lock, a test's transaction) that transaction is
      the snapshot: its isolation holds. A nested snapshot of the same table is the outer one.

    Its first statement reads the version and the collections together (`collections` answers from it inside),
    under the call's time budget like every statement over rows (engine_cursor: in one round trip). Table.DoesNotExist
    when the table is gone."""
    held = _held.get()
    if held is not None and held[0] == table_id:
        yield held[1]
        return
    with _read_transaction():
        with engine_cursor() as cursor:
            cursor.execute(_snapshot_sql(connection.vendor), {"table": table_id})
            found = cursor.fetchall()
        if not found:
            raise Table.DoesNotExist(f"Table {table_id} does not exist.")
        version = found[0][0]
        held_collections = {
            row[2]: Collection(
                row[1], row[2], row[3], row[4], row[5], known=Known.of(store.json_value(row[6])), declared=row[7]
            )
            for row in found
            if row[1] is not None
        }
        report_version(version)
        _held.set((table_id, version, held_collections))
        try:
            yield version
        finally:
            # Set back rather than reset by token: a streamed export resumes this generator in a copy of the
            # context each time (asgiref's sync_to_async), where the token of another copy cannot be used.
            _held.set(held)


@cache
def _snapshot_sql(vendor: str) -> str:
    """A snapshot's first statement: the table's version and its collections (NULLs in the collection's columns when
    it has none; no row when the table is gone), with the table's indexed_fields (what a slow read's report needs:
    read here, as a statement the budget stopped may leave no transaction to read them in). Built once from the
    models' tables and columns (quoted for `vendor`): the ORM would compile it again at every read. Its parameter
    is named (`%(table)s`), which Django's SQLite cursor binds without rewriting the statement
    (tools_app.selectors._call_target_sql)."""
    quote = connection.ops.quote_name

    t, c = Table, TableCollection
    fields = ", ".join(f"c.{column(c, name)}" for name in ("id", "mount", "kind", "key_field", "record_count"))
    return (
        f"SELECT t.{column(t, 'version')}, {fields}, c.{column(c, 'field_kinds')}, t.{column(t, 'indexed_fields')}"
        f" FROM {quote(t._meta.db_table)} t"
        f" LEFT JOIN {quote(c._meta.db_table)} c ON c.{column(c, 'table')} = t.{column(t, 'id')}"
        f" WHERE t.{column(t, 'id')} = %(table)s"
    )


# Whether this context reads in a transaction its snapshot opened itself (_read_transaction), not a caller's.
_own: ContextVar[bool] = ContextVar("records_own_snapshot", default=False)


def _own_snapshot() -> bool:
    """The current transaction is a read's own snapshot (_read_transaction's, with no atomic block inside it)."""
    return _own.get() and len(connection.atomic_blocks) == 1


@contextmanager
def _read_transaction() -> Iterator[None]:
    if connection.in_atomic_block:
        yield
        return
    with ExitStack() as stack:
        if connection.vendor == "sqlite":
            # The settings' IMMEDIATE mode takes the write lock at BEGIN; a read takes none (Django issues the BEGIN
            # when the block is entered).
            connection.ensure_connection()  # connecting sets the mode from the settings
            mode = getattr(connection, "transaction_mode", None)
            connection.transaction_mode = "DEFERRED"  # type: ignore[attr-defined]
            try:
                stack.enter_context(transaction.atomic())
            finally:
                connection.transaction_mode = mode  # type: ignore[attr-defined]
        else:
            # psycopg opens the transaction with them (BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY, no round trip
            # of its own); they are put back once it ended.
            connection.ensure_connection()
            raw = connection.connection
            previous = (raw.isolation_level, raw.read_only)
            raw.isolation_level, raw.read_only = REPEATABLE_READ, True
            stack.callback(_restore_session, raw, previous)
            stack.enter_context(transaction.atomic())
        before = _own.get()
        _own.set(True)
        stack.callback(_own.set, before)  # set back, not reset by token: see snapshot
        yield


def _restore_session(raw: Any, previous: tuple[Any, Any]) -> None:
    if raw.closed or raw.info.transaction_status != 0:  # not idle: the connection is broken and will be closed
        return
    raw.isolation_level, raw.read_only = previous


#
# Budgets inside the engine
#


@contextmanager
def engine_budget() -> Iterator[None]:
    """Around statements over rows: the call's time budget (data_access.budget) holds inside the engine, so a
    statement over it stops part-way with QUERY_TOO_EXPENSIVE and the connection stays usable.

    - SQLite: a progress handler asks the budget every PROGRESS_EVERY instructions (`check_time`); when it
      refuses, the handler returns non-zero, the statement is interrupted, and the budget's own error is raised.
    - PostgreSQL: `statement_timeout` = the call's remaining time (`remaining_ms`), local to a transaction (a
      savepoint inside an outer one, after which the previous value is put back); a cancelled statement is
      QUERY_TOO_EXPENSIVE.

    Without an active budget (a trusted direct call) nothing is installed.
    """
    current = budget.active()
    if current is None:
        yield
        return
    current.check_time()
    if connection.vendor == "postgresql":
        with _statement_timeout(current):
            yield
        return
    connection.ensure_connection()
    raw = connection.connection
    stopped: list[BaseException] = []

    def check() -> int:
        try:
            current.check_time()
        except BaseException as exc:  # raised from the statement's caller below, not inside SQLite
            stopped.append(exc)
            return 1
        return 0

    raw.set_progress_handler(check, PROGRESS_EVERY)
    try:
        yield
    except Exception as exc:
        if stopped:
            raise stopped[0] from exc
        raise
    finally:
        raw.set_progress_handler(None, 0)


@contextmanager
def _statement_timeout(current: budget.QueryBudget) -> Iterator[None]:
    limit = max(1, int(current.remaining_ms()))
    outer = connection.in_atomic_block
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT current_setting('statement_timeout'), set_config('statement_timeout', %s, true)",
                    (f"{limit}ms",),
                )
                previous = cursor.fetchone()[0]
            yield
            if outer:  # SET LOCAL lasts to the end of the outer transaction: the caller's own limit comes back
                with connection.cursor() as cursor:
                    cursor.execute("SELECT set_config('statement_timeout', %s, true)", (previous,))
    except Exception as exc:
        _raise_if_cancelled(exc, current, limit)
        raise


def _raise_if_cancelled(exc: BaseException, current: budget.QueryBudget, limit: int) -> None:
    """A statement PostgreSQL cancelled at its statement_timeout is the call's QUERY_TOO_EXPENSIVE."""
    if getattr(exc.__cause__, "sqlstate", None) == QUERY_CANCELED or getattr(exc, "sqlstate", None) == QUERY_CANCELED:
        raise budget.too_expensive(
            "CPU-time budget",
            current.limits.cpu_ms,
            "ms",
            f" (the database statement ran over its {limit:,} ms left)",
        ) from exc


@contextmanager
def engine_cursor(*, chunked: bool = False) -> Iterator[Any]:
    """A cursor for statements over rows under the call's budget (engine_budget's rules), in fewer round trips:
    on PostgreSQL each statement is sent as one message with `SET LOCAL statement_timeout` = the call's remaining
    time before it (_TimedCursor), outside a transaction and inside a read's own snapshot (snapshot):

    - Outside a transaction PostgreSQL runs a message of several statements as one implicit transaction, so the
      timeout holds for that statement only and the session's own comes back after it: one round trip instead of
      four (BEGIN, set_config, the statement, COMMIT).
    - In the transaction a read's snapshot opened itself (no caller's work in it) the message also keeps the
      timeout in force before it and sets it back after the statement: one round trip instead of five (SAVEPOINT,
      set_config, the statement, set_config back, RELEASE). No savepoint is needed: a cancelled statement fails
      the read, whose transaction is rolled back whole (a chunked cursor puts its own in the message, to cancel a
      statement it stops reading and go on: data_access.sql.chunked).

    Elsewhere (SQLite, a caller's transaction, no budget): engine_budget around a plain cursor.

    `chunked`: on PostgreSQL the statements' rows arrive sql_query.FETCH_ROWS at a time as they are fetched, and a
    statement left unread is cancelled (data_access.sql.chunked), for answers of unknown size (run_sql's). SQLite's
    cursor steps its rows as they are fetched already."""
    current = budget.active()
    alone = connection.get_autocommit() if connection.vendor == "postgresql" else False
    own = not alone and connection.vendor == "postgresql" and _own_snapshot()
    if current is None or not (alone or own):
        with engine_budget(), _cursor(chunked) as cursor:
            yield cursor
        return
    current.check_time()
    with _cursor(chunked) as cursor:
        yield _TimedCursor(cursor, current, restore=own)


def _cursor(chunked: bool) -> Any:
    """A Django cursor; with `chunked`, on PostgreSQL, over a ChunkedCursor (logged and wrapped as Django's own)."""
    if not chunked or connection.vendor != "postgresql":
        return connection.cursor()
    connection.close_if_health_check_failed()  # what connection.cursor() does before making its cursor
    connection.ensure_connection()
    connection.validate_thread_sharing()
    with connection.wrap_database_errors:
        raw: Any = ChunkedCursor(connection.connection, size=sql_query.FETCH_ROWS)  # the stubs type it a wrapper
    return connection.make_debug_cursor(raw) if connection.queries_logged else connection.make_cursor(raw)


class _TimedCursor:
    """A Django cursor (client-side binding: one simple-query message per execute) whose statements carry
    their own statement_timeout (engine_cursor); with `restore`, the timeout in force before the message is in
    force again after it (kept in a setting of the transaction, toolhub.timeout_before). A statement PostgreSQL
    cancelled at that timeout, at execute or while its rows are fetched (a chunked cursor), is the call's
    QUERY_TOO_EXPENSIVE."""

    def __init__(self, cursor: Any, current: budget.QueryBudget, *, restore: bool = False) -> None:
        self._cursor = cursor
        self._current = current
        self._restore = restore
        self._limit = 0

    def execute(self, sql: str, params: Any = ()) -> None:
        limit = self._limit = max(1, int(self._current.remaining_ms()))
        message = f"SET LOCAL statement_timeout = {limit}; {sql}"
        if self._restore:
            message = (
                "SELECT set_config('toolhub.timeout_before', current_setting('statement_timeout'), true); "
                f"{message}; SELECT set_config('statement_timeout', current_setting('toolhub.timeout_before'), true)"
            )
        try:
            self._cursor.execute(message, params)
            if self._restore:
                self._cursor.nextset()  # past the saved timeout's row
            self._cursor.nextset()  # past SET's empty result, to the statement's rows
        except Exception as exc:
            _raise_if_cancelled(exc, self._current, limit)
            raise

    def fetchall(self) -> list:
        return self._fetched(self._cursor.fetchall)

    def fetchone(self) -> Any:
        return self._fetched(self._cursor.fetchone)

    def fetchmany(self, size: int) -> list:
        return self._fetched(self._cursor.fetchmany, size)

    def _fetched(self, fetch: Callable[..., Any], *args: Any) -> Any:
        try:
            return fetch(*args)
        except Exception as exc:
            _raise_if_cancelled(exc, self._current, self._limit)
            raise

    def close(self) -> None:
        self._cursor.close()


#
# Moving a table to rows
#


def _within(inner: tuple[str, ...], outer: tuple[str, ...]) -> bool:
    """`inner` is `outer` or lies below it."""
    return len(inner) >= len(outer) and inner[: len(outer)] == outer


def collection_mounts(data: Any, tools: list[tuple[str, str]]) -> list[tuple[str, str, list | dict]]:
    """(mount, key field, container) of each collection of a document whose tools mount at `tools`
    ((json_path, key_field) in tool order; the first tool's key field wins), shallowest first.

    A mount holding an array is a collection (tools mounted below it read inside its records); one holding an
    object is one too unless a tool mounts below it (then it holds collections by name, like a root
    {"orders": [...], "customers": [...]}). The root counts as a mount. A mount inside a collection is not one.
    """
    paths = [pointer.parse(path) for path, _ in tools]
    candidates = list(dict.fromkeys(tools))
    if not any(path == "" for path, _ in tools):
        candidates.append(("", "id"))
    chosen: list[tuple[str, str, list | dict]] = []
    seen: list[tuple[str, ...]] = []
    for json_path, key_field in sorted(candidates, key=lambda mount: len(pointer.parse(mount[0]))):
        tokens = pointer.parse(json_path)
        if any(_within(tokens, other) for other in seen) or not pointer.exists(data, tokens):
            continue
        value = pointer.resolve(data, tokens, json_path)
        holder = any(len(path) > len(tokens) and _within(path, tokens) for path in paths)
        if isinstance(value, list) or (isinstance(value, dict) and not holder):
            chosen.append((json_path, key_field, value))
            seen.append(tokens)
    return chosen


def table_to_rows(table_id: int) -> bool | None:
    """Move the table's collections into rows, in one transaction under its row lock; False when it already
    was; None, and it stays a document, when nothing in it is a collection (a scalar root, or tools below the
    root whose mounts hold no array or object): rows would hold nothing, and every read would splice the same
    document. The version does not change (the answers do not); it is recorded as `rows_since_version`."""
    with transaction.atomic():
        row = Table.objects.select_for_update(no_key=True).filter(pk=table_id).values_list("version", "storage").first()
        if row is None:
            raise Table.DoesNotExist(f"Table {table_id} does not exist.")
        version, storage = row
        if storage == TableStorage.ROWS:
            return False
        data = services.table_document(table_id, version)
        tools = list(Tool.objects.filter(table_id=table_id).order_by("id").values_list("json_path", "metadata"))
        mounts = [(path, (metadata or {}).get("key_field") or "id") for path, metadata in tools]
        if not collection_mounts(data, mounts):
            return None
        _lay_out(table_id, version, data, mounts)
        Table.objects.filter(pk=table_id).update(storage=TableStorage.ROWS, rows_since_version=version)
    return True


def start_as_rows(table_id: int, data: Any, key_field: str) -> bool:
    """A new table (at version 1, inside the caller's transaction) whose `data` is an array of records (keyed by
    `key_field`) is laid out as rows at once, as `table_to_rows` would; False, and it stays a document, for any
    other root or when its records break the rows limits (TOOLHUB_MAX_TABLE_RECORDS, TOOLHUB_MAX_RECORD_BYTES): a
    document table takes them. A root object is either records by key or a holder of collections
    (`{"orders": [...], "settings": {...}}`), which only its tools tell apart: laid out before them, the first tool
    below the root would lay it out again as a new version. `tables_to_rows` moves it once its tools exist."""
    if not isinstance(data, list):
        return False
    mounts = [("", key_field)]
    wanted = collection_mounts(data, mounts)
    if not wanted:
        return False
    try:
        _check_replaced_records(sum(len(value) for *_, value in wanted), [(mount, value) for mount, _, value in wanted])
    except ToolError:
        return False
    _lay_out(table_id, 1, data, mounts)
    Table.objects.filter(pk=table_id).update(storage=TableStorage.ROWS, rows_since_version=1)
    return True


def _lay_out(table_id: int, version: int, data: Any, mounts: list[tuple[str, str]]) -> Any:
    """Store the collections of `data` (the whole document at `version`) for tools at `mounts` as rows, and the
    document without them as the table's snapshot at `version` (the caller holds the table's lock); return that
    document."""
    document = data
    dialect = _dialect()
    with connection.cursor() as cursor:
        for json_path, key_field, value in collection_mounts(data, mounts):
            kind = "array" if isinstance(value, list) else "object"
            collection = TableCollection.objects.create(
                table_id=table_id, mount=json_path, kind=kind, key_field=key_field, record_count=len(value)
            )
            store.write_records(
                cursor,
                dialect=dialect,
                records_table=_records_table(),
                layouts_table=_layouts_table(),
                collection_id=collection.pk,
                value=value,
                key_of=_key_of(key_field),
            )
            document = json_patch.apply(
                document, [{"op": "replace", "path": json_path, "value": [] if kind == "array" else {}}]
            )
    TableSnapshot.objects.update_or_create(table_id=table_id, defaults={"version": version, "data": document})
    return document


def relayout(table_id: int) -> None:
    """After the tools of a rows table changed (one created, moved, re-keyed or deleted), inside the caller's
    transaction: lock the table and make its collections the ones `collection_mounts` chooses for its tools now
    (docs/tables-at-scale.md, "When tools change").

    - The same mounts, another key field for an array collection (the first tool at its mount now keys its records
      by another field; with no tool at its mount the key stays): the rows' keys are rewritten, CHUNK rows per
      statement; positions, version and history stay (an entry's records are found by position; restore keys an
      added record by the collection's field).
    - Other mounts (a tool now mounts above a collection, or on an array or object of the document that is not
      one): the table is laid out again from its whole document (each collection at most max_evaluated_bytes(),
      else QUERY_TOO_EXPENSIVE and the caller's change is not written). This is a new version whose entry replaces
      the document (without records) whole, so every worker's cached document follows; `rows_since_version`
      becomes it, and its inverse keeps the old layout with its records (`_layout_inverse`), from which the
      versions before it are rebuilt and restored.

    The chosen mounts are computed over the document without its records: a candidate below a collection's mount
    is inside it either way, and one at its mount sees an empty container of the same kind, so when they equal
    the current collections, the whole document chooses the same ones."""
    locked = Table.objects.select_for_update(no_key=True).filter(pk=table_id)
    row = locked.values_list("version", "storage", "rows_since_version").first()
    if row is None or row[1] != TableStorage.ROWS:
        return
    version, _storage, since = row
    tools = list(Tool.objects.filter(table_id=table_id).order_by("id").values_list("json_path", "metadata"))
    mounts = [(path, (metadata or {}).get("key_field") or "id") for path, metadata in tools]
    current = collections(table_id)
    before = services.table_document(table_id, version)
    wanted = {mount: key_field for mount, key_field, _ in collection_mounts(before, mounts)}
    if set(wanted) == set(current):
        mounted = {path for path, _key_field in mounts}
        for mount, collection in current.items():
            # Keyed again only for a tool at the collection: without one, its key (say, an import's guess) stays.
            if collection.kind == "array" and mount in mounted and collection.key_field != wanted[mount]:
                _rekey(collection, wanted[mount])
        return
    old = _without_records(before, list(current))
    states = {collection.id: _by_position(collection) for collection in current.values()}
    data = _splice(old, _placement(current), states)
    inverse = [_layout_inverse(old, current, states, since)]
    _drop_collections(table_id)
    document = _lay_out(table_id, version + 1, data, mounts)
    # The whole document without records (small): a worker's cached document of the earlier version may hold the
    # records of a collection (cached before the table moved to rows), so no finer patch applies to every copy.
    patch = [{"op": "replace", "path": "", "value": document, "layout": True}]
    table_log.table_relayout_entry(table_id, version + 1, patch, inverse, document)
    Table.objects.filter(pk=table_id).update(rows_since_version=version + 1)


def _drop_collections(table_id: int) -> None:
    """Delete the table's collections with their rows and layouts (a new layout replaces them). The rows go first,
    in one statement: a row's layout is PROTECTed, so deleting the collections alone (which cascades to both)
    is refused by Django's collector when a row has a layout, and would load every row to check."""
    ids = list(TableCollection.objects.filter(table_id=table_id).values_list("id", flat=True))
    if ids:
        with connection.cursor() as cursor:
            cursor.execute(
                f'DELETE FROM "{_records_table()}" WHERE collection_id IN ({", ".join(["%s"] * len(ids))})', ids
            )
    TableCollection.objects.filter(pk__in=ids).delete()


def _rekey(collection: Collection, key_field: str) -> None:
    """Rewrite the keys of an array collection's rows as `key_field`'s (positions unchanged)."""
    key_of = _key_of(key_field)
    records_table = _records_table()
    with connection.cursor() as cursor:
        for chunk in _chunks(collection):
            cursor.executemany(
                f'UPDATE "{records_table}" SET "key" = %s WHERE collection_id = %s AND position = %s',
                [(key_of(record), collection.id, position) for position, _key, record, _size in chunk],
            )
    TableCollection.objects.filter(pk=collection.id).update(key_field=key_field)


def create_collection(
    table_id: int,
    values: Iterable[Any],
    key_field: str = "id",
    compact_of: Callable[[Any], str | None] | None = None,
) -> int:
    """Store `values` (an array's records in order, consumed once: a stream is never held whole) as the root
    collection of a new table stored as rows, inside the caller's transaction; return how many. What an import
    runs (services.imports): the rows are written `store.write_records`'s batch at a time (`compact_of` as its)."""
    collection = TableCollection.objects.create(
        table_id=table_id, mount="", kind="array", key_field=key_field, record_count=0
    )
    with connection.cursor() as cursor:
        count = store.write_records(
            cursor,
            dialect=_dialect(),
            records_table=_records_table(),
            layouts_table=_layouts_table(),
            collection_id=collection.pk,
            value=values,
            key_of=_key_of(key_field),
            compact_of=compact_of,
        )
    TableCollection.objects.filter(pk=collection.pk).update(record_count=count)
    return count


def whole_document(table_id: int, version: int) -> Any:
    """A rows table's whole document at `version`: the document with every collection spliced in at its mount, each
    at most max_evaluated_bytes() of record JSON (QUERY_TOO_EXPENSIVE beyond), read in one snapshot. What the
    whole-table views read (Table.data: the API's table, the admin's editor, setup export, generate-tools).

    `version` is the one the caller labels the answer with (an ETag): when a write committed since the caller read
    it, that version is rebuilt from the rows and the log of the same snapshot (version_document), never the newer
    rows under the older label."""
    with snapshot(table_id) as current:
        if version == current:
            return _spliced(table_id, current, Mount("", "id"), collections(table_id))
        inverses = table_log.version_inverses(table_id, version, current)
        since = Table.objects.filter(pk=table_id).values_list("rows_since_version", flat=True).get()
        if inverses is None or since is None:
            raise TableChange.DoesNotExist(f"Version {version} of table {table_id} is not kept.")
        return version_document(table_id, current, inverses, since)


def sample_document(table_id: int, version: int) -> tuple[Any, dict[str, int]]:
    """A rows table's document with each collection's first SCHEMA_SAMPLE records spliced in, and each collection's
    true record count by mount: what describes a table's data (generate-tools, description drift, the admin's
    shape) without gathering it whole. Equal to the whole document when no collection holds more. Read in one
    snapshot (the caller's, whose version it is: table_log.table_data_sampled)."""
    with snapshot(table_id) as current:
        return _sample(table_id, current)


def _sample(table_id: int, version: int) -> tuple[Any, dict[str, int]]:
    document = services.table_document(table_id, version)
    counts: dict[str, int] = {}
    for collection in sorted(collections(table_id).values(), key=lambda found: len(found.tokens)):
        records: list = []
        members: dict = {}
        for chunk in _chunks(collection, limit=SCHEMA_SAMPLE):
            for _position, key, record, _size in chunk:
                if collection.kind == "array":
                    records.append(record)
                else:
                    members[key] = record
        value = records if collection.kind == "array" else members
        document = json_patch.apply(document, [{"op": "replace", "path": collection.mount, "value": value}])
        counts[collection.mount] = collection.record_count
    return document, counts


def document_chunks(table_id: int, encode: Callable[[Any], str] = json.dumps) -> Iterator[str]:
    """A rows table's whole current document as JSON text (`encode`'s form, which must write a string as
    json.dumps does), in pieces: the document without its records, with each collection's records streamed at its
    mount CHUNK rows per statement, so neither the records nor the text are held whole (a whole-table export).

    Every statement, from the version to the last chunk, reads one snapshot (`snapshot`, held while the text is
    consumed): a write committed meanwhile is not in the export, wholly."""
    with snapshot(table_id) as version:
        yield from _document_text(table_id, version, encode)


def document_text(
    table_id: int, version: int | None, encode: Callable[[Any], str], separators: tuple[str, str] = (", ", ": ")
) -> Iterator[str]:
    """A rows table's whole document at `version` (None: its current one) as `encode`'s JSON text, whose item and
    key separators are `separators` (encode must write strings as json.dumps does), in pieces: what the API's
    whole-table views send streamed, equal to `encode(whole_document(table_id, version))`.

    One snapshot (`snapshot`) is held while the text is consumed. When `version` is its current version (or None),
    the records stream CHUNK rows per statement (document_chunks); when a write committed since the caller read
    `version` (the label it already sent), that version is rebuilt from the rows and the log of the snapshot
    (table_log.table_version_data: gathered, at most max_evaluated_bytes() of record JSON) and encoded whole."""
    with snapshot(table_id) as current:
        if version is None or version == current:
            yield from _document_text(table_id, current, encode, separators)
        else:
            yield encode(table_log.table_version_data(table_id, version))


def _document_text(
    table_id: int, version: int, encode: Callable[[Any], str], separators: tuple[str, str] = (", ", ": ")
) -> Iterator[str]:
    found = collections(table_id)
    document = services.table_document(table_id, version)
    markers: dict[str, Collection] = {}
    for collection in found.values():
        marker = f"\u0000collection-{collection.id}\u0000"  # no stored string holds a NUL (the validators refuse it)
        markers[json.dumps(marker)] = collection
        document = json_patch.apply(document, [{"op": "replace", "path": collection.mount, "value": marker}])
    text = encode(document)
    pattern = re.compile("|".join(re.escape(marker) for marker in markers)) if markers else None
    start = 0
    for match in pattern.finditer(text) if pattern else ():
        yield text[start : match.start()]
        yield from _collection_text(markers[match.group(0)], encode, separators)
        start = match.end()
    yield text[start:]


def _collection_text(
    collection: Collection, encode: Callable[[Any], str], separators: tuple[str, str] = (", ", ": ")
) -> Iterator[str]:
    array = collection.kind == "array"
    comma, colon = separators
    yield "[" if array else "{"
    first = True
    for chunk in _chunks(collection):
        parts = []
        for _position, key, record, _size in chunk:
            item = encode(record) if array else f"{encode(key)}{colon}{encode(record)}"
            parts.append(item if first else comma + item)
            first = False
        yield "".join(parts)
    yield "]" if array else "}"


def unique_fields(table_id: int, mount: str, names: list[str]) -> list[str]:
    """Those of `names` that could key the array collection at `mount` over ALL its records: every record is an
    object holding the field as a string or an integer, and no two values are equal as text (SPEC §8's key: 1 and
    "1" are one key). What generate-tools asks of its key field (toolsets._Sample), checked in the engine: one
    statement over the collection's rows, aggregates per name (the records that fail the type test, the distinct
    values; on SQLite, the integers beyond 64 bits). A name SQLite's JSON paths cannot spell, or a field holding an
    integer beyond 64 bits there (SQLite reads those inexactly), is checked by reading the records in chunks.
    `names` in order; all of them when no array collection is at `mount`. Read in one snapshot."""
    with snapshot(table_id):
        collection = collections(table_id).get(mount)
        if collection is None or collection.kind != "array" or not names:
            return list(names)
        in_sql = [name for name in names if _spellable(name)]
        holding, inexact = _unique_in_sql(collection, in_sql)
        in_python = [name for name in names if name not in in_sql] + inexact
        holding += _unique_in_python(collection, in_python)
    return [name for name in names if name in holding]


def _spellable(name: str) -> bool:
    """Whether the engine's JSON paths spell `name`: SQLite's cannot spell a quote, a backslash or a control
    character (PostgreSQL's keys hold no NUL)."""
    if _dialect() == "postgresql":
        return "\u0000" not in name
    return not any(char in '"\\' or ord(char) < 0x20 for char in name)


def _unique_in_sql(collection: Collection, names: list[str]) -> tuple[list[str], list[str]]:
    """(the names that key every record, the names the engine read inexactly: SQLite reads an integer beyond 64 bits
    as a REAL, whose text is not Python's)."""
    if not names:
        return [], []
    aggregates, params = [], []
    for name in names:
        if _dialect() == "postgresql":
            typed = (
                "jsonb_typeof(data) = 'object' AND (jsonb_typeof(data -> %s) = 'string' OR "
                "(jsonb_typeof(data -> %s) = 'number' AND (data ->> %s) ~ '^-?[0-9]+$'))"
            )
            aggregates.append(f"SUM(CASE WHEN {typed} THEN 0 ELSE 1 END), COUNT(DISTINCT data ->> %s), 0")
            params += [name] * 4
        else:
            path = '$."' + name + '"'
            typed = "json_type(data) = 'object' AND json_type(data, %s) IN ('integer', 'text')"
            wide = "json_type(data, %s) = 'integer' AND typeof(data ->> %s) <> 'integer'"
            aggregates.append(
                f"SUM(CASE WHEN {typed} THEN 0 ELSE 1 END), COUNT(DISTINCT CAST(data ->> %s AS TEXT)),"
                f" SUM(CASE WHEN {wide} THEN 1 ELSE 0 END)"
            )
            params += [path] * 4
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT COUNT(*), {", ".join(aggregates)} FROM "{_records_table()}" WHERE collection_id = %s',
            (*params, collection.id),
        )
        row = cursor.fetchone()
    total, holding, inexact = row[0], [], []
    for index, name in enumerate(names):
        failing, distinct, wide = row[1 + 3 * index : 4 + 3 * index]
        if wide:
            inexact.append(name)
        elif not failing and distinct == total:
            holding.append(name)
    return holding, inexact


def _unique_in_python(collection: Collection, names: list[str]) -> list[str]:
    """The names that key every record, read record by record (the values seen are kept, one set per name)."""
    seen: dict[str, set[str]] = {name: set() for name in names}
    for chunk in _chunks(collection) if names else ():
        for _position, _key, record, _size in chunk:
            for name in list(seen):
                value = record.get(name) if isinstance(record, dict) else None
                text = str(value) if isinstance(value, str | int) and not isinstance(value, bool) else None
                if text is None or text in seen[name]:
                    del seen[name]
                else:
                    seen[name].add(text)
            if not seen:
                return []
    return list(seen)


def version_document(table_id: int, current: int, inverses: list[list], since: int) -> Any:
    """A rows table's whole document as it was before the entries whose `inverses` are given (newest first, from
    `current` down; the table is stored as rows since version `since`, its rows_since_version), read in the same
    snapshot as the inverses (`snapshot`), so that they end at the rows read here. Walking back (`_rebuilt`):

    - an entry after `since`: its document operations apply to the document without records, its per-record
      operations to each collection's records by position (gathered as `_value` does, bounded);
    - the entry at `since` when it laid the table out again (its operations marked "layout"): its inverse holds
      the layout before it, the document without records and each collection's records by position
      (`_layout_inverse`), and the `since` of that layout, from which the walk goes on;
    - an entry at or before `since` otherwise (written while the table was a document, before tables_to_rows moved
      it): a patch of the whole document, applied to the whole document rebuilt so far.

    TableChange.DoesNotExist when a layout entry written before layouts kept their records is crossed."""
    with snapshot(table_id) as held:
        if held != current:
            raise RuntimeError(f"Table {table_id} is at version {held} in this snapshot, not {current}.")
        return _rebuilt(table_id, current, inverses, since)


def _rebuilt(table_id: int, current: int, inverses: list[list], since: int) -> Any:
    document = services.table_document(table_id, current)
    found = collections(table_id)
    placement = _placement(found)
    target = current - len(inverses)
    states = {
        collection.id: _by_position(collection, refuse=lambda limit: _version_too_large(limit, target))
        for collection in found.values()
    }
    whole = None
    for number, inverse in enumerate(inverses):
        version = current - number
        if whole is not None:
            whole = json_patch.apply(whole, inverse)
            continue
        layout = next((operation for operation in inverse if operation.get("layout")), None)
        if layout is not None:
            if "collections" not in layout or layout.get("since") is None:
                raise TableChange.DoesNotExist(
                    f"Table {table_id} was laid out again at version {version}: only versions from it on are kept."
                )
            document, since = layout["value"], layout["since"]
            placement = {held["id"]: (held["mount"], held["kind"]) for held in layout["collections"]}
            states = {
                held["id"]: {position: (key, record) for position, key, record in held["records"]}
                for held in layout["collections"]
            }
            continue
        if version <= since:
            whole = json_patch.apply(_splice(document, placement, states), inverse)
            continue
        document = json_patch.apply(document, [operation for operation in inverse if "collection" not in operation])
        for operation in inverse:
            if "collection" not in operation:
                continue
            state = states[operation["collection"]]
            position = operation["position"]
            if operation["op"] == "add":
                state[position] = (operation.get("key"), operation["value"])
            elif operation["op"] == "remove":
                state.pop(position, None)
            else:
                state[position] = (state[position][0], operation["value"])
    return whole if whole is not None else _splice(document, placement, states)


def _placement(found: dict[str, Collection]) -> dict[int, tuple[str, str]]:
    """(mount, kind) of each collection by id."""
    return {collection.id: (collection.mount, collection.kind) for collection in found.values()}


def _splice(
    document: Any, placement: dict[int, tuple[str, str]], states: dict[int, dict[int, tuple[str | None, Any]]]
) -> Any:
    """The document without records with each collection's records (key, record by position) at its mount."""
    for collection_id, state in states.items():
        mount, kind = placement[collection_id]
        ordered = [state[position] for position in sorted(state)]
        value: list | dict = [record for _key, record in ordered] if kind == "array" else dict(ordered)
        document = json_patch.apply(document, [{"op": "replace", "path": mount, "value": value}])
    return document


def _layout_inverse(
    document: Any,
    found: dict[str, Collection],
    states: dict[int, dict[int, tuple[str | None, Any]]],
    since: int | None,
) -> dict:
    """The inverse operation of an entry that lays a rows table out again (relayout, or a whole-data write or a
    restore with other collections): it puts back `document` (without records) whole and keeps the layout it
    replaces, each collection's records as [position, key, record] and the version the table was stored as rows
    since, so that the versions before the entry are rebuilt (`_rebuilt`) and restored. Its size is the records'
    (each collection was gathered within max_evaluated_bytes()), counted in the table's history bytes and bounded
    by the history quotas like any entry (TOOLHUB_HISTORY_MAX_TABLE_BYTES: the oldest entries go first)."""
    held = [
        {
            "id": collection.id,
            "mount": collection.mount,
            "kind": collection.kind,
            "records": [[position, key, record] for position, (key, record) in sorted(states[collection.id].items())],
        }
        for collection in found.values()
    ]
    return {"op": "replace", "path": "", "value": document, "layout": True, "since": since, "collections": held}


def _by_position(
    collection: Collection, refuse: Callable[[int], ToolError] | None = None
) -> dict[int, tuple[str | None, Any]]:
    """The collection's (key, record) by position, at most max_evaluated_bytes() of record JSON (beyond: `refuse`'s
    error, by default budget.over_evaluated_bytes's)."""
    limit = max_evaluated_bytes()
    total = 0
    state: dict[int, tuple[str | None, Any]] = {}
    for chunk in _chunks(collection):
        for position, key, record, size in chunk:
            total += size
            if total > limit:
                raise (refuse or budget.over_evaluated_bytes)(limit)
            state[position] = (key, record)
    return state


def _key_of(key_field: str) -> Callable[[Any], str | None]:
    """An array record's key: its key field's value as a string (SPEC §8), as `select` compares it."""

    def key_of(record: Any) -> str | None:
        if isinstance(record, dict) and key_field in record:
            return operations.key_text(record[key_field])
        return None

    return key_of


#
# Reading
#


def _decoded(rows: list[tuple], cursor: Any, layouts: dict[int, Layout]) -> list[tuple[int, str | None, Any, int]]:
    """(position, key, record, JSON size) of fetched (position, key, data text, layout id) rows."""
    missing = {row[3] for row in rows if row[3] is not None and row[3] not in layouts}
    if missing:
        layouts.update(store.layouts_by_id(cursor, _layouts_table(), missing))
    decoded = []
    for position, key, text, layout_id in rows:
        record = json.loads(text)
        if layout_id is not None:
            record = restore(record, layouts[layout_id])
        decoded.append((position, key, record, len(text)))
    return decoded


def _select(
    collection: Collection,
    where: str = "",
    params: tuple = (),
    *,
    limit: int | None = None,
    offset: int = 0,
    with_clause: tuple[str, tuple] = ("", ()),
    by_key: bool = False,
) -> list[tuple[int, str | None, Any, int]]:
    """The collection's records matching `where` in position order, `offset` skipped, at most `limit`; `where` may
    name the tables of `with_clause` (its text and parameters, put before the statement: _ordinal's). `by_key`:
    `where` picks records by key, which the (collection, key) index finds; SQLite then orders them by `+position`,
    since without statistics (no ANALYZE has run) its planner would take the (collection, position) index for the
    order instead and scan the whole collection for the keys (a select of 10 keys of 100,000 records: 30 ms)."""
    dialect = _dialect()
    text = "data::text" if dialect == "postgresql" else "data"
    order = "+position" if by_key and dialect == "sqlite" else "position"
    records_table, layouts_table = _records_table(), _layouts_table()
    # Each record's layout comes with it (a few records: no statement of their own for the layouts).
    layout = f'(SELECT l.layout FROM "{layouts_table}" AS l WHERE l.id = "{records_table}".layout_id)'
    sql = (
        f'{with_clause[0]}SELECT position, "key", {text}, layout_id, {layout} FROM "{records_table}"'
        f" WHERE collection_id = %s{where} ORDER BY {order}"
    )
    params = (*with_clause[1], collection.id, *params)
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    elif offset and dialect == "sqlite":
        sql += " LIMIT -1"  # SQLite takes OFFSET only after a LIMIT
    if offset:
        sql += f" OFFSET {int(offset)}"
    with engine_cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
        layouts = store.layouts_of({row[3]: row[4] for row in rows if row[3] is not None})
        return _decoded([row[:4] for row in rows], cursor, layouts)


def _chunks(
    collection: Collection, limit: int | None = None, *, after: int | None = None, first: int = CHUNK
) -> Iterator[list[tuple[int, str | None, Any, int]]]:
    """The collection's records in position order (those after the position `after`, when given), CHUNK rows per
    statement (keyset on position), the first statement `first` rows and each next one twice the last up to
    CHUNK (a reader that needs only a page reads about that); at most `limit` records. The time budget is
    checked after each chunk."""
    left = limit
    step = max(1, min(first, CHUNK))
    layouts: dict[int, Layout] = {}
    text = "data::text" if _dialect() == "postgresql" else "data"
    current = budget.active()
    while left is None or left > 0:
        size = step if left is None else min(step, left)
        step = min(step * 2, CHUNK)
        where = "" if after is None else " AND position > %s"
        params: tuple = (collection.id,) if after is None else (collection.id, after)
        with engine_cursor() as cursor:
            cursor.execute(
                f'SELECT position, "key", {text}, layout_id FROM "{_records_table()}" WHERE collection_id = %s'
                f"{where} ORDER BY position LIMIT {size}",
                params,
            )
            rows = _decoded(cursor.fetchall(), cursor, layouts)
        if not rows:
            return
        yield rows
        if current is not None:
            current.check_time()
        after = rows[-1][0]
        if left is not None:
            left -= len(rows)


def _version_too_large(limit: int, version: int) -> ToolError:
    """An older version of a rows table is rebuilt in the server: the current records by position with the later
    entries' inverses applied (version_document), so its collections are held whole, within the same bound as a
    gathered read."""
    return ToolError(
        ErrorCode.QUERY_TOO_EXPENSIVE,
        f"Version {version} of this table is rebuilt in the server from its current records and its history, and "
        f"its records are more than {limit} bytes (TOOLHUB_MAX_EVALUATED_BYTES): an older version of a table this "
        "large is not rebuilt. The current version is read streamed (GET /api/tables/<id>/), and "
        "its changes since that version are in its history.",
        {"limit": limit, "version": version},
    )


def _value(collection: Collection, keep: Callable[[Any], bool] | None = None) -> list | dict:
    """The whole collection as a list or object (with `keep`, its records it keeps), at most
    max_evaluated_bytes() of record JSON."""
    limit = max_evaluated_bytes()
    total = 0
    items: list = []
    members: dict = {}
    for chunk in _chunks(collection):
        for _position, key, record, size in chunk:
            if keep is not None and not keep(record):
                continue
            total += size
            if total > limit:
                raise budget.over_evaluated_bytes(limit)
            if collection.kind == "array":
                items.append(record)
            else:
                members[key] = record
    return items if collection.kind == "array" else members


PAGE_FIRST_ROWS = 64  # a windowed read's first statement; each next one reads twice as many (_chunks)


def _windowed(collection: Collection, window: PageWindow) -> Any:
    """`get_all_data` of a collection within the caller's result budget (docs/paging.md), reading only the rows it
    needs: an array's records from the window's offset, as far as its page and one more (`window.cut`: the whole
    list when it fits, else the page); an object's members until they are over four budgets (then only how large,
    at least, it is: it is refused, being no list) or all of them (the pipeline measures them as a document's)."""
    if collection.kind == "object":
        if window.offset is not None:  # no cursor pages an object
            raise ToolError(ErrorCode.CURSOR_EXPIRED, "The result this cursor pages is gone.")
        return _object_within(collection, window.limit * MEASURE_FACTOR)
    offset = window.offset or 0
    after = None
    if 0 < offset <= collection.record_count:
        after = _position_at(collection, offset - 1)
        if after is None:  # fewer rows than the count says: a write since the version was read
            raise ToolError(ErrorCode.CURSOR_EXPIRED, "The result this cursor pages is shorter now.")
    return window.cut(_bounded(_chunks(collection, after=after, first=PAGE_FIRST_ROWS)), collection.record_count)


def _bounded(chunks: Iterator[list[tuple[int, str | None, Any, int]]]) -> Iterator[Any]:
    """The records of `chunks`, at most max_evaluated_bytes() of their JSON (QUERY_TOO_EXPENSIVE beyond): a budget
    as large as an instance may set (2 GiB) reads no more than gathering the collection may."""
    limit = max_evaluated_bytes()
    total = 0
    for chunk in chunks:
        for _position, _key, record, size in chunk:
            total += size
            if total > limit:
                raise budget.over_evaluated_bytes(limit)
            yield record


def _ordinal(collection: Collection, index: int) -> tuple[tuple[str, tuple], str, tuple]:
    """SQL finding the position of the collection's record at `index` (0-based, in position order) by its directory
    (TableRecordBlock, kept by every write in the same transaction, so it counts exactly the rows of this snapshot),
    for one statement: a WITH clause (the block holding the index by a running sum of the blocks' counts, and the
    records before that block) with its parameters, and a scalar subquery of the position (NULL when there is no
    record there: no block holds the index) with its parameters, which an OFFSET within that block on the
    (collection, position) index alone answers. About blocks + a block's records (1,024 when appended) of index
    entries, whatever the depth; no record is read or decoded."""
    with_clause = (
        "WITH directory AS (SELECT block, running - record_count AS before FROM (SELECT block, record_count,"
        f' SUM(record_count) OVER (ORDER BY block) AS running FROM "{store.BLOCKS_TABLE}" WHERE collection_id = %s)'
        " AS blocks WHERE running > %s ORDER BY block LIMIT 1) "
    )
    position = (
        f'(SELECT position FROM "{_records_table()}" WHERE collection_id = %s AND position >= (SELECT block FROM'
        f" directory) * {int(store.BLOCK_SPAN)} ORDER BY position LIMIT 1"
        " OFFSET COALESCE((SELECT %s - before FROM directory), 0))"
    )
    return (with_clause, (collection.id, index)), position, (collection.id, index)


def _position_at(collection: Collection, index: int) -> int | None:
    """The position of the collection's record at `index` (0-based, in position order); None when it has no record
    there. One statement (_ordinal)."""
    if index < 0:
        return None
    (with_sql, with_params), position, params = _ordinal(collection, index)
    with engine_cursor() as cursor:
        cursor.execute(f"{with_sql}SELECT {position}", (*with_params, *params))
        row = cursor.fetchone()
    return None if row is None or row[0] is None else int(row[0])


def _object_within(collection: Collection, cap: int) -> Any:
    """An object collection's members while their compact JSON is at most `cap` bytes: all of them (a dict), or,
    once past it, a paging.Cut naming the size `encoded_size` gives for the whole object (the same: the text up to
    there is the whole object's)."""
    members: dict = {}
    size = 1  # "{"
    limit, read = max_evaluated_bytes(), 0
    for chunk in _chunks(collection, first=PAGE_FIRST_ROWS):
        for _position, key, record, stored in chunk:
            read += stored
            if read > limit:
                raise budget.over_evaluated_bytes(limit)
            separator = 1 if members else 0
            members[key] = record
            size += separator + utf8_size(_compact(key)) + 1 + utf8_size(_compact(record))
            if size > cap + 1:
                measured, _complete = encoded_size(members, cap)
                return Cut(over=measured)
    return members


_compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _spliced(table_id: int, version: int, mount: Mount, found: dict[str, Collection]) -> Any:
    """The document with the collections that `mount` reaches (above or below it) spliced in."""
    data = services.table_document(table_id, version)
    for collection in found.values():
        tokens = collection.tokens
        if _within(tokens, mount.tokens) or _within(mount.tokens, tokens):
            data = json_patch.apply(data, [{"op": "replace", "path": collection.mount, "value": _value(collection)}])
    return data


# How a read type reads a collection where its rows are, named by its executor entry
# (tools_app.execution.executors.reader): `(collection, mount, arguments, extra, *, where, window)` answering what
# the type's operation answers over the collection (at the mount "", with the mount's key field), or GATHER when
# it has no cheaper way for this call. A read type without one, or answered GATHER, runs its operation over the
# collection's records gathered (`_value`: at most TOOLHUB_MAX_EVALUATED_BYTES of their JSON; with `where`, those
# within it): the document's answer, whatever the operation.
CollectionReader = Callable[..., Any]
GATHER: Any = object()


def read(
    table_id: int,
    version: int,
    mount: Mount,
    operation: Callable[..., Any],
    arguments: dict,
    extra: tuple = (),
    *,
    where: dict[str, Any] | None = None,
    window: PageWindow | None = None,
    over_collection: CollectionReader | None = None,
) -> Any:
    """`operation(data, mount, arguments, *extra)` (a read of data_access.operations, or any function of that
    shape) over a rows table, with the answer the document would give (module docstring); with `where`, over the
    mount's records within it. At a mount that is a collection, `over_collection` reads it where its rows are
    (CollectionReader), with `window` (the pipeline's page request) when not narrowed.

    Every statement of the read runs in one snapshot (`snapshot`): the answer is that of the version read there,
    which is reported to versions_read (the caller's `version`, unless a write committed since it was read)."""
    with snapshot(table_id) as current:
        return _read(table_id, current, mount, operation, arguments, extra, where, window, over_collection)


def _read(
    table_id: int,
    version: int,
    mount: Mount,
    operation: Callable[..., Any],
    arguments: dict,
    extra: tuple,
    where: dict[str, Any] | None,
    window: PageWindow | None,
    over_collection: CollectionReader | None,
) -> Any:
    found = collections(table_id)
    collection = found.get(mount.json_path)
    if collection is None:
        data = _spliced(table_id, version, mount, found)
        if where is not None:
            return narrowing.read_narrowed(data, mount, arguments, operation, where, *extra)
        return operation(data, mount, arguments, *extra)
    if over_collection is not None:
        answer = over_collection(
            collection, mount, arguments, extra, where=where, window=window if where is None else None
        )
        if answer is not GATHER:
            return answer
    keep = None if where is None else narrowing.keeps(where)
    return operation(_value(collection, keep), Mount("", mount.key_field), arguments, *extra)


#
# The collection readers of the read types (CollectionReader), named by their executor entries
#


def query_collection(
    collection: Collection, mount: Mount, arguments: dict, extra: tuple, *, where: dict | None, window: Any
) -> Any:
    """`query_data`: compiled to SQL, streamed, or split by branch (_query); narrowed over an object: GATHER."""
    if where is not None and collection.kind != "array":
        return GATHER
    return _query(collection, mount, arguments, where, window=window)


def select_collection(
    collection: Collection, mount: Mount, arguments: dict, extra: tuple, *, where: dict | None, window: Any
) -> Any:
    """`select`: its keys looked up by index (_select_keys), narrowed: then those outside `where` dropped."""
    if where is not None:
        return _select_narrowed(collection, mount, arguments, where)
    return _select_keys(collection, mount, arguments)


def whole_collection(
    collection: Collection, mount: Mount, arguments: dict, extra: tuple, *, where: dict | None, window: Any
) -> Any:
    """`get_all_data`: the records, or with `window` only those of the page (_windowed); narrowed: GATHER."""
    if where is not None:
        return GATHER
    return _value(collection) if window is None else _windowed(collection, window)


def preview_collection(
    collection: Collection, mount: Mount, arguments: dict, extra: tuple, *, where: dict | None, window: Any
) -> Any:
    """`preview` (extra: its preview keys): with keys, its window of records (_preview); without, as
    whole_collection."""
    if where is None and extra and extra[0]:
        return _preview(collection, arguments, extra[0])
    return whole_collection(collection, mount, arguments, extra, where=where, window=window)


def _select_narrowed(collection: Collection, mount: Mount, arguments: dict, where: dict[str, Any]) -> Any:
    """`select` by index, a record outside `where` answered as not found (its key is not within the narrowing)."""
    answer = _select_keys(collection, mount, arguments)
    keep = narrowing.keeps(where)
    if collection.kind == "object":
        items = [item for item in answer["items"] if keep(item["content"])]
        held = {item["key"] for item in items}
    else:
        field = arguments.get("field") or mount.key_field
        items = [item for item in answer["items"] if keep(item)]
        held = {operations.key_text(item[field]) for item in items}
    wanted = {operations.key_text(key): key for key in arguments["keys"]}  # as operations.select lists them
    return {"items": items, "not_found": [original for key, original in wanted.items() if key not in held]}


def _query(
    collection: Collection,
    mount: Mount,
    arguments: dict,
    where: dict[str, Any] | None = None,
    *,
    window: PageWindow | None = None,
) -> Any:
    """`query_data` over the collection (module docstring). With `window` (the pipeline's page request), a compiled
    answer of one item per record (sql_query.windowed) is read only as far as its page (_compiled_window)."""
    expression = arguments["query"]
    compile_expression(expression)  # an invalid expression is refused as the evaluator refuses it
    compiled = _compiled_within(expression, collection, where)
    if compiled is not None:
        if window is not None and where is None and windowed(compiled):
            cut = _compiled_window(compiled, collection, window)
            if cut is not None:
                return cut
        else:
            answer = _run_compiled(compiled, collection)
            if answer is not None:
                return answer.value
    branches = multiselect.split(expression, collection.kind)
    if branches is not None and not _gathered_only(branches, collection, where):
        # Each branch by the path it takes alone, in this read's snapshot and under the call's one budget.
        return multiselect.answer(
            expression, branches, lambda branch: _query(collection, mount, {**arguments, "query": branch}, where)
        )
    keep = None if where is None else narrowing.keeps(where)
    decomposed = streamed.plan(expression, collection.kind)
    if decomposed is not None:  # evaluated chunk by chunk, only its results kept (data_access.streamed)
        started = time.perf_counter()
        try:
            return streamed.run(
                expression,
                decomposed,
                _chunks(collection),
                collection.kind,
                limit=max_evaluated_bytes(),
                keep=keep,
                length=collection.record_count,
            )
        finally:  # answered or stopped, as a compiled statement (_run_compiled)
            duration_ms = (time.perf_counter() - started) * 1000
            if duration_ms > slow_queries.slow_query_ms():
                slow_queries.observe_fields(
                    decomposed.filtered_fields, indexed_fields=_declared(collection), duration_ms=duration_ms
                )
    return operations.query_data(_value(collection, keep), Mount("", mount.key_field), arguments)


def _compiled_within(expression: str, collection: Collection, where: dict[str, Any] | None) -> SqlQuery | None:
    """`expression` over the collection (with `where`, over its records within it) compiled to SQL; None when it
    does not compile, or `where` does not compose (narrowing.composes: its records are then tested in Python).
    Narrowed, `expression` was checked to parse alone, so the composition cannot lift any of it out of the pipe."""
    if where is None:
        return compile_sql_expression(expression, _dialect(), collection.kind)
    if not narrowing.composes(where):
        return None
    return compile_sql_expression(narrowing.composed(where, expression), _dialect(), collection.kind)


def _gathered_only(found: multiselect.Split, collection: Collection, where: dict[str, Any] | None) -> bool:
    """No branch compiles, decomposes or splits into a branch that does: each would gather the collection, so the
    multi-select is gathered once, whole (the same answer: the evaluator's over the same records)."""
    for branch in found.branches:
        if _compiled_within(branch, collection, where) is not None:
            return False
        if streamed.plan(branch, collection.kind) is not None:
            return False
        inner = multiselect.split(branch, collection.kind)
        if inner is not None and not _gathered_only(inner, collection, where):
            return False
    return True


def _run_compiled(compiled: SqlQuery, collection: Collection, rows: tuple[int, int] | None = None) -> SqlAnswer | None:
    """run_sql over the collection under the call's budget (engine_cursor; chunked: on PostgreSQL the answer arrives
    FETCH_ROWS rows at a time, and an answer stopped by its bounds is stopped in the server), a slow statement
    reported (data_access.slow_queries) whether it answered or was stopped (the call's budget, its cancellation,
    the answer's bounds): a statement stopped for its cost is the one an index would most help."""
    started = time.perf_counter()
    try:
        with engine_cursor(chunked=True) as cursor:
            return run_sql(
                compiled,
                cursor,
                table=_records_table(),
                collection_id=collection.id,
                layouts=lambda ids: store.layouts_by_id(cursor, _layouts_table(), ids),
                known=collection.known,
                rows=rows,
            )
    finally:
        duration_ms = (time.perf_counter() - started) * 1000
        if duration_ms > slow_queries.slow_query_ms():
            slow_queries.observe_query(compiled, indexed_fields=_declared(collection), duration_ms=duration_ms)


def _compiled_window(compiled: SqlQuery, collection: Collection, window: PageWindow) -> Cut | None:
    """A compiled answer of one item per record (its length the collection's record_count) within the caller's
    result budget, as _windowed reads records: statements of PAGE_FIRST_ROWS items from the window's offset, each
    next one twice as many up to CHUNK, as far as the page and one item more (`window.cut`: the same answer,
    cursors and refusals as the pipeline's cut of the whole list). None when the first statement's checks send
    the query to the evaluator (the whole list is then answered as without a window)."""
    offset = window.offset or 0
    if offset > collection.record_count:
        return window.cut(iter(()), collection.record_count)  # CURSOR_EXPIRED, as for a shorter list
    first = _run_compiled(compiled, collection, (offset, PAGE_FIRST_ROWS))
    if first is None:
        return None

    def items() -> Iterator[Any]:
        batch: list = first.value
        read, size = 0, PAGE_FIRST_ROWS
        while True:
            yield from batch
            read += len(batch)
            if len(batch) < size:
                return
            size = min(size * 2, CHUNK)
            answer = _run_compiled(compiled, collection, (offset + read, size))
            if answer is None:  # the checks of the same snapshot passed for the first statement
                raise RuntimeError("a compiled statement's checks changed within one snapshot")
            batch = answer.value

    return window.cut(items(), collection.record_count)


def _declared(collection: Collection) -> list[str]:
    """The indexed_fields of the collection's table, for a slow read's report (data_access.slow_queries): as its
    snapshot read them, else read now (a collection read outside a snapshot: a write's, in the caller's
    transaction, where a stopped statement rolled back only its savepoint)."""
    if collection.declared is not None:
        return store.json_value(collection.declared)
    indexed = Table.objects.filter(collections__id=collection.id).values_list("indexed_fields", flat=True).first()
    return indexed or []


def _select_keys(collection: Collection, mount: Mount, arguments: dict) -> Any:
    field = arguments.get("field") or mount.key_field
    if collection.kind == "array" and field != collection.key_field:
        return operations.select(_value(collection), Mount("", mount.key_field), arguments)
    budget.charge(len(arguments["keys"]))
    wanted = {operations.key_text(key): key for key in arguments["keys"]}
    keys = list(wanted)
    rows: list[tuple[int, str | None, Any, int]] = []
    for start in range(0, len(keys), 500):
        part = keys[start : start + 500]
        rows.extend(_select(collection, f' AND "key" IN ({", ".join(["%s"] * len(part))})', tuple(part), by_key=True))
    if collection.kind == "array":
        rows.sort(key=lambda row: row[0])
        items = [record for _position, _key, record, _size in rows]
    else:
        by_key = {key: record for _position, key, record, _size in rows}
        items = [{"key": key, "content": by_key[key]} for key in wanted if key in by_key]
    found = {key for _position, key, _record, _size in rows}
    return {"items": items, "not_found": [original for key, original in wanted.items() if key not in found]}


def _preview(collection: Collection, arguments: dict, preview_keys: list[str]) -> Any:
    offset = arguments.get("offset", 0)
    limit = arguments.get("limit") or None
    if offset:
        # One statement: the first record's position by the directory (_ordinal), then the page from it. An OFFSET
        # over the page itself would read every record it skips (PostgreSQL converts each one's jsonb to text).
        with_clause, first, params = _ordinal(collection, offset)
        rows = _select(collection, f" AND position >= {first}", params, limit=limit, with_clause=with_clause)
    else:
        rows = _select(collection, limit=limit)
    budget.charge(len(rows))
    if collection.kind == "array":
        items = [
            {key: item[key] for key in preview_keys if key in item} if isinstance(item, dict) else item
            for _position, _key, item, _size in rows
        ]
    else:
        items = [
            {
                "key": key,
                "content": {k: value[k] for k in preview_keys if k in value} if isinstance(value, dict) else value,
            }
            for _position, key, value, _size in rows
        ]
    return {"items": items, "total_count": collection.record_count}


def schema(table_id: int, version: int, mount: Mount, arguments: dict, *, where: dict | None = None) -> Any:
    """get_data_schema over a rows table: over a collection, the shape of its first SCHEMA_SAMPLE records with
    its true count (`item_count` / `key_count`); elsewhere, the document's with the collections spliced in.
    With `where`, of the records within it: the first SCHEMA_SAMPLE of them, and their count (_narrowed_sample).
    In one snapshot, as `read`."""
    with snapshot(table_id) as current:
        return _schema(table_id, current, mount, arguments, where)


def _schema(table_id: int, version: int, mount: Mount, arguments: dict, where: dict | None) -> Any:
    found = collections(table_id)
    collection = found.get(mount.json_path)
    if collection is None:
        if where is not None:
            data = _spliced(table_id, version, mount, found)
            return narrowing.read_narrowed(data, mount, arguments, operations.get_data_schema, where)
        return operations.get_data_schema(_spliced(table_id, version, mount, found), mount, arguments)
    if where is None:
        sample, count = _first_records(collection)[0], collection.record_count
    else:
        sample, count = _narrowed_sample(collection, where)
    shape = describe(sample)
    shape["item_count" if collection.kind == "array" else "key_count"] = count
    return shape


def _narrowed_sample(collection: Collection, where: dict[str, Any]) -> tuple[list | dict, int]:
    """The first SCHEMA_SAMPLE records within `where` (in position order) and how many there are. Over an array,
    by the engine where `where` composes (narrowing.composes): `[?<where>] | length(@)` and
    `[?<where>] | [:SCHEMA_SAMPLE]` compiled as query_data's are and run under the call's budget (_run_compiled),
    so no record outside the sample is decoded; a sample over TOOLHUB_MAX_EVALUATED_BYTES of JSON is read in
    chunks instead, with the count already found. Otherwise (an object collection, a statement that does not
    compile or whose data the evaluator must answer) the records are read in chunks, each tested and counted."""
    keep = narrowing.keeps(where)
    if collection.kind == "array":
        counted = _compiled_within("length(@)", collection, where)
        sampled = _compiled_within(f"[:{SCHEMA_SAMPLE}]", collection, where)
        count = None if counted is None or sampled is None else _run_compiled(counted, collection)
        if count is not None and sampled is not None:
            try:
                sample = _run_compiled(sampled, collection)
            except ToolError as error:
                if not budget.is_over_evaluated_bytes(error):
                    raise
                return _first_records(collection, keep)[0], count.value
            if sample is not None:
                return sample.value, count.value
    return _first_records(collection, keep, count_all=True)


def _first_records(
    collection: Collection, keep: Callable[[Any], bool] | None = None, *, count_all: bool = False
) -> tuple[list | dict, int]:
    """The collection's first SCHEMA_SAMPLE records (with `keep`, of those it keeps) as a list or an object, and how
    many were kept: of every record with `count_all` (all are read), else of those read until the sample is full."""
    count = 0
    sample: list = []
    members: dict = {}
    for chunk in _chunks(collection, limit=SCHEMA_SAMPLE if keep is None else None):
        for _position, key, record, _size in chunk:
            if keep is not None and not keep(record):
                continue
            if count == SCHEMA_SAMPLE and not count_all:
                return sample if collection.kind == "array" else members, count
            count += 1
            if count <= SCHEMA_SAMPLE:
                if collection.kind == "array":
                    sample.append(record)
                else:
                    members[key] = record
    return sample if collection.kind == "array" else members, count


#
# Writing
#

# change(data, derived) -> (new_data, outcome, patch, inverse, carried), as services.table_write applies it.
RowsChange = Callable[[Any, dict], tuple[Any, Any, list, list, dict]]


def write(
    table_id: int,
    mount: Mount,
    operation: Callable[..., Any],
    arguments: dict,
    *,
    dry_run: bool,
    check: Callable[[Any], None] | None = None,
) -> RowsChange:
    """The change of a create/update/delete (`operation` of data_access.operations) over a rows table, for
    services.table_write to run under the table's row lock, checking and answering exactly as the document's write
    does (docs/tables-at-scale.md, "Writes"); `check(document)` is the caller's check of the call against the
    document the write sees (the depth), run before anything is written. Nothing is written with `dry_run`.

    - At a collection's mount: only the rows it writes are touched (KEY_EXISTS, KEY_NOT_FOUND, the count as the
      document's), and the entry's patch and inverse are per-record operations (docs/tables-at-scale.md,
      "History"): `{"op": "add", "collection", "position", "key", "value"}`, `{"op": "remove", "collection",
      "position"}`, `{"op": "replace", "collection", "position", "value"}`. The document is unchanged.
    - At a mount inside a collection's record (`/orders/0/items`, `/customers/c1`): the document's write runs over
      that one record (`_inside_record`), which is written whole: a `replace` with the old record as inverse (or an
      `add` when a create makes the member of an object collection it mounts at).
    - At any other mount (the document part: a holder of collections, a mount the write creates): the document's
      write runs over the document without records, recorded as its own RFC 6902 patch; TOOL_NOT_CALLABLE when it
      would replace or remove a collection (nothing written).

    TOOL_NOT_CALLABLE when a tool at a collection keys its records by another field than the collection does.
    """
    found = collections(table_id)
    # The table's records, from the collections read under the table's lock: exact until this write commits.
    held = sum(c.record_count for c in found.values())
    collection = found.get(mount.json_path)
    if collection is None:
        outer = next((c for c in found.values() if _within(mount.tokens, c.tokens)), None)
        if outer is not None:
            return _inside_record(
                table_id, outer, mount, operation(mount, arguments), dry_run=dry_run, check=check, held=held
            )
        return _in_document(found, mount, operation(mount, arguments), check=check)
    if collection.kind == "array" and mount.key_field != collection.key_field:
        raise ToolError(
            ErrorCode.TOOL_NOT_CALLABLE,
            f"The tool's mount {mount.label()!r} keys its records by another field than its collection does in a "
            "table stored as rows (docs/tables-at-scale.md); nothing was written.",
        )
    writes: dict[Callable[..., Any], Callable[..., tuple]] = {
        operations.create: partial(_create, held=held),
        operations.update: _update,
        operations.delete: _delete,
    }
    build = writes.get(operation)
    if build is None:
        raise ToolError(ErrorCode.TOOL_NOT_CALLABLE, "This write is not built for tables stored as rows.")

    def change(data: Any, derived: dict) -> tuple[Any, Any, list, list, dict]:
        if check is not None:
            check(data)  # the document keeps the collection's empty container
        with connection.cursor() as cursor:
            count, patch, inverse = build(cursor, collection, mount, arguments, dry_run)
        return data, count, patch, inverse, {}

    return change


def _inside_record(
    table_id: int,
    collection: Collection,
    mount: Mount,
    document_change: Any,
    *,
    dry_run: bool,
    check: Callable[[Any], None] | None,
    held: int,
) -> RowsChange:
    """A write at a mount inside a record of `collection` (of a table holding `held` records): the document's write
    (`document_change`) runs over the document without records holding only that record (`{token: record}` at the
    collection's mount: the record's token resolves as in the whole document, and every path the write builds is
    the same), so its checks, errors and answer are the document's. A record the token does not reach leaves the
    collection's empty container, where the document's write fails (or, for a create at exactly a missing member of
    an object collection, adds it) as on the whole document. The record is written whole: `replace` (its key
    follows its key field), with the old record as inverse; a new member is an `add`."""
    token = mount.tokens[len(collection.tokens)]

    def change(data: Any, derived: dict) -> tuple[Any, Any, list, list, dict]:
        with connection.cursor() as cursor:
            row = _record_by_token(cursor, collection, token)
            seen = data if row is None else pointer.replace(data, collection.tokens, {token: row[2]})
            if check is not None:
                check(seen)
            # A fresh `derived`: a key index built over the record must not be cached with the document.
            written, outcome, _patch, _inverse, _carried = document_change(seen, {})
            after = pointer.resolve(written, collection.tokens, collection.mount)
            if not isinstance(after, dict) or token not in after:
                raise RuntimeError(f"A write at {mount.label()!r} left no record at {token!r}.")  # never expected
            record = after[token]
            _check_record_size(record)
            cid = collection.id
            if row is None:
                _check_new_records(held, [record])
                position = _next_position(cursor, collection)
                patch = [{"op": "add", "collection": cid, "position": position, "key": token, "value": record}]
                inverse = [{"op": "remove", "collection": cid, "position": position}]
            else:
                patch = [{"op": "replace", "collection": cid, "position": row[0], "value": record}]
                inverse = [{"op": "replace", "collection": cid, "position": row[0], "value": row[2]}]
            if not dry_run:
                apply_operations(table_id, patch)
        return data, outcome, patch, inverse, {}

    return change


def _record_by_token(cursor: Any, collection: Collection, token: str) -> tuple[int, str | None, Any, int] | None:
    """The collection's record a JSON Pointer token reaches, as (position, key, record, size): an object's member
    of that key; an array's record at that index (a canonical non-negative integer, as pointer.resolve reads
    one), in position order, found by the collection's directory (_position_at). None when there is none."""
    if collection.kind == "object":
        rows = _by_keys(cursor, collection, [token])
        return rows[0] if rows else None
    if not (token.isdecimal() and token.isascii() and (token == "0" or not token.startswith("0"))):
        return None
    index = int(token)
    if index >= collection.record_count:
        return None
    position = _position_at(collection, index)
    if position is None:
        return None
    text = "data::text" if _dialect() == "postgresql" else "data"
    cursor.execute(
        f'SELECT position, "key", {text}, layout_id FROM "{_records_table()}" WHERE collection_id = %s'
        " AND position = %s",
        (collection.id, position),
    )
    rows = cursor.fetchall()
    return _decoded(rows, cursor, {})[0] if rows else None


def _next_position(cursor: Any, collection: Collection) -> int:
    """The position after the collection's last record (0 when it holds none)."""
    cursor.execute(f'SELECT MAX(position) FROM "{_records_table()}" WHERE collection_id = %s', (collection.id,))
    last = cursor.fetchone()[0]
    return 0 if last is None else int(last) + store.POSITION_GAP


def _check_record_size(record: Any, element: int | None = None) -> None:
    """Refuse (VALIDATION_ERROR, nothing written) a record a write makes larger than TOOLHUB_MAX_RECORD_BYTES: the
    written record, or the `element`-th of a create's `elements` (named with its path)."""
    limit = max_record_bytes()
    size = len(json.dumps(record))
    if size > limit:
        what, details = "The written record would be", {"limit": limit, "setting": "TOOLHUB_MAX_RECORD_BYTES"}
        if element is not None:
            what, details = f"Element {element} is", {**details, "path": ["elements", element]}
        raise ToolError(
            ErrorCode.VALIDATION_ERROR,
            f"{what} {size} bytes of JSON; one record is at most {limit} bytes (TOOLHUB_MAX_RECORD_BYTES). "
            "Nothing was written.",
            details,
        )


def _in_document(found: dict[str, Collection], mount: Mount, document_change: Any, *, check: Any) -> RowsChange:
    """A write at a mount neither at nor inside a collection: the document's write over the document without
    records, recorded as its own RFC 6902 patch (what a whole-data write records for the document part).
    TOOL_NOT_CALLABLE when one of its operations reaches a collection's mount (an update or delete of the member
    of a holder that is a collection): the records are not in this document."""

    def change(data: Any, derived: dict) -> tuple[Any, Any, list, list, dict]:
        if check is not None:
            check(data)
        written, outcome, patch, inverse, carried = document_change(data, derived)
        for operation in patch:
            tokens = pointer.parse(operation["path"])
            reached = next((c for c in found.values() if _within(tokens, c.tokens) or _within(c.tokens, tokens)), None)
            if reached is not None:
                raise ToolError(
                    ErrorCode.TOOL_NOT_CALLABLE,
                    f"This write at {mount.label()!r} would replace or remove the record collection at "
                    f"{reached.mount or '(the root)'!r} of a table stored as rows (docs/tables-at-scale.md); nothing "
                    "was written. Write its records with a tool at the collection, or the table's data whole.",
                    {"json_path": mount.json_path, "collection": reached.mount},
                )
        return written, outcome, patch, inverse, carried

    return change


def _by_keys(cursor: Any, collection: Collection, keys: list[str]) -> list[tuple[int, str | None, Any, int]]:
    """The records holding one of `keys`, in position order."""
    rows: list[tuple] = []
    text = "data::text" if _dialect() == "postgresql" else "data"
    for start in range(0, len(keys), 500):
        part = keys[start : start + 500]
        cursor.execute(
            f'SELECT position, "key", {text}, layout_id FROM "{_records_table()}" WHERE collection_id = %s'
            f' AND "key" IN ({", ".join(["%s"] * len(part))})',
            (collection.id, *part),
        )
        rows.extend(cursor.fetchall())
    rows.sort(key=lambda row: row[0])
    return _decoded(rows, cursor, {})


def _keyed(collection: Collection, mount: Mount, elements: list, action: str) -> list[tuple[str, Any]]:
    """(key, element) of each element a create or update writes: an array's records by the mount's key field, an
    object's entries by their own key (the document path's rules and errors, operations.record_key / entry_pair)."""
    if collection.kind == "array":
        return [
            (operations.record_key(element, i, mount.key_field, action), element) for i, element in enumerate(elements)
        ]
    return [operations.entry_pair(element, i, action) for i, element in enumerate(elements)]


def _create(cursor: Any, collection: Collection, mount: Mount, arguments: dict, dry_run: bool, *, held: int) -> tuple:
    elements = arguments["elements"]
    pairs = _keyed(collection, mount, elements, "create")
    _check_new_records(held, [value for _, value in pairs])
    keys = [key for key, _ in pairs]
    existing, first = _keys_held(cursor, collection, list(dict.fromkeys(keys)))
    operations.check_new_keys(keys, existing, mount)
    positions = [first + number * store.POSITION_GAP for number in range(len(pairs))]
    patch = [
        {"op": "add", "collection": collection.id, "position": position, "key": key, "value": value}
        for position, (key, value) in zip(positions, pairs, strict=True)
    ]
    inverse = [{"op": "remove", "collection": collection.id, "position": position} for position in reversed(positions)]
    if not dry_run:
        store.write_records(
            cursor,
            dialect=_dialect(),
            records_table=_records_table(),
            layouts_table=_layouts_table(),
            collection_id=collection.id,
            value=[value for _, value in pairs] if collection.kind == "array" else dict(pairs),
            key_of=_key_of(collection.key_field),
            first_position=first,
            counted=True,
            layout_ids=_known_layouts(collection.id),
        )
    return len(elements), patch, inverse


def _keys_held(cursor: Any, collection: Collection, keys: list[str]) -> tuple[set[str], int]:
    """Which of `keys` the collection's records hold, and the position after its last record (0 when it holds none),
    in one statement per 500 keys (the position comes with the first)."""
    held: set[str] = set()
    last = None
    for start in range(0, max(len(keys), 1), 500):
        part = keys[start : start + 500]
        parts: list[str] = []
        params: list[Any] = []
        if start == 0:
            parts.append(f'SELECT MAX(position), NULL FROM "{_records_table()}" WHERE collection_id = %s')
            params.append(collection.id)
        if part:
            marks = ", ".join(["%s"] * len(part))
            parts.append(
                f'SELECT NULL, "key" FROM "{_records_table()}" WHERE collection_id = %s AND "key" IN ({marks})'
            )
            params += [collection.id, *part]
        cursor.execute(" UNION ALL ".join(parts), params)
        for position, key in cursor.fetchall():
            if key is None:  # the MAX row (a key found by IN is never NULL)
                last = position
            else:
                held.add(key)
    return held, 0 if last is None else int(last) + store.POSITION_GAP


def _check_new_records(held: int, values: list) -> None:
    """Refuse (VALIDATION_ERROR, nothing written) records that would take the table (holding `held` records, as read
    under its lock) over TOOLHUB_MAX_TABLE_RECORDS, or one whose JSON is over TOOLHUB_MAX_RECORD_BYTES."""
    for number, value in enumerate(values):
        _check_record_size(value, number)
    most = max_table_records()
    if held + len(values) > most:
        raise ToolError(
            ErrorCode.VALIDATION_ERROR,
            f"The table holds {held} records; {len(values)} more would be over its {most} "
            "(TOOLHUB_MAX_TABLE_RECORDS). Nothing was written.",
            {"limit": most, "setting": "TOOLHUB_MAX_TABLE_RECORDS"},
        )


def _update(cursor: Any, collection: Collection, mount: Mount, arguments: dict, dry_run: bool) -> tuple:
    elements = arguments["elements"]
    wanted = _keyed(collection, mount, elements, "update")
    first: dict[str, tuple[int, Any]] = {}
    for position, key, record, _size in _by_keys(cursor, collection, list(dict.fromkeys(key for key, _ in wanted))):
        if key is not None and key not in first:  # the first record by position holds the key, as KeyIndex finds
            first[key] = (position, record)
    before: dict[int, Any] = {}
    after: dict[int, Any] = {}
    for number, (key, element) in enumerate(wanted):
        if key not in first:
            raise operations.missing(key, number, mount, "updated")
        position, record = first[key]
        before.setdefault(position, record)
        if collection.kind == "array":
            # The key only identifies the record: "1" finds id 1 (SPEC §8) but must not rewrite it as "1".
            fields = {field: value for field, value in element.items() if field != mount.key_field}
        else:
            fields = element
        after[position] = operations.merge_patch(after.get(position, record), fields)
    patch = [
        {"op": "replace", "collection": collection.id, "position": position, "value": value}
        for position, value in after.items()
    ]
    inverse = [
        {"op": "replace", "collection": collection.id, "position": position, "value": before[position]}
        for position in reversed(after)
    ]
    if not dry_run:
        layout_ids = _known_layouts(collection.id)
        for position, value in after.items():
            store.replace_record(
                cursor,
                dialect=_dialect(),
                records_table=_records_table(),
                layouts_table=_layouts_table(),
                collection_id=collection.id,
                position=position,
                record=value,
                layout_ids=layout_ids,
            )
    return len(elements), patch, inverse


def _delete(cursor: Any, collection: Collection, mount: Mount, arguments: dict, dry_run: bool) -> tuple:
    keys = [operations.key_text(key) for key in arguments["keys"]]
    wanted = list(dict.fromkeys(keys))
    rows = _by_keys(cursor, collection, wanted)
    held = {row[1] for row in rows}
    for number, key in enumerate(keys):
        if key not in held:
            raise operations.missing(key, number, mount, "deleted", path="keys")
    # Every record holding one of the keys goes (an array may repeat a key: data stored before keys were checked).
    patch = [{"op": "remove", "collection": collection.id, "position": row[0]} for row in reversed(rows)]
    inverse = [
        {"op": "add", "collection": collection.id, "position": position, "key": key, "value": record}
        for position, key, record, _size in rows
    ]
    if not dry_run:
        store.delete_records(
            cursor, records_table=_records_table(), collection_id=collection.id, positions=[row[0] for row in rows]
        )
        _count(collection, -len(rows))
    return len(rows) if collection.kind == "array" else len(wanted), patch, inverse


# Layout ids by collection and layout text (PostgreSQL), as committed writes found or made them: a layout row never
# changes and goes only with its collection, so a write whose records have a key order seen before looks none up.
_layouts: dict[int, dict[str, int]] = {}
LAYOUT_CACHE_COLLECTIONS = 256
LAYOUT_CACHE_LAYOUTS = 64


def _known_layouts(collection_id: int) -> dict[str, int]:
    """A copy of the collection's known layout ids for one write, which adds the ones it finds or makes; they are
    kept once its transaction commits (a layout made by a write rolled back does not exist)."""
    known = dict(_layouts.get(collection_id, {}))
    transaction.on_commit(partial(_learn_layouts, collection_id, known))
    return known


def forget_layouts() -> None:
    """Empty the known layouts (the tests, between databases that reuse collection ids)."""
    _layouts.clear()


def _learn_layouts(collection_id: int, known: dict[str, int]) -> None:
    if not known or len(known) > LAYOUT_CACHE_LAYOUTS:
        return
    if collection_id not in _layouts and len(_layouts) >= LAYOUT_CACHE_COLLECTIONS:
        _layouts.pop(next(iter(_layouts)), None)  # the collection learned first
    _layouts[collection_id] = known


def _count(collection: Collection, delta: int) -> None:
    TableCollection.objects.filter(pk=collection.id).update(record_count=F("record_count") + delta)


#
# Replacing the data whole
#


def replace_data(table_id: int, version: int, data: Any, exact: bool = False) -> tuple[list, list, Any, bool]:
    """A whole-data write of a rows table at `version` (the API's PUT/PATCH of `data`, setup apply, the admin's
    editor), inside the caller's transaction, which holds the table's row lock; returns (patch, inverse, the new
    document without its records, laid out again).

    When `data` has the same collections (mount and kind) for the table's tools, each collection's records are
    diffed against its rows (`_record_changes`: records matched by the collection's key, an object's member key,
    or an unkeyed record's JSON; unchanged ones keep their positions) and only the changed rows are written; the
    patch is the per-record operations plus the document's own diff (json_patch.diff, paths outside the
    collections), the inverse undoes both, so restore and versions work as after a data tool's write.
    Otherwise (a collection appears, goes or changes kind) the table is laid out again from `data` as when its
    tools change (`relayout`): the entry replaces the document (without records) whole, its inverse keeps the old
    layout with its records (`_layout_inverse`), and the caller makes the new version the table's
    rows_since_version. Refused (VALIDATION_ERROR, nothing written): a written record over
    TOOLHUB_MAX_RECORD_BYTES, more records than TOOLHUB_MAX_TABLE_RECORDS.

    The data written is what a document table's whole-data write leaves (`_as_the_document_writes`), or with
    `exact` (a restore) `data` itself, key order included, as a document table's restore writes it. When that is
    `data` taken whole, the document's diff keeps its key order (`ordered`), as the document table's entry, which
    holds `data` whole, does: the log replays to the order the version was written in.
    """
    tools = list(Tool.objects.filter(table_id=table_id).order_by("id").values_list("json_path", "metadata"))
    mounts = [(path, (metadata or {}).get("key_field") or "id") for path, metadata in tools]
    found = collections(table_id)
    keys = table_log.record_keys(table_id)
    if not exact:
        data, exact = _as_the_document_writes(_spliced(table_id, version, Mount("", "id"), found), data, keys)
    wanted = collection_mounts(data, mounts)
    # A worker's cached document of a version from before the move to rows may still hold the records.
    before = _without_records(services.table_document(table_id, version), list(found))
    total = sum(len(value) for _mount, _key_field, value in wanted)
    if {mount: _kind(value) for mount, _key_field, value in wanted} != {m: c.kind for m, c in found.items()}:
        _check_replaced_records(total, [(mount, value) for mount, _key_field, value in wanted])
        since = Table.objects.filter(pk=table_id).values_list("rows_since_version", flat=True).get()
        states = {collection.id: _by_position(collection) for collection in found.values()}
        inverse = [_layout_inverse(before, found, states, since)]
        _drop_collections(table_id)
        document = _lay_out(table_id, version + 1, data, mounts)
        # Marked "layout" as relayout's entry is; its inverse keeps the old layout with its records.
        patch = [{"op": "replace", "path": "", "value": document, "layout": True}]
        return patch, inverse, document, True
    document = _without_records(data, [mount for mount, _key_field, _value in wanted])
    patch, inverse = json_patch.diff(before, document, keys=keys, ordered=exact)
    written: list[tuple[str, list | dict]] = []
    for mount, _key_field, value in wanted:
        forward, backward = _record_changes(found[mount], value)
        written.append((mount, [operation["value"] for operation in forward if "value" in operation]))
        patch = patch + forward
        inverse = backward + inverse
    _check_replaced_records(total, written)
    apply_operations(table_id, [operation for operation in patch if "collection" in operation])
    return patch, inverse, document, False


def _as_the_document_writes(whole: Any, data: Any, keys: tuple[str, ...]) -> tuple[Any, bool]:
    """(`data` as a document table's whole-data write leaves it (table_log.table_replace), whether that is `data`
    taken whole): the old document with json_patch.diff's changes applied, whose objects keep their members' order
    where both hold them, or `data` itself, in its own order, when that diff is larger than it. The same JSON value
    either way; the order is what reads answer (`keys(@)`), so both storages answer alike."""
    patch, _inverse = json_patch.diff(whole, data, keys=keys)
    if not patch:
        return whole, False
    if len(json.dumps(patch)) > len(json.dumps(data)):
        return data, True
    return json_patch.apply(whole, patch), False


def _kind(value: list | dict) -> str:
    return "array" if isinstance(value, list) else "object"


def _without_records(data: Any, mounts: list[str]) -> Any:
    """`data` with an empty container at each collection's mount (shallowest first), as the snapshot keeps it."""
    document = data
    for mount in sorted(mounts, key=lambda found: len(pointer.parse(found))):
        value = pointer.resolve(document, pointer.parse(mount), mount)
        document = json_patch.apply(
            document, [{"op": "replace", "path": mount, "value": [] if isinstance(value, list) else {}}]
        )
    return document


def _check_replaced_records(total: int, written: list[tuple[str, list | dict]]) -> None:
    """Refuse (VALIDATION_ERROR, nothing written) a whole-data write whose collections would hold more than
    TOOLHUB_MAX_TABLE_RECORDS records, or one of whose written records is over TOOLHUB_MAX_RECORD_BYTES."""
    most = max_table_records()
    if total > most:
        raise ToolError(
            ErrorCode.VALIDATION_ERROR,
            f"The data holds {total} records; a table stored as rows holds at most {most} "
            "(TOOLHUB_MAX_TABLE_RECORDS). Nothing was written.",
            {"limit": most, "setting": "TOOLHUB_MAX_TABLE_RECORDS", "path": ["data"]},
        )
    limit = max_record_bytes()
    for mount, values in written:
        for value in values.values() if isinstance(values, dict) else values:
            size = len(json.dumps(value))
            if size > limit:
                raise ToolError(
                    ErrorCode.VALIDATION_ERROR,
                    f"A record of the collection at {mount or '(the root)'!r} is {size} bytes of JSON; one record is "
                    f"at most {limit} bytes (TOOLHUB_MAX_RECORD_BYTES). Nothing was written.",
                    {"limit": limit, "setting": "TOOLHUB_MAX_RECORD_BYTES", "path": ["data"]},
                )


def _record_changes(collection: Collection, value: list | dict) -> tuple[list, list]:
    """(operations, inverse) that make the collection's rows `value` (an array's records, or an object's members,
    in order) touching only what differs: records are matched to rows by key (an array's key field as SPEC §8's
    string, the n-th of a repeated key to the n-th row holding it; a record without one by its JSON; an object's
    member key). The matched records in a longest run that keeps its order keep their positions (`replace` when
    their JSON differs, key order included); every other row is removed and every other record added at a free
    position between its kept neighbours (`_placed`). Operations: removes, then adds (by position), then
    replaces; the inverse undoes them newest first."""
    old = sorted(_by_position(collection).items())
    if collection.kind == "array":
        key_of = _key_of(collection.key_field)
        new: list[tuple[str | None, Any]] = [(key_of(record), record) for record in value]
    else:
        assert isinstance(value, dict)
        new = list(value.items())

    def identity(key: str | None, record: Any) -> tuple[str, str]:
        return ("key", key) if key is not None else ("json", json.dumps(record, sort_keys=True))

    waiting: dict[tuple[str, str], deque[int]] = {}
    for index, (_position, (key, record)) in enumerate(old):
        waiting.setdefault(identity(key, record), deque()).append(index)
    matched: list[int | None] = []
    for key, record in new:
        queue = waiting.get(identity(key, record))
        matched.append(queue.popleft() if queue else None)
    kept = _increasing(matched)
    positions = _placed([position for position, _ in old], matched, kept)
    kept_rows = {matched[index] for index in kept}
    cid = collection.id
    removes = [(position, key, record) for index, (position, (key, record)) in enumerate(old) if index not in kept_rows]
    adds = sorted((positions[index], *new[index]) for index in range(len(new)) if index not in kept)
    replaces = []
    for index in sorted(kept, key=lambda kept_index: positions[kept_index]):
        row = matched[index]
        assert row is not None
        was = old[row][1][1]
        if json.dumps(was) != json.dumps(new[index][1]):
            replaces.append((positions[index], was, new[index][1]))
    forward = [{"op": "remove", "collection": cid, "position": position} for position, _key, _record in removes]
    forward += [
        {"op": "add", "collection": cid, "position": position, "key": key, "value": record}
        for position, key, record in adds
    ]
    forward += [{"op": "replace", "collection": cid, "position": p, "value": now} for p, _was, now in replaces]
    backward = [
        {"op": "replace", "collection": cid, "position": p, "value": was} for p, was, _now in reversed(replaces)
    ]
    backward += [
        {"op": "remove", "collection": cid, "position": position} for position, _key, _record in reversed(adds)
    ]
    backward += [
        {"op": "add", "collection": cid, "position": position, "key": key, "value": record}
        for position, key, record in removes
    ]
    return forward, backward


def _increasing(matched: list[int | None]) -> set[int]:
    """The indexes of `matched` (rows matched to the new records, in the new order) of a longest run whose rows
    increase: the records that keep their positions."""
    tails: list[int] = []  # tails[k]: index into `matched` ending the best run of length k + 1
    before: dict[int, int | None] = {}
    for index, row in enumerate(matched):
        if row is None:
            continue
        low, high = 0, len(tails)
        while low < high:
            middle = (low + high) // 2
            if matched[tails[middle]] < row:  # type: ignore[operator]
                low = middle + 1
            else:
                high = middle
        before[index] = tails[low - 1] if low else None
        if low == len(tails):
            tails.append(index)
        else:
            tails[low] = index
    kept: set[int] = set()
    at = tails[-1] if tails else None
    while at is not None:
        kept.add(at)
        at = before[at]
    return kept


def _placed(old_positions: list[int], matched: list[int | None], kept: set[int]) -> list[int]:
    """Each new record's position: a kept record its row's; the others, in order, free positions between their
    kept neighbours (POSITION_GAP apart where there is room, evenly spaced where less; positions start at 0). A
    gap too narrow for its records makes the kept record after it move too (it is removed and added)."""
    count = len(matched)
    while True:
        positions: list[int] = [0] * count
        for index in kept:
            row = matched[index]
            assert row is not None
            positions[index] = old_positions[row]
        anchors = [-1, *sorted(kept), count]
        narrow = None
        for low, high in zip(anchors, anchors[1:], strict=False):
            run = range(low + 1, high)
            if not run:
                continue
            spots = _spots(positions[low] if low >= 0 else None, positions[high] if high < count else None, len(run))
            if spots is None:
                narrow = high
                break
            for index, spot in zip(run, spots, strict=True):
                positions[index] = spot
        if narrow is None:
            return positions
        kept.discard(narrow)


def _spots(low: int | None, high: int | None, count: int) -> list[int] | None:
    """`count` increasing positions above `low` (or from 0) and below `high` (or without end); None when there
    is no room."""
    gap = store.POSITION_GAP
    if high is None:
        start = 0 if low is None else low + gap
        return [start + number * gap for number in range(count)]
    floor = -1 if low is None else low
    if high - floor - 1 < count:
        return None
    step = min(gap, (high - floor) // (count + 1))
    return [floor + step * (number + 1) for number in range(count)]


def apply_operations(table_id: int, operations_: list) -> None:
    """Apply per-record operations (an entry's patch or inverse, as `write` and `replace` make them) to the table's
    rows, in order, inside the caller's transaction (which holds the table's row lock): what restore runs. A run of
    adds (or removes) to one collection is written as one batch."""
    found = {collection.id: collection for collection in collections(table_id).values()}
    counts: dict[int, int] = {}
    with connection.cursor() as cursor:
        for op, collection_id, run in _runs(operations_):
            if collection_id not in found:
                raise RuntimeError(f"Table {table_id} has no collection {collection_id}.")
            collection = found[collection_id]
            if op == "add":
                objects = collection.kind == "object"
                store.write_records(
                    cursor,
                    dialect=_dialect(),
                    records_table=_records_table(),
                    layouts_table=_layouts_table(),
                    collection_id=collection_id,
                    value={operation.get("key"): operation["value"] for operation in run}
                    if objects
                    else [operation["value"] for operation in run],
                    # An array's record is keyed by the collection's key field now (its tools may have changed it
                    # since the entry was written); an object's member by its own key.
                    key_of=None if objects else _key_of(collection.key_field),
                    positions=[operation["position"] for operation in run],
                )
                counts[collection_id] = counts.get(collection_id, 0) + len(run)
            elif op == "remove":
                store.delete_records(
                    cursor,
                    records_table=_records_table(),
                    collection_id=collection_id,
                    positions=[operation["position"] for operation in run],
                )
                counts[collection_id] = counts.get(collection_id, 0) - len(run)
            else:
                # An array's record is keyed by its value (a write inside it may change its key field); an object's
                # member keeps its key.
                key_of = None if collection.kind == "object" else _key_of(collection.key_field)
                for operation in run:
                    store.replace_record(
                        cursor,
                        dialect=_dialect(),
                        records_table=_records_table(),
                        layouts_table=_layouts_table(),
                        collection_id=collection_id,
                        position=operation["position"],
                        record=operation["value"],
                        key=store.KEEP_KEY if key_of is None else key_of(operation["value"]),
                    )
    for collection_id, delta in counts.items():
        if delta:
            TableCollection.objects.filter(pk=collection_id).update(record_count=F("record_count") + delta)


def _constant(key: str | None) -> Callable[[Any], str | None]:
    return lambda _record: key


def _runs(operations_: list) -> Iterator[tuple[str, int, list[dict]]]:
    """(op, collection id, operations) of each run of consecutive operations with the same op on one collection
    (an add run ends before a position or key it already holds: one batch writes distinct rows)."""
    run: list[dict] = []
    positions: set[int] = set()
    keys: set[str] = set()
    for operation in operations_:
        same = bool(run) and (operation["op"], operation["collection"]) == (run[0]["op"], run[0]["collection"])
        key = operation.get("key")
        if same and operation["op"] == "add" and (operation["position"] in positions or key in keys):
            same = False
        if not same and run:
            yield run[0]["op"], run[0]["collection"], run
            run, positions, keys = [], set(), set()
        run.append(operation)
        positions.add(operation["position"])
        if key is not None:
            keys.add(key)
    if run:
        yield run[0]["op"], run[0]["collection"], run


# The services restore, import, lay out again and read whole a rows table through this module (they may not import
# data access).
table_log.rows_apply = apply_operations
table_log.rows_replace = replace_data
table_log.rows_start = start_as_rows
table_log.rows_relayout = relayout
table_log.rows_create = create_collection
table_log.rows_whole = whole_document
table_log.rows_unique_fields = unique_fields
table_log.rows_version = version_document
table_log.rows_sample = sample_document
table_log.rows_snapshot = snapshot

# The records view (tools_app.execution.record_pages) reads a window of rows, or a whole collection within the
# evaluator's byte bound, through these.
select_records = _select
collection_value = _value
dialect = _dialect
records_table = _records_table
position_at = _position_at
