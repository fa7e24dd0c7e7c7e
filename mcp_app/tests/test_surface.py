"""The call proxy, resources, prompts, completion, progress and logs, in process, in both eras.

Raw JSON-RPC through the endpoint (mcp_harness.Harness) and the SDK's own Client over the ASGI app.
The same scenarios over a real socket: mcp_app/tests/test_e2e_surface.py.
"""

import json

import pytest
from mcp import types
from mcp.shared.exceptions import MCPError

from mcp_app.tests.mcp_harness import ERAS, LEGACY, MODERN, Harness
from tests import factories
from tests.module_data import fixtures_built_once
from tools_app.models import CallLog, Discovery, Tool
from tools_app.services import (
    api_key_issue,
    binding_create,
    binding_update,
    instance_create,
    instance_update,
    table_create,
)

PEOPLE = {"people": [{"sku": f"P-{n:02d}", "name": f"person {n}"} for n in range(1, 13)], "meta": {"v": 1}}


def build_search_shop() -> dict:
    """Instance 'shop' in search mode: the registry's search tools, a query tool, select and get_all_data."""
    owner = factories.user("owner")
    table = factories.table(owner)
    instance = instance_create(owner=owner, slug="shop", name="Shop", discovery=Discovery.SEARCH)

    def bound(table, type: str, name: str, **fields) -> Tool:
        tool = factories.tool(owner, table, type=type, name=name, **fields)
        binding_create(mcp_instance=instance, tool=tool)
        return tool

    for name in ("search_tools", "get_tool_definition"):
        bound(None, name, name, description=f"Registry tool {name}.")
    query = bound(table, "query_data", "orders_query", description="Query the shop's orders with JMESPath.")
    select = bound(table, "select", "orders_by_id", description="Orders by id.")
    people = table_create(owner=owner, name="people", data=PEOPLE, description="The shop's people")
    everyone = bound(people, "get_all_data", "people_all", json_path="/people")
    by_sku = bound(people, "select", "people_by_sku", json_path="/people", metadata={"key_field": "sku"})
    schema_only = table_create(owner=owner, name="secret", data={"a": [1]})
    bound(schema_only, "get_data_schema", "secret_schema")
    return {
        "instance": instance,
        "query": query,
        "select": select,
        "people": people,
        "everyone": everyone,
        "by_sku": by_sku,
        "key": api_key_issue(mcp_instance=instance, label="test")[1],
    }


_search_shop_once, search_shop = fixtures_built_once("search_shop", build_search_shop)


def rpc(search_shop, method, params=None, *, era=LEGACY):
    return Harness().rpc("shop", search_shop["key"], method, params, era=era)


#
# call_tool
#


@pytest.mark.parametrize("era", ERAS)
def test_search_mode_lists_call_tool_first_and_it_runs_a_tool_recorded_under_its_name(search_shop, era):
    # when
    listed = rpc(search_shop, "tools/list", era=era)["result"]["tools"]
    called = rpc(
        search_shop,
        "tools/call",
        {
            "name": "call_tool",
            "arguments": {"tool_name": "orders_query", "arguments": {"query": "[?id==`2`].customer | [0]"}},
        },
        era=era,
    )["result"]
    # then
    assert [tool["name"] for tool in listed] == ["call_tool", "get_tool_definition", "search_tools"]
    assert listed[0]["inputSchema"]["required"] == ["tool_name"]
    assert called["isError"] is False
    assert called["structuredContent"] == {"result": "alan"}
    log = CallLog.objects.get()
    assert (log.tool_name, log.tool_id, log.status) == ("orders_query", search_shop["query"].pk, "ok")
    assert Tool.objects.get(pk=search_shop["query"].pk).use_count == 1


