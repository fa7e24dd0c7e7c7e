"""SPEC §4.3–§4.5, §8: tools/list, tools/call, instructions, recording and freshness, in process, both eras."""

import json

import pytest
from django.utils import timezone
from mcp_types import METHOD_NOT_FOUND

from mcp_app.tests.mcp_harness import ERAS, LEGACY, MODERN
from tools_app import services
from tools_app.execution import pipeline as mcp_server
from tools_app.models import CallLog, McpInstance, Table, Tool
from tools_app.registry.instance_scope import InstanceScope
from tools_app.services import binding_update, instance_update
from tools_app.toolsets import generate_tools


def tools_of(reply):
    return {tool["name"]: tool for tool in reply["result"]["tools"]}


#
# initialize / server/discover
#


def test_initialize_sends_the_instance_instructions(harness, instance, key):
    """The 2025-11-25 handshake's result carries the instance's `instructions` (SPEC §2.3)."""
    # given
    instance_update(instance=instance, instructions="Orders live in the 'orders' tools. Amounts are EUR.")
    params = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}
    # when
    reply = harness.rpc("shop", key, "initialize", params)
    # then
    result = reply["result"]
    assert result["instructions"] == "Orders live in the 'orders' tools. Amounts are EUR."
    assert result["protocolVersion"] == LEGACY
    assert result["capabilities"]["tools"] == {"listChanged": False}
    assert result["serverInfo"]["name"] == "toolhub"


def test_discover_sends_the_instance_instructions(harness, instance, key):
    """The 2026-07-28 server/discover result carries the same instructions."""
    # given
    instance_update(instance=instance, instructions="Use search_tools first.")
    # when
    reply = harness.rpc("shop", key, "server/discover", era=MODERN)
    # then
    assert reply["result"]["instructions"] == "Use search_tools first."
    assert reply["result"]["supportedVersions"] == [MODERN]


def test_instructions_edit_is_seen_by_the_next_initialize(harness, instance, key):
    """An instructions edit shows on the very next handshake (no per-process copy)."""
    # given
    params = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}
    assert "instructions" not in harness.rpc("shop", key, "initialize", params)["result"]
    # when
    instance_update(instance=instance, instructions="Now with instructions.")
    # then
    assert harness.rpc("shop", key, "initialize", params)["result"]["instructions"] == "Now with instructions."


@pytest.mark.parametrize("era", ERAS)
def test_unknown_method_is_32601(harness, key, era):
    """SPEC §4.4: an unknown method is JSON-RPC -32601."""
    # when
    reply = harness.rpc("shop", key, "sampling/unknown", era=era)
    # then
    assert reply["error"]["code"] == METHOD_NOT_FOUND


#
# tools/list
#


@pytest.mark.parametrize("era", ERAS)
def test_list_shows_enabled_bindings_under_effective_names(harness, owner, table, make_tool, instance, bind, key, era):
    """SPEC §4.3: one entry per enabled binding, effective name and description; disabled ones are absent."""
    # given
    plain = make_tool(owner, table, name="orders_query", description="Query the orders.")
    renamed = make_tool(owner, table, type="get_all_data", name="all_orders", description="Every order.")
    hidden = make_tool(owner, table, type="preview", name="orders_preview", description="Preview.")
    bind(instance, plain)
    bind(instance, renamed, name_override="dump_orders", description_override="All orders, unfiltered.")
    bind(instance, hidden, enabled=False)
    # when
    reply = harness.rpc("shop", key, "tools/list", era=era)
    # then
    tools = tools_of(reply)
    assert sorted(tools) == ["dump_orders", "orders_query"]
    assert tools["orders_query"]["description"] == "Query the orders."
    assert tools["dump_orders"]["description"] == "All orders, unfiltered."
    assert tools["orders_query"]["inputSchema"]["required"] == ["query"]
    assert tools["orders_query"]["inputSchema"]["type"] == "object"
    assert "outputSchema" not in tools["orders_query"]
    assert "nextCursor" not in reply["result"]


def test_list_annotations_follow_the_tool_type(harness, owner, table, make_tool, instance, bind, key):
    """SPEC §4.3: readOnlyHint for reads and registry reads, destructiveHint for update/delete, idempotentHint."""
    # given
    for tool_type in ("query_data", "create", "update", "delete"):
        bind(instance, make_tool(owner, table, type=tool_type, name=f"t_{tool_type}"))
    bind(instance, make_tool(owner, type="search_tools", name="t_search"))
    # when
    tools = tools_of(harness.rpc("shop", key, "tools/list"))
    # then
    keys = ("readOnlyHint", "destructiveHint", "idempotentHint")
    hints = {name: tuple(tool["annotations"][k] for k in keys) for name, tool in tools.items()}
    assert hints == {
        "t_query_data": (True, False, True),
        "t_search": (True, False, True),
        "t_create": (False, False, False),
        "t_update": (False, True, True),
        "t_delete": (False, True, True),
    }


