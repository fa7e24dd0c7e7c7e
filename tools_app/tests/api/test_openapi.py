"""The OpenAPI schema states the server's rules, and the server enforces what the schema states.

tools_app/tests/api/test_schemathesis.py checks this property over generated requests; the tests here pin the
individual rules with exact values, in the schema and on the server side by side.
"""

import re

import pytest
from rest_framework.test import APIClient

from tests.api_helpers import client_for, db_snapshot
from tools_app.tool_types import TOOL_TYPES

pytestmark = pytest.mark.django_db


def component(schema, name):
    return schema["components"]["schemas"][name]


def operations(schema):
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            yield path, method, operation


def matches(pattern: str, value: str) -> bool:
    """ECMA-262 `pattern` semantics for the patterns the schema uses (search, not fullmatch)."""
    return re.search(pattern, value) is not None


#
# The schema
#


def test_request_bodies_are_json_only(schema):
    """Every request body is JSON, or multipart only where a file is uploaded (a `format: binary` property)."""
    other = []
    for path, method, operation in operations(schema):
        for media_type, content in operation.get("requestBody", {}).get("content", {}).items():
            if media_type == "application/json":
                continue
            body = content["schema"]
            if "$ref" in body:
                body = component(schema, body["$ref"].rsplit("/", 1)[1])
            uploads_a_file = any(prop.get("format") == "binary" for prop in body.get("properties", {}).values())
            if not (media_type == "multipart/form-data" and uploads_a_file):
                other.append(f"{method.upper()} {path} {media_type}")
    assert other == []


def test_every_request_body_has_an_example(schema):
    """Each request body carries at least one example (the schemathesis examples phase sends them)."""
    missing = [
        f"{method.upper()} {path}"
        for path, method, operation in operations(schema)
        if "requestBody" in operation
        and not any(content.get("examples") for content in operation["requestBody"]["content"].values())
    ]
    assert missing == []


@pytest.mark.parametrize(
    ("name", "field"),
    [("TableRequest", "name"), ("ToolRequest", "name"), ("McpInstanceRequest", "name"), ("McpInstanceRequest", "slug")],
)
def test_required_strings_have_a_minimum_length(schema, name, field):
    """A required string the server refuses blank has minLength 1 and a pattern refusing whitespace only."""
    prop = component(schema, name)["properties"][field]
    assert prop["minLength"] == 1
    assert not matches(prop["pattern"], "   ")
    assert not matches(prop["pattern"], "a\x00b")
    assert field in component(schema, name)["required"]


def test_search_query_parameters_state_their_bounds(schema):
    """q is required and non-blank, limit is bounded, method is an enum."""
    parameters = {p["name"]: p for p in schema["paths"]["/api/search/"]["get"]["parameters"]}
    assert parameters["q"]["required"] is True
    assert parameters["q"]["schema"]["minLength"] == 1
    assert parameters["q"]["schema"]["maxLength"] == 10_000  # the registry search takes long queries
    assert (parameters["limit"]["schema"]["minimum"], parameters["limit"]["schema"]["maximum"]) == (1, 50)
    assert parameters["method"]["schema"]["enum"] == ["bm25", "embedding", "hybrid", "regex"]


@pytest.mark.parametrize(
    ("value", "valid"),
    [("orders_query", True), ("a.b-c", True), (" padded ", True), ("x" * 64, True), ("bad name", False), ("", False)],
)
def test_tool_name_pattern_is_the_servers(schema, owner, value, valid):
    """The tool-name pattern accepts exactly what the server accepts (after DRF trims surrounding whitespace)."""
    # given
    pattern = component(schema, "ToolRequest")["properties"]["name"]["pattern"]
    payload = {"name": value, "type": "external", "description": "d"}

    # when
    response = client_for(owner).post("/api/tools/", payload, format="json")

    # then
    assert matches(pattern, value) is valid
    assert response.status_code == (201 if valid else 400)


@pytest.mark.parametrize(
    ("value", "valid"), [("", True), ("/orders", True), ("/a~1b/~0", True), ("orders", False), ("/a~2", False)]
)
def test_json_path_is_a_json_pointer(schema, owner, table, value, valid):
    """json_path is an RFC 6901 JSON Pointer in the schema and on the server."""
    # given
    prop = component(schema, "ToolRequest")["properties"]["json_path"]
    payload = {"name": "t", "type": "query_data", "table": table.pk, "json_path": value, "description": "d"}

    # when
    response = client_for(owner).post("/api/tools/", payload, format="json")

    # then
    assert matches(prop["pattern"], value) is valid
    assert prop["format"] == "json-pointer"
    assert response.status_code == (201 if valid else 400)


