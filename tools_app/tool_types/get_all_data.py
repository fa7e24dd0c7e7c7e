"""get_all_data: the whole value at the mount."""

from tools_app.tool_types.base import NO_ARGUMENTS, READ, READ_ONLY, ToolTypeSpec
from tools_app.tool_types.data import JSON_PATH_HELP, no_arguments_example

SPEC = ToolTypeSpec(
    value="get_all_data",
    label="Get all data",
    kind=READ,
    input_schema=NO_ARGUMENTS,
    annotations=READ_ONLY,
    help={
        "summary": "Returns the whole value at the mount. Prefer preview or query_data on large tables.",
        "example": "{}",
        "topics": [JSON_PATH_HELP],
    },
    example=no_arguments_example,
    returns="The whole value at the mount.",
    narrowing_hint="use a query_data, preview or select tool of this table instead",
    pageable=True,
)
