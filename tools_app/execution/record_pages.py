"""The records of a table a page at a time: THE paged read of a table's record collections, and the edit of one
record through the data tools' write path. The admin's records view is its caller (docs/tables-at-scale.md,
"The records view"); it answers the same on both storages, and never loads a rows table's records whole.

- A table's *collections* are those `records.collection_mounts` finds (over the mounts of its tools and the
  root): for a rows table, the TableCollection rows written when it moved; for a document table, the same
  function over the cached document, so a table shows the same collections before and after it moves.
- `record_page` answers the records of one collection in order, `limit` of them from `offset`, optionally only
  those whose key is `key` (the collection's key field as SPEC §8's string, or an object's member key) and/or
  those a JMESPath filter keeps (`status == 'paid'`, or the whole `[?status == 'paid']`):
  - document table: a slice of the cached document's collection; the filter is `[?…] | [offset:offset+limit+1]`
    run by the evaluator;
  - rows table: a window of rows (its first position found by the collection's directory of counts per block of
    positions, records.position_at, then `position >= first ORDER BY position LIMIT`), a key search on the
    (collection, key) index, and the filter compiled to ONE SQL statement (`compile_sql_expression` / `run_sql`,
    with the collection's field kinds, in position order when no index of the filter's fields exists, so that it
    stops after its page) or, when it does not compile or its data sends it to the evaluator, run by the
    evaluator over the collection gathered within TOOLHUB_MAX_EVALUATED_BYTES (QUERY_TOO_EXPENSIVE beyond).
    Every statement runs under `records.engine_budget`.
  Both answer exactly what jmespath answers over the collection, so the two storages agree (the differential
  test in tools_app/tests/execution/test_record_pages.py).
- `record_update` / `record_delete` write one record as a data tool's update / delete does
  (executors.write_at → services.table_write: the table's row lock, version, expected_version, quotas, the
  history entry); the caller enters services.write_audit for who writes.
"""

import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from itertools import islice
from typing import Any

from django.db import connection
from jmespath.parser import Parser

from tools_app import services
from tools_app.data_access import budget, operations
from tools_app.data_access.operations import Mount
from tools_app.data_access.query import compile_expression, run_query
from tools_app.data_access.sql import store
from tools_app.data_access.sql.plan import filtered_fields
from tools_app.data_access.sql_query import compile_sql_expression, run_sql
from tools_app.execution import executors, records
from tools_app.execution.call_limits import default_limits
from tools_app.kernel.errors import ErrorCode, ToolError
from tools_app.kernel.limits import RECORD_PAGE_MAX_OFFSET, RECORD_PAGE_MAX_SIZE
from tools_app.models import Table, TableRecordLayout, TableStorage, Tool

__all__ = [
    "PAGE_SIZE",
    "RecordCollection",
    "RecordItem",
    "RecordPage",
    "filter_expression",
    "merge_diff",
    "record_collections",
    "record_delete",
    "record_get",
    "record_page",
    "record_update",
]

PAGE_SIZE = 50


@dataclass(frozen=True)
class RecordCollection:
    """A collection of a table's records: its mount, "array" or "object", the key field, how many records."""

    mount: str
    kind: str
    key_field: str
    count: int


@dataclass(frozen=True)
class RecordItem:
    """One record of a page: its key (None for an array record without its key field) and value."""

    key: str | None
    value: Any


@dataclass(frozen=True)
class RecordPage:
    """A page of records: `items` from `offset`; `total` is the collection's count (None when a key or a filter
    narrowed it: counting the matches would read them all); `has_more` whether a next page holds any."""

    collection: RecordCollection
    version: int
    storage: str
    items: list[RecordItem]
    offset: int
    limit: int
    total: int | None
    has_more: bool


@contextmanager
def _budgeted() -> Iterator[None]:
    """The server's default budget unless a call's is active (the records view runs outside the pipeline)."""
    if budget.active() is not None:
        yield
        return
    with budget.enforced(default_limits()):
        yield


def _tool_mounts(table_id: int) -> list[tuple[str, str]]:
    tools = Tool.objects.filter(table_id=table_id).order_by("id").values_list("json_path", "metadata")
    return [(path, (metadata or {}).get("key_field") or "id") for path, metadata in tools]


