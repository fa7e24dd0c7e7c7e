"""Tables whose record collections are stored as rows (docs/tables-at-scale.md): moving a table to rows, and
every read of a data tool over such a table. The one home of both; the executors call `read` and `schema` for a
table whose storage is "rows", and `table_to_rows` is what `manage.py tables_to_rows` runs.

- A *collection* is the array of records, or the object of records by key, at a mount of one of the table's
  tools (the shallowest one where mounts nest: a record is never split further), or at the root when no tool
  mounts below it. Its records become TableRecord rows (tools_app.data_access.sql.store); the document keeps
  an empty `[]` / `{}` at its mount.
- A read over exactly a collection touches only the rows it needs: `query_data` runs as one SQL statement when
  the expression compiles (tools_app.data_access.sql_query; its answer is jmespath's exactly), otherwise the
  records are read in chunks of CHUNK rows into the list the evaluator runs over, at most
  TOOLHUB_MAX_EVALUATED_BYTES of their JSON (QUERY_TOO_EXPENSIVE beyond); `select` by the collection's key
  field is an index lookup; `preview` reads its window (ORDER BY position, LIMIT/OFFSET); `get_data_schema`
  describes the first SCHEMA_SAMPLE records, with the true count.
- A read at any other mount (above a collection, or inside one of its records) runs over the document with
  the collections it reaches spliced in, under the same byte bound.
- A read narrowed by its binding (`where`, tools_app.data_access.narrowing) over an array collection runs
  `query_data` as one SQL statement with the narrowing as its first filter when that compiles; otherwise, and
  for the other reads, the records are streamed in chunks and only those within the narrowing are kept (and
  counted against the byte bound); `select` still looks its keys up by index, then drops what is outside.
"""

import json
import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Sum

from tools_app import services
from tools_app.data_access import budget, narrowing, operations, pointer, slow_queries, streamed
from tools_app.data_access.operations import Mount
from tools_app.data_access.query import compile_expression
from tools_app.data_access.shape import describe
from tools_app.data_access.sql import store
from tools_app.data_access.sql.codec import Layout, restore
from tools_app.data_access.sql.kinds import Known
from tools_app.data_access.sql_query import SqlQuery, compile_sql_expression, run_sql
from tools_app.kernel import json_patch
from tools_app.kernel.errors import ErrorCode, ToolError
from tools_app.models import Table, TableCollection, TableRecord, TableRecordLayout, TableSnapshot, TableStorage, Tool
from tools_app.services import table_log
from tools_app.validators import max_record_bytes, max_table_records

__all__ = [
    "CHUNK",
    "apply_operations",
    "SCHEMA_SAMPLE",
    "Collection",
    "collection_mounts",
    "collection_value",
    "collections",
    "create_collection",
    "dialect",
    "document_chunks",
    "max_evaluated_bytes",
    "read",
    "records_table",
    "relayout",
    "sample_document",
    "schema",
    "select_records",
    "table_to_rows",
    "version_document",
    "whole_document",
    "write",
]

CHUNK = 2_000
SCHEMA_SAMPLE = 10_000
# SQLite virtual-machine instructions between two looks at the call's clocks (one look costs ~1 µs; 10,000
# instructions take ~0.1-1 ms), so a statement over its budget stops within about a millisecond.
PROGRESS_EVERY = 10_000
QUERY_CANCELED = "57014"  # PostgreSQL's SQLSTATE of a statement stopped by statement_timeout
DEFAULT_MAX_EVALUATED_BYTES = 50 * 1024 * 1024


def max_evaluated_bytes() -> int:
    """How much record JSON a read may gather for the Python evaluator (a query that does not compile to SQL)."""
    return int(getattr(settings, "TOOLHUB_MAX_EVALUATED_BYTES", DEFAULT_MAX_EVALUATED_BYTES))


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

    @property
    def tokens(self) -> tuple[str, ...]:
        return pointer.parse(self.mount)


