"""Choices shared by the models, the data-access layer and the registry."""

from django.db import models


class ToolType(models.TextChoices):
    GET_DATA_SCHEMA = "get_data_schema", "Get data schema"
    GET_ALL_DATA = "get_all_data", "Get all data"
    QUERY_DATA = "query_data", "Query data (JMESPath)"
    PREVIEW = "preview", "Preview"
    SELECT = "select", "Select by key"
    CREATE = "create", "Create elements"
    UPDATE = "update", "Update elements"
    DELETE = "delete", "Delete elements"
    SEARCH_TOOLS = "search_tools", "Registry: search tools"
    GET_TOOL_DEFINITION = "get_tool_definition", "Registry: get tool definition"
    LIST_TOOLS_BY_CATEGORY = "list_tools_by_category", "Registry: list tools by category"
    GET_TOOL_USAGE_GUIDE = "get_tool_usage_guide", "Registry: get tool usage guide"
    REGISTER_TOOL = "register_tool", "Registry: register tool"
    EXTERNAL = "external", "External (served elsewhere)"


READ_TYPES = frozenset(
    {ToolType.GET_DATA_SCHEMA, ToolType.GET_ALL_DATA, ToolType.QUERY_DATA, ToolType.PREVIEW, ToolType.SELECT}
)
WRITE_TYPES = frozenset({ToolType.CREATE, ToolType.UPDATE, ToolType.DELETE})
DATA_TYPES = READ_TYPES | WRITE_TYPES
REGISTRY_TYPES = frozenset(
    {
        ToolType.SEARCH_TOOLS,
        ToolType.GET_TOOL_DEFINITION,
        ToolType.LIST_TOOLS_BY_CATEGORY,
        ToolType.GET_TOOL_USAGE_GUIDE,
        ToolType.REGISTER_TOOL,
    }
)
# Registry tools that only read (register_tool writes).
READ_ONLY_REGISTRY_TYPES = REGISTRY_TYPES - {ToolType.REGISTER_TOOL}


def default_category(tool_type: str) -> str:
    """SPEC §2.2: the category a tool gets when its metadata names none."""
    if tool_type in READ_TYPES:
        return "read"
    if tool_type in WRITE_TYPES:
        return "write"
    if tool_type in REGISTRY_TYPES:
        return "registry"
    return "external"