def test_list_output_schema_and_title(harness, owner, table, make_tool, instance, bind, key):
    """outputSchema is sent when set (non-object schemas wrapped like the results); the alias is the title."""
    # given
    array_schema = {"type": "array", "items": {"type": "object"}}
    object_schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    # select: a type whose result is never paged (a pageable type's schemas: test_paging.py)
    bind(
        instance,
        make_tool(owner, table, type="select", name="as_list", output_schema=array_schema, alias="Orders as a list"),
    )
    bind(instance, make_tool(owner, table, type="select", name="as_object", output_schema=object_schema))
    # when
    tools = tools_of(harness.rpc("shop", key, "tools/list"))
    # then
    assert tools["as_list"]["outputSchema"] == {
        "type": "object",
        "properties": {"result": array_schema},
        "required": ["result"],
    }
    assert tools["as_list"]["title"] == "Orders as a list"
    assert tools["as_object"]["outputSchema"] == object_schema
    assert "title" not in tools["as_object"]


def test_list_leaves_out_external_tools(harness, owner, table, make_tool, instance, bind, key):
    """SPEC §3.2: external tools are catalogued but never listed by tools/list."""
    # given
    bind(instance, make_tool(owner, table, name="orders_query"))
    bind(instance, make_tool(owner, type="external", name="weather", metadata={"mcp_server": "https://w.example"}))
    # when
    tools = tools_of(harness.rpc("shop", key, "tools/list"))
    # then
    assert list(tools) == ["orders_query"]


def test_list_shows_nothing_of_other_instances(harness, owner, table, make_tool, instance, make_instance, bind, key):
    """Only this instance's bindings are listed, even for tools of the same owner."""
    # given
    other = make_instance(owner, slug="other")
    bind(other, make_tool(owner, table, name="elsewhere"))
    # when
    reply = harness.rpc("shop", key, "tools/list")
    # then
    assert reply["result"]["tools"] == []


@pytest.mark.parametrize("era", ERAS)
def test_list_is_paginated_with_cursors(harness, owner, table, make_tool, instance, bind, key, settings, era):
    """SPEC §4.3: long lists come in pages; following nextCursor yields every tool once, in name order."""
    # given
    settings.TOOLHUB_MCP_PAGE_SIZE = 2
    for name in ["e_tool", "a_tool", "c_tool", "b_tool", "d_tool"]:
        bind(instance, make_tool(owner, table, name=name))
    # when
    pages, cursor = [], None
    while True:
        reply = harness.rpc("shop", key, "tools/list", {"cursor": cursor} if cursor else None, era=era)
        pages.append([tool["name"] for tool in reply["result"]["tools"]])
        cursor = reply["result"].get("nextCursor")
        if cursor is None:
            break
    # then
    assert pages == [["a_tool", "b_tool"], ["c_tool", "d_tool"], ["e_tool"]]


def test_list_with_a_bad_cursor_is_32602(harness, key):
    """A cursor that toolhub did not issue is an invalid-params error, not a 500."""
    # when
    reply = harness.rpc("shop", key, "tools/list", {"cursor": "not-a-cursor"})
    # then
    assert reply["error"]["code"] == -32602
    assert "Invalid cursor" in reply["error"]["message"]


@pytest.mark.parametrize("era", ERAS)
def test_search_discovery_lists_registry_tools_but_all_stay_callable(
    harness, owner, table, make_tool, instance, bind, key, era
):
    """SPEC §4.5: discovery=search lists only registry tools; a data tool is still callable by name."""
    # given
    bind(instance, make_tool(owner, type="search_tools", name="search_tools"))
    bind(instance, make_tool(owner, type="get_tool_definition", name="get_tool_definition"))
    bind(instance, make_tool(owner, table, name="orders_query"))
    instance_update(instance=instance, discovery="search")
    # when
    listed = tools_of(harness.rpc("shop", key, "tools/list", era=era))
    called = harness.call("shop", key, "orders_query", {"query": "length(@)"}, era=era)
    # then
    assert sorted(listed) == ["call_tool", "get_tool_definition", "search_tools"]  # the call proxy and search
    assert called["result"]["structuredContent"] == {"result": 3}


#
# tools/call
#


