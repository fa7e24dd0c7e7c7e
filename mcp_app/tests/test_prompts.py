"""An instance's own prompts over MCP — prompts/list, prompts/get, completion — in both eras.

The conformance suite's two prompt checks are met by two ordinary prompts an owner defines (no argument;
arguments arg1 and arg2, both required). The same over a real socket: mcp_app/tests/test_e2e_prompts.py.
"""

import pytest
from mcp import types

from mcp_app.tests.mcp_harness import ERAS, MODERN, Harness
from tools_app.services import prompt_create, prompt_update

pytestmark = pytest.mark.django_db

SIMPLE = "This is a simple prompt for testing."
WITH_ARGUMENTS = "Prompt with arguments: arg1='{{arg1}}', arg2='{{arg2}}'"
USAGE_GUIDE = {
    "name": "usage_guide",
    "title": "Tools usage guide",
    "description": "How to use this server's tools: what each does, its arguments and examples, by category.",
    "arguments": [
        {"name": "tool_names", "description": "Comma-separated tool names (default: all).", "required": False},
        {"name": "category", "description": "Only the tools of this category (default: all).", "required": False},
    ],
}


@pytest.fixture
def prompt_shop(owner, other_user, instance, make_instance, make_api_key):
    """Instance 'shop' with two enabled prompts and a disabled one; another owner's instance has its own."""
    simple = prompt_create(mcp_instance=instance, name="test_simple_prompt", template=SIMPLE)
    with_arguments = prompt_create(
        mcp_instance=instance,
        name="test_prompt_with_arguments",
        title="With arguments",
        description="A prompt with two required arguments.",
        arguments=[
            {"name": "arg1", "description": "First argument", "required": True},
            {"name": "arg2", "description": "Second argument", "required": True},
        ],
        template=WITH_ARGUMENTS,
    )
    prompt_create(mcp_instance=instance, name="drafts", template="Not served.", enabled=False)
    theirs = make_instance(other_user, slug="theirs")
    prompt_create(mcp_instance=theirs, name="their_prompt", template="Only on their instance.")
    return {"instance": instance, "simple": simple, "with_arguments": with_arguments, "key": make_api_key(instance)[1]}


def rpc(prompt_shop, method, params=None, *, era):
    return Harness().rpc("shop", prompt_shop["key"], method, params, era=era)


@pytest.mark.parametrize("era", ERAS)
def test_list_shows_usage_guide_then_the_enabled_prompts_by_name(prompt_shop, era):
    # when
    listed = rpc(prompt_shop, "prompts/list", era=era)["result"]
    # then
    assert listed["prompts"] == [
        USAGE_GUIDE,
        {
            "name": "test_prompt_with_arguments",
            "title": "With arguments",
            "description": "A prompt with two required arguments.",
            "arguments": [
                {"name": "arg1", "description": "First argument", "required": True},
                {"name": "arg2", "description": "Second argument", "required": True},
            ],
        },
        {"name": "test_simple_prompt", "arguments": []},
    ]
    assert "nextCursor" not in listed
    if era == MODERN:
        assert (listed["ttlMs"], listed["cacheScope"]) == (0, "private")


@pytest.mark.parametrize("era", ERAS)
def test_list_is_paged(prompt_shop, era, settings):
    # given
    settings.TOOLHUB_MCP_PAGE_SIZE = 1
    # when
    pages = [rpc(prompt_shop, "prompts/list", era=era)["result"]]
    while "nextCursor" in pages[-1]:
        pages.append(rpc(prompt_shop, "prompts/list", {"cursor": pages[-1]["nextCursor"]}, era=era)["result"])
    bad = rpc(prompt_shop, "prompts/list", {"cursor": "nonsense"}, era=era)
    # then
    assert [[prompt["name"] for prompt in page["prompts"]] for page in pages] == [
        ["usage_guide"],
        ["test_prompt_with_arguments"],
        ["test_simple_prompt"],
    ]
    assert bad["error"]["code"] == types.INVALID_PARAMS


