"""Over MCP, in process: bindings' own resource URIs (Binding.resource_uri) and the instance's log
level (McpInstance.log_level). Raw JSON-RPC through the endpoint (mcp_harness.Harness), in both eras."""

import json

import pytest

from mcp_app.tests.mcp_harness import ERAS, LEGACY, MODERN, Harness, rpc_body
from tools_app.models import CallLog
from tools_app.services import binding_update, instance_update
from tools_app.tests.services.test_concurrency import _in_threads

RECORDS = [{"id": 123, "name": "Test Data 123"}, {"id": 124, "name": "Test Data 124"}, {"id": "a b", "name": "spaced"}]


@pytest.fixture
def site(owner, make_table, make_tool, instance, bind, make_api_key):
    """Instance 'shop': a text table read whole at test://static-text, records by id through the template
    test://template/{id}/data (and read whole by a query tool at the default URI), and orders_query."""
    text = make_table(owner, name="text", data="This is a simple text response for testing.")
    records = make_table(owner, name="records", data=RECORDS)
    static = make_tool(owner, text, type="get_all_data", name="static_text")
    by_id = make_tool(owner, records, type="select", name="record_by_id")
    reader = make_tool(owner, records, type="query_data", name="records_query")
    return {
        "instance": instance,
        "text": text,
        "records": records,
        "static": bind(instance, static, resource_uri="test://static-text"),
        "by_id": bind(instance, by_id, resource_uri="test://template/{id}/data"),
        "reader": bind(instance, reader),
        "key": make_api_key(instance)[1],
    }


def rpc(site, method, params=None, *, era=LEGACY):
    return Harness().rpc("shop", site["key"], method, params, era=era)


#
# resources
#


@pytest.mark.parametrize("era", ERAS)
def test_lists_show_the_custom_uri_and_template_beside_the_defaults(site, era):
    # when
    listed = rpc(site, "resources/list", era=era)["result"]["resources"]
    templates = rpc(site, "resources/templates/list", era=era)["result"]["resourceTemplates"]
    # then
    records_uri = f"toolhub://tables/{site['records'].pk}"
    assert [resource["uri"] for resource in listed] == ["test://static-text", records_uri]
    assert listed[0] == {
        "uri": "test://static-text",
        "name": "text",
        "title": "text",
        "description": "The data of table 'text', as JSON (what the tool static_text returns).",
        "mimeType": "application/json",
    }
    assert templates == [
        {
            "uriTemplate": "test://template/{id}/data",
            "name": "records record",
            "title": "One record of records",
            "description": "One record by its key (id = the record's 'id', compared as a string), as JSON: what "
            "the tool record_by_id returns for that key.",
            "mimeType": "application/json",
        }
    ]


@pytest.mark.parametrize("era", ERAS)
def test_reading_the_custom_uri_runs_its_tool(site, era):
    # when
    read = rpc(site, "resources/read", {"uri": "test://static-text"}, era=era)["result"]
    # then
    assert read["contents"] == [
        {
            "uri": "test://static-text",
            "mimeType": "application/json",
            "text": '"This is a simple text response for testing."',
        }
    ]
    assert list(CallLog.objects.values_list("tool_name", "status")) == [("static_text", "ok")]


@pytest.mark.parametrize("era", ERAS)
def test_reading_through_the_template_substitutes_the_key(site, era):
    # when
    record = rpc(site, "resources/read", {"uri": "test://template/123/data"}, era=era)["result"]
    spaced = rpc(site, "resources/read", {"uri": "test://template/a%20b/data"}, era=era)["result"]
    # then
    assert record["contents"] == [
        {"uri": "test://template/123/data", "mimeType": "application/json", "text": '{"id":123,"name":"Test Data 123"}'}
    ]
    assert json.loads(spaced["contents"][0]["text"]) == {"id": "a b", "name": "spaced"}
    assert list(CallLog.objects.order_by("id").values_list("tool_name", flat=True)) == ["record_by_id"] * 2


@pytest.mark.parametrize(
    ("uri", "words"),
    [
        ("test://template/999/data", "no record has the key '999'"),
        ("test://template/1/2/data", "no enabled tool of this instance is served at that URI"),
        ("test://static-text/more", "no enabled tool of this instance is served at that URI"),
        ("toolhub://elsewhere", "this server's default resources start with toolhub://tables/"),
    ],
)
def test_unserved_custom_uris_are_resource_not_found(site, uri, words):
    # when
    reply = rpc(site, "resources/read", {"uri": uri})
    # then
    assert reply["error"]["code"] == -32002
    assert words in reply["error"]["message"]


