"""What history stores and how much of it is kept (docs/history.md, "Storage cost per write" and "Quotas"):
minimal diffs for whole-document writes and updates, history bounded per table and per owner by compacting the
oldest entries, and the owner's data quota (QUOTA_EXCEEDED)."""

import copy
import json
import random

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db.models import Sum
from django.urls import reverse

from mcp_app.tests.mcp_harness import Harness
from tests.api_helpers import client_for, db_snapshot
from tools_app import services
from tools_app.execution.pipeline import Caller, run_tool_call, target_of_tool
from tools_app.kernel import json_patch
from tools_app.models import Surface, Table, TableChange, TableSnapshot
from tools_app.services import table_log
from tools_app.services.table_cache import table_cache

# What a document table's history stores (RFC 6902 patches of its document, compacted into its snapshot);
# a rows table's per-record entries: tools_app/tests/execution/test_records.py.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("document_storage")]


def _records(count: int) -> list[dict]:
    return [
        {"id": n, "customer": f"customer-{n % 97}", "status": "new", "note": "n" * 250} for n in range(1, count + 1)
    ]


def _entry_bytes(table_id: int) -> list[int]:
    return list(TableChange.objects.filter(table_id=table_id).order_by("version").values_list("bytes", flat=True))


def _history_bytes(table_id: int) -> int:
    return Table.objects.values_list("history_bytes", flat=True).get(pk=table_id)


def _call(user, tool, arguments: dict):
    caller = Caller(surface=Surface.ADMIN, user_id=user.pk, user=user)
    return run_tool_call(caller=caller, target=target_of_tool(tool), name=tool.name, arguments=arguments)


#
# json_patch.diff
#


def _random_value(rng: random.Random, depth: int = 0):
    roll = rng.random()
    if depth > 3 or roll < 0.4:
        return rng.choice([1, 1.0, True, False, None, "a", "1", 0, 0.0, 2])
    if roll < 0.6:
        return {rng.choice("abcde"): _random_value(rng, depth + 1) for _ in range(rng.randrange(4))}
    if roll < 0.8:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(5))]
    return [{"id": key, "v": _random_value(rng, depth + 1)} for key in rng.sample(range(20), rng.randrange(6))]


def _mutated(rng: random.Random, value, depth: int = 0):
    value = copy.deepcopy(value)
    if isinstance(value, dict) and value and rng.random() < 0.7:
        key = rng.choice(list(value))
        roll = rng.random()
        if roll < 0.3:
            del value[key]
        elif roll < 0.6:
            value[key] = _mutated(rng, value[key], depth + 1)
        else:
            value[rng.choice("abcdef")] = _random_value(rng, depth + 1)
        return value
    if isinstance(value, list) and rng.random() < 0.8:
        for _ in range(rng.randrange(1, 3)):
            roll = rng.random()
            if roll < 0.3 and value:
                del value[rng.randrange(len(value))]
            elif roll < 0.6:
                value.insert(rng.randrange(len(value) + 1), {"id": rng.randrange(30), "v": _random_value(rng)})
            elif value:
                position = rng.randrange(len(value))
                value[position] = _mutated(rng, value[position], depth + 1)
        return value
    return _random_value(rng, depth)


def _as_json(value) -> str:
    return json.dumps(value, sort_keys=True)


def test_diff_patch_and_inverse_are_exact_on_random_documents():
    """apply(old, patch) is new and apply(new, inverse) is old, as JSON (1, 1.0 and true differ), on 3,000 random
    pairs of documents with objects, arrays, keyed records and scalars of every kind."""
    rng = random.Random(26)
    for _ in range(3000):
        old = _random_value(rng)
        new = _mutated(rng, old) if rng.random() < 0.8 else _random_value(rng)
        patch, inverse = json_patch.diff(old, new)
        assert _as_json(json_patch.apply(old, patch)) == _as_json(new), (old, new, patch)
        assert _as_json(json_patch.apply(new, inverse)) == _as_json(old), (old, new, inverse)


