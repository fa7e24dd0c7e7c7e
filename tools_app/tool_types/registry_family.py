"""What the registry types share: they work over a scope (an MCP instance, or a user), have no table,
and the ones that answer in Markdown carry it in their result's "markdown"."""

from typing import Any

REGISTRY_HELP = {
    "summary": "A registry tool: works over the tools of the instance it is bound to (or, here in the admin, "
    "over your own tools). It has no table.",
    "example": "",
    "topics": [],
}


def markdown_field(value: dict[str, Any]) -> str | None:
    """The result's Markdown (SPEC §5), or None to send the JSON as text."""
    markdown = value.get("markdown")
    return markdown if isinstance(markdown, str) else None
