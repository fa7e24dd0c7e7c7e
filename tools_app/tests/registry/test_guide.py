"""The usage guide (SPEC §5, seed 000): layout, warnings, metadata, the 50 KB cut, valid CommonMark."""

import json

import pytest
from django.utils import timezone
from markdown_it import MarkdownIt

from tools_app.registry import usage_guide
from tools_app.registry.instance_scope import InstanceScope
from tools_app.registry.scope import UserScope


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
    assert f"Generated: {timezone.now():%Y-%m-%d} | Tools: 3 | Category Filter: all\n" in content
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


def test_named_tools_are_cut_at_a_tool_boundary_within_the_budget(owner, make_tool):
    """Named tools over the result budget keep whole complete entries only, say so in the content and warn."""
    # given
    big = {
        "type": "object",
        "properties": {f"field_{i}": {"type": "string", "description": "x" * 60} for i in range(30)},
    }
    for number in range(40):
        make_tool(owner, None, type="external", name=f"tool_{number:02d}", description="A big tool.", input_schema=big)
    # when
    guide = usage_guide(scope=UserScope(owner), tool_names=[f"tool_{number:02d}" for number in range(40)])
    # then
    content = guide["content"]
    included = guide["metadata"]["included_count"]
    headings, _ = parse(content)
    assert len(json.dumps(guide, ensure_ascii=False).encode()) <= 40_000
    assert 0 < included < 40
    assert [text for tag, text in headings if tag == "h3"] == [f"tool_{n:02d}" for n in range(included)]
    assert content.rstrip().endswith("Ask for fewer tools (tool_names) or one category.*")
    assert content.count("**Returns**") == included
    assert guide["warnings"] == [
        f"Guide cut at 40,000 bytes: {included} of 40 tools included. Ask for fewer tools (tool_names) or one category."
    ]
    assert guide["metadata"]["truncated"] is True
    assert guide["metadata"]["form"] == "full"
    assert f"| Tools: {included} |" in content


#
# A default instance of 100 demo-like tools: the compact form, paging by category
#

# The demo's tools of one table (tools_app.management.commands.seed_demo), made for twelve tables, and its four
# registry tools: 100 tools.
TABLE_TOOLS = [
    ("schema", "get_data_schema", "Describe the shape of the {t} table: fields, types, item count.", {}),
    ("all", "get_all_data", "Return every record of {t} (id, customer, status, total, items).", {}),
    (
        "query",
        "query_data",
        'Run a JMESPath query over {t}, e.g. "[?status==\'shipped\'].id" or "length(@)".',
        {"examples": ["{t}_query(query=\"[?status=='paid'].{id: id, total: total}\")"], "tags": ["jmespath"]},
    ),
    ("preview", "preview", "Preview {t} with only id, customer and status; supports limit and offset.", {}),
    ("select", "select", "Fetch full records of {t} by id, e.g. keys=[1, 3].", {}),
    ("create", "create", "Add new records to {t}; each needs a unique integer id.", {}),
    ("update", "update", "Change records of {t}: give the id and the fields to change (JSON Merge Patch).", {}),
    ("delete", "delete", "Delete records of {t} by id.", {}),
]
REGISTRY = [
    ("find_tools", "search_tools", "Search the shop's tools by what they do (regex, bm25, embedding, hybrid)."),
    ("tool_definition", "get_tool_definition", "Full definition of one tool: parameters, examples, returns."),
    ("tools_by_category", "list_tools_by_category", "List the shop's tools of a category, or 'all' categories."),
    ("tool_guide", "get_tool_usage_guide", "A Markdown guide to the shop's tools, grouped by category."),
]
TABLES = ["orders", "customers", "invoices", "products", "stock", "shipments", "returns", "suppliers",
          "payments", "refunds", "coupons", "reviews"]  # fmt: skip


