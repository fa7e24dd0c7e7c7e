"""End to end: an owner's prompts through the SDK client over a real socket (uvicorn on a loopback
port), in both eras: listed after usage_guide, got with arguments, refused naming a missing argument."""

import json

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, PromptReference

from tests.live_server import Uvicorn, run_python, sdk_session, server_database

pytestmark = pytest.mark.e2e

ERAS = [("legacy", "2025-11-25"), ("auto", "2026-07-28")]

SEED = """
from django.contrib.auth import get_user_model
from tools_app import services
owner = get_user_model().objects.create_user("prompter", password="pw-123456!")
instance = services.instance_create(owner=owner, name="Reports", slug="reports")
services.prompt_create(mcp_instance=instance, name="test_simple_prompt", template="This is a simple prompt.")
services.prompt_create(
    mcp_instance=instance,
    name="weekly_report",
    title="Weekly report",
    description="Draft the weekly report of one region.",
    arguments=[{"name": "region", "description": "Region name.", "required": True}, {"name": "week"}],
    template="Write the weekly report for {{region}}, week {{week}}.",
)
_, key = services.api_key_issue(mcp_instance=instance, label="e2e")
print(json.dumps({"key": key}))
"""


@pytest.fixture(scope="module")
def prompts_db(tmp_path_factory):
    with server_database("b_prompts", tmp_path_factory.mktemp("prompts"), secret="prompts-secret") as env:
        seeded = run_python(env, SEED)
        yield {"env": env, "key": json.loads(seeded)["key"]}


@pytest.fixture(scope="module")
def prompts_server(prompts_db):
    with Uvicorn(prompts_db["env"]) as server:
        yield server


@pytest.mark.parametrize(("mode", "version"), ERAS)
def test_sdk_client_lists_and_gets_an_owner_prompt_with_arguments(prompts_db, prompts_server, mode, version):
    # given
    async def scenario(client):
        listed = await client.list_prompts()
        got = await client.get_prompt("weekly_report", {"region": "EMEA", "week": "48"})
        completion = await client.complete(
            PromptReference(type="ref/prompt", name="weekly_report"), {"name": "region", "value": "E"}
        )
        try:
            await client.get_prompt("weekly_report", {"week": "48"})
        except MCPError as exc:
            refused = exc
        else:
            refused = None
        return client.session.protocol_version, listed, got, completion, refused

    # when
    negotiated, listed, got, completion, refused = sdk_session(
        f"{prompts_server.base}/mcp/reports/", prompts_db["key"], mode, scenario
    )
    # then
    assert negotiated == version
    assert [prompt.name for prompt in listed.prompts] == ["usage_guide", "test_simple_prompt", "weekly_report"]
    weekly = listed.prompts[2]
    assert (weekly.title, weekly.description) == ("Weekly report", "Draft the weekly report of one region.")
    assert [(a.name, a.description, a.required) for a in weekly.arguments] == [
        ("region", "Region name.", True),
        ("week", None, False),
    ]
    assert got.description == "Draft the weekly report of one region."
    assert [(message.role, message.content.type, message.content.text) for message in got.messages] == [
        ("user", "text", "Write the weekly report for EMEA, week 48.")
    ]
    assert (completion.completion.values, completion.completion.total) == ([], 0)
    assert refused is not None
    assert (refused.error.code, refused.error.message) == (
        INVALID_PARAMS,
        "The prompt 'weekly_report' needs the argument 'region'.",
    )
