"""Result budgets and paging on the API's call endpoint and the admin's try-it (docs/paging.md): the same pages,
cursors and refusals as over MCP (mcp_app/tests/test_paging.py), with the TOOLHUB_MAX_RESULT_BYTES budget; the
admin's "show all" goes up to TOOLHUB_TRY_IT_SHOW_ALL_BYTES."""

import json
import random

import pytest
from django.core import signing
from django.urls import reverse

from tests.api_helpers import client_for, db_snapshot
from tools_app import paging, services
from tools_app.data_access import sql_query
from tools_app.execution import pipeline as calls
from tools_app.execution import records
from tools_app.execution.executors import execute
from tools_app.kernel import limits
from tools_app.kernel.errors import ToolError
from tools_app.models import CallLog, TableRecord

RECORDS = [{"id": i, "name": f"n{i:03d}"} for i in range(100)]
PAGE_SIZES = [35, 34, 31]  # as over MCP: the same budget cuts the same pages (see mcp_app/tests/test_paging.py)


@pytest.fixture(autouse=True)
def _small_budget(settings):
    settings.TOOLHUB_MAX_RESULT_BYTES = 1000
    calls.result_cache.clear()
    yield
    calls.result_cache.clear()


@pytest.fixture
def all_records(owner, records, make_tool):
    return make_tool(owner, records, type="get_all_data", name="all_records")


def call(user, tool, arguments):
    return client_for(user).post(f"/api/tools/{tool.pk}/call/", {"arguments": arguments}, format="json")


def test_api_pages_through_every_item_exactly_once(owner, all_records):
    """POST /api/tools/<id>/call/: a list over the budget answers its first page; the cursors give the rest."""
    # when
    pages = [call(owner, all_records, {}).json()["result"]]
    while pages[-1]["next_cursor"] is not None:
        pages.append(call(owner, all_records, {"cursor": pages[-1]["next_cursor"]}).json()["result"])
    # then
    assert [len(page["items"]) for page in pages] == PAGE_SIZES
    assert [item for page in pages for item in page["items"]] == RECORDS
    assert [page["total"] for page in pages] == [100, 100, 100]
    assert all(len(json.dumps(page, separators=(",", ":")).encode()) <= 1000 for page in pages)
    assert (
        list(CallLog.objects.order_by("pk").values_list("surface", "tool_name", "status"))
        == [("api", "all_records", "ok")] * 3
    )


def test_api_result_within_the_budget_is_unchanged(owner, records, make_tool):
    """A result within the budget is the plain value, as before."""
    # given
    tool = make_tool(owner, records, name="query_records")
    # when
    response = call(owner, tool, {"query": "[0:2].name"})
    # then
    assert (response.status_code, response.json()) == (200, {"result": ["n000", "n001"]})


def test_api_cursor_expires_after_a_write_and_the_refusal_writes_nothing(owner, records, all_records):
    """After a write, the earlier cursor is a 400 CURSOR_EXPIRED; the refused call writes only its log row."""
    # given
    cursor = call(owner, all_records, {}).json()["result"]["next_cursor"]
    services.table_update(table=records, data=[*RECORDS, {"id": 100, "name": "n100"}])
    before = db_snapshot()
    # when
    response = call(owner, all_records, {"cursor": cursor})
    # then
    assert response.status_code == 400
    assert response.json() == {
        "error": "CURSOR_EXPIRED",
        "message": "The table changed since this cursor was issued (version 1, now 2): call again without a"
        " cursor to start over on the current data.",
        "details": {"cursor_version": 1, "table_version": 2},
    }
    after = db_snapshot()
    assert after["tools_app.Table"] == before["tools_app.Table"]
    assert [row["error_code"] for row in after["tools_app.CallLog"][len(before["tools_app.CallLog"]) :]] == [
        "CURSOR_EXPIRED"
    ]


def test_api_tampered_cursor_is_invalid_arguments(owner, all_records):
    """A garbled cursor is a 400 INVALID_ARGUMENTS naming `cursor`."""
    # given
    cursor = call(owner, all_records, {}).json()["result"]["next_cursor"]
    # when
    response = call(owner, all_records, {"cursor": cursor[:-3] + "xyz"})
    # then
    assert response.status_code == 400
    assert response.json()["error"] == "INVALID_ARGUMENTS"
    assert response.json()["message"] == (
        "Invalid arguments: argument 'cursor': it is not a cursor this server issued (garbled or altered)."
    )


