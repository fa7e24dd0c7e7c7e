"""Schemas that cannot reach out, on every surface; linear-time patterns; bounded arguments.

A loopback HTTP server records every request made to it: a schema `$ref` to it is refused when saved, and one
stored before the rule (written straight to the database) is never fetched when the tool is called.
"""

import json
import threading
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from jsonschema import Draft202012Validator

from mcp_app.tests.mcp_harness import Harness
from tests.api_helpers import client_for, db_snapshot
from tools_app import services
from tools_app.models import Binding, CallLog, Tool
from tools_app.safe_schema import schema_problems, validator_for
from tools_app.validators import validate_json_schema

pytestmark = pytest.mark.django_db

SECRET = "leaked-remote-content"


@pytest.fixture
def recorder():
    """A loopback HTTP server answering every GET with a schema holding SECRET; `hits` lists the paths asked."""
    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            hits.append(self.path)
            body = json.dumps({"type": "integer", "description": SECRET}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/schema+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield SimpleNamespace(url=f"http://127.0.0.1:{server.server_port}", hits=hits)
    server.shutdown()
    server.server_close()


def query_schema(note: dict) -> dict:
    """A query_data input schema with an extra argument `note` described by `note`."""
    return {
        "type": "object",
        "properties": {"query": {"type": "string"}, "note": note},
        "required": ["query"],
    }


OUTSIDE = (
    "points outside the schema: only references inside it (starting with '#') are allowed, and nothing is ever fetched."
)


def outside(ref: str, where: str = "properties/note", keyword: str = "$ref") -> str:
    return f"{keyword} {ref!r} at {where} {OUTSIDE}"


REFS = ["http://127.0.0.1:9/schema.json", "file:///etc/passwd", "other.json", "//evil.example/x"]


#
# The recorder sees what an unguarded jsonschema does
#


def test_plain_jsonschema_would_fetch_a_remote_ref(recorder):
    """Control: jsonschema with its defaults fetches the reference (and would echo its content)."""
    # given
    validator = Draft202012Validator({"$ref": f"{recorder.url}/s.json"})
    # when
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # jsonschema's deprecation warning for automatic retrieval
        errors = [error.message for error in validator.iter_errors("text")]
    # then
    assert recorder.hits == ["/s.json"]
    assert errors == ["'text' is not of type 'integer'"]


#
# Refused when saved, on every surface
#


@pytest.mark.parametrize("ref", REFS)
def test_api_refuses_an_input_schema_reaching_out(owner, table, ref):
    """POST /api/tools/: a remote, file or relative $ref is a 400 on input_schema; nothing is written."""
    # given
    before = db_snapshot()
    body = {"name": "q", "type": "query_data", "table": table.pk, "description": "Q.", "input_schema": None}
    body["input_schema"] = query_schema({"$ref": ref})
    # when
    response = client_for(owner).post("/api/tools/", body, format="json")
    # then
    assert response.status_code == 400
    assert response.json() == {
        "error": "VALIDATION_ERROR",
        "message": "Invalid input.",
        "fields": {"input_schema": [outside(ref)]},
    }
    assert db_snapshot() == before


def test_api_refuses_an_output_schema_reaching_out_on_update(owner, table, make_tool):
    """PATCH /api/tools/<id>/: the same rule on output_schema; the stored tool is unchanged."""
    # given
    tool = make_tool(owner, table, name="q")
    before = db_snapshot()
    # when
    response = client_for(owner).patch(
        f"/api/tools/{tool.pk}/",
        {"output_schema": {"type": "object", "properties": {"x": {"$ref": "file:///etc/passwd"}}}},
        format="json",
    )
    # then
    assert response.status_code == 400
    assert response.json()["fields"] == {"output_schema": [outside("file:///etc/passwd", "properties/x")]}
    assert db_snapshot() == before


def test_admin_refuses_an_input_schema_reaching_out(client, owner, table, make_tool):
    """The admin's tool form shows the error on input_schema; nothing is written."""
    # given
    from tools_app.tests.admin.test_tables_and_tools import tool_form

    tool = make_tool(owner, table, name="q")
    client.force_login(owner)
    before = db_snapshot()
    schema = query_schema({"$ref": "http://169.254.169.254/latest/meta-data"})
    # when
    response = client.post(
        reverse("admin:tools_app_tool_change", args=[tool.pk]), tool_form(tool, input_schema=json.dumps(schema))
    )
    # then
    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {
        "input_schema": [outside("http://169.254.169.254/latest/meta-data")]
    }
    assert db_snapshot() == before


def test_register_tool_over_mcp_refuses_a_schema_reaching_out(owner, make_tool, instance, bind, make_api_key):
    """register_tool: REGISTRATION_FAILED naming input_schema and the reference; no tool, no binding."""
    # given
    services.instance_update(instance=instance, allow_registration=True)
    bind(instance, make_tool(owner, type="register_tool", name="register_tool", description="Register."))
    _, key = make_api_key(instance)
    before = (list(Tool.objects.values_list("name", flat=True)), list(Binding.objects.values_list("pk", flat=True)))
    arguments = {
        "name": "weather_now",
        "description": "Weather.",
        "input_schema": {"type": "object", "properties": {"city": {"$ref": "file:///etc/passwd"}}},
        "mcp_server": "wx",
    }
    # when
    result = Harness().call("shop", key, "register_tool", arguments)["result"]
    # then
    assert result["isError"] is True
    assert result["content"][0]["text"] == (
        "REGISTRATION_FAILED: The tool 'weather_now' was not registered: input_schema: "
        + outside("file:///etc/passwd", "properties/city")
    )
    assert (list(Tool.objects.values_list("name", flat=True)), list(Binding.objects.values_list("pk", flat=True))) == (
        before
    )
    assert list(CallLog.objects.values_list("error_code", flat=True)) == ["REGISTRATION_FAILED"]


def test_service_refuses_every_unsafe_construct(owner, table):
    """services.tool_create (every other writer: commands, imports) refuses; the messages name each problem."""
    # given
    schema = {
        "type": "object",
        "$defs": {"nested": {"$id": "http://evil.example/n", "type": "string"}},
        "properties": {
            "query": {"type": "string"},
            "a": {"$dynamicRef": "https://evil.example/x#meta"},
            "b": {"$schema": "http://json-schema.org/draft-04/schema#"},
            "c": {"$ref": "#/$defs/missing"},
            "d": {"type": "string", "pattern": "(a)\\1"},
            "e": {"type": "string", "pattern": "a(?=b)"},
        },
        "patternProperties": {"^x(?!y)": {"type": "string"}},
    }
    # when
    with pytest.raises(ValidationError) as raised:
        services.tool_create(
            owner=owner, name="q", type="query_data", table=table, description="Q.", input_schema=schema
        )
    # then
    assert sorted(raised.value.message_dict["input_schema"]) == sorted(
        [
            "$id at $defs/nested is refused: a schema is one resource ($id only at the root).",
            outside("https://evil.example/x#meta", "properties/a", "$dynamicRef"),
            "$schema at properties/b is refused: only 'https://json-schema.org/draft/2020-12/schema', at the root, "
            "is allowed.",
            "The pattern '(a)\\\\1' at properties/d/pattern is refused: it uses a backreference \\1 (patterns run in "
            "linear time).",
            "The pattern 'a(?=b)' at properties/e/pattern is refused: it uses a look-around (?=...) (patterns run in "
            "linear time).",
            "The pattern '^x(?!y)' at (root)/patternProperties is refused: it uses a look-around (?!...) (patterns "
            "run in linear time).",
        ]
    )
    assert Tool.objects.count() == 0


def test_a_reference_inside_the_schema_and_the_draft_2020_12_dialect_are_accepted():
    """`#` references that resolve, `$anchor`, a root `$id` and the 2020-12 `$schema` are fine."""
    # given
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://toolhub.example/schemas/q",
        "type": "object",
        "$defs": {"name": {"type": "string", "minLength": 1}, "tag": {"$anchor": "tag", "enum": ["a", "b"]}},
        "properties": {"who": {"$ref": "#/$defs/name"}, "tag": {"$ref": "#tag"}, "const": {"const": {"$ref": "x"}}},
    }
    # when
    validate_json_schema(schema)
    validator = validator_for(schema)
    # then
    assert schema_problems(schema) == []
    assert sorted(error.message for error in validator.iter_errors({"who": "", "tag": "c"})) == [
        "'' should be non-empty",
        "'c' is not one of ['a', 'b']",
    ]


