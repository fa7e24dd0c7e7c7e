"""Every registered tool type shows every face: walks tools_app.tool_types.TOOL_TYPES."""

from types import SimpleNamespace

import pytest
from jsonschema import Draft202012Validator

from tools_app.choices import (
    DATA_TYPES,
    READ_ONLY_REGISTRY_TYPES,
    READ_TYPES,
    REGISTRY_TYPES,
    WRITE_TYPES,
    ToolType,
    default_category,
)
from tools_app.execution.executors import EXECUTORS
from tools_app.kernel.errors import ErrorCode, ToolError
from tools_app.tool_types import KINDS, TOOL_TYPES, check_arguments, check_tool, spec_for

SPECS = list(TOOL_TYPES.values())
HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
# A mount with records keyed by "id", and one of entries keyed by their key.
RECORDS = [{"id": 1, "name": "Ada", "status": "paid"}, {"id": 2, "name": "Alan", "status": "new"}]
ENTRIES = {"KB-01": {"name": "Keyboard", "price": 90}, "MS-02": {"name": "Mouse", "price": 25}}


def _tool(spec, **fields):
    """A stand-in for a Tool with the attributes the faces read."""
    values = {
        "type": spec.value,
        "name": f"t_{spec.value}",
        "description": "Does something.",
        "table_id": None,
        "owner_id": None,
        "json_path": "",
        "metadata": {},
        "key_field": "id",
        "input_schema": spec.input_schema,
    }
    return SimpleNamespace(**{**values, **fields})


def test_the_registry_is_the_tool_type_choices():
    """ToolType (migrations, attribute access) lists exactly the registered types, with their labels, in order."""
    assert list(ToolType.choices) == [(spec.value, spec.label) for spec in SPECS]
    assert spec_for("query_data") is TOOL_TYPES["query_data"]
    with pytest.raises(KeyError):
        spec_for("no_such_type")


def test_the_type_sets_and_categories_follow_the_kinds():
    """The type sets other modules import, and SPEC §2.2's default categories, come from the kinds."""
    assert {spec.kind for spec in SPECS} == set(KINDS)
    assert READ_TYPES == {"get_data_schema", "get_all_data", "query_data", "preview", "select"}
    assert WRITE_TYPES == {"create", "update", "delete"}
    assert DATA_TYPES == READ_TYPES | WRITE_TYPES
    assert REGISTRY_TYPES == {
        "search_tools",
        "get_tool_definition",
        "list_tools_by_category",
        "get_tool_usage_guide",
        "register_tool",
    }
    assert REGISTRY_TYPES - READ_ONLY_REGISTRY_TYPES == {"register_tool"}
    assert {spec.value: default_category(spec.value) for spec in SPECS} == {spec.value: spec.kind for spec in SPECS}
    assert default_category("no_such_type") == "external"


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.value)
def test_the_default_schema_is_a_json_schema_that_declares_its_required_arguments(spec):
    """SPEC §3.2: each type's default input schema is valid Draft 2020-12 and refuses a call without its arguments."""
    Draft202012Validator.check_schema(spec.input_schema)
    assert spec.input_schema["type"] == "object"
    properties = spec.input_schema.get("properties", {})
    assert set(spec.required_arguments) <= set(properties)
    # The schema refuses a call without its required arguments.
    if spec.required_arguments:
        assert not Draft202012Validator(spec.input_schema).is_valid({})


def test_the_required_arguments():
    assert {spec.value: spec.required_arguments for spec in SPECS if spec.required_arguments} == {
        "query_data": ["query"],
        "select": ["keys"],
        "create": ["elements"],
        "update": ["elements"],
        "delete": ["keys"],
        "search_tools": ["query"],
        "get_tool_definition": ["tool_name"],
        "list_tools_by_category": ["category"],
        "register_tool": ["name", "description"],
    }


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.value)
def test_the_annotations_are_the_four_hints(spec):
    """SPEC §4.3: tools/list annotations are the four booleans."""
    assert list(spec.annotations) == list(HINTS)
    assert all(isinstance(value, bool) for value in spec.annotations.values())
    assert spec.annotations["openWorldHint"] is False
    # Tools that change data are never read-only (external tools are neither: they do not run here).
    assert not (spec.read_only and spec.changes_data)
    assert spec.read_only == (spec.kind == "read" or spec.value in READ_ONLY_REGISTRY_TYPES)


def test_the_annotations_per_type():
    hints = {spec.value: tuple(spec.annotations[k] for k in HINTS[:3]) for spec in SPECS}
    assert {value: hint for value, hint in hints.items() if hint != (True, False, True)} == {
        "create": (False, False, False),
        "update": (False, True, True),
        "delete": (False, True, True),
        "register_tool": (False, False, False),
        "external": (False, False, False),
    }
    assert {spec.value for spec in SPECS if spec.changes_data} == {"create", "update", "delete", "register_tool"}


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.value)
@pytest.mark.parametrize("mount", [RECORDS, ENTRIES, None], ids=["records", "entries", "unknown"])
def test_the_admin_help_and_example_fit_the_default_schema(spec, mount):
    """The admin shows each type's help, and its try-it example is a valid call of the default schema."""
    assert set(spec.help) == {"summary", "example", "topics"}
    assert spec.help["summary"].strip()
    # when
    example = spec.example(_tool(spec), mount)
    # then
    assert isinstance(example, dict)
    assert Draft202012Validator(spec.input_schema).is_valid(example), example


