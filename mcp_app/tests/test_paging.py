"""Result budgets and paging over MCP (docs/paging.md): a list over max_result_bytes comes in
pages whose cursors yield every item exactly once; a cursor is bound to the tool, its arguments and the table
version; anything else over the budget is RESULT_TOO_LARGE naming its size."""

import json

import pytest

from mcp_app.tests.mcp_harness import ERAS
from tools_app import services
from tools_app.execution import pipeline as calls
from tools_app.models import CallLog, Table
from tools_app.paging import PAGED_OUTPUT_SCHEMA, cursor_argument_schema
from tools_app.services import instance_update

RECORDS = [{"id": i, "name": f"n{i:03d}"} for i in range(100)]
# What fits in 1,000 bytes: items of 22 bytes (ids 0-9) and 23 bytes (10-99) and their commas, inside an
# envelope sized for the longest cursor of this list (`{"items":[],"total":100,"next_cursor":"…"}`, 164 bytes,
# leaving 836): 10 * 22 + 25 * 23 + 34 = 829 <= 836 < 853 for 35 items, 34 * 23 + 33 = 815 <= 836 < 839 for
# the next 34, and the last 31.
PAGE_SIZES = [35, 34, 31]


@pytest.fixture
def paged(owner, records, make_tool, instance, bind):
    """get_all_data and query_data tools over 100 records, on an instance with the smallest budget."""
    bind(instance, make_tool(owner, records, type="get_all_data", name="all_records"))
    bind(instance, make_tool(owner, records, type="query_data", name="query_records"))
    instance_update(instance=instance, max_result_bytes=1000)
    return records


def structured(reply: dict) -> dict:
    result = reply["result"]
    assert result["isError"] is False, result
    return result["structuredContent"]


def follow(harness, key, name, arguments, *, era="2025-11-25") -> list[dict]:
    """Every page of a call, following next_cursor until it is null."""
    pages = [harness.call("shop", key, name, arguments, era=era)["result"]]
    while pages[-1]["structuredContent"]["next_cursor"] is not None:
        cursor = pages[-1]["structuredContent"]["next_cursor"]
        pages.append(harness.call("shop", key, name, {**arguments, "cursor": cursor}, era=era)["result"])
    return pages


@pytest.mark.parametrize("era", ERAS)
def test_list_over_the_budget_pages_through_every_item_exactly_once(harness, key, paged, era):
    """A list over max_result_bytes succeeds with its first page; following the cursors yields every item
    once, in order, each page within the budget; the last page's next_cursor is null."""
    # when
    pages = follow(harness, key, "all_records", {}, era=era)
    # then
    values = [page["structuredContent"] for page in pages]
    assert [len(value["items"]) for value in values] == PAGE_SIZES
    assert [item for value in values for item in value["items"]] == RECORDS
    assert [value["total"] for value in values] == [100, 100, 100]
    assert values[-1]["next_cursor"] is None
    assert all(len(json.dumps(value, separators=(",", ":")).encode()) <= 1000 for value in values)
    assert all(page["isError"] is False for page in pages)


def test_page_text_says_what_is_shown_and_how_to_get_the_rest(harness, key, paged):
    """The text content opens with the items shown and the call that gets the next ones, then the JSON."""
    # when
    pages = follow(harness, key, "all_records", {})
    # then
    first, last = (page["content"][0]["text"] for page in (pages[0], pages[-1]))
    cursor = pages[0]["structuredContent"]["next_cursor"]
    note, body = first.split("\n\n", 1)
    assert note == (
        "Showing items 1-35 of 100 (the result is paged to fit the result budget). To get the next items, call"
        f' this tool again with the same arguments plus "cursor": "{cursor}".'
    )
    assert json.loads(body) == pages[0]["structuredContent"]
    assert last.split("\n\n", 1)[0] == "Showing items 70-100 of 100: the last page."


def test_result_within_the_budget_is_unchanged(harness, key, paged):
    """A list within the budget is sent as before: {"result": [...]}, its text the JSON alone."""
    # when
    result = harness.call("shop", key, "query_records", {"query": "[0:3].id"})["result"]
    # then
    assert result["structuredContent"] == {"result": [0, 1, 2]}
    assert result["content"] == [{"type": "text", "text": "[0,1,2]"}]


def test_calls_of_a_paged_result_are_recorded_like_any_call(harness, key, paged):
    """Every page is one call in the call log, counted as a use of the tool."""
    # when
    follow(harness, key, "all_records", {})
    # then
    assert (
        list(CallLog.objects.order_by("pk").values_list("surface", "tool_name", "status", "error_code"))
        == [("mcp", "all_records", "ok", "")] * 3
    )
    assert paged.tools.get(name="all_records").use_count == 3


