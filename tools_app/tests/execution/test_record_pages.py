"""The records view's paged read and one-record writes (tools_app.execution.record_pages): the same table stored
as a document and as rows answers every page, key search and filter the same (a differential test), on SQLite
and PostgreSQL; a rows table's page reads only its rows; edits go through the data tools' write path."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tools_app import services
from tools_app.data_access import budget
from tools_app.data_access.budget import Limits
from tools_app.execution import record_pages, records
from tools_app.kernel.errors import ToolError
from tools_app.models import Table, TableChange, TableRecord
from tools_app.tests.execution.test_records import DOCUMENT

BIG = [{"id": n, "name": f"item {n}", "group": n % 7, "price": n * 1.5} for n in range(1, 131)]
BIG[40]["price"] = "n/a"  # a string among numbers: an order comparison on price raises in jmespath
TABLE = {**DOCUMENT, "big": BIG}

PAGES = [
    ("/orders", {}),
    ("/orders", {"limit": 3}),
    ("/orders", {"offset": 8, "limit": 5}),
    ("/orders", {"offset": 50}),
    ("/orders", {"key": "2"}),
    ("/orders", {"key": "true"}),
    ("/orders", {"key": "99"}),
    ("/orders", {"filter_text": "status == 'shipped'"}),
    ("/orders", {"filter_text": "[?status == 'shipped']", "offset": 1, "limit": 1}),
    ("/orders", {"filter_text": "total > `100`"}),  # a string total: jmespath raises
    ("/orders", {"filter_text": "contains(tags, 'a')"}),  # missing tags: jmespath raises
    ("/orders", {"filter_text": "starts_with(customer, 'A')"}),
    ("/orders", {"filter_text": "length(items) > `0`"}),  # does not compile: the evaluator answers
    ("/orders", {"key": "2", "filter_text": "status == 'paid'"}),
    ("/orders", {"filter_text": "status =="}),
    ("/orders", {"filter_text": "[?status == 'paid'].id"}),
    ("/catalog", {}),
    ("/catalog", {"offset": 1, "limit": 2}),
    ("/catalog", {"key": "MS"}),
    ("/catalog", {"key": ""}),
    ("/catalog", {"filter_text": "price > `20`"}),
    ("/big", {}),
    ("/big", {"offset": 50}),
    ("/big", {"offset": 100}),
    ("/big", {"offset": 129, "limit": 200}),
    ("/big", {"filter_text": "group == `3`", "offset": 10, "limit": 5}),
    ("/big", {"filter_text": "group == `3` && id > `60`"}),
    ("/big", {"filter_text": "price > `10`"}),
    ("/big", {"key": "77"}),
    ("/big", {"filter_text": "length(name) > `6`", "offset": 5, "limit": 3}),  # the evaluator answers
    ("/nope", {}),
    ("/settings", {}),
    ("/big", {"limit": 0}),
    ("/big", {"offset": -1}),
]


@pytest.fixture
def stored_both_ways(make_table, make_tool, owner):
    document = make_table(owner, name="as document", data=TABLE, storage="document")
    rows = make_table(owner, name="as rows", data=TABLE, storage="document")
    for table, prefix in ((document, "d"), (rows, "r")):
        for mount in ("/orders", "/catalog", "/big"):
            make_tool(owner, table=table, type="query_data", name=f"{prefix}_{mount[1:]}", json_path=mount)
    assert records.table_to_rows(rows.pk) is True
    return document, rows


def _page(table, mount, arguments):
    try:
        page = record_pages.record_page(table_id=table.pk, mount=mount, **arguments)
    except ToolError as exc:
        return ("error", exc.code, exc.message)
    items = [(item.key, item.value) for item in page.items]
    return ("ok", page.collection, items, page.offset, page.limit, page.total, page.has_more, page.version)


def test_every_page_answers_the_same_on_both_storages(stored_both_ways):
    """34 reads (windows, keys, filters that compile, that raise, that do not compile, refusals) answer alike."""
    # given
    document, rows = stored_both_ways
    outcomes = []
    # when / then
    for mount, arguments in PAGES:
        expected = _page(document, mount, arguments)
        got = _page(rows, mount, arguments)
        assert got == expected, (mount, arguments)
        outcomes.append(got[0] if got[0] == "ok" else got[1])
    assert {outcome: outcomes.count(outcome) for outcome in set(outcomes)} == {
        "ok": 22,
        "INVALID_QUERY": 6,
        "VALIDATION_ERROR": 6,
    }


def test_collections_are_the_same_before_and_after_the_move(stored_both_ways):
    document, rows = stored_both_ways
    expected = [
        record_pages.RecordCollection("/big", "array", "id", 130),
        record_pages.RecordCollection("/catalog", "object", "id", 4),
        record_pages.RecordCollection("/orders", "array", "id", 10),
    ]
    assert sorted(record_pages.record_collections(document.pk)[2], key=lambda c: c.mount) == expected
    assert sorted(record_pages.record_collections(rows.pk)[2], key=lambda c: c.mount) == expected
    assert record_pages.record_collections(rows.pk)[1] == "rows"


def test_pages_of_a_rows_table_read_only_their_rows(stored_both_ways, monkeypatch):
    """A window, a key search and a compiled filter never gather the collection (the evaluator's path)."""
    # given
    _document, rows = stored_both_ways

    def gathered(_collection):
        raise AssertionError("the whole collection was read")

    monkeypatch.setattr(records, "collection_value", gathered)
    # when
    window = record_pages.record_page(table_id=rows.pk, mount="/big", offset=100, limit=20)
    by_key = record_pages.record_page(table_id=rows.pk, mount="/big", key="77")
    filtered = record_pages.record_page(table_id=rows.pk, mount="/big", filter_text="group == `3`", limit=2)
    # then
    assert [item.key for item in window.items] == [str(n) for n in range(101, 121)]
    assert (window.total, window.has_more) == (130, True)
    assert [item.value for item in by_key.items] == [BIG[76]]
    assert [item.key for item in filtered.items] == ["3", "10"]
    assert filtered.total is None
    assert filtered.has_more is True


def test_a_filter_over_its_budget_is_query_too_expensive(stored_both_ways):
    _document, rows = stored_both_ways
    tight = Limits(cpu_ms=0.001, max_elements=10**9, max_bytes=10**9, max_query_length=10_000, max_query_depth=100)
    with budget.enforced(tight), pytest.raises(ToolError) as caught:
        record_pages.record_page(table_id=rows.pk, mount="/big", filter_text="length(name) > `5`")
    assert caught.value.code == "QUERY_TOO_EXPENSIVE"


@pytest.mark.parametrize("storage", ["document", "rows"])
def test_an_edit_is_an_update_with_its_history_entry(stored_both_ways, storage, owner):
    """The edit writes the merge patch of the record as an update tool would: one version, one entry."""
    # given
    document, rows = stored_both_ways
    table = rows if storage == "rows" else document
    before = record_pages.record_get(table_id=table.pk, mount="/orders", key="1").value
    edited = {key: value for key, value in before.items() if key != "tags"}
    edited["status"] = "refunded"
    # when
    with services.write_audit(services.WriteAudit(surface="admin", user_id=owner.pk)):
        answer = record_pages.record_update(
            table_id=table.pk, mount="/orders", key="1", value=edited, expected_version=1
        )
    # then
    assert answer == {"updated": 1, "version": 2}
    assert record_pages.record_get(table_id=table.pk, mount="/orders", key="1").value == edited
    entry = TableChange.objects.get(table=table, version=2)
    assert (entry.surface, entry.user_id) == ("admin", owner.pk)
    page = record_pages.record_page(table_id=table.pk, mount="/orders")
    assert [item.value for item in page.items][1:] == ORDERS_AFTER_FIRST
    # and the other storage answers the same after the same edit
    other = document if table is rows else rows
    record_pages.record_update(table_id=other.pk, mount="/orders", key="1", value=edited, expected_version=1)
    assert _page(other, "/orders", {}) == _page(table, "/orders", {})


ORDERS_AFTER_FIRST = DOCUMENT["orders"][1:]


@pytest.mark.parametrize("storage", ["document", "rows"])
@pytest.mark.parametrize(
    ("key", "value", "expected_version", "code"),
    [
        ("1", {"id": 1, "status": "x"}, 7, "VERSION_CONFLICT"),
        ("1", {"id": 9, "status": "x"}, 1, "VALIDATION_ERROR"),
        ("1", {"id": 1, "status": None}, 1, "VALIDATION_ERROR"),
        ("1", ["not", "a", "record"], 1, "VALIDATION_ERROR"),
        ("404", {"id": 404}, 1, "KEY_NOT_FOUND"),
    ],
)
def test_a_refused_edit_writes_nothing(stored_both_ways, storage, key, value, expected_version, code):
    document, rows = stored_both_ways
    table = rows if storage == "rows" else document
    records_before = list(TableRecord.objects.order_by("pk").values_list("pk", "data"))
    with pytest.raises(ToolError) as caught:
        record_pages.record_update(
            table_id=table.pk, mount="/orders", key=key, value=value, expected_version=expected_version
        )
    assert caught.value.code == code
    table.refresh_from_db()
    assert table.version == 1
    assert not TableChange.objects.filter(table=table, version__gt=1).exists()
    assert list(TableRecord.objects.order_by("pk").values_list("pk", "data")) == records_before
    assert [value for _key, value in _page(table, "/orders", {})[2]] == DOCUMENT["orders"]


@pytest.mark.parametrize("storage", ["document", "rows"])
def test_an_object_entry_edit_and_a_delete(stored_both_ways, storage):
    document, rows = stored_both_ways
    table = rows if storage == "rows" else document
    content = {"name": "Mouse", "price": 40, "stock": 31}
    assert record_pages.record_update(
        table_id=table.pk, mount="/catalog", key="MS", value=content, expected_version=1
    ) == {"updated": 1, "version": 2}
    assert record_pages.record_get(table_id=table.pk, mount="/catalog", key="MS").value == content
    assert record_pages.record_delete(table_id=table.pk, mount="/big", key="5", expected_version=2) == {
        "deleted": 1,
        "version": 3,
    }
    page = record_pages.record_page(table_id=table.pk, mount="/big", limit=5)
    assert [item.key for item in page.items] == ["1", "2", "3", "4", "6"]
    assert page.total == 129


def test_an_unchanged_edit_writes_nothing(stored_both_ways):
    _document, rows = stored_both_ways
    before = record_pages.record_get(table_id=rows.pk, mount="/big", key="3").value
    assert record_pages.record_update(
        table_id=rows.pk, mount="/big", key="3", value=dict(before), expected_version=1
    ) == {"updated": 0, "version": 1}
    assert not TableChange.objects.filter(table=rows, version__gt=1).exists()


def test_merge_diff():
    assert record_pages.merge_diff({"a": 1, "b": {"c": 1, "d": 2}}, {"a": 1.0, "b": {"c": 1}, "e": [None]}) == {
        "a": 1.0,
        "b": {"d": None},
        "e": [None],
    }
    with pytest.raises(ToolError, match="b/c: a member set to null"):
        record_pages.merge_diff({"b": {"c": 1}}, {"b": {"c": None}})


def _filter_statement(table, mount: str, filter_text: str) -> tuple[list, str]:
    """The page's items and its compiled statement."""
    with CaptureQueriesContext(connection) as statements:
        page = record_pages.record_page(table_id=table.pk, mount=mount, filter_text=filter_text, limit=5)
    (compiled,) = [statement["sql"] for statement in statements if "UNION ALL SELECT m.*" in statement["sql"]]
    return [item.value for item in page.items], compiled


def test_a_filter_on_unindexed_fields_of_known_kinds_reads_in_position_order_with_no_check(stored_both_ways):
    """Its fields hold numbers only (the collection's field kinds), so it cannot raise: the statement has no
    check over the collection; no index of them exists, so its page is read in position order (SQLite would else
    sort every match first). Once a field is indexed, the index may serve the filter instead."""
    document, rows = stored_both_ways
    text = "group == `3` && id > `60`"
    expected = [record for record in BIG if record["group"] == 3 and record["id"] > 60][:5]
    answered = record_pages.record_page(table_id=document.pk, mount="/big", filter_text=text, limit=5)
    assert [item.value for item in answered.items] == expected
    items, statement = _filter_statement(rows, "/big", text)
    assert items == expected
    assert "EXISTS" not in statement
    assert "ORDER BY +" not in statement
    services.table_update(table=Table.objects.get(pk=rows.pk), indexed_fields=["group"])
    items, statement = _filter_statement(rows, "/big", text)
    assert items == expected
    assert ("ORDER BY +" in statement) == (connection.vendor == "sqlite")