def test_tool_body_is_one_of_the_types(schema):
    """POST /api/tools/ takes a oneOf over every tool type, discriminated by `type`."""
    body = schema["paths"]["/api/tools/"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    create = component(schema, body["$ref"].rsplit("/", 1)[1])
    assert create["discriminator"]["propertyName"] == "type"
    assert sorted(create["discriminator"]["mapping"]) == sorted(TOOL_TYPES)
    query = component(schema, "QueryDataToolRequest")
    assert query["required"] == ["name", "type", "table", "description"]
    external = component(schema, "ExternalToolRequest")
    assert external["required"] == ["name", "type"]
    assert external["properties"]["table"]["enum"] == [None]


def test_json_values_refuse_null_where_the_server_does(schema):
    """`data` and `input_schema` are not nullable; `output_schema` is."""
    table = component(schema, "TableRequest")["properties"]["data"]
    assert table["allOf"] == [{"$ref": "#/components/schemas/JsonDocument"}]
    assert "nullable" not in component(schema, "JsonDocument")
    assert "nullable" not in component(schema, "InputSchema")
    assert component(schema, "OutputSchema")["nullable"] is True


def test_call_body_refuses_unknown_fields(schema):
    assert component(schema, "ToolCallRequest")["additionalProperties"] is False


@pytest.mark.parametrize(
    ("path", "method", "statuses"),
    [
        ("/api/mcp-instances/", "post", {"201", "400", "401", "403", "404", "409", "413", "429"}),
        ("/api/bindings/{id}/", "patch", {"200", "400", "401", "403", "404", "409", "413", "429"}),
        ("/api/tables/", "get", {"200", "400", "401", "404", "429"}),
        ("/api/auth/token/", "post", {"200", "400", "404", "409", "413", "429"}),
        ("/api/mcp-instances/{instance_pk}/prompts/", "post", {"201", "400", "401", "403", "404", "409", "413", "429"}),
        (
            "/api/mcp-instances/{instance_pk}/prompts/{id}/",
            "put",
            {"200", "400", "401", "403", "404", "409", "413", "429"},
        ),
    ],
)
def test_every_answer_is_documented_with_the_error_shape(schema, path, method, statuses):
    """Each error status the operation can give is listed, with the error shape and what it means."""
    responses = schema["paths"][path][method]["responses"]
    assert set(responses) == statuses
    for status in statuses - {"200", "201"}:
        assert responses[status]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}
        assert responses[status]["description"]


def test_duplicate_slug_and_name_conflict_are_documented(schema):
    """The 400 naming `slug` and the 409 NAME_CONFLICT are in the answers of the operations that give them."""
    instance = schema["paths"]["/api/mcp-instances/"]["post"]["responses"]
    binding = schema["paths"]["/api/bindings/"]["post"]["responses"]
    assert "a 400 naming `slug`" in instance["400"]["description"]
    assert binding["409"]["description"].startswith("NAME_CONFLICT: the effective name is taken on the instance")
    for responses in (instance, binding):
        assert {"400", "409"} <= set(responses)
        assert responses["400"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}


def test_links_follow_table_tools_instance_binding_key(schema):
    """201 answers link to the next steps: table -> its tools, tool -> call, instance -> keys, binding -> parts."""

    def links(path):
        return schema["paths"][path]["post"]["responses"]["201"]["links"]

    assert links("/api/tables/")["ToolsOnTable"] == {
        "operationId": "tools_by_table_list",
        "parameters": {"table_id": "$response.body#/id"},
    }
    assert links("/api/tools/")["CallTool"]["operationId"] == "tools_call_create"
    assert links("/api/mcp-instances/")["IssueKey"] == {
        "operationId": "mcp_instances_keys_create",
        "parameters": {"instance_pk": "$response.body#/id"},
    }
    assert links("/api/bindings/")["GetTool"]["parameters"] == {"id": "$response.body#/tool"}
    assert links("/api/mcp-instances/{instance_pk}/keys/")["RevokeKey"]["parameters"] == {
        "instance_pk": "$request.path.instance_pk",
        "id": "$response.body#/id",
    }
    targets = {op["operationId"] for _, _, op in operations(schema)}
    for path, method, operation in operations(schema):
        for link in operation["responses"].get("201", {}).get("links", {}).values():
            assert link["operationId"] in targets, (path, method)


