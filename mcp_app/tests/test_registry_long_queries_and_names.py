"""Registry search over MCP and the API: long queries up to the limit, a clear error past it, and names a model
can copy.

Names (tools, parameters, categories) in the Markdown a model reads are code spans, never backslash-escaped:
every name is read back out of the Markdown (parsed by markdown-it, CommonMark) and must be the name itself.
"""

import json

import pytest
from markdown_it import MarkdownIt
from rest_framework.test import APIClient

from mcp_app.tests.mcp_harness import Harness
from tools_app.kernel.limits import SEARCH_QUERY_MAX_CHARS
from tools_app.models import Binding, Tool

# Names that Markdown would mangle unless they are code: emphasis, escapes, link brackets, HTML, backticks.
TOOL_NAMES = ["weather_x", "__init__", "get_user_by_id", "a.b-c_d", "snake__case__", "x_1_"]
PARAMETER_NAMES = ["user_id", "*bold*", "[link](x)", "<b>tag</b>", "back`tick", "a\\b", "__dunder__"]
CATEGORY = "data_ops"


@pytest.fixture
def weather_shop(owner, table, make_tool, instance, bind, make_api_key):
    for name in ("search_tools", "get_tool_definition", "get_tool_usage_guide", "list_tools_by_category"):
        bind(instance, make_tool(owner, type=name, name=name, description=f"Registry tool {name}."))
    schema = {
        "type": "object",
        "properties": {name: {"type": "string", "description": f"The {name} value."} for name in PARAMETER_NAMES},
        "required": ["user_id"],
    }
    for number, name in enumerate(TOOL_NAMES):
        tool = make_tool(
            owner,
            None,
            type="external",
            name=name,
            description=f"Weather report number {number} for a city, see also weather_x and get_user_by_id.",
            input_schema=schema,
            metadata={"category": CATEGORY, "mcp_server": "srv_one"},
        )
        bind(instance, tool)
    return {"instance": instance, "key": make_api_key(instance)[1]}


def call(weather_shop, name, arguments):
    reply = Harness().call("shop", weather_shop["key"], name, arguments)
    return reply["result"]


def code_spans(markdown):
    """Contents of every code span and fenced block, as CommonMark reads them."""
    spans, fences = [], []
    for token in MarkdownIt("commonmark").parse(markdown):
        if token.type == "fence":
            fences.append(token.content)
        for child in token.children or []:
            if child.type == "code_inline":
                spans.append(child.content)
    return spans, fences


def test_search_results_show_every_name_as_a_code_span_over_mcp(weather_shop):
    """search_tools: each result's name reads back exactly from the Markdown; nothing is backslash-escaped."""
    # when
    result = call(weather_shop, "search_tools", {"query": "weather report for a city", "limit": 10})
    # then
    text = result["content"][0]["text"]
    spans, _ = code_spans(text)
    names = [hit["tool_name"] for hit in result["structuredContent"]["results"]]
    assert sorted(names) == sorted(TOOL_NAMES)
    assert spans[1:] == names  # spans[0] is the query
    assert "\\" not in text
    assert "see also weather_x and get_user_by_id." in text


def test_categories_and_category_listing_show_names_as_code_over_mcp(weather_shop):
    """list_tools_by_category: the category and each tool name read back exactly."""
    # when
    counts = call(weather_shop, "list_tools_by_category", {"category": "all"})["content"][0]["text"]
    listing = call(weather_shop, "list_tools_by_category", {"category": CATEGORY, "limit": 50})["content"][0]["text"]
    # then
    assert CATEGORY in code_spans(counts)[0]
    spans, _ = code_spans(listing)
    assert spans == [CATEGORY, *sorted(TOOL_NAMES, key=str.lower)]
    assert "\\" not in counts + listing


def test_guide_shows_tool_and_parameter_names_exactly_over_mcp(weather_shop):
    """The usage guide: tool names as code in headings, parameter names exactly in the JSON block."""
    # when
    text = call(weather_shop, "get_tool_usage_guide", {"tool_names": TOOL_NAMES})["content"][0]["text"]
    # then
    spans, fences = code_spans(text)
    for name in TOOL_NAMES:
        assert name in spans
    schemas = [json.loads(fence) for fence in fences if fence.lstrip().startswith("{")]
    assert len(schemas) == len(TOOL_NAMES)
    # sorted: PostgreSQL (jsonb) keeps keys in its own order
    assert all(sorted(schema["properties"]) == sorted(PARAMETER_NAMES) for schema in schemas)
    assert "srv_one" in spans
    assert "weather\\_x" not in text
    assert "get\\_user" not in text


