"""The admin's records view of a table (tools_app.admin.table_records): pages, search, one record's edit and
delete through the data tools' write path, ownership; the same on a document and a rows table."""

import json
from urllib.parse import urlencode

import pytest
from django.urls import reverse

from tests.api_helpers import db_snapshot
from tools_app.execution import records
from tools_app.models import Surface, Table, TableChange, TableRecord, TableStorage
from tools_app.services.table_cache import table_cache

pytestmark = pytest.mark.django_db

ITEMS = [{"id": n, "status": "paid" if n % 3 == 0 else "new", "total": n} for n in range(1, 121)]


@pytest.fixture(autouse=True)
def _empty_cache():
    table_cache.clear()
    yield
    table_cache.clear()


@pytest.fixture(params=["document", "rows"])
def records_table(request, owner, make_table, make_tool):
    made = make_table(owner, name="orders", data={"orders": ITEMS, "settings": {"currency": "EUR"}}, storage="document")
    make_tool(owner, made, type="query_data", name="orders_query", json_path="/orders")
    if request.param == "rows":
        assert records.table_to_rows(made.pk) is True
    made.refresh_from_db()
    return made


def _snapshot():
    """Every watched row and every stored record (a rows table's data)."""
    return db_snapshot(), list(TableRecord.objects.order_by("pk").values_list("pk", "position", "key", "data"))


def _records_url(table, **params):
    return reverse("admin:tools_app_table_records", args=[table.pk]) + ("?" + urlencode(params) if params else "")


def _record_url(table, key):
    return (
        reverse("admin:tools_app_table_record", args=[table.pk])
        + "?"
        + urlencode({"collection": "/orders", "key": key})
    )


def test_pages_of_fifty_with_counts(client, owner, records_table):
    client.force_login(owner)
    first = client.get(_records_url(records_table))
    third = client.get(_records_url(records_table, collection="/orders", page=3))
    assert first.status_code == 200
    assert first.context["page"].total == 120
    assert [row["key"] for row in first.context["rows"]] == [str(n) for n in range(1, 51)]
    assert "Records 1–50 of 120" in first.content.decode()
    assert first.context["next_url"] == "?collection=%2Forders&page=2"
    assert [row["key"] for row in third.context["rows"]] == [str(n) for n in range(101, 121)]
    assert third.context["next_url"] is None
    assert third.context["pages"] == 3


def test_search_by_key_and_filter(client, owner, records_table):
    client.force_login(owner)
    by_key = client.get(_records_url(records_table, collection="/orders", key="42"))
    filtered = client.get(_records_url(records_table, collection="/orders", filter="status == 'paid' && total > `100`"))
    bad = client.get(_records_url(records_table, collection="/orders", filter="status =="))
    assert [row["key"] for row in by_key.context["rows"]] == ["42"]
    assert [row["key"] for row in filtered.context["rows"]] == ["102", "105", "108", "111", "114", "117", "120"]
    assert bad.status_code == 200
    assert bad.context["error"].startswith("INVALID_QUERY: Invalid JMESPath expression at position 11")


def test_an_edit_saves_through_the_write_path_with_history(client, owner, records_table):
    client.force_login(owner)
    page = client.get(_record_url(records_table, "7"))
    assert json.loads(page.context["text"]) == {"id": 7, "status": "new", "total": 7}
    response = client.post(
        reverse("admin:tools_app_table_record", args=[records_table.pk]),
        {"collection": "/orders", "key": "7", "expected_version": "1", "value": '{"id": 7, "status": "void"}'},
    )
    assert response.status_code == 302
    entry = TableChange.objects.get(table=records_table, version=2)
    assert (entry.surface, entry.user_id) == (str(Surface.ADMIN), owner.pk)
    saved = client.get(_record_url(records_table, "7"))
    assert json.loads(saved.context["text"]) == {"id": 7, "status": "void"}
    assert client.get(_records_url(records_table, key="7")).context["page"].version == 2


