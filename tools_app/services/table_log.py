"""A table's document as a snapshot plus a change log (docs/history.md).

Storage: TableSnapshot holds the document at its version; every data write since appended one TableChange (its
RFC 6902 patch, its inverse and its audit) in the transaction that moved Table.version by one. So:

- a write costs its patch, never the document: the row lock, one INSERT and one UPDATE of the table's small row
  (the document is in another table: on SQLite an UPDATE rewrites the whole row);
- a worker holding version v of a document catches up by applying the patches v+1..n to it (tools_app.kernel.json_patch
  copies only the containers they touch), never by parsing the document again;
- the document at an older version inside retention is the current one with the inverses n..v+1 applied;
- compaction writes the current document as the new snapshot (every TOOLHUB_TABLE_COMPACT_EVERY entries, after
  the write's commit) and prunes the entries outside retention. A compaction that
  fails or never runs loses nothing: the snapshot plus the entries after it is still the document;
- a whole-document write stores the diff of the two documents (json_patch.diff), not the documents; a restore
  the net change between the two versions (_net_change), not the entries between them;
- history is bounded per table and per owner (TOOLHUB_HISTORY_MAX_TABLE_BYTES, TOOLHUB_HISTORY_MAX_OWNER_BYTES):
  over a bound, the oldest entries are compacted away after the write's commit (history_enforce). History never
  refuses a write; the owner's data quota (services.quotas) does.

SPEC §3 holds as before: the table row is locked for the whole read-modify-write (writers queue, on every worker
and process), `version` grows by exactly one per successful write, and a failed change writes nothing.
"""

import contextvars
import functools
import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, NamedTuple

from django.db import connection, transaction
from django.db.models import F, Max, TextField, Value
from django.db.models.functions import Cast, Greatest
from django.utils import timezone

from tools_app.kernel import json_patch, telemetry
from tools_app.kernel.errors import ErrorCode, ToolError
from tools_app.kernel.limits import (
    HISTORY_DAYS,
    HISTORY_VERSIONS,
    TABLE_COMPACT_EVERY,
    history_max_arguments_bytes,
    history_max_owner_bytes,
    history_max_table_bytes,
    max_rows_table_bytes,
    max_table_bytes,
)
from tools_app.models import Table, TableChange, TableSnapshot, TableStorage, Tool
from tools_app.models.columns import column
from tools_app.services.quotas import data_quota_check
from tools_app.services.table_cache import CachedTable, collector_paused, table_cache
from tools_app.validators import TableDocumentDecoder, table_too_large

logger = logging.getLogger(__name__)

IDEMPOTENCY_WINDOW = timedelta(hours=24)
# A write asks whether a compaction is due only at every COMPACTION_CHECK-th version (or every
# TOOLHUB_TABLE_COMPACT_EVERY-th, when smaller): two queries saved on the other writes.
COMPACTION_CHECK = 64
# An argument value longer than this (as JSON) is the first one left out of an entry's arguments over
# TOOLHUB_HISTORY_MAX_ARGUMENTS_BYTES (the patch holds what was written).
SHORT_ARGUMENT = 256


def compact_every() -> int:
    """TOOLHUB_TABLE_COMPACT_EVERY: entries after the snapshot that make a write fold them into a new one."""
    return TABLE_COMPACT_EVERY.get()


def retention() -> tuple[int, int]:
    """(days, versions) of history kept: an entry younger than the days OR among the last versions is kept."""
    return HISTORY_DAYS.get(), HISTORY_VERSIONS.get()  # at least a day: idempotency keys are answered for 24 h


#
# Who writes (the audit of the entry)
#


@dataclass(frozen=True)
class WriteAudit:
    """Who writes and how: the user, the MCP key, API token or OAuth client, the surface, the tool and, over MCP,
    the instance and the binding's effective name, and the call's arguments."""

    surface: str = ""
    user_id: int | None = None
    api_key_id: int | None = None
    api_token_id: int | None = None
    oauth_client: str = ""
    tool_id: int | None = None
    tool_name: str = ""
    instance_id: int | None = None
    binding_name: str = ""
    arguments: Any = None


_audit: contextvars.ContextVar[WriteAudit | None] = contextvars.ContextVar("toolhub_write_audit", default=None)


@contextmanager
def write_audit(audit: WriteAudit) -> Iterator[None]:
    """Table writes made inside are recorded as `audit`'s (the call pipeline enters it around a changing call)."""
    token = _audit.set(audit)
    try:
        yield
    finally:
        _audit.reset(token)


def current_audit() -> WriteAudit:
    return _audit.get() or WriteAudit()


# The depth of connection.atomic_blocks inside a change_transaction() block, while one is open on this context.
_whole: contextvars.ContextVar[int | None] = contextvars.ContextVar("toolhub_change_transaction", default=None)


@contextmanager
def change_transaction() -> Iterator[None]:
    """An atomic block that its caller rolls back whole when a table write made directly inside it fails (the call
    pipeline's change and its record). table_write opens no savepoint of its own there: it would guard nothing,
    and on PostgreSQL costs two round trips per write. The caller must run no statement between a failed
    table_write and leaving the block (Django refuses one: the block is marked for rollback)."""
    with transaction.atomic():
        token = _whole.set(len(connection.atomic_blocks))
        try:
            yield
        finally:
            _whole.reset(token)


def _write_block() -> AbstractContextManager[Any]:
    """table_write's atomic block: a savepoint unless it runs directly inside a change_transaction()."""
    depth = _whole.get()
    return transaction.atomic(savepoint=depth is None or depth != len(connection.atomic_blocks))


#
# Safe writes
#


