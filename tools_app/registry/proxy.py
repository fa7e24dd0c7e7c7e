"""The call proxy (`call_tool`): in search mode an instance lists only its registry tools, and many clients
only call a tool they listed, so a found tool is run through `call_tool` by name (mcp_app.handlers).

What the proxy's texts tell a model names the instance's own registry tools under their effective names
(`finders`): a model follows the words, and a name that is not bound is a call that fails."""

from collections.abc import Iterable
from typing import Any

from tools_app.choices import ToolType
from tools_app.models import Discovery

PROXY_NAME = "call_tool"


def finders(docs: Iterable[Any]) -> tuple[str | None, str | None]:
    """The effective names of the scope's search tool and definition tool (the first by name of each type),
    None for a type no binding has. `docs` are the scope's index docs (type, name)."""
    docs = list(docs)
    search = sorted(doc.name for doc in docs if doc.type == ToolType.SEARCH_TOOLS)
    definition = sorted(doc.name for doc in docs if doc.type == ToolType.GET_TOOL_DEFINITION)
    return (search[0] if search else None), (definition[0] if definition else None)


def proxy_hint(index: Any) -> str:
    """The line of search results and the guide that says how to run a found tool, naming the scope's own
    definition tool (or none)."""
    _search, definition = finders(index.docs)
    where = f" (`{definition}` gives its input schema)" if definition else " (its input schema is in this guide)"
    return f'Run a tool found here with `{PROXY_NAME}`: {{"tool_name": "<name>", "arguments": {{...}}}}{where}.'


def through_proxy(scope: Any) -> bool:
    """Whether the scope is an MCP instance in search mode, whose clients run tools through call_tool."""
    instance = getattr(scope, "instance", None)
    return instance is not None and instance.discovery == Discovery.SEARCH