def test_a_disabled_binding_takes_its_uri_with_it(site):
    # given
    binding_update(binding=site["static"], enabled=False)
    # when
    listed = rpc(site, "resources/list")["result"]["resources"]
    reply = rpc(site, "resources/read", {"uri": "test://static-text"})
    # then
    assert [resource["uri"] for resource in listed] == [f"toolhub://tables/{site['records'].pk}"]
    assert reply["error"]["code"] == -32002


def test_without_a_custom_uri_the_default_uri_is_served_again(site):
    # given
    binding_update(binding=site["static"], resource_uri="")
    binding_update(binding=site["by_id"], resource_uri="")
    default = f"toolhub://tables/{site['text'].pk}"
    records = f"toolhub://tables/{site['records'].pk}"
    # when
    listed = rpc(site, "resources/list")["result"]["resources"]
    templates = rpc(site, "resources/templates/list")["result"]["resourceTemplates"]
    read = rpc(site, "resources/read", {"uri": default})["result"]
    # then
    assert [resource["uri"] for resource in listed] == sorted([default, records])
    assert [template["uriTemplate"] for template in templates] == [records + "{?key}"]
    assert read["contents"][0]["text"] == '"This is a simple text response for testing."'


def test_a_custom_uri_over_the_budget_comes_in_pages(site):
    # given
    from tools_app.services import table_update

    instance_update(instance=site["instance"], max_result_bytes=1_000)
    table_update(table=site["text"], data=[{"n": n, "pad": "x" * 40} for n in range(60)])
    # when
    first = rpc(site, "resources/read", {"uri": "test://static-text"})["result"]["contents"][0]
    second = rpc(site, "resources/read", {"uri": first["_meta"]["toolhub/next"]})["result"]["contents"][0]
    # then
    page = json.loads(first["text"])
    assert first["_meta"]["toolhub/next"].startswith("test://static-text?cursor=")
    assert page["total"] == 60
    assert json.loads(second["text"])["items"][0] == {"n": len(page["items"]), "pad": "x" * 40}
    assert second["uri"] == first["_meta"]["toolhub/next"]


#
# completion
#


@pytest.mark.parametrize("era", ERAS)
def test_the_templates_variable_completes_to_record_keys(site, era):
    # given
    ref = {"type": "ref/resource", "uri": "test://template/{id}/data"}

    def complete(name, value):
        params = {"ref": ref, "argument": {"name": name, "value": value}}
        return rpc(site, "completion/complete", params, era=era)["result"]["completion"]

    # when
    ids = complete("id", "12")
    wrong_name = complete("key", "12")
    # then
    assert ids == {"values": ["123", "124"], "total": 2, "hasMore": False}
    assert wrong_name["values"] == []


def test_keys_are_not_completed_when_no_tool_reads_the_mount_whole(site):
    # given
    binding_update(binding=site["reader"], enabled=False)
    params = {
        "ref": {"type": "ref/resource", "uri": "test://template/{id}/data"},
        "argument": {"name": "id", "value": ""},
    }
    # when
    completion = rpc(site, "completion/complete", params)["result"]["completion"]
    record = rpc(site, "resources/read", {"uri": "test://template/124/data"})["result"]
    # then
    assert completion["values"] == []
    assert json.loads(record["contents"][0]["text"])["id"] == 124  # by a known key, still served


#
# the instance's log level
#


def events(response) -> list[dict]:
    """The JSON-RPC messages of an SSE answer, in order."""
    assert response.headers["content-type"].startswith("text/event-stream"), response.text
    return [json.loads(line[len("data:") :]) for line in response.text.splitlines() if line.startswith("data:")]


def call(site, name, arguments, *, era=LEGACY, meta=None):
    params = {"name": name, "arguments": arguments}
    if meta is not None:
        params["_meta"] = meta
    return Harness().post("shop", rpc_body("tools/call", params, era=era), key=site["key"], era=era)


def logs_of(messages):
    return [
        (m["params"]["level"], m["params"]["data"]["message"])
        for m in messages
        if m.get("method") == "notifications/message"
    ]


def test_with_a_log_level_a_call_without_a_progress_token_streams_its_logs(site):
    # given
    instance_update(instance=site["instance"], log_level="debug")
    # when
    messages = events(call(site, "records_query", {"query": "length(@)"}))
    # then
    assert logs_of(messages) == [
        ("debug", "calling records_query"),
        ("debug", "running records_query"),
        ("debug", "records_query ran; recording the call"),
        ("info", "records_query done"),
    ]
    assert {m["params"]["logger"] for m in messages if "params" in m} == {"toolhub"}
    assert [m for m in messages if m.get("method") == "notifications/progress"] == []
    assert messages[-1]["result"]["structuredContent"] == {"result": 3}


