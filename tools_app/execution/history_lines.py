"""What a person reads of a table's history entries: THE readable form of a change (docs/history.md, "Admin").

Each operation of an entry's patch becomes lines `+ added`, `− removed` (with the removed value, from the paired
inverse) or `~ changed` (field by field for a replaced record), and each line names where, by record KEY rather than
array position: `orders › 1042 · status` is the field `status` of the record keyed 1042 in the collection at
`/orders` (SPEC §8's key: the key field of the table's tools at that mount, else `id`, as a string; an object's
member by its own key). The records of the root are named under the table's name (`stock › 2 · qty`). A record
without a key keeps its position: `orders › [3] · status`. A path through no record is shown as its pointer.

- Document tables: the patch's array indexes are resolved against the document the patch applies to (the version
  before the entry, each operation against the document the operations before it left). A page of entries costs
  the document at its newest version (`services.table_version_data`) and one inverse per entry, newest first.
- Rows tables (docs/tables-at-scale.md): the per-record operations name their collection and position; the key is
  the operation's own (`add`), its paired inverse's, the record's key field in its value, or, for an object
  collection's `replace`, the record's key at that position (one query per page). Without any, the position is
  shown: `orders › [position 2048]`. Entries written before the table moved to rows patch a document that is no
  longer kept, so their indexes stay indexes.

The admin's History page is the one surface that shows changes to people; the API answers the raw patch (the
contract), which this module never changes.
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tools_app import services
from tools_app.data_access import operations
from tools_app.execution import records
from tools_app.kernel import json_patch
from tools_app.kernel.limits import (
    HISTORY_MAX_DIFF_LINES,
    HISTORY_MAX_KEY_CHARS,
    HISTORY_MAX_NAMED_OPERATIONS,
    HISTORY_MAX_VALUE_CHARS,
)
from tools_app.models import Table, TableChange, TableRecord, TableStorage, Tool

__all__ = ["DiffLine", "entry_lines", "readable_diff", "restored_version", "short"]

WHOLE_DOCUMENT = "(whole document)"

_MISSING = object()


@dataclass
class DiffLine:
    kind: str  # "added", "removed", "changed"
    where: str
    before: str = ""
    after: str = ""


def short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= HISTORY_MAX_VALUE_CHARS else text[: HISTORY_MAX_VALUE_CHARS - 1] + "…"


def restored_version(entry: TableChange) -> int | None:
    """The version a restore wrote again, None for any other write: a restore is the one write with no tool whose
    arguments are `{"version": v}` (the API's body and the admin's, docs/history.md)."""
    arguments = entry.arguments
    if entry.tool_name or not isinstance(arguments, dict) or set(arguments) != {"version"}:
        return None
    version = arguments["version"]
    return version if isinstance(version, int) and not isinstance(version, bool) else None


def _key_of(record: Any, key_field: str) -> str | None:
    """The record's key as SPEC §8 compares it ("1042" for 1042), None when it holds none a key can be."""
    if not isinstance(record, dict):
        return None
    value = record.get(key_field)
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    return operations.key_text(value)


def _bounded(segment: str) -> str:
    """A key or field name as a line shows it: at most HISTORY_MAX_KEY_CHARS characters (a key can be as long as
    a record)."""
    return segment if len(segment) <= HISTORY_MAX_KEY_CHARS else segment[: HISTORY_MAX_KEY_CHARS - 1] + "…"


def _joined(segments: list[str], last_record: int) -> str:
    """`a › b › key · field/inner`: the steps to the last record, then the fields inside it."""
    segments = [_bounded(segment) for segment in segments]
    named = " › ".join(segments[: last_record + 1])
    inside = "/".join(segments[last_record + 1 :])
    return f"{named} · {inside}" if inside else named


#
# Naming: one namer per entry, asked for each operation's place in order
#


class _Namer:
    """Names where an operation acts, operation by operation (`where`, then `advance`)."""

    def where(self, operation: dict, undo: dict) -> str:
        path = operation.get("path")
        return WHOLE_DOCUMENT if path == "" else str(path) if path is not None else "?"

    def advance(self, operation: dict) -> None:
        return None