def _document_collections(data: Any, table_id: int) -> dict[str, tuple[RecordCollection, list | dict]]:
    found = {}
    for mount, key_field, value in records.collection_mounts(data, _tool_mounts(table_id)):
        kind = "array" if isinstance(value, list) else "object"
        found[mount] = (RecordCollection(mount, kind, key_field, len(value)), value)
    return found


def record_collections(table_id: int) -> tuple[int, str, list[RecordCollection]]:
    """The table's (version, storage, collections), shallowest mount first. Table.DoesNotExist when it is gone."""
    version, storage = services.table_head(table_id)
    if storage == TableStorage.ROWS:
        found = records.collections(table_id).values()
        listed = [RecordCollection(c.mount, c.kind, c.key_field, c.record_count) for c in found]
        return version, storage, sorted(listed, key=lambda c: (c.mount.count("/"), c.mount))
    data = services.table_document(table_id, version)
    return version, storage, [collection for collection, _ in _document_collections(data, table_id).values()]


def _refused(message: str, field: str) -> ToolError:
    return ToolError(ErrorCode.VALIDATION_ERROR, message, {"field": field})


def filter_expression(text: str) -> str:
    """The JMESPath filter of the records view as a whole expression: `status == 'paid'` becomes
    `[?status == 'paid']`; a whole `[?…]` is kept. VALIDATION_ERROR when it is anything but one filter that keeps
    whole records (a projection like `[?a].b`, or a pipe, would show something other than records);
    INVALID_QUERY (the evaluator's) when it does not parse."""
    text = text.strip()
    expression = text if text.startswith("[?") else f"[?{text}]"
    compile_expression(expression)  # INVALID_QUERY saying where, as every query surface says it
    parsed = Parser().parse(expression).parsed
    children = parsed.get("children") or []
    if parsed.get("type") != "filter_projection" or [child.get("type") for child in children[:2]] != [
        "identity",
        "identity",
    ]:
        raise _refused(
            f"The filter {text!r} is not one condition on records: write it like status == 'paid' && total > `10` "
            "(or the whole [?...]), without a projection or a pipe.",
            "filter",
        )
    return expression


def _key_of(collection: RecordCollection, value: Any) -> str | None:
    if isinstance(value, dict) and collection.key_field in value:
        return operations.key_text(value[collection.key_field])
    return None


def _check_window(offset: int, limit: int) -> None:
    if not 0 <= offset <= RECORD_PAGE_MAX_OFFSET:
        raise _refused(f"offset must be between 0 and {RECORD_PAGE_MAX_OFFSET:,}.", "offset")
    if not 1 <= limit <= RECORD_PAGE_MAX_SIZE:
        raise _refused(f"limit must be between 1 and {RECORD_PAGE_MAX_SIZE}.", "limit")


def record_page(
    *, table_id: int, mount: str, offset: int = 0, limit: int = PAGE_SIZE, key: str | None = None, filter_text: str = ""
) -> RecordPage:
    """`limit` records of the collection at `mount` from `offset` (module docstring), narrowed to the records
    holding `key` (None: any) and/or kept by the JMESPath filter `filter_text`. VALIDATION_ERROR for a mount
    that is no collection of the table, a bad window, a filter over an object collection or one that is no
    filter; INVALID_QUERY, QUERY_TOO_EXPENSIVE as a query_data call answers them. Table.DoesNotExist when the
    table is gone."""
    _check_window(offset, limit)
    expression = filter_expression(filter_text) if filter_text.strip() else ""
    with _budgeted(), ExitStack() as stack:
        version, storage = services.table_head(table_id)
        reader: _RowsReader | _DocumentReader
        if storage == TableStorage.ROWS:
            # The page's rows, count and version (an edit's expected_version) of one moment.
            version = stack.enter_context(records.snapshot(table_id))
            found = records.collections(table_id)
            if mount not in found:
                raise _no_collection(mount)
            stored = found[mount]
            collection = RecordCollection(stored.mount, stored.kind, stored.key_field, stored.record_count)
            reader = _RowsReader(stored, collection)
        else:
            documents = _document_collections(services.table_document(table_id, version), table_id)
            if mount not in documents:
                raise _no_collection(mount)
            collection, value = documents[mount]
            reader = _DocumentReader(collection, value)
        if expression and collection.kind == "object":
            raise _refused(
                f"The collection {mount or '(root)'!r} is an object of entries: search it by key (a filter keeps "
                "records of an array).",
                "filter",
            )
        if key is not None:
            matches = reader.by_key(key)
            if expression:
                matches = [item for item in matches if run_query(expression, [item.value])]
            window = matches[offset : offset + limit + 1]
        elif expression:
            window = reader.filtered(expression, offset, limit + 1)
        else:
            window = reader.window(offset, limit + 1)
    narrowed = key is not None or bool(expression)
    return RecordPage(
        collection=collection,
        version=version,
        storage=storage,
        items=window[:limit],
        offset=offset,
        limit=limit,
        total=None if narrowed else collection.count,
        has_more=len(window) > limit,
    )


