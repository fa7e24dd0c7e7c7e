"""SPEC §4.3–§4.5, §5: every registry tool over MCP, in process, over the instance's enabled bindings.

Registry results that carry Markdown (search_tools, list_tools_by_category: `markdown`; the usage guide:
`content`) send it as the text content for the model; structuredContent stays the full result.
"""

import json

import pytest
from django.utils import timezone

from mcp_app.tests.mcp_harness import ERAS, LEGACY, Harness
from tests import factories
from tests.module_data import fixtures_built_once
from tools_app.models import Binding, CallLog, Tool
from tools_app.services import api_key_issue, binding_create, instance_create, instance_update

REGISTRY_NAMES = [
    "get_tool_definition",
    "get_tool_usage_guide",
    "list_tools_by_category",
    "register_tool",
    "search_tools",
]


def build_registry_shop() -> dict:
    """Instance 'shop': the five registry tools and two data tools, one of them bound under an override."""
    owner = factories.user("owner")
    table = factories.table(owner)
    instance = instance_create(owner=owner, slug="shop", name="Shop")
    for name in REGISTRY_NAMES:
        binding_create(
            mcp_instance=instance,
            tool=factories.tool(owner, type=name, name=name, description=f"Registry tool {name}."),
        )
    query = factories.tool(owner, table, name="orders_query_v2", description="Query the shop's orders with JMESPath.")
    binding_create(mcp_instance=instance, tool=query, name_override="orders_query")
    select = factories.tool(owner, table, type="select", name="orders_by_id", description="Orders by id.")
    binding_create(mcp_instance=instance, tool=select)
    key = api_key_issue(mcp_instance=instance, label="test")[1]
    return {"owner": owner, "table": table, "instance": instance, "query": query, "select": select, "key": key}


_registry_shop_once, registry_shop = fixtures_built_once("registry_shop", build_registry_shop)


def call(registry_shop, name, arguments=None, *, era=LEGACY):
    return Harness().call("shop", registry_shop["key"], name, arguments, era=era)


def text_of(result):
    assert len(result["content"]) == 1
    assert result["content"][0]["type"] == "text"
    return result["content"][0]["text"]


def writes_snapshot():
    return Tool.objects.count(), Binding.objects.count(), list(Tool.objects.values_list("name", flat=True))


#
# search_tools
#


@pytest.mark.parametrize("era", ERAS)
def test_search_sends_markdown_text_and_the_full_result(registry_shop, era):
    """search_tools: the text is the result's Markdown; structuredContent is the whole result (SPEC §5)."""
    # when
    result = call(registry_shop, "search_tools", {"query": "orders"}, era=era)["result"]
    # then
    assert result["isError"] is False
    structured = result["structuredContent"]
    assert text_of(result) == structured["markdown"]
    assert text_of(result).startswith("## Search results for `orders` (bm25)\n\n1. `orders_by_id`\n")
    assert [hit["tool_name"] for hit in structured["results"]] == ["orders_by_id", "orders_query"]
    assert structured["results"][1]["tool_id"] == registry_shop["query"].pk
    assert structured["count"] == 2
    assert all(0 <= hit["score"] <= 1 for hit in structured["results"])
    assert set(structured) == {"query", "method", "count", "results", "markdown"}


def test_search_covers_only_this_instances_enabled_bindings(registry_shop, make_tool, bind, make_instance):
    """A disabled binding and another instance's tool are not found; effective names are shown."""
    # given
    owner, table = registry_shop["owner"], registry_shop["table"]
    hidden = make_tool(owner, table, name="orders_hidden", description="Hidden orders tool.")
    bind(registry_shop["instance"], hidden, enabled=False)
    other = make_instance(owner, slug="other")
    bind(other, make_tool(owner, table, name="orders_elsewhere", description="Orders on another instance."))
    # when
    structured = call(registry_shop, "search_tools", {"query": "orders", "limit": 10})["result"]["structuredContent"]
    # then
    assert [hit["tool_name"] for hit in structured["results"]] == ["orders_by_id", "orders_query"]


