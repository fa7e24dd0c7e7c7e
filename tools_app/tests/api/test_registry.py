"""Registry endpoints of the JSON API (SPEC §6): search, an instance's guide and export, a tool's export."""

import pytest
from rest_framework.test import APIClient

from tools_app.models import Binding, Tool
from tools_app.paging import cursor_argument_schema


def client_for(user=None):
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


@pytest.fixture
def mixed_shop(owner, table, make_tool, instance, bind):
    """The owner's instance with a data tool and an external tool with a dotted name, both bound."""
    orders = make_tool(
        owner,
        table,
        name="query_orders",
        description="Query customer orders.",
        metadata={"category": "shop", "tags": ["orders"]},
    )
    pr = make_tool(
        owner,
        None,
        type="external",
        name="github.create_pull_request",
        description="Open a pull request.",
        input_schema={"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]},
        metadata={"mcp_server": "github-mcp"},
    )
    unbound = make_tool(owner, table, name="unbound_orders", description="Orders, not on the instance.")
    bind(instance, orders)
    bind(instance, pr)
    return {"orders": orders, "pr": pr, "unbound": unbound}


def test_search_over_the_callers_tools(owner, mixed_shop):
    """GET /api/search/ searches every tool of the caller by default (bm25)."""
    # when
    response = client_for(owner).get("/api/search/", {"q": "orders"})
    # then
    assert response.status_code == 200
    body = response.json()
    assert body["method"] == "bm25"
    assert [hit["tool_name"] for hit in body["results"]] == ["query_orders", "unbound_orders"]
    assert set(body["results"][0]) == {"tool_name", "tool_id", "description", "score", "match_reason"}
    assert body["results"][0]["tool_id"] == mixed_shop["orders"].pk


def test_search_over_one_instance(owner, mixed_shop, instance):
    """mcp_instance narrows the search to that instance's enabled bindings."""
    # when
    response = client_for(owner).get("/api/search/", {"q": "orders", "mcp_instance": instance.pk, "limit": 5})
    # then
    assert response.status_code == 200
    assert [hit["tool_name"] for hit in response.json()["results"]] == ["query_orders"]


def test_search_unknown_method_is_a_400_invalid_search_method(owner, mixed_shop):
    """An unknown method is 400 INVALID_SEARCH_METHOD."""
    # when
    response = client_for(owner).get("/api/search/", {"q": "orders", "method": "psychic"})
    # then
    assert response.status_code == 400
    assert response.json()["error"] == "INVALID_SEARCH_METHOD"


@pytest.mark.parametrize(
    ("params", "field"),
    [({}, "q"), ({"q": "x", "limit": 0}, "limit"), ({"q": "x", "limit": "many"}, "limit")],
)
def test_search_bad_parameters_are_a_400_naming_them(owner, mixed_shop, params, field):
    """A missing q or a bad limit is 400 VALIDATION_ERROR naming the parameter."""
    # when
    response = client_for(owner).get("/api/search/", params)
    # then
    assert response.status_code == 400
    assert response.json()["error"] == "VALIDATION_ERROR"
    assert list(response.json()["fields"]) == [field]


def test_search_on_another_users_instance_is_a_400_naming_it(other_user, mixed_shop, instance):
    """Another user's instance id reads as nonexistent: 400 naming mcp_instance, no results."""
    # when
    response = client_for(other_user).get("/api/search/", {"q": "orders", "mcp_instance": instance.pk})
    # then
    assert response.status_code == 400
    assert response.json()["fields"] == {"mcp_instance": [f"No MCP instance with id {instance.pk}."]}


def test_search_hides_other_users_tools(other_user, mixed_shop):
    """Over the API a user only ever finds its own tools."""
    # when
    response = client_for(other_user).get("/api/search/", {"q": "orders"})
    # then
    assert response.status_code == 200
    assert response.json()["results"] == []


@pytest.mark.parametrize(
    "path", ["/api/search/?q=x", "/api/mcp-instances/1/guide/", "/api/mcp-instances/1/export/", "/api/tools/1/export/"]
)
def test_registry_endpoints_need_credentials(mixed_shop, path):
    """No credentials: 401 and no data."""
    # when
    response = client_for().get(path)
    # then
    assert response.status_code == 401
    assert "results" not in response.json()
    assert "content" not in response.json()


def test_guide_of_an_instance(owner, mixed_shop, instance):
    """GET /api/mcp-instances/<id>/guide/ is the guide response of SPEC §5 over the instance's bindings."""
    # when
    response = client_for(owner).get(
        f"/api/mcp-instances/{instance.pk}/guide/", {"tool_names": "query_orders,ghost", "category": "shop"}
    )
    # then
    assert response.status_code == 200
    body = response.json()
    assert "| Tools: 1 | Category Filter: `shop`" in body["content"]
    assert body["metadata"]["total_tools"] == 2
    assert body["metadata"]["filtered_count"] == 1
    assert body["metadata"]["invalid_names"] == ["ghost"]
    assert body["warnings"] == ["Tool 'ghost' not found. Available: github.create_pull_request, query_orders"]


@pytest.mark.parametrize("suffix", ["guide/", "export/?format=openai"])
def test_another_users_instance_is_a_404(other_user, mixed_shop, instance, suffix):
    """Another user's instance is a 404 for the guide and the export (SPEC §2)."""
    # when
    response = client_for(other_user).get(f"/api/mcp-instances/{instance.pk}/{suffix}")
    # then
    assert response.status_code == 404
    assert "content" not in response.json()
    assert "tools" not in response.json()


def test_superuser_sees_any_instances_guide(superuser, mixed_shop, instance):
    """A superuser may read every instance's guide."""
    # when
    response = client_for(superuser).get(f"/api/mcp-instances/{instance.pk}/guide/")
    # then
    assert response.status_code == 200
    assert response.json()["metadata"]["total_tools"] == 2


def test_export_an_instance_as_openai_maps_dotted_names(owner, mixed_shop, instance):
    """OpenAI function names cannot hold '.', so it becomes '_' and name_map says so."""
    # when
    response = client_for(owner).get(f"/api/mcp-instances/{instance.pk}/export/", {"format": "openai"})
    # then
    assert response.status_code == 200
    body = response.json()
    assert body["format"] == "openai"
    assert body["tools"][0] == {
        "type": "function",
        "function": {
            "name": "github_create_pull_request",
            "description": "Open a pull request.",
            "parameters": {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]},
        },
    }
    assert [tool["function"]["name"] for tool in body["tools"]] == ["github_create_pull_request", "query_orders"]
    assert body["name_map"] == {"github_create_pull_request": "github.create_pull_request"}
    assert len(body["notes"]) == 1


