"""Writing a collection's records as rows, and reading them back, through a DB-API cursor (Django's).

What the tests and benchmarks load their collections with, and what the migration of existing tables will
call (docs/tables-at-scale.md, "Migration"): the layout of the rows is the TableRecord model's
(tools_app.models.table_record), named here by its table names so that data access needs no model.
"""

import contextlib
import hashlib
import json
import sqlite3
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from concurrent import futures
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from tools_app.data_access.sql import kinds
from tools_app.data_access.sql.codec import (
    Layout,
    LayoutKey,
    layout_from_key,
    layout_key,
    layout_of,
    record_text,
    restore,
)
from tools_app.data_access.sql.kinds import COLLECTIONS_TABLE

__all__ = [
    "BLOCKS_TABLE",
    "BLOCK_SPAN",
    "KEEP_KEY",
    "POSITION_GAP",
    "delete_records",
    "field_kinds",
    "iter_records",
    "layouts_by_id",
    "layouts_of",
    "replace_record",
    "write_records",
]

# Positions are spaced so that a record inserted between two others takes a free position in between;
# the collection is renumbered only when there is none.
POSITION_GAP = 1024
# The positions one row of a collection's directory counts (TableRecordBlock; its table below, a test holds the
# two equal): 1,024 records appended POSITION_GAP apart. Every write of records here keeps the directory in the
# same transaction, so no writer can leave it stale. Migration 0028 filled it with this value.
BLOCK_SPAN = 1024 * POSITION_GAP
BLOCKS_TABLE = "tools_app_tablerecordblock"
# A layout's stored text (json.dumps(layout, separators=(",", ":"), ensure_ascii=False), its encoder made once).
_LAYOUT_TEXT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
# At most this many rows are written on PostgreSQL by one INSERT, more by COPY.
FEW_ROWS = 100
# replace_record's `key` when the row's key stays.
KEEP_KEY: Any = object()


def _rows(
    value: Iterable[Any] | dict,
    key_of: Callable[[Any], str | None] | None,
    first_position: int = 0,
    positions: Iterable[int] | None = None,
) -> Iterator[tuple[int, str | None, Any]]:
    if isinstance(value, dict):
        items: Iterable[tuple[str | None, Any]] = value.items()
    else:
        items = ((None if key_of is None else key_of(record), record) for record in value)
    if positions is not None:
        yield from ((position, key, record) for position, (key, record) in zip(positions, items, strict=True))
        return
    for index, (key, record) in enumerate(items):
        yield first_position + index * POSITION_GAP, key, record


