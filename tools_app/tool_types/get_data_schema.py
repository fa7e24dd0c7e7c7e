"""get_data_schema: the shape of the value at the mount, without its values."""

from tools_app.tool_types.base import NO_ARGUMENTS, READ, READ_ONLY, ToolTypeSpec
from tools_app.tool_types.data import JSON_PATH_HELP, no_arguments_example

SPEC = ToolTypeSpec(
    value="get_data_schema",
    label="Get data schema",
    kind=READ,
    input_schema=NO_ARGUMENTS,
    annotations=READ_ONLY,
    help={
        "summary": "Describes the shape of the value at the mount (root type, fields and their types, item "
        "count, one item template) without its values, so a model can write correct queries.",
        "example": "{}",
        "topics": [JSON_PATH_HELP],
    },
    example=no_arguments_example,
    returns="The shape of the data at the mount: `root_type`, keys and their types, item count, one item template.",
    narrowing_hint="use a tool mounted on a smaller part of the document",
)
