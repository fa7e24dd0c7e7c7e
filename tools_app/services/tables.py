"""Writes to tables and tools: full_clean(), locks, counters (see services/__init__.py)."""

import itertools
import json
import re
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import IO, Any

from django.db import IntegrityError, connection, transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from tools_app.kernel import limits
from tools_app.kernel.errors import ErrorCode, ToolhubError
from tools_app.models import Table, TableRecord, TableSnapshot, TableStorage, Tool, name_conflict_error
from tools_app.selectors import usage_of
from tools_app.services import table_log
from tools_app.services.generated_text import fast_fields_refresh
from tools_app.services.guard import named, refuse_if_in_use
from tools_app.services.locks import lock_rows
from tools_app.services.quotas import data_quota_check
from tools_app.services.table_cache import table_cache
from tools_app.services.table_indexes import ensure_indexes
from tools_app.tool_schemas import input_schema_breaks
from tools_app.validators import EncodedJSON

TOOL_FIELDS = (
    "name",
    "alias",
    "type",
    "table",
    "json_path",
    "description",
    "input_schema",
    "output_schema",
    "metadata",
    "redact_arguments",
)


#
# Tables
#


def table_create(
    *,
    owner,
    name: str,
    description: str = "",
    data: Any = None,
    redact_fields: list[str] | None = None,
    indexed_fields: Any = None,
) -> Table:
    """Create a table (version 1, its own snapshot) after full_clean(); QUOTA_EXCEEDED, nothing written, when its
    document would take the owner over TOOLHUB_MAX_OWNER_DATA_BYTES. Its `indexed_fields` get their record
    indexes after the commit (services.table_indexes)."""
    table = Table(
        owner=owner,
        name=name,
        description=description,
        redact_fields=redact_fields or [],
        indexed_fields=[] if indexed_fields is None else indexed_fields,
    )
    table.data = {} if data is None else data
    table.full_clean()  # sets data_bytes from the checked JSON text
    data_quota_check(owner_id=owner.pk, new_size=table.data_bytes)
    with transaction.atomic():
        table.save()  # the row and its snapshot at version 1
        if new_table_storage() == TableStorage.ROWS and table_log.rows_start is not None:
            document = table.data
            first = document[0] if isinstance(document, list) and document else None
            if table_log.rows_start(table.pk, document, likely_key_field(first)):
                table.refresh_from_db(fields=["storage", "rows_since_version", "data"])
        if table.indexed_fields:
            ensure_indexes(table.pk)
    return table


def new_table_storage() -> str:
    """TOOLHUB_NEW_TABLE_STORAGE: how a table created with a document (the API's POST, setup apply, the admin's
    form) is stored: "rows" (the default) when its data is an array of records (records.start_as_rows), else
    "document"; "document" for every new table (docs/tables-at-scale.md, "New tables")."""
    value = limits.NEW_TABLE_STORAGE.get()
    return TableStorage.ROWS if value == TableStorage.ROWS else TableStorage.DOCUMENT


def table_create_encoded(*, owner, name: str, description: str = "", document: IO[bytes], size: int) -> Table:
    """Create a table (version 1) whose document is the ASCII JSON text in `document` (read from its current
    position), in TableDocumentEncoder's form and already checked against the table rules (services.imports):
    stored as it is, never parsed into Python values. PostgreSQL takes the text in chunks (COPY); SQLite
    takes it as one str. QUOTA_EXCEEDED, nothing written, as table_create."""
    table = Table(owner=owner, name=name, description=description)
    table.full_clean()
    table.data_bytes = size
    data_quota_check(owner_id=owner.pk, new_size=size)
    with transaction.atomic():
        table.save()
        if connection.vendor == "postgresql":
            _copy_snapshot(table, document)
        else:
            TableSnapshot.objects.create(
                table=table, version=table.version, data=EncodedJSON(document.read().decode("ascii"))
            )
    return table


def table_create_rows(
    *,
    owner,
    name: str,
    description: str = "",
    records: Callable[[Table], Iterable[Any]],
    compact_of: Callable[[Any], str | None] | None = None,
) -> Table:
    """Create a table (version 1) stored as rows whose document is an array of records: `records(table)` yields
    them (a stream, consumed once; it checks each record and the table's limits and quota as they come, raising to
    refuse) and they are written as the root collection's rows in batches, in one transaction: all or nothing.
    `data_bytes` is the whole document's JSON text (records included), what the owner's quota counts.
    `compact_of(record)`: a record's text the stream encoded already (store.write_records'), or None."""
    if table_log.rows_create is None:
        raise RuntimeError("No rows writer: tools_app.execution.records plugs it in when it loads.")
    table = Table(owner=owner, name=name, description=description, storage=TableStorage.ROWS, rows_since_version=1)
    table.data = []
    table.full_clean()
    data_quota_check(owner_id=owner.pk, new_size=table.data_bytes)
    with transaction.atomic():
        table.save()  # the row and its snapshot: the document keeps an empty array where the records are
        stream = iter(records(table))  # it keeps table.data_bytes as it grows
        first = next(stream, _NONE)
        values = stream if first is _NONE else itertools.chain([first], stream)
        table_log.rows_create(table.pk, values, likely_key_field(first), compact_of)
        Table.objects.filter(pk=table.pk).update(data_bytes=table.data_bytes)
    table.refresh_from_db(fields=["data"])
    return table


