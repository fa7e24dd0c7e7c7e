"""End to end: owner-chosen resource URIs and the instance log level, with the SDK's client over a
real socket (uvicorn on a loopback port).

Instance `uris`: a text table read whole at test://static-text, records by id through the record template
test://template/{id}/data (also read whole by a query tool, so their keys complete), log level `debug`.
Instance `quiet`: the same query tool, no log level.
"""

import json

import httpx2
import pytest
from mcp_types import ResourceTemplateReference

from tests.live_server import Uvicorn, run_python, sdk_session, server_database

pytestmark = pytest.mark.e2e

SEED = """
from django.contrib.auth import get_user_model
from tools_app import services
user = get_user_model().objects.create(username="uris")
text = services.table_create(owner=user, name="text", data="This is a simple text response for testing.")
records = services.table_create(owner=user, name="records",
                                data=[{"id": 123, "name": "Test Data 123"}, {"id": 124, "name": "Test Data 124"}])
keys = {}
for slug, level in (("uris", "debug"), ("quiet", "")):
    instance = services.instance_create(owner=user, name=slug.title(), slug=slug, log_level=level)
    query = services.tool_create(owner=user, name=f"{slug}_records_query", type="query_data", table=records,
                                 description="Query the records.")
    services.binding_create(mcp_instance=instance, tool=query, name_override="records_query")
    keys[slug] = services.api_key_issue(mcp_instance=instance)[1]
instance = instance.__class__.objects.get(slug="uris")
static = services.tool_create(owner=user, name="static_text", type="get_all_data", table=text,
                              description="The text, whole.")
services.binding_create(mcp_instance=instance, tool=static, resource_uri="test://static-text")
by_id = services.tool_create(owner=user, name="record_by_id", type="select", table=records,
                             description="Records by id.")
services.binding_create(mcp_instance=instance, tool=by_id, resource_uri="test://template/{id}/data")
print(json.dumps(keys))
"""


@pytest.fixture(scope="module")
def uris_server(tmp_path_factory):
    with server_database("b_uris", tmp_path_factory.mktemp("uris"), secret="uris-secret") as env:
        keys = json.loads(run_python(env, SEED))
        with Uvicorn(env) as uvicorn:
            yield {"base": uvicorn.base, "keys": keys}


def session(uris_server, slug: str, mode: str, scenario, **options):
    return sdk_session(f"{uris_server['base']}/mcp/{slug}/", uris_server["keys"][slug], mode, scenario, **options)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_custom_uri_template_and_completion_over_http(uris_server, mode):
    # given
    template = "test://template/{id}/data"

    async def scenario(client):
        resources = await client.list_resources()
        templates = await client.list_resource_templates()
        text = await client.read_resource("test://static-text")
        record = await client.read_resource("test://template/123/data")
        keys = await client.complete(
            ResourceTemplateReference(type="ref/resource", uri=template), {"name": "id", "value": "12"}
        )
        return resources, templates, text, record, keys

    # when
    resources, templates, text, record, keys = session(uris_server, "uris", mode, scenario)
    # then
    assert [str(resource.uri) for resource in resources.resources][0] == "test://static-text"
    assert [t.uri_template for t in templates.resource_templates] == [template]
    assert str(text.contents[0].uri) == "test://static-text"
    assert text.contents[0].mime_type == "application/json"
    assert text.contents[0].text == '"This is a simple text response for testing."'
    assert str(record.contents[0].uri) == "test://template/123/data"
    assert json.loads(record.contents[0].text) == {"id": 123, "name": "Test Data 123"}
    assert keys.completion.values == ["123", "124"]


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # logging/setLevel, on purpose
def test_a_call_on_an_instance_with_a_log_level_brings_its_logs_without_a_progress_token(uris_server):
    # given
    logs = []

    async def on_log(params):
        logs.append((params.level, params.data["message"]))

    async def scenario(client):
        await client.set_logging_level("debug")  # answered, but not kept: the instance's level applies
        return await client.call_tool("records_query", {"query": "length(@)"})

    # when
    result = session(uris_server, "uris", "legacy", scenario, logging_callback=on_log)
    # then
    assert result.structured_content == {"result": 2}
    assert logs == [
        ("debug", "calling records_query"),
        ("debug", "running records_query"),
        ("debug", "records_query ran; recording the call"),
        ("info", "records_query done"),
    ]


def test_an_instance_without_a_log_level_answers_plain_json(uris_server):
    # given
    params = {"name": "records_query", "arguments": {"query": "length(@)"}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    headers = {
        "authorization": f"Bearer {uris_server['keys']['quiet']}",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2025-11-25",
    }
    logged = {**headers, "authorization": f"Bearer {uris_server['keys']['uris']}"}
    # when
    quiet = httpx2.post(f"{uris_server['base']}/mcp/quiet/", json=body, headers=headers, timeout=30)
    streamed = httpx2.post(f"{uris_server['base']}/mcp/uris/", json=body, headers=logged, timeout=30)
    # then
    assert quiet.headers["content-type"].startswith("application/json")
    assert quiet.json()["result"]["structuredContent"] == {"result": 2}
    assert streamed.headers["content-type"].startswith("text/event-stream")
    assert streamed.text.count('"method":"notifications/message"') == 4