def test_the_level_filters_and_a_failure_logs_a_warning(site):
    # given
    instance_update(instance=site["instance"], log_level="info")
    # when
    done = logs_of(events(call(site, "records_query", {"query": "length(@)"})))
    failed = logs_of(events(call(site, "records_query", {"query": "[?"})))
    # then
    assert done == [("info", "records_query done")]
    assert len(failed) == 1
    assert failed[0][0] == "warning"
    assert failed[0][1].startswith("records_query failed: INVALID_QUERY: ")


def test_without_a_log_level_a_call_is_plain_json(site):
    # when
    response = call(site, "records_query", {"query": "length(@)"})
    # then
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["result"]["structuredContent"] == {"result": 3}


def test_a_client_that_only_accepts_json_gets_json(site):
    # given
    instance_update(instance=site["instance"], log_level="debug")
    body = rpc_body("tools/call", {"name": "records_query", "arguments": {"query": "length(@)"}})
    # when
    response = Harness().post("shop", body, key=site["key"], headers={"accept": "application/json"})
    # then
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["result"]["structuredContent"] == {"result": 3}


def test_on_2026_07_28_the_requests_own_level_decides(site):
    """That revision sends logs only to a request that asks: the instance's level does not apply there."""
    # given
    instance_update(instance=site["instance"], log_level="debug")
    # when
    plain = call(site, "records_query", {"query": "length(@)"}, era=MODERN)
    asked = call(
        site, "records_query", {"query": "length(@)"}, era=MODERN, meta={"io.modelcontextprotocol/logLevel": "info"}
    )
    # then
    assert plain.headers["content-type"].startswith("application/json")
    assert logs_of(events(asked)) == [("info", "records_query done")]


def test_other_methods_are_not_streamed_for_the_log_level(site):
    # given
    instance_update(instance=site["instance"], log_level="debug")
    # when
    reply = rpc(site, "tools/list")
    # then
    assert [tool["name"] for tool in reply["result"]["tools"]] == ["record_by_id", "records_query", "static_text"]


def test_a_level_changed_meanwhile_applies_to_the_messages_at_once(site):
    """The worker chooses the answer's form by its cached hint; the messages follow the level just read."""
    # given
    instance_update(instance=site["instance"], log_level="debug")
    assert len(logs_of(events(call(site, "records_query", {"query": "@"})))) == 4  # the hint now says debug
    instance_update(instance=site["instance"], log_level="warning")
    # when
    stale = call(site, "records_query", {"query": "length(@)"})
    following = call(site, "records_query", {"query": "length(@)"})
    # then
    assert logs_of(events(stale)) == []
    assert following.headers["content-type"].startswith("text/event-stream")  # still on: warnings and above
    assert logs_of(events(following)) == []


def test_set_level_is_still_answered(site):
    # when
    reply = rpc(site, "logging/setLevel", {"level": "debug"})
    # then
    assert reply["result"] == {}


#
# under concurrency (PostgreSQL)
#


@pytest.mark.postgres
@pytest.mark.usefixtures("postgres_db")
def test_concurrent_binds_of_one_uri_let_exactly_one_through(owner, table, make_tool, instance):
    """8 threads bind 8 readers with one resource URI to one instance: 1 wins, 7 are refused on resource_uri."""
    from django.core.exceptions import ValidationError

    from tools_app.models import Binding, McpInstance, Tool
    from tools_app.services import binding_create

    # given
    tool_ids = [make_tool(owner, table, type="get_all_data", name=f"reader_{n}").pk for n in range(8)]

    # when
    def worker(index: int):
        tool = Tool.objects.get(pk=tool_ids[index])
        mcp_instance = McpInstance.objects.get(pk=instance.pk)
        return binding_create(mcp_instance=mcp_instance, tool=tool, resource_uri="orders://all").pk

    results = _in_threads(8, worker)

    # then
    winners = [result for result in results if isinstance(result, int)]
    refusals = [result for result in results if isinstance(result, ValidationError)]
    assert len(winners) == 1
    assert len(refusals) == 7
    assert all(list(refusal.message_dict) == ["resource_uri"] for refusal in refusals)
    assert list(Binding.objects.filter(mcp_instance=instance).values_list("pk", "resource_uri")) == [
        (winners[0], "orders://all")
    ]
