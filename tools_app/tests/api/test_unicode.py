"""Lone UTF-16 surrogates: refused wherever JSON comes in, and never a 500 when one is already stored.

`"\\ud800"` is valid JSON syntax but not Unicode text: it cannot be encoded as UTF-8, PostgreSQL's jsonb
refuses it, and a response holding one used to fail while rendering (HTML 500).
"""

import json

import pytest
from django.db import connection

from mcp_app.tests.mcp_harness import Harness
from tests.api_helpers import client_for, db_snapshot, response_bytes
from tools_app.api.renderers import JSONRenderer
from tools_app.data_access.arguments import validate_arguments
from tools_app.kernel.errors import ToolError
from tools_app.models import Table, TableSnapshot, Tool
from tools_app.tool_schemas import default_input_schema

pytestmark = pytest.mark.django_db


def post_raw(client, path: str, body: str, method: str = "post"):
    """Send `body` as it is: the JSON text keeps its `\\ud800` escape (json.dumps would write it the same)."""
    return getattr(client, method)(path, body, content_type="application/json")


#
# Refused on the way in
#


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ('{"a": "\\ud800"}', "The string at a holds a lone UTF-16 surrogate (U+D800); strings must be Unicode text."),
        ('["x", "\\udfff"]', "The string at [1] holds a lone UTF-16 surrogate (U+DFFF); strings must be Unicode text."),
        (
            '{"a": [{"b": "ok\\udc00"}]}',
            "The string at a[0].b holds a lone UTF-16 surrogate (U+DC00); strings must be Unicode text.",
        ),
        (
            '{"\\ud83d": 1}',
            "A key in the object at (root) holds a lone UTF-16 surrogate (U+D83D); strings must be Unicode text.",
        ),
        ('"\\ud800"', "The string at (root) holds a lone UTF-16 surrogate (U+D800); strings must be Unicode text."),
    ],
)
def test_table_data_with_a_lone_surrogate_is_a_400_naming_data(owner, data, message):
    """POST /api/tables/ with a lone surrogate anywhere in `data`: 400 naming `data` and the place; nothing stored."""
    # given
    before = db_snapshot()

    # when
    response = post_raw(client_for(owner), "/api/tables/", '{"name": "t", "data": ' + data + "}")

    # then
    assert response.status_code == 400
    assert response.json() == {"error": "VALIDATION_ERROR", "message": "Invalid input.", "fields": {"data": [message]}}
    assert db_snapshot() == before
    assert client_for(owner).get("/api/tables/").status_code == 200


def test_a_surrogate_pair_is_one_character_and_is_accepted(owner):
    """`\\ud83d\\ude00` is the escape of U+1F600, not a lone surrogate: stored and read back as that character."""
    # when
    response = post_raw(client_for(owner), "/api/tables/", '{"name": "t", "data": {"smile": "\\ud83d\\ude00"}}')

    # then
    assert response.status_code == 201
    assert response.json()["data"] == {"smile": "\U0001f600"}
    assert Table.objects.get().data == {"smile": "\U0001f600"}