def _no_collection(mount: str) -> ToolError:
    return _refused(f"{mount or '(root)'!r} is not a collection of records of this table.", "collection")


class _DocumentReader:
    """A document table's collection, from the cached document."""

    def __init__(self, collection: RecordCollection, value: list | dict):
        self.collection = collection
        self.value = value

    def _item(self, value: Any) -> RecordItem:
        return RecordItem(_key_of(self.collection, value), value)

    def window(self, offset: int, size: int) -> list[RecordItem]:
        if isinstance(self.value, list):
            return [self._item(value) for value in self.value[offset : offset + size]]
        return [RecordItem(key, value) for key, value in islice(self.value.items(), offset, offset + size)]

    def by_key(self, key: str) -> list[RecordItem]:
        if isinstance(self.value, dict):
            return [RecordItem(key, self.value[key])] if key in self.value else []
        budget.charge(len(self.value))
        return [item for item in map(self._item, self.value) if item.key == key]

    def filtered(self, expression: str, offset: int, size: int) -> list[RecordItem]:
        kept = run_query(f"{expression} | [{offset}:{offset + size}]", self.value)
        return [self._item(value) for value in kept]


class _RowsReader:
    """A rows table's collection: only the rows a page needs."""

    def __init__(self, stored: records.Collection, collection: RecordCollection):
        self.stored = stored
        self.collection = collection

    def _items(self, rows: list[tuple[int, str | None, Any, int]]) -> list[RecordItem]:
        return [RecordItem(key, value) for _position, key, value, _size in rows]

    def window(self, offset: int, size: int) -> list[RecordItem]:
        if not offset:
            return self._items(records.select_records(self.stored, limit=size))
        # The page's first position first, by the collection's directory (records.position_at): an OFFSET in the
        # page's own statement would decode every record it skips (PostgreSQL converts each skipped row's jsonb).
        first = records.position_at(self.stored, offset)
        if first is None:
            return []
        return self._items(records.select_records(self.stored, " AND position >= %s", (first,), limit=size))

    def by_key(self, key: str) -> list[RecordItem]:
        return self._items(records.select_records(self.stored, ' AND "key" = %s', (key,), by_key=True))

    def filtered(self, expression: str, offset: int, size: int) -> list[RecordItem]:
        paged = f"{expression} | [{offset}:{offset + size}]"
        compiled = compile_sql_expression(paged, records.dialect(), "array")
        answer = None
        if compiled is not None:
            # The collection's field kinds drop the type checks its data cannot need (a filter that then cannot
            # raise has no check over the whole collection); without an index of the filter's fields, the page is
            # read in position order, which stops after its matches (render's position_order).
            indexed = Table.objects.filter(collections__id=self.stored.id).values_list("indexed_fields", flat=True)
            unindexed = not filtered_fields(compiled.plan) & set(indexed.first() or [])
            with records.engine_budget(), connection.cursor() as cursor:
                answer = run_sql(
                    compiled,
                    cursor,
                    table=records.records_table(),
                    collection_id=self.stored.id,
                    layouts=lambda ids: store.layouts_by_id(cursor, TableRecordLayout._meta.db_table, ids),
                    known=self.stored.known,
                    position_order=unindexed,
                )
        kept = answer.value if answer is not None else run_query(paged, records.collection_value(self.stored))
        return [RecordItem(_key_of(self.collection, value), value) for value in kept]


