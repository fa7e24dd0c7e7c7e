"""A rows table's data written whole (tools_app.execution.records.replace_data, through services.table_update): only the
changed records are written, one history entry of per-record operations, and every read, version and restore
answers as the same writes on the table stored as a document (a differential test), on SQLite and PostgreSQL."""

import copy
import json

import pytest
from django.test import override_settings

from tools_app import services
from tools_app.execution import records
from tools_app.kernel import json_patch
from tools_app.kernel.errors import ToolhubError
from tools_app.models import Table, TableChange, TableCollection, TableRecord, TableSnapshot, TableStorage
from tools_app.services import table_log
from tools_app.services.table_cache import table_cache
from tools_app.tests.execution.test_records import DOCUMENT, _answer, _calls, _tools, _writers


def _data(**changes):
    data = copy.deepcopy(DOCUMENT)
    data.update(changes)
    return data


def _orders(edit):
    data = copy.deepcopy(DOCUMENT)
    data["orders"] = edit(data["orders"])
    return data


MANY = [{"id": f"m{n}", "n": n} for n in range(1_100)]

# Whole-data writes, in order, each starting from DOCUMENT's shape (the same collections: /orders an array, /catalog
# an object); each comment says what the diff must do.
REPLACES = [
    # one field of one record, and the settings (a document operation)
    _data(orders=[{**DOCUMENT["orders"][0], "status": "shipped"}, *DOCUMENT["orders"][1:]], settings={"currency": "$"}),
    # a record inserted in the middle, one removed, two swapped
    _orders(lambda o: [o[0], {"id": 11, "new": True}, o[3], o[2], *o[5:]]),
    # records prepended before position 0 (no room: the first record moves too), unkeyed ones changed
    _orders(lambda o: [{"id": "p1"}, {"id": "p2"}, *o[:6], {"customer": "no key", "status": "old"}, *o[7:]]),
    # more records between two neighbours than their gap holds
    _orders(lambda o: [o[0], *MANY, *o[1:]]),
    # duplicate keys, a repeated unkeyed record, kinds changed, a key field changed
    _orders(lambda o: [o[1], o[1], {"id": 2, "x": 1}, "not a record", "not a record", {"id": 1.0}, 7, None, o[0]]),
    # the object collection: a member added, one removed, members reordered, one changed; keys of a record reordered
    _data(catalog={"MS": {"a": 0, "b": 1, "name": "Mouse", "price": 44.5, "stock": 31}, "": 1, "KB": {}, "NX": []}),
    # outside the collections: a new member, another changed
    _data(tags=[3, 2, 1], extra={"deep": [1, {"x": None}]}),
    # everything emptied
    _data(orders=[], catalog={}),
    # back to the start
    copy.deepcopy(DOCUMENT),
]


@pytest.fixture
def replaced(make_table, make_tool, owner):
    """The same table as a document and as rows, with all read tools over both."""
    document = make_table(owner, name="as document", data=DOCUMENT, storage="document")
    rows = make_table(owner, name="as rows", data=DOCUMENT, storage="document")
    document_tools = _tools(make_tool, owner, document, "d")
    rows_tools = _tools(make_tool, owner, rows, "r")
    assert records.table_to_rows(rows.pk) is True
    # Both start from the stored snapshot, as another process reads them, not from a copy cached at creation.
    table_cache.discard(document.pk)
    table_cache.discard(rows.pk)
    return document_tools, rows_tools, document, rows


def _reads(tools):
    return [_answer(tools[(mount, kind)], arguments) for mount, kind, arguments in _calls()]


def _whole(table):
    return table_log.table_data(table.pk)


def _rows_state(table):
    """Each collection's (count, [(position, key)]) by mount: what is stored."""
    state = {}
    for collection in TableCollection.objects.filter(table=table).order_by("mount"):
        rows = TableRecord.objects.filter(collection=collection).order_by("position")
        state[collection.mount] = (collection.record_count, list(rows.values_list("position", "key")))
    return state


