"""JSON API: /api/tables/ (SPEC §6, §2.1, §8 version rule)."""

import pytest
from django.test import override_settings

from tests.api_helpers import client_for, db_snapshot, response_json
from tools_app import services
from tools_app.models import Table, TableRecord, TableStorage, Tool

pytestmark = pytest.mark.django_db


def test_create_returns_the_table_with_id_version_and_timestamps(owner):
    """POST creates a table owned by the caller, at version 1."""
    # given
    client = client_for(owner)

    # when
    response = client.post(
        "/api/tables/", {"name": "crm", "description": "Customers", "data": {"customers": []}}, format="json"
    )

    # then
    assert response.status_code == 201
    body = response.json()
    table = Table.objects.get()
    assert body["id"] == table.pk
    assert body["name"] == "crm"
    assert body["description"] == "Customers"
    assert body["data"] == {"customers": []}
    assert body["version"] == 1
    assert body["owner"] == "owner"
    assert set(body) >= {"created_at", "updated_at"}
    assert table.owner == owner


def test_create_without_data_stores_an_empty_object(owner):
    """`data` is optional and defaults to {}."""
    # when
    response = client_for(owner).post("/api/tables/", {"name": "empty"}, format="json")

    # then
    assert response.status_code == 201
    assert response.json()["data"] == {}
    assert Table.objects.get().data == {}


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"description": "no name"}, "name"),
        ({"name": ""}, "name"),
        ({"name": "x" * 201}, "name"),
        ({"name": "nulldata", "data": None}, "data"),
        ({"name": 5, "description": ["not", "text"]}, "description"),
    ],
)
def test_create_with_bad_input_is_a_400_naming_the_field_and_writes_nothing(owner, payload, field):
    """Bad input is a VALIDATION_ERROR whose `fields` names what was wrong; no row is created."""
    # given
    before = db_snapshot()

    # when
    response = client_for(owner).post("/api/tables/", payload, format="json")

    # then
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "VALIDATION_ERROR"
    assert field in body["fields"]
    assert db_snapshot() == before


def test_list_shows_only_the_callers_tables_paginated(owner, other_user, make_table):
    """Lists hold the caller's tables only, in the SPEC §6 page shape."""
    # given
    make_table(owner, name="a")
    make_table(owner, name="b")
    make_table(other_user, name="theirs")

    # when
    response = client_for(owner).get("/api/tables/")

    # then
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 2
    assert body["next"] is None
    assert body["previous"] is None
    assert [row["name"] for row in body["results"]] == ["a", "b"]


def test_page_and_page_size_walk_the_list(owner, make_table):
    """?page_size= sets the page length and next/previous link the pages."""
    # given
    for name in ("a", "b", "c"):
        make_table(owner, name=name)
    client = client_for(owner)

    # when
    first = client.get("/api/tables/?page_size=2").json()
    second = client.get("/api/tables/?page_size=2&page=2").json()

    # then
    assert first["count"] == 3
    assert [row["name"] for row in first["results"]] == ["a", "b"]
    assert first["next"] == "http://testserver/api/tables/?page=2&page_size=2"
    assert first["previous"] is None
    assert [row["name"] for row in second["results"]] == ["c"]
    assert second["next"] is None
    assert second["previous"] == "http://testserver/api/tables/?page_size=2"


def test_search_and_ordering(owner, make_table):
    """?search= matches name or description; ?ordering= sorts."""
    # given
    make_table(owner, name="orders", description="shop orders")
    make_table(owner, name="people", description="staff")
    make_table(owner, name="archive", description="old orders")
    client = client_for(owner)

    # when
    found = client.get("/api/tables/?search=orders&ordering=-name").json()

    # then
    assert [row["name"] for row in found["results"]] == ["orders", "archive"]


def test_superuser_lists_every_table(superuser, owner, other_user, make_table):
    """SPEC §2: superusers see everything."""
    # given
    make_table(owner, name="a")
    make_table(other_user, name="b")

    # when
    body = client_for(superuser).get("/api/tables/").json()

    # then
    assert body["count"] == 2


def test_patch_name_keeps_the_version(owner, table):
    """SPEC §8: editing the name or description leaves `version`."""
    # when
    response = client_for(owner).patch(f"/api/tables/{table.pk}/", {"name": "renamed"}, format="json")

    # then
    assert response.status_code == 200
    assert response.json()["name"] == "renamed"
    assert response.json()["version"] == 1
    table.refresh_from_db()
    assert (table.name, table.version) == ("renamed", 1)


def test_patch_data_adds_one_to_the_version(owner, table):
    """A data write adds exactly 1 to `version`."""
    # when
    response = client_for(owner).patch(f"/api/tables/{table.pk}/", {"data": [{"id": 9}]}, format="json")

    # then
    assert response.status_code == 200
    assert response.json()["version"] == 2
    table.refresh_from_db()
    assert (table.data, table.version) == ([{"id": 9}], 2)


def test_put_replaces_name_description_and_data(owner, table):
    """PUT sends the whole table."""
    # when
    response = client_for(owner).put(
        f"/api/tables/{table.pk}/", {"name": "n", "description": "d", "data": {"k": 1}}, format="json"
    )

    # then
    assert response.status_code == 200
    table.refresh_from_db()
    assert (table.name, table.description, table.data, table.version) == ("n", "d", {"k": 1}, 2)