def _reordered(rng: random.Random, value):
    """`value` with the members of some of its objects in another order."""
    if isinstance(value, dict):
        keys = list(value)
        if rng.random() < 0.3:
            rng.shuffle(keys)
        return {key: _reordered(rng, value[key]) for key in keys}
    if isinstance(value, list):
        return [_reordered(rng, item) for item in value]
    return value


def test_an_ordered_diff_keeps_the_members_order_both_ways_on_random_documents():
    """With `ordered`, apply(old, patch) is new and apply(new, inverse) is old down to each object's members'
    order (what a restore answers), on 3,000 random pairs with members reordered, added and removed; without it,
    a reordered object is no change."""
    rng = random.Random(29)
    for _ in range(3000):
        old = _random_value(rng)
        new = _reordered(rng, _mutated(rng, old) if rng.random() < 0.8 else _random_value(rng))
        patch, inverse = json_patch.diff(old, new, ordered=True)
        assert json.dumps(json_patch.apply(old, patch)) == json.dumps(new), (old, new, patch)
        assert json.dumps(json_patch.apply(new, inverse)) == json.dumps(old), (old, new, inverse)
    old = {"a": 1, "b": {"x": 1, "y": 2}, "c": 3}
    assert json_patch.diff(old, {"a": 1, "b": {"y": 2, "x": 1}, "c": 3}) == ([], [])
    assert json_patch.diff(old, {"a": 1, "b": {"y": 2, "x": 1}, "c": 3}, ordered=True) == (
        [{"op": "replace", "path": "/b", "value": {"y": 2, "x": 1}}],
        [{"op": "replace", "path": "/b", "value": {"x": 1, "y": 2}}],
    )
    # Members removed and added after the shared ones: member by member, the inverse adding them back in order.
    assert json_patch.diff(old, {"a": 1, "d": 4}, ordered=True) == (
        [{"op": "remove", "path": "/c"}, {"op": "remove", "path": "/b"}, {"op": "add", "path": "/d", "value": 4}],
        [
            {"op": "remove", "path": "/d"},
            {"op": "add", "path": "/b", "value": {"x": 1, "y": 2}},
            {"op": "add", "path": "/c", "value": 3},
        ],
    )


def test_diff_of_keyed_records_is_by_record_not_by_index():
    """A record inserted at the front, one removed and one field changed: three operations, not a shift of every
    later record."""
    old = [{"id": n, "status": "new"} for n in range(1, 1001)]
    new = [{"id": 0, "status": "new"}] + [dict(record) for record in old]
    del new[501]  # id 501
    new[-1]["status"] = "paid"  # id 1000
    patch, inverse = json_patch.diff(old, new)
    assert patch == [
        {"op": "add", "path": "/0", "value": {"id": 0, "status": "new"}},
        {"op": "remove", "path": "/501"},
        {"op": "replace", "path": "/999/status", "value": "paid"},
    ]
    assert inverse == [
        {"op": "replace", "path": "/999/status", "value": "new"},
        {"op": "add", "path": "/501", "value": {"id": 501, "status": "new"}},
        {"op": "remove", "path": "/0"},
    ]


def test_diff_tells_json_types_apart():
    assert json_patch.diff({"a": [1]}, {"a": [True]}) == (
        [{"op": "replace", "path": "/a/0", "value": True}],
        [{"op": "replace", "path": "/a/0", "value": 1}],
    )
    assert json_patch.diff({"a": 1.0}, {"a": 1}) == (
        [{"op": "replace", "path": "/a", "value": 1}],
        [{"op": "replace", "path": "/a", "value": 1.0}],
    )


#
# What a write stores
#