def test_prompt_operations_state_their_rules_and_links(schema):
    """The prompt body refuses unknown fields, names follow the tool-name pattern, arguments are a bounded
    list of strict objects, the 409 is NAME_CONFLICT, and a new prompt links to reading, changing and deleting it."""
    body = component(schema, "PromptRequest")
    arguments = body["properties"]["arguments"]
    responses = schema["paths"]["/api/mcp-instances/{instance_pk}/prompts/"]["post"]["responses"]
    assert body["additionalProperties"] is False
    assert body["required"] == ["name", "template"]
    assert matches(body["properties"]["name"]["pattern"], "weekly_report")
    assert not matches(body["properties"]["name"]["pattern"], "weekly report")
    assert (arguments["type"], arguments["maxItems"]) == ("array", 20)
    assert arguments["items"]["additionalProperties"] is False
    assert arguments["items"]["required"] == ["name"]
    assert not matches(arguments["items"]["properties"]["name"]["pattern"], "2x")
    assert responses["409"]["description"].startswith("NAME_CONFLICT: a prompt of the instance already has that name")
    assert sorted(responses["201"]["links"]) == ["DeletePrompt", "GetPrompt", "UpdatePrompt"]
    assert responses["201"]["links"]["GetPrompt"]["parameters"] == {
        "instance_pk": "$request.path.instance_pk",
        "id": "$response.body#/id",
    }
    instance_links = schema["paths"]["/api/mcp-instances/"]["post"]["responses"]["201"]["links"]
    assert instance_links["AddPrompt"] == {
        "operationId": "mcp_instances_prompts_create",
        "parameters": {"instance_pk": "$response.body#/id"},
    }


#
# The server
#


def test_a_form_body_is_a_415(owner):
    """Only JSON bodies are read: a form post is 415 UNSUPPORTED_MEDIA_TYPE and writes nothing."""
    # given
    before = db_snapshot()

    # when
    response = client_for(owner).post("/api/tables/", {"name": "t"}, format="multipart")

    # then
    assert response.status_code == 415
    assert response.json()["error"] == "UNSUPPORTED_MEDIA_TYPE"
    assert db_snapshot() == before


@pytest.mark.parametrize(
    ("url", "payload", "field", "message"),
    [
        ("/api/tables/", {"name": 5}, "name", "Not a valid string."),
        ("/api/mcp-instances/", {"name": "S", "slug": "s", "enabled": "true"}, "enabled", "Must be a valid boolean."),
        ("/api/mcp-instances/", {"name": "S", "slug": "s", "enabled": 1}, "enabled", "Must be a valid boolean."),
        (
            "/api/mcp-instances/",
            {"name": "S", "slug": "s", "max_result_bytes": "5000"},
            "max_result_bytes",
            "A valid integer is required.",
        ),
        (
            "/api/tools/",
            {"name": "t", "type": "query_data", "table": "1", "description": "d"},
            "table",
            "Incorrect type. Expected pk value, received str.",
        ),
    ],
)
def test_numbers_and_strings_are_not_coerced(owner, table, url, payload, field, message):
    """A JSON value of the wrong type is refused naming the field, never coerced; nothing is written."""
    # given
    before = db_snapshot()

    # when
    response = client_for(owner).post(url, payload, format="json")

    # then
    assert response.status_code == 400
    assert response.json()["fields"][field] == [message]
    assert db_snapshot() == before


def test_an_api_key_label_must_be_a_string(owner, make_user):
    """`{"label": 0}` is refused (it was stored as "0")."""
    # given
    from tools_app import services

    instance = services.instance_create(owner=owner, name="Shop", slug="shop")
    before = db_snapshot()

    # when
    response = client_for(owner).post(f"/api/mcp-instances/{instance.pk}/keys/", {"label": 0}, format="json")

    # then
    assert response.status_code == 400
    assert response.json()["fields"] == {"label": ["Not a valid string."]}
    assert db_snapshot() == before


@pytest.mark.parametrize(
    ("url", "parameter"),
    [
        ("/api/tools/?type=bogus", "type"),
        ("/api/mcp-instances/?discovery=bogus", "discovery"),
        ("/api/mcp-instances/?enabled=maybe", "enabled"),
        ("/api/bindings/?enabled=yes", "enabled"),
        ("/api/tools/?table=abc", "table"),
        ("/api/tables/?ordering=nmae", "ordering"),
        ("/api/tables/?page_size=AAA", "page_size"),
        ("/api/search/?q=x&limit=0", "limit"),
    ],
)
def test_bad_query_parameters_are_a_400_naming_them(owner, url, parameter):
    """A filter value with a typo is refused, never ignored (which answered an unfiltered list)."""
    response = client_for(owner).get(url)
    assert response.status_code == 400
    assert response.json()["error"] == "VALIDATION_ERROR"
    assert list(response.json()["fields"]) == [parameter]