def test_search_with_an_unknown_method_is_invalid_search_method(registry_shop):
    """SPEC §5: an unknown method is INVALID_SEARCH_METHOD, as an isError result."""
    # when
    result = call(registry_shop, "search_tools", {"query": "orders", "search_method": "telepathy"})["result"]
    # then
    assert result["isError"] is True
    assert text_of(result).startswith("INVALID_SEARCH_METHOD: ")
    assert result["structuredContent"]["error"] == "INVALID_SEARCH_METHOD"
    assert result["structuredContent"]["details"]["methods"] == ["regex", "bm25", "embedding", "hybrid"]


def test_search_by_regex(registry_shop):
    """The regex method matches names, over MCP too."""
    # when
    structured = call(registry_shop, "search_tools", {"query": "^orders_by", "search_method": "regex"})["result"][
        "structuredContent"
    ]
    # then
    assert structured["method"] == "regex"
    assert [hit["tool_name"] for hit in structured["results"]] == ["orders_by_id"]


#
# get_tool_definition
#


@pytest.mark.parametrize("era", ERAS)
def test_definition_is_json_text_under_the_effective_name_and_bumps_use(registry_shop, era):
    """get_tool_definition has no Markdown: the JSON is the text; the defined tool's use count goes up by one."""
    # when
    result = call(registry_shop, "get_tool_definition", {"tool_name": "orders_query"}, era=era)["result"]
    # then
    assert result["isError"] is False
    structured = result["structuredContent"]
    assert json.loads(text_of(result)) == structured
    assert structured["name"] == "orders_query"
    assert structured["tool_id"] == registry_shop["query"].pk
    assert structured["description"] == "Query the shop's orders with JMESPath."
    assert structured["category"] == "read"
    assert structured["input_schema"]["required"] == ["query"]
    registry_shop["query"].refresh_from_db()
    assert registry_shop["query"].use_count == 1


def test_definition_of_an_unknown_tool_is_tool_not_found(registry_shop):
    """An unknown (or only differently-named) tool is TOOL_NOT_FOUND; no use count moves."""
    # when
    result = call(registry_shop, "get_tool_definition", {"tool_name": "orders_query_v2"})["result"]
    # then
    assert result["isError"] is True
    assert text_of(result).startswith("TOOL_NOT_FOUND: No tool named 'orders_query_v2' here.")
    registry_shop["query"].refresh_from_db()
    assert registry_shop["query"].use_count == 0


#
# list_tools_by_category
#


@pytest.mark.parametrize("era", ERAS)
def test_categories_all_sends_markdown_counts(registry_shop, era):
    """category "all": every category with its count, the Markdown as text."""
    # when
    result = call(registry_shop, "list_tools_by_category", {"category": "all"}, era=era)["result"]
    # then
    assert text_of(result) == "## Tool categories (2)\n\n- `read`: 2 tools\n- `registry`: 5 tools\n"
    structured = result["structuredContent"]
    assert structured["categories"] == [{"category": "read", "count": 2}, {"category": "registry", "count": 5}]
    assert structured["total_tools"] == 7
    assert structured["markdown"] == text_of(result)


def test_category_lists_its_tools(registry_shop):
    """A category lists its tools by effective name, Markdown as text."""
    # when
    result = call(registry_shop, "list_tools_by_category", {"category": "read"})["result"]
    # then
    assert text_of(result) == (
        "## Tools in category `read` (2)\n\n"
        "- `orders_by_id`: Orders by id.\n"
        "- `orders_query`: Query the shop's orders with JMESPath.\n"
    )
    assert [tool["tool_name"] for tool in result["structuredContent"]["tools"]] == ["orders_by_id", "orders_query"]
    assert result["structuredContent"]["truncated"] is False