def test_pages_are_cut_from_the_cached_result(harness, key, paged, monkeypatch):
    """The tool runs once for all its pages: later pages come from the result cache (same table version)."""
    # given
    runs = []
    execute = calls._execute

    def counting(*args, **kwargs):
        runs.append(args[2])
        return execute(*args, **kwargs)

    monkeypatch.setattr(calls, "_execute", counting)
    # when
    pages = follow(harness, key, "query_records", {"query": "[].{id: id, name: name}"})
    # then
    assert [len(page["structuredContent"]["items"]) for page in pages] == PAGE_SIZES
    assert runs == ["query_records"]


@pytest.mark.parametrize("era", ERAS)
def test_cursor_expires_after_a_write_and_the_refusal_writes_nothing(harness, key, paged, era):
    """After a write to the table, the cursor of the earlier page is CURSOR_EXPIRED; nothing is written."""
    # given
    cursor = structured(harness.call("shop", key, "all_records", {}, era=era))["next_cursor"]
    services.table_update(table=paged, data=[*RECORDS, {"id": 100, "name": "n100"}])
    before = [(t.version, t.data) for t in Table.objects.filter(pk=paged.pk)]
    # when
    result = harness.call("shop", key, "all_records", {"cursor": cursor}, era=era)["result"]
    # then
    assert result["isError"] is True
    assert result["content"][0]["text"] == (
        "CURSOR_EXPIRED: The table changed since this cursor was issued (version 1, now 2): call again without"
        " a cursor to start over on the current data."
    )
    assert result["structuredContent"]["details"] == {"cursor_version": 1, "table_version": 2}
    assert [(t.version, t.data) for t in Table.objects.filter(pk=paged.pk)] == before
    assert list(CallLog.objects.order_by("pk").values_list("status", "error_code")) == [
        ("ok", ""),
        ("error", "CURSOR_EXPIRED"),
    ]


def test_tampered_cursor_is_invalid_arguments(harness, key, paged):
    """A cursor changed by one character is not one this server issued: INVALID_ARGUMENTS naming `cursor`."""
    # given
    cursor = structured(harness.call("shop", key, "all_records", {}))["next_cursor"]
    tampered = cursor[:5] + ("A" if cursor[5] != "A" else "B") + cursor[6:]
    before = [(t.version, t.data) for t in Table.objects.filter(pk=paged.pk)]
    # when
    results = [
        harness.call("shop", key, "all_records", {"cursor": value})["result"] for value in (tampered, "garbage", 7)
    ]
    # then
    assert [result["content"][0]["text"] for result in results] == [
        "INVALID_ARGUMENTS: Invalid arguments: argument 'cursor': it is not a cursor this server issued"
        " (garbled or altered).",
        "INVALID_ARGUMENTS: Invalid arguments: argument 'cursor': it is not a cursor this server issued"
        " (garbled or altered).",
        "INVALID_ARGUMENTS: Invalid arguments: argument 'cursor': it must be the non-empty string a previous"
        " page gave as next_cursor.",
    ]
    assert [(t.version, t.data) for t in Table.objects.filter(pk=paged.pk)] == before


OTHER_TOOL = (
    "CURSOR_EXPIRED: This cursor was issued for another tool or other arguments: call the tool with exactly"
    " the arguments of the call that returned it, plus the cursor (or call again without a cursor)."
)


def test_cursor_of_another_tool_is_expired(harness, key, paged):
    """A genuine cursor of one tool cannot page another tool's result, even over the same table."""
    # given
    cursor = structured(harness.call("shop", key, "all_records", {}))["next_cursor"]
    # when
    result = harness.call("shop", key, "query_records", {"query": "@", "cursor": cursor})["result"]
    # then
    assert (result["isError"], result["content"][0]["text"]) == (True, OTHER_TOOL)


def test_cursor_with_other_arguments_is_expired(harness, key, paged):
    """A cursor is bound to the arguments of the call that returned it."""
    # given
    cursor = structured(harness.call("shop", key, "query_records", {"query": "@"}))["next_cursor"]
    # when
    result = harness.call("shop", key, "query_records", {"query": "[*]", "cursor": cursor})["result"]
    # then
    assert (result["isError"], result["content"][0]["text"]) == (True, OTHER_TOOL)


def test_cursor_on_a_tool_that_never_pages_fails_its_schema(harness, owner, key, paged, make_tool, bind, instance):
    """Only pageable types take `cursor` out of the arguments: a select tool's schema refuses it."""
    # given
    bind(instance, make_tool(owner, paged, type="select", name="records_by_id"))
    # when
    result = harness.call("shop", key, "records_by_id", {"keys": [1], "cursor": "x"})["result"]
    # then
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith("INVALID_ARGUMENTS: ")
    assert "'cursor'" in result["content"][0]["text"]


