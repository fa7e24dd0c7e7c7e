"""Registry search: text handling, each method's ranking and scores, errors, and index freshness (SPEC §5)."""

import pytest

from tools_app import services
from tools_app.kernel.errors import ToolError
from tools_app.models import Binding
from tools_app.registry import embedding, search_tools
from tools_app.registry.instance_scope import InstanceScope
from tools_app.registry.scope import UserScope
from tools_app.registry.search import index_cache
from tools_app.registry.text import split_identifier, stem, terms
from tools_app.services import binding_update


def needs_embedding():
    if not embedding.available():
        pytest.skip("the embedding extra is not installed (pip install -r requirements-embedding.txt)")


@pytest.fixture
def tools(owner, make_tool):
    """Four external tools with distinct words in distinct fields."""
    specs = [
        (
            "github.createPullRequest",
            "Open a new pull request from a head branch into a base branch.",
            {"tags": ["git"], "category": "github"},
            {"owner": "Repository owner", "head": "Branch with the changes"},
        ),
        (
            "slack-post_message",
            "Send a chat message to a channel.",
            {"category": "chat", "tags": ["notify"]},
            {"channel": "Channel id", "text": "Message text"},
        ),
        (
            "weather.forecast",
            "Get the weather forecast for a city for the next days.",
            {"category": "weather"},
            {"city": "City name", "days": "How many days ahead"},
        ),
        (
            "aws_cost_report",
            "Summarise cloud spending by service and month.",
            {"category": "billing"},
            {"month": "Billing month as YYYY-MM"},
        ),
    ]
    made = {}
    for name, description, metadata, parameters in specs:
        schema = {
            "type": "object",
            "properties": {key: {"type": "string", "description": text} for key, text in parameters.items()},
        }
        made[name] = make_tool(
            owner, None, type="external", name=name, description=description, metadata=metadata, input_schema=schema
        )
    return made


def names(result):
    return [hit["tool_name"] for hit in result["results"]]


def test_identifiers_split_on_separators_and_camel_case():
    """Names split on _ . - and camelCase (SPEC §5)."""
    # when / then
    assert split_identifier("github.createPullRequest") == ["github", "create", "Pull", "Request"]
    assert split_identifier("slack-post_message") == ["slack", "post", "message"]
    assert split_identifier("HTTPServerStatus2") == ["HTTP", "Server", "Status", "2"]
    assert terms("Creating PullRequests for the repos") == ["creat", "pull", "request", "repo"]
    assert {stem("create"), stem("creates"), stem("created"), stem("creating")} == {"creat"}


def test_terms_index_cjk_text_as_characters_and_bigrams():
    """Chinese descriptions (the seeds') are searchable: characters and bigrams."""
    # when / then
    assert terms("搜索工具") == ["搜", "索", "工", "具", "搜索", "索工", "工具"]


@pytest.mark.parametrize(
    ("query", "first", "field"),
    [
        ("pull request", "github.createPullRequest", "name"),
        ("notify", "slack-post_message", "tags"),
        ("billing", "aws_cost_report", "category"),
        ("city", "weather.forecast", "parameters"),
        ("spending", "aws_cost_report", "description"),
        ("changes", "github.createPullRequest", "parameter descriptions"),
    ],
)
def test_bm25_searches_every_field(tools, owner, query, first, field):
    """bm25 finds words in the name, tags, category, parameters, description and parameter descriptions."""
    # when
    result = search_tools(scope=UserScope(owner), query=query, method="bm25")
    # then
    assert names(result)[0] == first
    assert result["results"][0]["match_reason"].endswith(f" in {field}")


def test_bm25_scores_are_normalised_and_ordered(tools, owner):
    """Scores lie in (0, 1], best first; a tool matching more query words scores higher."""
    # when
    result = search_tools(scope=UserScope(owner), query="send message to slack channel", method="bm25", limit=10)
    # then
    scores = [hit["score"] for hit in result["results"]]
    assert names(result) == ["slack-post_message"]
    assert 0.5 < scores[0] <= 1


def test_bm25_without_matching_words_returns_nothing(tools, owner):
    """A query with no known word gives no results (and a Markdown note), not an error."""
    # when
    result = search_tools(scope=UserScope(owner), query="zebra", method="bm25")
    # then
    assert result["count"] == 0
    assert "No tool matches" in result["markdown"]


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        # Each CJK term once, as typed; a character inside a matched bigram of the same field is not repeated.
        ("订单数据", "keywords: 订单 in tags; 单数, 数据 in description"),
        ("数据 订单 数据", "keywords: 数据 in description; 订单 in tags"),
        # A compound word gives several terms: the word is named once.
        ("createPullRequest", "keywords: createpullrequest in name"),
        ("github githubs create", "keywords: github, create in name"),
        ("pull PullRequest", "keywords: pull, pullrequest in name"),
    ],
)
def test_bm25_match_reason_names_each_matched_word_once(tools, owner, make_tool, query, reason):
    """match_reason lists the matched words without repeats, in query order (Chinese queries included)."""
    # given
    make_tool(owner, None, type="external", name="orders.cn", description="查询订单数据", metadata={"tags": ["订单"]})
    # when
    result = search_tools(scope=UserScope(owner), query=query, method="bm25", limit=1)
    # then
    assert result["results"][0]["match_reason"] == reason


