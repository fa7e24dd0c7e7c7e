"""Registry tools through tool_types.execute.execute(), over an instance (MCP) and over a user (API) (SPEC §5)."""

import pytest

from tools_app.execution.executors import execute
from tools_app.kernel.errors import ToolError
from tools_app.models import Binding, Tool
from tools_app.registry import embedding
from tools_app.registry.instance_scope import InstanceScope
from tools_app.registry.scope import UserScope


@pytest.fixture
def bound_catalog(owner, table, make_tool, instance, bind):
    """An instance with two data tools, one external tool and every registry tool, all bound."""
    tools = {
        "orders": make_tool(
            owner,
            table,
            name="query_orders",
            description="Query customer orders with JMESPath.",
            metadata={"category": "shop", "tags": ["orders", "sales"]},
        ),
        "refunds": make_tool(
            owner,
            table,
            type="delete",
            name="delete_refunds",
            description="Delete refund records by key.",
            metadata={"category": "shop"},
        ),
        "pr": make_tool(
            owner,
            None,
            type="external",
            name="github.create_pull_request",
            description="",
            input_schema={"type": "object", "properties": {"title": {"type": "string"}}},
            metadata={"mcp_server": "github-mcp", "tags": ["github"]},
        ),
    }
    for kind in (
        "search_tools",
        "get_tool_definition",
        "list_tools_by_category",
        "get_tool_usage_guide",
        "register_tool",
    ):
        tools[kind] = make_tool(owner, None, type=kind, name=kind, description=f"Registry tool {kind}.")
    for tool in tools.values():
        bind(instance, tool)
    return tools


def run(tool, scope, **arguments):
    return execute(tool=tool, arguments=arguments, scope=scope)


@pytest.fixture(params=["instance", "user"])
def scope(request, instance, owner):
    return InstanceScope(instance) if request.param == "instance" else UserScope(owner)


def test_search_tools_ranks_the_matching_tool_first(bound_catalog, scope):
    """search_tools over either scope returns ranked results with 0–1 scores and a reason."""
    # when
    result = run(bound_catalog["search_tools"], scope, query="orders", limit=3)
    # then
    assert result["method"] == "bm25"
    assert result["results"][0]["tool_name"] == "query_orders"
    assert result["results"][0]["tool_id"] == bound_catalog["orders"].pk
    assert all(0 < hit["score"] <= 1 for hit in result["results"])
    assert result["results"][0]["match_reason"] == "keywords: orders in name"
    assert result["markdown"].startswith("## Search results for `orders` (bm25)\n\n1. `query_orders`\n")


def test_search_tools_unknown_method_is_invalid_search_method(bound_catalog, scope):
    """An unknown search_method is INVALID_SEARCH_METHOD naming the methods (SPEC §5)."""
    # when
    with pytest.raises(ToolError) as caught:
        run(bound_catalog["search_tools"], scope, query="orders", search_method="fuzzy")
    # then
    assert caught.value.code == "INVALID_SEARCH_METHOD"
    assert "regex, bm25, embedding, hybrid" in caught.value.message


def test_search_tools_embedding_without_the_extra_is_search_unavailable(bound_catalog, scope, monkeypatch):
    """Without the embedding extra, embedding and hybrid answer SEARCH_UNAVAILABLE; bm25 still works."""
    # given
    embedding.reset()
    monkeypatch.setattr(embedding, "Encoder", _missing_extra)
    try:
        for method in ("embedding", "hybrid"):
            # when
            with pytest.raises(ToolError) as caught:
                run(bound_catalog["search_tools"], scope, query="orders", search_method=method)
            # then
            assert caught.value.code == "SEARCH_UNAVAILABLE"
            assert "requirements-embedding.txt" in caught.value.message
        assert run(bound_catalog["search_tools"], scope, query="orders")["count"] >= 1
    finally:
        embedding.reset()


def _missing_extra():
    raise embedding.EmbeddingUnavailable("missing module 'onnxruntime'")


def test_get_tool_definition_returns_the_definition_and_bumps_use_count(bound_catalog, scope):
    """get_tool_definition returns name, schemas, category, tags, server; the target's use count +1."""
    # when
    result = run(bound_catalog["get_tool_definition"], scope, tool_name="github.create_pull_request")
    # then
    assert result["name"] == "github.create_pull_request"
    assert result["input_schema"] == {"type": "object", "properties": {"title": {"type": "string"}}}
    assert result["output_schema"] is None
    assert result["category"] == "external"
    assert result["tags"] == ["github"]
    assert result["mcp_server"] == "github-mcp"
    pr = Tool.objects.get(pk=bound_catalog["pr"].pk)
    assert pr.use_count == 1
    assert pr.last_used is not None


