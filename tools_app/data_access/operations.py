"""One function per data tool type (SPEC §3.2). Reads are pure functions of JSON; writes return a
`change(data) -> (new_data, outcome)` that services.table_write applies under the table's lock.

Array mounts hold records identified by `key_field`; object mounts hold entries identified by their
key and are exchanged as {"key", "content"} pairs. Keys compare as strings (SPEC §8).
"""

from typing import Any

from ..errors import ErrorCode, ToolError
from . import pointer
from .budget import charge
from .query import run_query
from .shape import describe, json_type


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
    charge(len(collection) + len(arguments["keys"]))  # the call's budget (issue 12): one pass over both
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
# Writes: each returns change(data) -> (new_data, count)
#


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


def create(mount: Mount, arguments: dict):
    elements = arguments["elements"]

    def change(data: Any) -> tuple[Any, int]:
        container = _container_for_write(data, mount, may_create=True)
        if isinstance(container, list):
            existing = {
                _key(item[mount.key_field]) for item in container if isinstance(item, dict) and mount.key_field in item
            }
            new_keys: list[str] = [
                _record_key(element, i, mount.key_field, "create") for i, element in enumerate(elements)
            ]
            updated: list | dict = [*container, *elements]
        else:
            existing = set(container)
            pairs = [_entry_pair(element, i, "create") for i, element in enumerate(elements)]
            new_keys = [key for key, _ in pairs]
            updated = {**container, **dict(pairs)}
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
        return pointer.replace(data, mount.tokens, updated), len(elements)

    return change


def update(mount: Mount, arguments: dict):
    elements = arguments["elements"]

    def change(data: Any) -> tuple[Any, int]:
        container = mount.collection(data)
        if isinstance(container, list):
            positions: dict[str, int] = {}
            for position, item in enumerate(container):
                if isinstance(item, dict) and mount.key_field in item:
                    positions.setdefault(_key(item[mount.key_field]), position)
            updated: list | dict = list(container)
            for index, element in enumerate(elements):
                key = _record_key(element, index, mount.key_field, "update")
                if key not in positions:
                    raise _missing(key, index, mount, "updated")
                position = positions[key]
                # The key only identifies the record: "1" finds id 1 (SPEC §8) but must not rewrite it as "1".
                patch = {field: value for field, value in element.items() if field != mount.key_field}
                updated[position] = _merge_patch(updated[position], patch)
        else:
            updated = dict(container)
            for index, element in enumerate(elements):
                key, content = _entry_pair(element, index, "update")
                if key not in updated:
                    raise _missing(key, index, mount, "updated")
                updated[key] = _merge_patch(updated[key], content)
        return pointer.replace(data, mount.tokens, updated), len(elements)

    return change


def delete(mount: Mount, arguments: dict):
    keys = [_key(key) for key in arguments["keys"]]

    def change(data: Any) -> tuple[Any, int]:
        container = mount.collection(data)
        wanted = set(keys)
        if isinstance(container, list):
            present = {
                _key(item[mount.key_field]) for item in container if isinstance(item, dict) and mount.key_field in item
            }
            kept = [
                item
                for item in container
                if not (isinstance(item, dict) and mount.key_field in item and _key(item[mount.key_field]) in wanted)
            ]
            deleted = len(container) - len(kept)
            updated: list | dict = kept
        else:
            present = set(container)
            updated = {key: value for key, value in container.items() if key not in wanted}
            deleted = len(container) - len(updated)
        for index, key in enumerate(keys):
            if key not in present:
                raise _missing(key, index, mount, "deleted", path="keys")
        return pointer.replace(data, mount.tokens, updated), deleted

    return change


def _missing(key: str, index: int, mount: Mount, verb: str, path: str = "elements") -> ToolError:
    return ToolError(
        ErrorCode.KEY_NOT_FOUND,
        f"{path}[{index}]: no element with key {key!r} in {mount.label()!r}; nothing was {verb}.",
        {"key": key, "index": index},
    )


# The read operations by type, as the tool types' specs run them (tools_app.tool_types); preview takes the
# tool's preview_keys and is called directly.
READERS = {
    "get_data_schema": get_data_schema,
    "get_all_data": get_all_data,
    "query_data": query_data,
    "select": select,
}