def test_unknown_category_is_invalid_category_naming_those_that_exist(registry_shop):
    """SPEC §5: INVALID_CATEGORY with the categories that exist."""
    # when
    result = call(registry_shop, "list_tools_by_category", {"category": "billing"})["result"]
    # then
    assert result["isError"] is True
    assert text_of(result) == (
        "INVALID_CATEGORY: No category 'billing' here. Categories: read, registry; or 'all' for counts."
    )
    assert result["structuredContent"]["details"] == {"categories": ["read", "registry"]}


#
# get_tool_usage_guide
#


@pytest.mark.parametrize("era", ERAS)
def test_guide_sends_its_markdown_content_with_warnings(registry_shop, era):
    """The guide's `content` is the text, followed by its warnings; structuredContent is the full response."""
    # when
    result = call(registry_shop, "get_tool_usage_guide", {"tool_names": ["orders_query", "nope"]}, era=era)["result"]
    # then
    assert result["isError"] is False
    structured = result["structuredContent"]
    text = text_of(result)
    assert text.startswith(structured["content"].rstrip("\n"))
    assert text.startswith(
        f"# Shop MCP Tools Usage Guide\n\nGenerated: {timezone.now():%Y-%m-%d} | Tools: 1 | Category Filter: all\n"
    )
    assert "### `orders_query`\n\n**Purpose**: Query the shop's orders with JMESPath." in text
    assert text.endswith(f"\n\n## Warnings\n\n- {structured['warnings'][0]}\n")
    assert structured["warnings"][0].startswith("Tool 'nope' not found. Available: ")
    assert structured["metadata"]["invalid_names"] == ["nope"]
    assert structured["metadata"]["total_tools"] == 7
    assert structured["metadata"]["filtered_count"] == 1


def test_guide_without_warnings_is_its_content_alone(registry_shop):
    """No warnings: the text is exactly the guide's Markdown."""
    # when
    result = call(registry_shop, "get_tool_usage_guide", {"category": "read"})["result"]
    # then
    assert result["structuredContent"]["warnings"] == []
    assert text_of(result) == result["structuredContent"]["content"]
    assert "Tools: 2 | Category Filter: `read`" in text_of(result)


#
# register_tool (SPEC §5) and what a registered tool is over MCP (SPEC §4.3, §8)
#


@pytest.mark.parametrize("era", ERAS)
def test_register_tool_creates_a_bound_external_tool(registry_shop, era):
    """With allow_registration: an `external` tool owned by the instance's owner, bound to the instance."""
    # given
    instance_update(instance=registry_shop["instance"], allow_registration=True)
    arguments = {
        "name": "weather_now",
        "description": "Current weather for a city.",
        "category": "Weather",
        "tags": ["forecast"],
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        "mcp_server": "https://weather.example/mcp",
    }
    # when
    result = call(registry_shop, "register_tool", arguments, era=era)["result"]
    # then
    assert result["isError"] is False
    structured = result["structuredContent"]
    tool = Tool.objects.get(name="weather_now")
    assert structured["registered"] is True
    assert structured["tool_id"] == tool.pk
    assert json.loads(text_of(result)) == structured
    owner = registry_shop["owner"]
    assert (tool.type, tool.owner_id, tool.category, tool.tags) == ("external", owner.pk, "weather", ["forecast"])
    assert tool.metadata["mcp_server"] == "https://weather.example/mcp"
    assert Binding.objects.filter(mcp_instance=registry_shop["instance"], tool=tool, enabled=True).count() == 1


@pytest.mark.parametrize("era", ERAS)
def test_registered_tool_is_searchable_not_listed_and_not_callable(registry_shop, era):
    """A tool registered over MCP is found by the next search_tools, never listed by tools/list (external,
    SPEC §4.3), and calling it is -32602 naming where it is served (SPEC §8)."""
    # given
    instance_update(instance=registry_shop["instance"], allow_registration=True)
    before = [
        tool["name"] for tool in Harness().rpc("shop", registry_shop["key"], "tools/list", era=era)["result"]["tools"]
    ]
    arguments = {"name": "weather_now", "description": "Current weather for a city.", "mcp_server": "wx-server"}
    assert call(registry_shop, "register_tool", arguments, era=era)["result"]["isError"] is False
    # when
    listed = Harness().rpc("shop", registry_shop["key"], "tools/list", era=era)["result"]["tools"]
    found = call(registry_shop, "search_tools", {"query": "weather city"}, era=era)["result"]["structuredContent"]
    called = call(registry_shop, "weather_now", {"city": "Oslo"}, era=era)
    # then
    assert [tool["name"] for tool in listed] == before
    assert "weather_now" not in before
    assert [hit["tool_name"] for hit in found["results"]][0] == "weather_now"
    assert called["error"]["code"] == -32602
    assert "weather_now" in called["error"]["message"]
    assert "wx-server" in called["error"]["message"]