def test_get_tool_definition_unknown_name_is_tool_not_found(bound_catalog, scope):
    """An unknown tool name is TOOL_NOT_FOUND; no use count moves."""
    # when
    with pytest.raises(ToolError) as caught:
        run(bound_catalog["get_tool_definition"], scope, tool_name="no.such.tool")
    # then
    assert caught.value.code == "TOOL_NOT_FOUND"
    assert "'no.such.tool'" in caught.value.message
    assert sum(Tool.objects.values_list("use_count", flat=True)) == 0


def test_get_tool_definition_uses_effective_names_on_an_instance(bound_catalog, instance, owner):
    """Over MCP a tool is found by its binding's name override, not its own name (SPEC §8)."""
    # given
    from tools_app.services import binding_update

    binding_update(force=True, binding=Binding.objects.get(tool=bound_catalog["orders"]), name_override="orders_v2")
    scope = InstanceScope(instance)
    # when
    result = run(bound_catalog["get_tool_definition"], scope, tool_name="orders_v2")
    # then
    assert result["name"] == "orders_v2"
    with pytest.raises(ToolError) as caught:
        run(bound_catalog["get_tool_definition"], scope, tool_name="query_orders")
    assert caught.value.code == "TOOL_NOT_FOUND"


def test_list_tools_by_category_all_counts_each_category(bound_catalog, scope):
    """category=all lists every category with its count."""
    # when
    result = run(bound_catalog["list_tools_by_category"], scope, category="all")
    # then
    assert result["categories"] == [
        {"category": "external", "count": 1},
        {"category": "registry", "count": 5},
        {"category": "shop", "count": 2},
    ]
    assert result["total_tools"] == 8


def test_list_tools_by_category_lists_a_category_up_to_limit(bound_catalog, scope):
    """A category lists its tools by name, at most `limit`, with the full count."""
    # when
    result = run(bound_catalog["list_tools_by_category"], scope, category="shop", limit=1)
    # then
    assert result["count"] == 2
    assert [tool["tool_name"] for tool in result["tools"]] == ["delete_refunds"]
    assert result["truncated"] is True


def test_an_integral_float_limit_is_that_integer(bound_catalog, scope):
    """JSON Schema counts 1.0 as an integer, so limit=1.0 passes the schema and means 1 (not a crash)."""
    # when
    listed = run(bound_catalog["list_tools_by_category"], scope, category="shop", limit=1.0)
    found = run(bound_catalog["search_tools"], scope, query="orders refund", limit=1.0)
    # then
    assert [tool["tool_name"] for tool in listed["tools"]] == ["delete_refunds"]
    assert found["count"] == 1


def test_list_tools_by_category_unknown_is_invalid_category_with_the_categories(bound_catalog, scope):
    """An unknown category is INVALID_CATEGORY listing the categories that exist."""
    # when
    with pytest.raises(ToolError) as caught:
        run(bound_catalog["list_tools_by_category"], scope, category="weather")
    # then
    assert caught.value.code == "INVALID_CATEGORY"
    assert caught.value.details == {"categories": ["external", "registry", "shop"]}
    assert "external, registry, shop" in caught.value.message


def test_get_tool_usage_guide_warns_for_unknown_names(bound_catalog, scope):
    """The guide tool covers the named tools and warns (not fails) for unknown names."""
    # when
    result = run(bound_catalog["get_tool_usage_guide"], scope, tool_names=["query_orders", "nope"])
    # then
    assert result["metadata"]["filtered_count"] == 1
    assert result["metadata"]["invalid_names"] == ["nope"]
    assert result["metadata"]["total_tools"] == 8
    assert result["warnings"][0].startswith("Tool 'nope' not found. Available: delete_refunds, ")
    assert "### `query_orders`" in result["content"]


def test_disabled_bindings_are_outside_the_instance_scope(bound_catalog, instance, owner):
    """A disabled binding's tool is not searchable or definable on the instance, but is over the API."""
    # given
    from tools_app.services import binding_update

    binding_update(binding=Binding.objects.get(tool=bound_catalog["orders"]), enabled=False)
    # when
    over_mcp = run(bound_catalog["search_tools"], InstanceScope(instance), query="orders")
    over_api = run(bound_catalog["search_tools"], UserScope(owner), query="orders")
    # then
    assert "query_orders" not in [hit["tool_name"] for hit in over_mcp["results"]]
    assert over_api["results"][0]["tool_name"] == "query_orders"