class _DocumentNamer(_Namer):
    """Resolves a JSON Patch path's array indexes to record keys against the document the operation applies to
    (None: not known, so indexes are shown as positions)."""

    def __init__(self, document: Any, table_name: str, key_fields: dict[str, str], tools: list[tuple[str, str]]):
        self.document = document
        self.table_name = table_name
        self.key_fields = key_fields
        self.object_collections: set[str] = set()
        if document is not None:
            self.object_collections = {
                mount for mount, _, value in records.collection_mounts(document, tools) if isinstance(value, dict)
            }
        self.named = 0

    def where(self, operation: dict, undo: dict) -> str:
        path = operation.get("path")
        if not isinstance(path, str) or (path and not path.startswith("/")):
            return "?"
        if path == "":
            return WHOLE_DOCUMENT
        tokens = [token.replace("~1", "/").replace("~0", "~") for token in path[1:].split("/")]
        node = self.document if self.named < HISTORY_MAX_NAMED_OPERATIONS else _MISSING
        segments: list[str] = []
        last_record = -1
        for depth, token in enumerate(tokens):
            parent = json_patch.pointer(tokens[:depth])
            last = depth == len(tokens) - 1
            if isinstance(node, list) or (node is _MISSING and (token.isdigit() or token == "-")):
                index = len(node) if token == "-" and isinstance(node, list) else token
                if last and operation.get("op") == "add":
                    element = operation.get("value")
                elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                    element = node[int(token)]
                else:
                    element = _MISSING
                key = _key_of(element, self.key_fields.get(parent, "id"))
                if depth == 0:
                    segments.append(self.table_name)
                segments.append(key if key is not None else f"[{index}]")
                last_record = len(segments) - 1
                node = element
                continue
            if depth == 0 and parent in self.object_collections:
                segments.append(self.table_name)
            segments.append(token)
            if parent in self.object_collections:
                last_record = len(segments) - 1
            node = node.get(token, _MISSING) if isinstance(node, dict) else _MISSING
        return path if last_record < 0 else _joined(segments, last_record)

    def advance(self, operation: dict) -> None:
        self.named += 1
        if self.document is None or self.named >= HISTORY_MAX_NAMED_OPERATIONS:
            return
        try:
            self.document = json_patch.apply(self.document, [operation])
        except (*json_patch.PatchError, KeyError):
            self.document = None  # not expected: the log replays; the rest is named by index


class _RowsNamer(_Namer):
    """Names a rows table's per-record operations ({"collection", "position", "key"?, "value"?})."""

    def __init__(self, table_name: str, found: dict[int, records.Collection], keys: dict[tuple[int, int], str]):
        self.table_name = table_name
        self.found = found
        self.keys = keys

    def where(self, operation: dict, undo: dict) -> str:
        if "collection" not in operation:
            return super().where(operation, undo)
        collection = self.found.get(operation["collection"])
        position = operation.get("position")
        key = operation.get("key")
        if key is None and undo.get("op") == "add":
            key = undo.get("key")
        if key is None and collection is not None and collection.kind == "array":
            key = _key_of(operation.get("value"), collection.key_field)
            if key is None:
                key = _key_of(undo.get("value"), collection.key_field)
        if key is None:
            key = self.keys.get((operation["collection"], position))  # type: ignore[arg-type]
        if collection is None:
            segments = [f"(collection {operation['collection']})"]
        elif collection.mount == "":
            segments = [self.table_name]
        else:
            segments = [token.replace("~1", "/").replace("~0", "~") for token in collection.mount[1:].split("/")]
        segments.append(str(key) if key is not None else f"[position {position}]")
        return " › ".join(_bounded(segment) for segment in segments)


#
# Lines
#


def readable_diff(patch: list, inverse: list, namer: _Namer | None = None) -> tuple[list[DiffLine], int]:
    """The entry's patch as lines a person reads: added / removed / changed, field by field for records. Each
    operation is paired with its inverse (the log writes the inverse in the reverse order of the patch), which
    holds the values a removal or a replacement took away. Returns the lines (at most HISTORY_MAX_DIFF_LINES) and
    how many more. Without a namer, paths are shown as the patch holds them."""
    namer = namer or _Namer()
    counting = _Namer()  # past HISTORY_MAX_DIFF_LINES only the count is needed: nothing is resolved
    paired = len(patch) == len(inverse)
    lines: list[DiffLine] = []
    for index, operation in enumerate(patch):
        if not isinstance(operation, dict):
            continue
        kind = operation.get("op")
        paired_undo = inverse[len(inverse) - 1 - index] if paired else {}
        undo = paired_undo if isinstance(paired_undo, dict) else {}
        naming = namer if len(lines) < HISTORY_MAX_DIFF_LINES else counting
        where = naming.where(operation, undo)
        if index < len(patch) - 1:  # only a later operation needs the document this one leaves
            naming.advance(operation)
        old = undo.get("value") if undo.get("op") in ("add", "replace") else None
        if kind == "add":
            lines.append(DiffLine("added", where, after=short(operation.get("value"))))
        elif kind == "remove":
            lines.append(DiffLine("removed", where, before=short(old) if undo else ""))
        elif kind == "replace":
            new = operation.get("value")
            if isinstance(old, dict) and isinstance(new, dict) and where != WHOLE_DOCUMENT:
                inside = "/" if " · " in where else " · "
                for field in sorted(set(old) | set(new), key=str):
                    if field not in new:
                        lines.append(DiffLine("removed", f"{where}{inside}{field}", before=short(old[field])))
                    elif field not in old:
                        lines.append(DiffLine("added", f"{where}{inside}{field}", after=short(new[field])))
                    elif json.dumps(old[field], sort_keys=True) != json.dumps(new[field], sort_keys=True):
                        lines.append(
                            DiffLine(
                                "changed", f"{where}{inside}{field}", before=short(old[field]), after=short(new[field])
                            )
                        )
            else:
                lines.append(DiffLine("changed", where, before=short(old) if undo else "", after=short(new)))
        else:
            lines.append(DiffLine("changed", f"{kind} {where}", after=short(operation)))
    return lines[:HISTORY_MAX_DIFF_LINES], max(0, len(lines) - HISTORY_MAX_DIFF_LINES)


