"""Long search queries: every method answers up to SEARCH_QUERY_MAX_CHARS characters; bm25 reads all of
it, the embedding model the sentences that carry the request (Index.request_part), never a blind first cut."""

import pytest

from tools_app.kernel.errors import ErrorCode, ToolError
from tools_app.kernel.limits import SEARCH_QUERY_MAX_CHARS
from tools_app.models import Tool
from tools_app.registry import embedding, get_index, search_tools
from tools_app.registry.scope import UserScope
from tools_app.registry.search import QUERY_WINDOW

# A pasted log: many lines of data that say nothing about a tool, the request in the middle.
LOG_LINE = "2026-11-25T10:{:02d}:00Z worker-{} pid=4711 heap=5123MB gc=31ms queue=17 status=200 path=/v1/items\n"


@pytest.fixture
def external_tools(owner, make_tool):
    specs = {
        "weather.forecast": "Get the weather forecast for a city for the next days.",
        "slack.post_message": "Send a chat message to a channel.",
        "currency.convert": "Convert an amount of money from one currency to another.",
        "logs.tail": "Show the last lines of a service's log file.",
    }
    return {name: make_tool(owner, None, type="external", name=name, description=text) for name, text in specs.items()}


def pasted(request, *, before=40, after=40):
    """`before` log lines, the request, `after` log lines: far past the embedding window."""
    head = "".join(LOG_LINE.format(n % 60, n) for n in range(before))
    tail = "".join(LOG_LINE.format(n % 60, n) for n in range(after))
    return f"{head}{request}\n{tail}"


def test_request_part_keeps_the_request_of_a_long_pasted_message(external_tools, owner):
    """The request sentence in the middle of 80 log lines is what the embedding model reads."""
    index = get_index(UserScope(owner))
    query = pasted("Can you convert 250 euros into Japanese yen for me?")
    assert len(query) > 5 * QUERY_WINDOW
    # when
    part = index.request_part(query)
    # then
    assert "Can you convert 250 euros into Japanese yen for me?" in part
    assert len(part) <= QUERY_WINDOW


def test_request_part_leaves_a_short_query_as_it_is(external_tools, owner):
    index = get_index(UserScope(owner))
    # when / then
    assert index.request_part("weather in Paris tomorrow") == "weather in Paris tomorrow"


def test_request_part_cuts_one_long_sentence_at_the_window(external_tools, owner):
    index = get_index(UserScope(owner))
    # when
    part = index.request_part("word " * 1000)
    # then
    assert part == ("word " * 1000).strip()[:QUERY_WINDOW]


@pytest.mark.parametrize("method", ["bm25", "regex", "embedding", "hybrid"])
def test_every_method_answers_a_query_of_the_limit(external_tools, owner, method):
    """No method refuses or fails on SEARCH_QUERY_MAX_CHARS characters (regex has its own, shorter, pattern limit)."""
    if method in ("embedding", "hybrid") and not embedding.available():
        pytest.skip("the embedding extra is not installed")
    query = pasted("Please convert 250 euros into yen.", before=60, after=200)[:SEARCH_QUERY_MAX_CHARS]
    query = query + "x" * (SEARCH_QUERY_MAX_CHARS - len(query))
    assert len(query) == SEARCH_QUERY_MAX_CHARS
    if method == "regex":
        with pytest.raises(ToolError) as raised:
            search_tools(scope=UserScope(owner), query=query, method=method)
        assert raised.value.code == ErrorCode.INVALID_QUERY
        assert "at most 200 characters" in raised.value.message
        return
    # when
    result = search_tools(scope=UserScope(owner), query=query, method=method, limit=2)
    # then
    assert result["query"] == query
    assert result["results"][0]["tool_name"] == "currency.convert"


@pytest.mark.parametrize("method", ["embedding", "hybrid"])
def test_semantic_methods_find_a_request_buried_in_a_pasted_log(external_tools, owner, method):
    """The request sits after 40 log lines: a first-tokens cut would embed only log lines."""
    if not embedding.available():
        pytest.skip("the embedding extra is not installed")
    query = pasted("What will the weather be like in Lisbon over the next three days?")
    # when
    result = search_tools(scope=UserScope(owner), query=query, method=method, limit=1)
    # then
    assert [hit["tool_name"] for hit in result["results"]] == ["weather.forecast"]


def test_one_character_over_the_limit_is_invalid_arguments_and_writes_nothing(external_tools, owner):
    before = Tool.objects.count()
    # when
    with pytest.raises(ToolError) as raised:
        search_tools(scope=UserScope(owner), query="q" * (SEARCH_QUERY_MAX_CHARS + 1))
    # then
    assert raised.value.code == ErrorCode.INVALID_ARGUMENTS
    assert raised.value.message == (
        "Invalid arguments: 'query' has 10,001 characters; the limit is 10,000. "
        "Send the part of the request that says what the tool should do."
    )
    assert raised.value.details == {"argument": "query", "max_length": 10_000, "length": 10_001}
    assert Tool.objects.count() == before