#
# A stored schema (from before the rule) is never fetched at call time
#


def stored_tool(owner, table, make_tool, note_schema):
    tool = make_tool(owner, table, name="q")
    Tool.objects.filter(pk=tool.pk).update(input_schema=query_schema(note_schema))  # bypasses full_clean()
    return Tool.objects.get(pk=tool.pk)


def test_a_stored_remote_ref_is_not_fetched_over_the_api(owner, table, make_tool, recorder):
    """POST /api/tools/<id>/call/: TOOL_NOT_CALLABLE naming the reference; the server was never asked."""
    # given
    ref = f"{recorder.url}/note.json"
    tool = stored_tool(owner, table, make_tool, {"$ref": ref})
    # when
    response = client_for(owner).post(
        f"/api/tools/{tool.pk}/call/", {"arguments": {"query": "length(@)", "note": "x"}}, format="json"
    )
    # then
    assert response.status_code == 400
    assert response.json() == {
        "error": "TOOL_NOT_CALLABLE",
        "message": f"The tool's input schema cannot be applied: {outside(ref)} Nothing was fetched; the tool's "
        "owner must fix its schema.",
    }
    assert recorder.hits == []
    assert SECRET not in response.content.decode()
    assert CallLog.objects.get().error_code == "TOOL_NOT_CALLABLE"


