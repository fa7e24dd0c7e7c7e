"""Choices shared by the models, the data-access layer and the registry."""

from django.db import models

from tools_app.tool_types import READ, REGISTRY, TOOL_TYPES, WRITE, types_of_kind


class ToolType(models.TextChoices):
    # Kept spelled out (migrations, attribute access); a test checks it against TOOL_TYPES.
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


# The type sets, from the tool types' registry (tools_app.tool_types): one module per type.
READ_TYPES = types_of_kind(READ)
WRITE_TYPES = types_of_kind(WRITE)
DATA_TYPES = READ_TYPES | WRITE_TYPES
REGISTRY_TYPES = types_of_kind(REGISTRY)
# Registry tools that only read (register_tool writes).
READ_ONLY_REGISTRY_TYPES = frozenset(value for value in REGISTRY_TYPES if TOOL_TYPES[value].read_only)


def default_category(tool_type: str) -> str:
    """SPEC §2.2: the category a tool gets when its metadata names none."""
    spec = TOOL_TYPES.get(tool_type)
    return spec.default_category if spec is not None else "external"