@pytest.mark.parametrize("era", ERAS)
def test_call_returns_json_text_and_structured_content(harness, owner, table, make_tool, instance, bind, key, era):
    """SPEC §4.4: the result as JSON text and as structuredContent (objects as they are)."""
    # given
    bind(instance, make_tool(owner, table, type="select", name="orders_by_id"))
    # when
    reply = harness.call("shop", key, "orders_by_id", {"keys": [2, "9"]}, era=era)
    # then
    result = reply["result"]
    expected = {"items": [{"id": 2, "customer": "alan", "status": "shipped", "total": 20}], "not_found": ["9"]}
    assert result["isError"] is False
    assert result["structuredContent"] == expected
    assert result["content"][0]["type"] == "text"
    assert json.loads(result["content"][0]["text"]) == expected


@pytest.mark.parametrize(
    ("query", "wrapped"),
    [("[].id", {"result": [1, 2, 3]}), ("length(@)", {"result": 3}), ("[0].customer", {"result": "ada"})],
)
def test_call_wraps_lists_and_scalars(harness, owner, table, make_tool, instance, bind, key, query, wrapped):
    """SPEC §4.4: lists and scalars are sent as structuredContent {"result": ...}; the text is the bare value."""
    # given
    bind(instance, make_tool(owner, table, name="orders_query"))
    # when
    result = harness.call("shop", key, "orders_query", {"query": query})["result"]
    # then
    assert result["structuredContent"] == wrapped
    assert json.loads(result["content"][0]["text"]) == wrapped["result"]


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("case", ["unknown", "disabled", "other_instance", "other_owner"])
def test_call_of_a_tool_not_enabled_here_is_32602(
    harness, owner, other_user, make_table, table, make_tool, instance, make_instance, bind, key, case, era
):
    """SPEC §4.4: unknown, disabled, or bound only elsewhere: -32602 'not enabled on this instance'; nothing runs."""
    # given
    if case == "disabled":
        bind(instance, make_tool(owner, table, name="target"), enabled=False)
    elif case == "other_instance":
        bind(make_instance(owner, slug="other"), make_tool(owner, table, name="target"))
    elif case == "other_owner":
        foreign = make_instance(other_user, slug="foreign")
        bind(foreign, make_tool(other_user, make_table(other_user), name="target"))
    # when
    reply = harness.call("shop", key, "target", {"query": "length(@)"}, era=era)
    # then
    assert reply["error"]["code"] == -32602
    assert "not enabled on this instance" in reply["error"]["message"]
    assert Tool.objects.filter(use_count__gt=0).count() == 0
    assert list(CallLog.objects.values_list("tool_id", "tool_name", "status", "error_code")) == [
        (None, "target", "error", "TOOL_NOT_FOUND")
    ]


def test_call_names_are_case_sensitive_with_a_hint(harness, owner, table, make_tool, instance, bind, key):
    """MCP tool names are case-sensitive: a wrong case is -32602 naming the right name (unambiguous, SPEC §2.4)."""
    # given
    bind(instance, make_tool(owner, table, name="Orders_Query"))
    # when
    reply = harness.call("shop", key, "orders_query", {"query": "length(@)"})
    # then
    assert reply["error"]["code"] == -32602
    assert "did you mean 'Orders_Query'?" in reply["error"]["message"]


def test_call_by_override_name_only(harness, owner, table, make_tool, instance, bind, key):
    """A binding with a name override is called by the override; the tool's own name is not enabled here."""
    # given
    bind(instance, make_tool(owner, table, name="orders_query"), name_override="q")
    # when
    by_override = harness.call("shop", key, "q", {"query": "length(@)"})
    by_tool_name = harness.call("shop", key, "orders_query", {"query": "length(@)"})
    # then
    assert by_override["result"]["structuredContent"] == {"result": 3}
    assert by_tool_name["error"]["code"] == -32602


@pytest.mark.parametrize("era", ERAS)
def test_call_of_an_external_tool_says_where_it_is_served(harness, owner, make_tool, instance, bind, key, era):
    """SPEC §8: a bound external tool is -32602 naming its mcp_server."""
    # given
    external = make_tool(owner, type="external", name="weather", metadata={"mcp_server": "https://weather.example/mcp"})
    bind(instance, external)
    # when
    reply = harness.call("shop", key, "weather", {}, era=era)
    # then
    assert reply["error"]["code"] == -32602
    assert "https://weather.example/mcp" in reply["error"]["message"]
    assert Tool.objects.get(pk=external.pk).use_count == 0


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize(
    ("arguments", "code"),
    [({"query": "[?"}, "INVALID_QUERY"), ({}, "INVALID_ARGUMENTS"), ({"query": 5}, "INVALID_ARGUMENTS")],
)
def test_tool_errors_are_iserror_results(harness, owner, table, make_tool, instance, bind, key, era, arguments, code):
    """SPEC §4.4, §8: argument and execution failures are isError results whose text starts with the code."""
    # given
    bind(instance, make_tool(owner, table, name="orders_query"))
    # when
    result = harness.call("shop", key, "orders_query", arguments, era=era)["result"]
    # then
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith(f"{code}: ")
    assert result["structuredContent"]["error"] == code
    assert result["structuredContent"]["message"] == result["content"][0]["text"][len(code) + 2 :]