def test_a_stored_file_ref_is_not_read_over_mcp(owner, table, make_tool, instance, bind, make_api_key):
    """tools/call over MCP: the same refusal; nothing of /etc/passwd appears."""
    # given
    tool = stored_tool(owner, table, make_tool, {"$ref": "file:///etc/passwd"})
    bind(instance, tool)
    _, key = make_api_key(instance)
    # when
    result = Harness().call("shop", key, "q", {"query": "length(@)", "note": "x"})["result"]
    # then
    assert result["isError"] is True
    assert result["content"][0]["text"] == (
        f"TOOL_NOT_CALLABLE: The tool's input schema cannot be applied: {outside('file:///etc/passwd')} Nothing "
        "was fetched; the tool's owner must fix its schema."
    )
    assert "root:" not in json.dumps(result)


@pytest.mark.parametrize(
    "note",
    [
        {"$id": "{url}/base/", "$ref": "note.json"},  # a relative ref against a remote base
        {"$dynamicRef": "{url}/dyn.json"},
        {"allOf": [{"$ref": "{url}/all.json"}]},
    ],
)
def test_id_and_dynamic_ref_tricks_are_not_fetched(owner, table, make_tool, recorder, note):
    """Whatever the keyword that carries it, a stored outside reference is refused, never fetched."""
    # given
    note = json.loads(json.dumps(note).replace("{url}", recorder.url))
    tool = stored_tool(owner, table, make_tool, note)
    # when
    response = client_for(owner).post(
        f"/api/tools/{tool.pk}/call/", {"arguments": {"query": "length(@)", "note": 1}}, format="json"
    )
    # then
    assert response.status_code == 400
    assert response.json()["error"] == "TOOL_NOT_CALLABLE"
    assert recorder.hits == []
    assert SECRET not in response.content.decode()