def test_whole_document_patch_stores_the_change_not_the_document(owner, make_table):
    """PATCH of `data` changing 1 KB of a ~0.6 MB table: an entry of under 10 KB holding the change and its inverse;
    the snapshot stays; the version before can still be opened and restored."""
    # given
    records = _records(2000)
    table = make_table(owner, name="orders", data=records)
    document = copy.deepcopy(records)
    document[1234]["note"] = "x" * 1000
    client = client_for(owner)
    # when
    response = client.patch(f"/api/tables/{table.pk}/", {"data": document}, format="json", HTTP_IF_MATCH='"1"')
    # then
    assert (response.status_code, response["ETag"]) == (200, '"2"')
    entry = TableChange.objects.get(table=table)
    assert entry.patch == [{"op": "replace", "path": "/1234/note", "value": "x" * 1000}]
    assert entry.inverse == [{"op": "replace", "path": "/1234/note", "value": "n" * 250}]
    assert entry.bytes == len(json.dumps(entry.patch)) + len(json.dumps(entry.inverse)) == 1358
    assert _history_bytes(table.pk) == 1358
    assert TableSnapshot.objects.values_list("version", flat=True).get(table=table) == 1
    table_cache.clear()
    assert services.table_data(table.pk) == (2, document)
    assert client.get(f"/api/tables/{table.pk}/versions/1/").json()["data"] == records
    restored = client.post(f"/api/tables/{table.pk}/restore/", {"version": 1}, format="json")
    assert (restored.status_code, restored.json()["version"], restored.json()["data"]) == (200, 3, records)


def test_whole_document_write_with_nothing_in_common_stores_both_documents(owner, make_table):
    """When the diff would be larger than the new document, the entry holds the two documents (root replace) and
    the new document is the snapshot, as before."""
    table = make_table(owner, name="small", data=[{"id": 1, "status": "new"}])
    services.table_update(table=table, data={"other": True})
    entry = TableChange.objects.get(table=table)
    assert (entry.patch, entry.inverse) == (
        [{"op": "replace", "path": "", "value": {"other": True}}],
        [{"op": "replace", "path": "", "value": [{"id": 1, "status": "new"}]}],
    )
    assert TableSnapshot.objects.values_list("version", "data").get(table=table) == (2, {"other": True})


def test_whole_document_diff_matches_records_by_the_tools_key_field(owner, make_table, make_tool):
    """Records keyed by a tool's key_field (not `id`): a record inserted at the front is one `add`."""
    records = [{"sku": f"S{n}", "qty": n} for n in range(1, 200)]
    table = make_table(owner, name="stock", data=records)
    make_tool(owner, table, type="select", name="stock_select", metadata={"key_field": "sku"})
    services.table_update(table=table, data=[{"sku": "S0", "qty": 0}, *records])
    assert TableChange.objects.get(table=table).patch == [{"op": "add", "path": "/0", "value": {"sku": "S0", "qty": 0}}]


def test_update_stores_the_changed_fields_not_the_record(owner, make_table, make_tool):
    """An update of one field of a record holding a 100 KB field stores that field, and its old value."""
    table = make_table(owner, name="blobs", data=[{"id": 1, "status": "new", "blob": "b" * 100_000}])
    tool = make_tool(owner, table, type="update", name="blobs_update")
    assert _call(owner, tool, {"elements": [{"id": 1, "status": "paid"}]}).ok
    entry = TableChange.objects.get(table=table)
    assert (entry.patch, entry.inverse) == (
        [{"op": "replace", "path": "/0/status", "value": "paid"}],
        [{"op": "replace", "path": "/0/status", "value": "new"}],
    )
    assert entry.bytes < 200


def test_large_arguments_are_kept_as_their_size(owner, make_table, make_tool, settings):
    """Arguments over TOOLHUB_HISTORY_MAX_ARGUMENTS_BYTES: each long value is kept as {"omitted_bytes": n}."""
    settings.TOOLHUB_HISTORY_MAX_ARGUMENTS_BYTES = 1000
    table = make_table(owner, name="blobs", data=[{"id": 1, "blob": "a"}])
    tool = make_tool(owner, table, type="update", name="blobs_update")
    elements = [{"id": 1, "blob": "c" * 5000}]
    assert _call(owner, tool, {"elements": elements, "idempotency_key": "k1"}).ok
    entry = TableChange.objects.get(table=table)
    assert entry.arguments == {"elements": {"omitted_bytes": len(json.dumps(elements))}, "idempotency_key": "k1"}
    assert entry.patch == [{"op": "replace", "path": "/0/blob", "value": "c" * 5000}]
    assert _call(owner, tool, {"elements": elements, "idempotency_key": "k1"}).ok  # still answered from the entry
    assert TableChange.objects.filter(table=table).count() == 1