@pytest.mark.parametrize("era", ERAS)
def test_call_tool_unknown_name_is_tool_not_found_with_the_nearest_names(search_shop, era):
    # when
    result = rpc(search_shop, "tools/call", {"name": "call_tool", "arguments": {"tool_name": "order_query"}}, era=era)
    # then
    result = result["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith("TOOL_NOT_FOUND: Unknown tool 'order_query'")
    assert result["structuredContent"]["details"] == {
        "tool_name": "order_query",
        "suggestions": ["orders_query", "orders_by_id"],
    }
    log = CallLog.objects.get()
    assert (log.tool_name, log.tool_id, log.error_code) == ("order_query", None, "TOOL_NOT_FOUND")
    assert Tool.objects.get(pk=search_shop["query"].pk).use_count == 0


def test_call_tool_of_a_disabled_binding_is_tool_not_found_and_runs_nothing(search_shop):
    # given
    binding = search_shop["instance"].bindings.get(tool=search_shop["query"])
    binding_update(binding=binding, enabled=False)
    # when
    result = rpc(
        search_shop,
        "tools/call",
        {"name": "call_tool", "arguments": {"tool_name": "orders_query", "arguments": {"query": "@"}}},
    )["result"]
    # then
    assert result["isError"] is True
    assert result["structuredContent"]["error"] == "TOOL_NOT_FOUND"
    assert "orders_query" not in result["structuredContent"]["details"]["suggestions"]
    assert Tool.objects.get(pk=search_shop["query"].pk).use_count == 0


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "'tool_name' must be a non-empty string"),
        ({"tool_name": 7}, "'tool_name' must be a non-empty string"),
        ({"tool_name": "orders_query", "arguments": [1]}, "'arguments' must be an object"),
        ({"tool_name": "orders_query", "extra": 1}, "unknown: 'extra'"),
    ],
)
def test_call_tool_bad_arguments_are_invalid_arguments_and_run_nothing(search_shop, arguments, message):
    # when
    result = rpc(search_shop, "tools/call", {"name": "call_tool", "arguments": arguments})["result"]
    # then
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith("INVALID_ARGUMENTS: Invalid arguments: ")
    assert message in result["content"][0]["text"]
    assert CallLog.objects.count() == 0


def test_call_tool_with_a_name_no_tool_can_have_is_tool_not_found(search_shop):
    # when
    result = rpc(search_shop, "tools/call", {"name": "call_tool", "arguments": {"tool_name": "bad\u0000name" * 20}})[
        "result"
    ]
    # then
    assert result["isError"] is True
    assert result["structuredContent"]["error"] == "TOOL_NOT_FOUND"


def test_call_tool_arguments_failing_the_tools_schema_name_the_argument(search_shop):
    # when
    result = rpc(
        search_shop,
        "tools/call",
        {"name": "call_tool", "arguments": {"tool_name": "orders_query", "arguments": {"query": 5}}},
    )["result"]
    # then
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith("INVALID_ARGUMENTS: ")
    assert CallLog.objects.get().tool_id == search_shop["query"].pk


def test_without_search_mode_there_is_no_call_tool(search_shop):
    # given
    instance_update(instance=search_shop["instance"], discovery=Discovery.LIST_ALL)
    # when
    listed = rpc(search_shop, "tools/list")["result"]["tools"]
    refused = rpc(search_shop, "tools/call", {"name": "call_tool", "arguments": {"tool_name": "orders_query"}})
    # then
    assert "call_tool" not in [tool["name"] for tool in listed]
    assert refused["error"]["code"] == types.INVALID_PARAMS


def test_search_tools_and_the_guide_point_to_call_tool_in_search_mode(search_shop):
    # when
    found = rpc(search_shop, "tools/call", {"name": "search_tools", "arguments": {"query": "orders"}})["result"]
    guide = rpc(search_shop, "prompts/get", {"name": "usage_guide"})["result"]
    # then
    assert "call_tool" in found["content"][0]["text"]
    assert found["structuredContent"]["call_with"] == "call_tool"
    assert "call_tool" in guide["messages"][0]["content"]["text"]


#
# resources
#


@pytest.mark.parametrize("era", ERAS)
def test_resources_are_the_mounts_a_bound_tool_reads_whole(search_shop, era):
    # when
    listed = rpc(search_shop, "resources/list", era=era)["result"]
    templates = rpc(search_shop, "resources/templates/list", era=era)["result"]
    # then
    people_uri = f"toolhub://tables/{search_shop['people'].pk}/people"
    orders_uri = f"toolhub://tables/{search_shop['query'].table_id}"
    assert [resource["uri"] for resource in listed["resources"]] == sorted([orders_uri, people_uri])
    people = next(resource for resource in listed["resources"] if resource["uri"] == people_uri)
    assert people["mimeType"] == "application/json"
    assert people["name"] == "people/people"
    assert [t["uriTemplate"] for t in templates["resourceTemplates"]] == sorted(
        [people_uri + "{?key}", orders_uri + "{?key}"]
    )
    if era == MODERN:
        assert (listed["ttlMs"], listed["cacheScope"]) == (0, "private")