_NONE = object()
_KEY_NAME = re.compile(r"(id|key|code|sku)$")


def likely_key_field(record: Any) -> str:
    """The field a new rows table's records are keyed by, guessed from its first record as generate-tools picks a
    key field (`id` first, then the first name ending in id/key/code/sku): when the first tool at the collection
    keys by another field, its rows are keyed again (execution.records.relayout), so a right guess saves that."""
    if not isinstance(record, dict) or "id" in record:
        return "id"
    named = sorted(
        name
        for name, value in record.items()
        if _KEY_NAME.search(name.lower()) and isinstance(value, str | int) and not isinstance(value, bool)
    )
    return named[0] if named else "id"


def _copy_snapshot(table: Table, document: IO[bytes], chunk: int = 1 << 20) -> None:
    """PostgreSQL: the snapshot row through COPY, its document streamed in chunks (text format: a backslash
    is doubled; the encoder's ASCII JSON holds no tab, line break or other control character)."""
    columns = '("table_id", "version", "data")'
    with connection.cursor() as cursor:
        raw = cursor.cursor  # psycopg's own cursor: Django's wrapper has no copy()
        with raw.copy(f'COPY "{TableSnapshot._meta.db_table}" {columns} FROM STDIN') as copy:
            copy.write(f"{table.pk}\t{table.version}\t".encode())
            while part := document.read(chunk):
                copy.write(part.replace(b"\\", b"\\\\"))
            copy.write(b"\n")


def table_update(*, table: Table, expected_version: int | None = None, **fields: Any) -> Table:
    """Change name/description and, when given, replace the data (a data write: version +1, with its history
    entry; the new document is the table's new snapshot: table_log.table_replace).

    SPEC §8: version counts data writes only; editing the name, description or indexed_fields leaves it. Changed
    `indexed_fields` get their record indexes built and dropped after the commit (services.table_indexes), and the
    fast-fields sentence of the table's query and schema tools rewritten in the same transaction
    (services.generated_text.fast_fields_refresh: only that sentence; the owner's own wording is kept).
    `expected_version` (the API's If-Match): PRECONDITION_FAILED, nothing written, when the table is at another
    version. A larger document that would take the owner over TOOLHUB_MAX_OWNER_DATA_BYTES: QUOTA_EXCEEDED,
    nothing written.
    """
    unknown = set(fields) - {"name", "description", "data", "redact_fields", "indexed_fields"}
    if unknown:
        raise TypeError(f"table_update got unexpected fields {sorted(unknown)}")
    writes_data = "data" in fields
    now = timezone.now()
    with transaction.atomic():
        # NO KEY UPDATE: writers still queue (and wait for a delete), but saving a tool that refers to this
        # table (a foreign-key check, KEY SHARE) does not wait behind a large document write. The document is
        # loaded only for a data write, from the cache and the change log.
        locked = Table.objects.select_for_update(no_key=True).get(pk=table.pk)
        if expected_version is not None and expected_version != locked.version:
            raise ToolhubError(
                ErrorCode.PRECONDITION_FAILED,
                f'The table is at version {locked.version} (ETag "{locked.version}"), not the If-Match version '
                f"{expected_version}; nothing was written.",
                {"current_version": locked.version},
            )
        if writes_data and locked.storage == TableStorage.ROWS:
            # The admin's form sends the data it shows with every save: the same document is no data write.
            if _same_json(fields["data"], table_log.table_data(table.pk)[1]):
                fields = {key: value for key, value in fields.items() if key != "data"}
                writes_data = False
        current = table_log.document(table.pk, locked.version) if writes_data else None
        # A rows table's cached document holds no records: the data it was compared with above is the whole one.
        rows = locked.storage == TableStorage.ROWS
        data_changed = current is not None and (rows or not _same_json(fields["data"], current.data))
        old_size = locked.data_bytes
        indexes_changed = "indexed_fields" in fields and fields["indexed_fields"] != locked.indexed_fields
        for key, value in fields.items():
            setattr(locked, key, value)
        locked.full_clean()  # the document only when it is given (Table.clean)
        if data_changed:
            data_quota_check(
                owner_id=locked.owner_id, table_id=locked.pk, old_size=old_size, new_size=locked.data_bytes
            )
        locked.updated_at = now
        locked.save(update_fields=["name", "description", "redact_fields", "indexed_fields", "updated_at"])
        locked._document_pending = False  # the document is written by table_replace, never by save()
        if data_changed:
            assert current is not None
            table_log.table_replace(table=locked, data=fields["data"], current=current, now=now)
        if indexes_changed:
            fast_fields_refresh(locked.pk, locked.indexed_fields)  # what its tools' descriptions say is fast
        if indexes_changed or (data_changed and rows and locked.indexed_fields):
            ensure_indexes(locked.pk)  # a rows table's data written whole may have new collections
        # Read under the row lock: the version this write made (an API client's ETag), not one a writer committed
        # between this commit and the read.
        locked.refresh_from_db(fields=["version", "data_bytes", "updated_at", "rows_since_version"])
    copied = [
        "name",
        "description",
        "redact_fields",
        "indexed_fields",
        "version",
        "data_bytes",
        "updated_at",
        "rows_since_version",
    ]
    table.__dict__.update({key: getattr(locked, key) for key in copied})
    table.refresh_from_db(fields=["data"])  # read again through the cache on its next use
    return table


