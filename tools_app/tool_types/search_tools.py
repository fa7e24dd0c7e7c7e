"""search_tools: ranked tools of the scope for a query (regex, bm25, embedding or hybrid)."""

from typing import Any

from tools_app.kernel.limits import SEARCH_QUERY_MAX_CHARS
from tools_app.tool_types.base import READ_ONLY, REGISTRY, ToolTypeSpec
from tools_app.tool_types.registry_family import REGISTRY_HELP, markdown_field


def example(tool: Any, mount: Any) -> dict[str, Any]:
    return {"query": "orders by status", "search_method": "bm25", "limit": 5}


SPEC = ToolTypeSpec(
    value="search_tools",
    label="Registry: search tools",
    kind=REGISTRY,
    input_schema={
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "minLength": 1,
                "maxLength": SEARCH_QUERY_MAX_CHARS,
                "description": "What the tool should do (a whole request may be pasted), or a pattern.",
            },
            "search_method": {
                "type": "string",
                # No "enum": SPEC §5 answers an unknown method with INVALID_SEARCH_METHOD, not a schema error.
                "default": "bm25",
                "description": "One of: regex, bm25 (keywords), embedding (meaning), hybrid (bm25 + embedding).",
            },
            "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 5},
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    annotations=READ_ONLY,
    help=REGISTRY_HELP,
    example=example,
    returns="Ranked tools: `tool_name`, `description`, `score` (0–1), `match_reason`.",
    narrowing_hint="pass a smaller `limit` (the default is 5)",
    markdown_of=markdown_field,
)
