"""query_data: a JMESPath expression evaluated over the value at the mount."""

from typing import Any

from tools_app.tool_types.base import READ, READ_ONLY, ToolTypeSpec
from tools_app.tool_types.data import JSON_PATH_HELP, MountSample


def example(tool: Any, mount: Any) -> dict[str, Any]:
    sample = MountSample(mount, tool.key_field)
    if sample.is_object:
        return {"query": "keys(@)"}
    return {"query": f"[].{tool.key_field}" if sample.keys else "length(@)"}


SPEC = ToolTypeSpec(
    value="query_data",
    label="Query data (JMESPath)",
    kind=READ,
    input_schema={
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "minLength": 1,
                "description": "A JMESPath expression evaluated over the data, e.g. \"[?status=='paid'].id\".",
            }
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    annotations=READ_ONLY,
    help={
        "summary": "Evaluates a JMESPath expression over the value at the mount.",
        "example": '{"query": "[?status==\'paid\'].{id: id, total: total}"}',
        "topics": [JSON_PATH_HELP],
    },
    example=example,
    returns="The value of the JMESPath expression over the data at the mount.",
    narrowing_hint="filter or project in the JMESPath expression, e.g. `[?status=='paid'].id` or `[0:20]`",
    pageable=True,
)