def collections(table_id: int) -> dict[str, Collection]:
    """The table's collections by mount."""
    rows = TableCollection.objects.filter(table_id=table_id).values_list(
        "id", "mount", "kind", "key_field", "record_count", "field_kinds"
    )
    return {row[1]: Collection(*row[:5], known=Known.of(row[5])) for row in rows}


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
        if (
            getattr(exc.__cause__, "sqlstate", None) == QUERY_CANCELED
            or getattr(exc, "sqlstate", None) == QUERY_CANCELED
        ):
            raise budget.too_expensive(
                "CPU-time budget",
                current.limits.cpu_ms,
                "ms",
                f" (the database statement ran over its {limit:,} ms left)",
            ) from exc
        raise


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


def table_to_rows(table_id: int) -> bool:
    """Move the table's collections into rows, in one transaction under its row lock; False when it already
    was. The version does not change (the answers do not); it is recorded as `rows_since_version`."""
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
        _lay_out(table_id, version, data, mounts)
        Table.objects.filter(pk=table_id).update(storage=TableStorage.ROWS, rows_since_version=version)
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
      the document (without records) whole, so every worker's cached document follows; the table is
      restorable from it on (`rows_since_version`): the earlier entries name the old collections' positions.

    The chosen mounts are computed over the document without its records: a candidate below a collection's mount
    is inside it either way, and one at its mount sees an empty container of the same kind, so when they equal
    the current collections, the whole document chooses the same ones."""
    row = Table.objects.select_for_update(no_key=True).filter(pk=table_id).values_list("version", "storage").first()
    if row is None or row[1] != TableStorage.ROWS:
        return
    version = row[0]
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
    data = whole_document(table_id, version)
    TableCollection.objects.filter(table_id=table_id).delete()
    document = _lay_out(table_id, version + 1, data, mounts)
    # The whole document without records (small): a worker's cached document of the earlier version may hold the
    # records of a collection (cached before the table moved to rows), so no finer patch applies to every copy.
    patch = [{"op": "replace", "path": "", "value": document}]
    inverse = [{"op": "replace", "path": "", "value": before}]
    table_log.table_relayout_entry(table_id, version + 1, patch, inverse, document)
    Table.objects.filter(pk=table_id).update(rows_since_version=version + 1)


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


def create_collection(table_id: int, values: Iterable[Any], key_field: str = "id") -> int:
    """Store `values` (an array's records in order, consumed once: a stream is never held whole) as the root
    collection of a new table stored as rows, inside the caller's transaction; return how many. What an import
    runs (services.imports): the rows are written `store.write_records`'s batch at a time."""
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
        )
    TableCollection.objects.filter(pk=collection.pk).update(record_count=count)
    return count


def whole_document(table_id: int, version: int) -> Any:
    """A rows table's whole document at its current `version`: the document with every collection spliced in at
    its mount, each at most max_evaluated_bytes() of record JSON (QUERY_TOO_EXPENSIVE beyond). What the whole-table
    views read (Table.data: the API's table, the admin's editor, setup export, generate-tools)."""
    return _spliced(table_id, version, Mount("", "id"), collections(table_id))


