"""What the data types (reads and writes on a table mount) share: help topics, execution and examples."""

from typing import Any

KEY = {"type": ["string", "integer", "number"], "description": "A key; numbers and strings compare as strings."}

JSON_PATH_HELP = (
    "json_path is the mount point inside the table, as a JSON Pointer. Leave json_path empty for the whole "
    'document; "/orders" is the value under "orders", "/shop/items/0" the first item of an array.'
)
KEY_FIELD_HELP = (
    'key_field (metadata, default "id") names the field that identifies a record of an array mount, '
    'e.g. {"key_field": "sku"} for records like {"sku": "KB-01", ...}. Entries of an object mount are '
    "identified by their key instead."
)
PREVIEW_KEYS_HELP = (
    'preview_keys (metadata) lists the fields a preview keeps, e.g. {"preview_keys": ["id", "status"]}: '
    "each element is reduced to them and total_count is added. Without it, preview returns what "
    "get_all_data returns."
)

# Safe writes: arguments every create, update and delete tool takes, whatever its own schema says
# (tool_types.execute takes them out before the arguments are checked against the tool's input schema).
# Optional, and nullable: a strict function-calling host (OpenAI's strict mode, the Agents SDK's strict conversion)
# makes every property required, and sends null for one it has no value for. Null means not given.
SAFE_WRITE_PROPERTIES: dict[str, dict[str, Any]] = {
    "expected_version": {
        "type": ["integer", "null"],
        "minimum": 1,
        "description": "Write only if the table is at this version; otherwise VERSION_CONFLICT and nothing is written. "
        "Null: any version.",
    },
    "dry_run": {
        "type": ["boolean", "null"],
        "description": 'Check the write and return {"dry_run": true, "version", "patch"} without writing anything.',
    },
    "idempotency_key": {
        "type": ["string", "null"],
        "minLength": 1,
        "maxLength": 200,
        "description": "A repeat with the same key on this table within 24 h returns the first result and writes "
        "nothing; the same key with other arguments is IDEMPOTENCY_KEY_REUSED.",
    },
}
SAFE_WRITE_HELP = (
    "Safe writes: expected_version (the write fails with VERSION_CONFLICT, writing nothing, when the table is at "
    'another version), dry_run: true (returns {"dry_run": true, "version": <would be>, "patch": [...]} and writes '
    "nothing) and idempotency_key (a retry with the same key within 24 h returns the first result and writes "
    "nothing; the same key with other arguments fails with IDEMPOTENCY_KEY_REUSED)."
)

# How many keys a select/delete example names, and how many scalar fields a record example keeps.
EXAMPLE_KEYS = 2
EXAMPLE_FIELDS = 3


#
# Try-it examples from the data at the mount
#


class MountSample:
    """What an example needs from the value at the mount: keys in sorted order and the first element.

    Keys and fields are sorted: PostgreSQL's jsonb does not keep an object's key order, and the example
    must be the same on every backend.
    """

    def __init__(self, mount: Any, key_field: str):
        self.key_field = key_field
        self.is_object = isinstance(mount, dict)
        if self.is_object:
            self.all_keys = sorted(mount)
            self.first = mount[self.all_keys[0]] if self.all_keys else {}
        else:
            records = [item for item in mount if isinstance(item, dict)] if isinstance(mount, list) else []
            self.all_keys = [record[key_field] for record in records if key_field in record]
            self.first = records[0] if records else {}
        self.keys = self.all_keys[:EXAMPLE_KEYS]
        self.fields = scalar_fields(self.first, skip=key_field)


def scalar_fields(value: Any, *, skip: str) -> dict[str, Any]:
    """Up to EXAMPLE_FIELDS fields (by name) of an object whose values are strings, numbers or booleans."""
    if not isinstance(value, dict):
        return {}
    names = sorted(k for k, v in value.items() if k != skip and isinstance(v, str | int | float | bool))
    return {name: value[name] for name in names[:EXAMPLE_FIELDS]}


def new_key(existing: list[Any]) -> Any:
    """A key that is not taken: the next integer after integer keys, otherwise "new-1", "new-2", ..."""
    if existing and all(isinstance(key, int) and not isinstance(key, bool) for key in existing):
        return max(existing) + 1
    taken = {str(key) for key in existing}
    n = 1
    while f"new-{n}" in taken:
        n += 1
    return f"new-{n}"


def no_arguments_example(tool: Any, mount: Any) -> dict[str, Any]:
    return {}


def keys_example(tool: Any, mount: Any) -> dict[str, Any]:
    return {"keys": MountSample(mount, tool.key_field).keys or [1]}