def test_table_update_with_a_lone_surrogate_is_refused_and_keeps_the_data(owner, table):
    """PATCH and PUT are refused the same way; the table keeps its data and version."""
    # given
    before = db_snapshot()
    client = client_for(owner)

    # when
    patched = post_raw(client, f"/api/tables/{table.pk}/", '{"data": {"a": "\\ud800"}}', method="patch")
    put = post_raw(client, f"/api/tables/{table.pk}/", '{"name": "t", "data": ["\\ud800"]}', method="put")

    # then
    assert (patched.status_code, put.status_code) == (400, 400)
    assert list(patched.json()["fields"]) == ["data"]
    assert list(put.json()["fields"]) == ["data"]
    assert db_snapshot() == before


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        (
            "metadata",
            '{"tags": ["\\ud800"]}',
            "The string at tags[0] holds a lone UTF-16 surrogate (U+D800); strings must be Unicode text.",
        ),
        (
            "input_schema",
            '{"type": "object", "properties": {"query": {"type": "string", "description": "\\udbff"}}}',
            "The string at properties.query.description holds a lone UTF-16 surrogate (U+DBFF); "
            "strings must be Unicode text.",
        ),
        (
            "output_schema",
            '{"type": "object", "title": "x\\ud800y"}',
            "The string at title holds a lone UTF-16 surrogate (U+D800); strings must be Unicode text.",
        ),
    ],
)
def test_tool_json_fields_with_a_lone_surrogate_are_a_400_naming_the_field(owner, field, value, message):
    """Tool metadata and schemas: 400 naming the field; no tool is created."""
    # given
    before = db_snapshot()
    body = f'{{"name": "t", "type": "search_tools", "description": "d", "{field}": {value}}}'

    # when
    response = post_raw(client_for(owner), "/api/tools/", body)

    # then
    assert response.status_code == 400
    assert response.json()["error"] == "VALIDATION_ERROR"
    assert response.json()["fields"] == {field: [message]}
    assert db_snapshot() == before


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/tools/", '{"name": "t", "type": "search_tools", "description": "d\\ud800"}', "description"),
        ("/api/tools/", '{"name": "\\ud800", "type": "search_tools", "description": "d"}', "name"),
        ("/api/mcp-instances/", '{"name": "\\udc00", "slug": "s"}', "name"),
        ("/api/tables/", '{"name": "t\\ud800"}', "name"),
    ],
)
def test_text_fields_with_a_lone_surrogate_are_a_400_naming_the_field(owner, path, body, field):
    """Plain text fields refuse surrogates too (DRF's CharField check), answered in the same shape."""
    # given
    before = db_snapshot()

    # when
    response = post_raw(client_for(owner), path, body)

    # then
    assert response.status_code == 400
    assert response.json()["error"] == "VALIDATION_ERROR"
    assert list(response.json()["fields"]) == [field]
    assert db_snapshot() == before


def test_an_echoed_bad_choice_holding_a_surrogate_renders_as_an_escape(owner):
    """A validation message that quotes the input (an unknown choice) is a 400 whose JSON escapes the surrogate."""
    # given
    before = db_snapshot()

    # when
    response = post_raw(client_for(owner), "/api/tools/", '{"name": "t", "type": "x\\ud800", "description": "d"}')

    # then
    assert response.status_code == 400
    assert b'"\\"x\\ud800\\" is not a valid choice."' in response.content
    assert response.json()["fields"] == {"type": ['"x\ud800" is not a valid choice.']}
    assert db_snapshot() == before


def test_token_endpoint_refuses_a_surrogate_username_without_a_500(owner):
    """The token endpoint answers a surrogate in the credentials with a 400 naming the field; no token."""
    # given
    before = db_snapshot()

    # when
    response = post_raw(client_for(), "/api/auth/token/", '{"username": "\\ud800", "password": "x"}')

    # then
    assert response.status_code == 400
    assert list(response.json()["fields"]) == ["username"]
    assert db_snapshot() == before


#
# Call arguments: INVALID_ARGUMENTS naming the argument
#


@pytest.mark.parametrize(
    ("tool_type", "arguments", "message", "path"),
    [
        (
            "create",
            '{"elements": [{"id": 9, "note": "\\ud800"}]}',
            "Invalid arguments: argument 'elements[0].note' holds a lone UTF-16 surrogate (U+D800); strings must "
            "be Unicode text.",
            ["elements", 0, "note"],
        ),
        (
            "query_data",
            '{"query": "\\udfff"}',
            "Invalid arguments: argument 'query' holds a lone UTF-16 surrogate (U+DFFF); strings must be Unicode text.",
            ["query"],
        ),
        (
            "update",
            '{"elements": [{"id": 1, "\\ud800": 2}]}',
            "Invalid arguments: a key in argument 'elements[0]' holds a lone UTF-16 surrogate (U+D800); strings "
            "must be Unicode text.",
            ["elements", 0],
        ),
    ],
)
def test_call_arguments_with_a_lone_surrogate_are_invalid_arguments(
    owner, table, make_tool, tool_type, arguments, message, path
):
    """POST /api/tools/<id>/call/: INVALID_ARGUMENTS naming the argument; the table is left as it was."""
    # given
    tool = make_tool(owner, table, type=tool_type)
    before = db_snapshot()

    # when
    response = post_raw(client_for(owner), f"/api/tools/{tool.pk}/call/", '{"arguments": ' + arguments + "}")

    # then
    assert response.status_code == 400
    assert response.json() == {
        "error": "INVALID_ARGUMENTS",
        "message": message,
        "details": {"path": path, "validator": "unicode"},
    }
    after = db_snapshot()
    assert after["tools_app.Table"] == before["tools_app.Table"]