#
# History quotas: compaction, never a refusal
#


def test_table_history_over_its_bound_compacts_the_oldest_entries(
    owner, make_table, make_tool, settings, django_capture_on_commit_callbacks
):
    """Each update stores ~6 KB (new text, old text, arguments); with a 13,000-byte bound the table keeps its two
    newest entries, contiguous, inside the 30 days / 1,000 versions too; the document and the kept versions stay
    exact."""
    settings.TOOLHUB_HISTORY_MAX_TABLE_BYTES = 13_000
    table = make_table(owner, name="notes", data=[{"id": 1, "text": ""}])
    tool = make_tool(owner, table, type="update", name="notes_update")
    texts = [f"{n}" * 2000 for n in range(1, 7)]
    # when
    for text in texts:
        with django_capture_on_commit_callbacks(execute=True):
            assert _call(owner, tool, {"elements": [{"id": 1, "text": text}]}).ok
    # then
    versions = list(TableChange.objects.filter(table=table).order_by("version").values_list("version", flat=True))
    assert versions == [6, 7]
    assert _history_bytes(table.pk) == sum(_entry_bytes(table.pk)) <= 13_000
    assert TableSnapshot.objects.values_list("version", "data").get(table=table) == (7, [{"id": 1, "text": texts[5]}])
    assert services.oldest_version(table.pk, 7) == 5
    assert services.table_version_data(table.pk, 5) == [{"id": 1, "text": texts[3]}]
    assert services.table_data(table.pk) == (7, [{"id": 1, "text": texts[5]}])
    with pytest.raises(TableChange.DoesNotExist):
        services.table_version_data(table.pk, 4)


def test_owner_history_over_its_quota_compacts_the_owners_oldest_entries_first(
    owner, other_user, make_table, settings, django_capture_on_commit_callbacks
):
    """Two tables written in turn: over TOOLHUB_HISTORY_MAX_OWNER_BYTES the oldest entries go first, whichever
    table holds them; another owner's history is not touched."""
    settings.TOOLHUB_HISTORY_MAX_OWNER_BYTES = 12_000
    first = make_table(owner, name="first", data={"text": ""})
    second = make_table(owner, name="second", data={"text": ""})
    others = make_table(other_user, name="others", data={"text": ""})
    services.table_update(table=others, data={"text": "o" * 20_000})
    # when
    for number in range(1, 4):
        for table in (first, second):
            with django_capture_on_commit_callbacks(execute=True):
                services.table_update(table=table, data={"text": f"{number}" * 1500})
    # then: six entries of ~3 KB: the oldest three went (first v2, second v2, first v3)
    kept = list(
        TableChange.objects.filter(table__owner=owner).order_by("at", "pk").values_list("table__name", "version")
    )
    assert kept == [("second", 3), ("first", 4), ("second", 4)]
    total = Table.objects.filter(owner=owner).aggregate(total=Sum("history_bytes"))["total"]
    assert total == sum(TableChange.objects.filter(table__owner=owner).values_list("bytes", flat=True)) <= 12_000
    assert list(TableChange.objects.filter(table=others).values_list("version", flat=True)) == [2]
    assert services.table_data(first.pk) == (4, {"text": "3" * 1500})
    assert services.table_data(second.pk) == (4, {"text": "3" * 1500})