def test_export_an_instance_as_mcp_and_anthropic(owner, mixed_shop, instance):
    """mcp keeps names and uses inputSchema; anthropic maps names and uses input_schema."""
    # when
    mcp = client_for(owner).get(f"/api/mcp-instances/{instance.pk}/export/", {"format": "mcp"}).json()
    anthropic = client_for(owner).get(f"/api/mcp-instances/{instance.pk}/export/?format=anthropic").json()
    # then
    assert [t["name"] for t in mcp["tools"]] == ["github.create_pull_request", "query_orders"]
    assert mcp["tools"][0]["inputSchema"]["required"] == ["title"]
    assert mcp["name_map"] == {}
    assert anthropic["tools"][0] == {
        "name": "github_create_pull_request",
        "description": "Open a pull request.",
        "input_schema": {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]},
    }


def test_export_unknown_format_is_a_400_naming_format(owner, mixed_shop, instance):
    """An unknown format is 400 VALIDATION_ERROR naming `format`."""
    # when
    response = client_for(owner).get(f"/api/mcp-instances/{instance.pk}/export/", {"format": "yaml"})
    # then
    assert response.status_code == 400
    assert response.json()["error"] == "VALIDATION_ERROR"
    assert list(response.json()["fields"]) == ["format"]


def test_export_one_tool(owner, mixed_shop):
    """GET /api/tools/<id>/export/ exports that tool under its own name."""
    # when
    response = client_for(owner).get(f"/api/tools/{mixed_shop['orders'].pk}/export/", {"format": "anthropic"})
    # then
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 1
    assert body["tools"][0]["name"] == "query_orders"
    # a query_data tool pages a long list: its schema gains the optional `cursor` (docs/paging.md)
    schema = Tool.objects.get(pk=mixed_shop["orders"].pk).input_schema
    assert body["tools"][0]["input_schema"] == {
        **schema,
        "properties": {**schema["properties"], "cursor": cursor_argument_schema()},
    }


def test_export_another_users_tool_is_a_404(other_user, mixed_shop):
    """Another user's tool is a 404."""
    # when
    response = client_for(other_user).get(f"/api/tools/{mixed_shop['orders'].pk}/export/")
    # then
    assert response.status_code == 404


def test_registry_paths_are_in_the_openapi_schema(owner):
    """The endpoints are documented in /api/schema/."""
    # when
    response = client_for(owner).get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    # then
    assert response.status_code == 200
    paths = response.json()["paths"]
    assert {
        "/api/search/",
        "/api/mcp-instances/{id}/guide/",
        "/api/mcp-instances/{id}/export/",
        "/api/tools/{id}/export/",
    } <= set(paths)


def test_search_with_an_out_of_range_instance_id_is_a_400(owner, mixed_shop):
    """An instance id beyond 64 bits is a 400 naming mcp_instance, never a database overflow (500)."""
    # when
    response = client_for(owner).get("/api/search/", {"q": "orders", "mcp_instance": 2**70})
    # then
    assert response.status_code == 400
    assert list(response.json()["fields"]) == ["mcp_instance"]


def test_register_tool_called_through_the_api_says_it_needs_an_instance(owner, mixed_shop, make_tool):
    """POST /api/tools/<id>/call/ runs a register_tool tool with no instance: 400 REGISTRATION_FAILED saying
    registration needs an MCP instance that allows it (not that a setting is off); nothing is written."""
    # given
    register = make_tool(owner, None, type="register_tool", name="register_tool", description="Register a tool.")
    tools_before = list(Tool.objects.order_by("pk").values_list("pk", "name", "use_count"))
    bindings_before = Binding.objects.count()
    # when
    response = client_for(owner).post(
        f"/api/tools/{register.pk}/call/",
        {"arguments": {"name": "x.tool", "description": "A tool to register."}},
        format="json",
    )
    # then
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "REGISTRATION_FAILED"
    assert body["message"] == (
        "register_tool needs an MCP instance that allows registration: it creates the tool and binds it to that "
        "instance, and a call through the API has no instance. Call it over MCP on an instance with "
        "allow_registration on."
    )
    register.refresh_from_db()
    assert list(Tool.objects.exclude(pk=register.pk).order_by("pk").values_list("pk", "name", "use_count")) == [
        row for row in tools_before if row[0] != register.pk
    ]
    assert Binding.objects.count() == bindings_before