def test_failed_write_writes_nothing(harness, owner, table, make_tool, instance, bind, key):
    """A create refused for an existing key is an isError result and leaves data and version as they were."""
    # given
    bind(instance, make_tool(owner, table, type="create", name="add_orders"))
    before = [(t.data, t.version) for t in Table.objects.filter(pk=table.pk)]
    # when
    result = harness.call("shop", key, "add_orders", {"elements": [{"id": 4}, {"id": 1}]})["result"]
    # then
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith("KEY_EXISTS: ")
    assert [(t.data, t.version) for t in Table.objects.filter(pk=table.pk)] == before


@pytest.mark.parametrize("era", ERAS)
def test_write_through_mcp(harness, owner, table, make_tool, instance, bind, key, era):
    """A create tool appends and reports the new version (SPEC §8 result shape)."""
    # given
    bind(instance, make_tool(owner, table, type="create", name="add_orders"))
    # when
    result = harness.call("shop", key, "add_orders", {"elements": [{"id": 4, "customer": "edsger"}]}, era=era)
    # then
    assert result["result"]["structuredContent"] == {"created": 1, "version": 2}
    table.refresh_from_db()
    assert table.version == 2
    assert table.data[-1] == {"id": 4, "customer": "edsger"}


@pytest.mark.parametrize("era", ERAS)
def test_result_over_max_result_bytes_is_refused_with_a_hint(
    harness, owner, make_table, make_tool, instance, bind, key, era
):
    """SPEC §4.4: a result over max_result_bytes that is not a list (a list is paged, docs/paging.md) is a
    RESULT_TOO_LARGE isError naming its size and the limit and saying how to narrow the call."""
    # given
    big = make_table(owner, name="big", data=[{"id": i, "text": "x" * 50} for i in range(100)])
    bind(instance, make_tool(owner, big, name="big_query"))
    instance_update(instance=instance, max_result_bytes=1000)
    # when
    result = harness.call("shop", key, "big_query", {"query": "{rows: [0:30]}"}, era=era)["result"]
    small = harness.call("shop", key, "big_query", {"query": "[0:2].id"}, era=era)["result"]
    # then: under 4 limits, so measured exactly
    size = len(json.dumps({"rows": big.data[:30]}, separators=(",", ":")))
    assert size == 2100
    assert result["isError"] is True
    assert result["content"][0]["text"] == (
        "RESULT_TOO_LARGE: The result is 2100 bytes, over this instance's limit of 1000 bytes. Narrow the call:"
        " filter or project in the JMESPath expression, e.g. `[?status=='paid'].id` or `[0:20]`."
    )
    assert result["structuredContent"]["details"] == {"size": 2100, "max_result_bytes": 1000}
    assert small["structuredContent"] == {"result": [0, 1]}


WRITE_CALLS = {
    "create": ({"elements": [{"id": 4, "customer": "edsger"}]}, {"created": 1, "version": 2}),
    "update": ({"elements": [{"id": 1, "status": "refunded"}]}, {"updated": 1, "version": 2}),
    "delete": ({"keys": [3]}, {"deleted": 1, "version": 2}),
}


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("tool_type", sorted(WRITE_CALLS))
def test_write_result_is_sent_whatever_max_result_bytes(
    harness, owner, table, make_tool, instance, bind, key, era, tool_type
):
    """SPEC §4.4: max_result_bytes refuses results that a narrower call would make smaller. A write's result
    (SPEC §8: a count and the version) has nothing to narrow, and by the time it is measured the write is
    made: it is sent as a success, never an isError (which would say the call failed and wrote nothing,
    SPEC §3, and invite a repeat that writes twice). Shown with a limit under the result's size (set in the
    database, below the 1,000-byte floor, since no valid limit is that small)."""
    # given
    bind(instance, make_tool(owner, table, type=tool_type, name=f"{tool_type}_orders"))
    McpInstance.objects.filter(pk=instance.pk).update(max_result_bytes=10)
    arguments, expected = WRITE_CALLS[tool_type]
    # when
    result = harness.call("shop", key, f"{tool_type}_orders", arguments, era=era)["result"]
    # then
    assert result["isError"] is False
    assert result["structuredContent"] == expected
    assert json.loads(result["content"][0]["text"]) == expected
    table.refresh_from_db()
    assert table.version == 2
    assert list(CallLog.objects.values_list("tool_name", "status", "error_code")) == [(f"{tool_type}_orders", "ok", "")]


