"""/api/schema/ describes each resource for API clients, not the implementation behind it."""

import re

import pytest

from tools_app.api.serializers import FullCleanModelSerializer

pytestmark = pytest.mark.django_db


def one_line(text: str) -> str:
    """Docstring line breaks are soft breaks in the schema's Markdown."""
    return " ".join(text.split())


RESOURCE_DESCRIPTIONS = {
    "Table": "A JSON document (any JSON value, usually an object or an array) that tools read and write. "
    "`version` starts at 1 and grows by one on every data write; renaming a table leaves it.",
    "Tool": "A tool an LLM agent can call: a typed operation on a mount point (`json_path`) of one of your "
    "tables, a registry tool, or an external tool served elsewhere. Tools are exposed over MCP through bindings.",
    "McpInstance": "An MCP endpoint, `/mcp/<slug>/`, exposing the tools of its enabled bindings to MCP clients "
    "that send one of its API keys.",
    "Binding": "One tool exposed on one MCP instance, optionally under another name or description. Effective "
    "names are unique within an instance, ignoring case: a collision is a 409 NAME_CONFLICT.",
    "ApiKey": "An API key of an MCP instance as listed: never its secret, only the prefix that identifies it.",
    "ApiKeyCreateRequest": "The key to issue: an optional label; `read_only` (the key sees and calls only tools "
    "that change no data) and `attributes` (values pinned arguments can take from it), both fixed for the key's life.",
    "ApiKeyCreated": "The key just issued. The only response that ever holds the plaintext key: store it now.",
    "ToolCallRequest": "The arguments of a tool call, checked against the tool's input_schema.",
    "ToolCallResult": "The result of a successful tool call.",
    "Error": "Every failure has this shape; `fields` is present for validation errors only.",
}


@pytest.mark.parametrize("name", sorted(RESOURCE_DESCRIPTIONS))
def test_each_resource_has_its_own_description(schema, name):
    """Components are described for clients; the PATCH variants share the resource's description."""
    components = schema["components"]["schemas"]
    assert one_line(components[name]["description"]) == RESOURCE_DESCRIPTIONS[name]
    for variant in (f"Patched{name}", f"{name}Request", f"Patched{name}Request"):
        if variant in components:
            assert one_line(components[variant]["description"]) == RESOURCE_DESCRIPTIONS[name]


def test_no_description_shows_implementation_notes(schema):
    """No component or operation text is the serializer base's docstring, or cites the internal spec."""
    base = " ".join(FullCleanModelSerializer.__doc__.split())
    texts = [component.get("description", "") for component in schema["components"]["schemas"].values()]
    for operations in schema["paths"].values():
        for operation in operations.values():
            texts += [operation.get("description", ""), operation.get("summary", "")]
    leaks = [text for text in texts if re.search(r"SPEC §|full_clean|NetBox", text) or base[:40] in text]
    assert leaks == []


def test_every_operation_has_a_summary(schema):
    """Each operation says in one line what it does."""
    missing = [
        f"{method.upper()} {path}"
        for path, operations in schema["paths"].items()
        for method, operation in operations.items()
        if not operation.get("summary")
    ]
    assert missing == []


def test_a_metadata_example_is_non_blank_in_the_schema_as_on_the_server(schema):
    """The server refuses a blank example (validators.validate_examples): the schema says so."""
    items = schema["components"]["schemas"]["ToolMetadata"]["properties"]["examples"]["items"]
    assert items["minLength"] == 1
    assert re.fullmatch(items["pattern"], "x = 1")
    assert re.fullmatch(items["pattern"], "\u0085 \t") is None