def test_api_cursor_of_another_tool_is_expired(owner, records, all_records, make_tool):
    """A cursor of one tool does not page another: CURSOR_EXPIRED."""
    # given
    other = make_tool(owner, records, type="get_all_data", name="all_records_again")
    cursor = call(owner, all_records, {}).json()["result"]["next_cursor"]
    # when
    response = call(owner, other, {"cursor": cursor})
    # then
    assert (response.status_code, response.json()["error"]) == (400, "CURSOR_EXPIRED")


def test_api_non_list_over_the_budget_names_its_size_and_the_budget(owner, records, make_tool):
    """Not a list: 400 RESULT_TOO_LARGE with the size and the budget (no instance: "the result budget")."""
    # given
    tool = make_tool(owner, records, name="query_records")
    # when
    response = call(owner, tool, {"query": "{rows: @}"})
    # then
    assert response.status_code == 400
    assert response.json() == {
        "error": "RESULT_TOO_LARGE",
        "message": "The result is 2400 bytes, over the result budget of 1000 bytes. Narrow the call: filter or"
        " project in the JMESPath expression, e.g. `[?status=='paid'].id` or `[0:20]`.",
        "details": {"size": 2400, "max_result_bytes": 1000},
    }


# The evaluator's encoding of a 67 MB document; over rows `{rows: @}` gathers the records and is stopped by the
# time budget (QUERY_TOO_EXPENSIVE) before any size is measured.
@pytest.mark.usefixtures("document_storage")
def test_api_67_megabyte_result_answers_within_the_budget(owner, make_table, make_tool, settings):
    """A 67 MB result (300,000 records of 226 bytes): with the default budget the call answers its first page, a
    body within the budget, without encoding the whole result; the same document wrapped in an object is
    RESULT_TOO_LARGE."""
    # given
    settings.TOOLHUB_MAX_RESULT_BYTES = limits.MAX_RESULT_BYTES.default
    settings.TOOLHUB_MAX_TABLE_BYTES = 80 * 1024 * 1024  # a deployment that allows such a table (docs/input-limits.md)
    rows = [{"id": i, "text": "x" * 202} for i in range(300_000)]
    big = make_table(owner, name="big", data=rows)
    assert len(json.dumps(rows, separators=(",", ":"))) == 67_688_891
    listed = make_tool(owner, big, type="get_all_data", name="everything")
    wrapped = make_tool(owner, big, name="everything_wrapped")
    # when
    response = call(owner, listed, {})
    refused = call(owner, wrapped, {"query": "{rows: @}"})
    # then
    assert response.status_code == 200
    page = response.json()["result"]
    assert (len(page["items"]), page["total"]) == (179, 300_000)
    assert len(response.content) <= 40_000 + len('{"result":}')
    assert refused.status_code == 400
    # measured up to 4 budgets: counting stops with the piece of JSON that passes 160,000 bytes
    assert refused.json()["details"] == {"size": 160_011, "max_result_bytes": 40_000, "size_is_lower_bound": True}
    assert refused.json()["message"].startswith(
        "The result is more than 160011 bytes (measuring stopped there), over the result budget of 40000 bytes."
    )


#
# The admin's try-it
#


def test_try_it_shows_the_first_page_and_offers_show_all(owner_client, all_records):
    """Try-it runs with the API's budget: the first page, the note and a "show all" button."""
    # when
    response = owner_client.post(reverse("admin:tools_app_tool_try", args=[all_records.pk]), {})
    # then
    outcome = response.context["outcome"]
    assert outcome["ok"] is True
    shown = json.loads(outcome["result"])
    assert (len(shown["items"]), shown["total"]) == (35, 100)
    assert outcome["page_note"].startswith("Showing items 1-35 of 100 (the result is paged")
    html = response.content.decode()
    assert 'id="toolhub-show-all"' in html
    assert "Show all (up to 5.0 MB)" in html
    assert list(CallLog.objects.values_list("surface", "status")) == [("admin", "ok")]