def write_records(
    cursor: Any,
    *,
    dialect: str,
    records_table: str,
    layouts_table: str,
    collection_id: int,
    value: Iterable[Any] | dict,
    batch: int = 5_000,
    key_of: Callable[[Any], str | None] | None = None,
    first_position: int = 0,
    positions: Iterable[int] | None = None,
    counted: bool = False,
    layout_ids: dict[str, int] | None = None,
    compact_of: Callable[[Any], str | None] | None = None,
) -> int:
    """Store every record of `value` (an array of records, or any iterable of them, consumed once and `batch` rows
    at a time, so a stream is never held whole; or an object of records by key) as one row of `collection_id`, in
    order from `first_position` (POSITION_GAP apart); return how many. The positions must be
    free: an empty collection, or past its last record. An array's records get the key `key_of(record)` (none
    without it); an object's members their key. `positions`, when given, are the records' positions instead (one
    each, free). With `counted` (`value` a list or a dict: its length known before it is written), the collection's
    record_count grows by that many in the statement that reads its field kinds. `layout_ids`: the collection's
    layout ids by layout text known to the caller (committed ones only), to which the layouts written are added.
    `compact_of(record)`: the record's compact text (validators.record_texts') when the caller encoded it already,
    else None (encoded here). While `value` yields, rows may be in flight (PostgreSQL: a COPY left open; SQLite: a
    batch on the writer's thread; _RowWriter): a stream must run no statement on the connection."""
    layout_ids = {} if layout_ids is None else layout_ids
    count = 0
    grows = len(value) if counted and isinstance(value, list | dict) else None
    if counted and grows is None:
        raise TypeError("write_records(counted=True) takes a list or a dict of records.")
    before = _kinds_before(cursor, dialect, records_table, collection_id, grows)
    tally = kinds.Tally()
    blocks: Counter[int] = Counter()
    by_key: dict[LayoutKey, int | None] = {None: None}  # layout ids by layout key: no layout's text per record
    postgresql = dialect == "postgresql"
    with _RowWriter(cursor, dialect, records_table, batch) as rows:
        for position, key, record in _rows(value, key_of, first_position, positions):
            compact = None if compact_of is None else compact_of(record)
            text = record_text(record, dialect=dialect, compact=compact)
            layout_id = None
            if postgresql:
                shape = layout_key(record)
                layout_id = by_key.get(shape)
                if layout_id is None and shape is not None:
                    rows.pause()  # the layout's statements run on the cursor: no COPY may be open
                    layout = layout_from_key(shape)
                    layout_id = by_key[shape] = _layout_id_of(cursor, layouts_table, collection_id, layout, layout_ids)
            rows.add((collection_id, position, key, text, layout_id))
            tally.add(record)
            blocks[position // BLOCK_SPAN] += 1
            count += 1
    _kinds_after(cursor, dialect, collection_id, before, tally)
    _count_blocks(cursor, collection_id, blocks)
    return count


def _kinds_before(
    cursor: Any, dialect: str, records_table: str, collection_id: int, grows: int | None = None
) -> dict | None:
    """The collection's field kinds before a write (locked on PostgreSQL until the transaction ends, so two
    writers do not lose each other's); with `grows`, its record_count grows by that many in the same statement
    (an UPDATE, which takes the same lock). Unknown (NULL) facts of a collection holding no record are the empty
    facts: a collection starts known; one written before facts were kept stays unknown."""
    if grows is not None:
        cursor.execute(
            f'UPDATE "{COLLECTIONS_TABLE}" SET record_count = record_count + %s WHERE id = %s RETURNING field_kinds',
            (grows, collection_id),
        )
    else:
        lock = " FOR UPDATE" if dialect == "postgresql" else ""
        cursor.execute(f'SELECT field_kinds FROM "{COLLECTIONS_TABLE}" WHERE id = %s{lock}', (collection_id,))
    row = cursor.fetchone()
    facts = json_value(row[0]) if row and row[0] is not None else None
    if facts is None:
        cursor.execute(f'SELECT 1 FROM "{records_table}" WHERE collection_id = %s LIMIT 1', (collection_id,))
        if cursor.fetchone() is None:
            return kinds.empty()
    return facts


def _kinds_after(cursor: Any, dialect: str, collection_id: int, before: dict | None, tally: kinds.Tally) -> None:
    after = kinds.merge(before, tally.facts())
    if after is not None and after != before:
        cast = "::jsonb" if dialect == "postgresql" else ""
        cursor.execute(
            f'UPDATE "{COLLECTIONS_TABLE}" SET field_kinds = %s{cast} WHERE id = %s',
            (kinds.facts_text(after), collection_id),
        )


def field_kinds(cursor: Any, collection_id: int) -> kinds.Known | None:
    """The collection's field kinds as the renderer takes them (None: unknown)."""
    cursor.execute(f'SELECT field_kinds FROM "{COLLECTIONS_TABLE}" WHERE id = %s', (collection_id,))
    row = cursor.fetchone()
    return kinds.Known.of(json_value(row[0])) if row and row[0] is not None else None


def _encoded(
    cursor: Any, dialect: str, layouts_table: str, collection_id: int, record: Any, layout_ids: dict[str, int]
) -> tuple[str, int | None]:
    """A record's stored text and its layout's id (PostgreSQL, when JSONB would reorder its keys)."""
    layout = layout_of(record) if dialect == "postgresql" else None
    layout_id = None if layout is None else _layout_id_of(cursor, layouts_table, collection_id, layout, layout_ids)
    return record_text(record, dialect=dialect), layout_id


def _layout_id_of(
    cursor: Any, layouts_table: str, collection_id: int, layout: Layout, layout_ids: dict[str, int]
) -> int:
    """The id of `layout` among the collection's layouts (stored when new); `layout_ids` as write_records'."""
    # Known layouts by their text: a batch's records mostly share a few, whose digest is taken once.
    text = _LAYOUT_TEXT(layout)
    layout_id = layout_ids.get(text)
    if layout_id is None:
        digest = hashlib.sha256(text.encode()).hexdigest()
        layout_id = layout_ids[text] = _layout_id(cursor, layouts_table, collection_id, digest, text)
    return layout_id


def replace_record(
    cursor: Any,
    *,
    dialect: str,
    records_table: str,
    layouts_table: str,
    collection_id: int,
    position: int,
    record: Any,
    key: Any = KEEP_KEY,
    layout_ids: dict[str, int] | None = None,
) -> None:
    """Write `record` over the row at `position` of the collection; its key stays, or becomes `key` (a string or
    None) when given. `layout_ids` as write_records'."""
    before = _kinds_before(cursor, dialect, records_table, collection_id)
    tally = kinds.Tally()
    tally.add(record)
    _kinds_after(cursor, dialect, collection_id, before, tally)
    text, layout_id = _encoded(
        cursor, dialect, layouts_table, collection_id, record, {} if layout_ids is None else layout_ids
    )
    cast = "::jsonb" if dialect == "postgresql" else ""
    keyed = "" if key is KEEP_KEY else ', "key" = %s'
    cursor.execute(
        f'UPDATE "{records_table}" SET data = %s{cast}, layout_id = %s{keyed}'
        " WHERE collection_id = %s AND position = %s",
        (text, layout_id, *(() if key is KEEP_KEY else (key,)), collection_id, position),
    )


def delete_records(cursor: Any, *, records_table: str, collection_id: int, positions: list[int]) -> None:
    """Delete the rows at `positions` of the collection (each holding a record)."""
    for start in range(0, len(positions), 500):
        part = positions[start : start + 500]
        cursor.execute(
            f'DELETE FROM "{records_table}" WHERE collection_id = %s AND position IN ({", ".join(["%s"] * len(part))})',
            (collection_id, *part),
        )
    _count_blocks(
        cursor, collection_id, Counter({block: -n for block, n in Counter(p // BLOCK_SPAN for p in positions).items()})
    )


def _count_blocks(cursor: Any, collection_id: int, deltas: Counter[int]) -> None:
    """Add `deltas` (records by block) to the collection's directory; a block left without records loses its row."""
    changed = sorted((block, delta) for block, delta in deltas.items() if delta)
    if not changed:
        return
    for start in range(0, len(changed), 500):  # one statement per 500 blocks (each block once: ON CONFLICT's rule)
        pairs = changed[start : start + 500]
        cursor.execute(
            f'INSERT INTO "{BLOCKS_TABLE}" (collection_id, block, record_count) VALUES '
            + ", ".join(["(%s, %s, %s)"] * len(pairs))
            + f' ON CONFLICT (collection_id, block) DO UPDATE SET record_count = "{BLOCKS_TABLE}".record_count'
            " + excluded.record_count",
            [value for block, delta in pairs for value in (collection_id, block, delta)],
        )
    emptied = [block for block, delta in changed if delta < 0]
    for start in range(0, len(emptied), 500):
        part = emptied[start : start + 500]
        cursor.execute(
            f'DELETE FROM "{BLOCKS_TABLE}" WHERE collection_id = %s AND block IN ({", ".join(["%s"] * len(part))})'
            " AND record_count <= 0",
            (collection_id, *part),
        )


def _layout_id(cursor: Any, table: str, collection_id: int, digest: str, text: str) -> int:
    cursor.execute(f'SELECT id FROM "{table}" WHERE collection_id = %s AND digest = %s', (collection_id, digest))
    found = cursor.fetchone()
    if found:
        return int(found[0])
    cursor.execute(
        f'INSERT INTO "{table}" (collection_id, digest, layout) VALUES (%s, %s, %s) RETURNING id',
        (collection_id, digest, text),
    )
    return int(cursor.fetchone()[0])


class _RowWriter:
    """write_records' rows, written as they come. PostgreSQL: up to FEW_ROWS rows by one INSERT, more by one COPY
    left open across batches, so that the server stores rows while this process encodes the next ones. SQLite: one
    executemany per `batch` rows; a full batch of more than FEW_ROWS rows is run by a thread of the writer's own
    while this thread encodes the next batch (SQLite's engine runs without Python's lock: its inserts and the
    encoding overlap), the connection used by one thread at a time (the next batch waits for the last). `pause()`
    ends an open COPY and waits for the batch in flight (writing what is pending) before the cursor runs another
    statement; leaving the block does the same, or, on an exception, aborts the COPY and waits for the batch in
    flight (the caller's transaction rolls back)."""

    def __init__(self, cursor: Any, dialect: str, table: str, batch: int) -> None:
        self.cursor, self.dialect, self.table, self.batch = cursor, dialect, table, batch
        self.pending: list[tuple] = []
        self._copy: Any = None  # the open COPY (psycopg's Copy)
        self._open = contextlib.ExitStack()
        self._thread: ThreadPoolExecutor | None = None
        self._in_flight: Future | None = None  # the batch the thread is writing (SQLite)

    def __enter__(self) -> "_RowWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            if exc[0] is None:
                self.pause()
            else:
                self._copy = None
                self._open.__exit__(*exc)
                if self._in_flight is not None:
                    futures.wait([self._in_flight])  # its own failure, if any, gives way to the one raised
        finally:
            if self._thread is not None:
                self._thread.shutdown()

    def add(self, row: tuple) -> None:
        if self._copy is not None:
            self._copy.write_row(row)
            return
        self.pending.append(row)
        if len(self.pending) >= self.batch:
            self._flush()

    def _wrap(self) -> Any:
        """Django's translation of the driver's errors (IntegrityError, ...), for what runs on the raw cursor."""
        return getattr(getattr(self.cursor, "db", None), "wrap_database_errors", None) or contextlib.nullcontext()

    def _flush(self) -> None:
        raw = getattr(self.cursor, "cursor", self.cursor)
        if self.dialect == "postgresql" and len(self.pending) > FEW_ROWS and hasattr(raw, "copy"):
            self._open.enter_context(self._wrap())
            self._copy = self._open.enter_context(raw.copy(_COPY.format(table=self.table)))
            for row in self.pending:
                self._copy.write_row(row)
        elif self.dialect != "postgresql" and len(self.pending) > FEW_ROWS and isinstance(raw, sqlite3.Cursor):
            self._wait()
            if self._thread is None:
                self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rows-writer")
            # A cursor of its own on the same connection (Django opens SQLite's with check_same_thread off).
            statement = f'INSERT INTO "{self.table}" ({_COLUMNS}) VALUES (?, ?, ?, ?, ?)'
            self._in_flight = self._thread.submit(raw.connection.cursor().executemany, statement, self.pending)
        else:
            self._wait()
            _insert(self.cursor, self.dialect, self.table, self.pending)
        self.pending = []

    def _wait(self) -> None:
        if self._in_flight is not None:
            written, self._in_flight = self._in_flight, None
            with self._wrap():
                written.result()

    def pause(self) -> None:
        """Everything added so far written: no COPY left open, no batch in flight."""
        if self._copy is None and self.pending:
            self._flush()
        if self._copy is not None:
            self._copy = None
            self._open.close()
        self._wait()


_COLUMNS = 'collection_id, position, "key", data, layout_id'
_COPY = 'COPY "{table}" (' + _COLUMNS + ") FROM STDIN"


def _insert(cursor: Any, dialect: str, table: str, rows: list[tuple]) -> None:
    columns = _COLUMNS
    raw = getattr(cursor, "cursor", cursor)
    if dialect == "postgresql" and len(rows) <= FEW_ROWS:
        # One INSERT: one round trip, where COPY takes two (its start, then its data).
        cursor.execute(
            f'INSERT INTO "{table}" ({columns}) VALUES ' + ", ".join(["(%s, %s, %s, %s::jsonb, %s)"] * len(rows)),
            [value for row in rows for value in row],
        )
        return
    if dialect == "postgresql" and hasattr(raw, "copy"):
        # Through the raw driver cursor: Django's wrapper turns its errors into Django's (IntegrityError, ...).
        wrap = getattr(getattr(cursor, "db", None), "wrap_database_errors", contextlib.nullcontext())
        with wrap, raw.copy(_COPY.format(table=table)) as copy:
            for row in rows:
                copy.write_row(row)
        return
    cast = "::jsonb" if dialect == "postgresql" else ""
    cursor.executemany(f'INSERT INTO "{table}" ({columns}) VALUES (%s, %s, %s, %s{cast}, %s)', rows)


def layouts_by_id(cursor: Any, table: str, ids: Collection[int]) -> Mapping[int, Layout]:
    """The layouts of `ids` (for run_sql's `layouts`)."""
    listed = sorted(ids)
    marks = ", ".join(["%s"] * len(listed))
    cursor.execute(f'SELECT id, layout FROM "{table}" WHERE id IN ({marks})', listed)
    return layouts_of({row[0]: row[1] for row in cursor.fetchall()})


def layouts_of(stored: Mapping[Any, Any]) -> dict[int, Layout]:
    """Layouts by id from their stored column (as read by a statement)."""
    return {int(layout_id): json_value(layout) for layout_id, layout in stored.items()}


def iter_records(
    cursor: Any, *, dialect: str, records_table: str, layouts_table: str, collection_id: int, chunk: int = 2_000
) -> Iterator[tuple[str | None, Any]]:
    """Every (key, record) of the collection in order, exactly as written, read `chunk` rows at a time."""
    text = "data::text" if dialect == "postgresql" else "data"
    after: int | None = None
    cache: dict[int, Layout] = {}
    while True:
        where = "" if after is None else " AND position > %s"
        params: tuple = (collection_id,) if after is None else (collection_id, after)
        cursor.execute(
            f'SELECT position, "key", {text}, layout_id FROM "{records_table}" WHERE collection_id = %s{where}'
            f" ORDER BY position LIMIT {int(chunk)}",
            params,
        )
        rows = cursor.fetchall()
        if not rows:
            return
        missing = {row[3] for row in rows if row[3] is not None and row[3] not in cache}
        if missing:
            cache.update(layouts_by_id(cursor, layouts_table, missing))
        for _position, key, data, layout_id in rows:
            record = json.loads(data)
            yield key, (restore(record, cache[layout_id]) if layout_id is not None else record)
        after = rows[-1][0]


def json_value(value: Any) -> Any:
    """A JSON column's value as read by a plain cursor (text on both engines: Django reads jsonb as text)."""
    return json.loads(value) if isinstance(value, str | bytes) else value