def test_examples_use_the_data_at_the_mount():
    """Try-it examples name keys and fields that are at the mount, in sorted order."""

    def example(value, mount):
        return spec_for(value).example(_tool(spec_for(value)), mount)

    assert example("query_data", RECORDS) == {"query": "[].id"}
    assert example("query_data", ENTRIES) == {"query": "keys(@)"}
    assert example("select", RECORDS) == {"keys": [1, 2]}
    assert example("delete", ENTRIES) == {"keys": ["KB-01", "MS-02"]}
    assert example("create", RECORDS) == {"elements": [{"id": 3, "name": "Ada", "status": "paid"}]}
    assert example("update", ENTRIES) == {"elements": [{"key": "KB-01", "content": {"name": "Keyboard"}}]}
    assert example("get_tool_definition", None) == {"tool_name": "t_get_tool_definition"}


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.value)
def test_the_guide_text_and_narrowing_hint(spec):
    """The usage guide says what each type returns; RESULT_TOO_LARGE says how to narrow each reading type."""
    assert spec.returns.strip()
    # Every type whose results may be refused as too large says how to ask for less.
    if not spec.changes_data and spec.kind != "external":
        assert spec.narrowing_hint
    else:
        assert spec.narrowing_hint is None


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.value)
def test_markdown_only_for_registry_results(spec):
    """SPEC §5: registry results carry Markdown for the model (the guide its content and warnings); others none."""
    carried = spec.markdown_of({"markdown": "# Tools", "content": "# Guide", "warnings": ["Unknown tool 'x'."]})
    expected = {
        "search_tools": "# Tools",
        "get_tool_definition": "# Tools",
        "list_tools_by_category": "# Tools",
        "register_tool": "# Tools",
        "get_tool_usage_guide": "# Guide\n\n## Warnings\n\n- Unknown tool 'x'.\n",
    }
    assert carried == expected.get(spec.value)
    assert spec.markdown_of({}) is None


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.value)
def test_the_table_rule(spec):
    """SPEC §2.2: data tools need a table; the others have neither a table nor a JSON path."""
    # when
    with_table = check_tool(_tool(spec, table_id=7, json_path="/orders"))
    without_table = check_tool(_tool(spec))
    # then
    if spec.needs_table:
        assert with_table == []
        assert without_table == [("table", "A %(type)s tool needs a table.", "required", {"type": spec.value})]
    else:
        assert [(field, code) for field, _, code, _ in with_table] == [("table", "invalid"), ("json_path", "invalid")]
        assert without_table == []


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.value)
def test_the_description_rule_and_arguments_check(spec):
    """Every type but external needs a description; a custom schema must still declare the type's arguments."""
    problems = check_tool(_tool(spec, description=" ", table_id=7 if spec.needs_table else None))
    assert [field for field, *_ in problems] == ([] if spec.value == "external" else ["description"])
    assert check_arguments(_tool(spec)) == []
    missing = check_arguments(_tool(spec, input_schema={"type": "object", "properties": {}}))
    assert [params["names"] for *_, params in missing] == (
        [", ".join(spec.required_arguments)] if spec.required_arguments else []
    )


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.value)
def test_execute_is_the_types_own_and_refuses_what_it_cannot_run(spec):
    """Without a table (data), a scope (registry) or at all (external), the type's executor says why, touching
    no data."""
    executor = EXECUTORS[spec.value]
    expected = {
        "read": ErrorCode.MOUNT_NOT_FOUND,
        "write": ErrorCode.MOUNT_NOT_FOUND,
        "registry": ErrorCode.TOOL_NOT_CALLABLE,
        "external": ErrorCode.TOOL_NOT_CALLABLE,
    }[spec.kind]
    # when
    with pytest.raises(ToolError) as caught:
        executor(tool=_tool(spec), arguments={}, scope=None)
    # then
    assert caught.value.code == expected


def test_every_declared_type_has_exactly_one_executor_and_nothing_else_does():
    """A type is its declaration (tools_app.tool_types) plus one executor line: the two tables name the same
    types, and the choices the models store name them too."""
    assert set(EXECUTORS) == set(TOOL_TYPES)
    assert set(EXECUTORS) == set(ToolType.values)
    assert all(callable(executor) for executor in EXECUTORS.values())


def test_a_declaration_runs_nothing():
    """Declarations hold no execution face: what a call does is only the executor table's."""
    assert all(not hasattr(spec, "execute") for spec in TOOL_TYPES.values())
