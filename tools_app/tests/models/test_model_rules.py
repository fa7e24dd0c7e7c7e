"""Model rules reached through full_clean() (SPEC §2.1, §2.2, §8)."""

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tools_app.choices import DATA_TYPES, READ_TYPES, REGISTRY_TYPES, WRITE_TYPES, ToolType
from tools_app.models import Table, Tool
from tools_app.tool_schemas import default_input_schema
from tools_app.tool_types import TOOL_TYPES

pytestmark = pytest.mark.django_db


def _codes(exc: ValidationError) -> dict[str, list[str]]:
    return {field: [error.code for error in errors] for field, errors in exc.error_dict.items()}


def _messages(exc: ValidationError, field: str) -> list[str]:
    return [message for error in exc.error_dict[field] for message in error.messages]


def _tool(owner, table=None, **fields) -> Tool:
    fields.setdefault("name", "a_tool")
    fields.setdefault("type", ToolType.QUERY_DATA)
    fields.setdefault("description", "Does something useful.")
    return Tool(owner=owner, table=table, **fields)


def _table_for(tool_type, table):
    return table if tool_type in DATA_TYPES else None


#
# Input schema defaults and custom schemas
#


@pytest.mark.parametrize("tool_type", list(ToolType.values))
@pytest.mark.parametrize("empty", [{}, None])
def test_empty_input_schema_gets_the_type_default(owner, table, tool_type, empty):
    """Every type fills an empty input schema with its own default (SPEC §3.2)."""
    # given
    tool = _tool(owner, _table_for(tool_type, table), type=tool_type, input_schema=empty)
    # when
    tool.full_clean()
    # then
    assert tool.input_schema == TOOL_TYPES[tool_type].input_schema
    assert tool.input_schema["type"] == "object"


def test_default_input_schema_is_a_copy(owner, table):
    """Filling in the default never shares (and so never lets a tool mutate) the module's default."""
    # given
    tool = _tool(owner, table, input_schema={})
    tool.full_clean()
    # when
    tool.input_schema["properties"]["query"]["description"] = "changed"
    # then
    assert TOOL_TYPES[ToolType.QUERY_DATA].input_schema["properties"]["query"]["description"] != "changed"
    assert default_input_schema(ToolType.QUERY_DATA) == TOOL_TYPES[ToolType.QUERY_DATA].input_schema


@pytest.mark.parametrize(
    ("tool_type", "missing"),
    [
        (ToolType.QUERY_DATA, "query"),
        (ToolType.SELECT, "keys"),
        (ToolType.CREATE, "elements"),
        (ToolType.UPDATE, "elements"),
        (ToolType.DELETE, "keys"),
        (ToolType.SEARCH_TOOLS, "query"),
        (ToolType.GET_TOOL_DEFINITION, "tool_name"),
        (ToolType.LIST_TOOLS_BY_CATEGORY, "category"),
        (ToolType.REGISTER_TOOL, "name, description"),
    ],
)
def test_custom_schema_must_accept_the_type_arguments(owner, table, tool_type, missing):
    """A custom schema without the arguments its type needs is refused, naming them."""
    # given
    schema = {"type": "object", "properties": {"note": {"type": "string"}}}
    tool = _tool(owner, _table_for(tool_type, table), type=tool_type, input_schema=schema)
    # when
    with pytest.raises(ValidationError) as caught:
        tool.full_clean()
    # then
    assert _codes(caught.value) == {"input_schema": ["missing_arguments"]}
    assert _messages(caught.value, "input_schema") == [
        f"A {tool_type} tool needs the argument(s) {missing} in its schema's properties."
    ]


def test_custom_schema_with_the_type_arguments_is_kept(owner, table):
    """A custom schema that keeps the needed arguments (and adds its own) is stored as given."""
    # given
    schema = {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "JMESPath over orders."}, "why": {"type": "string"}},
        "required": ["query"],
    }
    tool = _tool(owner, table, input_schema=schema)
    # when
    tool.full_clean()
    # then
    assert tool.input_schema == schema