def test_non_list_over_the_budget_names_its_size_and_the_budget(harness, key, paged):
    """A result that is not a list is refused whole: RESULT_TOO_LARGE with its size and the budget."""
    # when
    result = harness.call("shop", key, "query_records", {"query": "{rows: @}"})["result"]
    # then
    size = len(json.dumps({"rows": RECORDS}, separators=(",", ":")))
    assert size == 11 + 10 * 22 + 90 * 23 + 99 == 2400
    assert result["content"][0]["text"] == (
        "RESULT_TOO_LARGE: The result is 2400 bytes, over this instance's limit of 1000 bytes. Narrow the call:"
        " filter or project in the JMESPath expression, e.g. `[?status=='paid'].id` or `[0:20]`."
    )
    assert result["structuredContent"]["details"] == {"size": 2400, "max_result_bytes": 1000}


def test_far_larger_non_list_is_measured_only_up_to_four_budgets(
    harness, owner, key, make_table, make_tool, bind, instance
):
    """Measuring stops at four budgets: the message says "more than" and the details flag a lower bound."""
    # given
    big = make_table(owner, name="big", data={"text": "x" * 100_000})
    bind(instance, make_tool(owner, big, type="get_all_data", name="big_text"))
    instance_update(instance=instance, max_result_bytes=1000)
    # when
    result = harness.call("shop", key, "big_text", {})["result"]
    # then
    details = result["structuredContent"]["details"]
    assert details["max_result_bytes"] == 1000
    assert details["size_is_lower_bound"] is True
    assert 4000 < details["size"] <= 4000 + 100_010
    assert result["content"][0]["text"].startswith(f"RESULT_TOO_LARGE: The result is more than {details['size']}")


def test_item_alone_over_the_budget_is_refused(harness, owner, key, make_table, make_tool, bind, instance):
    """A list whose first item alone is over the budget cannot be paged: RESULT_TOO_LARGE naming the item."""
    # given
    big = make_table(owner, name="wide", data=[{"id": 0, "text": "x" * 2000}, {"id": 1}])
    bind(instance, make_tool(owner, big, type="get_all_data", name="wide_rows"))
    instance_update(instance=instance, max_result_bytes=1000)
    # when
    result = harness.call("shop", key, "wide_rows", {})["result"]
    # then
    assert result["content"][0]["text"] == (
        "RESULT_TOO_LARGE: The result is a list whose item 0 alone is over this instance's limit of 1000 bytes,"
        " so no page can hold it. Narrow the call: use a query_data, preview or select tool of this table instead."
    )


def test_tools_list_describes_the_cursor_and_the_paged_shape(harness, owner, key, paged, make_tool, bind, instance):
    """tools/list: a pageable tool's inputSchema has the optional `cursor`; its outputSchema allows a page."""
    # given
    array_schema = {"type": "array", "items": {"type": "object"}}
    bind(instance, make_tool(owner, paged, type="query_data", name="typed_query", output_schema=array_schema))
    # when
    reply = harness.rpc("shop", key, "tools/list")
    # then
    tools = {tool["name"]: tool for tool in reply["result"]["tools"]}
    assert tools["all_records"]["inputSchema"] == {
        "type": "object",
        "properties": {"cursor": cursor_argument_schema()},
        "additionalProperties": False,
    }
    assert tools["query_records"]["inputSchema"]["properties"]["cursor"] == cursor_argument_schema()
    page = json.loads(json.dumps(PAGED_OUTPUT_SCHEMA))
    page["properties"]["items"]["items"] = {"type": "object"}
    assert tools["typed_query"]["outputSchema"] == {
        "type": "object",
        "anyOf": [{"type": "object", "properties": {"result": array_schema}, "required": ["result"]}, page],
    }


@pytest.mark.parametrize("era", ERAS)
def test_page_of_a_tool_with_an_output_schema_is_sent(harness, owner, key, paged, make_tool, bind, instance, era):
    """A tool declaring a list outputSchema sends its pages as structuredContent (the listed schema allows them)."""
    # given
    schema = {"type": "array", "items": {"type": "object"}}
    bind(instance, make_tool(owner, paged, type="get_all_data", name="typed_records", output_schema=schema))
    # when
    pages = follow(harness, key, "typed_records", {}, era=era)
    # then
    assert [len(page["structuredContent"]["items"]) for page in pages] == PAGE_SIZES
    assert [item for page in pages for item in page["structuredContent"]["items"]] == RECORDS


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_sdk_client_follows_the_cursors(harness, owner, key, paged, make_tool, bind, instance, mode):
    """The SDK's own client (which checks structuredContent against a listed outputSchema) reads every page."""
    # given
    schema = {"type": "array", "items": {"type": "object"}}
    bind(instance, make_tool(owner, paged, type="get_all_data", name="typed_records", output_schema=schema))

    async def scenario(client):
        await client.list_tools()
        pages = [await client.call_tool("typed_records", {})]
        while pages[-1].structured_content["next_cursor"] is not None:
            cursor = pages[-1].structured_content["next_cursor"]
            pages.append(await client.call_tool("typed_records", {"cursor": cursor}))
        return pages

    # when
    pages = harness.with_client("shop", key, scenario, mode=mode)
    # then
    assert [page.is_error for page in pages] == [False, False, False]
    assert [item for page in pages for item in page.structured_content["items"]] == RECORDS