def test_a_stored_reference_loop_is_refused_not_a_500(owner, table, make_tool):
    """A stored schema whose `$ref`s loop without descending into the value: TOOL_NOT_CALLABLE, not a 500."""
    # given
    tool = make_tool(owner, table, name="q")
    schema = query_schema({"$ref": "#/$defs/loop"})
    schema["$defs"] = {"loop": {"$ref": "#/$defs/loop"}}
    Tool.objects.filter(pk=tool.pk).update(input_schema=schema)
    # when
    response = client_for(owner).post(
        f"/api/tools/{tool.pk}/call/", {"arguments": {"query": "length(@)", "note": 1}}, format="json"
    )
    # then
    assert response.status_code == 400
    assert response.json() == {
        "error": "TOOL_NOT_CALLABLE",
        "message": "The tool's input schema cannot be applied: its references loop without end. Nothing was "
        "fetched; the tool's owner must fix its schema.",
    }


#
# Patterns run on RE2
#


def test_a_redos_pattern_against_a_long_argument_completes(owner, table, make_tool, instance, bind, make_api_key):
    """`^(a+)+$` against 100,000 a's and a '!': INVALID_ARGUMENTS (backtracking `re` would not finish)."""
    # given
    tool = make_tool(owner, table, name="q", input_schema=query_schema({"type": "string", "pattern": "^(a+)+$"}))
    bind(instance, tool)
    _, key = make_api_key(instance)
    evil = "a" * 100_000 + "!"
    # when
    over_api = client_for(owner).post(
        f"/api/tools/{tool.pk}/call/", {"arguments": {"query": "length(@)", "note": evil}}, format="json"
    )
    over_mcp = Harness().call("shop", key, "q", {"query": "length(@)", "note": evil})["result"]
    fine = client_for(owner).post(
        f"/api/tools/{tool.pk}/call/", {"arguments": {"query": "length(@)", "note": "a" * 100_000}}, format="json"
    )
    # then
    message = f"Invalid arguments: argument 'note': {'a' * 100!r}... (100001 characters) does not match '^(a+)+$'."
    assert over_api.status_code == 400
    assert over_api.json() == {
        "error": "INVALID_ARGUMENTS",
        "message": message,
        "details": {"path": ["note"], "validator": "pattern"},
    }
    assert over_mcp["content"][0]["text"] == f"INVALID_ARGUMENTS: {message}"
    assert fine.json() == {"result": 3}


def test_pattern_properties_and_additional_properties_run_on_re2(owner, table, make_tool):
    """Keys are matched by RE2 too: a long evil key is refused by additionalProperties, quickly."""
    # given
    schema = query_schema({"type": "object", "patternProperties": {"^(a|aa)+$": {"type": "integer"}}})
    schema["properties"]["note"]["additionalProperties"] = False
    tool = make_tool(owner, table, name="q", input_schema=schema)
    evil_key = "a" * 5_000 + "!"
    # when
    refused = client_for(owner).post(
        f"/api/tools/{tool.pk}/call/", {"arguments": {"query": "length(@)", "note": {evil_key: 1}}}, format="json"
    )
    typed = client_for(owner).post(
        f"/api/tools/{tool.pk}/call/", {"arguments": {"query": "length(@)", "note": {"aaa": "x"}}}, format="json"
    )
    # then
    full = f"{evil_key!r} does not match any of the regexes: '^(a|aa)+$'"  # cut: it quotes the key whole
    assert refused.json()["message"] == f"Invalid arguments: argument 'note': {full[:1000]}… (cut at 1000 characters)."
    assert typed.json()["message"] == "Invalid arguments: argument 'note.aaa': 'x' is not of type 'integer'."


def test_format_regex_is_an_annotation_never_compiled(owner, table, make_tool):
    """`format` is not asserted (Draft 2020-12's default): a catastrophic or broken regex argument is just text."""
    # given
    tool = make_tool(owner, table, name="q", input_schema=query_schema({"type": "string", "format": "regex"}))
    # when
    responses = [
        client_for(owner).post(
            f"/api/tools/{tool.pk}/call/", {"arguments": {"query": "length(@)", "note": note}}, format="json"
        )
        for note in ["(", "^(a+)+$"]
    ]
    # then
    assert [response.json() for response in responses] == [{"result": 3}, {"result": 3}]