def test_patch_with_null_data_is_refused_and_changes_nothing(owner, table):
    """A refused update leaves the table as it was."""
    # given
    before = db_snapshot()

    # when
    response = client_for(owner).patch(f"/api/tables/{table.pk}/", {"name": "x", "data": None}, format="json")

    # then
    assert response.status_code == 400
    assert response.json()["error"] == "VALIDATION_ERROR"
    assert list(response.json()["fields"]) == ["data"]
    assert db_snapshot() == before


def test_delete_removes_the_table_and_its_tools(owner, table, make_tool):
    """Deleting a table deletes the tools mounted on it."""
    # given
    make_tool(owner, table)

    # when
    response = client_for(owner).delete(f"/api/tables/{table.pk}/")

    # then
    assert response.status_code == 204
    assert Table.objects.count() == 0
    assert Tool.objects.count() == 0


def test_another_users_table_is_404_and_untouched(owner, other_user, make_table):
    """Another user's table behaves as if it did not exist."""
    # given
    theirs = make_table(other_user, name="theirs")
    before = db_snapshot()
    client = client_for(owner)

    # when
    responses = [
        client.get(f"/api/tables/{theirs.pk}/"),
        client.patch(f"/api/tables/{theirs.pk}/", {"name": "mine"}, format="json"),
        client.delete(f"/api/tables/{theirs.pk}/"),
    ]

    # then
    assert [r.status_code for r in responses] == [404, 404, 404]
    assert all(r.json()["error"] == "NOT_FOUND" for r in responses)
    assert db_snapshot() == before


def test_a_rows_table_takes_put_and_patch_of_its_data_with_if_match_versions_and_restore(owner, settings):
    """A table created as rows (TOOLHUB_NEW_TABLE_STORAGE=rows) is written whole over the API like a document:
    If-Match, ETag, the versions endpoint and restore; a stale If-Match writes nothing."""
    settings.TOOLHUB_NEW_TABLE_STORAGE = "rows"
    api = client_for(owner)
    created = api.post("/api/tables/", {"name": "rows", "data": [{"id": 1}, {"id": 2}]}, format="json")
    assert created.status_code == 201
    pk = created.json()["id"]
    assert Table.objects.get(pk=pk).storage == TableStorage.ROWS
    patched = api.patch(f"/api/tables/{pk}/", {"data": [{"id": 2}, {"id": 3}]}, format="json", HTTP_IF_MATCH='"1"')
    assert (patched.status_code, patched.json()["version"], patched.json()["data"]) == (200, 2, [{"id": 2}, {"id": 3}])
    before = db_snapshot()
    stale = api.put(f"/api/tables/{pk}/", {"name": "rows", "data": []}, format="json", HTTP_IF_MATCH='"1"')
    assert (stale.status_code, stale.json()["error"]) == (412, "PRECONDITION_FAILED")
    assert db_snapshot() == before
    put = api.put(f"/api/tables/{pk}/", {"name": "rows", "data": [{"id": 3, "x": 1}]}, format="json")
    assert (put.status_code, put.json()["version"]) == (200, 3)
    read = api.get(f"/api/tables/{pk}/")
    assert (read["ETag"], response_json(read)["data"]) == ('"3"', [{"id": 3, "x": 1}])
    assert api.get(f"/api/tables/{pk}/versions/1/").json() == {"version": 1, "data": [{"id": 1}, {"id": 2}]}
    assert api.get(f"/api/tables/{pk}/versions/2/").json() == {"version": 2, "data": [{"id": 2}, {"id": 3}]}
    restored = api.post(f"/api/tables/{pk}/restore/", {"version": 1}, format="json")
    assert (restored.status_code, restored.json()["version"], restored.json()["data"]) == (
        200,
        4,
        [{"id": 1}, {"id": 2}],
    )
    assert TableRecord.objects.filter(collection__table_id=pk).count() == 2


@pytest.mark.parametrize("storage", [TableStorage.DOCUMENT, TableStorage.ROWS])
def test_restore_answers_its_own_version_and_data_when_a_later_write_commits_first(owner, storage, monkeypatch):
    """A write committed between the restore's commit and its answer does not leak into the answer: the answer is
    the restore's version (its ETag) and the document it wrote."""
    api = client_for(owner)
    with override_settings(TOOLHUB_NEW_TABLE_STORAGE=storage):
        created = api.post("/api/tables/", {"name": "t", "data": [{"id": 1}, {"id": 2}]}, format="json")
    pk = created.json()["id"]
    assert Table.objects.get(pk=pk).storage == storage
    assert api.patch(f"/api/tables/{pk}/", {"data": [{"id": 3}]}, format="json").status_code == 200
    restore = services.table_restore

    def restore_then_another_write(*, table_id, version):
        made = restore(table_id=table_id, version=version)
        services.table_update(table=Table.objects.get(pk=table_id), data=[{"id": 9, "later": True}])
        return made

    monkeypatch.setattr(services, "table_restore", restore_then_another_write)
    restored = api.post(f"/api/tables/{pk}/restore/", {"version": 1}, format="json")
    body = response_json(restored)
    assert (restored.status_code, restored["ETag"], body["version"], body["data"]) == (
        200,
        '"3"',
        3,
        [{"id": 1}, {"id": 2}],
    )
    later = api.get(f"/api/tables/{pk}/")
    assert (later["ETag"], response_json(later)["data"]) == ('"4"', [{"id": 9, "later": True}])