@dataclass(frozen=True)
class SafeWrite:
    """A write's safety options: VERSION_CONFLICT unless the table is at `expected_version`; with
    `dry_run` nothing is written; `idempotency_key` answers a repeat within 24 h with the first result, and
    refuses (IDEMPOTENCY_KEY_REUSED) the key with another `request` (what the key is bound to)."""

    expected_version: int | None = None
    dry_run: bool = False
    idempotency_key: str = ""
    request: Any = None

    def request_hash(self) -> str:
        text = json.dumps(self.request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class Written:
    """What a write did: the version it made (or would make, dry run), the change's outcome, its patch, the
    answer (kept for idempotent repeats), and whether it was a dry run or a repeat answered from the log."""

    version: int
    outcome: Any = None
    patch: list = field(default_factory=list)
    result: Any = None
    dry_run: bool = False
    replayed: bool = False


class HistoryBytes(NamedTuple):
    """What the history quotas compare: the table's owner, the table's history bytes and all the owner's tables'."""

    owner_id: int
    table_bytes: int
    owner_bytes: int


# (table id, version, storage) of a table whose head is known, so that table_head answers it without a statement:
# the table whose row table_write holds locked while its change runs (neither can move under the lock), or a table
# stored as rows whose version the caller read a moment ago (a call's target query, rows_head_known: a table never
# goes back from rows to a document, and a rows read takes its own snapshot and reports that version). The
# innermost setting is the one in force.
_known_head: contextvars.ContextVar[tuple[int, int, str] | None] = contextvars.ContextVar(
    "toolhub_known_head", default=None
)


# change(data, derived) -> (new_data, outcome, patch, inverse, carried): `derived` holds values computed from
# this version (e.g. a key index); `carried` those still true of the new one.
Change = Callable[[Any, dict], tuple[Any, Any, list, list, dict]]


def table_write(
    *,
    table_id: int,
    change: Change,
    answer: Callable[[int, Any], Any] | None = None,
    safe: SafeWrite | None = None,
) -> Written:
    """Apply `change` to the table's document under its row lock and append its entry; see the module docstring.

    `answer(version, outcome)` is the call's result (kept on the entry when an idempotency key is given).
    `change` must not mutate the document it gets (it is shared with readers): it returns the new one, built by
    json_patch.apply from the patch it returns. If it raises, nothing is written.
    """
    safe = safe or SafeWrite()
    audit = current_audit()
    now = timezone.now()
    with telemetry.table_write_timer(), _write_block():
        version, size, owner_id, storage, others = _locked_with_others(table_id)
        if safe.idempotency_key:
            repeated = _repeat(table_id, safe, now)
            if repeated is not None:
                return repeated
        if safe.expected_version is not None and safe.expected_version != version:
            raise ToolError(
                ErrorCode.VERSION_CONFLICT,
                f"The table is at version {version}, not the expected_version {safe.expected_version}; nothing was "
                "written. Read it again and retry with expected_version set to the version you read.",
                {"current_version": version, "expected_version": safe.expected_version},
            )
        entry = document(table_id, version)
        held = _known_head.set((table_id, version, storage))
        try:
            new_data, outcome, patch, inverse, carried = change(entry.data, entry.derived)
        finally:
            _known_head.reset(held)
        new_version = version + 1
        old_size = size or _size(entry.data)
        new_size = old_size + size_delta(patch, inverse)
        if new_size > max_table_bytes():
            _check_table_size(table_id, new_size)
        data_quota_check(owner_id=owner_id, table_id=table_id, old_size=old_size, new_size=new_size, others=others)
        result = answer(new_version, outcome) if answer is not None else None
        if safe.dry_run:
            return Written(version=new_version, outcome=outcome, patch=patch, result=result, dry_run=True)
        history = _append(
            table_id,
            new_version,
            patch,
            inverse,
            audit,
            now,
            new_size,
            idempotency_key=safe.idempotency_key,
            request_hash=safe.request_hash() if safe.idempotency_key else "",
            result=result if safe.idempotency_key else None,
        )
        cached_size = entry.size + _document_delta(patch, inverse)
        transaction.on_commit(lambda: _committed(table_id, new_version, new_data, cached_size, carried, history))
    return Written(version=new_version, outcome=outcome, patch=patch, result=result)


def _check_table_size(table_id: int, size: int) -> None:
    """Refuse (VALIDATION_ERROR, nothing written) a write that makes the table `size` bytes of JSON, over
    TOOLHUB_MAX_TABLE_BYTES for a document, over TOOLHUB_MAX_ROWS_TABLE_BYTES for a table stored as rows (its
    records are rows: the document cap does not apply to them)."""
    storage = Table.objects.filter(pk=table_id).values_list("storage", flat=True).first()
    if storage != TableStorage.ROWS:
        raise ToolError(ErrorCode.VALIDATION_ERROR, f"{table_too_large(size).messages[0]} Nothing was written.")
    _check_rows_table_size(size)


def _check_rows_table_size(size: int, **details: Any) -> None:
    """Refuse (VALIDATION_ERROR, nothing written) a table stored as rows of `size` bytes of JSON, over
    TOOLHUB_MAX_ROWS_TABLE_BYTES; `details` go into the error's details."""
    limit = max_rows_table_bytes(connection.vendor)
    if size > limit:
        raise ToolError(
            ErrorCode.VALIDATION_ERROR,
            f"A table stored as rows is at most {limit} bytes of JSON (TOOLHUB_MAX_ROWS_TABLE_BYTES); this one would "
            f"be {size} bytes. Nothing was written.",
            {"limit": limit, "setting": "TOOLHUB_MAX_ROWS_TABLE_BYTES", **details},
        )


def _locked(table_id: int) -> tuple[int, int, int, str]:
    """Lock the table row for the rest of the transaction; its (version, data_bytes, owner_id, storage). NO KEY
    UPDATE: writers queue (and wait for a delete), but saving a tool that refers to the table (KEY SHARE) does not
    wait."""
    return _locked_with_others(table_id, others=False)[:4]


def _locked_with_others(table_id: int, *, others: bool = True) -> tuple[int, int, int, str, int]:
    """_locked's row and, in the same statement (with `others`), the data_bytes of the owner's other tables (what
    the owner's data quota adds this table's new size to; not locked, as data_quota_check reads them)."""
    table = Table._meta.db_table
    lock = " FOR NO KEY UPDATE" if connection.vendor == "postgresql" else ""
    rest = (
        f'(SELECT COALESCE(SUM(o.data_bytes), 0) FROM "{table}" o WHERE o.owner_id = t.owner_id AND o.id <> t.id)'
        if others
        else "0"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT t.version, t.data_bytes, t.owner_id, t.storage, {rest} FROM "{table}" t WHERE t.id = %s{lock}',
            (table_id,),
        )
        row = cursor.fetchone()
    if row is None:
        raise Table.DoesNotExist(f"Table {table_id} does not exist.")
    return int(row[0]), int(row[1]), int(row[2]), str(row[3]), int(row[4])


def _repeat(table_id: int, safe: SafeWrite, now: Any) -> Written | None:
    """The first answer of an idempotency key used on this table within 24 h, or None; IDEMPOTENCY_KEY_REUSED
    when it came with another request."""
    first = (
        TableChange.objects.filter(
            table_id=table_id, idempotency_key=safe.idempotency_key, at__gte=now - IDEMPOTENCY_WINDOW
        )
        .order_by("-version")
        .values_list("version", "request_hash", "result")
        .first()
    )
    if first is None:
        return None
    version, request_hash, result = first
    if request_hash != safe.request_hash():
        raise ToolError(
            ErrorCode.IDEMPOTENCY_KEY_REUSED,
            f"The idempotency_key {safe.idempotency_key!r} was used on this table (version {version}) with other "
            "arguments in the last 24 hours; nothing was written. Use a new key for a new write.",
            {"idempotency_key": safe.idempotency_key, "version": version},
        )
    return Written(version=version, result=result, replayed=True)


def _append(
    table_id: int,
    version: int,
    patch: list,
    inverse: list,
    audit: WriteAudit,
    at: Any,
    size: int,
    *,
    idempotency_key: str = "",
    request_hash: str = "",
    result: Any = None,
) -> HistoryBytes:
    """The entry of `version` and the table's new version, size, history size and time (the caller holds the row
    lock): one statement on PostgreSQL (the entry's INSERT in a data-modifying WITH), two on SQLite; no ORM, as
    every write runs it. Returns what the history quotas check after the commit (history_enforce), read by the
    same UPDATE: no statement of its own."""
    arguments = _kept_arguments(audit.arguments)
    json_values = (("patch", patch), ("inverse", inverse), ("arguments", arguments), ("result", result))
    texts = {name: None if value is None else json.dumps(value) for name, value in json_values}
    cost = sum(len(text) for text in texts.values() if text is not None)
    values = {
        **texts,
        "table": table_id,
        "version": version,
        "at": connection.ops.adapt_datetimefield_value(at),
        "surface": audit.surface,
        "user": audit.user_id,
        "api_key": audit.api_key_id,
        "api_token": audit.api_token_id,
        "oauth_client": audit.oauth_client[:255],
        "tool": audit.tool_id,
        "tool_name": audit.tool_name[:64],
        "mcp_instance": audit.instance_id,
        "binding_name": audit.binding_name[:64],
        "idempotency_key": idempotency_key,
        "request_hash": request_hash,
        "bytes": cost,
        "size": size,
    }
    insert, update, combined = _append_sql(connection.vendor)
    with connection.cursor() as cursor:
        if combined is not None:
            cursor.execute(combined, values)
        else:
            cursor.execute(insert, values)
            cursor.execute(update, values)
        owner, table_bytes, others = cursor.fetchone()
    # The subquery sees the owner's tables as they were before this UPDATE: this table's new bytes are added here.
    return HistoryBytes(int(owner), int(table_bytes or 0), int(others or 0) + int(table_bytes or 0))


# The TableChange columns an entry writes, each bound by its own name (_append_sql).
_ENTRY_COLUMNS = (
    "table", "version", "patch", "inverse", "at", "surface", "user", "api_key", "api_token", "oauth_client", "tool",
    "tool_name", "mcp_instance", "binding_name", "arguments", "idempotency_key", "request_hash", "result", "bytes",
)  # fmt: skip
_JSON_COLUMNS = frozenset({"patch", "inverse", "arguments", "result"})


@functools.cache
def _append_sql(vendor: str) -> tuple[str, str, str | None]:
    """_append's statements, built once from the models' tables and columns: the entry's INSERT (a JSON value as
    its json.dumps text, SQL NULL for None, as the JSONField stores them), the table's UPDATE returning what the
    history quotas check (the owner, the table's history bytes and the owner's other tables'), and on PostgreSQL
    both as one statement. Named parameters, as the call's record (pipeline._record_sql)."""
    quote = connection.ops.quote_name

    cast = "::json" if vendor == "postgresql" else ""  # WrittenJSONField: the text as written
    names = ", ".join(column(TableChange, name) for name in _ENTRY_COLUMNS)
    marks = ", ".join(f"%({name})s{cast if name in _JSON_COLUMNS else ''}" for name in _ENTRY_COLUMNS)
    insert = f"INSERT INTO {quote(TableChange._meta.db_table)} ({names}) VALUES ({marks})"
    version, history = column(Table, "version"), column(Table, "history_bytes")
    tables, owner, table_id = quote(Table._meta.db_table), column(Table, "owner"), column(Table, "id")
    update = (
        f"UPDATE {tables} SET {version} = {version} + 1, {column(Table, 'data_bytes')} ="
        f" %(size)s, {column(Table, 'updated_at')} = %(at)s, {history} = {history} + %(bytes)s"
        f" WHERE {table_id} = %(table)s RETURNING {owner}, {history}, (SELECT SUM(o.{history}) FROM {tables} o"
        f" WHERE o.{owner} = {tables}.{owner} AND o.{table_id} <> {tables}.{table_id})"
    )
    return insert, update, f"WITH entry AS ({insert} RETURNING 1) {update}" if vendor == "postgresql" else None


def _kept_arguments(arguments: Any) -> Any:
    """The call's arguments as the entry keeps them: whole up to TOOLHUB_HISTORY_MAX_ARGUMENTS_BYTES of JSON; over
    it, each value longer than SHORT_ARGUMENT bytes becomes {"omitted_bytes": n} (the patch holds the values
    written), or the whole as {"omitted_bytes": n} when that is still too long."""
    if arguments is None:
        return None
    size = len(json.dumps(arguments))
    limit = history_max_arguments_bytes()
    if size <= limit:
        return arguments
    if isinstance(arguments, dict):
        kept = {}
        for name, value in arguments.items():
            length = len(json.dumps(value))
            kept[name] = value if length <= SHORT_ARGUMENT else {"omitted_bytes": length}
        if len(json.dumps(kept)) <= limit:
            return kept
    return {"omitted_bytes": size}


def _committed(table_id: int, version: int, data: Any, size: int, carried: dict, history: HistoryBytes) -> None:
    """After a write's commit: the new version (`size` bytes of JSON) in this process's cache, a compaction when
    one is due, and the history quotas (checked on the bytes the write's own UPDATE returned)."""
    entry = table_cache.put(table_id, version, data, size)
    if entry.version == version and entry.data is data:
        entry.derived.update(carried)
    # Every version is made once, on some worker: this one asks at every COMPACTION_CHECK-th.
    if version % min(compact_every(), COMPACTION_CHECK) == 0:
        try:
            table_compact(table_id)
        except Exception:  # the write is committed; its entries keep the document whole until the next compaction
            logger.exception("Compacting table %s failed; it is retried after a later write.", table_id)
    _enforce_quietly(table_id, history)


def _enforce_quietly(table_id: int, history: HistoryBytes | None = None) -> None:
    """history_enforce after a committed write: a failure is logged, never the write's (it is retried after the
    next write)."""
    try:
        history_enforce(table_id, history)
    except Exception:
        logger.exception("Bounding the history of table %s failed; it is retried after a later write.", table_id)


#
# Reading the document
#


def document(table_id: int, version: int) -> CachedTable:
    """The table's document at `version` (its current one, or newer than the caller last saw) from this process's
    cache, caught up by applying the log to a cached older version, else loaded from the snapshot.

    Raises Table.DoesNotExist when the table is gone; RuntimeError when the log lacks an entry the version needs
    (only if entries were removed by hand).

    An entry weighs the JSON text its snapshot was parsed from (what data_bytes counts, without a rows table's
    records), moved by the later entries applied to it (_size_after).
    """
    entry = table_cache.get(table_id, version)
    if entry is not None:
        return entry
    held = table_cache.held(table_id)
    if held is not None and held.version < version:
        patches = _patches(table_id, held.version, version)
        if patches is not None:
            try:
                data = _applied(held.data, patches)
                return table_cache.put(table_id, version, data, _size_after(held.size, patches))
            except json_patch.PatchError:  # never expected; the snapshot and the log are the truth
                logger.exception("Catching table %s up from version %s failed; loading it.", table_id, held.version)
    for _ in range(3):
        row = _snapshot_document(table_id)
        if row is None:
            if not Table.objects.filter(pk=table_id).exists():
                raise Table.DoesNotExist(f"Table {table_id} does not exist.")
            row = (1, {}, 2)  # a table saved without a document: {} at version 1 (the model's default)
        snapshot_version, data, size = row
        if snapshot_version == version:
            return table_cache.put(table_id, version, data, size)
        if snapshot_version < version:
            patches = _patches(table_id, snapshot_version, version)
            if patches is not None:
                return table_cache.put(table_id, version, _applied(data, patches), _size_after(size, patches))
        else:  # compacted past `version` meanwhile: the newer document will do for a read; a writer holds the lock
            current = Table.objects.filter(pk=table_id).values_list("version", flat=True).first()
            patches = _patches(table_id, snapshot_version, current or snapshot_version)
            if current is not None and patches is not None:
                return table_cache.put(table_id, current, _applied(data, patches), _size_after(size, patches))
    raise RuntimeError(f"The change log of table {table_id} lacks entries up to version {version}.")


def _snapshot_document(table_id: int) -> tuple[int, Any, int] | None:
    """The table's snapshot as (version, document, length of the JSON text it was parsed from), or None. The text
    is read as the database gives it and parsed here, as Table.data's field would (its decoder), so its length
    costs nothing more."""
    with collector_paused():
        row = (
            TableSnapshot.objects.filter(table_id=table_id)
            .values_list("version", Cast("data", output_field=TextField()))
            .first()
        )
        if row is None:
            return None
        version, text = row
        return version, json.loads(text, cls=TableDocumentDecoder), len(text)


def _patches(table_id: int, after: int, upto: int) -> list[list] | None:
    """The patches of versions after+1..upto in order, or None when one of them is missing."""
    if upto <= after:
        return []
    patches = list(
        TableChange.objects.filter(table_id=table_id, version__gt=after, version__lte=upto)
        .order_by("version")
        .values_list("patch", flat=True)
    )
    return patches if len(patches) == upto - after else None


def _size_after(size: int, patches: list[list]) -> int:
    """The JSON size of a document of `size` bytes once `patches` are applied, for the cache's weight, from the
    patches alone (their inverses, which may hold whole collections of records, are not read): a replace of the
    whole document sets it; any other operation adds what it writes (size_delta) and takes nothing off, so the
    size may count high until the document is next loaded, never low."""
    for patch in patches:
        for operation in _document_operations(patch):
            if operation.get("op") == "replace" and operation.get("path") == "":
                size = len(json.dumps(operation.get("value")))
            else:
                size += size_delta([operation], [])
    return size


def _document_operations(patch: list) -> list:
    """The operations of an entry's patch that change the document: a rows table's entries also hold per-record
    operations ({"collection": id, ...}), which change rows, not the document."""
    return [operation for operation in patch if "collection" not in operation]


def _document_delta(patch: list, inverse: list) -> int:
    """How many bytes an entry grows the document by (size_delta of its document operations)."""
    return size_delta(_document_operations(patch), _document_operations(inverse))


def _applied(data: Any, patches: list[list]) -> Any:
    for patch in patches:
        data = json_patch.apply(data, _document_operations(patch))
    return data


# Set by tools_app.execution.records, which owns the rows (the services may not reach data access):
# rows_whole(table_id, version) is a rows table's whole document (its collections spliced in, bounded);
# rows_create(table_id, records, key_field, compact_of) stores a new rows table's root array of records (an import),
# keyed by key_field, returning the count; compact_of(record) is a record's text already encoded, or None
# (store.write_records').
rows_whole: Callable[[int, int], Any] | None = None
rows_create: Callable[[int, Iterable[Any], str, Callable[[Any], str | None] | None], int] | None = None
# rows_version(table_id, current, inverses, since) is a rows table (stored as rows since version `since`)'s whole
# document before the entries of `inverses`.
rows_version: Callable[[int, int, list[list], int], Any] | None = None
# rows_sample(table_id, version) is a rows table's document with each collection's first records, and the counts.
rows_sample: Callable[[int, int], tuple[Any, dict[str, int]]] | None = None
# rows_unique_fields(table_id, mount, names) is those of `names` that key every record of the array collection at
# `mount` (each an object holding it as a string or an integer, unique as text), checked in the engine.
rows_unique_fields: Callable[[int, str, list[str]], list[str]] | None = None
# rows_relayout(table_id) makes a rows table's collections those its tools choose now (inside a transaction).
rows_relayout: Callable[[int], None] | None = None
# rows_snapshot(table_id) is a context in which every statement reads one snapshot of the database; it yields the
# table's version there (a rows table's reads of its version, document, rows and log agree).
rows_snapshot: Callable[[int], AbstractContextManager[int]] | None = None


def _rows_document(table_id: int, version: int) -> Any:
    """A rows table's whole document, its records spliced in."""
    if rows_whole is None:
        return document(table_id, version).data
    return rows_whole(table_id, version)


# Table.data reads saved documents through this module (the models cannot import the services).
Table.document_reader = lambda table_id, version: document(table_id, version).data
Table.rows_reader = _rows_document


def table_data(table_id: int) -> tuple[int, Any]:
    """The table's current (version, whole document): one primary-key query for the version, then this process's
    cache (caught up through the log when another worker wrote meanwhile). A rows table's document has its records
    spliced in (rows_whole, bounded): what the whole-table views read; the executors read without them."""
    row = Table.objects.filter(pk=table_id).values_list("version", "storage").first()
    if row is None:
        raise Table.DoesNotExist(f"Table {table_id} does not exist.")
    version, storage = row
    if storage == TableStorage.ROWS and rows_whole is not None:
        with _snapshot(table_id) as current:  # the version and the rows of one moment
            return current, rows_whole(table_id, current)
    entry = document(table_id, version)
    return entry.version, entry.data


def _snapshot(table_id: int) -> AbstractContextManager[Any]:
    return rows_snapshot(table_id) if rows_snapshot is not None else nullcontext(None)


def table_data_sampled(table_id: int) -> tuple[int, Any, dict[str, int]]:
    """The table's current (version, document, counts) for describing its data: a document table's whole document
    and no counts; a rows table's document with the first records of each collection (rows_sample) and each
    collection's true record count by mount, so that describing a table of millions of records gathers none."""
    row = Table.objects.filter(pk=table_id).values_list("version", "storage").first()
    if row is None:
        raise Table.DoesNotExist(f"Table {table_id} does not exist.")
    version, storage = row
    if storage == TableStorage.ROWS and rows_sample is not None:
        with _snapshot(table_id) as current:
            data, counts = rows_sample(table_id, current)
            return current, data, counts
    entry = document(table_id, version)
    return entry.version, entry.data, {}


def table_unique_fields(table_id: int, mount: str, names: list[str]) -> list[str]:
    """Those of `names` that key every record of the rows table's collection at `mount` (rows_unique_fields), for a
    description made from its first records (table_data_sampled); `names` as they are without one."""
    if rows_unique_fields is None:
        return list(names)
    return rows_unique_fields(table_id, mount, names)


@contextmanager
def rows_head_known(table_id: int, version: int) -> Iterator[None]:
    """Within it, table_head answers (version, rows) for `table_id`, a table read as stored as rows at `version`."""
    held = _known_head.set((table_id, version, TableStorage.ROWS))
    try:
        yield
    finally:
        _known_head.reset(held)


def table_head(table_id: int) -> tuple[int, str]:
    """The table's current (version, storage) in one primary-key query (none inside table_write's change of that
    table: its locked row, read by the write; none within rows_head_known for that table); Table.DoesNotExist when
    it is gone."""
    known = _known_head.get()
    if known is not None and known[0] == table_id:
        return known[1], known[2]
    with connection.cursor() as cursor:
        cursor.execute(_head_sql(connection.vendor), {"table": table_id})
        row = cursor.fetchone()
    if row is None:
        raise Table.DoesNotExist(f"Table {table_id} does not exist.")
    return row[0], row[1]


@functools.cache
def _head_sql(vendor: str) -> str:
    """table_head's statement, built once from the model's table and columns (quoted for `vendor`): the ORM would
    compile it again at every read. Its parameter is named, which Django's SQLite cursor binds without rewriting
    the statement (tools_app.selectors._call_target_sql)."""
    quote = connection.ops.quote_name
    return (
        f"SELECT {column(Table, 'version')}, {column(Table, 'storage')} FROM {quote(Table._meta.db_table)}"
        f" WHERE {column(Table, 'id')} = %(table)s"
    )


def table_document(table_id: int, version: int) -> Any:
    """The table's document at `version` through this process's cache (a rows table's: without its records)."""
    return document(table_id, version).data


def table_version_data(table_id: int, version: int) -> Any:
    """The document as it was at `version`: the current one with the inverses of the later entries applied, newest
    first. Raises TableChange.DoesNotExist when `version` is outside retention (or never existed).

    A rows table's is read in one snapshot (its version, log and rows agree): from its rows_since_version on, the
    rows with the per-record inverses applied; before it, back across the layouts its entries keep (a table laid
    out again) and the move (a table moved to rows by tables_to_rows, whose older entries patch the whole
    document): _rows_version_data."""
    row = Table.objects.filter(pk=table_id).values_list("version", "storage").first()
    if row is None:
        raise Table.DoesNotExist(f"Table {table_id} does not exist.")
    current, storage = row
    if storage != TableStorage.ROWS or rows_version is None or rows_snapshot is None:
        if version == current:
            return table_data(table_id)[1]
        inverses = version_inverses(table_id, version, current)
        if inverses is None:
            raise TableChange.DoesNotExist(f"Version {version} of table {table_id} is not kept.")
        return _applied(document(table_id, current).data, inverses)
    with rows_snapshot(table_id) as current:
        return _rows_version_data(table_id, version, current)


def _rows_version_data(table_id: int, version: int, current: int) -> Any:
    """A rows table's whole document at `version`, read at its `current` version (in one snapshot, or under the
    table's lock)."""
    assert rows_version is not None  # set by tools_app.execution.records, as rows_whole
    assert rows_whole is not None
    since = Table.objects.filter(pk=table_id).values_list("rows_since_version", flat=True).get()
    if version == current:
        return rows_whole(table_id, current)
    inverses = version_inverses(table_id, version, current)
    if inverses is None or since is None:
        raise TableChange.DoesNotExist(f"Version {version} of table {table_id} is not kept.")
    # The rows with the later entries' inverses, back across layouts and the move to rows (records._rebuilt).
    return rows_version(table_id, current, inverses, since)


def version_inverses(table_id: int, version: int, current: int) -> list[list] | None:
    """The inverse patches from `current` back to `version` (newest first), or None when one is not kept."""
    if version < 1 or version > current:
        return None
    inverses = list(
        TableChange.objects.filter(table_id=table_id, version__gt=version, version__lte=current)
        .order_by("-version")
        .values_list("inverse", flat=True)
    )
    return inverses if len(inverses) == current - version else None


def oldest_version(table_id: int, current: int) -> int:
    """The oldest version of the table still kept (the versions from it to `current` can be opened)."""
    kept = TableChange.objects.filter(table_id=table_id, version__lte=current).order_by("-version")
    versions = list(kept.values_list("version", flat=True))
    oldest = current
    for version in versions:
        if version != oldest:
            break
        oldest = version - 1
    return max(1, oldest)


#
# Restore and whole-document writes
#


# Applies per-record operations ({"collection": id, ...}, in order) to a rows table's rows inside the caller's
# transaction: set by tools_app.execution.records, which owns the rows (the services may not reach data access).
rows_apply: Callable[[int, list], None] | None = None


def table_restore(*, table_id: int, version: int) -> int:
    """Write the document as it was at `version` as a new version (its entry has the current audit); return the
    new version. Raises TableChange.DoesNotExist when `version` is outside retention.

    The entry holds the net change from the current version to `version` and back (_net_change: the documents'
    diff, each changed record once), whatever the entries between them hold. A rows table restored to a version
    from its rows_since_version on writes that per-record change to its rows; to a version before it (from before
    tables_to_rows, or before the table was laid out again), the whole document at that version
    (_rows_version_data) is written as a whole-data write writes it (rows_replace: only the records that differ;
    laid out again, the new version becoming its rows_since_version, when its collections differ), but exactly,
    key order included (`exact`, as the documents' `ordered` diff writes a document table's restore), so it answers
    as the document table would."""
    audit = current_audit()
    now = timezone.now()
    with transaction.atomic():
        current, size, owner_id, _storage = _locked(table_id)
        storage, since = Table.objects.filter(pk=table_id).values_list("storage", "rows_since_version").get()
        rows = storage == TableStorage.ROWS
        if rows and (rows_apply is None or rows_replace is None or since is None):
            raise TableChange.DoesNotExist(f"Table {table_id} is stored as rows: its versions cannot be restored here.")
        entry = document(table_id, current)
        exact_size = None
        written = laid_out = False
        if rows and since is not None and version < since:
            target = _rows_version_data(table_id, version, current)
            # exact: the version as it was, key order included, as a document table's restore writes it.
            patch, inverse, _document, laid_out = rows_replace(table_id, current, target, True)  # type: ignore[misc]
            written = True
            exact_size = _size(target)  # the whole document is at hand: its size is exact, not estimated
        else:
            entries = list(
                TableChange.objects.filter(table_id=table_id, version__gt=version, version__lte=current)
                .order_by("-version")
                .values_list("inverse", "patch")
            )
            if version < 1 or version > current or len(entries) != current - version:
                raise TableChange.DoesNotExist(f"Version {version} of table {table_id} is not kept.")
            patch, inverse = _net_change(
                entry.data,
                [operation for inverse_, _ in entries for operation in inverse_],
                [operation for _, forward in reversed(entries) for operation in forward],
                record_keys(table_id),
            )
        data = _applied(entry.data, [patch])
        if rows and not written:
            rows_apply(table_id, [operation for operation in patch if "collection" in operation])  # type: ignore[misc]
        old_size = size or _size(entry.data)
        new_size = old_size + size_delta(patch, inverse) if exact_size is None else exact_size
        data_quota_check(owner_id=owner_id, table_id=table_id, old_size=old_size, new_size=new_size)
        new_version = current + 1
        history = _append(table_id, new_version, patch, inverse, audit, now, new_size)
        if laid_out:
            Table.objects.filter(pk=table_id).update(rows_since_version=new_version)
        cached_size = entry.size + _document_delta(patch, inverse)
        transaction.on_commit(lambda: _committed(table_id, new_version, data, cached_size, {}, history))
    return new_version


def _net_change(data: Any, back: list, forth: list, keys: tuple[str, ...]) -> tuple[list, list]:
    """(patch, inverse) of a restore: the net change from the current document `data` to the one `back` (the later
    entries' inverses, newest first) leads to, and from it back again (`forth`: their patches, oldest first).

    Its document part is the diff of the two documents (json_patch.diff, records matched by `keys`); its
    per-record part (a rows table's) holds each record the walk changes once, in its state at the far end
    (_record_net). So an entry's size is the difference between two versions, never the length of the history it
    crosses, and a restore across earlier restores does not replay them."""
    documents = [operation for operation in back if "collection" not in operation]
    if documents:
        patch, inverse = json_patch.diff(data, json_patch.apply(data, documents), keys=keys, ordered=True)
    else:
        patch, inverse = [], []
    if len(documents) == len(back):
        return patch, inverse
    operations, undo = _record_net(_record_states(forth), _record_states(back))
    return patch + operations, undo + inverse


# A record state's key when the operations that lead to it only replaced its value: the key it had.
_KEPT = object()


def _record_states(operations: list) -> dict[tuple[int, int], tuple[Any, Any] | None]:
    """The state that the per-record operations of `operations` (in order) leave each record they touch in, by
    (collection, position): (key, value), or None when removed; a `replace` keeps the key before it (_KEPT when
    unseen)."""
    states: dict[tuple[int, int], tuple[Any, Any] | None] = {}
    for operation in operations:
        if "collection" not in operation:
            continue
        spot = (operation["collection"], operation["position"])
        if operation["op"] == "remove":
            states[spot] = None
        elif operation["op"] == "add":
            states[spot] = (operation.get("key"), operation["value"])
        else:
            held = states.get(spot)
            states[spot] = (held[0] if held is not None else _KEPT, operation["value"])
    return states


def _record_net(was: dict, wanted: dict) -> tuple[list, list]:
    """(operations, inverse) that take the records in states `was` to the states `wanted` (_record_states of the
    same records) and back: removes, then adds, then replaces, each record at most once (a remove and an add when
    its member key changes; nothing when its JSON is the same); the inverse undoes them newest first, as a
    whole-data write's entry does (history lines pair each operation with its undo)."""
    removes, adds, replaces = [], [], []
    for spot in sorted(was.keys() | wanted.keys()):
        before, after = was.get(spot), wanted.get(spot)
        at = {"collection": spot[0], "position": spot[1]}
        if before is None and after is None:
            continue
        rekeyed = before is not None and after is not None and _KEPT not in (before[0], after[0])
        if before is not None and (after is None or (rekeyed and before[0] != after[0])):
            key = None if before[0] is _KEPT else before[0]
            removes.append(({"op": "remove", **at}, {"op": "add", **at, "key": key, "value": before[1]}))
            before = None
        if after is None:
            continue
        if before is None:
            key = None if after[0] is _KEPT else after[0]
            adds.append(({"op": "add", **at, "key": key, "value": after[1]}, {"op": "remove", **at}))
        elif json.dumps(before[1]) != json.dumps(after[1]):
            replaces.append(({"op": "replace", **at, "value": after[1]}, {"op": "replace", **at, "value": before[1]}))
    pairs = removes + adds + replaces
    return [operation for operation, _undo in pairs], [undo for _operation, undo in reversed(pairs)]


def table_relayout_entry(table_id: int, version: int, patch: list, inverse: list, data: Any) -> None:
    """Record that a rows table was laid out again (its collections changed with its tools; execution.records),
    inside the caller's transaction, which holds the table's row lock: the entry of `version` (the current one + 1)
    holds `patch` (the new document without records, replacing the old whole), so that every worker's cached
    document follows; `data` is that new document."""
    current, size, _owner, _storage = _locked(table_id)
    if version != current + 1:
        raise RuntimeError(f"Table {table_id} is at version {current}, not {version - 1}.")
    history = _append(table_id, version, patch, inverse, current_audit(), timezone.now(), size)
    # The document without records is small: measured whole.
    transaction.on_commit(lambda: _committed(table_id, version, data, _size(data), {}, history))


# rows_replace(table_id, version, data, exact) writes a rows table's data whole inside the caller's transaction (under
# its row lock): (patch, inverse, the new document without records, laid out again); `data` as a whole-data write
# leaves it, or with `exact` (a restore) `data` itself, key order included; set by tools_app.execution.records.
rows_replace: Callable[[int, int, Any, bool], tuple[list, list, Any, bool]] | None = None
# rows_start(table_id, data, key_field) lays a new table out as rows when its data holds a collection (True).
rows_start: Callable[[int, Any, str], bool] | None = None


def table_replace(*, table: Table, data: Any, current: CachedTable, now: Any) -> None:
    """A whole-document write (the API's PUT/PATCH of data, the admin's edit) under the row lock the caller holds.

    Its entry holds the diff of the two documents and its inverse (json_patch.diff; records matched by the key
    fields of the table's tools, or `id`), so history costs the change, not the document; the new document is
    the old one with that patch applied, as for every write. Only when the diff would be larger than the new
    document (nothing in common) does the entry hold both documents (root `replace`) and the new document become
    the snapshot.
    """
    new_version = current.version + 1
    size = _size(data)
    if table.storage == TableStorage.ROWS:
        _replace_rows(table.pk, data, current.version, size, now)
        return
    patch, inverse = json_patch.diff(current.data, data, keys=record_keys(table.pk))
    whole = len(json.dumps(patch)) > size
    if whole:
        patch = [{"op": "replace", "path": "", "value": data}]
        inverse = [{"op": "replace", "path": "", "value": current.data}]
        new_data = data
    else:
        new_data = json_patch.apply(current.data, patch)
    history = _append(table.pk, new_version, patch, inverse, current_audit(), now, size)
    if whole:
        TableSnapshot.objects.update_or_create(table_id=table.pk, defaults={"version": new_version, "data": data})
    transaction.on_commit(lambda: table_cache.put(table.pk, new_version, new_data, size))
    transaction.on_commit(lambda: _enforce_quietly(table.pk, history))


def _replace_rows(table_id: int, data: Any, version: int, size: int, now: Any) -> None:
    """table_replace of a rows table: its rows follow `data` (rows_replace: only the changed records are written) and
    the entry holds their per-record operations and the document's diff; when the collections themselves changed
    (laid out again), the new version becomes its `rows_since_version` (the entry's inverse keeps the old
    layout)."""
    if rows_replace is None:
        raise RuntimeError("No rows writer: tools_app.execution.records plugs it in when it loads.")
    _check_rows_table_size(size, path=["data"])
    new_version = version + 1
    patch, inverse, document, laid_out = rows_replace(table_id, version, data, False)
    history = _append(table_id, new_version, patch, inverse, current_audit(), now, size)
    if laid_out:
        Table.objects.filter(pk=table_id).update(rows_since_version=new_version)
    # The document without records is small: measured whole.
    transaction.on_commit(lambda: table_cache.put(table_id, new_version, document, _size(document)))
    transaction.on_commit(lambda: _enforce_quietly(table_id, history))


def record_keys(table_id: int) -> tuple[str, ...]:
    """The fields that identify a record of this table: its tools' key fields, then `id`."""
    keys = [
        (metadata or {}).get("key_field") or "id"
        for metadata in Tool.objects.filter(table_id=table_id).values_list("metadata", flat=True)
    ]
    return tuple(dict.fromkeys([*keys, "id"]))


#
# Compaction and retention
#


def table_compact(table_id: int, *, force: bool = False) -> bool:
    """Fold the entries after the snapshot into a new one when TOOLHUB_TABLE_COMPACT_EVERY of them piled up (or
    `force`), then prune the entries outside retention. Returns whether a snapshot was written."""
    row = _versions(table_id)
    if row is None:
        return False
    version, snapshot_version = row
    written = False
    if version > snapshot_version and (force or version - snapshot_version >= compact_every()):
        entry = document(table_id, version)
        with transaction.atomic():
            # Only forward: a compaction of an older version that lost a race changes nothing.
            snapshots = TableSnapshot.objects.filter(table_id=table_id, version__lt=entry.version)
            written = bool(snapshots.update(data=entry.data, version=entry.version))
            if not written and not TableSnapshot.objects.filter(table_id=table_id).exists():
                TableSnapshot.objects.create(table_id=table_id, version=entry.version, data=entry.data)
                written = True
            table_prune(table_id)
    return written


def _versions(table_id: int) -> tuple[int, int] | None:
    """(the table's version, its snapshot's version), or None when the table is gone."""
    version = Table.objects.filter(pk=table_id).values_list("version", flat=True).first()
    if version is None:
        return None
    snapshot_version = TableSnapshot.objects.filter(table_id=table_id).values_list("version", flat=True).first()
    return version, snapshot_version or 1


def table_prune(table_id: int) -> int:
    """Delete the entries outside retention that the snapshot no longer needs; return how many. An entry is kept
    while it is younger than TOOLHUB_HISTORY_DAYS or among the last TOOLHUB_HISTORY_VERSIONS versions, and always
    when it is after the snapshot. Only a run of the oldest entries goes, so the kept versions stay contiguous."""
    row = _versions(table_id)
    if row is None:
        return 0
    version, snapshot_version = row
    days, versions = retention()
    limit = min(snapshot_version, version - versions)
    if limit < 1:
        return 0
    last = TableChange.objects.filter(
        table_id=table_id, version__lte=limit, at__lt=timezone.now() - timedelta(days=days)
    ).aggregate(last=Max("version"))["last"]
    if last is None:
        return 0
    return _delete_through(table_id, last)[0]


def _delete_through(table_id: int, last: int) -> tuple[int, int]:
    """Delete the table's entries up to version `last` (the caller checked that the snapshot is at `last` or
    later) and take their bytes off Table.history_bytes; (entries, bytes) deleted. The rows are locked first, so
    two compactions never count the same entry twice."""
    with transaction.atomic():
        rows = TableChange.objects.filter(table_id=table_id, version__lte=last)
        sizes = list(rows.select_for_update().values_list("bytes", flat=True))
        if not sizes:
            return 0, 0
        rows.delete()
        freed = sum(sizes)
        Table.objects.filter(pk=table_id).update(history_bytes=Greatest(F("history_bytes") - freed, Value(0)))
    return len(sizes), freed


#
# History quotas
#


def _history_bytes(table_id: int) -> HistoryBytes | None:
    """The table's HistoryBytes as committed now, in one statement (no ORM); None when the table is gone."""
    tables = Table._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT t.owner_id, t.history_bytes, (SELECT SUM(o.history_bytes) FROM "{tables}" o'
            f' WHERE o.owner_id = t.owner_id) FROM "{tables}" t WHERE t.id = %s',
            (table_id,),
        )
        row = cursor.fetchone()
    if row is None:
        return None
    return HistoryBytes(int(row[0]), int(row[1] or 0), int(row[2] or 0))


def history_enforce(table_id: int, seen: HistoryBytes | None = None) -> int:
    """Bring the history of the table under TOOLHUB_HISTORY_MAX_TABLE_BYTES and its owner's under
    TOOLHUB_HISTORY_MAX_OWNER_BYTES by compacting the oldest entries away (the table's own, then the owner's
    oldest across their tables), inside retention too; returns the bytes freed.

    An entry is removed only when the snapshot is at its version or later (the table is compacted first when
    not), and only a run of a table's oldest entries goes: the versions kept stay contiguous and the current
    document is never touched. One query when nothing is over; none with `seen`, the bytes a write's own UPDATE
    returned under the table's lock (a write of another table of the owner committed meanwhile is counted at the
    next write).
    """
    table_limit, owner_limit = history_max_table_bytes(), history_max_owner_bytes()
    if not table_limit and not owner_limit:
        return 0
    if seen is None:
        seen = _history_bytes(table_id)
        if seen is None:
            return 0
    owner, table_bytes, total = seen
    freed = 0
    if table_limit and table_bytes > table_limit:
        freed += _free(TableChange.objects.filter(table_id=table_id), table_bytes - table_limit)
    if owner_limit and total - freed > owner_limit:
        owner_entries = TableChange.objects.filter(table__owner_id=owner)
        freed += _free(owner_entries, total - freed - owner_limit)
    return freed


def _free(entries: Any, excess: int) -> int:
    """Remove the oldest of `entries` (by time) until `excess` bytes are freed: per table, every entry up to the
    newest one chosen there (compacting the table first when its snapshot is older). Returns the bytes freed."""
    through: dict[int, int] = {}
    chosen = 0
    oldest_first = entries.order_by("at", "version").values_list("table_id", "version", "bytes")
    for table_id, version, size in oldest_first.iterator(chunk_size=500):
        through[table_id] = max(through.get(table_id, 0), version)
        chosen += size
        if chosen >= excess:
            break
    freed = 0
    for table_id, last in through.items():
        row = _versions(table_id)
        if row is None:
            continue
        if row[1] < last:
            table_compact(table_id, force=True)
            row = _versions(table_id)
            if row is None or row[1] < last:
                continue  # a newer compaction lost a race; the next write tries again
        freed += _delete_through(table_id, last)[1]
    return freed


#
# Size
#


def _size(data: Any) -> int:
    """The document's size as the JSON text Table.data's encoder writes (ASCII-escaped)."""
    return len(json.dumps(data))


def size_delta(patch: list, inverse: list) -> int:
    """About how many bytes the document grows by `patch` (values added minus values removed, which the inverse
    holds; with each object key's quotes and separators). Exact at each snapshot, estimated between them."""

    def weight(operations: list) -> int:
        total = 0
        for operation in operations:
            if operation.get("op") not in ("add", "replace"):
                continue
            path = operation.get("path", "")
            total += len(json.dumps(operation.get("value"))) + (2 if path else 0)  # ", " before it
            token = path.rsplit("/", 1)[-1] if path else ""
            if path and not (token.isdigit() or token == "-"):
                total += len(json.dumps(token.replace("~1", "/").replace("~0", "~"))) + 2  # '"key": '
        return total

    return weight(patch) - weight(inverse)
