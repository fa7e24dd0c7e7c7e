"""What history answers (a version, a restore, the table read back through the log, an entry's patch, an idempotent
repeat) keeps the key order it was written in, on SQLite and PostgreSQL alike, for document and rows tables
(docs/history.md, "Storage": the history columns keep the JSON text as written). Compared as JSON text: dict
equality ignores key order.

Each read empties this process's table cache first, so that it comes from the database (a snapshot, the log, the
rows), not from the document a write left in the cache."""

import copy
import json

import pytest

from tests.api_helpers import client_for, response_json
from tools_app import services
from tools_app.execution import records
from tools_app.models import Table, TableChange, TableStorage
from tools_app.services.table_cache import table_cache

# Keys out of PostgreSQL jsonb's order (shorter first, then bytewise) at every depth: the document, its records and
# objects inside them.
VERSIONS = {
    1: {
        "title": "orders",
        "items": [{"name": "a", "id": 1, "qty": 2}, {"name": "b", "id": 2, "qty": 5}],
        "meta": {"zeta": 1, "a": 2},
    },
    2: {
        "title": "orders",
        "items": [{"name": "a", "id": 1, "qty": 3, "note": {"zz": 1, "b": 0}}, {"status": "new", "id": 3, "name": "c"}],
        "meta": {"zeta": 1, "a": 2, "bb": 3},
    },
    3: {"title": "orders", "items": [{"name": "a", "id": 1, "qty": 4}], "meta": {"zeta": 9}},
}


def _text(value) -> str:
    return json.dumps(value, ensure_ascii=False)


def _cold(response_of):
    """The JSON text of an API answer read with this process's table cache empty."""
    table_cache.clear()
    response = response_of()
    assert response.status_code == 200, response.content
    return _text(response_json(response))


def _table(how, make_table, owner):
    """(a table at version 1, its VERSIONS): a document table; a rows table created from an array of records; a
    document table moved to rows (tables_to_rows) at version 1, its collection under an object."""
    if how == "rows":
        versions = {version: data["items"] for version, data in VERSIONS.items()}
        table = make_table(owner, name="ordered", data=copy.deepcopy(versions[1]))
        assert table.storage == TableStorage.ROWS
        return table, versions
    table = make_table(owner, name="ordered", data=copy.deepcopy(VERSIONS[1]), storage="document")
    if how == "moved":
        table_cache.clear()  # the move reads the document from its snapshot, as any other process would
        assert records.table_to_rows(table.pk) is True
    return table, VERSIONS


@pytest.mark.parametrize("how", ["document", "rows", "moved"])
def test_versions_restores_and_reads_through_the_log_keep_the_written_key_order(how, make_table, owner):
    table, versions = _table(how, make_table, owner)
    api = client_for(owner)
    for version in (2, 3):
        written = api.patch(f"/api/tables/{table.pk}/", {"data": versions[version]}, format="json")
        assert (written.status_code, written.json()["version"]) == (200, version)
    url = f"/api/tables/{table.pk}"

    assert _text(json.loads(_cold(lambda: api.get(f"{url}/")))["data"]) == _text(versions[3])
    for version, data in versions.items():
        assert _cold(lambda version=version: api.get(f"{url}/versions/{version}/")) == _text(
            {"version": version, "data": data}
        )

    restored = json.loads(_cold(lambda: api.post(f"{url}/restore/", {"version": 1}, format="json")))
    assert (restored["version"], _text(restored["data"])) == (4, _text(versions[1]))
    assert _text(json.loads(_cold(lambda: api.get(f"{url}/")))["data"]) == _text(versions[1])
    assert _cold(lambda: api.get(f"{url}/versions/2/")) == _text({"version": 2, "data": versions[2]})
    again = json.loads(_cold(lambda: api.post(f"{url}/restore/", {"version": 2}, format="json")))
    assert (again["version"], _text(again["data"])) == (5, _text(versions[2]))
    assert _text(services.table_version_data(table.pk, 5)) == _text(versions[2])


def test_an_entry_s_patch_and_inverse_keep_the_written_key_order(make_table, owner):
    table = make_table(owner, name="ordered", data=copy.deepcopy(VERSIONS[1]["items"]), storage="document")
    api = client_for(owner)
    assert api.patch(f"/api/tables/{table.pk}/", {"data": VERSIONS[2]["items"]}, format="json").status_code == 200
    patch = json.loads(_cold(lambda: api.get(f"/api/tables/{table.pk}/history/")))["results"][0]["patch"]
    stored = TableChange.objects.get(table=table, version=2)
    # Nothing in common worth a diff: the entry holds both documents whole.
    written = _text([{"op": "replace", "path": "", "value": VERSIONS[2]["items"]}])
    assert (_text(patch), _text(stored.patch)) == (written, written)
    assert _text(stored.inverse) == _text([{"op": "replace", "path": "", "value": VERSIONS[1]["items"]}])


def test_an_idempotent_repeat_answers_as_the_first_call_did(make_table, make_tool, owner):
    table = make_table(owner, name="ordered", data=[{"name": "a", "id": 1}])
    create = make_tool(owner, table=table, type="create", name="c", json_path="", metadata={"key_field": "id"})
    arguments = {"elements": [{"name": "b", "id": 2, "qty": 1}], "idempotency_key": "k1"}
    api = client_for(owner)
    first = _cold(lambda: api.post(f"/api/tools/{create.pk}/call/", {"arguments": arguments}, format="json"))
    repeat = _cold(lambda: api.post(f"/api/tools/{create.pk}/call/", {"arguments": arguments}, format="json"))
    assert repeat == first
    entry = TableChange.objects.get(table=table, version=2)
    assert _text(entry.arguments) == _text(arguments)
    assert Table.objects.get(pk=table.pk).version == 2