@pytest.mark.parametrize("tool_type", [ToolType.GET_ALL_DATA, ToolType.PREVIEW, ToolType.EXTERNAL])
def test_types_without_required_arguments_accept_any_object_schema(owner, table, tool_type):
    """Types that need no argument accept any object schema."""
    # given
    schema = {"type": "object", "properties": {"anything": {"type": "integer"}}}
    tool = _tool(owner, _table_for(tool_type, table), type=tool_type, input_schema=schema)
    # when
    tool.full_clean()
    # then
    assert tool.input_schema == schema


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "array"}, 'An input schema must have "type": "object".'),
        ([], "A JSON Schema must be a JSON object."),
        (
            {"type": "object", "properties": {"query": {"type": 5}}},
            "Not a valid JSON Schema (Draft 2020-12) at properties/query/type: ",
        ),
    ],
)
def test_input_schema_must_be_a_valid_object_schema(owner, table, schema, message):
    """A non-object or invalid input schema is refused on input_schema only."""
    # given
    tool = _tool(owner, table, input_schema=schema)
    # when
    with pytest.raises(ValidationError) as caught:
        tool.full_clean()
    # then
    assert _codes(caught.value) == {"input_schema": ["invalid_schema"]}
    [reported] = _messages(caught.value, "input_schema")
    assert reported.startswith(message)


def test_output_schema_must_be_valid(owner, table):
    """An output schema is optional but, when given, must be a valid JSON Schema."""
    # given
    tool = _tool(owner, table, output_schema={"type": "nope"})
    # when
    with pytest.raises(ValidationError) as caught:
        tool.full_clean()
    # then
    assert _codes(caught.value) == {"output_schema": ["invalid_schema"]}


def test_empty_output_schema_becomes_none(owner, table):
    """An empty output schema means "none" (so no outputSchema is advertised)."""
    # given
    tool = _tool(owner, table, output_schema={})
    # when
    tool.full_clean()
    # then
    assert tool.output_schema is None


#
# Table and json_path
#


@pytest.mark.parametrize("tool_type", sorted(DATA_TYPES))
def test_data_types_need_a_table(owner, tool_type):
    """Every data type without a table is refused on `table`."""
    # given
    tool = _tool(owner, None, type=tool_type)
    # when
    with pytest.raises(ValidationError) as caught:
        tool.full_clean()
    # then
    assert _codes(caught.value) == {"table": ["required"]}
    assert _messages(caught.value, "table") == [f"A {tool_type} tool needs a table."]


@pytest.mark.parametrize("tool_type", sorted(REGISTRY_TYPES | {ToolType.EXTERNAL}))
def test_non_data_types_must_not_have_a_table_or_path(owner, table, tool_type):
    """Registry and external tools have no table and no JSON path."""
    # given
    tool = _tool(owner, table, type=tool_type, json_path="/orders")
    # when
    with pytest.raises(ValidationError) as caught:
        tool.full_clean()
    # then
    assert _codes(caught.value) == {"table": ["invalid"], "json_path": ["invalid"]}
    assert _messages(caught.value, "table") == [f"A {tool_type} tool has no table."]
    assert _messages(caught.value, "json_path") == [f"A {tool_type} tool has no JSON path."]


@pytest.mark.parametrize("tool_type", sorted(REGISTRY_TYPES | {ToolType.EXTERNAL}))
def test_non_data_types_without_table_are_valid(owner, tool_type):
    """Registry and external tools without a table pass."""
    # given
    tool = _tool(owner, None, type=tool_type)
    # when / then
    tool.full_clean()


def test_tool_cannot_mount_another_owners_table(owner, other_user, make_table):
    """SPEC §2: a tool only mounts a table of its own owner."""
    # given
    foreign = make_table(other_user, name="theirs")
    tool = _tool(owner, foreign)
    # when
    with pytest.raises(ValidationError) as caught:
        tool.full_clean()
    # then
    assert _codes(caught.value) == {"table": ["invalid_choice"]}
    assert Tool.objects.count() == 0


def test_tool_cannot_mount_another_owners_table_given_by_id(owner, other_user, make_table):
    """The same rule when only the table's id is set: the owner is read from the row."""
    # given
    foreign = make_table(other_user, name="theirs")
    tool = _tool(owner, table_id=foreign.pk)
    # when
    with pytest.raises(ValidationError) as caught:
        tool.full_clean()
    # then
    assert _codes(caught.value) == {"table": ["invalid_choice"]}
    assert Tool.objects.count() == 0


def test_owner_check_of_a_given_table_reads_no_table_row(owner, table):
    """The table the caller gave (the API's serializer has read it) answers the owner check: clean() sends no
    query (full_clean's field checks still confirm the row exists)."""
    # given
    tool = _tool(owner, table)
    # when
    with CaptureQueriesContext(connection) as queries:
        tool.clean()
    # then
    assert [query["sql"] for query in queries.captured_queries] == []
    assert Tool.objects.count() == 0


