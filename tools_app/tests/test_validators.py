"""The pure field checks of validators.py (SPEC §2.2): names, JSON Pointers, schemas, metadata."""

import pytest
from django.core.exceptions import ValidationError

from tools_app.kernel.limits import MAX_DESCRIPTION
from tools_app.validators import (
    validate_examples,
    validate_input_schema,
    validate_json_pointer,
    validate_json_schema,
    validate_json_value,
    validate_metadata,
    validate_tool_name,
)


def _codes(exc: ValidationError) -> list[str]:
    return [error.code for error in exc.error_list]


def _messages(exc: ValidationError) -> list[str]:
    return [message for error in exc.error_list for message in error.messages]


#
# Tool names
#


@pytest.mark.parametrize(
    "name",
    ["a", "orders_query", "orders.query", "orders-query", "Orders_Query_2", "0", "_", "a" * 64, "A.b-C_9"],
)
def test_tool_name_accepts_mcp_characters_up_to_64(name):
    """Letters, digits, '_', '.' and '-' are accepted, from 1 to 64 characters."""
    # given / when / then
    assert validate_tool_name(name) is None


@pytest.mark.parametrize(
    "name",
    ["", "a" * 65, "orders query", "orders/query", "orders:query", "ordérs", "tool!", "a\n", " a", "tool@x"],
)
def test_tool_name_refuses_other_characters_and_lengths(name):
    """An empty name, 65 characters, spaces, slashes, colons and non-ASCII letters are refused."""
    # given / when
    with pytest.raises(ValidationError) as caught:
        validate_tool_name(name)
    # then
    assert _codes(caught.value) == ["invalid_name"]
    assert repr(name) in _messages(caught.value)[0]


def test_tool_name_of_exactly_64_and_65_characters():
    """64 characters is the limit: the 65th character makes the name invalid."""
    # given
    at_limit, over_limit = "x" * 64, "x" * 65
    # when
    validate_tool_name(at_limit)
    with pytest.raises(ValidationError) as caught:
        validate_tool_name(over_limit)
    # then
    assert _codes(caught.value) == ["invalid_name"]


def test_tool_name_refuses_non_strings():
    """A name that is not a string is refused, not a crash."""
    # given / when
    with pytest.raises(ValidationError) as caught:
        validate_tool_name(12)
    # then
    assert _codes(caught.value) == ["invalid_name"]


#
# JSON Pointers (RFC 6901)
#


@pytest.mark.parametrize("pointer", ["", "/", "/orders", "/a/b", "/a~1b", "/m~0n", "/0", "/a/0/b", "/~01", "//"])
def test_json_pointer_accepts_rfc_6901_syntax(pointer):
    """The empty pointer, '/'-led tokens and the escapes ~0 and ~1 are accepted."""
    # given / when / then
    assert validate_json_pointer(pointer) is None


@pytest.mark.parametrize("pointer", ["orders", "a/b", "#/a", "/a~", "/a~2b", "/~", "~1", " /a"])
def test_json_pointer_refuses_bad_syntax(pointer):
    """A pointer not starting with '/' or with a '~' not followed by 0 or 1 is refused, naming the value."""
    # given / when
    with pytest.raises(ValidationError) as caught:
        validate_json_pointer(pointer)
    # then
    assert _codes(caught.value) == ["invalid_pointer"]
    assert repr(pointer) in _messages(caught.value)[0]


#
# JSON Schema (Draft 2020-12) and input schemas
#


@pytest.mark.parametrize(
    "schema",
    [
        {},
        {"type": "object"},
        {"type": "array", "items": {"type": "integer"}, "minItems": 1},
        {"$defs": {"k": {"type": "string"}}, "properties": {"a": {"$ref": "#/$defs/k"}}},
        {"prefixItems": [{"type": "string"}]},
    ],
)
def test_json_schema_accepts_valid_draft_2020_12(schema):
    """Valid Draft 2020-12 schemas are accepted."""
    # given / when / then
    assert validate_json_schema(schema) is None