@pytest.fixture
def hundred(owner, make_table, make_tool, instance, bind):
    """A default instance (max_result_bytes 40,000) with 100 demo-like tools bound, and a key."""
    from tools_app.services import api_key_issue

    for name in TABLES:
        table = make_table(owner, name=name)
        for suffix, tool_type, description, metadata in TABLE_TOOLS:
            metadata = json.loads(json.dumps(metadata).replace("{t}", name))
            tool = make_tool(
                owner, table, type=tool_type, name=f"{name}_{suffix}", description=description.format(t=name),
                metadata=metadata,
            )  # fmt: skip
            bind(instance, tool)
    for name, tool_type, description in REGISTRY:
        bind(instance, make_tool(owner, None, type=tool_type, name=name, description=description))
    assert instance.max_result_bytes == 40_000
    return {"instance": instance, "key": api_key_issue(mcp_instance=instance, label="k")[1]}


def call_guide(hundred, arguments):
    from mcp_app.tests.mcp_harness import Harness

    reply = Harness().call("shop", hundred["key"], "tool_guide", arguments)
    result = reply["result"]
    assert result["isError"] is False, result["content"][0]["text"][:300]
    return result["structuredContent"], len(result["content"][0]["text"].encode())


def test_the_guide_of_100_tools_fits_the_default_budget(hundred):
    """Over MCP, tool_guide without arguments answers (no RESULT_TOO_LARGE) within 40,000 bytes, every tool in it,
    in the compact form: shared parameter sets and what each type returns written once."""
    # when
    guide, size = call_guide(hundred, {})
    # then
    assert size <= 40_000
    content = guide["content"]
    assert guide["metadata"]["form"] == "compact"
    assert guide["metadata"]["included_count"] == 100
    assert guide["metadata"]["truncated"] is False
    assert guide["warnings"] == []
    assert size == 18_405  # "Category Filter: all"
    headings, fences = parse(content)
    h3 = [text for tag, text in headings if tag == "h3"]
    assert len(h3) == 100
    assert sorted(h3) == sorted([f"{t}_{s}" for t in TABLES for s, *_ in TABLE_TOOLS] + [n for n, *_ in REGISTRY])
    assert fences == []  # no JSON Schema repeated
    assert [text for tag, text in headings if tag == "h2"] == [
        "Shared parameters",
        "Returns",
        "Read Tools (60)",
        "Registry Tools (4)",
        "Write Tools (36)",
    ]
    # each type's default schema once (get_all_data's has the paging cursor, get_data_schema's has none)
    assert content.count("(12 tools)") == 8
    assert content.count(" · Parameters: **P") == 96
    assert "`query*`: string — A JMESPath expression evaluated over the data" in content
    assert content.count("**Paging**") == 1


def test_a_named_tool_is_still_complete(hundred):
    """Asked by name, a tool gets its complete entry: JSON Schema, example, returns, paging."""
    guide, size = call_guide(hundred, {"tool_names": ["orders_query"]})
    assert guide["metadata"]["form"] == "full"
    _, fences = parse(guide["content"])
    assert fences[0][0] == "json"
    assert json.loads(fences[0][1])["required"] == ["query"]
    assert ("python", "orders_query(query=\"[?status=='paid'].{id: id, total: total}\")\n") in fences
    assert "**Returns**" in guide["content"]
    assert "**Paging**" in guide["content"]


def test_the_compact_guide_pages_by_category(hundred):
    """Over a smaller budget, whole categories are kept while they fit and the others are named, to be asked
    for one at a time; each of them then fits."""
    # given
    instance = hundred["instance"]
    instance.max_result_bytes = 20_000
    instance.save(update_fields=["max_result_bytes"])
    # when
    guide, size = call_guide(hundred, {})
    # then
    assert size <= 20_000
    left = guide["metadata"]["categories_not_included"]
    assert left == ["write"]
    assert guide["metadata"]["truncated"] is True
    assert guide["warnings"] == [
        f"Guide in its compact form, cut at 20,000 bytes: {guide['metadata']['included_count']} of 100 tools "
        "included. Ask for the other categories one at a time (category): `write` (36)."
    ]
    # when: the category left out
    page, size = call_guide(hundred, {"category": "write"})
    # then
    assert size <= 20_000
    assert page["metadata"]["included_count"] == 36
    assert page["metadata"]["truncated"] is False


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
