"""update: merges patches (JSON Merge Patch) into existing elements, refused whole if a key is missing."""

from typing import Any

from tools_app.tool_types.base import DESTRUCTIVE, WRITE, ToolTypeSpec
from tools_app.tool_types.data import (
    JSON_PATH_HELP,
    KEY_FIELD_HELP,
    SAFE_WRITE_HELP,
    SAFE_WRITE_PROPERTIES,
    MountSample,
)


def example(tool: Any, mount: Any) -> dict[str, Any]:
    """One changed field of the first element."""
    sample = MountSample(mount, tool.key_field)
    change = dict(list(sample.fields.items())[:1])
    key = sample.keys[0] if sample.keys else 1
    if sample.is_object:
        return {"elements": [{"key": key, "content": change}]}
    return {"elements": [{tool.key_field: key, **change}]}


SPEC = ToolTypeSpec(
    value="update",
    label="Update elements",
    kind=WRITE,
    input_schema={
        "type": "object",
        "properties": {
            "elements": {
                "type": "array",
                "minItems": 1,
                "items": {"type": "object"},
                "description": 'Patches (JSON Merge Patch): records holding their key, or {"key", "content"} pairs.',
            },
            **SAFE_WRITE_PROPERTIES,
        },
        "required": ["elements"],
        "additionalProperties": False,
    },
    annotations=DESTRUCTIVE,
    help={
        "summary": "Merges each patch into its element (JSON Merge Patch). Refused whole if a key is missing. "
        "Writes the table (version +1).",
        "example": '{"elements": [{"id": 3, "status": "paid"}]}',
        "topics": [
            'On an object mount each patch is a {"key", "content"} pair, e.g. '
            '{"elements": [{"key": "KB-01", "content": {"price": 99}}]}.',
            KEY_FIELD_HELP,
            JSON_PATH_HELP,
            SAFE_WRITE_HELP,
        ],
    },
    example=example,
    returns='`{"updated": N, "version": V}`.',
    changes_data=True,
)