@pytest.mark.parametrize("era", ERAS)
def test_resource_lists_are_paged(search_shop, era, settings):
    # given
    settings.TOOLHUB_MCP_PAGE_SIZE = 1
    # when
    first = rpc(search_shop, "resources/list", era=era)["result"]
    second = rpc(search_shop, "resources/list", {"cursor": first["nextCursor"]}, era=era)["result"]
    templates = rpc(search_shop, "resources/templates/list", era=era)["result"]
    more = rpc(search_shop, "resources/templates/list", {"cursor": templates["nextCursor"]}, era=era)["result"]
    bad = rpc(search_shop, "resources/list", {"cursor": "nonsense"}, era=era)
    # then
    assert [r["uri"] for r in first["resources"] + second["resources"]] == sorted(
        [f"toolhub://tables/{search_shop['query'].table_id}", f"toolhub://tables/{search_shop['people'].pk}/people"]
    )
    assert "nextCursor" not in second
    assert len(templates["resourceTemplates"] + more["resourceTemplates"]) == 2
    assert "nextCursor" not in more
    assert bad["error"]["code"] == types.INVALID_PARAMS


@pytest.mark.parametrize("era", ERAS)
def test_reading_a_resource_runs_its_tool_through_the_pipeline(search_shop, era):
    # given
    uri = f"toolhub://tables/{search_shop['people'].pk}/people"
    # when
    read = rpc(search_shop, "resources/read", {"uri": uri}, era=era)["result"]
    record = rpc(search_shop, "resources/read", {"uri": uri + "?key=P-03"}, era=era)["result"]
    # then
    assert read["contents"][0]["mimeType"] == "application/json"
    assert json.loads(read["contents"][0]["text"]) == PEOPLE["people"]
    assert json.loads(record["contents"][0]["text"]) == {"sku": "P-03", "name": "person 3"}
    assert list(CallLog.objects.order_by("id").values_list("tool_name", flat=True)) == ["people_all", "people_by_sku"]


def test_a_resource_over_the_budget_comes_in_pages(search_shop):
    # given
    instance_update(instance=search_shop["instance"], max_result_bytes=1_000)
    big = {"people": [{"sku": f"P-{n:03d}", "name": "x" * 40} for n in range(60)]}
    from tools_app.services import table_update

    table_update(table=search_shop["people"], data=big)
    uri = f"toolhub://tables/{search_shop['people'].pk}/people"
    # when
    first = rpc(search_shop, "resources/read", {"uri": uri})["result"]["contents"][0]
    second = rpc(search_shop, "resources/read", {"uri": first["_meta"]["toolhub/next"]})["result"]["contents"][0]
    # then
    page = json.loads(first["text"])
    assert page["total"] == 60
    assert len(page["items"]) < 60
    assert len(first["text"].encode()) <= 1_000
    assert json.loads(second["text"])["items"][0] == big["people"][len(page["items"])]


@pytest.mark.parametrize(
    ("uri", "code", "words"),
    [
        ("toolhub://tables/999/people", -32002, "Resource not found"),
        ("file:///etc/passwd", -32002, "Resource not found"),
        ("toolhub://tables/{people}/people?key=nobody", -32002, "no record has the key 'nobody'"),
        ("toolhub://tables/{secret}", -32002, "Resource not found"),
        ("toolhub://tables/{people}/people?other=1", types.INVALID_PARAMS, "one of ?key"),
        ("toolhub://tables/" + "9" * 3000, types.INVALID_PARAMS, "over 2000 characters"),
    ],
)
def test_unknown_or_unserved_resources_are_errors(search_shop, uri, code, words):
    # given
    secret = Tool.objects.get(name="secret_schema").table_id
    uri = uri.replace("{people}", str(search_shop["people"].pk)).replace("{secret}", str(secret))
    # when
    reply = rpc(search_shop, "resources/read", {"uri": uri})
    # then
    assert reply["error"]["code"] == code
    assert words in reply["error"]["message"]


#
# prompts and completion
#


@pytest.mark.parametrize("era", ERAS)
def test_usage_guide_prompt_with_its_arguments(search_shop, era):
    # when
    listed = rpc(search_shop, "prompts/list", era=era)["result"]["prompts"]
    got = rpc(search_shop, "prompts/get", {"name": "usage_guide", "arguments": {"tool_names": "orders_query"}}, era=era)
    unknown = rpc(search_shop, "prompts/get", {"name": "nope"}, era=era)
    # then
    assert [(p["name"], [a["name"] for a in p["arguments"]]) for p in listed] == [
        ("usage_guide", ["tool_names", "category"])
    ]
    text = got["result"]["messages"][0]["content"]["text"]
    assert got["result"]["messages"][0]["role"] == "user"
    assert "orders_query" in text
    assert "people_all" not in text
    assert unknown["error"]["code"] == types.INVALID_PARAMS