@pytest.mark.parametrize("era", ERAS)
def test_get_renders_the_template_with_the_arguments(prompt_shop, era):
    # when
    got = rpc(
        prompt_shop,
        "prompts/get",
        {"name": "test_prompt_with_arguments", "arguments": {"arg1": "a {{arg2}}", "arg2": "b"}},
        era=era,
    )["result"]
    simple = rpc(prompt_shop, "prompts/get", {"name": "test_simple_prompt"}, era=era)["result"]
    # then
    assert got["description"] == "A prompt with two required arguments."
    assert got["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "Prompt with arguments: arg1='a {{arg2}}', arg2='b'"}}
    ]
    assert simple["description"] == "The prompt test_simple_prompt of Shop."
    assert simple["messages"] == [{"role": "user", "content": {"type": "text", "text": SIMPLE}}]


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"name": "test_prompt_with_arguments", "arguments": {"arg1": "a"}},
            "The prompt 'test_prompt_with_arguments' needs the argument 'arg2'.",
        ),
        (
            {"name": "test_prompt_with_arguments"},
            "The prompt 'test_prompt_with_arguments' needs the arguments 'arg1', 'arg2'.",
        ),
        (
            {"name": "test_simple_prompt", "arguments": {"arg1": "a"}},
            "Unknown arguments for the prompt 'test_simple_prompt': 'arg1'. It takes no arguments.",
        ),
        (
            {"name": "test_prompt_with_arguments", "arguments": {"arg1": "a", "arg2": "b" * 10_001}},
            "The argument 'arg2' is over 10000 characters.",
        ),
        ({"name": "drafts"}, "Unknown prompt 'drafts': prompts/list names the prompts of this server."),
        ({"name": "their_prompt"}, "Unknown prompt 'their_prompt': prompts/list names the prompts of this server."),
        (
            {"name": "TEST_SIMPLE_PROMPT"},
            "Unknown prompt 'TEST_SIMPLE_PROMPT': prompts/list names the prompts of this server.",
        ),
    ],
)
def test_get_refusals_are_invalid_params_naming_the_cause(prompt_shop, era, params, message):
    # when
    reply = rpc(prompt_shop, "prompts/get", params, era=era)
    # then
    assert reply["error"]["code"] == types.INVALID_PARAMS
    assert reply["error"]["message"] == message


def test_a_disabled_prompt_leaves_the_list_and_cannot_be_got(prompt_shop):
    # given
    prompt_update(prompt=prompt_shop["simple"], enabled=False)
    # when
    names = [prompt["name"] for prompt in rpc(prompt_shop, "prompts/list", era=MODERN)["result"]["prompts"]]
    reply = rpc(prompt_shop, "prompts/get", {"name": "test_simple_prompt"}, era=MODERN)
    # then
    assert names == ["usage_guide", "test_prompt_with_arguments"]
    assert reply["error"]["code"] == types.INVALID_PARAMS


@pytest.mark.parametrize("era", ERAS)
def test_completion_of_an_owner_prompt_argument_is_empty(prompt_shop, era):
    # when
    params = {
        "ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
        "argument": {"name": "arg1", "value": "x"},
    }
    completion = rpc(prompt_shop, "completion/complete", params, era=era)["result"]["completion"]
    # then
    assert completion == {"values": [], "total": 0, "hasMore": False}


def test_usage_guide_is_unchanged_beside_owner_prompts(prompt_shop, make_tool, table, bind, owner):
    # given
    bind(prompt_shop["instance"], make_tool(owner, table, name="orders_query", description="Query the orders."))
    # when
    got = rpc(
        prompt_shop, "prompts/get", {"name": "usage_guide", "arguments": {"tool_names": "orders_query"}}, era=MODERN
    )
    bad = rpc(prompt_shop, "prompts/get", {"name": "usage_guide", "arguments": {"arg1": "x"}}, era=MODERN)
    # then
    assert got["result"]["description"] == "The usage guide of Shop's tools."
    assert "orders_query" in got["result"]["messages"][0]["content"]["text"]
    assert bad["error"] == {
        "code": types.INVALID_PARAMS,
        "message": "usage_guide takes tool_names and category; unknown: ['arg1'].",
    }


#
# Concurrency (PostgreSQL)
#


@pytest.mark.postgres
def test_racing_creates_of_one_name_leave_one_prompt_and_name_conflicts(transactional_db, owner, make_instance):
    """Prompts created at once under one name (in different cases): one is written, the others are NAME_CONFLICT."""
    import threading

    from django.core.exceptions import ValidationError
    from django.db import connections

    from tools_app.kernel.errors import ErrorCode
    from tools_app.models import Prompt

    # given
    instance = make_instance(owner, slug="race")
    count = 8
    barrier = threading.Barrier(count)
    results: list = [None] * count

    def create(index: int) -> None:
        try:
            barrier.wait(timeout=60)
            name = "report" if index % 2 else "REPORT"
            results[index] = prompt_create(mcp_instance=instance, name=name, template=f"Racer {index}.")
        except ValidationError as exc:
            results[index] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=create, args=(index,)) for index in range(count)]
    # when
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    # then
    created = [result for result in results if isinstance(result, Prompt)]
    refused = [result for result in results if isinstance(result, ValidationError)]
    assert (len(created), len(refused)) == (1, count - 1)
    assert {error.error_dict["name"][0].code for error in refused} == {ErrorCode.NAME_CONFLICT}
    assert Prompt.objects.filter(mcp_instance=instance).count() == 1