def test_validate_arguments_refuses_surrogates_from_any_caller():
    """The data-access layer itself refuses them (the admin's "try it" parses JSON text too)."""
    with pytest.raises(ToolError) as caught:
        validate_arguments(schema=default_input_schema("query_data"), arguments={"query": "a\ud800"})
    assert caught.value.code == "INVALID_ARGUMENTS"
    assert caught.value.details == {"path": ["query"], "validator": "unicode"}


def test_mcp_refuses_a_lone_surrogate_before_running_the_tool(owner, table, make_tool, instance, bind, make_api_key):
    """Over MCP the SDK's JSON parser already refuses the request (-32700); the table is left as it was."""
    # given
    bind(instance, make_tool(owner, table, type="create", name="add"))
    key = make_api_key(instance)[1]
    before = [(t.data, t.version) for t in Table.objects.all()]

    # when
    reply = Harness().call("shop", key, "add", {"elements": [{"id": 9, "note": "\ud800"}]})

    # then
    assert reply["error"]["code"] == -32700
    assert [(t.data, t.version) for t in Table.objects.all()] == before


#
# Rendering: a value already stored never makes a 500
#


def test_json_renderer_writes_utf8_and_escapes_a_response_holding_a_lone_surrogate():
    """Responses stay UTF-8; one holding a lone surrogate is written with ASCII escapes, read back the same."""
    # when
    ordinary = JSONRenderer().render({"é": "\U0001f600"})
    broken = JSONRenderer().render({"a": "x\ud800y", "é": "\U0001f600"})

    # then
    assert ordinary == '{"é":"\U0001f600"}'.encode()
    assert broken == b'{"a":"x\\ud800y","\\u00e9":"\\ud83d\\ude00"}'
    assert json.loads(broken) == {"a": "x\ud800y", "é": "\U0001f600"}


@pytest.mark.skipif(connection.vendor == "postgresql", reason="PostgreSQL cannot store a lone surrogate at all")
def test_a_stored_surrogate_is_listed_escaped_not_a_500(owner, make_table, make_tool):
    """Rows written before the check (SQLite accepted them) are listed and shown, with the surrogate escaped."""
    # given
    table = make_table(owner, data={"a": "ok"}, storage="document")  # a table of that time: its snapshot holds it
    tool = make_tool(owner, table, type="get_all_data")
    # SQLite stores JSON as escaped text, so a JSON value could hold one; its text columns never could.
    TableSnapshot.objects.filter(table=table).update(data={"a": "\ud800"})
    Tool.objects.filter(pk=tool.pk).update(metadata={"tags": ["\ud800"]})
    client = client_for(owner)

    # when
    listed = client.get("/api/tables/")
    tools = client.get("/api/tools/")
    called = client.post(f"/api/tools/{tool.pk}/call/", {}, format="json")
    browsable = client.get(f"/api/tables/{table.pk}/", HTTP_ACCEPT="text/html")

    # then
    assert listed.status_code == 200
    assert b'"data":{"a":"\\ud800"}' in listed.content
    assert tools.status_code == 200
    assert tools.json()["results"][0]["tags"] == ["\ud800"]
    assert called.status_code == 200
    assert called.json() == {"result": {"a": "\ud800"}}
    assert browsable.status_code == 200
    assert browsable["content-type"] == "text/html; charset=utf-8"
    assert b"\\ud800" in browsable.content


def test_a_surrogate_in_a_response_renders_as_json_and_html(owner, table, monkeypatch):
    """Whatever the backend, a surrogate reaching a response is escaped in JSON and in the browsable HTML page."""
    # given
    from tools_app.api import serializers

    monkeypatch.setattr(serializers.TableSerializer, "to_representation", lambda self, instance: {"name": "\ud800"})
    client = client_for(owner)

    # when
    as_json = client.get(f"/api/tables/{table.pk}/")
    as_html = client.get(f"/api/tables/{table.pk}/", HTTP_ACCEPT="text/html")

    # then
    assert (as_json.status_code, response_bytes(as_json)) == (200, b'{"name":"\\ud800"}')
    assert as_html.status_code == 200
    assert b"\\ud800" in as_html.content