def _same_json(left: Any, right: Any) -> bool:
    """Equal as JSON: Python's == holds 1 == 1.0 == True, which are three different JSON values."""
    if left != right:
        return False
    return json.dumps(left, sort_keys=True) == json.dumps(right, sort_keys=True)


def table_derived(table_id: int, version: int, key: Any, compute: Callable[[], Any]) -> Any:
    """A value derived from one version of a table (e.g. its shape), computed once per process."""
    entry = table_cache.get(table_id, version)
    if entry is None:
        return compute()
    if key not in entry.derived:
        entry.derived[key] = compute()
    return entry.derived[key]


#
# Tools
#


def tool_create(*, owner, **fields: Any) -> Tool:
    """Create a tool after full_clean() (defaults such as the input schema are filled in)."""
    unknown = set(fields) - set(TOOL_FIELDS)
    if unknown:
        raise TypeError(f"tool_create got unexpected fields {sorted(unknown)}")
    tool = Tool(owner=owner, **fields)
    tool.full_clean()
    with transaction.atomic():
        tool.save()
        _tools_changed([tool.table_id])
    return tool


def _tools_changed(table_ids: Iterable[int | None]) -> None:
    """After tools of these tables were created, changed or deleted, inside the same transaction: a table stored as
    rows lays its collections out again for its tools (execution.records.relayout; docs/tables-at-scale.md, "When
    tools change"), so a refusal there leaves the tool change unwritten too."""
    wanted = {table_id for table_id in table_ids if table_id is not None}
    if not wanted or table_log.rows_relayout is None:
        return
    for table_id in (
        Table.objects.filter(pk__in=wanted, storage=TableStorage.ROWS).order_by("pk").values_list("pk", flat=True)
    ):
        table_log.rows_relayout(table_id)


def tool_update(*, tool: Tool, force: bool = False, **fields: Any) -> Tool:
    """Change a tool; a rename into a name already bound on one of its instances is refused (NAME_CONFLICT).

    The bindings' stored name keys follow the rename in the same transaction; the database's unique
    constraint on (instance, name key) makes the rule hold under concurrent requests. Locks the tool row;
    raises Tool.DoesNotExist if the tool was deleted meanwhile. Never writes use_count or last_used.

    The change guard (services.guard): a rename that changes the name MCP clients call it by on an instance, or an
    input schema change that refuses calls the old schema accepted (tool_schemas.input_schema_breaks), of a tool
    in use is IN_USE, nothing written, unless `force`.
    """
    unknown = set(fields) - set(TOOL_FIELDS)
    if unknown:
        raise TypeError(f"tool_update got unexpected fields {sorted(unknown)}")
    for key, value in fields.items():
        setattr(tool, key, value)
    tool.full_clean()
    try:
        with transaction.atomic():
            # SPEC §2.4: the friendly answer naming the tool and the instance (Binding.objects.name_clashes); the
            # unique constraint on the bindings' name keys is the guarantee (the IntegrityError below).
            clashes = tool.name_conflicts(tool.name)
            if clashes:
                raise name_conflict_error("name", tool.name, clashes)
            # SPEC §2.2: use_count and last_used belong to the calls (F() updates, maybe made since `tool`
            # was read), so an edit writes its own fields only and reports the counters as they are now.
            # FOR UPDATE, not NO KEY UPDATE: a bind reads the tool's name under FOR KEY SHARE (mcp_app
            # services), which only FOR UPDATE conflicts with, so a rename and a bind of one tool queue
            # (SPEC §2.4 under concurrency) while binds never wait for the call recorder's counter updates.
            stored = Tool.objects.select_for_update().filter(pk=tool.pk)
            tool.use_count, tool.last_used, old_name, old_schema, old_table, old_path, old_metadata = (
                stored.values_list(
                    "use_count", "last_used", "name", "input_schema", "table_id", "json_path", "metadata"
                ).get()
            )
            if not force:
                _guard_tool_change(tool, old_name, old_schema)
            tool.save(update_fields=[*TOOL_FIELDS, "updated_at"])
            tool.bindings.filter(name_override="").update(name_key=tool.name.lower())
            if (old_table, old_path, (old_metadata or {}).get("key_field")) != (
                tool.table_id,
                tool.json_path,
                (tool.metadata or {}).get("key_field"),
            ):
                _tools_changed([old_table, tool.table_id])
    except IntegrityError as exc:
        clashes = tool.name_conflicts(tool.name)
        if not clashes:
            raise
        raise name_conflict_error("name", tool.name, clashes) from exc
    return tool


