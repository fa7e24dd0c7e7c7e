"""The usage guide (SPEC §5, seed 000): layout, warnings, metadata, the 50 KB cut, valid CommonMark."""

import pytest
from django.utils import timezone
from markdown_it import MarkdownIt

from tools_app.registry import usage_guide
from tools_app.registry.guide import MAX_BYTES
from tools_app.registry.instance_scope import InstanceScope
from tools_app.registry.scope import UserScope
from tools_app.registry.search import index_cache


@pytest.fixture(autouse=True)
def _fresh_index_cache():
    index_cache.clear()
    yield
    index_cache.clear()


def parse(content):
    """(tag, inline text) of every heading, and (info, content) of every fence, per markdown-it (CommonMark)."""
    tokens = MarkdownIt("commonmark").parse(content)
    headings = [
        (token.tag, "".join(c.content for c in tokens[i + 1].children if c.type in ("text", "code_inline")))
        for i, token in enumerate(tokens)
        if token.type == "heading_open"
    ]
    fences = [(token.info, token.content) for token in tokens if token.type == "fence"]
    return headings, fences


@pytest.fixture
def documented(owner, table, make_tool, instance, bind):
    """An instance with a documented query tool, an undocumented external tool and a registry tool."""
    made = [
        make_tool(
            owner,
            table,
            name="query_orders",
            description="Query orders with JMESPath.",
            metadata={
                "examples": ["# paid orders\nquery_orders(query=\"[?status=='paid']\")"],
                "return_format": "The matching orders.",
            },
        ),
        make_tool(
            owner,
            None,
            type="external",
            name="github.create_pull_request",
            description="",
            metadata={"mcp_server": "github-mcp"},
        ),
        make_tool(owner, None, type="search_tools", name="search_tools", description="Search the tools."),
    ]
    for tool in made:
        bind(instance, tool)
    return made


def test_guide_has_the_seed_layout(documented, instance):
    """Title, the Generated line, a section per category with counts, per-tool purpose/parameters/examples/returns."""
    # when
    guide = usage_guide(scope=InstanceScope(instance))
    # then
    content = guide["content"]
    headings, fences = parse(content)
    assert headings == [
        ("h1", "Shop MCP Tools Usage Guide"),
        ("h2", "External Tools (1)"),
        ("h3", "github.create_pull_request"),
        ("h2", "Read Tools (1)"),
        ("h3", "query_orders"),
        ("h2", "Registry Tools (1)"),
        ("h3", "search_tools"),
    ]
    assert f"Generated: {timezone.now():%Y-%m-%d} | Tools: 3 | Category Filter: None\n" in content
    assert "**Purpose**: Query orders with JMESPath." in content
    assert "**Purpose**: [Description pending]" in content
    assert "**Returns**: The matching orders." in content
    assert ("python", "# paid orders\nquery_orders(query=\"[?status=='paid']\")\n") in fences
    assert [info for info, _ in fences].count("json") == 3
    assert guide["warnings"] == []
    assert guide["metadata"]["total_tools"] == 3
    assert guide["metadata"]["filtered_count"] == 3
    assert guide["metadata"]["invalid_names"] == []
    assert isinstance(guide["metadata"]["generation_time_ms"], float)


def test_guide_filters_by_names_and_category_with_warnings(documented, instance):
    """Named tools and a category narrow the guide; unknown names are warnings listing what exists."""
    # when
    guide = usage_guide(scope=InstanceScope(instance), tool_names="query_orders, ghost,search_tools", category="read")
    # then
    headings, _ = parse(guide["content"])
    assert [text for tag, text in headings if tag == "h3"] == ["query_orders"]
    assert "| Tools: 1 | Category Filter: `read`" in guide["content"]
    assert guide["warnings"] == [
        "Tool 'ghost' not found. Available: github.create_pull_request, query_orders, search_tools"
    ]
    assert guide["metadata"]["invalid_names"] == ["ghost"]
    assert guide["metadata"]["filtered_count"] == 1


def test_guide_unknown_category_is_a_warning(documented, instance):
    """An unknown category gives an empty guide and a warning, not an error."""
    # when
    guide = usage_guide(scope=InstanceScope(instance), category="nope")
    # then
    assert guide["warnings"] == ["Category 'nope' not found. Available: external, read, registry"]
    assert guide["metadata"]["filtered_count"] == 0
    assert "No tools match this request." in guide["content"]


def test_guide_generates_an_example_from_the_schema(documented, instance):
    """Without examples the guide shows one call built from the required arguments."""
    # when
    _, fences = parse(usage_guide(scope=InstanceScope(instance), tool_names=["search_tools"])["content"])
    # then
    assert ("python", "search_tools(query='...')\n") in fences


def test_guide_cuts_at_a_tool_boundary_below_50_kb(owner, make_tool):
    """A guide over 50 KB keeps whole tools only, says so in the content and warns."""
    # given
    big = {
        "type": "object",
        "properties": {f"field_{i}": {"type": "string", "description": "x" * 60} for i in range(30)},
    }
    for number in range(40):
        make_tool(owner, None, type="external", name=f"tool_{number:02d}", description="A big tool.", input_schema=big)
    # when
    guide = usage_guide(scope=UserScope(owner))
    # then
    content = guide["content"]
    size = len(content.encode())
    included = guide["metadata"]["included_count"]
    headings, _ = parse(content)
    assert size <= MAX_BYTES
    assert 0 < included < 40
    assert [text for tag, text in headings if tag == "h3"] == [f"tool_{n:02d}" for n in range(included)]
    assert content.rstrip().endswith("Ask for fewer tools (tool_names) or one category.*")
    assert content.count("**Returns**") == included
    assert guide["warnings"] == [
        f"Guide cut at 50 KB: {included} of 40 tools included. Ask for fewer tools (tool_names) or one category."
    ]
    assert guide["metadata"]["truncated"] is True
    assert f"| Tools: {included} |" in content


def test_hostile_descriptions_do_not_break_the_structure(owner, make_tool):
    """Headings, fences, rules and HTML inside a description stay text inside its paragraph."""
    # given
    make_tool(
        owner,
        None,
        type="external",
        name="__weird__",
        description="# Not a heading\n```\nnot a fence\n---\n<div>html</div>\n1. item\n* bullet",
    )
    make_tool(owner, None, type="external", name="after", description="Still a tool.")
    # when
    content = usage_guide(scope=UserScope(owner))["content"]
    # then
    headings, fences = parse(content)
    assert [text for tag, text in headings if tag == "h3"] == ["__weird__", "after"]
    assert [info for info, _ in fences] == ["json", "python", "json", "python"]
    tokens = MarkdownIt("commonmark").parse(content)
    assert not any(t.type in ("html_block", "bullet_list_open", "ordered_list_open") for t in tokens)


def test_guide_for_200_tools_is_fast(owner, make_tool):
    """The seed's target is 100 ms; toolhub aims at 20 ms for 200 tools once the index is warm."""
    # given
    for number in range(200):
        make_tool(owner, None, type="external", name=f"tool_{number}", description=f"Tool number {number}.")
    scope = UserScope(owner)
    usage_guide(scope=scope)
    # when
    times = sorted(usage_guide(scope=scope)["metadata"]["generation_time_ms"] for _ in range(5))
    # then
    assert times[2] < 100