def test_whole_data_writes_on_a_rows_table_answer_version_and_restore_as_on_the_document(replaced):
    document_tools, rows_tools, document, rows = replaced
    versions = {1: _whole(document)[1]}
    for number, data in enumerate(REPLACES, start=2):
        services.table_update(table=Table.objects.get(pk=document.pk), data=copy.deepcopy(data))
        services.table_update(table=Table.objects.get(pk=rows.pk), data=copy.deepcopy(data))
        assert _whole(rows) == _whole(document) == (number, data)
        assert _reads(rows_tools) == _reads(document_tools), number
        state = _rows_state(rows)
        assert state["/orders"][0] == len(data["orders"]) == len(state["/orders"][1])
        assert state["/catalog"][0] == len(data["catalog"]) == len(state["/catalog"][1])
        # The document part follows through the log (a cached copy from before the move may still hold records).
        held = table_log.table_document(rows.pk, number)
        assert {**held, "orders": [], "catalog": {}} == {**data, "orders": [], "catalog": {}}
        versions[number] = data
    # The same data again is no data write.
    services.table_update(table=Table.objects.get(pk=rows.pk), data=DOCUMENT)
    last = len(REPLACES) + 1
    assert Table.objects.get(pk=rows.pk).version == last
    assert TableChange.objects.filter(table=rows).count() == last - 1
    rows.refresh_from_db()
    assert (rows.storage, rows.rows_since_version) == (TableStorage.ROWS, 1)
    # Every version opens to the same document on both.
    for version, data in versions.items():
        assert table_log.table_version_data(rows.pk, version) == table_log.table_version_data(document.pk, version)
        assert table_log.table_version_data(rows.pk, version) == data
    # Restores to every version, in a scrambled order, give the same data and reads on both.
    for version in (5, 1, 3, 9, 2, 10, 4, 7):
        made = services.table_restore(table_id=document.pk, version=version)
        assert services.table_restore(table_id=rows.pk, version=version) == made
        assert _whole(rows) == _whole(document) == (made, versions[version])
        assert _reads(rows_tools) == _reads(document_tools), version
        assert {mount: count for mount, (count, _) in _rows_state(rows).items()} == {
            "/orders": len(versions[version]["orders"]),
            "/catalog": len(versions[version]["catalog"]),
        }


def test_a_restore_holds_each_changed_record_once_and_back_and_forth_keeps_its_size(replaced):
    """A restore's entry holds the net change between the two versions (each changed record once, the document's
    diff), not the entries it crosses: restoring back and forth gives entries of one size, on both storages, and
    every version still opens to its document."""
    _document_tools, _rows_tools, document, rows = replaced
    grown = _orders(lambda o: [o[0], *MANY[:100], *o[1:]])
    changed = copy.deepcopy(grown)
    changed["orders"][0]["status"] = "shipped"
    changed["settings"]["currency"] = "$"
    for data in (grown, changed):
        for table in (document, rows):
            services.table_update(table=Table.objects.get(pk=table.pk), data=copy.deepcopy(data))
    versions = {version: table_log.table_version_data(rows.pk, version) for version in (1, 2, 3)}
    assert versions[3] == _whole(document)[1] == changed
    collection = TableCollection.objects.get(table=rows, mount="/orders").pk
    added = TableChange.objects.get(table=rows, version=2).patch
    assert len(added) == 100
    assert {(operation["op"], operation["collection"]) for operation in added} == {("add", collection)}
    third = TableChange.objects.get(table=rows, version=3)
    first_order = versions[1]["orders"][0]
    assert third.patch == [
        {"op": "replace", "path": "/settings/currency", "value": "$"},
        {"op": "replace", "collection": collection, "position": 0, "value": changed["orders"][0]},
    ]
    assert third.inverse == [
        {"op": "replace", "collection": collection, "position": 0, "value": first_order},
        {"op": "replace", "path": "/settings/currency", "value": "EUR"},
    ]
    # To version 1: the 100 added records removed and the changed one put back, once each, and the settings.
    back = [
        {"op": "replace", "path": "/settings/currency", "value": "EUR"},
        *({"op": "remove", "collection": collection, "position": operation["position"]} for operation in added),
        {"op": "replace", "collection": collection, "position": 0, "value": first_order},
    ]
    # Back again: each operation undone, newest first.
    forth = [third.patch[1], *reversed(added), third.patch[0]]
    expected = {
        1: (back, forth),
        3: ([third.patch[0], *added, third.patch[1]], [third.inverse[0], *reversed(back[1:-1]), third.inverse[1]]),
    }
    size = len(json.dumps(back)) + len(json.dumps(forth))
    for round_ in range(3):
        for target in (1, 3):
            made = services.table_restore(table_id=document.pk, version=target)
            assert services.table_restore(table_id=rows.pk, version=target) == made
            assert _whole(rows) == _whole(document) == (made, versions[target])
            entry = TableChange.objects.get(table=rows, version=made)
            assert (entry.patch, entry.inverse) == expected[target], (round_, target)
            assert sum("collection" in operation for operation in entry.patch) == 101, (round_, target)
            assert entry.bytes == size, (round_, target)
            versions[made] = versions[target]
    assert _rows_state(rows)["/orders"][0] == len(changed["orders"]) == 110
    # The document table's restores hold the diff of the two documents: the same size at every round too.
    diffs = [json_patch.diff(versions[4 - target], versions[target], keys=("id",), ordered=True) for target in (1, 3)]
    sizes = [len(json.dumps(patch)) + len(json.dumps(inverse)) for patch, inverse in diffs]
    restores = TableChange.objects.filter(table=document, version__gt=3).order_by("version")
    assert list(restores.values_list("bytes", flat=True)) == sizes * 3
    for version, data in versions.items():
        assert table_log.table_version_data(rows.pk, version) == data, version
        assert table_log.table_version_data(document.pk, version) == data, version