def _guard_tool_change(tool: Tool, old_name: str, old_schema: Any) -> None:
    """IN_USE for a rename or a breaking input-schema change of a tool in use (see tool_update)."""
    renamed = old_name.lower() != tool.name.lower()
    breaks = input_schema_breaks(old_schema, tool.input_schema)
    if not renamed and not breaks:
        return
    used_by = usage_of(tools=[tool.pk])
    if not breaks:
        # Only the names clients call it by change: bindings without an override (API callers use its id).
        used_by = [used for used in used_by if used.instance is not None and used.tool.lower() == old_name.lower()]
        change = f"would be renamed to {tool.name!r}"
    else:
        change = "would refuse calls it accepts now (" + " ".join(breaks) + ")"
    refuse_if_in_use(used_by, what=f"The tool {old_name!r}", change=change, force=False)


def tool_delete(*, tool: Tool, force: bool = False) -> None:
    """Delete a tool and its bindings; see tool_delete_many."""
    tool_delete_many(tools=Tool.objects.filter(pk=tool.pk), force=force)


def tool_delete_many(*, tools: QuerySet[Tool], force: bool = False) -> None:
    """Delete the tools and their bindings; call-log rows keep the tool's name and lose the link (SET_NULL).

    Locks the tool rows first (PostgreSQL; in id order, as the call recorder updates them). Without the
    lock, a call-log row written for a tool between the SET NULL update and the DELETE would make the
    delete fail on the foreign key; with it, the writer waits, then finds the tool gone and keeps its row
    without the tool. A tool in use (selectors.usage_of) is IN_USE, nothing deleted, unless `force`.
    """
    with transaction.atomic():
        ids = lock_rows(Tool.objects.filter(pk__in=tools.values("pk")))
        if not force:
            what = named("tool", ids, Tool.objects.filter(pk__in=ids).values_list("name", flat=True))
            refuse_if_in_use(usage_of(tools=ids), what=what, change="would be deleted", force=False)
        table_ids = set(Tool.objects.filter(pk__in=ids).values_list("table_id", flat=True))
        tools.delete()
        _tools_changed(table_ids)


def table_delete(*, table: Table, force: bool = False) -> None:
    """Delete a table and the tools on it; see table_delete_many."""
    table_delete_many(tables=Table.objects.filter(pk=table.pk), force=force)


def table_delete_many(*, tables: QuerySet[Table], force: bool = False) -> None:
    """Delete the tables, the tools on them and their bindings. Locks the tables, then their tools (as
    tool_delete_many does, for the same reason). A table whose tools are in use (selectors.usage_of) is IN_USE,
    nothing deleted, unless `force`."""
    with transaction.atomic():
        ids = lock_rows(Table.objects.filter(pk__in=tables.values("pk")))
        lock_rows(Tool.objects.filter(table__in=tables.values("pk")))
        if not force:
            what = named("table", ids, Table.objects.filter(pk__in=ids).values_list("name", flat=True))
            refuse_if_in_use(usage_of(tables=ids), what=what, change="would be deleted with its tools", force=False)
        indexed = list(tables.exclude(indexed_fields=[]).values_list("pk", flat=True)[:1])
        # A rows table's records first, in one statement: a record's layout is RESTRICTed, so the collector
        # deleting the collections alone would read every record (their JSON too) to check it.
        TableRecord.objects.filter(collection__table_id__in=ids).delete()
        tables.delete()
        for table_id in indexed:  # one sync drops the indexes of every collection that is gone
            ensure_indexes(table_id)


def tool_use_record(*, tool_id: int, at: datetime | None = None) -> None:
    """THE use-count path (SPEC §2.2): use_count +1 and last_used, atomically (F()). The call pipeline
    (tools_app.execution.pipeline) calls it for every call, the registry for every get_tool_definition."""
    Tool.objects.filter(pk=tool_id).update(use_count=F("use_count") + 1, last_used=at or timezone.now())
