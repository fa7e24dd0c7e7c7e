"""One function per data tool type (SPEC §3.2). Reads are pure functions of JSON; writes return a
`change(data, derived) -> (new_data, outcome, patch, inverse, carried)` that services.table_write applies under
the table's lock (the patch is the table's change-log entry).

Array mounts hold records identified by `key_field`; object mounts hold entries identified by their
key and are exchanged as {"key", "content"} pairs. Keys compare as strings (SPEC §8).
"""

import bisect
from typing import Any

from tools_app.data_access import pointer
from tools_app.data_access.budget import charge
from tools_app.data_access.query import run_query
from tools_app.data_access.shape import describe, json_type
from tools_app.kernel import json_patch
from tools_app.kernel.errors import ErrorCode, ToolError


class Mount:
    """Where a tool points inside its table's data."""

    def __init__(self, json_path: str, key_field: str):
        self.json_path = json_path
        self.tokens = pointer.parse(json_path)
        self.key_field = key_field

    def value(self, data: Any) -> Any:
        return pointer.resolve(data, self.tokens, self.json_path)

    def collection(self, data: Any) -> list | dict:
        value = self.value(data)
        if not isinstance(value, list | dict):
            raise ToolError(
                ErrorCode.MOUNT_TYPE_MISMATCH,
                f"The mount {self.json_path or '(root)'!r} holds a {json_type(value)}; this tool needs an array "
                "of records or an object of entries.",
                {"json_path": self.json_path, "found": json_type(value)},
            )
        return value

    def label(self) -> str:
        return self.json_path or "(root)"