def record_get(*, table_id: int, mount: str, key: str) -> RecordItem | None:
    """The record of the collection at `mount` holding `key` (the first by position, as update finds it)."""
    page = record_page(table_id=table_id, mount=mount, key=key, limit=1)
    return page.items[0] if page.items else None


#
# Writing one record (the data tools' write path)
#


def merge_diff(before: Any, after: Any, path: tuple = ()) -> Any:
    """The RFC 7396 merge patch that turns `before` into `after` (what update applies). VALIDATION_ERROR when
    `after` sets a member to null, which a merge patch cannot say (null removes the member)."""
    if not isinstance(after, dict):
        return after
    if not isinstance(before, dict):
        before = {}  # a merge patch over a non-object starts from {}
    patch: dict[str, Any] = {}
    for name in before:
        if name not in after:
            patch[name] = None
    for name, value in after.items():
        if name in before and _same(before[name], value):
            continue
        if value is None:
            where = "/".join(str(token) for token in (*path, name))
            raise _refused(
                f"{where}: a member set to null cannot be written by an edit (an update removes a member whose "
                "value is null); remove the member instead, or write the record through the API.",
                "value",
            )
        patch[name] = merge_diff(before.get(name), value, (*path, name))
    return patch


def _same(left: Any, right: Any) -> bool:
    """Equal as JSON (1 and 1.0, true and 1 differ; key order does not count: a merge patch cannot say it)."""
    return json.dumps(left, sort_keys=True) == json.dumps(right, sort_keys=True)


def _write(table_id: int, collection: RecordCollection, operation: Any, arguments: dict, verb: str, expected: int):
    safe = services.SafeWrite(expected_version=expected)
    arguments = {**arguments, executors.SAFE_WRITE: safe}
    return executors.write_at(table_id, Mount(collection.mount, collection.key_field), operation, arguments, verb)


def _collection(table_id: int, mount: str) -> RecordCollection:
    _version, _storage, found = record_collections(table_id)
    for collection in found:
        if collection.mount == mount:
            return collection
    raise _no_collection(mount)


def record_update(*, table_id: int, mount: str, key: str, value: Any, expected_version: int) -> dict[str, Any]:
    """Make the record holding `key` equal to `value` as an update tool would (its merge patch from the stored
    record), at `expected_version` (VERSION_CONFLICT otherwise): {"updated": 1, "version": new}; nothing written
    when it equals the stored record ({"updated": 0, "version": current}). KEY_NOT_FOUND when no record holds
    the key; VALIDATION_ERROR when `value` changes the key field or sets a member to null."""
    collection = _collection(table_id, mount)
    current = record_get(table_id=table_id, mount=mount, key=key)
    if current is None:
        raise ToolError(
            ErrorCode.KEY_NOT_FOUND, f"No record with key {key!r} in {mount or '(root)'!r}; nothing was updated."
        )
    if collection.kind == "array":
        if not isinstance(value, dict):
            raise _refused("A record of an array collection is edited as an object holding its key field.", "value")
        if _key_of(collection, value) != key:
            raise _refused(
                f"The key field {collection.key_field!r} identifies the record and stays {key!r}: create a new "
                "record with the new key and delete this one.",
                "value",
            )
        patch = merge_diff(current.value, value)
        if patch == {}:
            return {"updated": 0, "version": expected_version}
        element: dict[str, Any] = {**patch, collection.key_field: current.value[collection.key_field]}
    else:
        patch = merge_diff(current.value, value)
        if patch == {} and isinstance(value, dict):
            return {"updated": 0, "version": expected_version}
        element = {"key": key, "content": patch}
    return _write(table_id, collection, operations.update, {"elements": [element]}, "updated", expected_version)


def record_delete(*, table_id: int, mount: str, key: str, expected_version: int) -> dict[str, Any]:
    """Delete the records holding `key` as a delete tool would (every record holding it), at
    `expected_version`: {"deleted": n, "version": new}. KEY_NOT_FOUND when none does."""
    collection = _collection(table_id, mount)
    return _write(table_id, collection, operations.delete, {"keys": [key]}, "deleted", expected_version)