def sample_document(table_id: int, version: int) -> tuple[Any, dict[str, int]]:
    """A rows table's document with each collection's first SCHEMA_SAMPLE records spliced in, and each collection's
    true record count by mount: what describes a table's data (generate-tools, description drift, the admin's
    shape) without gathering it whole. Equal to the whole document when no collection holds more."""
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

    The rows are read after the document, statement by statement: a write committed meanwhile may show in part."""
    version = Table.objects.filter(pk=table_id).values_list("version", flat=True).get()
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
        yield from _collection_text(markers[match.group(0)], encode)
        start = match.end()
    yield text[start:]


def _collection_text(collection: Collection, encode: Callable[[Any], str]) -> Iterator[str]:
    array = collection.kind == "array"
    yield "[" if array else "{"
    first = True
    for chunk in _chunks(collection):
        parts = []
        for _position, key, record, _size in chunk:
            item = encode(record) if array else f"{encode(key)}: {encode(record)}"
            parts.append(item if first else ", " + item)
            first = False
        yield "".join(parts)
    yield "]" if array else "}"


def version_document(table_id: int, current: int, inverses: list[list]) -> Any:
    """A rows table's whole document as it was before the entries whose `inverses` are given (newest first, from
    `current` down): the document without records with their document operations applied, and each collection's
    records (gathered as `_value` does, bounded) with their per-record operations applied by position. Versions
    before the table's `rows_since_version` are not asked for (their entries patch records in the document)."""
    document = services.table_document(table_id, current)
    found = collections(table_id)
    by_id = {collection.id: collection for collection in found.values()}
    states = {collection.id: _by_position(collection) for collection in found.values()}
    for inverse in inverses:
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
    for collection_id, state in states.items():
        ordered = [state[position] for position in sorted(state)]
        if by_id[collection_id].kind == "array":
            value: list | dict = [record for _key, record in ordered]
        else:
            value = {key: record for key, record in ordered}
        document = json_patch.apply(document, [{"op": "replace", "path": by_id[collection_id].mount, "value": value}])
    return document


def _by_position(collection: Collection) -> dict[int, tuple[str | None, Any]]:
    """The collection's (key, record) by position, at most max_evaluated_bytes() of record JSON."""
    limit = max_evaluated_bytes()
    total = 0
    state: dict[int, tuple[str | None, Any]] = {}
    for chunk in _chunks(collection):
        for position, key, record, size in chunk:
            total += size
            if total > limit:
                raise _too_expensive(limit)
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
    collection: Collection, where: str = "", params: tuple = (), *, limit: int | None = None, offset: int = 0
) -> list[tuple[int, str | None, Any, int]]:
    """The collection's records matching `where` in position order, `offset` skipped, at most `limit`."""
    text = "data::text" if _dialect() == "postgresql" else "data"
    sql = (
        f'SELECT position, "key", {text}, layout_id FROM "{_records_table()}" WHERE collection_id = %s{where}'
        " ORDER BY position"
    )
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    elif offset and _dialect() == "sqlite":
        sql += " LIMIT -1"  # SQLite takes OFFSET only after a LIMIT
    if offset:
        sql += f" OFFSET {int(offset)}"
    with engine_budget(), connection.cursor() as cursor:
        cursor.execute(sql, (collection.id, *params))
        return _decoded(cursor.fetchall(), cursor, {})


def _chunks(collection: Collection, limit: int | None = None) -> Iterator[list[tuple[int, str | None, Any, int]]]:
    """The collection's records in position order, CHUNK rows per statement (keyset on position); at most
    `limit` records. The time budget is checked after each chunk."""
    after: int | None = None
    left = limit
    layouts: dict[int, Layout] = {}
    text = "data::text" if _dialect() == "postgresql" else "data"
    current = budget.active()
    while left is None or left > 0:
        size = CHUNK if left is None else min(CHUNK, left)
        where = "" if after is None else " AND position > %s"
        params: tuple = (collection.id,) if after is None else (collection.id, after)
        with engine_budget(), connection.cursor() as cursor:
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