def _tool_mounts(table_id: int) -> list[tuple[str, str]]:
    tools = Tool.objects.filter(table_id=table_id).order_by("id").values_list("json_path", "metadata")
    return [(path, (metadata or {}).get("key_field") or "id") for path, metadata in tools]


def _row_keys(entries: Sequence[TableChange], found: dict[int, records.Collection]) -> dict[tuple[int, int], str]:
    """(collection, position) -> key for the object collections' operations that carry no key: from the page's own
    operations that do, then from the rows still at those positions (one query)."""
    keys: dict[tuple[int, int], str] = {}
    wanted: set[tuple[int, int]] = set()
    for entry in entries:
        for operations_ in (entry.patch, entry.inverse):
            for operation in (operations_ or [])[:HISTORY_MAX_NAMED_OPERATIONS]:
                if not isinstance(operation, dict) or "collection" not in operation:
                    continue
                place = (operation["collection"], operation.get("position"))
                if operation.get("key") is not None:
                    keys[place] = operation["key"]  # type: ignore[index]
                elif getattr(found.get(operation["collection"]), "kind", None) == "object":
                    wanted.add(place)  # type: ignore[arg-type]
    wanted -= set(keys)
    if wanted:
        rows = TableRecord.objects.filter(
            collection_id__in={collection for collection, _ in wanted},
            position__in={position for _, position in wanted},
        ).values_list("collection_id", "position", "key")
        keys.update({(collection, position): key for collection, position, key in rows if key is not None})
    return keys


def entry_lines(table: Table, entries: Sequence[TableChange]) -> dict[int, tuple[list[DiffLine], int]]:
    """Version -> (lines, how many more) of each of `entries` (one page of the table's history, any order), their
    paths naming records by key."""
    newest_first = sorted(entries, key=lambda entry: entry.version, reverse=True)
    shown: dict[int, tuple[list[DiffLine], int]] = {}
    tools = _tool_mounts(table.pk)
    key_fields: dict[str, str] = {}
    for path, key_field in tools:
        key_fields.setdefault(path, key_field)
    rows = table.storage == TableStorage.ROWS
    since = table.rows_since_version or 0
    namer: _Namer
    if rows:
        found = {collection.id: collection for collection in records.collections(table.pk).values()}
        rows_namer = _RowsNamer(table.name, found, _row_keys(newest_first, found))
        for entry in newest_first:
            # Entries up to the move patch a document that held the records, which is no longer kept.
            namer = rows_namer if entry.version > since else _DocumentNamer(None, table.name, key_fields, tools)
            shown[entry.version] = readable_diff(entry.patch, entry.inverse, namer)
        return shown
    after: Any = _MISSING  # the document at the version of the entry in hand, when the one before gave it
    for number, entry in enumerate(newest_first):
        if number and newest_first[number - 1].version != entry.version + 1:
            after = _MISSING
        if after is _MISSING:
            try:
                after = services.table_version_data(table.pk, entry.version)
            except TableChange.DoesNotExist:
                after = None
        before = None
        if after is not None:
            try:
                before = json_patch.apply(after, entry.inverse)
            except (*json_patch.PatchError, KeyError):
                before = None
        namer = _DocumentNamer(before, table.name, key_fields, tools)
        shown[entry.version] = readable_diff(entry.patch, entry.inverse, namer)
        after = before if before is not None else _MISSING
    return shown