def test_json_path_syntax_is_checked_on_save(owner, table):
    """SPEC §8: json_path syntax is checked when the tool is saved."""
    # given
    tool = _tool(owner, table, json_path="orders")
    # when
    with pytest.raises(ValidationError) as caught:
        tool.full_clean()
    # then
    assert _codes(caught.value) == {"json_path": ["invalid_pointer"]}


def test_json_path_that_does_not_exist_yet_is_accepted(owner, table):
    """SPEC §8: whether the mount exists is checked when the tool runs, not when it is saved."""
    # given
    tool = _tool(owner, table, json_path="/not/there/yet")
    # when / then
    tool.full_clean()


#
# Description
#


@pytest.mark.parametrize("description", ["", "   \n"])
def test_description_is_required(owner, table, description):
    """A data tool without a (non-blank) description is refused."""
    # given
    tool = _tool(owner, table, description=description)
    # when
    with pytest.raises(ValidationError) as caught:
        tool.full_clean()
    # then
    assert _codes(caught.value) == {"description": ["required"]}


def test_external_tools_may_have_no_description(owner):
    """SPEC §8: external tools may have an empty description."""
    # given
    tool = _tool(owner, None, type=ToolType.EXTERNAL, description="")
    # when / then
    tool.full_clean()


def test_description_of_1024_characters_is_accepted(owner, table):
    """1,024 characters is the limit (SPEC §2.2)."""
    # given
    tool = _tool(owner, table, description="d" * 1024)
    # when / then
    tool.full_clean()


def test_description_of_1025_characters_is_refused(owner, table):
    """The 1,025th character is refused with the count."""
    # given
    tool = _tool(owner, table, description="d" * 1025)
    # when
    with pytest.raises(ValidationError) as caught:
        tool.full_clean()
    # then
    assert _codes(caught.value) == {"description": ["max_length"]}
    assert _messages(caught.value, "description") == ["At most 1024 characters (got 1025)."]


#
# Names and metadata
#


def test_invalid_name_is_refused(owner, table):
    """The tool name pattern is a field rule."""
    # given
    tool = _tool(owner, table, name="orders query")
    # when
    with pytest.raises(ValidationError) as caught:
        tool.full_clean()
    # then
    assert _codes(caught.value) == {"name": ["invalid_name"]}


def test_metadata_is_checked(owner, table):
    """Bad metadata is reported on `metadata`."""
    # given
    tool = _tool(owner, table, metadata={"examples": ["f()"] * 6})
    # when
    with pytest.raises(ValidationError) as caught:
        tool.full_clean()
    # then
    assert _codes(caught.value) == {"metadata": ["invalid_examples"]}


@pytest.mark.parametrize(
    ("tool_type", "category"),
    [(t, "read") for t in sorted(READ_TYPES)]
    + [(t, "write") for t in sorted(WRITE_TYPES)]
    + [(t, "registry") for t in sorted(REGISTRY_TYPES)]
    + [(ToolType.EXTERNAL, "external")],
)
def test_category_defaults_by_type(owner, table, tool_type, category):
    """SPEC §2.2: read types `read`, write types `write`, registry types `registry`, external `external`."""
    # given
    tool = _tool(owner, _table_for(tool_type, table), type=tool_type, metadata={})
    # when
    tool.full_clean()
    # then
    assert tool.category == category


def test_explicit_category_wins(owner, table):
    """A category in metadata replaces the default."""
    # given
    tool = _tool(owner, table, metadata={"category": "orders"})
    # when / then
    assert tool.category == "orders"


def test_key_field_defaults_to_id(owner, table):
    """SPEC §2.2: key_field defaults to `id`."""
    # given
    plain = _tool(owner, table)
    custom = _tool(owner, table, metadata={"key_field": "sku"})
    # when / then
    assert (plain.key_field, custom.key_field) == ("id", "sku")


def test_several_errors_are_reported_together(owner):
    """full_clean() reports every failing field at once."""
    # given
    tool = _tool(owner, None, name="bad name", description="", input_schema={"type": "array"})
    # when
    with pytest.raises(ValidationError) as caught:
        tool.full_clean()
    # then
    assert _codes(caught.value) == {
        "name": ["invalid_name"],
        "table": ["required"],
        "description": ["required"],
        "input_schema": ["invalid_schema"],
    }