def _key(value: Any) -> str:
    """SPEC §8: keys compare as strings; 1 and "1" are the same key (True stays 'true')."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


# The key a record is found by (SPEC §8), as a rows table stores it in TableRecord.key.
key_text = _key


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396 JSON Merge Patch, returning a new value (the inputs are not mutated)."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_patch(result.get(key), value)
    return result


def _entry_pair(element: Any, index: int, verb: str) -> tuple[str, Any]:
    if not isinstance(element, dict) or "key" not in element or "content" not in element:
        raise ToolError(
            ErrorCode.INVALID_ARGUMENTS,
            f'Invalid arguments: elements[{index}] must be {{"key": ..., "content": ...}} to {verb} an entry of '
            "an object mount.",
            {"path": ["elements", index]},
        )
    key = element["key"]
    if not isinstance(key, str | int | float) or isinstance(key, bool):
        raise ToolError(ErrorCode.INVALID_ARGUMENTS, f"Invalid arguments: elements[{index}].key must be a string.")
    return _key(key), element["content"]


def _record_key(element: Any, index: int, key_field: str, verb: str) -> str:
    if not isinstance(element, dict):
        raise ToolError(
            ErrorCode.INVALID_ARGUMENTS,
            f"Invalid arguments: elements[{index}] must be an object holding its key {key_field!r} to {verb} a "
            f"record of an array mount (got a {json_type(element)}).",
            {"path": ["elements", index]},
        )
    if element.get(key_field) is None:
        raise ToolError(
            ErrorCode.INVALID_ARGUMENTS,
            f"Invalid arguments: elements[{index}] has no key field {key_field!r}.",
            {"path": ["elements", index, key_field]},
        )
    return _key(element[key_field])


#
# Reads
#


def get_data_schema(data: Any, mount: Mount, arguments: dict) -> Any:
    return describe(mount.value(data))


def get_all_data(data: Any, mount: Mount, arguments: dict) -> Any:
    return mount.value(data)


def query_data(data: Any, mount: Mount, arguments: dict) -> Any:
    return run_query(arguments["query"], mount.value(data))


def preview(data: Any, mount: Mount, arguments: dict, preview_keys: list[str] | None = None) -> Any:
    if not preview_keys:
        return mount.value(data)  # SPEC §3.2: exactly what get_all_data returns
    collection = mount.collection(data)
    offset = arguments.get("offset", 0)
    limit = arguments.get("limit")
    charge(len(collection) if isinstance(collection, dict) else min(len(collection), limit or len(collection)))
    if isinstance(collection, list):
        window = collection[offset : offset + limit if limit else None]
        items = [
            {key: item[key] for key in preview_keys if key in item} if isinstance(item, dict) else item
            for item in window
        ]
    else:
        entries = list(collection.items())[offset : offset + limit if limit else None]
        items = [
            {
                "key": key,
                "content": {k: value[k] for k in preview_keys if k in value} if isinstance(value, dict) else value,
            }
            for key, value in entries
        ]
    return {"items": items, "total_count": len(collection)}


def select(data: Any, mount: Mount, arguments: dict) -> Any:
    collection = mount.collection(data)
    charge(len(collection) + len(arguments["keys"]))  # the call's budget: one pass over both
    wanted = {_key(key): key for key in arguments["keys"]}
    found: set[str] = set()
    if isinstance(collection, list):
        field = arguments.get("field") or mount.key_field
        items = []
        for item in collection:
            if isinstance(item, dict) and field in item:
                key = _key(item[field])
                if key in wanted:
                    items.append(item)
                    found.add(key)
    else:
        items = []
        for key in wanted:
            if key in collection:
                items.append({"key": key, "content": collection[key]})
                found.add(key)
    return {"items": items, "not_found": [original for key, original in wanted.items() if key not in found]}


#
# Writes: each returns change(data, derived) -> (new_data, count, patch, inverse, carried), which
# services.table_write applies under the table's lock. The patch (RFC 6902) is what the table's change log keeps;
# the new document is json_patch.apply(data, patch), so the log always replays to the document. `derived` holds
# values computed from this version of the document (the mount's KeyIndex); `carried` those true of the next.
#

_ABSENT = object()
# A KeyIndex is rebuilt once this many deletions are folded into it.
MAX_INDEX_REMOVALS = 4096


class KeyIndex:
    """Where each key's first record is in an array mount, kept across writes without scanning the records again.

    Positions are counted in the array as it was when the index was built, the records appended since counted on
    from there; `removed` (sorted) holds the built-time positions of the records deleted since, so a position now
    is the built one minus the removals before it. The keys written since the build are a small overlay (`added`,
    `gone`) over the built dict, folded into a new one every FOLD_AFTER keys: a write copies the overlay, not the
    index of 100,000 keys. An index is never changed: each write makes the next version's.
    """

    __slots__ = ("added", "base", "duplicates", "gone", "removed")

    FOLD_AFTER = 2048

    def __init__(
        self,
        base: dict[str, int],
        *,
        added: dict[str, int] | None = None,
        gone: frozenset[str] = frozenset(),
        removed: list[int] | None = None,
        duplicates: bool = False,
    ) -> None:
        self.base = base
        self.added = added or {}
        self.gone = gone
        self.removed = removed or []
        self.duplicates = duplicates  # a key held by more than one record (data stored before keys were checked)

    @classmethod
    def build(cls, container: list, key_field: str) -> "KeyIndex":
        positions: dict[str, int] = {}
        duplicates = False
        for position, item in enumerate(container):
            if type(item) is not dict:
                continue
            value = item.get(key_field, _ABSENT)
            if value is _ABSENT:
                continue
            kind = type(value)
            key = value if kind is str else str(value) if kind is int else _key(value)
            if key in positions:
                duplicates = True
            else:
                positions[key] = position
        return cls(positions, duplicates=duplicates)

    def _built(self, key: str) -> int | None:
        if key in self.added:
            return self.added[key]
        if key in self.gone:
            return None
        return self.base.get(key)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._built(key) is not None

    def position(self, key: str) -> int | None:
        built = self._built(key)
        if built is None:
            return None
        return built - bisect.bisect_left(self.removed, built) if self.removed else built

    def appended(self, keys: list[str], length: int) -> "KeyIndex":
        """The index after `keys` were appended to the array of `length` records."""
        offset = length + len(self.removed)
        added = {**self.added, **{key: offset + number for number, key in enumerate(keys)}}
        gone = self.gone.difference(keys) if self.gone else self.gone
        return KeyIndex(self.base, added=added, gone=gone, removed=self.removed, duplicates=self.duplicates)._folded()

    def without(self, keys: list[str]) -> "KeyIndex | None":
        """The index after the records of `keys` were deleted (None: rebuild it at the next write)."""
        if len(self.removed) + len(keys) > MAX_INDEX_REMOVALS:
            return None
        built = [self._built(key) for key in keys]
        removed = sorted([*self.removed, *(position for position in built if position is not None)])
        added = {key: position for key, position in self.added.items() if key not in keys}
        gone = self.gone.union(keys)
        return KeyIndex(self.base, added=added, gone=gone, removed=removed, duplicates=self.duplicates)._folded()

    def _folded(self) -> "KeyIndex":
        if len(self.added) + len(self.gone) <= self.FOLD_AFTER:
            return self
        base = dict(self.base)
        for key in self.gone:
            base.pop(key, None)
        base.update(self.added)
        return KeyIndex(base, removed=self.removed, duplicates=self.duplicates)


def _key_index(derived: dict, mount: Mount, container: list) -> tuple[tuple, KeyIndex]:
    """The mount's KeyIndex for this version: from `derived` (kept by an earlier write or read), else built."""
    name = ("key-index", mount.json_path, mount.key_field)
    index = derived.get(name)
    if not isinstance(index, KeyIndex):
        index = derived[name] = KeyIndex.build(container, mount.key_field)
    return name, index