def test_try_it_show_all_shows_every_item(owner_client, all_records):
    """ "Show all" runs the call again with the hard cap: the whole list, no page, no button."""
    # when
    response = owner_client.post(reverse("admin:tools_app_tool_try", args=[all_records.pk]), {"_show_all": "1"})
    # then
    outcome = response.context["outcome"]
    assert json.loads(outcome["result"]) == RECORDS
    assert (outcome["page_note"], outcome["truncated"]) == ("", False)
    assert 'id="toolhub-show-all"' not in response.content.decode()
    assert list(CallLog.objects.values_list("surface", "status")) == [("admin", "ok")]


def test_try_it_show_all_stops_at_the_hard_cap(owner_client, all_records, settings):
    """Over the "show all" cap the list is still paged: the cap is hard."""
    # given
    settings.TOOLHUB_TRY_IT_SHOW_ALL_BYTES = 2000
    # when
    response = owner_client.post(reverse("admin:tools_app_tool_try", args=[all_records.pk]), {"_show_all": "1"})
    # then
    outcome = response.context["outcome"]
    shown = json.loads(outcome["result"])
    assert (len(shown["items"]), shown["total"]) == (76, 100)
    assert outcome["page_note"].startswith("Showing items 1-76 of 100 (the result is paged")


#
# The pieces
#


@pytest.mark.parametrize(
    "value",
    [
        [],
        {},
        [1, "é", {"a": [True, None, 1.5]}],
        {"k": "ü" * 10, "nested": {"deep": [[], [{}], {"q": '"\\\n\u0001'}]}},
        {1: "a", None: "b", 2.5: "c"},
        [{"id": i, "tags": ["x"] * i} for i in range(30)],
        "x",
        3,
        float("nan"),
    ],
)
def test_encode_within_is_json_dumps_when_it_fits(value):
    """The text within the budget is exactly the compact JSON the rest of toolhub sends."""
    # when
    text = paging.encode_within(value, 10_000)
    # then
    assert text == json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def test_encode_within_counts_utf8_bytes():
    """The budget is in UTF-8 bytes: 10 two-byte characters and the quotes are 22 bytes."""
    # when / then
    assert paging.encode_within("é" * 10, 22) == '"' + "é" * 10 + '"'
    assert paging.encode_within("é" * 10, 21) is None
    # a lone surrogate stored before input refused them counts as its 3 bytes, never an error
    assert paging.encode_within("\ud800", 5) == '"\ud800"'


@pytest.mark.parametrize("value", [["x" * 100] * 3, {"a": "x" * 400}, [[1] * 200], {"k": {"k": [1, 2, 3] * 100}}])
def test_encode_within_refuses_what_passes_the_budget(value):
    """Over the budget by one byte or many: None, whatever the nesting."""
    # given
    size = len(json.dumps(value, separators=(",", ":")))
    # when / then
    assert paging.encode_within(value, size) == json.dumps(value, separators=(",", ":"))
    assert paging.encode_within(value, size - 1) is None
    assert paging.encode_within(value, 50) is None


@pytest.mark.parametrize(
    "value",
    [
        {"items": [{"id": i, "note": "\u0001" * 40, "tags": [{"t": '"'}]} for i in range(20)], "total": 20},
        [[{"q": "\\" * 30}] * 5] * 4,
    ],
)
def test_a_nested_value_counted_within_the_room_is_still_measured_with_its_escapes(value):
    """A nested value whose characters fit but whose escapes do not (each counted as one character before it is
    encoded whole) is refused at its real size less one byte, and kept at its real size."""
    # given
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    counted = 10**6 - paging._room_after(value, 10**6)  # what the count without escapes makes of it
    assert counted < len(text)
    # when / then
    assert paging.encode_within(value, len(text)) == text
    assert paging.encode_within(value, len(text) - 1) is None
    assert paging.encode_within(value, counted) is None


def _item_by_item_page(items: list, offset: int, limit: int) -> tuple[str, int]:
    """The page page_of answers, built the plain way: items encoded one at a time until the next does not fit."""
    envelope = paging.utf8_size(paging._envelope("", len(items), f"c{len(items)}"))
    texts: list[str] = []
    used, index = 0, offset
    while index < len(items):
        text = paging.encode_within(items[index], limit - envelope - used - (1 if texts else 0))
        if text is None:
            break
        used += paging.utf8_size(text) + (1 if texts else 0)
        texts.append(text)
        index += 1
    cursor = f"c{index}" if index < len(items) else None
    return paging._envelope(",".join(texts), len(items), cursor), index - offset