@pytest.mark.parametrize(
    ("value", "expected_version", "message"),
    [
        ('{"id": 7, "status": "void"}', "5", "VERSION_CONFLICT: The table is at version 1"),
        ('{"id": 8}', "1", "VALIDATION_ERROR: The key field 'id' identifies the record"),
        ('{"id": 7,', "1", "VALIDATION_ERROR: The record is not valid JSON"),
    ],
)
def test_a_refused_edit_shows_why_and_writes_nothing(client, owner, records_table, value, expected_version, message):
    client.force_login(owner)
    before = _snapshot()
    response = client.post(
        reverse("admin:tools_app_table_record", args=[records_table.pk]),
        {"collection": "/orders", "key": "7", "expected_version": expected_version, "value": value},
    )
    assert response.status_code == 200
    assert response.context["error"].startswith(message)
    assert response.context["text"] == value
    assert _snapshot() == before


def test_delete(client, owner, records_table):
    client.force_login(owner)
    response = client.post(
        reverse("admin:tools_app_table_record", args=[records_table.pk]),
        {"collection": "/orders", "key": "7", "expected_version": "1", "value": "", "delete": "1"},
    )
    assert response.status_code == 302
    assert client.get(_records_url(records_table)).context["page"].total == 119
    assert client.get(_record_url(records_table, "7")).status_code == 404


def test_another_users_table_is_not_found_and_unchanged(client, other_user, records_table):
    client.force_login(other_user)
    before = _snapshot()
    assert client.get(_records_url(records_table)).status_code == 404
    assert client.get(_record_url(records_table, "7")).status_code == 404
    posted = client.post(
        reverse("admin:tools_app_table_record", args=[records_table.pk]),
        {"collection": "/orders", "key": "7", "expected_version": "1", "value": '{"id": 7}'},
    )
    assert posted.status_code == 404
    assert _snapshot() == before


def test_the_table_page_links_the_records_view(client, owner, records_table, settings):
    """A rows records_table, or a document over the editor's size, shows the link instead of the raw editor."""
    client.force_login(owner)
    settings.TOOLHUB_ADMIN_EDITOR_MAX_CHARS = 100
    page = client.get(reverse("admin:tools_app_table_change", args=[records_table.pk])).content.decode()
    assert 'id="toolhub-records-link"' in page
    assert 'name="data"' not in page
    assert _records_url(records_table) in page


def test_a_rows_table_within_the_editors_size_is_edited_whole(client, owner, records_table):
    """The table's form shows its whole data in the editor on both storages; a save writes one entry, and on rows
    only the changed record's row."""
    client.force_login(owner)
    page = client.get(reverse("admin:tools_app_table_change", args=[records_table.pk]))
    shown = json.loads(page.context["adminform"].form["data"].value())
    assert shown == {"orders": ITEMS, "settings": {"currency": "EUR"}}
    rows_before = list(TableRecord.objects.order_by("position").values_list("pk", "position"))
    edited = {**shown, "orders": [{**ITEMS[0], "status": "void"}, *ITEMS[1:]], "settings": {"currency": "USD"}}
    posted = client.post(
        reverse("admin:tools_app_table_change", args=[records_table.pk]),
        {
            "name": "orders",
            "description": "",
            "indexed_fields": "[]",
            "redact_fields": "[]",
            "data": json.dumps(edited),
        },
    )
    assert posted.status_code == 302, posted.context["adminform"].form.errors if posted.context else posted
    table = Table.objects.get(pk=records_table.pk)
    assert table.version == 2
    assert table.data == edited
    entry = TableChange.objects.get(table=table, version=2)
    assert (entry.surface, entry.user_id) == (str(Surface.ADMIN), owner.pk)
    assert list(TableRecord.objects.order_by("position").values_list("pk", "position")) == rows_before
    if table.storage == TableStorage.ROWS:
        assert [op["op"] for op in entry.patch] == ["replace", "replace"]
        assert entry.patch[1]["value"] == {**ITEMS[0], "status": "void"}