def _too_expensive(limit: int) -> ToolError:
    return ToolError(
        ErrorCode.QUERY_TOO_EXPENSIVE,
        f"This read needs more than {limit} bytes of records evaluated in the server (TOOLHUB_MAX_EVALUATED_BYTES): "
        "narrow it with a filter that compiles to SQL (comparisons on fields), or page it.",
        {"limit": limit},
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
                raise _too_expensive(limit)
            if collection.kind == "array":
                items.append(record)
            else:
                members[key] = record
    return items if collection.kind == "array" else members


def _spliced(table_id: int, version: int, mount: Mount, found: dict[str, Collection]) -> Any:
    """The document with the collections that `mount` reaches (above or below it) spliced in."""
    data = services.table_document(table_id, version)
    for collection in found.values():
        tokens = collection.tokens
        if _within(tokens, mount.tokens) or _within(mount.tokens, tokens):
            data = json_patch.apply(data, [{"op": "replace", "path": collection.mount, "value": _value(collection)}])
    return data


def read(
    table_id: int,
    version: int,
    mount: Mount,
    operation: Callable[..., Any],
    arguments: dict,
    extra: tuple = (),
    *,
    where: dict[str, Any] | None = None,
) -> Any:
    """`operation(data, mount, arguments, *extra)` (a read of data_access.operations) over a rows table, with
    the answer the document would give (module docstring); with `where`, over the mount's records within it."""
    found = collections(table_id)
    collection = found.get(mount.json_path)
    if where is not None:
        return _narrowed_read(table_id, version, mount, found, operation, arguments, extra, where)
    if collection is None:
        return operation(_spliced(table_id, version, mount, found), mount, arguments, *extra)
    if operation is operations.query_data:
        return _query(collection, mount, arguments)
    if operation is operations.select:
        return _select_keys(collection, mount, arguments)
    if operation is operations.preview and extra and extra[0]:
        return _preview(collection, arguments, extra[0])
    if operation in (operations.get_all_data, operations.preview):
        return _value(collection)
    return operation(_value(collection), Mount("", mount.key_field), arguments, *extra)


def _narrowed_read(
    table_id: int,
    version: int,
    mount: Mount,
    found: dict[str, Collection],
    operation: Callable[..., Any],
    arguments: dict,
    extra: tuple,
    where: dict[str, Any],
) -> Any:
    collection = found.get(mount.json_path)
    if collection is None:
        data = _spliced(table_id, version, mount, found)
        return narrowing.read_narrowed(data, mount, arguments, operation, where, *extra)
    if operation is operations.query_data and collection.kind == "array":
        return _query(collection, mount, arguments, where)
    if operation is operations.select:
        return _select_narrowed(collection, mount, arguments, where)
    root = Mount("", mount.key_field)
    return operation(_value(collection, narrowing.keeps(where)), root, arguments, *extra)


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


def _query(collection: Collection, mount: Mount, arguments: dict, where: dict[str, Any] | None = None) -> Any:
    expression = arguments["query"]
    compile_expression(expression)  # an invalid expression is refused as the evaluator refuses it
    # Narrowed: checked to parse alone above, so the composition cannot lift any of it out of the pipe.
    sql_expression = expression if where is None else narrowing.composed(where, expression)
    compiled = compile_sql_expression(sql_expression, _dialect(), collection.kind)
    if compiled is not None:
        started = time.perf_counter()
        with engine_budget(), connection.cursor() as cursor:
            answer = run_sql(
                compiled,
                cursor,
                table=_records_table(),
                collection_id=collection.id,
                layouts=lambda ids: store.layouts_by_id(cursor, _layouts_table(), ids),
                known=collection.known,
            )
        _observe(compiled, collection, (time.perf_counter() - started) * 1000)
        if answer is not None:
            return answer.value
    keep = None if where is None else narrowing.keeps(where)
    decomposed = streamed.plan(expression, collection.kind)
    if decomposed is not None:  # evaluated chunk by chunk, only its results kept (data_access.streamed)
        chunks = _chunks(collection)
        return streamed.run(expression, decomposed, chunks, collection.kind, limit=max_evaluated_bytes(), keep=keep)
    return operations.query_data(_value(collection, keep), Mount("", mount.key_field), arguments)


def _observe(compiled: SqlQuery, collection: Collection, duration_ms: float) -> None:
    """A slow compiled statement filtering or sorting on fields the table does not index is reported
    (data_access.slow_queries: the metric, and the call log's note). The declared fields are read only then."""
    if duration_ms <= slow_queries.slow_query_ms():
        return
    indexed = Table.objects.filter(collections__id=collection.id).values_list("indexed_fields", flat=True).first()
    slow_queries.observe_query(compiled, indexed_fields=indexed or [], duration_ms=duration_ms)


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
        rows.extend(_select(collection, f' AND "key" IN ({", ".join(["%s"] * len(part))})', tuple(part)))
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
    rows = _select(collection, limit=limit, offset=offset)
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
    With `where`, of the records within it: the first SCHEMA_SAMPLE of them, and their count (all are read)."""
    found = collections(table_id)
    collection = found.get(mount.json_path)
    if collection is None:
        if where is not None:
            data = _spliced(table_id, version, mount, found)
            return narrowing.read_narrowed(data, mount, arguments, operations.get_data_schema, where)
        return operations.get_data_schema(_spliced(table_id, version, mount, found), mount, arguments)
    keep = None if where is None else narrowing.keeps(where)
    count = 0
    sample: list = []
    members: dict = {}
    for chunk in _chunks(collection, limit=SCHEMA_SAMPLE if keep is None else None):
        for _position, key, record, _size in chunk:
            if keep is not None and not keep(record):
                continue
            count += 1
            if count > SCHEMA_SAMPLE:
                continue
            if collection.kind == "array":
                sample.append(record)
            else:
                members[key] = record
    shape = describe(sample if collection.kind == "array" else members)
    total = count if keep is not None else collection.record_count
    shape["item_count" if collection.kind == "array" else "key_count"] = total
    return shape


#
# Writing
#

# change(data, derived) -> (new_data, outcome, patch, inverse, carried), as services.table_write applies it.
RowsChange = Callable[[Any, dict], tuple[Any, Any, list, list, dict]]


def write(table_id: int, mount: Mount, operation: Callable[..., Any], arguments: dict, *, dry_run: bool) -> RowsChange:
    """The change of a create/update/delete (`operation` of data_access.operations) over a rows table, for
    services.table_write to run under the table's row lock: it touches only the rows it writes (none with
    `dry_run`), checks and answers exactly as the document's write does (KEY_EXISTS, KEY_NOT_FOUND, the count),
    and returns per-record operations as the entry's patch and inverse (docs/tables-at-scale.md, "History"):
    `{"op": "add", "collection", "position", "key", "value"}`, `{"op": "remove", "collection", "position"}`,
    `{"op": "replace", "collection", "position", "value"}`. The document (without the records) is unchanged.

    TOOL_NOT_CALLABLE when the mount is not one of the table's collections, or keys its records by another field
    than the collection does: such a write would need the records in the document.
    """
    collection = collections(table_id).get(mount.json_path)
    if collection is None or (collection.kind == "array" and mount.key_field != collection.key_field):
        where = "is not one of its record collections" if collection is None else "keys its records by another field"
        raise ToolError(
            ErrorCode.TOOL_NOT_CALLABLE,
            f"The tool's mount {mount.label()!r} {where} of a table stored as rows (docs/tables-at-scale.md); "
            "nothing was written.",
        )
    writes = {operations.create: _create, operations.update: _update, operations.delete: _delete}
    build = writes.get(operation)
    if build is None:
        raise ToolError(ErrorCode.TOOL_NOT_CALLABLE, "This write is not built for tables stored as rows.")

    def change(data: Any, derived: dict) -> tuple[Any, Any, list, list, dict]:
        with connection.cursor() as cursor:
            count, patch, inverse = build(cursor, collection, mount, arguments, dry_run)
        return data, count, patch, inverse, {}

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


def _create(cursor: Any, collection: Collection, mount: Mount, arguments: dict, dry_run: bool) -> tuple:
    elements = arguments["elements"]
    pairs = _keyed(collection, mount, elements, "create")
    _check_new_records(collection, [value for _, value in pairs])
    keys = [key for key, _ in pairs]
    existing = {row[1] for row in _by_keys(cursor, collection, list(dict.fromkeys(keys)))}
    operations.check_new_keys(keys, existing, mount)
    cursor.execute(f'SELECT MAX(position) FROM "{_records_table()}" WHERE collection_id = %s', (collection.id,))
    last = cursor.fetchone()[0]
    first = 0 if last is None else int(last) + store.POSITION_GAP
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
        )
        _count(collection, len(pairs))
    return len(elements), patch, inverse


def _check_new_records(collection: Collection, values: list) -> None:
    """Refuse (VALIDATION_ERROR, nothing written) records that would take the table over TOOLHUB_MAX_TABLE_RECORDS,
    or one whose JSON is over TOOLHUB_MAX_RECORD_BYTES."""
    limit = max_record_bytes()
    for number, value in enumerate(values):
        size = len(json.dumps(value))
        if size > limit:
            raise ToolError(
                ErrorCode.VALIDATION_ERROR,
                f"Element {number} is {size} bytes of JSON; one record is at most {limit} bytes "
                "(TOOLHUB_MAX_RECORD_BYTES). Nothing was written.",
                {"limit": limit, "setting": "TOOLHUB_MAX_RECORD_BYTES", "path": ["elements", number]},
            )
    most = max_table_records()
    same_table = TableCollection.objects.filter(table__collections__id=collection.id)
    held = same_table.aggregate(n=Sum("record_count"))["n"]
    if (held or 0) + len(values) > most:
        raise ToolError(
            ErrorCode.VALIDATION_ERROR,
            f"The table holds {held or 0} records; {len(values)} more would be over its {most} "
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
        for position, value in after.items():
            store.replace_record(
                cursor,
                dialect=_dialect(),
                records_table=_records_table(),
                layouts_table=_layouts_table(),
                collection_id=collection.id,
                position=position,
                record=value,
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


def _count(collection: Collection, delta: int) -> None:
    TableCollection.objects.filter(pk=collection.id).update(record_count=F("record_count") + delta)


def apply_operations(table_id: int, operations_: list) -> None:
    """Apply per-record operations (an entry's patch or inverse, as `write` makes them) to the table's rows, in
    order, inside the caller's transaction (which holds the table's row lock): what restore runs."""
    found = {collection.id: collection for collection in collections(table_id).values()}
    kinds = {collection_id: collection.kind for collection_id, collection in found.items()}
    counts: dict[int, int] = {}
    with connection.cursor() as cursor:
        for operation in operations_:
            collection_id, position, op = operation["collection"], operation["position"], operation["op"]
            if collection_id not in kinds:
                raise RuntimeError(f"Table {table_id} has no collection {collection_id}.")
            if op == "add":
                key = operation.get("key")
                store.write_records(
                    cursor,
                    dialect=_dialect(),
                    records_table=_records_table(),
                    layouts_table=_layouts_table(),
                    collection_id=collection_id,
                    value={key: operation["value"]} if kinds[collection_id] == "object" else [operation["value"]],
                    # An array's record is keyed by the collection's key field now (its tools may have changed it
                    # since the entry was written); an object's member by its own key.
                    key_of=_constant(key)
                    if kinds[collection_id] == "object"
                    else _key_of(found[collection_id].key_field),
                    first_position=position,
                )
                counts[collection_id] = counts.get(collection_id, 0) + 1
            elif op == "remove":
                store.delete_records(
                    cursor, records_table=_records_table(), collection_id=collection_id, positions=[position]
                )
                counts[collection_id] = counts.get(collection_id, 0) - 1
            else:
                store.replace_record(
                    cursor,
                    dialect=_dialect(),
                    records_table=_records_table(),
                    layouts_table=_layouts_table(),
                    collection_id=collection_id,
                    position=position,
                    record=operation["value"],
                )
    for collection_id, delta in counts.items():
        if delta:
            TableCollection.objects.filter(pk=collection_id).update(record_count=F("record_count") + delta)


def _constant(key: str | None) -> Callable[[Any], str | None]:
    return lambda _record: key


# The services restore, import, lay out again and read whole a rows table through this module (they may not import
# data access).
table_log.rows_apply = apply_operations
table_log.rows_relayout = relayout
table_log.rows_create = create_collection
table_log.rows_whole = whole_document
table_log.rows_version = version_document
table_log.rows_sample = sample_document

# The records view (tools_app.execution.record_pages) reads a window of rows, or a whole collection within the
# evaluator's byte bound, through these.
select_records = _select
collection_value = _value
dialect = _dialect
records_table = _records_table