@pytest.mark.parametrize("era", ERAS)
def test_register_tool_result_over_max_result_bytes_is_sent(harness, owner, make_tool, instance, bind, key, era):
    """register_tool's result echoes what the caller sent (a long mcp_server makes it long): over the limit it
    is still sent as a success, since the tool is registered and bound whatever is answered."""
    # given
    bind(instance, make_tool(owner, type="register_tool", name="register", description="Register a tool."))
    instance_update(instance=instance, allow_registration=True, max_result_bytes=1000)
    server = "https://tools.example/" + "m" * 1200
    # when
    result = harness.call(
        "shop", key, "register", {"name": "weather_now", "description": "Weather.", "mcp_server": server}, era=era
    )["result"]
    # then
    assert result["isError"] is False
    registered = Tool.objects.get(name="weather_now")
    assert result["structuredContent"]["registered"] is True
    assert result["structuredContent"]["tool_id"] == registered.pk
    assert len(result["content"][0]["text"].encode()) > 1000
    assert (registered.type, registered.metadata["mcp_server"]) == ("external", server)
    assert registered.bindings.get().mcp_instance_id == instance.pk
    assert list(CallLog.objects.values_list("tool_name", "status", "error_code")) == [("register", "ok", "")]


ROOT_TYPE_SCHEMA = {"type": "object", "properties": {"root_type": {"type": "string"}}, "required": ["root_type"]}


@pytest.mark.parametrize("era", ERAS)
def test_errors_of_a_tool_with_an_output_schema_send_no_structured_content(
    harness, owner, table, make_tool, instance, bind, key, era
):
    """isError results of a tool declaring an outputSchema carry only the text: an error object could not
    match the schema, and clients that validate structuredContent (MCP Inspector) would hide the error."""
    # given
    bind(instance, make_tool(owner, table, name="orders_query", output_schema=ROOT_TYPE_SCHEMA))
    # when
    result = harness.call("shop", key, "orders_query", {"query": 5}, era=era)["result"]
    # then
    assert result["isError"] is True
    assert "structuredContent" not in result
    assert result["content"] == [
        {"type": "text", "text": "INVALID_ARGUMENTS: Invalid arguments: argument 'query': 5 is not of type 'string'."}
    ]


def test_too_large_result_of_a_tool_with_an_output_schema_sends_no_structured_content(
    harness, owner, table, make_tool, instance, bind, key
):
    """RESULT_TOO_LARGE of a tool with an outputSchema: text only, like every other error of such a tool."""
    # given
    bind(instance, make_tool(owner, table, type="get_all_data", name="all_orders", output_schema={"type": "object"}))
    instance_update(instance=instance, max_result_bytes=1000)
    services.table_update(table=table, data={f"k{i}": {"id": i, "text": "x" * 50} for i in range(30)})
    # when
    result = harness.call("shop", key, "all_orders", {})["result"]
    # then
    assert result["isError"] is True
    assert "structuredContent" not in result
    assert result["content"][0]["text"].startswith("RESULT_TOO_LARGE: The result is ")


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize(
    ("name", "logged"),
    [
        ("orders query", "orders query"),
        ("o" * 65, "o" * 64),
        ("orders_query/..", "orders_query/.."),
        ("", ""),
    ],
)
def test_name_that_cannot_be_a_tool_name_is_unknown(
    harness, owner, table, make_tool, instance, bind, key, era, name, logged
):
    """A name outside SPEC §2.2's pattern is an unknown tool (-32602, naming the pattern), recorded as such."""
    # given
    tool = bind(instance, make_tool(owner, table, name="orders_query")).tool
    # when
    reply = harness.call("shop", key, name, {"query": "length(@)"}, era=era)
    # then
    shown = repr(name)
    assert reply["error"] == {
        "code": -32602,
        "message": f"Unknown tool {shown}: it is not enabled on this instance."
        " Tool names are 1 to 64 characters from A-Z, a-z, 0-9, '_', '.' and '-'.",
    }
    assert list(CallLog.objects.values_list("tool_name", "tool_id", "status", "error_code")) == [
        (logged, None, "error", "TOOL_NOT_FOUND")
    ]
    tool.refresh_from_db()
    assert tool.use_count == 0