@pytest.mark.parametrize("seed", range(40))
def test_long_lists_of_scalars_encode_and_page_as_item_by_item(seed):
    """Runs of scalars are encoded at once (paging.SCALAR_RUN): the text, the measure against the budget and the
    page's cut are those of encoding item by item, with escapes and UTF-8 bytes that the run's estimate leaves
    out, and containers between the runs."""
    # given
    rng = random.Random(seed)
    kinds = [
        lambda: rng.randrange(-(10**20), 10**20),
        lambda: rng.randrange(100_000),
        lambda: rng.random(),
        lambda: 'é\n"\u0001' * rng.randrange(3),
        lambda: None,
        lambda: True,
        lambda: {"a": [1, "x"]},
    ]
    items = [rng.choice(kinds)() for _ in range(rng.randrange(1, 2_000))]
    whole = json.dumps(items, ensure_ascii=False, separators=(",", ":"))
    limit = rng.randrange(5, paging.utf8_size(whole) + 10)
    offset = rng.randrange(len(items))
    # when
    text = paging.encode_within(items, limit)
    page = paging.page_of(items, offset=offset, limit=limit + 300, cursor_at=lambda index: f"c{index}")
    # then
    assert text == (whole if paging.utf8_size(whole) <= limit else None)
    expected_text, expected_shown = _item_by_item_page(items, offset, limit + 300)
    if expected_shown == 0:
        assert page is None
    else:
        assert page is not None
        assert (page.text, page.shown) == (expected_text, expected_shown)
        assert page.value["items"] == items[offset : offset + expected_shown]


@pytest.mark.parametrize("seed", range(6))
def test_lists_of_numbers_are_cut_at_once_as_item_by_item_at_every_budget(seed):
    """A list of numbers, booleans and nulls (a projection's ids) is encoded and cut in pieces (paging.number_run):
    at every budget around its length the text, the measure and the page are those of encoding item by item."""
    # given
    rng = random.Random(seed)
    kinds = [
        lambda: rng.randrange(100_000),
        lambda: rng.randrange(-(10**30), 10**30),
        lambda: rng.random() * 10 ** rng.randrange(-8, 20),
        lambda: rng.choice([True, False, None, float("inf"), -0.0]),
    ]
    items = [rng.choice(kinds)() for _ in range(rng.randrange(1, 60))]
    whole = json.dumps(items, separators=(",", ":"))
    for limit in range(0, len(whole) + 3):
        offset = rng.randrange(len(items))
        # when
        text = paging.encode_within(items, limit)
        page = paging.page_of(items, offset=offset, limit=limit + 40, cursor_at=lambda index: f"c{index}")
        # then
        assert text == (whole if len(whole) <= limit else None)
        expected_text, expected_shown = _item_by_item_page(items, offset, limit + 40)
        if expected_shown == 0:
            assert page is None
        else:
            assert page is not None
            assert (page.text, page.shown) == (expected_text, expected_shown)


@pytest.mark.parametrize("seed", range(6))
def test_a_list_over_its_budget_is_encoded_once_and_its_first_page_cut_from_that(seed):
    """paging.list_within gives encode_within's text, and for a list over the budget at a number the run of numbers
    that fits it, from which page_of cuts the same first page as it cuts encoding the list itself, at every budget
    around the list's length; the numbers are not encoded again."""
    # given
    rng = random.Random(seed)
    kinds = [
        lambda: rng.randrange(100_000),
        lambda: rng.randrange(-(10**30), 10**30),
        lambda: rng.random() * 10 ** rng.randrange(-8, 20),
        lambda: rng.choice([True, False, None, -0.0]),
    ]
    items = [rng.choice(kinds)() for _ in range(rng.randrange(1, 60))]
    if seed % 2:
        items.insert(rng.randrange(len(items)), "a string ends the run")
    whole = json.dumps(items, separators=(",", ":"))
    for limit in range(0, len(whole) + 3):
        # when
        text, start = paging.list_within(items, limit)
        again = paging.page_of(items, offset=0, limit=limit, cursor_at=lambda index: f"c{index}")
        cut = paging.page_of(items, offset=0, limit=limit, cursor_at=lambda index: f"c{index}", start=start)
        # then
        assert text == paging.encode_within(items, limit) == (whole if len(whole) <= limit else None)
        if start is not None:
            assert text is None
            assert start[0] == whole[1:-1][: len(start[0])]
            assert start[0] == ",".join(json.dumps(item) for item in items[: start[1]])
        assert cut == again


