"""select: the full elements whose key is in `keys`."""

from tools_app.tool_types.base import READ, READ_ONLY, ToolTypeSpec
from tools_app.tool_types.data import JSON_PATH_HELP, KEY, KEY_FIELD_HELP, keys_example

SPEC = ToolTypeSpec(
    value="select",
    label="Select by key",
    kind=READ,
    input_schema={
        "type": "object",
        "properties": {
            "keys": {"type": "array", "items": KEY, "minItems": 1, "description": "The keys to fetch."},
            "field": {"type": "string", "minLength": 1, "description": "Field compared with the keys."},
        },
        "required": ["keys"],
        "additionalProperties": False,
    },
    annotations=READ_ONLY,
    help={
        "summary": "Returns the full elements whose key is in keys (compared as strings), plus the keys not found.",
        "example": '{"keys": [1, 3]}',
        "topics": [KEY_FIELD_HELP, JSON_PATH_HELP],
    },
    example=keys_example,
    returns='`{"items": [...], "not_found": [...]}`: the elements whose key is in `keys`.',
    narrowing_hint="ask for fewer `keys` per call",
)