def test_name_with_nul_is_unknown_on_every_database(harness, owner, table, make_tool, instance, bind, key):
    """A NUL in the name is -32602 without sending the name to SQL (PostgreSQL refuses NUL in text).

    2025-11-25 only: in the 2026-07-28 era the SDK refuses first, since no Mcp-Name header can match it."""
    # given
    tool = bind(instance, make_tool(owner, table, name="orders_query")).tool
    # when
    reply = harness.call("shop", key, "orders_query\u0000", {"query": "length(@)"}, era=LEGACY)
    # then
    assert reply["error"] == {
        "code": -32602,
        "message": "Unknown tool 'orders_query\\x00': it is not enabled on this instance."
        " Tool names are 1 to 64 characters from A-Z, a-z, 0-9, '_', '.' and '-'.",
    }
    assert list(CallLog.objects.values_list("tool_name", "error_code")) == [("orders_query\\x00", "TOOL_NOT_FOUND")]
    tool.refresh_from_db()
    assert tool.use_count == 0


def test_long_unknown_name_is_cut_in_the_message(harness, instance, key):
    """A huge name is not echoed whole: the message shows its first 80 characters."""
    # when
    reply = harness.call("shop", key, "x" * 5000, {})
    # then
    assert reply["error"]["message"].startswith(f"Unknown tool {'x' * 80!r}…: it is not enabled")
    assert len(reply["error"]["message"]) < 300


@pytest.mark.parametrize(
    ("tool_type", "hint"),
    [
        ("search_tools", "Narrow the call: pass a smaller `limit` (the default is 5)."),
        (
            "list_tools_by_category",
            "Narrow the call: pass a smaller `limit` (the default is 20), or a category with fewer tools.",
        ),
        (
            "get_tool_usage_guide",
            "Narrow the call: name only the tools you need in `tool_names`, or pass one `category`.",
        ),
        (
            "get_tool_definition",
            "Narrow the call: one tool's definition cannot be split; use the summary that search_tools or"
            " list_tools_by_category give, or ask the instance's owner to raise max_result_bytes.",
        ),
        ("preview", "Narrow the call: pass a smaller `limit` (and page with `offset`)."),
    ],
)
def test_too_large_hint_fits_the_tool_type(tool_type, hint):
    """RESULT_TOO_LARGE says what narrows a call of this type."""
    # when
    error = mcp_server.too_large(tool_type, 1500, 1000)
    # then
    assert error.code == "RESULT_TOO_LARGE"
    assert error.message == f"The result is 1500 bytes, over this instance's limit of 1000 bytes. {hint}"
    assert error.details == {"size": 1500, "max_result_bytes": 1000}


@pytest.mark.parametrize(
    ("tool_type", "refused"),
    [
        ("query_data", True),
        ("get_tool_definition", True),
        ("create", False),
        ("update", False),
        ("delete", False),
        ("register_tool", False),
    ],
)
def test_only_results_of_reads_are_refused_over_the_limit(tool_type, refused):
    """Reads over the limit are refused; tools that changed data never are; at the limit nothing is."""
    # when
    over, at = mcp_server.over_limit(tool_type, 1001, 1000), mcp_server.over_limit(tool_type, 1000, 1000)
    # then
    assert (over, at) == (refused, False)


@pytest.mark.parametrize("era", ERAS)
def test_too_large_usage_guide_says_to_name_tools(harness, owner, table, make_tool, instance, bind, key, era):
    """Over MCP: a usage guide over the limit is refused with the guide's own hint (tool_names, category)."""
    # given
    bind(instance, make_tool(owner, type="get_tool_usage_guide", name="guide", description="The usage guide."))
    for index in range(6):
        bind(instance, make_tool(owner, table, name=f"orders_query_{index}", description="Query orders. " * 20))
    instance_update(instance=instance, max_result_bytes=1000)
    # when
    result = harness.call("shop", key, "guide", {}, era=era)["result"]
    # then
    assert result["isError"] is True
    text = result["content"][0]["text"]
    assert text.startswith("RESULT_TOO_LARGE: The result is ")
    assert text.endswith(
        "over this instance's limit of 1000 bytes."
        " Narrow the call: name only the tools you need in `tool_names`, or pass one `category`."
    )