def test_list_within_of_no_items():
    assert paging.list_within([], 2) == ("[]", None)
    assert paging.list_within([], 1) == (None, None)
    assert paging.list_within([1, 2, 3], 6) == (None, ("1,2", 2))
    assert paging.list_within([1, 2, 3], 7) == ("[1,2,3]", None)


def test_a_value_nested_900_deep_is_encoded_and_measured():
    """A legacy document nested deeper than the encoder's walk allows (stored before TOOLHUB_MAX_TABLE_DEPTH):
    within the budget its exact text, over it None, and measured exactly; never a RecursionError."""
    # given
    value: dict = {}
    for _ in range(900):
        value = {"a": value}
    text = '{"a":' * 900 + "{}" + "}" * 900
    # when / then
    assert paging.encode_within(value, 10_000) == text
    assert paging.encode_within(value, 4_000) is None
    assert paging.encoded_size(value, 10_000) == (len(text), True)


def test_measure_stops_at_the_cap():
    """measure() counts up to its cap and says whether it finished."""
    # when / then
    assert paging.encoded_size([1, 2, 3], 100) == (7, True)
    size, complete = paging.encoded_size(["x" * 50] * 1000, 200)
    assert complete is False
    assert 200 < size <= 200 + 53


#
# What the registry says about paging
#


def test_guide_and_export_describe_paging_for_pageable_tools_only(owner, records, all_records, make_tool):
    """The usage guide gives a pageable tool a Paging line; the export widens its output schema to a page and
    adds `cursor` to its input schema; a select tool (never paged) keeps its own schemas and no line."""
    from tools_app.registry.export import export_tool, without_type_arrays
    from tools_app.registry.guide import PAGING, render_tool
    from tools_app.registry.search import make_doc

    # given
    typed = make_tool(owner, records, name="typed_query", output_schema={"type": "array", "items": {"type": "integer"}})
    select = make_tool(owner, records, type="select", name="records_by_id")
    # when
    guide = render_tool(make_doc(0, all_records.name, all_records.description, all_records))
    select_guide = render_tool(make_doc(0, select.name, select.description, select))
    exported = export_tool(tool=typed)["tools"][0]
    select_exported = export_tool(tool=select)["tools"][0]
    # then
    assert f"**Paging**: {PAGING}" in guide
    assert "**Paging**" not in select_guide
    page = json.loads(json.dumps(paging.PAGED_OUTPUT_SCHEMA))
    page["properties"]["items"]["items"] = {"type": "integer"}
    assert exported["outputSchema"] == {"anyOf": [{"type": "array", "items": {"type": "integer"}}, page]}
    assert exported["inputSchema"]["properties"]["cursor"] == paging.cursor_argument_schema()
    # The same schema, with its type arrays written as anyOf (export.without_type_arrays)
    assert select_exported["inputSchema"] == without_type_arrays(select.input_schema)


@pytest.mark.parametrize(
    ("text", "size"),
    [("", 0), ("abc", 3), ("é", 2), ("€", 3), ("😀", 4), ("a\ud800b", 5), ('{"q":"Zoë"}', 12)],
    ids=["empty", "ascii", "2 bytes", "3 bytes", "4 bytes", "lone surrogate", "json"],
)
def test_utf8_size_is_the_utf8_length_and_a_lone_surrogate_counts_three(text, size):
    assert paging.utf8_size(text) == size


#
# Rows tables: a page reads only its own records (docs/paging.md, "Pages of a rows table")
#


def _tools_both_ways(owner, make_table, make_tool, data, type="get_all_data", **fields):
    """The same data as a document table and as a table stored as rows, a `type` tool on each."""
    document = make_table(owner, name="as_document", data=data, storage="document")
    rows = make_table(owner, name="as_rows", data=data, storage="document")
    assert records.table_to_rows(rows.pk)
    return (
        make_tool(owner, document, type=type, name=f"{type}_document", **fields),
        make_tool(owner, rows, type=type, name=f"{type}_rows", **fields),
    )