def test_json_schema_refuses_invalid_schema_naming_where():
    """An invalid keyword value is refused with the path inside the schema and jsonschema's reason."""
    # given
    schema = {"type": "object", "properties": {"limit": {"type": "integr"}}}
    # when
    with pytest.raises(ValidationError) as caught:
        validate_json_schema(schema)
    # then
    assert _codes(caught.value) == ["invalid_schema"]
    message = _messages(caught.value)[0]
    assert message.startswith("Not a valid JSON Schema (Draft 2020-12) at properties/limit/type: ")
    assert "'integr'" in message


@pytest.mark.parametrize("schema", [[], "object", 3, None, True])
def test_json_schema_must_be_an_object(schema):
    """A schema that is not a JSON object (booleans included) is refused."""
    # given / when
    with pytest.raises(ValidationError) as caught:
        validate_json_schema(schema)
    # then
    assert _messages(caught.value) == ["A JSON Schema must be a JSON object."]


@pytest.mark.parametrize("schema", [{}, {"type": "array"}, {"type": ["object", "null"]}, {"properties": {}}])
def test_input_schema_must_have_type_object(schema):
    """An input schema must say "type": "object" (MCP), even when it is otherwise valid."""
    # given / when
    with pytest.raises(ValidationError) as caught:
        validate_input_schema(schema)
    # then
    assert _messages(caught.value) == ['An input schema must have "type": "object".']


def test_input_schema_accepts_an_object_schema():
    """A valid object schema is a valid input schema."""
    # given
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    # when / then
    assert validate_input_schema(schema) is None


def test_input_schema_reports_invalid_schema_before_type():
    """An invalid schema is reported as invalid, not as a missing type."""
    # given
    schema = {"type": "object", "required": "q"}
    # when
    with pytest.raises(ValidationError) as caught:
        validate_input_schema(schema)
    # then
    assert _messages(caught.value)[0].startswith("Not a valid JSON Schema (Draft 2020-12) at required: ")


#
# Examples
#


def test_examples_accept_five_valid_python_snippets_of_ten_lines():
    """Five snippets of valid Python of ten lines each are accepted."""
    # given
    ten_lines = "\n".join(f"x{i} = {i}" for i in range(10))
    examples = ["orders_query(query=\"[?status=='paid']\")", ten_lines, "f()", "a = 1\nb = 2", "print('x')"]
    # when / then
    assert validate_examples(examples) is None


def test_examples_refuse_a_sixth_snippet():
    """At most 5 examples: the sixth is refused, with the count."""
    # given
    examples = ["f()"] * 6
    # when
    with pytest.raises(ValidationError) as caught:
        validate_examples(examples)
    # then
    assert _messages(caught.value) == ["metadata.examples holds at most 5 examples (got 6)."]


def test_examples_refuse_eleven_lines():
    """At most 10 lines per example: an 11-line snippet is refused naming its index."""
    # given
    eleven = "\n".join(f"x{i} = {i}" for i in range(11))
    # when
    with pytest.raises(ValidationError) as caught:
        validate_examples(["f()", eleven])
    # then
    assert _messages(caught.value) == ["metadata.examples[1] has 11 lines; at most 10 are allowed."]


def test_examples_ignore_surrounding_newlines_when_counting_lines():
    """Leading and trailing blank lines do not count towards the 10 lines."""
    # given
    ten_lines = "\n" + "\n".join(f"x{i} = {i}" for i in range(10)) + "\n\n"
    # when / then
    assert validate_examples([ten_lines]) is None


def test_examples_refuse_invalid_python_with_line():
    """A snippet that does not parse as Python is refused naming the index and the line."""
    # given
    examples = ["f()", "x = 1\nf(("]
    # when
    with pytest.raises(ValidationError) as caught:
        validate_examples(examples)
    # then
    message = _messages(caught.value)[0]
    assert message.startswith("metadata.examples[1] is not valid Python (line 2: ")


@pytest.mark.parametrize(
    ("examples", "message"),
    [
        ("f()", "metadata.examples must be a list of strings."),
        ([3], "metadata.examples[0] must be a non-empty string."),
        (["   "], "metadata.examples[0] must be a non-empty string."),
    ],
)
def test_examples_must_be_a_list_of_non_empty_strings(examples, message):
    """A bare string, a number or a blank snippet is refused."""
    # given / when
    with pytest.raises(ValidationError) as caught:
        validate_examples(examples)
    # then
    assert _messages(caught.value) == [message]


#
# Metadata
#