def test_definition_of_a_disabled_binding_is_tool_not_found(bound_catalog, instance):
    """get_tool_definition of a tool whose binding is disabled is TOOL_NOT_FOUND, not TOOL_DISABLED: the enabled
    bindings are the only source of what an instance exposes (SPEC §2.4, §5), so a disabled one is not revealed.
    Nothing is counted."""
    # given
    from tools_app.services import binding_update

    binding_update(binding=Binding.objects.get(tool=bound_catalog["orders"]), enabled=False)
    # when
    with pytest.raises(ToolError) as caught:
        run(bound_catalog["get_tool_definition"], InstanceScope(instance), tool_name="query_orders")
    # then
    assert caught.value.code == "TOOL_NOT_FOUND"
    assert caught.value.message.startswith("No tool named 'query_orders' here.")
    bound_catalog["orders"].refresh_from_db()
    assert bound_catalog["orders"].use_count == 0


def test_register_tool_creates_and_binds_an_external_tool(bound_catalog, make_instance, owner, bind):
    """On an instance that allows it, register_tool creates an external tool of the owner and binds it."""
    # given
    open_instance = make_instance(owner, slug="open", allow_registration=True)
    bind(open_instance, bound_catalog["register_tool"])
    scope = InstanceScope(open_instance)
    # when
    result = run(
        bound_catalog["register_tool"],
        scope,
        name="data.processor",
        description="Process data from various sources.",
        category="data",
        tags=["etl"],
        mcp_server="etl-server",
    )
    # then
    tool = Tool.objects.get(pk=result["tool_id"])
    assert (tool.type, tool.owner, tool.category, tool.tags) == ("external", owner, "data", ["etl"])
    assert tool.metadata["mcp_server"] == "etl-server"
    assert Binding.objects.filter(mcp_instance=open_instance, tool=tool, enabled=True).count() == 1
    found = run(bound_catalog["search_tools"], scope, query="process data")
    assert found["results"][0]["tool_name"] == "data.processor"


def test_register_tool_where_not_allowed_fails_and_writes_nothing(bound_catalog, scope):
    """Without allow_registration (and always over the API) register_tool is REGISTRATION_FAILED."""
    # given
    tools_before, bindings_before = Tool.objects.count(), Binding.objects.count()
    # when
    with pytest.raises(ToolError) as caught:
        run(bound_catalog["register_tool"], scope, name="x.tool", description="A tool to register.")
    # then
    assert caught.value.code == "REGISTRATION_FAILED"
    assert (Tool.objects.count(), Binding.objects.count()) == (tools_before, bindings_before)


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ({"name": "Query_Orders", "description": "Clashes ignoring case."}, "already used by the tool 'query_orders'"),
        ({"name": "bad name!", "description": "Invalid characters."}, "Tool names are 1–64 characters"),
        ({"name": "cat.tool", "description": "Bad category.", "category": "Not A Slug"}, "metadata.category"),
        ({"name": "schema.tool", "description": "Bad schema.", "input_schema": {"type": "string"}}, "type"),
    ],
)
def test_register_tool_failures_give_the_reason_and_write_nothing(bound_catalog, instance, arguments, reason):
    """A name conflict or an invalid tool is REGISTRATION_FAILED with the reason; no tool, no binding."""
    # given
    from tools_app.services import instance_update

    instance_update(instance=instance, allow_registration=True)
    tools_before, bindings_before = Tool.objects.count(), Binding.objects.count()
    # when
    with pytest.raises(ToolError) as caught:
        run(bound_catalog["register_tool"], InstanceScope(instance), **arguments)
    # then
    assert caught.value.code == "REGISTRATION_FAILED"
    assert reason in caught.value.message
    assert (Tool.objects.count(), Binding.objects.count()) == (tools_before, bindings_before)


def test_external_tools_are_not_callable(bound_catalog, scope):
    """An external tool is catalogued but execute() refuses it with TOOL_NOT_CALLABLE naming the server."""
    # when
    with pytest.raises(ToolError) as caught:
        run(bound_catalog["pr"], scope, title="x")
    # then
    assert caught.value.code == "TOOL_NOT_CALLABLE"
    assert "github-mcp" in caught.value.message