def _all_pages(tool, arguments=None):
    """Every answer of a call and of the cursors it hands out: (status, body without the cursor's text)."""
    answers = []
    response = call(tool.owner, tool, dict(arguments or {}))
    while True:
        body = response.json()
        result = body.get("result")
        cursor = result.get("next_cursor") if isinstance(result, dict) and "total" in result else None
        if cursor is not None:
            result = {**result, "next_cursor": signing.loads(cursor, salt=paging._SALT)["o"]}
        answers.append((response.status_code, result if "result" in body else body))
        if cursor is None:
            return answers
        response = call(tool.owner, tool, {**(arguments or {}), "cursor": cursor})


PAGED_SHAPES = {
    "array over the budget": [{"id": i, "name": f"n{i:03d}"} for i in range(100)],
    "array within the budget": [{"id": i} for i in range(20)],
    "empty array": [],
    "an item alone over the budget": [{"id": 0}, {"id": 1, "text": "x" * 1500}, {"id": 2}],
    "scalars and nested records": [1, "two", None, [3], {"id": 4, "tags": ["é" * 40]}] * 30,
    "object over the budget": {f"k{i:03d}": {"name": f"n{i:03d}"} for i in range(300)},
    "object far over the budget": {f"k{i:04d}": {"name": "x" * 50} for i in range(1000)},
    "object within the budget": {"a": {"name": "n"}, "b": 2},
}
PAGED_STATUSES = {
    "array over the budget": [200, 200, 200],
    "array within the budget": [200],
    "empty array": [200],
    "an item alone over the budget": [200, 400],  # the second page would start with it: RESULT_TOO_LARGE
    "scalars and nested records": [200] * 5,
    "object over the budget": [400],
    "object far over the budget": [400],
    "object within the budget": [200],
}


@pytest.mark.parametrize("shape", list(PAGED_SHAPES))
@pytest.mark.parametrize("type", ["get_all_data", "preview"])
def test_a_rows_table_answers_every_page_as_its_document(owner, make_table, make_tool, shape, type):
    """get_all_data, and preview without preview keys, over rows: the same pages, totals, cursor offsets and
    refusals as the same data stored as a document, following every cursor."""
    # given
    on_document, on_rows = _tools_both_ways(owner, make_table, make_tool, PAGED_SHAPES[shape], type=type)
    # when
    calls.result_cache.clear()
    expected = _all_pages(on_document)
    calls.result_cache.clear()
    answered = _all_pages(on_rows)
    # then
    assert answered == expected
    assert [status for status, _answer in expected] == PAGED_STATUSES[shape]


def test_a_rows_page_reads_only_its_rows(owner, make_table, make_tool, settings, monkeypatch):
    """The first page and a page by cursor of a 20,000-record collection read 64 rows each (the first statement's
    size), never the collection: with the evaluator's byte bound far below the collection, they still answer."""
    # given
    data = [{"id": i, "name": f"n{i:05d}"} for i in range(20_000)]
    _on_document, tool = _tools_both_ways(owner, make_table, make_tool, data)
    settings.TOOLHUB_MAX_EVALUATED_BYTES = 10_000  # gathering the collection (~560 kB) would be refused
    decoded: list[int] = []
    real = records._decoded

    def counted(rows, cursor, layouts):
        decoded.append(len(rows))
        return real(rows, cursor, layouts)

    monkeypatch.setattr(records, "_decoded", counted)
    binding = paging.tool_binding(tool_id=tool.pk, tool_changed=tool.updated_at.isoformat(), arguments={})
    deep = paging.sign_cursor(binding=binding, version=tool.table.version, offset=15_000)
    # when
    first = call(owner, tool, {}).json()["result"]
    first_rows = sum(decoded)
    decoded.clear()
    middle = call(owner, tool, {"cursor": deep}).json()["result"]
    # then
    assert (first_rows, sum(decoded)) == (64, 64)
    assert first["items"] == data[:32]
    assert middle["items"] == data[15_000:15_028]  # five-digit ids: fewer fit
    assert (first["total"], middle["total"]) == (20_000, 20_000)
    assert signing.loads(middle["next_cursor"], salt=paging._SALT)["o"] == 15_028


