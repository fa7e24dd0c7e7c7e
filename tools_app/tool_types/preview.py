"""preview: a reduced view of the elements at the mount (metadata.preview_keys), paged."""

from typing import Any

from tools_app.tool_types.base import READ, READ_ONLY, ToolTypeSpec
from tools_app.tool_types.data import JSON_PATH_HELP, PREVIEW_KEYS_HELP


def example(tool: Any, mount: Any) -> dict[str, Any]:
    return {"limit": 5, "offset": 0}


SPEC = ToolTypeSpec(
    value="preview",
    label="Preview",
    kind=READ,
    input_schema={
        "type": "object",
        "properties": {
            "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "How many elements."},
            "offset": {"type": "integer", "minimum": 0, "description": "How many elements to skip."},
        },
        "additionalProperties": False,
    },
    annotations=READ_ONLY,
    help={
        "summary": "A reduced view of the elements at the mount, with optional limit and offset.",
        "example": '{"limit": 5, "offset": 0}',
        "topics": [PREVIEW_KEYS_HELP, JSON_PATH_HELP],
    },
    example=example,
    returns='`{"items": [...], "total_count": N}` with the preview keys, or the whole value without them.',
    narrowing_hint="pass a smaller `limit` (and page with `offset`)",
    pageable=True,
)