@pytest.mark.parametrize("era", ERAS)
def test_completion_of_prompt_arguments_and_record_keys(search_shop, era):
    # given
    template = f"toolhub://tables/{search_shop['people'].pk}/people{{?key}}"

    def complete(ref, name, value):
        params = {"ref": ref, "argument": {"name": name, "value": value}}
        return rpc(search_shop, "completion/complete", params, era=era)["result"]["completion"]

    prompt = {"type": "ref/prompt", "name": "usage_guide"}
    # when
    names = complete(prompt, "tool_names", "orders_query, peo")
    category = complete(prompt, "category", "R")
    keys = complete({"type": "ref/resource", "uri": template}, "key", "p-1")
    other = complete({"type": "ref/prompt", "name": "test_prompt_with_arguments"}, "arg1", "x")
    # then
    assert names["values"] == ["orders_query,people_all", "orders_query,people_by_sku"]
    assert category["values"] == ["read", "registry"]
    assert keys == {"values": ["P-10", "P-11", "P-12"], "total": 3, "hasMore": False}
    assert other["values"] == []


def test_keys_of_a_mount_only_select_reads_are_not_completed(search_shop):
    # given
    binding = search_shop["instance"].bindings.get(tool=search_shop["everyone"])
    binding_update(binding=binding, enabled=False)
    template = f"toolhub://tables/{search_shop['people'].pk}/people{{?key}}"
    # when
    params = {"ref": {"type": "ref/resource", "uri": template}, "argument": {"name": "key", "value": ""}}
    completion = rpc(search_shop, "completion/complete", params)["result"]["completion"]
    record = rpc(search_shop, "resources/read", {"uri": template.replace("{?key}", "?key=P-02")})["result"]
    # then
    assert completion["values"] == []
    assert json.loads(record["contents"][0]["text"])["sku"] == "P-02"  # by a known key, still served


#
# logging and progress
#


def test_set_level_is_accepted_in_the_handshake_era(search_shop):
    # when
    reply = rpc(search_shop, "logging/setLevel", {"level": "debug"})
    # then
    assert reply["result"] == {}


@pytest.mark.parametrize(("mode", "log_level"), [("legacy", None), ("auto", "debug")])
def test_sdk_client_gets_progress_and_logs_on_the_call_that_asked(search_shop, mode, log_level):
    # given
    progress, logs = [], []

    async def on_progress(value, total, message):
        progress.append((value, total, message))

    async def scenario(client):
        client.logging_callback = None
        plain = await client.call_tool("orders_query", {"query": "length(@)"})
        streamed = await client.call_tool("orders_query", {"query": "length(@)"}, progress_callback=on_progress)
        return plain, streamed

    async def on_log(params):
        logs.append(params)

    # when
    plain, streamed = sdk_client(search_shop, scenario, mode=mode, logging_callback=on_log, log_level=log_level)
    # then
    assert plain.structured_content == streamed.structured_content == {"result": 3}
    assert progress == [
        (0, 3, "calling orders_query"),
        (1, 3, "running orders_query"),
        (2, 3, "orders_query ran; recording the call"),
        (3, 3, "orders_query done"),
    ]
    assert [log.data["message"] for log in logs][-4:] == [message for _, _, message in progress]
    assert [log.level for log in logs][-4:] == ["debug", "debug", "debug", "info"]


@pytest.mark.parametrize("era", ERAS)
def test_a_streamed_call_with_a_revoked_key_is_401_and_runs_nothing(search_shop, era):
    # given
    from mcp_app.tests.mcp_harness import rpc_body
    from tools_app.services import api_key_revoke

    harness = Harness()
    assert harness.post("shop", rpc_body("tools/list", era=era), key=search_shop["key"], era=era).status_code == 200
    api_key_revoke(api_key=search_shop["instance"].api_keys.get())
    params = {"name": "orders_query", "arguments": {"query": "@"}, "_meta": {"progressToken": "p1"}}
    # when
    response = harness.post("shop", rpc_body("tools/call", params, era=era), key=search_shop["key"], era=era)
    # then
    assert response.status_code == 401
    assert response.json()["error"]["data"]["error"] == "UNAUTHORIZED"
    assert CallLog.objects.count() == 0


def sdk_client(search_shop, scenario, *, mode, **options):
    import httpx2
    from asgiref.sync import async_to_sync
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    harness = Harness()

    async def run():
        async with harness.endpoint.running():
            http = httpx2.AsyncClient(
                transport=httpx2.ASGITransport(app=harness.endpoint),
                headers={"authorization": f"Bearer {search_shop['key']}"},
            )
            async with http:
                transport = streamable_http_client("http://localhost/mcp/shop/", http_client=http)
                async with Client(transport, mode=mode, cache=None, **options) as client:
                    return await scenario(client)

    return async_to_sync(run)()