def test_a_failing_history_compaction_never_fails_the_write(
    owner, make_table, make_tool, settings, monkeypatch, django_capture_on_commit_callbacks
):
    settings.TOOLHUB_HISTORY_MAX_TABLE_BYTES = 10

    def broken(table_id):
        raise RuntimeError("compaction down")

    monkeypatch.setattr(table_log, "history_enforce", broken)
    table = make_table(owner, name="t", data=[{"id": 1, "text": ""}])
    tool = make_tool(owner, table, type="update", name="t_update")
    with django_capture_on_commit_callbacks(execute=True):
        outcome = _call(owner, tool, {"elements": [{"id": 1, "text": "x" * 100}]})
    assert outcome.ok
    assert services.table_data(table.pk) == (2, [{"id": 1, "text": "x" * 100}])
    assert TableChange.objects.filter(table=table).count() == 1  # over the bound until a later write compacts


def test_history_bytes_count_every_entry_and_prune_takes_them_off(owner, make_table, make_tool, settings):
    settings.TOOLHUB_HISTORY_DAYS = 1
    settings.TOOLHUB_HISTORY_VERSIONS = 1
    table = make_table(owner, name="t", data=[{"id": 1, "n": 0}])
    tool = make_tool(owner, table, type="update", name="t_update")
    for number in range(1, 4):
        assert _call(owner, tool, {"elements": [{"id": 1, "n": number}]}).ok
    assert _history_bytes(table.pk) == sum(_entry_bytes(table.pk)) > 0
    TableChange.objects.filter(table=table).update(at=TableChange.objects.first().at.replace(year=2020))
    services.table_compact(table.pk, force=True)
    assert list(TableChange.objects.filter(table=table).values_list("version", flat=True)) == [4]
    assert _history_bytes(table.pk) == sum(_entry_bytes(table.pk))


#
# The owner's data quota: QUOTA_EXCEEDED, nothing written
#


@pytest.fixture
def data_quota(settings):
    settings.TOOLHUB_MAX_OWNER_DATA_BYTES = 2000
    return 2000


def test_creating_a_table_over_the_data_quota_is_refused(owner, make_table, data_quota):
    make_table(owner, name="kept", data={"text": "a" * 1500})
    before = db_snapshot()
    response = client_for(owner).post("/api/tables/", {"name": "more", "data": {"text": "b" * 600}}, format="json")
    assert response.status_code == 413
    body = response.json()
    assert body["error"] == "QUOTA_EXCEEDED"
    assert "TOOLHUB_MAX_OWNER_DATA_BYTES" in body["message"]
    assert body["details"] == {"quota": "TOOLHUB_MAX_OWNER_DATA_BYTES", "limit": 2000, "used": 1512, "requested": 2124}
    assert db_snapshot() == before


def test_importing_a_file_over_the_data_quota_is_refused(owner, make_table, data_quota):
    """The streamed import (CSV) stores its text without a parse, and still answers to the owner's quota."""
    make_table(owner, name="kept", data={"text": "a" * 1500})
    before = db_snapshot()
    upload = SimpleUploadedFile("more.csv", b"id,text\n" + b"".join(b"%d,%s\n" % (n, b"b" * 50) for n in range(20)))
    response = client_for(owner).post("/api/tables/import/", {"file": upload, "name": "more"}, format="multipart")
    assert response.status_code == 413
    body = response.json()
    assert (body["error"], body["details"]["quota"], body["details"]["used"]) == (
        "QUOTA_EXCEEDED",
        "TOOLHUB_MAX_OWNER_DATA_BYTES",
        1512,
    )
    assert db_snapshot() == before


def test_whole_document_write_over_the_data_quota_is_refused(owner, make_table, data_quota):
    table = make_table(owner, name="kept", data={"text": "a" * 1500})
    before = db_snapshot()
    response = client_for(owner).patch(f"/api/tables/{table.pk}/", {"data": {"text": "a" * 2500}}, format="json")
    assert (response.status_code, response.json()["error"]) == (413, "QUOTA_EXCEEDED")
    assert db_snapshot() == before
    smaller = client_for(owner).patch(f"/api/tables/{table.pk}/", {"data": {"text": "a"}}, format="json")
    assert (smaller.status_code, smaller.json()["version"]) == (200, 2)