#
# Table
#


@pytest.mark.parametrize("data", [[], {}, [1, "a"], {"a": {"b": []}}, "text", 0, False])
def test_table_data_may_be_any_json_value(owner, data):
    """SPEC §2.1: a table's data is any JSON value."""
    # given
    table = Table(owner=owner, name="t", data=data)
    # when / then
    table.full_clean()


def test_table_data_must_not_be_null(owner):
    """A table's data is a JSON value, never null."""
    # given
    table = Table(owner=owner, name="t", data=None)
    # when
    with pytest.raises(ValidationError) as caught:
        table.full_clean()
    # then
    assert "data" in caught.value.error_dict
    assert Table.objects.count() == 0


def test_new_table_starts_at_version_1(owner, table):
    """A table starts at version 1."""
    # given / when
    stored = Table.objects.get(pk=table.pk)
    # then
    assert stored.version == 1


@pytest.mark.parametrize("data", [[{"id": 1, "x": float("nan")}], {"a": float("inf")}])
def test_table_data_must_be_finite_json(owner, data):
    """NaN and Infinity are refused on `data` (they are not JSON; PostgreSQL would fail on save)."""
    # given
    table = Table(owner=owner, name="t", data=data)
    # when
    with pytest.raises(ValidationError) as caught:
        table.full_clean()
    # then
    assert _codes(caught.value) == {"data": ["invalid_json"]}
    assert Table.objects.count() == 0


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"metadata": {"weight": float("nan")}}, "metadata"),
        ({"input_schema": {"type": "object", "properties": {"query": {"maximum": float("inf")}}}}, "input_schema"),
        ({"output_schema": {"type": "number", "maximum": float("nan")}}, "output_schema"),
    ],
)
def test_tool_json_fields_must_be_finite_json(owner, table, fields, field):
    """NaN and Infinity are refused in a tool's JSON fields too."""
    # given
    tool = _tool(owner, table, **fields)
    # when
    with pytest.raises(ValidationError) as caught:
        tool.full_clean()
    # then
    assert "invalid_json" in _codes(caught.value)[field]
    assert Tool.objects.count() == 0


#
# Name conflicts (SPEC §2.4)
#


def test_name_conflicts_name_the_other_tool_and_its_override(owner, table, make_tool, make_instance, bind):
    """Tool.name_conflicts gives, per instance where a rename would collide, the instance, the other tool's
    own name and the name it is exposed under; instances where this tool has an override do not count."""
    # given
    renamed = make_tool(owner, table, name="orders_all", type="get_all_data")
    plain, overridden = make_tool(owner, table, name="Lookup"), make_tool(owner, table, name="orders_query")
    one, two, three = (make_instance(owner, slug=slug) for slug in ("one", "two", "three"))
    for instance in (one, two):
        bind(instance, renamed)
    bind(three, renamed, name_override="everything")
    bind(one, plain)
    bind(two, overridden, name_override="LOOKUP")
    bind(three, make_tool(owner, table, name="lookup", type="select"))
    # when
    clashes = renamed.name_conflicts("lookup")
    # then
    assert sorted(clashes) == [("One", "Lookup", "Lookup"), ("Two", "orders_query", "LOOKUP")]
    assert renamed.name_conflicts("orders_all") == []


def test_a_rename_into_an_override_is_refused_naming_the_tool(owner, table, make_tool, instance, bind):
    """A rename into another binding's override is a NAME_CONFLICT on `name` naming that binding's tool and
    its override; nothing is saved. The rule is the service's (Binding.objects.name_clashes): full_clean() checks
    the row only."""
    # given
    from tools_app import services

    renamed = make_tool(owner, table, name="orders_all", type="get_all_data")
    bind(instance, renamed)
    bind(instance, make_tool(owner, table, name="orders_query"), name_override="find")
    renamed.name = "FIND"
    renamed.full_clean()  # the row itself is fine
    # when
    with pytest.raises(ValidationError) as caught:
        services.tool_update(tool=renamed, name="FIND")
    # then
    assert _codes(caught.value) == {"name": ["NAME_CONFLICT"]}
    assert _messages(caught.value, "name") == [
        "The name 'FIND' is already used by the tool 'orders_query', bound as 'find', on the instance 'Shop' "
        "(names are unique per instance, ignoring case)."
    ]
    assert Tool.objects.get(pk=renamed.pk).name == "orders_all"