#
# interop
#


@pytest.mark.parametrize("era", ERAS)
def test_server_info_names_toolhub_and_its_version(search_shop, era):
    # given
    import tomllib

    from tools_app import __version__

    with open("pyproject.toml", "rb") as handle:
        version = tomllib.load(handle)["project"]["version"]

    async def scenario(client):
        return client.session.server_info if hasattr(client.session, "server_info") else None

    # when
    reply = Harness().rpc(
        "shop",
        search_shop["key"],
        "initialize",
        {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    )
    # then
    assert __version__ == version
    assert reply["result"]["serverInfo"]["name"] == "toolhub"
    assert reply["result"]["serverInfo"]["version"] == version


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_sdk_client_with_a_wrong_key_sees_why(search_shop, mode):
    # given
    search_shop = {**search_shop, "key": "th_wrong"}

    async def scenario(client):
        return await client.list_tools()

    # when
    with pytest.raises(Exception) as raised:
        sdk_client(search_shop, scenario, mode=mode)
    # then
    error = raised.value
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    assert isinstance(error, MCPError)
    assert "UNAUTHORIZED: " in str(error)


def _type_arrays(schema, path="$"):
    found = []
    if isinstance(schema, dict):
        if isinstance(schema.get("type"), list):
            found.append(path)
        for key, value in schema.items():
            found += _type_arrays(value, f"{path}.{key}")
    elif isinstance(schema, list):
        for index, value in enumerate(schema):
            found += _type_arrays(value, f"{path}[{index}]")
    return found


@pytest.mark.parametrize("era", ERAS)
def test_listed_schemas_have_no_type_arrays(search_shop, era):
    # given
    instance_update(instance=search_shop["instance"], discovery=Discovery.LIST_ALL)
    # when
    listed = rpc(search_shop, "tools/list", era=era)["result"]["tools"]
    # then
    by_name = {tool["name"]: tool for tool in listed}
    assert by_name["orders_by_id"]["inputSchema"]["properties"]["keys"]["items"] == {
        "anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "number"}],
        "description": "A key; numbers and strings compare as strings.",
    }
    assert [(tool["name"], _type_arrays(tool)) for tool in listed if _type_arrays(tool)] == []
    assert Tool.objects.get(name="orders_by_id").input_schema["properties"]["keys"]["items"]["type"] == [
        "string",
        "integer",
        "number",
    ]  # stored as written: only what hosts see changes


def test_select_keys_still_validate_through_the_anyof_form(search_shop):
    # when
    result = rpc(search_shop, "tools/call", {"name": "orders_by_id", "arguments": {"keys": [1, "2"]}})["result"]
    refused = rpc(search_shop, "tools/call", {"name": "orders_by_id", "arguments": {"keys": [True]}})["result"]
    # then
    assert [item["id"] for item in result["structuredContent"]["items"]] == [1, 2]
    assert refused["isError"] is True


@pytest.mark.parametrize("fmt", ["mcp", "openai", "anthropic"])
def test_every_export_format_has_no_type_arrays(search_shop, fmt):
    # given
    from tools_app.registry import export_tools
    from tools_app.registry.instance_scope import InstanceScope

    # when
    exported = export_tools(scope=InstanceScope(search_shop["instance"]), format=fmt)
    # then
    assert exported["count"] == 7
    assert _type_arrays(exported["tools"]) == []


def test_without_type_arrays_keeps_the_schema_and_shares_unchanged_parts():
    # given
    from tools_app.registry.export import without_type_arrays

    plain = {"type": "object", "properties": {"a": {"type": "string"}}}
    mixed = {
        "type": ["object", "null"],
        "properties": {"a": {"type": ["string"], "minLength": 1}, "b": plain},
        "anyOf": [{"required": ["a"]}, {"required": ["b"]}],
    }
    # when
    same = without_type_arrays(plain)
    changed = without_type_arrays(mixed)
    # then
    assert same is plain
    assert changed == {
        "properties": {"a": {"minLength": 1, "type": "string"}, "b": plain},
        "allOf": [
            {"anyOf": [{"type": "object"}, {"type": "null"}]},
            {"anyOf": [{"required": ["a"]}, {"required": ["b"]}]},
        ],
    }
    assert changed["properties"]["b"] is plain
    assert mixed["type"] == ["object", "null"]  # the input is not changed