def test_a_whole_data_write_touches_only_the_changed_rows_in_one_entry(replaced):
    _document_tools, rows_tools, _document, rows = replaced
    before = _rows_state(rows)["/orders"][1]
    stored = _whole(rows)[1]  # as stored (on PostgreSQL, the snapshot's jsonb normalised the document)
    orders = copy.deepcopy(stored["orders"])
    orders[1]["status"] = "returned"
    del orders[4]
    orders.insert(2, {"id": 12, "customer": "Barbara"})
    data = {**copy.deepcopy(stored), "orders": orders, "settings": {"currency": "EUR", "vat": 0.2}}
    ids_before = dict(TableRecord.objects.filter(collection__table=rows).values_list("position", "id"))
    services.table_update(table=Table.objects.get(pk=rows.pk), data=data)
    entry = TableChange.objects.get(table=rows, version=2)
    collection = TableCollection.objects.get(table=rows, mount="/orders").pk
    assert entry.patch == [
        {"op": "add", "path": "/settings/vat", "value": 0.2},
        {"op": "remove", "collection": collection, "position": 4096},
        {
            "op": "add",
            "collection": collection,
            "position": 1536,
            "key": "12",
            "value": {"id": 12, "customer": "Barbara"},
        },
        {"op": "replace", "collection": collection, "position": 1024, "value": orders[1]},
    ]
    assert entry.inverse == [
        {"op": "replace", "collection": collection, "position": 1024, "value": stored["orders"][1]},
        {"op": "remove", "collection": collection, "position": 1536},
        {"op": "add", "collection": collection, "position": 4096, "key": "5", "value": stored["orders"][4]},
        {"op": "remove", "path": "/settings/vat"},
    ]
    after = _rows_state(rows)["/orders"][1]
    assert after == [*before[:2], (1536, "12"), *before[2:4], *before[5:]]
    # Rows that did not change were not rewritten: the same row ids at the same positions.
    ids_after = dict(TableRecord.objects.filter(collection__table=rows).values_list("position", "id"))
    unchanged = {position for position, _key in before} - {1024, 4096}
    assert {p: ids_after[p] for p in unchanged} == {p: ids_before[p] for p in unchanged}
    assert _answer(rows_tools[("/orders", "select")], {"keys": [12]}) == (
        "ok",
        {"items": [{"id": 12, "customer": "Barbara"}], "not_found": []},
    )


