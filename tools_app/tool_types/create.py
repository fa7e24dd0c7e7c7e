"""create: adds elements to the mount, refused whole if a key exists."""

from typing import Any

from tools_app.tool_types.base import ADDITIVE, WRITE, ToolTypeSpec
from tools_app.tool_types.data import (
    JSON_PATH_HELP,
    KEY_FIELD_HELP,
    SAFE_WRITE_HELP,
    SAFE_WRITE_PROPERTIES,
    MountSample,
    new_key,
)


def example(tool: Any, mount: Any) -> dict[str, Any]:
    sample = MountSample(mount, tool.key_field)
    key = new_key(sample.all_keys)
    if sample.is_object:
        return {
            "elements": [{"key": key, "content": sample.fields if isinstance(sample.first, dict) else sample.first}]
        }
    return {"elements": [{tool.key_field: key, **sample.fields}]}


SPEC = ToolTypeSpec(
    value="create",
    label="Create elements",
    kind=WRITE,
    input_schema={
        "type": "object",
        "properties": {
            "elements": {
                "type": "array",
                "minItems": 1,
                "description": 'Elements to add: records for a list, {"key", "content"} pairs for an object.',
            },
            **SAFE_WRITE_PROPERTIES,
        },
        "required": ["elements"],
        "additionalProperties": False,
    },
    annotations=ADDITIVE,
    help={
        "summary": "Adds elements: records for an array mount, {key, content} pairs for an object mount. "
        "Refused whole if a key already exists. Writes the table (version +1).",
        "example": '{"elements": [{"id": 6, "customer": "Barbara Liskov", "status": "new"}]}',
        "topics": [
            'On an object mount each element is a {"key", "content"} pair, e.g. '
            '{"elements": [{"key": "HB-04", "content": {"name": "USB hub", "price": 25}}]}.',
            KEY_FIELD_HELP,
            JSON_PATH_HELP,
            SAFE_WRITE_HELP,
        ],
    },
    example=example,
    returns='`{"created": N, "version": V}`.',
    changes_data=True,
)