def test_a_rows_cursor_past_the_collection_is_expired_and_writes_only_its_record(owner, make_table, make_tool):
    """A genuine cursor past the end (the collection shrank without a version change cannot happen through the
    tools; signed here by hand) is CURSOR_EXPIRED, as the pipeline answers for a shorter list."""
    # given
    _on_document, tool = _tools_both_ways(owner, make_table, make_tool, [{"id": i} for i in range(300)])
    binding = paging.tool_binding(tool_id=tool.pk, tool_changed=tool.updated_at.isoformat(), arguments={})
    past = paging.sign_cursor(binding=binding, version=tool.table.version, offset=301)
    before = db_snapshot()
    # when
    response = call(owner, tool, {"cursor": past})
    # then
    assert (response.status_code, response.json()["error"]) == (400, "CURSOR_EXPIRED")
    assert response.json()["message"] == "The result this cursor pages is shorter now."
    after = db_snapshot()
    recorded = ("tools_app.CallLog", "tools_app.Tool")  # the call's record: its log row, the tool's use count
    assert {label: rows for label, rows in after.items() if label not in recorded} == {
        label: rows for label, rows in before.items() if label not in recorded
    }
    assert CallLog.objects.get(tool=tool).status == "error"
    assert TableRecord.objects.filter(collection__table=tool.table).count() == 300


@pytest.mark.parametrize(
    "data", [[{"id": i} for i in range(2_000)], {f"k{i}": {"name": "x" * 20} for i in range(2_000)}]
)
def test_a_rows_read_under_a_huge_budget_reads_no_more_than_the_evaluator_may(
    owner, make_table, make_tool, settings, data
):
    """A budget as large as an instance may set does not lift the bound on what a read gathers: past
    TOOLHUB_MAX_EVALUATED_BYTES it is QUERY_TOO_EXPENSIVE (as gathering the collection was), and nothing is written."""
    # given
    _on_document, tool = _tools_both_ways(owner, make_table, make_tool, data)
    settings.TOOLHUB_MAX_RESULT_BYTES = 2_147_483_647
    settings.TOOLHUB_MAX_EVALUATED_BYTES = 10_000
    before = TableRecord.objects.filter(collection__table=tool.table).count()
    # when
    response = call(owner, tool, {})
    # then
    assert (response.status_code, response.json()["error"]) == (400, "QUERY_TOO_EXPENSIVE")
    assert "TOOLHUB_MAX_EVALUATED_BYTES" in response.json()["message"]
    assert TableRecord.objects.filter(collection__table=tool.table).count() == before == 2_000


# A compiled query answering one item per record (sql_query.windowed) is read only as far as its page; the others
# (a projection, a filter, a count, a sort the evaluator answers: mixed keys) as before, cut by the pipeline.
WINDOWED_QUERIES = [
    "@",
    "reverse(@)",
    "map(&name, @)",
    "sort_by(@, &name)",
    "reverse(sort_by(@, &id))",
    "[*].name",
    "[?id > `40`]",
    "length(@)",
]
QUERY_SHAPES = {
    "array over the budget": [{"id": i, "name": f"n{(i * 37) % 100:03d}"} for i in range(100)],
    "array within the budget": [{"id": i, "name": f"n{i}"} for i in range(20)],
    "empty array": [],
    "an item alone over the budget": [{"id": 0}, {"id": 1, "name": "x" * 1500}, {"id": 2, "name": "b"}],
    "scalars and nested records": [1, "two", None, [3], {"id": 4, "name": "é" * 40}] * 30,
}


@pytest.mark.parametrize("shape", list(QUERY_SHAPES))
@pytest.mark.parametrize("query", WINDOWED_QUERIES)
def test_a_rows_query_answers_every_page_as_its_document(owner, make_table, make_tool, shape, query):
    """query_data over rows, its compiled answer read by windows where it can be: the same pages, totals, cursor
    offsets and refusals as the same data stored as a document, whose whole answer the pipeline cuts."""
    # given
    on_document, on_rows = _tools_both_ways(
        owner, make_table, make_tool, QUERY_SHAPES[shape], type="query_data", json_path=""
    )
    # when
    calls.result_cache.clear()
    expected = _all_pages(on_document, {"query": query})
    calls.result_cache.clear()
    answered = _all_pages(on_rows, {"query": query})
    # then
    assert answered == expected