def test_register_tool_without_allow_registration_fails_and_writes_nothing(registry_shop):
    """allow_registration off (the default): REGISTRATION_FAILED with the reason; no tool, no binding."""
    # given
    before = writes_snapshot()
    # when
    result = call(registry_shop, "register_tool", {"name": "weather_now", "description": "Weather."})["result"]
    # then
    assert result["isError"] is True
    assert text_of(result) == (
        "REGISTRATION_FAILED: Registration is not allowed here: the instance's allow_registration setting is off."
    )
    assert result["structuredContent"]["details"] == {"reason": "not_allowed"}
    assert writes_snapshot() == before


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("bad name!", "name: Tool names are 1–64 characters of letters, digits, '_', '.' and '-' (got 'bad name!')."),
        # Collides, case-insensitively, with 'orders_query', the override of 'orders_query_v2' (SPEC §2.4).
        (
            "ORDERS_QUERY",
            "is already used by the tool 'orders_query_v2', bound as 'orders_query', on the instance 'Shop'",
        ),
    ],
)
def test_register_tool_refusals_write_nothing(registry_shop, name, reason):
    """An invalid name or a name taken on the instance is REGISTRATION_FAILED naming why; nothing written."""
    # given
    instance_update(instance=registry_shop["instance"], allow_registration=True)
    before = writes_snapshot()
    # when
    result = call(registry_shop, "register_tool", {"name": name, "description": "Weather."})["result"]
    # then
    assert result["isError"] is True
    prefix = f"REGISTRATION_FAILED: The tool {name!r} was not registered: "
    assert text_of(result).startswith(prefix)
    assert reason in text_of(result).removeprefix(prefix)
    assert writes_snapshot() == before


#
# discovery = search (SPEC §4.5)
#


@pytest.mark.parametrize("era", ERAS)
def test_search_discovery_lists_only_registry_tools_and_finds_the_rest(registry_shop, era):
    """discovery=search: tools/list shows the five registry tools; search finds a data tool, which is
    then callable by name."""
    # given
    instance_update(instance=registry_shop["instance"], discovery="search")
    # when
    listed = Harness().rpc("shop", registry_shop["key"], "tools/list", era=era)["result"]["tools"]
    found = call(registry_shop, "search_tools", {"query": "query orders jmespath"}, era=era)["result"][
        "structuredContent"
    ]
    called = call(registry_shop, found["results"][0]["tool_name"], {"query": "[?id==`2`].customer"}, era=era)["result"]
    # then
    assert [tool["name"] for tool in listed] == ["call_tool", *REGISTRY_NAMES]  # the call proxy first
    assert all(tool["annotations"]["readOnlyHint"] for tool in listed[1:] if tool["name"] != "register_tool")
    assert found["results"][0]["tool_name"] == "orders_query"
    assert called["isError"] is False
    assert called["structuredContent"] == {"result": ["alan"]}


def test_registry_calls_are_recorded(registry_shop):
    """Registry calls are recorded like any call: a call-log row and the registry tool's use count."""
    # given
    search = Tool.objects.get(name="search_tools")
    # when
    call(registry_shop, "search_tools", {"query": "orders"})
    # then
    assert list(CallLog.objects.values_list("tool_id", "tool_name", "status")) == [(search.pk, "search_tools", "ok")]
    search.refresh_from_db()
    assert search.use_count == 1
