"""End to end: the SDK client over a real socket (uvicorn on a loopback port), in both eras.

A search-mode instance: search_tools then call_tool; resources, a record template, the usage_guide prompt,
completion, progress and logs on the call that asked, and a wrong key shown as a JSON-RPC error.
"""

import json
import subprocess

import httpx2
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import PromptReference, ResourceTemplateReference

from tests.live_server import ROOT, Uvicorn, run_python, sdk_session, seed_mcp, server_database
from tools_app.models import Discovery

pytestmark = pytest.mark.e2e

ERAS = [("legacy", "2025-11-25"), ("auto", "2026-07-28")]

SEARCH_INSTANCE = """
from tools_app import services
from tools_app.models import McpInstance, Tool
instance = McpInstance.objects.get(slug="surface")
services.instance_update(instance=instance, discovery="search")
tool = services.tool_create(owner=instance.owner, name="surface_search", type="search_tools",
                            description="Find this shop's tools.")
services.binding_create(mcp_instance=instance, tool=tool, name_override="search_tools")
reader = services.tool_create(owner=instance.owner, name="surface_all", type="get_all_data",
                              table=Tool.objects.get(name="surface_orders_query").table,
                              description="All orders.")
services.binding_create(mcp_instance=instance, tool=reader, name_override="orders_all")
print(json.dumps({"search": Discovery}))
""".replace("Discovery", '"' + Discovery.SEARCH + '"')


@pytest.fixture(scope="module")
def surface_db(tmp_path_factory):
    with server_database("b_surface", tmp_path_factory.mktemp("surface"), secret="surface-secret") as env:
        seeded = seed_mcp(env, slug="surface", rows=30, user="surface")
        run_python(env, SEARCH_INSTANCE)
        yield {"env": env, **seeded}


@pytest.fixture(scope="module")
def surface_server(surface_db):
    with Uvicorn(surface_db["env"]) as server:
        yield server


@pytest.mark.parametrize(("mode", "version"), ERAS)
def test_search_then_call_tool_over_http(surface_db, surface_server, mode, version):
    # given
    async def scenario(client):
        listed = await client.list_tools()
        found = await client.call_tool("search_tools", {"query": "query orders jmespath"})
        name = found.structured_content["results"][0]["tool_name"]
        called = await client.call_tool(
            "call_tool", {"tool_name": name, "arguments": {"query": "[?id==`7`].status | [0]"}}
        )
        missing = await client.call_tool("call_tool", {"tool_name": "orders_qeury"})
        return client.session.protocol_version, listed, found, called, missing

    # when
    negotiated, listed, found, called, missing = sdk_session(
        f"{surface_server.base}/mcp/surface/", surface_db["key"], mode, scenario
    )
    # then
    assert negotiated == version
    assert [tool.name for tool in listed.tools] == ["call_tool", "search_tools"]
    assert found.structured_content["call_with"] == "call_tool"
    assert called.is_error is False
    assert called.structured_content == {"result": "cancelled"}
    assert missing.is_error is True
    assert missing.structured_content["details"]["suggestions"][0] == "orders_query"


@pytest.mark.parametrize(("mode", "version"), ERAS)
def test_resources_prompts_and_completion_over_http(surface_db, surface_server, mode, version):
    # given
    uri = f"toolhub://tables/{surface_db['table_id']}"

    async def scenario(client):
        resources = await client.list_resources()
        templates = await client.list_resource_templates()
        whole = await client.read_resource(uri)
        record = await client.read_resource(uri + "?key=7")
        prompts = await client.list_prompts()
        guide = await client.get_prompt("usage_guide", {"tool_names": "orders_query"})
        names = await client.complete(
            PromptReference(type="ref/prompt", name="usage_guide"), {"name": "tool_names", "value": "orders_q"}
        )
        keys = await client.complete(
            ResourceTemplateReference(type="ref/resource", uri=uri + "{?key}"), {"name": "key", "value": "2"}
        )
        return resources, templates, whole, record, prompts, guide, names, keys

    # when
    resources, templates, whole, record, prompts, guide, names, keys = sdk_session(
        f"{surface_server.base}/mcp/surface/", surface_db["key"], mode, scenario
    )
    # then
    assert [str(resource.uri) for resource in resources.resources] == [uri]
    assert [template.uri_template for template in templates.resource_templates] == [uri + "{?key}"]
    assert len(json.loads(whole.contents[0].text)) == 30
    assert json.loads(record.contents[0].text)["id"] == 7
    assert [prompt.name for prompt in prompts.prompts] == ["usage_guide"]
    assert "orders_query" in guide.messages[0].content.text
    assert names.completion.values == ["orders_query"]
    assert keys.completion.values == ["2", "20", "21", "22", "23", "24", "25", "26", "27", "28", "29"]


@pytest.mark.parametrize(("mode", "log_level"), [("legacy", None), ("auto", "debug")])
def test_progress_and_logs_over_http(surface_db, surface_server, mode, log_level):
    # given
    progress, logs = [], []

    async def on_progress(value, total, message):
        progress.append((value, total))

    async def on_log(params):
        logs.append(params.data["message"])

    async def scenario(client):
        return await client.call_tool(
            "call_tool",
            {"tool_name": "orders_query", "arguments": {"query": "length(@)"}},
            progress_callback=on_progress,
        )

    # when
    result = sdk_session(
        f"{surface_server.base}/mcp/surface/",
        surface_db["key"],
        mode,
        scenario,
        logging_callback=on_log,
        log_level=log_level,
    )
    # then
    assert result.structured_content == {"result": 30}
    assert progress == [(0, 3), (1, 3), (2, 3), (3, 3)]
    assert logs == [
        "calling call_tool",
        "running orders_query",
        "orders_query ran; recording the call",
        "call_tool done",
    ]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_wrong_key_is_a_json_rpc_error_the_sdk_shows(surface_db, surface_server, mode):
    # given
    async def scenario(client):
        return await client.list_tools()

    # when
    with pytest.raises(BaseException) as raised:
        sdk_session(f"{surface_server.base}/mcp/surface/", "th_wrong", mode, scenario)
    raw = httpx2.post(
        f"{surface_server.base}/mcp/surface/",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"accept": "application/json, text/event-stream", "authorization": "Bearer th_wrong"},
    )
    # then
    error = raised.value
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    assert isinstance(error, MCPError)
    assert str(error).startswith("UNAUTHORIZED: ")
    assert raw.status_code == 401
    assert raw.headers["www-authenticate"].startswith("Bearer")
    assert raw.json()["error"]["code"] == -32001


INSPECTOR = ROOT / "node_modules" / ".bin" / "mcp-inspector"


@pytest.mark.skipif(not INSPECTOR.exists(), reason="MCP Inspector not installed (npm install in the project root)")
def test_mcp_inspector_cli_runs_a_search_mode_tool_through_call_tool(surface_db, surface_server):
    """The Inspector CLI only calls listed tools: on a search-mode instance it reaches any tool via call_tool."""
    # given
    common = [
        str(INSPECTOR),
        "--cli",
        f"{surface_server.base}/mcp/surface/",
        "--transport",
        "http",
        "--header",
        f"Authorization: Bearer {surface_db['key']}",
    ]
    call = ["--method", "tools/call", "--tool-name", "call_tool", "--tool-arg", "tool_name=orders_query"]
    # when
    called = subprocess.run(
        [*common, *call, "--tool-arg", 'arguments={"query": "length(@)"}'],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    # then
    assert called.returncode == 0, called.stderr
    result = json.loads(called.stdout)
    assert result["isError"] is False
    assert result["structuredContent"] == {"result": 30}