def test_definition_round_trips_every_name_over_mcp(weather_shop):
    """get_tool_definition: the name and every parameter name come back as registered."""
    for name in TOOL_NAMES:
        # when
        definition = call(weather_shop, "get_tool_definition", {"tool_name": name})["structuredContent"]
        # then
        assert definition["name"] == name
        assert sorted(definition["input_schema"]["properties"]) == sorted(PARAMETER_NAMES)


def test_api_search_and_guide_round_trip_every_name(owner, weather_shop):
    """GET /api/search/ names and the instance guide's Markdown over the API."""
    client = APIClient()
    client.force_authenticate(owner)
    # when
    found = client.get(
        "/api/search/", {"q": "weather report", "limit": 10, "mcp_instance": weather_shop["instance"].pk}
    )
    guide = client.get(f"/api/mcp-instances/{weather_shop['instance'].pk}/guide/")
    # then
    assert found.status_code == 200, found.content
    assert sorted(hit["tool_name"] for hit in found.json()["results"]) == sorted(TOOL_NAMES)
    assert guide.status_code == 200, guide.content
    spans, fences = code_spans(guide.json()["content"])
    assert set(TOOL_NAMES) <= set(spans)
    assert "weather\\_x" not in guide.json()["content"]


def long_query(tail_words):
    """A pasted message of exactly SEARCH_QUERY_MAX_CHARS characters whose request comes at its very end."""
    tail = " " + tail_words
    filler = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. "
    body = (filler * (SEARCH_QUERY_MAX_CHARS // len(filler) + 1))[: SEARCH_QUERY_MAX_CHARS - len(tail)]
    return body + tail


def test_a_query_of_the_limit_is_searched_whole_over_mcp(weather_shop):
    """10,000 characters are accepted, and bm25 reads to the end: the request in the last words is found."""
    query = long_query("snake case")
    assert len(query) == SEARCH_QUERY_MAX_CHARS
    # when
    result = call(weather_shop, "search_tools", {"query": query, "limit": 3})
    # then
    assert result["isError"] is False
    assert result["structuredContent"]["results"][0]["tool_name"] == "snake__case__"
    assert result["structuredContent"]["query"] == query
    heading = result["content"][0]["text"].splitlines()[0]
    assert len(heading) < 300  # the heading shows the start of the query, the JSON all of it


def test_a_query_over_the_limit_is_invalid_arguments_naming_query_over_mcp(weather_shop):
    """One character more: INVALID_ARGUMENTS naming `query` and the limit; nothing is written."""
    before = (Tool.objects.count(), Binding.objects.count())
    # when
    result = call(weather_shop, "search_tools", {"query": "x" * (SEARCH_QUERY_MAX_CHARS + 1)})
    # then
    assert result["isError"] is True
    text = result["content"][0]["text"]
    assert text.startswith("INVALID_ARGUMENTS")
    assert text == "INVALID_ARGUMENTS: Invalid arguments: argument 'query' has 10,001 characters; the limit is 10,000."
    assert (Tool.objects.count(), Binding.objects.count()) == before


def test_api_accepts_the_limit_and_refuses_one_more_naming_q(owner, weather_shop):
    """GET /api/search/: 10,000 characters answer 200; 10,001 are VALIDATION_ERROR naming q and the limit."""
    client = APIClient()
    client.force_authenticate(owner)
    # when
    accepted = client.get("/api/search/", {"q": long_query("snake case"), "mcp_instance": weather_shop["instance"].pk})
    refused = client.get("/api/search/", {"q": "y" * (SEARCH_QUERY_MAX_CHARS + 1)})
    # then
    assert accepted.status_code == 200, accepted.content
    assert accepted.json()["results"][0]["tool_name"] == "snake__case__"
    assert refused.status_code == 400
    assert refused.json()["error"] == "VALIDATION_ERROR"
    assert list(refused.json()["fields"]) == ["q"]
    assert "10000" in " ".join(refused.json()["fields"]["q"])
