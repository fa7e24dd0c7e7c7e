"""The shape of a tool type (SPEC §3.2): every face one type shows to the rest of toolhub.

A type module builds one ToolTypeSpec; tools_app.tool_types registers it. A spec declares; it runs nothing
and imports no model: what a call of the type does is its executor (tools_app.execution.executors).
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

READ = "read"
WRITE = "write"
REGISTRY = "registry"
EXTERNAL = "external"
KINDS = (READ, WRITE, REGISTRY, EXTERNAL)
DATA_KINDS = (READ, WRITE)

# tools/list annotations (SPEC §4.3).
READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}
DESTRUCTIVE = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True, "openWorldHint": False}
# Types that only add: calling them twice adds twice (or fails on the existing key).
ADDITIVE = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False, "openWorldHint": False}

NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}

# A problem Tool.clean reports: (field, message, code, params).
Problem = tuple[str, str, str, dict[str, Any]]
ExampleBuilder = Callable[[Any, Any], dict[str, Any]]  # (tool, mount value or UNKNOWN) -> arguments


def no_markdown(value: dict[str, Any]) -> str | None:
    return None


@dataclass(frozen=True)
class ToolTypeSpec:
    """One tool type: its value and label, kind, schema, rules, execution and documentation."""

    value: str
    label: str
    kind: str  # READ, WRITE, REGISTRY or EXTERNAL
    input_schema: dict[str, Any]  # the default input schema (SPEC §3.2); never mutate it
    annotations: dict[str, bool]  # readOnlyHint, destructiveHint, idempotentHint, openWorldHint
    help: dict[str, Any]  # admin help: summary, example (JSON text), topics
    example: ExampleBuilder  # try-it arguments for a tool of this type
    returns: str  # what a call returns, for the usage guide
    narrowing_hint: str | None = None  # how to ask for less when the result is too large
    changes_data: bool = False  # its calls change state: never refused as too large, never retried
    # Its result can be a list: over the result budget it is paged, and it accepts `cursor` (docs/paging.md).
    pageable: bool = False
    requires_description: bool = True
    markdown_of: Callable[[dict[str, Any]], str | None] = field(default=no_markdown)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"{self.value}: unknown kind {self.kind!r}")

    @property
    def default_category(self) -> str:
        """SPEC §2.2: the category a tool gets when its metadata names none."""
        return self.kind

    @property
    def is_data(self) -> bool:
        return self.kind in DATA_KINDS

    @property
    def needs_table(self) -> bool:
        return self.is_data

    @property
    def read_only(self) -> bool:
        return self.annotations["readOnlyHint"]

    @property
    def required_arguments(self) -> list[str]:
        """Arguments a custom schema for this type must still accept."""
        return list(self.input_schema.get("required", []))

    def check(self, tool: Any) -> list[Problem]:
        """This type's rules for a tool (run by Tool.clean): its table, JSON path and description."""
        return table_problems(tool, needs_table=self.needs_table) + description_problems(
            tool, required=self.requires_description
        )

    def argument_problems(self, tool: Any) -> list[Problem]:
        """The required arguments missing from a tool's (valid) input schema."""
        properties = tool.input_schema.get("properties") or {}
        missing = [name for name in self.required_arguments if name not in properties]
        if not missing:
            return []
        message = "A %(type)s tool needs the argument(s) %(names)s in its schema's properties."
        return [("input_schema", message, "missing_arguments", {"type": tool.type, "names": ", ".join(missing)})]


def table_problems(tool: Any, *, needs_table: bool) -> list[Problem]:
    problems: list[Problem] = []
    params = {"type": tool.type}
    if needs_table:
        if tool.table_id is None:
            problems.append(("table", "A %(type)s tool needs a table.", "required", params))
        # Whose table it is (SPEC §2: a tool only mounts a table of its own owner) is a row rule: Tool.clean.
    elif tool.type:
        if tool.table_id is not None:
            problems.append(("table", "A %(type)s tool has no table.", "invalid", params))
        if tool.json_path:
            problems.append(("json_path", "A %(type)s tool has no JSON path.", "invalid", params))
    return problems


def description_problems(tool: Any, *, required: bool) -> list[Problem]:
    if required and not (tool.description or "").strip():
        return [("description", "A description is required: it tells the model what the tool does.", "required", {})]
    return []