def test_regex_matches_fields_and_scores_by_field(tools, owner):
    """regex is case-insensitive; a whole-name match scores 1.0, a name match beats a description match."""
    # when
    whole = search_tools(scope=UserScope(owner), query=r"weather\.forecast", method="regex")
    partial = search_tools(scope=UserScope(owner), query="mess?age", method="regex", limit=10)
    # then
    assert whole["results"][0] == {
        "tool_name": "weather.forecast",
        "tool_id": tools["weather.forecast"].pk,
        "description": "Get the weather forecast for a city for the next days.",
        "score": 1.0,
        "match_reason": "pattern matched name",
    }
    assert names(partial) == ["slack-post_message"]
    assert partial["results"][0]["score"] == 0.99
    assert partial["results"][0]["match_reason"] == "pattern matched name, description, parameter descriptions"


@pytest.mark.parametrize(
    ("pattern", "says"),
    [("(unclosed", "not a valid regular expression"), (r"(a)\1", "backreference"), ("x" * 201, "at most 200")],
)
def test_regex_bad_patterns_are_invalid_query(tools, owner, pattern, says):
    """An invalid, backtracking-only or over-long pattern is INVALID_QUERY saying why (test_regex_search.py)."""
    # when
    with pytest.raises(ToolError) as caught:
        search_tools(scope=UserScope(owner), query=pattern, method="regex")
    # then
    assert caught.value.code == "INVALID_QUERY"
    assert says in caught.value.message


@pytest.mark.parametrize(("limit", "query"), [(0, "x"), (51, "x"), (5, "   ")])
def test_bad_limit_or_empty_query_is_invalid_arguments(tools, owner, limit, query):
    """limit is 1–50 and the query must have text."""
    # when
    with pytest.raises(ToolError) as caught:
        search_tools(scope=UserScope(owner), query=query, method="bm25", limit=limit)
    # then
    assert caught.value.code == "INVALID_ARGUMENTS"


def test_embedding_finds_tools_by_meaning(tools, owner):
    """embedding ranks by meaning: words absent from every tool still find the right one."""
    needs_embedding()
    # when
    result = search_tools(scope=UserScope(owner), query="will it rain tomorrow in Paris", method="embedding", limit=4)
    # then
    assert names(result)[0] == "weather.forecast"
    assert all(0 < hit["score"] <= 1 for hit in result["results"])
    assert result["results"][0]["match_reason"].startswith("semantic similarity 0.")


def test_hybrid_combines_keywords_and_meaning(tools, owner):
    """hybrid ranks the keyword-and-meaning match first and explains both parts."""
    needs_embedding()
    # when
    result = search_tools(scope=UserScope(owner), query="open a pull request", method="hybrid", limit=4)
    # then
    assert names(result)[0] == "github.createPullRequest"
    assert "semantic similarity" in result["results"][0]["match_reason"]
    assert "pull, request in name" in result["results"][0]["match_reason"]
    assert 0 < result["results"][0]["score"] <= 1


def test_embedding_vectors_are_cached_per_text(tools, owner):
    """After an edit only the changed tool is embedded again."""
    needs_embedding()
    # given
    scope = UserScope(owner)
    search_tools(scope=scope, query="weather", method="embedding")
    calls = []
    encoder = embedding.encoder()
    original = encoder.encode
    encoder.encode = lambda texts: calls.append(list(texts)) or original(texts)
    try:
        services.tool_update(tool=tools["aws_cost_report"], description="Summarise cloud costs per account.")
        # when
        search_tools(scope=scope, query="weather", method="embedding")
    finally:
        encoder.encode = original
    # then
    assert len(calls) == 1
    assert len(calls[0]) == 1
    assert "cloud costs per account" in calls[0][0]


def test_index_follows_tool_edits(tools, owner):
    """A rename or description change is seen by the next search, with no restart (SPEC §5)."""
    # given
    scope = UserScope(owner)
    assert search_tools(scope=scope, query="forecast")["count"] == 1
    # when
    services.tool_update(tool=tools["weather.forecast"], name="meteo.outlook", description="Rain and sun outlook.")
    # then
    assert search_tools(scope=scope, query="forecast")["count"] == 0
    assert names(search_tools(scope=scope, query="outlook")) == ["meteo.outlook"]


def test_index_follows_binding_edits(tools, owner, instance, bind):
    """Disabling a binding or overriding its name is seen by the next search on the instance."""
    # given
    for tool in tools.values():
        bind(instance, tool)
    scope = InstanceScope(instance)
    assert names(search_tools(scope=scope, query="forecast")) == ["weather.forecast"]
    binding = Binding.objects.get(tool=tools["weather.forecast"])
    # when
    binding_update(force=True, binding=binding, name_override="rain_outlook")
    renamed = search_tools(scope=scope, query="forecast")
    binding_update(binding=binding, enabled=False)
    disabled = search_tools(scope=scope, query="forecast")
    # then
    assert names(renamed) == ["rain_outlook"]
    assert disabled["count"] == 0


def test_index_is_reused_while_nothing_changes(tools, owner):
    """Repeated searches over an unchanged scope reuse one index (one fingerprint query each)."""
    # given
    scope = UserScope(owner)
    search_tools(scope=scope, query="forecast")
    builds = index_cache.builds
    # when
    for query in ("forecast", "message", "billing"):
        search_tools(scope=scope, query=query)
    # then
    assert index_cache.builds == builds == 1


def test_scopes_do_not_leak_between_users(tools, other_user, make_tool):
    """A user's search never shows another user's tools."""
    # given
    make_tool(other_user, None, type="external", name="other.forecast", description="Their weather forecast.")
    # when
    result = search_tools(scope=UserScope(other_user), query="forecast")
    # then
    assert names(result) == ["other.forecast"]