def test_a_whole_data_write_over_the_rows_limits_writes_nothing(replaced, settings):
    _document_tools, _rows_tools, _document, rows = replaced
    state = _rows_state(rows)
    settings.TOOLHUB_MAX_RECORD_BYTES = 100
    big = _orders(lambda o: [*o, {"id": 50, "text": "x" * 200}])
    with pytest.raises(ToolhubError) as refused:
        services.table_update(table=Table.objects.get(pk=rows.pk), data=big)
    assert refused.value.code == "VALIDATION_ERROR"
    assert "TOOLHUB_MAX_RECORD_BYTES" in refused.value.message
    assert "'/orders'" in refused.value.message
    settings.TOOLHUB_MAX_RECORD_BYTES = 1 << 20
    settings.TOOLHUB_MAX_TABLE_RECORDS = 15
    more = _orders(lambda o: [*o, {"id": 50}, {"id": 51}])
    with pytest.raises(ToolhubError, match="TOOLHUB_MAX_TABLE_RECORDS") as refused:
        services.table_update(table=Table.objects.get(pk=rows.pk), data=more)
    assert refused.value.code == "VALIDATION_ERROR"
    settings.TOOLHUB_MAX_TABLE_RECORDS = 10**6
    settings.TOOLHUB_MAX_ROWS_TABLE_BYTES = 1000
    with pytest.raises(ToolhubError, match="TOOLHUB_MAX_ROWS_TABLE_BYTES"):
        services.table_update(table=Table.objects.get(pk=rows.pk), data=_data(tags=[0]))
    with pytest.raises(ToolhubError) as conflict:
        services.table_update(table=Table.objects.get(pk=rows.pk), data=_data(tags=[0]), expected_version=3)
    assert conflict.value.code == "PRECONDITION_FAILED"
    rows.refresh_from_db()
    assert rows.version == 1
    assert not TableChange.objects.filter(table=rows).exists()
    assert _rows_state(rows) == state
    assert _whole(rows) == (1, DOCUMENT)


def test_a_whole_data_write_that_changes_the_collections_lays_the_table_out_again(replaced):
    document_tools, rows_tools, document, rows = replaced
    data = _data(orders={"a": {"id": 1}, "b": {"id": 2}}, catalog=[1, 2])
    for table in (document, rows):
        services.table_update(table=Table.objects.get(pk=table.pk), data=copy.deepcopy(data))
    assert _whole(rows) == _whole(document) == (2, data)
    assert _reads(rows_tools) == _reads(document_tools)
    rows.refresh_from_db()
    assert (rows.version, rows.rows_since_version) == (2, 2)
    # /orders is an object now, which a tool mounts below (/orders/0/items): it holds collections by name (none),
    # so its records are in the document.
    kinds = dict(TableCollection.objects.filter(table=rows).values_list("mount", "kind"))
    assert kinds == {"/catalog": "array"}
    entry = TableChange.objects.get(table=rows, version=2)
    assert entry.patch == [{"op": "replace", "path": "", "value": {**data, "catalog": []}, "layout": True}]
    # Its inverse keeps the old layout's records: the version before it opens and restores as on the document.
    assert services.table_version_data(rows.pk, 1) == services.table_version_data(document.pk, 1)
    for table in (document, rows):
        services.table_update(table=Table.objects.get(pk=table.pk), data=_data(orders={"a": {"id": 3}}, catalog=[2]))
        assert services.table_restore(table_id=table.pk, version=1) == 4
    assert _whole(rows) == _whole(document) == (4, _whole(document)[1])
    assert _reads(rows_tools) == _reads(document_tools)
    rows.refresh_from_db()
    assert rows.rows_since_version == 4  # laid out again: /orders and /catalog as at version 1
    kinds = dict(TableCollection.objects.filter(table=rows).values_list("mount", "kind"))
    assert kinds == {"/orders": "array", "/catalog": "object"}
    for table in (document, rows):
        assert services.table_restore(table_id=table.pk, version=2) == 5
    assert _whole(rows) == _whole(document) == (5, data)
    assert [services.table_version_data(rows.pk, v) for v in range(1, 6)] == [
        services.table_version_data(document.pk, v) for v in range(1, 6)
    ]