def test_a_compiled_query_page_reads_only_its_rows(owner, make_table, make_tool, settings, monkeypatch):
    """`reverse(@)` and `map(&name, @)` over 20,000 records: the first page and a page by cursor fetch 64 rows each
    (the first statement's window), never the whole answer: with the evaluator's byte bound far below it, they
    still answer, and the same calls without the pipeline's window are refused."""
    # given
    data = [{"id": i, "name": f"n{i:05d}"} for i in range(20_000)]
    _on_document, tool = _tools_both_ways(owner, make_table, make_tool, data, type="query_data", json_path="")
    settings.TOOLHUB_MAX_EVALUATED_BYTES = 10_000  # the whole answer (~600 kB) would be refused
    fetched: list[int] = []
    real = sql_query.fetch

    def counted(cursor, limit):
        rows = real(cursor, limit)
        fetched.append(len(rows))
        return rows

    monkeypatch.setattr(sql_query, "fetch", counted)
    binding = paging.tool_binding(
        tool_id=tool.pk, tool_changed=tool.updated_at.isoformat(), arguments={"query": "reverse(@)"}
    )
    deep = paging.sign_cursor(binding=binding, version=tool.table.version, offset=15_000)
    # when
    first = call(owner, tool, {"query": "reverse(@)"}).json()["result"]
    first_rows = list(fetched)
    fetched.clear()
    middle = call(owner, tool, {"query": "reverse(@)", "cursor": deep}).json()["result"]
    middle_rows = list(fetched)
    fetched.clear()
    names = call(owner, tool, {"query": "map(&name, @)"}).json()["result"]
    names_rows = list(fetched)
    fetched.clear()
    with pytest.raises(ToolError) as refused:
        execute(tool=tool, arguments={"query": "reverse(@)"})  # no window: the whole answer
    # then
    assert (first_rows, middle_rows, names_rows) == ([64], [64], [64, 128])  # 92 names of 8 bytes fit
    assert first["items"] == data[::-1][:28]
    assert middle["items"] == data[::-1][15_000:15_029]
    assert names["items"] == [record["name"] for record in data[:92]]
    assert (first["total"], middle["total"], names["total"]) == (20_000, 20_000, 20_000)
    assert signing.loads(middle["next_cursor"], salt=paging._SALT)["o"] == 15_029
    assert refused.value.code == "QUERY_TOO_EXPENSIVE"
    assert "TOOLHUB_MAX_EVALUATED_BYTES" in str(refused.value)


#
# Pages are cut once and kept cut
#


@pytest.mark.parametrize("stored", ["document", "rows"])
def test_a_page_asked_again_is_served_as_cut(owner, make_table, make_tool, monkeypatch, stored):
    """A page is cut once: asked again (first page or by cursor), it is served from the result cache as cut,
    neither run, read nor measured again; the same answer."""
    # given
    on_document, on_rows = _tools_both_ways(owner, make_table, make_tool, [dict(r) for r in RECORDS])
    tool = on_document if stored == "document" else on_rows
    first = call(owner, tool, {}).json()
    second = call(owner, tool, {"cursor": first["result"]["next_cursor"]}).json()

    def refused(*args, **kwargs):
        raise AssertionError("cut or run again")

    monkeypatch.setattr(calls, "execute", refused)
    monkeypatch.setattr(calls, "page_of", refused)
    monkeypatch.setattr(paging.PageWindow, "cut", refused)
    # when
    again = call(owner, tool, {}).json()
    second_again = call(owner, tool, {"cursor": first["result"]["next_cursor"]}).json()
    # then
    assert (again, second_again) == (first, second)
    assert [len(page["result"]["items"]) for page in (first, second)] == PAGE_SIZES[:2]


def test_a_cut_page_is_per_budget(owner, records, all_records, settings):
    """The cut pages are kept per budget: another budget cuts its own pages from the same result."""
    # given
    small = call(owner, all_records, {}).json()["result"]
    settings.TOOLHUB_MAX_RESULT_BYTES = 2000
    # when
    larger = call(owner, all_records, {}).json()["result"]
    # then
    assert (len(small["items"]), len(larger["items"])) == (35, 76)