def test_bad_export_format_and_search_method_are_refused(owner):
    """`format` and `method` outside their enums are 400s (VALIDATION_ERROR naming format; INVALID_SEARCH_METHOD)."""
    from tools_app import services

    tool = services.tool_create(owner=owner, name="x", type="external", description="d")
    export = client_for(owner).get(f"/api/tools/{tool.pk}/export/?format=yaml")
    search = client_for(owner).get("/api/search/?q=x&method=bogus")
    assert (export.status_code, list(export.json()["fields"])) == (400, ["format"])
    assert (search.status_code, search.json()["error"]) == (400, "INVALID_SEARCH_METHOD")


def test_the_browsable_api_still_renders_and_posts_json(owner):
    """The browsable API page renders, and its raw-data form (JSON) creates objects with a session and CSRF."""
    # given
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(owner)
    page = client.get("/api/tables/", HTTP_ACCEPT="text/html")
    token = page.cookies["csrftoken"].value if "csrftoken" in page.cookies else client.cookies["csrftoken"].value

    # when
    created = client.post("/api/tables/", {"name": "t"}, format="json", HTTP_X_CSRFTOKEN=token)
    refused = client.post("/api/tables/", {"name": "u"}, format="json")

    # then
    assert page.status_code == 200
    assert b"application/json" in page.content
    assert created.status_code == 201
    assert refused.status_code == 403


#
# The change guard and the declarative setup
#


@pytest.mark.parametrize(
    ("path", "method"),
    [
        ("/api/tables/{id}/", "delete"),
        ("/api/tools/{id}/", "delete"),
        ("/api/tools/{id}/", "patch"),
        ("/api/tools/{id}/", "put"),
        ("/api/bindings/{id}/", "delete"),
        ("/api/bindings/{id}/", "patch"),
        ("/api/mcp-instances/{id}/", "delete"),
        ("/api/mcp-instances/{id}/", "patch"),
        ("/api/setup/apply/", "post"),
    ],
)
def test_in_use_and_force_are_documented(schema, path, method):
    """Each operation the change guard can refuse documents 409 IN_USE and takes ?force= (a boolean)."""
    operation = schema["paths"][path][method]
    parameters = {p["name"]: p for p in operation["parameters"] if p["in"] == "query"}
    assert parameters["force"]["schema"] == {"type": "boolean"}
    assert "IN_USE" in operation["responses"]["409"]["description"]
    assert operation["responses"]["409"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Error"
    }


def test_setup_document_is_the_services_schema(schema):
    """Plan and apply take a SetupDocument (required), export answers one; its structure is the service's."""
    document = component(schema, "SetupDocument")
    assert document["required"] == ["toolhub_setup"]
    assert document["additionalProperties"] is False
    assert document["properties"]["toolhub_setup"] == {"type": "integer", "enum": [1]}
    tool = document["properties"]["tools"]["items"]
    assert tool["required"] == ["name", "type"]
    assert tool["properties"]["table"] == {"type": "string", "nullable": True}
    ref = {"$ref": "#/components/schemas/SetupDocument"}
    for path in ("/api/setup/plan/", "/api/setup/apply/"):
        body = schema["paths"][path]["post"]["requestBody"]
        assert body["required"] is True
        assert body["content"]["application/json"]["schema"] == ref
    assert (
        schema["paths"]["/api/setup/export/"]["get"]["responses"]["200"]["content"]["application/json"]["schema"] == ref
    )


def test_generate_tools_documents_both_answers(schema):
    """201 when a tool was created, 200 when every tool was generated before; both carry the changes."""
    responses = schema["paths"]["/api/tables/{id}/generate-tools/"]["post"]["responses"]
    assert {"200", "201"} <= set(responses)
    changes = component(schema, "GeneratedTools")["properties"]["changes"]
    assert changes == {"type": "array", "items": {"$ref": "#/components/schemas/ToolSetChange"}}
    assert component(schema, "ToolSetChangeActionEnum")["enum"] == ["create", "update", "unchanged", "kept"]