def test_metadata_accepts_every_documented_key():
    """Every key of SPEC §2.2 with the right shape is accepted; unknown keys are kept."""
    # given
    metadata = {
        "category": "orders-read_2",
        "tags": ["orders", "jmespath"],
        "preview_keys": ["id", "status"],
        "key_field": "sku",
        "examples": ["f(x=1)"],
        "return_format": "A list of ids.",
        "documentation_url": "https://example.com/docs",
        "mcp_server": "https://tools.example.com/mcp",
        "anything_else": {"kept": True},
    }
    # when / then
    assert validate_metadata(metadata) is None


@pytest.mark.parametrize("metadata", [[], "x", None, 3])
def test_metadata_must_be_an_object(metadata):
    """metadata is a JSON object."""
    # given / when
    with pytest.raises(ValidationError) as caught:
        validate_metadata(metadata)
    # then
    assert _messages(caught.value) == ["metadata must be a JSON object."]


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ({"tags": "orders"}, "metadata.tags must be a list."),
        ({"preview_keys": "id"}, "metadata.preview_keys must be a list."),
        ({"category": 3}, "metadata.category must be a string."),
        ({"key_field": ["id"]}, "metadata.key_field must be a string."),
        ({"examples": "f()"}, "metadata.examples must be a list."),
        ({"return_format": {}}, "metadata.return_format must be a string."),
        ({"documentation_url": 1}, "metadata.documentation_url must be a string."),
        ({"mcp_server": []}, "metadata.mcp_server must be a string."),
        (
            {"category": "Orders Read"},
            "metadata.category must be a slug: lowercase letters, digits, '-' and '_' (got 'Orders Read').",
        ),
        (
            {"category": "read\n"},
            "metadata.category must be a slug: lowercase letters, digits, '-' and '_' (got 'read\\n').",
        ),
        ({"tags": ["a", 1]}, "metadata.tags must be a list of non-empty strings."),
        ({"preview_keys": [""]}, "metadata.preview_keys must be a list of non-empty strings."),
        ({"key_field": ""}, "metadata.key_field must not be empty."),
    ],
)
def test_metadata_refuses_wrong_shapes_naming_the_key(metadata, message):
    """Each documented key with the wrong type or content is refused with a message naming it."""
    # given / when
    with pytest.raises(ValidationError) as caught:
        validate_metadata(metadata)
    # then
    assert _messages(caught.value) == [message]


def test_metadata_checks_examples():
    """metadata.examples goes through the example rules (valid Python)."""
    # given / when
    with pytest.raises(ValidationError) as caught:
        validate_metadata({"examples": ["f("]})
    # then
    assert _messages(caught.value)[0].startswith("metadata.examples[0] is not valid Python (line 1: ")


def test_description_limit_is_1024():
    """SPEC §2.2: descriptions hold at most 1,024 characters."""
    # given / when / then
    assert MAX_DESCRIPTION == 1024


@pytest.mark.parametrize("example", ["-" * 100_000 + "1", "1" + "+1" * 100_000, "f" + "()" * 100_000])
def test_examples_refuse_pathological_nesting_without_crashing(example):
    """A one-line snippet nested so deeply that the parser runs out of stack or memory is refused, not a crash."""
    # given / when
    with pytest.raises(ValidationError) as caught:
        validate_examples([example])
    # then
    assert _codes(caught.value) == ["invalid_examples"]
    assert _messages(caught.value) == ["metadata.examples[0] is not valid Python (it is nested too deeply)."]


@pytest.mark.parametrize("value", [float("nan"), float("inf"), [1, {"a": float("-inf")}]])
def test_json_value_refuses_nan_and_infinity(value):
    """NaN and Infinity are not JSON numbers (RFC 8259); PostgreSQL's jsonb refuses them."""
    # given / when
    with pytest.raises(ValidationError) as caught:
        validate_json_value(value)
    # then
    assert _codes(caught.value) == ["invalid_json"]
    assert _messages(caught.value) == ["NaN and Infinity are not JSON numbers."]


@pytest.mark.parametrize("value", [None, 1.5, -0.0, "NaN", {"a": [1, 2.5e300]}])
def test_json_value_accepts_finite_json(value):
    """Finite numbers and the string 'NaN' are JSON."""
    # given / when / then
    assert validate_json_value(value) is None