def test_unexpected_exception_never_leaks(harness, owner, table, make_tool, instance, bind, key, monkeypatch):
    """An exception inside a tool is an isError result without its text (MCP_SDK_NOTES: never a code-0 error)."""

    # given
    def explode(**kwargs):
        raise RuntimeError("secret connection string postgres://admin:pw@db")

    monkeypatch.setattr(mcp_server, "execute", explode)
    bind(instance, make_tool(owner, table, name="orders_query"))
    # when
    result = harness.call("shop", key, "orders_query", {"query": "length(@)"})["result"]
    # then
    assert result["isError"] is True
    assert "secret" not in json.dumps(result)
    assert result["content"][0]["text"].startswith("INTERNAL_ERROR: ")


def test_registry_tools_run_over_the_instance_scope(harness, owner, make_tool, instance, bind, key, monkeypatch):
    """Registry tools get InstanceScope(instance): they work over this instance's bindings (SPEC §5)."""
    # given
    seen = {}

    def fake_execute(*, tool, arguments, scope, where):
        seen.update(tool=tool.name, arguments=arguments, scope=scope, where=where)
        return {"results": []}

    monkeypatch.setattr(mcp_server, "execute", fake_execute)
    bind(instance, make_tool(owner, type="search_tools", name="search_tools"))
    # when
    result = harness.call("shop", key, "search_tools", {"query": "orders"})["result"]
    # then
    assert result["structuredContent"] == {"results": []}
    assert seen["tool"] == "search_tools"
    assert seen["arguments"] == {"query": "orders"}
    assert isinstance(seen["scope"], InstanceScope)
    assert seen["scope"].instance.pk == instance.pk
    assert seen["where"] is None  # the binding narrows nothing


#
# Recording (SPEC §4.4)
#


def test_every_call_is_recorded(harness, owner, table, make_tool, instance, bind, make_api_key):
    """Use count, last used and one call-log row per call (instance, tool, key, owner, status, error, duration)."""
    # given
    tool = make_tool(owner, table, name="orders_query")
    bind(instance, tool, name_override="q")
    api_key, plaintext = make_api_key(instance, label="agent")
    # when
    harness.call("shop", plaintext, "q", {"query": "length(@)"})
    harness.call("shop", plaintext, "q", {"query": "[?"})
    # then
    tool.refresh_from_db()
    assert tool.use_count == 2
    assert tool.last_used is not None
    rows = list(
        CallLog.objects.order_by("id").values(
            "mcp_instance_id",
            "tool_id",
            "tool_name",
            "api_key_id",
            "owner_id",
            "user_id",
            "surface",
            "status",
            "error_code",
        )
    )
    common = {
        "mcp_instance_id": instance.pk,
        "tool_id": tool.pk,
        "tool_name": "q",
        "api_key_id": api_key.pk,
        "owner_id": owner.pk,
        "user_id": owner.pk,
        "surface": "mcp",
    }
    assert rows == [
        {**common, "status": "ok", "error_code": ""},
        {**common, "status": "error", "error_code": "INVALID_QUERY"},
    ]
    assert CallLog.objects.filter(duration_ms__gte=0).count() == 2
    assert "Invalid JMESPath" in CallLog.objects.get(status="error").error_message


def test_call_log_time_is_the_call_and_the_row_is_in_before_the_answer(
    harness, owner, table, make_tool, instance, bind, key
):
    """CallLog.created_at is the call's start; the row and the use count are committed before the answer."""
    # given
    tool = make_tool(owner, table, name="orders_query")
    bind(instance, tool)
    before = timezone.now()
    # when
    harness.call("shop", key, "orders_query", {"query": "length(@)"})
    after = timezone.now()
    # then
    row = CallLog.objects.get()
    assert before <= row.created_at <= after
    tool.refresh_from_db()
    assert (tool.use_count, tool.last_used) == (1, row.created_at)


#
# Freshness (SPEC §1): every edit is seen by the next request
#


@pytest.mark.parametrize("era", ERAS)
def test_binding_disabled_is_seen_by_the_next_request(harness, owner, table, make_tool, instance, bind, key, era):
    """Disabling a binding removes the tool from the next tools/list and makes the next call -32602."""
    # given
    binding = bind(instance, make_tool(owner, table, name="orders_query"))
    assert harness.call("shop", key, "orders_query", {"query": "length(@)"}, era=era)["result"]["isError"] is False
    # when
    binding_update(binding=binding, enabled=False)
    # then
    assert harness.rpc("shop", key, "tools/list", era=era)["result"]["tools"] == []
    assert harness.call("shop", key, "orders_query", {"query": "length(@)"}, era=era)["error"]["code"] == -32602