def _located(index: KeyIndex, container: list, key: str, key_field: str) -> int | None:
    """The position of the record of `key`, checked against the record itself (a stale index is never trusted)."""
    position = index.position(key)
    if position is None:
        return None
    record = container[position] if position < len(container) else None
    if not isinstance(record, dict) or key_field not in record or _key(record[key_field]) != key:
        raise RuntimeError(f"The key index of the mount is stale at {key!r}.")
    return position


def _position(index: KeyIndex, container: list, key: str, key_field: str) -> int:
    """The position of a key known to be in the index."""
    position = _located(index, container, key, key_field)
    if position is None:
        raise RuntimeError(f"The key index of the mount lost {key!r}.")
    return position


def _container_for_write(data: Any, mount: Mount, *, may_create: bool) -> list | dict:
    if may_create and mount.tokens and not pointer.exists(data, mount.tokens):
        # SPEC §3.1: create may add a missing last segment as an empty array.
        parent_tokens = mount.tokens[:-1]
        parent = pointer.resolve(data, parent_tokens, mount.json_path)  # the error names the tool's mount
        if not isinstance(parent, dict):
            raise ToolError(
                ErrorCode.MOUNT_NOT_FOUND,
                f"The mount {mount.label()!r} does not exist and its parent is not an object, so it cannot be created.",
            )
        return []
    return mount.collection(data)


def _at(mount: Mount, *tokens: Any) -> str:
    return json_patch.pointer((*mount.tokens, *tokens))


def _written(data: Any, count: int, patch: list, inverse: list, carried: dict) -> tuple[Any, int, list, list, dict]:
    return json_patch.apply(data, patch), count, patch, inverse, carried


def _check_new_keys(new_keys: list[str], existing: Any, mount: Mount) -> None:
    seen: set[str] = set()
    for index, key in enumerate(new_keys):
        if key in existing:
            raise ToolError(
                ErrorCode.KEY_EXISTS,
                f"elements[{index}]: the key {key!r} already exists in {mount.label()!r}; nothing was created. "
                "Use an update tool to change it.",
                {"key": key, "index": index},
            )
        if key in seen:
            raise ToolError(
                ErrorCode.KEY_EXISTS,
                f"elements[{index}]: the key {key!r} appears twice in this call; nothing was created.",
                {"key": key, "index": index},
            )
        seen.add(key)


def create(mount: Mount, arguments: dict):
    elements = arguments["elements"]

    def change(data: Any, derived: dict) -> tuple[Any, int, list, list, dict]:
        missing = bool(mount.tokens) and not pointer.exists(data, mount.tokens)
        container = _container_for_write(data, mount, may_create=True)
        if isinstance(container, list):
            new_keys = [_record_key(element, i, mount.key_field, "create") for i, element in enumerate(elements)]
            if missing:
                _check_new_keys(new_keys, (), mount)
                patch = [{"op": "add", "path": _at(mount), "value": list(elements)}]
                return _written(data, len(elements), patch, [{"op": "remove", "path": _at(mount)}], {})
            name, index = _key_index(derived, mount, container)
            _check_new_keys(new_keys, index, mount)
            patch = [{"op": "add", "path": _at(mount, "-"), "value": element} for element in elements]
            length = len(container)
            inverse = [{"op": "remove", "path": _at(mount, length + i)} for i in reversed(range(len(elements)))]
            return _written(data, len(elements), patch, inverse, {name: index.appended(new_keys, length)})
        pairs = [_entry_pair(element, i, "create") for i, element in enumerate(elements)]
        _check_new_keys([key for key, _ in pairs], container, mount)
        patch = [{"op": "add", "path": _at(mount, key), "value": content} for key, content in pairs]
        inverse = [{"op": "remove", "path": _at(mount, key)} for key, _ in reversed(pairs)]
        return _written(data, len(elements), patch, inverse, {})

    return change