def test_tool_write_over_the_data_quota_is_an_mcp_error(owner, make_table, make_tool, instance, bind, make_api_key):
    """Over MCP: an isError result naming QUOTA_EXCEEDED and the quota; nothing written. Shrinking still works."""
    table = make_table(owner, name="notes", data=[{"id": 1, "text": "a" * 100}])
    tool = make_tool(owner, table, type="create", name="notes_create")
    deleter = make_tool(owner, table, type="delete", name="notes_delete")
    bind(instance, tool)
    bind(instance, deleter)
    _, key = make_api_key(instance)
    from django.test import override_settings

    with override_settings(TOOLHUB_MAX_OWNER_DATA_BYTES=500):
        before = db_snapshot()
        result = Harness().call(instance.slug, key, "notes_create", {"elements": [{"id": 2, "text": "b" * 1000}]})[
            "result"
        ]
        assert result["isError"] is True
        assert result["content"][0]["text"].startswith("QUOTA_EXCEEDED: This write would bring your tables to ")
        assert "TOOLHUB_MAX_OWNER_DATA_BYTES" in result["content"][0]["text"]
        after = db_snapshot()
        assert after["tools_app.Table"] == before["tools_app.Table"]
        assert after["tools_app.TableChange"] == before["tools_app.TableChange"]
        shrink = Harness().call(instance.slug, key, "notes_delete", {"keys": [1]})["result"]
        assert shrink.get("isError") is not True
    assert services.table_data(table.pk) == (2, [])


def test_restore_over_the_data_quota_is_refused(owner, make_table, settings):
    table = make_table(owner, name="t", data={"text": "a" * 1500})
    services.table_update(table=table, data={"text": "a"})
    settings.TOOLHUB_MAX_OWNER_DATA_BYTES = 1000
    before = db_snapshot()
    response = client_for(owner).post(f"/api/tables/{table.pk}/restore/", {"version": 1}, format="json")
    assert (response.status_code, response.json()["error"]) == (413, "QUOTA_EXCEEDED")
    assert db_snapshot() == before


def test_admin_edit_over_the_data_quota_is_a_form_error(owner, owner_client, make_table, data_quota):
    table = make_table(owner, name="kept", data={"text": "a"})
    before = db_snapshot()
    response = owner_client.post(
        reverse("admin:tools_app_table_change", args=[table.pk]),
        {"name": "kept", "description": "", "data": json.dumps({"text": "z" * 3000})},
    )
    assert response.status_code == 200
    assert "QUOTA_EXCEEDED" in response.content.decode()
    assert db_snapshot() == before


def test_no_data_quota_when_set_to_zero(owner, make_table, settings):
    settings.TOOLHUB_MAX_OWNER_DATA_BYTES = 0
    table = make_table(owner, name="t", data={"text": "a"})
    services.table_update(table=table, data={"text": "a" * 5000})
    assert Table.objects.get(pk=table.pk).version == 2


def test_the_migration_measures_entries_written_before_it(owner, make_table, make_tool):
    """Entries written before the sizes were kept get them from migration 0017, and their tables the sum."""
    import importlib

    from django.apps import apps

    table = make_table(owner, name="t", data=[{"id": 1, "n": 0}])
    tool = make_tool(owner, table, type="update", name="t_update")
    for number in (1, 2):
        assert _call(owner, tool, {"elements": [{"id": 1, "n": number}]}).ok
    expected = _entry_bytes(table.pk)
    TableChange.objects.update(bytes=0)
    Table.objects.update(history_bytes=0)
    importlib.import_module("tools_app.migrations.0017_history_bytes").measure(apps, None)
    assert _entry_bytes(table.pk) == expected
    assert _history_bytes(table.pk) == sum(expected) > 0
