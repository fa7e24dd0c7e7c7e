"""delete: removes the elements with the given keys."""

from tools_app.tool_types.base import DESTRUCTIVE, WRITE, ToolTypeSpec
from tools_app.tool_types.data import (
    JSON_PATH_HELP,
    KEY,
    KEY_FIELD_HELP,
    SAFE_WRITE_HELP,
    SAFE_WRITE_PROPERTIES,
    keys_example,
)

SPEC = ToolTypeSpec(
    value="delete",
    label="Delete elements",
    kind=WRITE,
    input_schema={
        "type": "object",
        "properties": {
            "keys": {"type": "array", "items": KEY, "minItems": 1, "description": "Keys to remove."},
            **SAFE_WRITE_PROPERTIES,
        },
        "required": ["keys"],
        "additionalProperties": False,
    },
    annotations=DESTRUCTIVE,
    help={
        "summary": "Removes the elements with those keys and reports how many. Writes the table (version +1).",
        "example": '{"keys": [5]}',
        "topics": [KEY_FIELD_HELP, JSON_PATH_HELP, SAFE_WRITE_HELP],
    },
    example=keys_example,
    returns='`{"deleted": N, "version": V}`.',
    changes_data=True,
)