def update(mount: Mount, arguments: dict):
    elements = arguments["elements"]

    def change(data: Any, derived: dict) -> tuple[Any, int, list, list, dict]:
        container = mount.collection(data)
        patch: list[dict] = []
        inverses: list[list[dict]] = []  # each element's inverse, undone last element first
        carried: dict = {}

        def record(path: tuple, before: Any, merged: Any) -> None:
            # Only what changed (the fields, not the record): history stores the change, not the record twice.
            forward, backward = json_patch.diff(before, merged, keys=(mount.key_field,), at=path)
            patch.extend(forward)
            inverses.append(backward)

        if isinstance(container, list):
            name, index = _key_index(derived, mount, container)
            changed: dict[int, Any] = {}
            for number, element in enumerate(elements):
                key = _record_key(element, number, mount.key_field, "update")
                position = _located(index, container, key, mount.key_field)
                if position is None:
                    raise _missing(key, number, mount, "updated")
                before = changed.get(position, container[position])
                # The key only identifies the record: "1" finds id 1 (SPEC §8) but must not rewrite it as "1".
                merged = _merge_patch(
                    before, {field: value for field, value in element.items() if field != mount.key_field}
                )
                changed[position] = merged
                record((*mount.tokens, position), before, merged)
            carried[name] = index  # keys and positions are unchanged
        else:
            entries: dict[str, Any] = {}
            for number, element in enumerate(elements):
                key, content = _entry_pair(element, number, "update")
                if key not in container:
                    raise _missing(key, number, mount, "updated")
                before = entries.get(key, container[key])
                entries[key] = merged = _merge_patch(before, content)
                record((*mount.tokens, key), before, merged)
        inverse = [operation for backward in reversed(inverses) for operation in backward]
        return _written(data, len(elements), patch, inverse, carried)

    return change


def delete(mount: Mount, arguments: dict):
    keys = [_key(key) for key in arguments["keys"]]

    def change(data: Any, derived: dict) -> tuple[Any, int, list, list, dict]:
        container = mount.collection(data)
        wanted = list(dict.fromkeys(keys))
        carried: dict = {}
        if isinstance(container, dict):
            for number, key in enumerate(keys):
                if key not in container:
                    raise _missing(key, number, mount, "deleted", path="keys")
            patch = [{"op": "remove", "path": _at(mount, key)} for key in wanted]
            inverse = [{"op": "add", "path": _at(mount, key), "value": container[key]} for key in reversed(wanted)]
            return _written(data, len(wanted), patch, inverse, carried)
        name, index = _key_index(derived, mount, container)
        for number, key in enumerate(keys):
            if key not in index:
                raise _missing(key, number, mount, "deleted", path="keys")
        if index.duplicates:  # every record holding one of the keys goes, as it always did
            targets = set(wanted)
            positions = [
                position
                for position, item in enumerate(container)
                if isinstance(item, dict) and mount.key_field in item and _key(item[mount.key_field]) in targets
            ]
        else:
            positions = sorted(_position(index, container, key, mount.key_field) for key in wanted)
            following = index.without(wanted)
            if following is not None:
                carried[name] = following
        patch = [{"op": "remove", "path": _at(mount, position)} for position in reversed(positions)]
        inverse = [{"op": "add", "path": _at(mount, position), "value": container[position]} for position in positions]
        return _written(data, len(positions), patch, inverse, carried)

    return change


def _missing(key: str, index: int, mount: Mount, verb: str, path: str = "elements") -> ToolError:
    return ToolError(
        ErrorCode.KEY_NOT_FOUND,
        f"{path}[{index}]: no element with key {key!r} in {mount.label()!r}; nothing was {verb}.",
        {"key": key, "index": index},
    )


# What a write over a rows table (tools_app.execution.records) checks and answers exactly as the writes above do.
record_key = _record_key
entry_pair = _entry_pair
merge_patch = _merge_patch
check_new_keys = _check_new_keys
missing = _missing