def test_tool_rename_is_seen_by_the_next_request(harness, owner, table, make_tool, instance, bind, key):
    """Renaming a tool changes the listed and callable name at once."""
    # given
    tool = make_tool(owner, table, name="orders_query")
    bind(instance, tool)
    harness.call("shop", key, "orders_query", {"query": "length(@)"})
    # when
    services.tool_update(force=True, tool=tool, name="find_orders", description="Find orders with JMESPath.")
    # then
    listed = tools_of(harness.rpc("shop", key, "tools/list"))
    assert listed["find_orders"]["description"] == "Find orders with JMESPath."
    assert list(listed) == ["find_orders"]
    assert harness.call("shop", key, "orders_query", {"query": "length(@)"})["error"]["code"] == -32602
    assert harness.call("shop", key, "find_orders", {"query": "length(@)"})["result"]["structuredContent"] == {
        "result": 3
    }


def test_indexed_fields_change_is_seen_in_the_next_tools_list(harness, owner, make_table, instance, key):
    """Declaring a table's indexed_fields rewrites the fast-fields sentence of its generated tools (the service the
    API and the admin save through): the next tools/list describes the new fields, the rest as generated."""
    # given
    table = make_table(owner, name="orders", data=[{"id": 1, "status": "paid"}, {"id": 2, "status": "open"}])
    generate_tools(owner=owner, table=table, mcp_instance=instance)
    before = {name: tool["description"] for name, tool in tools_of(harness.rpc("shop", key, "tools/list")).items()}
    assert "fast (indexed)" not in before["orders_query"]
    # when
    services.table_update(table=table, indexed_fields=["status"])
    # then
    after = {name: tool["description"] for name, tool in tools_of(harness.rpc("shop", key, "tools/list")).items()}
    fast = " Filters and sorts on status are fast (indexed); on other fields slower."
    assert after["orders_query"] == before["orders_query"].replace(
        "and return its value.", "and return its value." + fast, 1
    )
    assert after["orders_schema"] == before["orders_schema"].replace(
        "before writing a query.", "before writing a query." + fast, 1
    )
    assert {name: text for name, text in after.items() if name not in ("orders_query", "orders_schema")} == {
        name: text for name, text in before.items() if name not in ("orders_query", "orders_schema")
    }


@pytest.mark.parametrize("era", ERAS)
def test_table_write_is_seen_by_the_next_read(harness, owner, table, make_tool, instance, bind, key, era):
    """A data write elsewhere (here: the service, as the API would) changes the very next query's answer."""
    # given
    bind(instance, make_tool(owner, table, name="orders_query"))
    before = harness.call("shop", key, "orders_query", {"query": "length(@)"}, era=era)["result"]
    assert before["structuredContent"] == {"result": 3}
    # when
    services.table_update(table=table, data=[{"id": 1}])
    # then
    result = harness.call("shop", key, "orders_query", {"query": "length(@)"}, era=era)["result"]
    assert result["structuredContent"] == {"result": 1}


def test_tool_remount_is_seen_by_the_next_read(harness, owner, make_table, make_tool, instance, bind, key):
    """Changing what a tool does (its json_path) is seen at once, though its earlier result was cached."""
    # given
    shop = make_table(owner, name="shop", data={"orders": [1, 2, 3], "customers": [1]})
    tool = make_tool(owner, shop, name="count", json_path="/orders")
    bind(instance, tool)
    assert harness.call("shop", key, "count", {"query": "length(@)"})["result"]["structuredContent"] == {"result": 3}
    # when
    services.tool_update(tool=tool, json_path="/customers")
    # then
    assert harness.call("shop", key, "count", {"query": "length(@)"})["result"]["structuredContent"] == {"result": 1}


#
# The SDK's own client (both connect modes)
#


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_sdk_client_lists_and_calls(harness, owner, table, make_tool, instance, bind, key, mode):
    """mcp.client.Client works against the endpoint: 'legacy' (2025-11-25 handshake) and 'auto' (2026-07-28)."""
    # given
    bind(instance, make_tool(owner, table, name="orders_query", output_schema={"type": "array"}))
    instance_update(instance=instance, instructions="Be brief.")

    async def scenario(client):
        listed = await client.list_tools()
        called = await client.call_tool("orders_query", {"query": "[?status=='paid'].customer"})
        return client.session.protocol_version, listed, called

    # when
    version, listed, called = harness.with_client("shop", key, scenario, mode=mode)
    # then
    assert version == (LEGACY if mode == "legacy" else MODERN)
    assert [tool.name for tool in listed.tools] == ["orders_query"]
    assert called.is_error is False
    assert called.structured_content == {"result": ["ada"]}
    assert called.content[0].text == '["ada"]'