def test_unevaluated_properties_with_pattern_properties_is_refused():
    """jsonschema matches patternProperties with `re` inside unevaluatedProperties: the pair is refused."""
    # given
    schema = {"type": "object", "patternProperties": {"^x": {}}, "unevaluatedProperties": False}
    # when
    problems = schema_problems(schema)
    # then
    assert problems == ["unevaluatedProperties cannot be combined with patternProperties in one schema."]


#
# Arguments are bounded before anything recursive runs
#


def nested(depth: int) -> object:
    value: object = "x"
    for _ in range(depth):
        value = [value]
    return value


def test_deeply_nested_arguments_are_invalid_arguments_on_every_surface(
    owner, table, make_tool, instance, bind, make_api_key
):
    """Arguments nested 101 levels (TOOLHUB_MAX_ARGUMENT_DEPTH is 100): INVALID_ARGUMENTS, not a RecursionError."""
    # given
    tool = make_tool(owner, table, name="q", input_schema=query_schema({}))
    bind(instance, tool)
    _, key = make_api_key(instance)
    arguments = {"query": "length(@)", "note": nested(100)}
    # when
    over_api = client_for(owner).post(f"/api/tools/{tool.pk}/call/", {"arguments": arguments}, format="json")
    over_mcp = Harness().call("shop", key, "q", arguments)["result"]
    # then
    message = (
        "Invalid arguments: nested more than 100 levels deep (at argument 'note"
        + "[0]" * 99
        + "'; TOOLHUB_MAX_ARGUMENT_DEPTH)."
    )
    assert over_api.status_code == 400
    assert over_api.json()["message"] == message
    assert over_mcp["content"][0]["text"] == f"INVALID_ARGUMENTS: {message}"
    assert list(CallLog.objects.values_list("error_code", flat=True)) == ["INVALID_ARGUMENTS", "INVALID_ARGUMENTS"]


def test_arguments_at_the_depth_limit_pass(owner, table, make_tool):
    """99 levels under `note` (100 with the arguments object): accepted."""
    # given
    tool = make_tool(owner, table, name="q", input_schema=query_schema({}))
    # when
    response = client_for(owner).post(
        f"/api/tools/{tool.pk}/call/", {"arguments": {"query": "length(@)", "note": nested(99)}}, format="json"
    )
    # then
    assert response.json() == {"result": 3}


def test_unique_items_over_many_objects_is_linear_and_exact(owner, table, make_tool):
    """uniqueItems over 20,001 objects (jsonschema compares them pairwise: 2e8 comparisons) ends at once; JSON
    equality holds (1 == 1.0, key order ignored; true != 1)."""
    # given
    tool = make_tool(owner, table, name="q", input_schema=query_schema({"type": "array", "uniqueItems": True}))
    many = [{"id": number, "tags": [number]} for number in range(20_000)] + [{"tags": [7.0], "id": 7}]

    def call(note):
        arguments = {"query": "length(@)", "note": note}
        return client_for(owner).post(f"/api/tools/{tool.pk}/call/", {"arguments": arguments}, format="json").json()

    # when
    refused = call(many)
    small = call([1, 1.0])
    distinct = call([True, 1, [True], [1], {"a": 1}, {"a": True}])
    # then
    assert refused["message"] == "Invalid arguments: argument 'note': an array of 20001 items has non-unique elements."
    assert small["message"] == "Invalid arguments: argument 'note': [1, 1.0] has non-unique elements."
    assert distinct == {"result": 3}


def test_a_failing_huge_argument_is_not_echoed_whole(owner, table, make_tool):
    """jsonschema quotes the failing value; the message is cut at 1,000 characters."""
    # given
    tool = make_tool(owner, table, name="q", input_schema=query_schema({"type": "string"}))
    huge = list(range(100_000))
    # when
    response = client_for(owner).post(
        f"/api/tools/{tool.pk}/call/", {"arguments": {"query": "length(@)", "note": huge}}, format="json"
    )
    # then
    message = response.json()["message"]
    assert message.startswith("Invalid arguments: argument 'note': [0, 1, 2, 3,")
    assert message.endswith("… (cut at 1000 characters).")
    assert len(message) == len("Invalid arguments: argument 'note': ") + 1000 + len("… (cut at 1000 characters).")