def test_a_rows_write_between_whole_data_writes_keeps_history_whole(replaced, make_tool, owner):
    document_tools, rows_tools, document, rows = replaced
    writers = {"d": _writers(make_tool, owner, document, "dw"), "r": _writers(make_tool, owner, rows, "rw")}
    for prefix, table in (("d", document), ("r", rows)):
        services.table_update(table=Table.objects.get(pk=table.pk), data=REPLACES[1])
        _answer(writers[prefix][("/orders", "create")], {"elements": [{"id": 30}]})
        _answer(writers[prefix][("/orders", "update")], {"elements": [{"id": 11, "new": False}]})
        services.table_update(table=Table.objects.get(pk=table.pk), data=REPLACES[2])
    assert _whole(rows) == _whole(document)
    assert _whole(rows)[0] == 5
    for version in (4, 3, 2, 1):
        assert table_log.table_version_data(rows.pk, version) == table_log.table_version_data(document.pk, version)
    assert services.table_restore(table_id=rows.pk, version=3) == services.table_restore(
        table_id=document.pk, version=3
    )
    assert _whole(rows) == _whole(document)
    assert _reads(rows_tools) == _reads(document_tools)


def test_positions_keep_their_order_when_gaps_run_out():
    """_placed: kept records keep their positions, new ones fall strictly between their neighbours; a gap too
    narrow moves the next kept record too."""
    old = [0, 1, 2, 1024]
    matched = [None, 0, None, None, 1, 2, 3]
    kept = records._increasing(matched)
    assert kept == {1, 4, 5, 6}
    positions = records._placed(old, matched, kept)
    assert positions == sorted(positions)
    assert len(set(positions)) == len(positions)
    assert positions[6] == 1024
    # No room before position 0, nor for four records below 1, nor five below 2: those kept records move too.
    assert kept == {6}
    assert positions == [145, 291, 437, 583, 729, 875, 1024]
    assert records._spots(None, None, 3) == [0, 1024, 2048]
    assert records._spots(5, 6, 1) is None
    assert json.dumps(records._spots(-1, 3, 3)) == "[0, 1, 2]"


@override_settings(TOOLHUB_NEW_TABLE_STORAGE="rows")
def test_new_tables_start_as_rows_when_their_data_holds_a_collection(owner):
    table = services.table_create(owner=owner, name="new", data=[{"sku": "a"}, {"sku": "b"}])
    table.refresh_from_db()
    assert (table.storage, table.rows_since_version, table.version) == (TableStorage.ROWS, 1, 1)
    assert list(TableCollection.objects.filter(table=table).values_list("mount", "kind", "key_field")) == [
        ("", "array", "sku")
    ]
    assert TableSnapshot.objects.get(table=table).data == []
    assert _whole(table) == (1, [{"sku": "a"}, {"sku": "b"}])
    scalar = services.table_create(owner=owner, name="scalar", data=3)
    scalar.refresh_from_db()
    assert scalar.storage == TableStorage.DOCUMENT
    with override_settings(TOOLHUB_NEW_TABLE_STORAGE="document"):
        plain = services.table_create(owner=owner, name="plain", data=[{"id": 1}])
    assert Table.objects.get(pk=plain.pk).storage == TableStorage.DOCUMENT


def _reversed(value):
    """`value` with every object's members in reverse order, at every depth (records and the document alike)."""
    if isinstance(value, dict):
        return {key: _reversed(value[key]) for key in reversed(value)}
    if isinstance(value, list):
        return [_reversed(item) for item in value]
    return value


def _changed(value):
    """`value` with every string and number changed (a key field too), in the same order: a whole-data write of it
    has nothing in common with `value`, so a document table takes it whole, in its own key order."""
    if isinstance(value, dict):
        return {key: _changed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_changed(item) for item in value]
    if isinstance(value, str):
        return f"{value}!"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value + 1
    return value


def _text(value) -> str:
    """JSON text, which tells key orders apart (dict equality does not)."""
    return json.dumps(value, ensure_ascii=False)


# Whole-data writes from version 1 (DOCUMENT): each of the first two has nothing in common with the one before it, so
# it is taken whole, with the document's members and each record's in reverse order; the third changes one member
# of the reversed document, which keeps its order. Version 3 holds version 1's values in another order.
REORDERING = [_reversed(_changed(DOCUMENT)), _reversed(DOCUMENT), {**_reversed(DOCUMENT), "tags": [9]}]


def _cold_text(read, *arguments):
    """The JSON text of `read(*arguments)` with this process's table cache empty: read from the database (snapshot,
    log, rows), not from what a write left in the cache."""
    table_cache.clear()
    return _text(read(*arguments))


def test_a_whole_data_write_that_reorders_keys_opens_and_restores_in_its_order_on_both_storages(replaced):
    document_tools, rows_tools, document, rows = replaced
    for data in REORDERING:
        for table in (document, rows):
            services.table_update(table=Table.objects.get(pk=table.pk), data=copy.deepcopy(data))
    entry = TableChange.objects.get(table=document, version=2)
    assert entry.patch == [{"op": "replace", "path": "", "value": REORDERING[0]}]
    written = {1: _text(DOCUMENT), **{version: _text(data) for version, data in enumerate(REORDERING, start=2)}}
    for version, text in written.items():
        for table in (document, rows):
            assert _cold_text(table_log.table_version_data, table.pk, version) == text, version
    for table in (document, rows):
        assert _cold_text(_whole, table) == _text([4, REORDERING[2]])
    for version in (1, 2, 3, 1, 4, 2, 3):
        made = services.table_restore(table_id=document.pk, version=version)
        assert services.table_restore(table_id=rows.pk, version=version) == made
        for table in (document, rows):
            assert _text(_whole(table)) == _text([made, json.loads(written[version])]), (version, table.name)
            assert _cold_text(_whole, table) == _text([made, json.loads(written[version])])
        assert _reads(rows_tools) == _reads(document_tools), version
        written[made] = written[version]
    for version, text in written.items():
        assert _cold_text(table_log.table_version_data, rows.pk, version) == text, version


def test_a_restore_to_a_version_before_the_move_to_rows_writes_its_key_order(make_table, make_tool, owner):
    """A table moved to rows after key-reordering writes, restored to versions from before the move (written as a
    whole-data write writes them, through the rows), answers each in its own key order, as the table stored as a
    document does."""
    document = make_table(owner, name="as document", data=DOCUMENT, storage="document")
    moved = make_table(owner, name="moved", data=DOCUMENT, storage="document")
    document_tools = _tools(make_tool, owner, document, "d")
    moved_tools = _tools(make_tool, owner, moved, "m")
    for data in REORDERING[:2]:
        for table in (document, moved):
            services.table_update(table=Table.objects.get(pk=table.pk), data=copy.deepcopy(data))
    table_cache.clear()
    assert records.table_to_rows(moved.pk) is True
    for table in (document, moved):
        services.table_update(table=Table.objects.get(pk=table.pk), data=copy.deepcopy(REORDERING[2]))
    moved.refresh_from_db()
    assert (moved.storage, moved.rows_since_version, moved.version) == (TableStorage.ROWS, 3, 4)
    written = {1: _text(DOCUMENT), **{version: _text(data) for version, data in enumerate(REORDERING, start=2)}}
    # Version 1 holds the current values but for `tags`, in another order: restored, it is written in its own.
    for version in (1, 3, 2, 1, 4):
        made = services.table_restore(table_id=document.pk, version=version)
        assert services.table_restore(table_id=moved.pk, version=version) == made
        for table in (document, moved):
            assert _cold_text(_whole, table) == _text([made, json.loads(written[version])])
        assert _reads(moved_tools) == _reads(document_tools), version
        written[made] = written[version]
    for version, text in written.items():
        for table in (document, moved):
            assert _cold_text(table_log.table_version_data, table.pk, version) == text, version
