"""Tables stored as rows (tools_app.execution.records): moving a table, and every data tool answering exactly as
it does over the same table stored as a document (a differential test), on SQLite and PostgreSQL."""

import io
import time

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, connection

from tests.api_helpers import client_for, response_json
from tools_app import services
from tools_app.data_access import budget, operations
from tools_app.data_access.operations import Mount
from tools_app.execution import records
from tools_app.execution.executors import execute, write_at
from tools_app.kernel.errors import ToolError
from tools_app.models import Table, TableChange, TableCollection, TableRecord, TableSnapshot, TableStorage

# The subject here is the move of a document table (records.table_to_rows, `manage.py tables_to_rows`: the path of
# a database made before rows storage) and the document the moved table must answer as: its tables start as
# documents.
pytestmark = pytest.mark.usefixtures("document_storage")

ORDERS = [
    {"id": 1, "customer": "Ada", "status": "paid", "total": 120.5, "items": [{"sku": "KB", "qty": 1}], "tags": ["a"]},
    {"id": 2, "customer": "Alan", "status": "shipped", "total": 89, "items": [{"sku": "MS", "qty": 2}], "tags": []},
    {"id": "3", "customer": "Grace", "status": "new", "total": 42.0, "items": [], "note": None},
    {
        "id": 4,
        "customer": "Ada",
        "status": "shipped",
        "total": 1e16,
        "items": [{"sku": "CB", "qty": 3}],
        "z": 1,
        "a": 2,
    },
    {"id": 5, "customer": "Edsger", "status": "cancelled", "total": "230", "items": []},
    {"id": 6, "customer": "Zoë", "status": "shipped", "total": 515.25, "items": [], "tags": ["b", "a"]},
    {"customer": "no key", "status": "new", "total": 3},
    {"id": 2, "customer": "Alan again", "status": "paid", "total": 7},
    "not a record",
    {"id": True, "status": None, "total": -0.5},
]
CATALOG = {
    "KB": {"name": "Keyboard", "price": 120.5, "stock": 14},
    "MS": {"name": "Mouse", "price": 44.5, "stock": 31, "b": 1, "a": 0},
    "CB": {"name": "Cable", "price": 14, "stock": 250},
    "": {"name": "empty key", "price": None},
}
DOCUMENT = {"settings": {"currency": "EUR"}, "orders": ORDERS, "catalog": CATALOG, "tags": [1, 2, 3]}

READ_TYPES = ("get_data_schema", "get_all_data", "query_data", "preview", "select")

QUERIES = {
    "/orders": [
        "[?status=='shipped' && total > `50`].id",
        "[?status=='shipped'] | length(@)",
        "sort_by([?total != null && type(total) == 'number'], &total)[*].customer",
        "[*].{c: customer, t: total}",
        "[?contains(tags, 'a')].id",
        "[?starts_with(customer, 'A')]",
        "[1:4]",
        "[-1]",
        "max_by([?type(total)=='number'], &total).customer",
        "[*].items[].sku",
        "[?total > `100`]",
        "sort_by(@, &customer)",
        "length(@)",
        "[0].z",
        "not a query ((",
    ],
    "/catalog": ["keys(@)", "values(@)[?price > `20`].name", "*.stock", "length(@)", "MS", "[?price > `20`]"],
    "": ["orders[?id==`1`].customer", "settings.currency", "keys(@)", "catalog.KB"],
    "/orders/0/items": ["[*].sku"],
}

SELECTS = {
    "/orders": [
        {"keys": [1, "2", 3, 99]},
        {"keys": ["true", 4.0]},
        {"keys": ["Ada"], "field": "customer"},
        {"keys": []},
    ],
    "/catalog": [{"keys": ["MS", "KB", "nope", ""]}],
    "": [{"keys": ["settings"]}],
    "/orders/0/items": [{"keys": ["KB"], "field": "sku"}],
}

PREVIEWS = [{}, {"limit": 3}, {"offset": 2, "limit": 4}, {"offset": 8}, {"offset": 50, "limit": 2}]


def _tools(make_tool, owner, table, prefix):
    tools = {}
    for mount in ("/orders", "/catalog", "", "/orders/0/items"):
        for kind in READ_TYPES:
            metadata = {"key_field": "id"}
            if kind == "preview":
                metadata["preview_keys"] = ["id", "status", "name"]
            name = f"{prefix}_{kind}_{mount.strip('/').replace('/', '_') or 'root'}"
            tools[(mount, kind)] = make_tool(
                owner, table=table, type=kind, name=name, json_path=mount, metadata=metadata
            )
    return tools


def _answer(tool, arguments):
    try:
        return ("ok", execute(tool=tool, arguments=arguments))
    except ToolError as exc:
        return ("error", exc.code, str(exc))


def _calls():
    for mount in ("/orders", "/catalog", "", "/orders/0/items"):
        yield mount, "get_data_schema", {}
        yield mount, "get_all_data", {}
        for query in QUERIES[mount]:
            yield mount, "query_data", {"query": query}
        for arguments in SELECTS[mount]:
            yield mount, "select", arguments
        for arguments in PREVIEWS:
            yield mount, "preview", arguments


def _pair(make_table, make_tool, owner):
    """The same table twice, both documents, with the read tools at every mount: (document's, other's, other)."""
    document = make_table(owner, name="as document", data=DOCUMENT)
    rows = make_table(owner, name="as rows", data=DOCUMENT)
    return _tools(make_tool, owner, document, "d"), _tools(make_tool, owner, rows, "r"), rows


@pytest.fixture
def both(make_table, make_tool, owner):
    document_tools, rows_tools, rows = _pair(make_table, make_tool, owner)
    assert records.table_to_rows(rows.pk) is True
    return document_tools, rows_tools, rows


def _differential(both):
    document_tools, rows_tools, _rows = both
    outcomes = []
    for mount, kind, arguments in _calls():
        expected = _answer(document_tools[(mount, kind)], arguments)
        got = _answer(rows_tools[(mount, kind)], arguments)
        assert got == expected, (mount, kind, arguments)
        outcomes.append(got[:2] if got[0] == "error" else ("ok",))
    return {outcome: outcomes.count(outcome) for outcome in sorted(set(outcomes))}


def _moved(rows):
    rows.refresh_from_db()
    assert rows.storage == TableStorage.ROWS
    assert rows.rows_since_version == 1
    assert rows.version == 1
    found = {c.mount: (c.kind, c.record_count, c.key_field) for c in TableCollection.objects.filter(table=rows)}
    # /orders and /catalog are collections; the root holds them by name (tools mount below it); a mount inside a
    # record of /orders is part of that record.
    assert found == {"/orders": ("array", 10, "id"), "/catalog": ("object", 4, "id")}
    assert TableRecord.objects.filter(collection__table=rows).count() == 14
    keys = list(
        TableRecord.objects.filter(collection__table=rows, collection__mount="/orders")
        .order_by("position")
        .values_list("key", flat=True)
    )
    assert keys == ["1", "2", "3", "4", "5", "6", None, "2", None, "true"]
    assert TableSnapshot.objects.get(table=rows).data == {
        "settings": {"currency": "EUR"},
        "orders": [],
        "catalog": {},
        "tags": [1, 2, 3],
    }


def test_rows_answer_as_the_document_does(both, monkeypatch):
    _moved(both[2])
    answered = []
    real = records.run_sql

    def counted(*args, **kwargs):
        answer = real(*args, **kwargs)
        answered.append(answer is not None)
        return answer

    monkeypatch.setattr(records, "run_sql", counted)
    assert _differential(both) == {
        ("error", "INVALID_ARGUMENTS"): 1,  # select with no keys: the schema's minItems
        ("error", "INVALID_QUERY"): 5,
        ("ok",): 55,
    }
    # Answered in SQL, and sent to the evaluator by their data (a type error jmespath raises, on both engines).
    assert (answered.count(True), answered.count(False)) == (11, 4)


def test_moving_twice_is_a_no_op_and_the_command_resumes(make_table, make_tool, owner):
    first = make_table(owner, name="first", data=[{"id": 1}, {"id": 2}])
    second = make_table(owner, name="second", data={"a": {"x": 1}})
    make_tool(owner, table=first, type="get_all_data", json_path="")
    assert records.table_to_rows(first.pk) is True
    out = io.StringIO()
    call_command("tables_to_rows", "--all", stdout=out)
    assert out.getvalue().splitlines() == [f"table {second.pk}: moved to rows", "1 moved, 0 already stored as rows."]
    out = io.StringIO()
    call_command("tables_to_rows", "--table", str(first.pk), stdout=out)
    assert out.getvalue().splitlines() == [f"table {first.pk}: already rows", "0 moved, 1 already stored as rows."]
    assert TableRecord.objects.filter(collection__table=first).count() == 2
    assert list(TableCollection.objects.filter(table=first).values_list("mount", "kind")) == [("", "array")]
    assert list(TableCollection.objects.filter(table=second).values_list("mount", "kind")) == [("", "object")]
    assert TableSnapshot.objects.get(table=first).data == []
    assert TableSnapshot.objects.get(table=second).data == {}
    assert TableChange.objects.filter(table__in=[first, second]).count() == 0
    with pytest.raises(CommandError, match="Table 999999 does not exist."):
        call_command("tables_to_rows", "--table", "999999", stdout=io.StringIO())
    with pytest.raises(CommandError, match="--all"):
        call_command("tables_to_rows", stdout=io.StringIO())
    out = io.StringIO()
    call_command("tables_to_rows", "--all", stdout=out)  # nothing left: run by every start and upgrade
    assert out.getvalue().splitlines() == ["0 moved, 0 already stored as rows."]
    assert Table.objects.filter(storage=TableStorage.ROWS).count() == 2


def test_a_table_with_no_collection_stays_a_document_and_the_command_says_why(make_table, make_tool, owner):
    scalar = make_table(owner, name="scalar", data=42)
    holder = make_table(owner, name="holder", data={"orders": "none yet"})
    make_tool(owner, table=holder, type="get_all_data", json_path="/orders")
    out = io.StringIO()
    call_command("tables_to_rows", "--all", stdout=out)
    why = "kept as a document (no collection in it: no array or object at its root or its tools' mounts)"
    assert out.getvalue().splitlines() == [
        f"table {scalar.pk}: {why}",
        f"table {holder.pk}: {why}",
        "0 moved, 0 already stored as rows, 2 kept as documents (no collection).",
    ]
    assert list(Table.objects.filter(pk__in=[scalar.pk, holder.pk]).values_list("storage", flat=True)) == [
        TableStorage.DOCUMENT,
        TableStorage.DOCUMENT,
    ]
    assert not TableCollection.objects.filter(table__in=[scalar, holder]).exists()
    assert Table.objects.get(pk=scalar.pk).rows_since_version is None
    assert records.table_to_rows(scalar.pk) is None
    assert TableSnapshot.objects.get(table=scalar).data == 42


def test_a_query_over_the_evaluated_bytes_is_too_expensive_and_a_compiled_one_answers(
    settings, make_table, make_tool, owner
):
    table = make_table(owner, name="big", data=[{"id": n, "text": "x" * 100} for n in range(50)])
    tool = make_tool(owner, table=table, type="query_data", json_path="")
    records.table_to_rows(table.pk)
    settings.TOOLHUB_MAX_EVALUATED_BYTES = 1_000
    assert execute(tool=tool, arguments={"query": "[?id > `47`].id"}) == [48, 49]
    assert execute(tool=tool, arguments={"query": "map(&text, @) | [0]"}) == "x" * 100  # compiled: nothing gathered
    summary = "{n: length(@), last: [-1].id, few: [?id > `47`].id}"  # branch by branch, each compiled
    assert execute(tool=tool, arguments={"query": summary}) == {"n": 50, "last": 49, "few": [48, 49]}
    with pytest.raises(ToolError) as refused:
        execute(tool=tool, arguments={"query": "join(',', map(&text, @)) | length(@)"})  # gathered
    assert refused.value.code == "QUERY_TOO_EXPENSIVE"
    assert "TOOLHUB_MAX_EVALUATED_BYTES" in str(refused.value)


def test_a_write_inside_a_record_rewrites_that_record_with_the_old_one_as_inverse(make_table, make_tool, owner):
    """A mount inside a collection's records is no collection (a record is never split): a write there rewrites the
    one record (`replace`, the old record as inverse; an array record's key follows its key field), a dry run and a
    refused write write nothing, and restore puts the record and its key back."""
    table = make_table(owner, name="rows", data={"orders": [{"id": 1, "items": [{"id": 9}]}, {"id": 2}]})
    make_tool(owner, table=table, type="get_all_data", json_path="/orders")
    records.table_to_rows(table.pk)
    create = make_tool(owner, table=table, type="create", json_path="/orders/0/items")
    update = make_tool(owner, table=table, type="update", json_path="/orders/1", name="u")
    collection = TableCollection.objects.get(table=table).pk
    stored = TableRecord.objects.filter(collection__table=table).order_by("position")
    assert execute(tool=create, arguments={"elements": [{"id": 3}], "dry_run": True}) == {
        "dry_run": True,
        "version": 2,
        "patch": [
            {
                "op": "replace",
                "collection": collection,
                "position": 0,
                "value": {"id": 1, "items": [{"id": 9}, {"id": 3}]},
            }
        ],
    }
    with pytest.raises(ToolError) as refused:
        execute(tool=create, arguments={"elements": [{"id": 9}]})
    assert (refused.value.code, str(refused.value)) == (
        "KEY_EXISTS",
        "KEY_EXISTS: elements[0]: the key '9' already exists in '/orders/0/items'; nothing was created. Use an update "
        "tool to change it.",
    )
    assert Table.objects.get(pk=table.pk).version == 1
    assert list(stored.values_list("key", "data")) == [("1", {"id": 1, "items": [{"id": 9}]}), ("2", {"id": 2})]
    assert execute(tool=create, arguments={"elements": [{"id": 3}]}) == {"created": 1, "version": 2}
    # The record's own key field, written at a mount on the record: its row's key follows.
    assert execute(tool=update, arguments={"elements": [{"key": "id", "content": 20}]}) == {"updated": 1, "version": 3}
    assert list(stored.values_list("position", "key", "data")) == [
        (0, "1", {"id": 1, "items": [{"id": 9}, {"id": 3}]}),
        (1024, "20", {"id": 20}),
    ]
    entries = list(TableChange.objects.filter(table=table).order_by("version").values_list("patch", "inverse"))
    assert entries == [
        (
            [
                {
                    "op": "replace",
                    "collection": collection,
                    "position": 0,
                    "value": {"id": 1, "items": [{"id": 9}, {"id": 3}]},
                }
            ],
            [{"op": "replace", "collection": collection, "position": 0, "value": {"id": 1, "items": [{"id": 9}]}}],
        ),
        (
            [{"op": "replace", "collection": collection, "position": 1024, "value": {"id": 20}}],
            [{"op": "replace", "collection": collection, "position": 1024, "value": {"id": 2}}],
        ),
    ]
    assert TableSnapshot.objects.get(table=table).data == {"orders": []}
    assert services.table_version_data(table.pk, 2) == {
        "orders": [{"id": 1, "items": [{"id": 9}, {"id": 3}]}, {"id": 2}]
    }
    assert services.table_restore(table_id=table.pk, version=1) == 4
    assert list(stored.values_list("key", "data")) == [("1", {"id": 1, "items": [{"id": 9}]}), ("2", {"id": 2})]


def test_a_document_write_that_would_replace_a_collection_is_refused_and_writes_nothing(make_table, make_tool, owner):
    """At the root holding the collections, an update of the member that is a collection would need its records in
    the document: TOOL_NOT_CALLABLE, nothing written; the settings beside it are written as the document's patch."""
    table = make_table(owner, name="rows", data={"orders": [{"id": 1}], "settings": {"currency": "EUR"}})
    make_tool(owner, table=table, type="get_all_data", json_path="/orders")
    records.table_to_rows(table.pk)
    update = make_tool(owner, table=table, type="update", json_path="", name="u")
    with pytest.raises(ToolError) as refused:
        execute(tool=update, arguments={"elements": [{"key": "orders", "content": {"a": 1}}]})
    assert refused.value.code == "TOOL_NOT_CALLABLE"
    assert "would replace or remove the record collection at '/orders'" in str(refused.value)
    assert Table.objects.get(pk=table.pk).version == 1
    assert not TableChange.objects.filter(table=table).exists()
    assert list(TableRecord.objects.filter(collection__table=table).values_list("data", flat=True)) == [{"id": 1}]
    assert execute(tool=update, arguments={"elements": [{"key": "settings", "content": {"currency": "USD"}}]}) == {
        "updated": 1,
        "version": 2,
    }
    assert TableChange.objects.get(table=table, version=2).patch == [
        {"op": "replace", "path": "/settings/currency", "value": "USD"}
    ]
    assert Table.objects.get(pk=table.pk).data == {"orders": [{"id": 1}], "settings": {"currency": "USD"}}


def test_a_write_reaching_a_collection_among_other_changes_is_refused_whole(make_table, make_tool, owner):
    """One element of an update reaching a collection refuses the whole call (the element beside it is not written),
    and so does a delete of the collection's member; a whole-data write of the same change is applied, records
    included (records.replace_data)."""
    data = {"orders": [{"id": 1}, {"id": 2}], "settings": {"currency": "EUR"}}
    table = make_table(owner, name="rows", data=data)
    make_tool(owner, table=table, type="get_all_data", json_path="/orders")
    assert records.table_to_rows(table.pk) is True
    update = make_tool(owner, table=table, type="update", json_path="", name="u")
    delete = make_tool(owner, table=table, type="delete", json_path="", name="d")
    stored = TableRecord.objects.filter(collection__table=table).order_by("position")
    calls = [
        (update, {"elements": [{"key": "settings", "content": {"currency": "USD"}}, {"key": "orders", "content": []}]}),
        (delete, {"keys": ["settings", "orders"]}),
        (update, {"elements": [{"key": "orders", "content": [{"id": 3}]}], "dry_run": True}),
    ]
    for tool, arguments in calls:
        with pytest.raises(ToolError) as refused:
            execute(tool=tool, arguments=arguments)
        assert refused.value.code == "TOOL_NOT_CALLABLE", arguments
        assert "would replace or remove the record collection at '/orders'" in str(refused.value)
        assert Table.objects.get(pk=table.pk).version == 1
        assert not TableChange.objects.filter(table=table).exists()
        assert list(stored.values_list("data", flat=True)) == [{"id": 1}, {"id": 2}]
        assert TableSnapshot.objects.get(table=table).data == {"orders": [], "settings": {"currency": "EUR"}}
    whole = {"orders": [{"id": 3}], "settings": {"currency": "USD"}}
    services.table_update(table=Table.objects.get(pk=table.pk), data=whole)
    assert Table.objects.get(pk=table.pk).data == whole
    assert list(stored.values_list("data", flat=True)) == [{"id": 3}]


def test_a_tool_at_a_new_mount_lays_a_rows_table_out_again(make_table, make_tool, owner):
    """A tool on an array of the document that is no collection yet: the table is laid out again under its lock (a
    new version whose entry replaces the document without records, its inverse keeping the old layout's records),
    the tool writes there as on a document, and the version before the layout opens and restores."""
    table = make_table(owner, name="rows", data={"orders": [{"id": 1}], "tags": [{"id": "a"}]})
    make_tool(owner, table=table, type="get_all_data", json_path="/orders")
    records.table_to_rows(table.pk)
    orders = TableCollection.objects.get(table=table).pk
    create = make_tool(owner, table=table, type="create", json_path="/tags")
    table.refresh_from_db()
    assert (table.version, table.rows_since_version) == (2, 2)
    assert sorted(TableCollection.objects.filter(table=table).values_list("mount", "record_count")) == [
        ("/orders", 1),
        ("/tags", 1),
    ]
    assert TableSnapshot.objects.get(table=table).data == {"orders": [], "tags": []}
    assert TableChange.objects.get(table=table, version=2).patch == [
        {"op": "replace", "path": "", "value": {"orders": [], "tags": []}, "layout": True}
    ]
    # Its inverse keeps the layout it replaced, with its records by position and the version it was rows since.
    assert TableChange.objects.get(table=table, version=2).inverse == [
        {
            "op": "replace",
            "path": "",
            "value": {"orders": [], "tags": [{"id": "a"}]},
            "layout": True,
            "since": 1,
            "collections": [{"id": orders, "mount": "/orders", "kind": "array", "records": [[0, "1", {"id": 1}]]}],
        }
    ]
    assert execute(tool=create, arguments={"elements": [{"id": "b"}]}) == {"created": 1, "version": 3}
    assert Table.objects.get(pk=table.pk).data == {"orders": [{"id": 1}], "tags": [{"id": "a"}, {"id": "b"}]}
    assert services.table_version_data(table.pk, 2) == {"orders": [{"id": 1}], "tags": [{"id": "a"}]}
    assert services.table_version_data(table.pk, 1) == {"orders": [{"id": 1}], "tags": [{"id": "a"}]}
    execute(tool=create, arguments={"elements": [{"id": "c"}]})
    assert services.table_restore(table_id=table.pk, version=1) == 5
    assert Table.objects.get(pk=table.pk).data == {"orders": [{"id": 1}], "tags": [{"id": "a"}]}
    # Restored through the rows of the current layout: /tags stays a collection (its tool is there).
    assert TableCollection.objects.get(table=table, mount="/tags").record_count == 1
    assert services.table_restore(table_id=table.pk, version=4) == 6
    assert Table.objects.get(pk=table.pk).data == {
        "orders": [{"id": 1}],
        "tags": [{"id": "a"}, {"id": "b"}, {"id": "c"}],
    }


def test_a_layout_entry_without_its_records_keeps_the_versions_before_it_closed(make_table, make_tool, owner):
    """A layout entry written before layouts kept their records (its inverse holds no "collections"): the versions
    before it are neither opened nor restored, nothing is written; those from it on are."""
    table = make_table(owner, name="rows", data={"orders": [{"id": 1}], "tags": [{"id": "a"}]})
    make_tool(owner, table=table, type="get_all_data", json_path="/orders")
    records.table_to_rows(table.pk)
    make_tool(owner, table=table, type="create", json_path="/tags")
    entry = TableChange.objects.get(table=table, version=2)
    entry.inverse = [{"op": "replace", "path": "", "value": {"orders": [], "tags": [{"id": "a"}]}, "layout": True}]
    entry.save(update_fields=["inverse"])
    with pytest.raises(TableChange.DoesNotExist, match="laid out again at version 2: only versions from it on"):
        services.table_version_data(table.pk, 1)
    with pytest.raises(TableChange.DoesNotExist, match="laid out again at version 2: only versions from it on"):
        services.table_restore(table_id=table.pk, version=1)
    assert Table.objects.get(pk=table.pk).version == 2
    assert TableChange.objects.filter(table=table).count() == 1
    assert services.table_version_data(table.pk, 2) == {"orders": [{"id": 1}], "tags": [{"id": "a"}]}


def test_the_first_tool_at_a_collection_keys_its_records_by_its_field(make_table, make_tool, owner):
    """A collection's records are keyed by the first tool's key field: a new first tool with another one rewrites
    the keys (positions, version and history stay), and its writes and selects find records by that field."""
    table = make_table(owner, name="rows", data=[{"sku": "KB", "n": 1}, {"sku": "MS", "n": 2}])
    records.table_to_rows(table.pk)
    assert list(TableRecord.objects.filter(collection__table=table).values_list("key", flat=True)) == [None, None]
    update = make_tool(owner, table=table, type="update", json_path="", name="u", metadata={"key_field": "sku"})
    select = make_tool(owner, table=table, type="select", json_path="", name="s", metadata={"key_field": "sku"})
    rows = TableRecord.objects.filter(collection__table=table).order_by("position")
    assert list(rows.values_list("position", "key")) == [(0, "KB"), (1024, "MS")]
    assert TableCollection.objects.get(table=table).key_field == "sku"
    assert Table.objects.get(pk=table.pk).version == 1
    assert execute(tool=update, arguments={"elements": [{"sku": "MS", "n": 3}]}) == {"updated": 1, "version": 2}
    assert execute(tool=select, arguments={"keys": ["MS", "XX"]}) == {
        "items": [{"sku": "MS", "n": 3}],
        "not_found": ["XX"],
    }
    services.tool_delete(tool=update, force=True)
    services.tool_delete(tool=select, force=True)
    assert list(rows.values_list("key", flat=True)) == ["KB", "MS"]  # no tool at the collection: its key stays
    make_tool(owner, table=table, type="delete", json_path="", name="d", metadata={"key_field": "id"})
    assert list(rows.values_list("key", flat=True)) == [None, None]  # keyed by `id` now, which no record holds


DEEP: list = []
for _ in range(70):
    DEEP = [DEEP]

WRITES = [
    ("/orders", "create", {"elements": [{"id": 7, "customer": "New", "status": "new", "total": 1}]}),
    ("/orders", "create", {"elements": [{"id": 1, "customer": "again"}]}),
    ("/orders", "create", {"elements": [{"id": 8}, {"id": "8"}]}),
    ("/orders", "create", {"elements": [{"customer": "no key"}]}),
    ("/orders", "create", {"elements": [{"id": 9, "deep": DEEP}]}),
    ("/orders", "update", {"elements": [{"id": 1, "status": "shipped", "note": None}, {"id": "1", "total": 5}]}),
    ("/orders", "update", {"elements": [{"id": 2, "status": "first of two"}]}),
    ("/orders", "update", {"elements": [{"id": 99, "status": "x"}]}),
    ("/orders", "update", {"elements": [{"id": 7, "status": "shipped"}, {"id": 100}]}),
    ("/orders", "create", {"elements": [{"id": 10, "total": 3}], "dry_run": True}),
    ("/orders", "delete", {"keys": [3, "4"]}),
    ("/orders", "delete", {"keys": [2]}),
    ("/orders", "delete", {"keys": [5, 55]}),
    ("/orders", "delete", {"keys": ["true"], "expected_version": 1}),
    ("/orders", "delete", {"keys": ["true"], "idempotency_key": "k-1"}),
    ("/orders", "delete", {"keys": ["true"], "idempotency_key": "k-1"}),
    ("/orders", "delete", {"keys": ["true"], "idempotency_key": "k-1", "expected_version": 3}),
    ("/orders", "create", {"elements": [{"id": 3, "customer": "back", "b": 1, "a": {"z": 1, "y": 2}}]}),
    ("/orders", "update", {"elements": [{"id": 6, "tags": None}], "dry_run": True}),
    ("/catalog", "create", {"elements": [{"key": "HD", "content": {"name": "Hub", "price": 9}}]}),
    ("/catalog", "create", {"elements": [{"key": "KB", "content": {}}]}),
    ("/catalog", "update", {"elements": [{"key": "MS", "content": {"price": 50, "b": None}}]}),
    ("/catalog", "update", {"elements": [{"key": "", "content": 3}]}),
    ("/catalog", "update", {"elements": [{"key": "zz", "content": {}}]}),
    ("/catalog", "delete", {"keys": ["CB"]}),
    ("/catalog", "delete", {"keys": ["CB"]}),
    ("/catalog", "delete", {"keys": ["KB"], "dry_run": True}),
]


def _writers(make_tool, owner, table, prefix):
    return {
        (mount, kind): make_tool(
            owner,
            table=table,
            type=kind,
            name=f"{prefix}_{kind}_{mount.strip('/')}",
            json_path=mount,
            metadata={"key_field": "id"},
        )
        for mount in ("/orders", "/catalog")
        for kind in ("create", "update", "delete")
    }


def test_writes_on_a_rows_table_answer_and_end_as_on_the_document(both, make_tool, owner):
    """The same writes on the same table stored both ways: the same answers (a dry run's patch aside: per-record
    operations on rows), the same versions, and then every read answers the same."""
    document_tools, rows_tools, rows = both
    document = document_tools[("/orders", "get_all_data")].table
    document_writers = _writers(make_tool, owner, document, "dw")
    rows_writers = _writers(make_tool, owner, rows, "rw")
    outcomes = []
    for mount, kind, arguments in WRITES:
        expected = _answer(document_writers[(mount, kind)], arguments)
        got = _answer(rows_writers[(mount, kind)], arguments)
        if arguments.get("dry_run") and got[0] == "ok":
            assert got[1].pop("patch") != expected[1].pop("patch")
        assert got == expected, (mount, kind, arguments)
        outcomes.append(got[:2] if got[0] == "error" else ("ok",))
    assert {outcome: outcomes.count(outcome) for outcome in sorted(set(outcomes))} == {
        ("error", "INVALID_ARGUMENTS"): 1,
        ("error", "KEY_EXISTS"): 3,
        ("error", "KEY_NOT_FOUND"): 5,
        ("error", "VALIDATION_ERROR"): 1,
        ("error", "VERSION_CONFLICT"): 1,
        ("error", "IDEMPOTENCY_KEY_REUSED"): 1,
        ("ok",): 15,
    }
    document.refresh_from_db()
    rows.refresh_from_db()
    assert rows.version == document.version == 12
    assert list(TableChange.objects.filter(table=rows).order_by("version").values_list("version", flat=True)) == list(
        range(2, 13)
    )
    counts = dict(TableCollection.objects.filter(table=rows).values_list("mount", "record_count"))
    assert counts == {"/orders": 7, "/catalog": 4}
    assert TableRecord.objects.filter(collection__table=rows).count() == 11
    assert TableSnapshot.objects.get(table=rows).data == {
        "settings": {"currency": "EUR"},
        "orders": [],
        "catalog": {},
        "tags": [1, 2, 3],
    }
    assert _differential(both)[("ok",)] == 55


# Writes at mounts that are no collection: inside a record of /orders (an array collection), at a record itself, at a
# missing record, and in the document part (the root that holds the collections, a mount the write creates).
# (mount, key field, type, arguments). A tool below /catalog would make it a holder of collections (collection_mounts):
# the writes inside its records are made without a tool, as the admin's records view makes its writes.
INNER_WRITES = [
    ("/orders/0/items", "sku", "create", {"elements": [{"sku": "MS", "qty": 1}]}),
    ("/orders/0/items", "sku", "create", {"elements": [{"sku": "KB"}]}),
    ("/orders/0/items", "sku", "update", {"elements": [{"sku": "KB", "qty": 5}]}),
    ("/orders/0/items", "sku", "create", {"elements": [{"sku": "DP", "deep": DEEP}]}),
    ("/orders/0/items", "sku", "delete", {"keys": ["XX"]}),
    ("/orders/0/items", "sku", "delete", {"keys": ["MS"], "dry_run": True}),
    ("/orders/0/items", "sku", "delete", {"keys": ["MS"], "expected_version": 2}),
    ("/orders/0/items", "sku", "delete", {"keys": ["MS"], "expected_version": 3, "idempotency_key": "i-1"}),
    ("/orders/0/items", "sku", "delete", {"keys": ["MS"], "expected_version": 3, "idempotency_key": "i-1"}),
    ("/orders/0/items", "sku", "delete", {"keys": ["KB"], "idempotency_key": "i-1"}),
    ("/orders/1", "id", "create", {"elements": [{"key": "gift", "content": True}]}),
    ("/orders/1", "id", "update", {"elements": [{"key": "id", "content": 20}]}),
    ("/orders/1", "id", "delete", {"keys": ["tags"]}),
    ("/orders/6", "id", "update", {"elements": [{"key": "id", "content": 6}]}),
    ("/orders/6", "id", "create", {"elements": [{"key": "id", "content": 61}]}),
    ("/orders/2/items", "id", "update", {"elements": [{"id": 1}]}),
    ("/orders/8/x", "id", "create", {"elements": [{"id": 1}]}),
    ("/orders/10/items", "id", "create", {"elements": [{"id": 1}]}),
    ("/orders/01", "id", "create", {"elements": [{"key": "x", "content": 1}]}),
    ("", "id", "create", {"elements": [{"key": "extra", "content": {"a": 1}}]}),
    ("", "id", "create", {"elements": [{"key": "orders", "content": 1}]}),
    ("", "id", "update", {"elements": [{"key": "settings", "content": {"currency": "USD", "vat": 20}}]}),
    ("", "id", "delete", {"keys": ["tags"]}),
    ("/fresh", "id", "create", {"elements": [{"id": 1}]}),
    ("/fresh", "id", "create", {"elements": [{"id": 1}]}),
    ("/fresh", "id", "update", {"elements": [{"id": 1, "n": 2}]}),
    ("/settings/currency", "id", "create", {"elements": [{"id": 1}]}),
]
OBJECT_INNER_WRITES = [
    ("/catalog/MS", operations.create, {"elements": [{"key": "color", "content": "grey"}]}),
    ("/catalog/MS", operations.update, {"elements": [{"key": "price", "content": 45}, {"key": "b", "content": 2}]}),
    ("/catalog/MS", operations.delete, {"keys": ["a"]}),
    ("/catalog/MS", operations.delete, {"keys": ["a"]}),
    ("/catalog/NEW", operations.create, {"elements": [{"id": 1}, {"id": 2}]}),
    ("/catalog/NEW", operations.update, {"elements": [{"id": 2, "n": 1}]}),
    ("/catalog/NONE/x", operations.create, {"elements": [{"id": 1}]}),
]


def test_writes_inside_records_and_in_the_document_answer_version_and_restore_as_on_the_document(
    both, make_tool, owner
):
    """The same writes at mounts inside records and in the document part, on the table stored both ways: the same
    answers (a dry run's patch aside), versions, every read call, every version's view, and the same after
    restores in scrambled order."""
    document_tools, rows_tools, rows = both
    document = document_tools[("/orders", "get_all_data")].table

    def writers(table, prefix):
        made = {}
        for number, (mount, key_field, kind, _arguments) in enumerate(INNER_WRITES):
            if (mount, kind) not in made:
                made[(mount, kind)] = make_tool(
                    owner,
                    table=table,
                    type=kind,
                    name=f"{prefix}_{number}",
                    json_path=mount,
                    metadata={"key_field": key_field},
                )
        return made

    document_writers, rows_writers = writers(document, "dw"), writers(rows, "rw")
    assert Table.objects.get(pk=rows.pk).version == 1  # no tool made a collection: not laid out again
    outcomes = []
    for mount, _key_field, kind, arguments in INNER_WRITES:
        expected = _answer(document_writers[(mount, kind)], arguments)
        got = _answer(rows_writers[(mount, kind)], arguments)
        if arguments.get("dry_run") and got[0] == "ok":
            assert got[1].pop("patch") != expected[1].pop("patch")
        assert got == expected, (mount, kind, arguments)
        outcomes.append(got[:2] if got[0] == "error" else ("ok",))
    for mount, operation, arguments in OBJECT_INNER_WRITES:
        answers = []
        for table in (document, rows):
            try:
                answers.append(("ok", write_at(table.pk, Mount(mount, "id"), operation, arguments, "written")))
            except ToolError as exc:
                answers.append(("error", exc.code, str(exc)))
        assert answers[1] == answers[0], (mount, operation, arguments)
        outcomes.append(answers[1][:2] if answers[1][0] == "error" else ("ok",))
    assert {outcome: outcomes.count(outcome) for outcome in sorted(set(outcomes))} == {
        ("error", "IDEMPOTENCY_KEY_REUSED"): 1,
        ("error", "KEY_EXISTS"): 3,
        ("error", "KEY_NOT_FOUND"): 4,
        ("error", "MOUNT_NOT_FOUND"): 4,
        ("error", "MOUNT_TYPE_MISMATCH"): 1,
        ("error", "VALIDATION_ERROR"): 1,
        ("error", "VERSION_CONFLICT"): 1,
        ("ok",): 19,
    }
    assert Table.objects.get(pk=rows.pk).version == Table.objects.get(pk=document.pk).version == 18
    assert Table.objects.get(pk=rows.pk).data == Table.objects.get(pk=document.pk).data
    stored = TableRecord.objects.filter(collection__table=rows, collection__mount="/orders").order_by("position")
    assert list(stored.values_list("key", flat=True)) == ["1", "20", "3", "4", "5", "6", "61", "2", None, "true"]
    assert TableSnapshot.objects.get(table=rows).data == {
        "settings": {"currency": "EUR"},
        "orders": [],
        "catalog": {},
        "tags": [1, 2, 3],
    }  # the document part's writes are in the log until a compaction
    assert _differential(both)[("ok",)] == 55
    assert _versions(rows.pk) == _versions(document.pk)
    for target, new_version in ((1, 19), (9, 20), (18, 21), (4, 22), (19, 23), (14, 24)):
        assert services.table_restore(table_id=document.pk, version=target) == new_version
        assert services.table_restore(table_id=rows.pk, version=target) == new_version
        assert Table.objects.get(pk=rows.pk).data == Table.objects.get(pk=document.pk).data, target
        assert _differential(both)[("ok",)] == 55
    assert _versions(rows.pk) == _versions(document.pk)


def test_a_rows_write_keeps_per_record_operations_and_their_inverses(make_table, make_tool, owner):
    table = make_table(owner, name="rows", data=[{"id": 1, "a": 1}, {"id": 2, "a": 2}])
    create = make_tool(owner, table=table, type="create", json_path="", name="c", metadata={"key_field": "id"})
    update = make_tool(owner, table=table, type="update", json_path="", name="u", metadata={"key_field": "id"})
    delete = make_tool(owner, table=table, type="delete", json_path="", name="d", metadata={"key_field": "id"})
    records.table_to_rows(table.pk)
    collection = TableCollection.objects.get(table=table).pk
    assert execute(tool=create, arguments={"elements": [{"id": 3, "a": 3}]}) == {"created": 1, "version": 2}
    assert execute(tool=update, arguments={"elements": [{"id": 1, "a": None, "b": 1}]}) == {"updated": 1, "version": 3}
    assert execute(tool=delete, arguments={"keys": [2]}) == {"deleted": 1, "version": 4}
    entries = list(TableChange.objects.filter(table=table).order_by("version").values_list("patch", "inverse"))
    assert entries == [
        (
            [{"op": "add", "collection": collection, "position": 2048, "key": "3", "value": {"id": 3, "a": 3}}],
            [{"op": "remove", "collection": collection, "position": 2048}],
        ),
        (
            [{"op": "replace", "collection": collection, "position": 0, "value": {"id": 1, "b": 1}}],
            [{"op": "replace", "collection": collection, "position": 0, "value": {"id": 1, "a": 1}}],
        ),
        (
            [{"op": "remove", "collection": collection, "position": 1024}],
            [{"op": "add", "collection": collection, "position": 1024, "key": "2", "value": {"id": 2, "a": 2}}],
        ),
    ]
    rows = TableRecord.objects.filter(collection__table=table).order_by("position")
    assert list(rows.values_list("position", "key")) == [(0, "1"), (2048, "3")]
    assert TableCollection.objects.get(pk=collection).record_count == 2


def test_a_rows_table_replaced_whole_is_restored_before_its_move_through_its_rows(make_table, make_tool, owner):
    """Its data written whole (tools_app/tests/execution/test_rows_replace.py), then restored to a version from
    before the move: the version's document is written through the rows, and the versions between still open."""
    table = make_table(owner, name="rows", data=[{"id": 1}])
    services.table_update(table=table, data=[{"id": 1}, {"id": 2}])  # version 2, as a document
    records.table_to_rows(table.pk)
    services.table_update(table=Table.objects.get(pk=table.pk), data=[{"id": 2}])  # version 3, as rows
    table.refresh_from_db()
    assert (table.version, table.rows_since_version) == (3, 2)
    assert services.table_version_data(table.pk, 1) == [{"id": 1}]
    assert services.table_restore(table_id=table.pk, version=1) == 4
    stored = TableRecord.objects.filter(collection__table=table).order_by("position")
    assert list(stored.values_list("key", flat=True)) == ["1"]
    assert TableCollection.objects.get(table=table).record_count == 1
    assert services.table_data(table.pk) == (4, [{"id": 1}])
    assert [services.table_version_data(table.pk, version) for version in (1, 2, 3)] == [
        [{"id": 1}],
        [{"id": 1}, {"id": 2}],
        [{"id": 2}],
    ]
    assert services.table_restore(table_id=table.pk, version=2) == 5
    assert list(stored.values_list("key", flat=True)) == ["1", "2"]
    assert TableSnapshot.objects.get(table=table).data == []
    assert Table.objects.get(pk=table.pk).data == [{"id": 1}, {"id": 2}]


def test_a_version_without_a_collections_container_is_restored_by_laying_the_table_out_again(
    make_table, make_tool, owner
):
    """Version 1 holds no array at /orders, where the table stores a collection: the restore writes it as a
    whole-data write does (records.replace_data), laying the table out again; restorable from the new version on."""
    table = make_table(owner, name="rows", data={"orders": "none yet"})
    services.table_update(table=table, data={"orders": [{"id": 1}]})
    make_tool(owner, table=table, type="get_all_data", json_path="/orders")
    records.table_to_rows(table.pk)
    assert services.table_version_data(table.pk, 1) == {"orders": "none yet"}
    assert services.table_restore(table_id=table.pk, version=1) == 3
    table.refresh_from_db()
    assert (table.version, table.rows_since_version) == (3, 3)
    assert table.data == {"orders": "none yet"}
    assert not TableCollection.objects.filter(table=table).exists()
    assert TableChange.objects.get(table=table, version=3).patch == [
        {"op": "replace", "path": "", "value": {"orders": "none yet"}, "layout": True}
    ]
    # The version before the new layout opens from the old layout its inverse keeps, and restores.
    assert services.table_version_data(table.pk, 2) == {"orders": [{"id": 1}]}
    assert services.table_restore(table_id=table.pk, version=2) == 4
    table.refresh_from_db()
    assert (table.version, table.rows_since_version, table.data) == (4, 4, {"orders": [{"id": 1}]})
    assert [services.table_version_data(table.pk, version) for version in (1, 2, 3, 4)] == [
        {"orders": "none yet"},
        {"orders": [{"id": 1}]},
        {"orders": "none yet"},
        {"orders": [{"id": 1}]},
    ]


def test_a_compiled_query_over_its_time_budget_is_stopped_inside_the_engine(make_table, make_tool, owner):
    """The statement itself is stopped (SQLite's progress handler, PostgreSQL's statement_timeout): the error comes
    out of the database driver, and the next query on the same connection answers."""
    data = [{"id": n, "name": f"name {n * 7919 % 40_000:05d}", "text": "x" * 60} for n in range(40_000)]
    table = make_table(owner, name="slow", data=data)
    tool = make_tool(owner, table=table, type="query_data", json_path="")
    records.table_to_rows(table.pk)
    timeout_before = _statement_timeout()
    tiny = budget.Limits(cpu_ms=5, max_elements=10**9, max_bytes=10**9)
    with budget.enforced(tiny), pytest.raises(ToolError) as stopped:
        execute(tool=tool, arguments={"query": "sort_by([?contains(name, '9')], &name)[*].{n: name, t: text}"})
    assert stopped.value.code == "QUERY_TOO_EXPENSIVE"
    assert "CPU-time budget of 5 ms" in str(stopped.value)
    assert isinstance(stopped.value.__cause__, DatabaseError)  # the statement was interrupted, not a check after it
    assert _statement_timeout() == timeout_before
    roomy = budget.Limits(cpu_ms=60_000, max_elements=10**9, max_bytes=10**9)
    with budget.enforced(roomy):
        assert execute(tool=tool, arguments={"query": "[?id == `39999`].name"}) == [f"name {39999 * 7919 % 40_000:05d}"]
    assert execute(tool=tool, arguments={"query": "length(@)"}) == 40_000


@pytest.mark.django_db(transaction=True)
def test_a_compiled_query_outside_a_transaction_is_stopped_by_its_own_statement_timeout(make_table, make_tool, owner):
    """Outside a transaction (as the server runs a read), PostgreSQL gets the timeout in the statement's own message
    (records.engine_cursor): the statement is cancelled, the session's timeout is untouched, nothing stays open,
    and the next queries answer with the timeout of their own calls."""
    data = [{"id": n, "name": f"name {n * 7919 % 40_000:05d}", "text": "x" * 60} for n in range(40_000)]
    table = make_table(owner, name="slow", data=data)
    tool = make_tool(owner, table=table, type="query_data", json_path="")
    records.table_to_rows(table.pk)
    timeout_before = _statement_timeout()
    tiny = budget.Limits(cpu_ms=5, max_elements=10**9, max_bytes=10**9)
    with budget.enforced(tiny), pytest.raises(ToolError) as stopped:
        execute(tool=tool, arguments={"query": "sort_by([?contains(name, '9')], &name)[*].{n: name, t: text}"})
    assert stopped.value.code == "QUERY_TOO_EXPENSIVE"
    assert "CPU-time budget of 5 ms" in str(stopped.value)
    assert isinstance(stopped.value.__cause__, DatabaseError)
    assert _statement_timeout() == timeout_before
    assert connection.get_autocommit()
    assert not connection.in_atomic_block
    roomy = budget.Limits(cpu_ms=60_000, max_elements=10**9, max_bytes=10**9)
    with budget.enforced(roomy):
        assert execute(tool=tool, arguments={"query": "[?id == `39999`].name"}) == [f"name {39999 * 7919 % 40_000:05d}"]
        assert execute(tool=tool, arguments={"query": "sort_by(@, &id)[-2:].id"}) == [39998, 39999]
        assert execute(tool=tool, arguments={"query": "sort_by(@, &name)[:2].id"}) == [0, 17679]
    assert _statement_timeout() == timeout_before


def _statement_timeout():
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_a_streamed_rows_read_stuck_in_the_engine_is_cancelled_at_its_budget(
    make_table, make_tool, owner, monkeypatch, stuck_records
):
    """A read over rows runs in the server process (never in a heavy worker, whose watchdog ends a process): a
    statement of it that the engine is slow to answer (here each row costs a pg_sleep) is cancelled by
    PostgreSQL at the call's remaining time, as the server runs a read (outside a transaction), and its transaction
    is ended; the budget's error names the cancelled statement, and the connection answers afterwards."""
    table = make_table(owner, name="stuck", data=[{"id": n, "name": "x" * (n % 5)} for n in range(50)])
    tool = make_tool(owner, table=table, type="query_data", json_path="")
    records.table_to_rows(table.pk)
    stuck_records.stick()
    monkeypatch.setattr(records, "compile_sql_expression", lambda *_args, **_kwargs: None)
    timeout_before = _statement_timeout()
    limits = budget.Limits(cpu_ms=400, max_elements=10**9, max_bytes=10**9)
    started = time.monotonic()
    with budget.enforced(limits), pytest.raises(ToolError) as stopped:
        execute(tool=tool, arguments={"query": "sort_by(@, &length(name))[-2:].id"})  # 50 rows: 5 s in the engine
    elapsed = time.monotonic() - started
    assert stopped.value.code == "QUERY_TOO_EXPENSIVE"
    assert "CPU-time budget of 400 ms" in str(stopped.value)
    assert "the database statement ran over its" in str(stopped.value)
    assert isinstance(stopped.value.__cause__, DatabaseError)  # cancelled in the engine, not checked after it
    assert elapsed < 2.0
    assert _statement_timeout() == timeout_before
    assert connection.get_autocommit()
    stuck_records.release()
    with budget.enforced(budget.Limits(cpu_ms=60_000, max_elements=10**9, max_bytes=10**9)):
        assert execute(tool=tool, arguments={"query": "sort_by(@, &length(name))[-2:].id"}) == [44, 49]


def test_a_rows_table_is_restored_by_its_per_record_inverses(make_table, make_tool, owner):
    """Restore to a version since the move applies the inverses newest first to the rows, as one new version whose
    entry restores forward again; a position freed and taken again by a later create comes back right."""
    table = make_table(owner, name="rows", data={"list": [{"id": 1, "a": 1}, {"id": 2}], "map": {"k": {"v": 1}}})
    tools = {
        (mount, kind): make_tool(
            owner, table=table, type=kind, name=f"{kind}_{mount[1:]}", json_path=mount, metadata={"key_field": "id"}
        )
        for mount in ("/list", "/map")
        for kind in ("create", "update", "delete", "get_all_data")
    }
    records.table_to_rows(table.pk)

    def everything():
        return [execute(tool=tools[(mount, "get_all_data")], arguments={}) for mount in ("/list", "/map")]

    moved = everything()
    execute(tool=tools[("/list", "delete")], arguments={"keys": [2]})
    execute(tool=tools[("/list", "create")], arguments={"elements": [{"id": 3, "z": 1, "b": [1]}]})
    execute(tool=tools[("/list", "update")], arguments={"elements": [{"id": 1, "a": None, "c": {"y": 1, "x": 2}}]})
    execute(tool=tools[("/map", "create")], arguments={"elements": [{"key": "n", "content": 5}]})
    execute(tool=tools[("/map", "delete")], arguments={"keys": ["k"]})
    written = everything()
    assert written == [[{"id": 1, "c": {"y": 1, "x": 2}}, {"id": 3, "z": 1, "b": [1]}], {"n": 5}]
    assert services.table_restore(table_id=table.pk, version=1) == 7
    assert everything() == moved
    counts = dict(TableCollection.objects.filter(table=table).values_list("mount", "record_count"))
    assert counts == {"/list": 2, "/map": 1}
    assert services.table_restore(table_id=table.pk, version=6) == 8
    assert everything() == written
    table.refresh_from_db()
    assert table.version == 8
    assert TableSnapshot.objects.get(table=table).data == {"list": [], "map": {}}


def _versions(table_id):
    """Every kept version's whole document, oldest first."""
    current = Table.objects.get(pk=table_id).version
    return [services.table_version_data(table_id, version) for version in range(1, current + 1)]


def test_versions_before_the_move_open_and_restore_as_on_the_document(make_table, make_tool, owner):
    """The same history on a document table and on one moved to rows part-way (writes before and after the move):
    every version opens the same, and restoring to versions before, at and after the move answers every read the
    same, with the same versions and whole data; the rows table's restores go through its rows."""
    document_tools, rows_tools, rows = _pair(make_table, make_tool, owner)
    document = document_tools[("/orders", "get_all_data")].table
    document_writers = _writers(make_tool, owner, document, "dw")
    rows_writers = _writers(make_tool, owner, rows, "rw")

    def write(writes):
        for mount, kind, arguments in writes:
            got = _answer(rows_writers[(mount, kind)], arguments)
            expected = _answer(document_writers[(mount, kind)], arguments)
            if got[0] == "ok" and arguments.get("dry_run"):  # its patch: per-record operations on the rows
                got[1].pop("patch"), expected[1].pop("patch")
            assert got == expected, (mount, kind, arguments)

    write(WRITES[:10])  # versions 2..4, as documents
    assert records.table_to_rows(rows.pk) is True
    rows.refresh_from_db()
    assert (rows.rows_since_version, rows.version) == (4, 4)
    # Versions 5..11, per-record operations on the rows table. Not a delete of an object's member: restored, the
    # document puts it back last, the rows in its place (docs/tables-at-scale.md, "History, versions, cursors").
    write([write_ for write_ in WRITES[10:] if write_[:2] != ("/catalog", "delete")])
    document.refresh_from_db()
    assert Table.objects.get(pk=rows.pk).version == document.version == 11
    assert _versions(rows.pk) == _versions(document.pk)
    assert _versions(rows.pk)[0] == DOCUMENT
    for target, new_version in ((2, 12), (4, 13), (9, 14), (1, 15), (14, 16), (15, 17)):
        assert services.table_restore(table_id=document.pk, version=target) == new_version
        assert services.table_restore(table_id=rows.pk, version=target) == new_version
        assert Table.objects.get(pk=rows.pk).data == Table.objects.get(pk=document.pk).data
        assert _differential((document_tools, rows_tools, rows))[("ok",)] >= 50
    # Restored through the rows: the document without records stays as moved, the records are rows.
    assert TableSnapshot.objects.get(table=rows).data == {
        "settings": {"currency": "EUR"},
        "orders": [],
        "catalog": {},
        "tags": [1, 2, 3],
    }
    counts = dict(TableCollection.objects.filter(table=rows).values_list("mount", "record_count"))
    assert counts == {"/orders": len(ORDERS), "/catalog": len(CATALOG)}  # version 17 = 15 = version 1
    assert TableRecord.objects.filter(collection__table=rows).count() == len(ORDERS) + len(CATALOG)
    assert Table.objects.get(pk=rows.pk).data == DOCUMENT
    for entry in TableChange.objects.filter(table=rows, version__gt=4):  # no entry patches a record in the document
        assert all("collection" in operation or operation["path"] == "" for operation in entry.patch), entry.version
    assert _versions(rows.pk) == _versions(document.pk)
    # Writes go on after restores on both, and answer the same.
    write(WRITES[:5])
    assert _differential((document_tools, rows_tools, rows))[("ok",)] >= 50


def test_versions_across_layouts_and_the_move_open_and_restore_as_on_the_document(make_table, make_tool, owner):
    """One history on a document table and on a table moved to rows part-way and laid out again twice (a whole-data
    write making /catalog an array, a restore making it an object again): every version opens the same, and
    restores to versions in every era (before the move, between the layouts, after them) answer every read the
    same, with the same versions and whole data."""
    document_tools, rows_tools, rows = _pair(make_table, make_tool, owner)
    document = document_tools[("/orders", "get_all_data")].table
    document_writers = _writers(make_tool, owner, document, "dw")
    rows_writers = _writers(make_tool, owner, rows, "rw")
    both = (document_tools, rows_tools, rows)

    def write(mount, kind, arguments):
        expected = _answer(document_writers[(mount, kind)], arguments)
        assert expected[0] == "ok", expected
        assert _answer(rows_writers[(mount, kind)], arguments) == expected

    write("/orders", "create", {"elements": [{"id": 7, "customer": "New"}]})  # 2, as documents
    assert records.table_to_rows(rows.pk) is True
    write("/orders", "update", {"elements": [{"id": 1, "status": "shipped"}]})  # 3, per-record operations
    data = Table.objects.get(pk=document.pk).data
    for table in (document, rows):  # 4: /catalog becomes an array: the rows table is laid out again
        services.table_update(table=Table.objects.get(pk=table.pk), data={**data, "catalog": [{"id": "c1"}]})
    assert Table.objects.get(pk=rows.pk).rows_since_version == 4
    write("/catalog", "create", {"elements": [{"id": "c2", "n": 1}]})  # 5
    write("/orders", "delete", {"keys": [6]})  # 6
    for table in (document, rows):  # 7: back to version 3, /catalog an object again: laid out again
        assert services.table_restore(table_id=table.pk, version=3) == 7
    assert Table.objects.get(pk=rows.pk).rows_since_version == 7
    assert dict(TableCollection.objects.filter(table=rows).values_list("mount", "kind")) == {
        "/orders": "array",
        "/catalog": "object",
    }
    write("/catalog", "delete", {"keys": ["MS"]})  # 8
    assert Table.objects.get(pk=rows.pk).version == Table.objects.get(pk=document.pk).version == 8
    assert _versions(rows.pk) == _versions(document.pk)
    for target, new_version in ((5, 9), (1, 10), (6, 11), (2, 12), (9, 13), (3, 14), (4, 15)):
        assert services.table_restore(table_id=document.pk, version=target) == new_version
        assert services.table_restore(table_id=rows.pk, version=target) == new_version
        assert Table.objects.get(pk=rows.pk).data == Table.objects.get(pk=document.pk).data, target
        assert _differential(both)[("ok",)] >= 50
    assert _versions(rows.pk) == _versions(document.pk)
    write("/catalog", "create", {"elements": [{"id": "c3"}]})  # writes go on after: /catalog is an array again
    assert Table.objects.get(pk=rows.pk).data == Table.objects.get(pk=document.pk).data


def test_a_database_made_with_documents_and_history_migrates_and_answers_the_same(make_table, make_tool, owner):
    """Tables made as documents (as before rows existed) with history: tool writes, whole-document writes and a
    restore. `manage.py tables_to_rows --all` moves them; every read tool, every version's view (services and API),
    the API's table, ETag and history answer as before."""
    document_tools, _other_tools, other = _pair(make_table, make_tool, owner)
    table = document_tools[("/orders", "get_all_data")].table
    writers = _writers(make_tool, owner, table, "w")
    for mount, kind, arguments in WRITES:
        _answer(writers[(mount, kind)], arguments)
    services.table_update(table=Table.objects.get(pk=table.pk), data={**Table.objects.get(pk=table.pk).data, "x": 1})
    services.table_restore(table_id=table.pk, version=4)
    services.table_update(table=Table.objects.get(pk=other.pk), data=[{"id": 1}, {"id": 2, "n": [1]}])
    services.table_update(table=Table.objects.get(pk=other.pk), data=[{"id": 2, "n": [1, 2]}, {"id": 3}])
    client = client_for(owner)

    def answers():
        state = {"reads": [_answer(document_tools[(mount, kind)], arguments) for mount, kind, arguments in _calls()]}
        for moved in (table, other):
            current = Table.objects.get(pk=moved.pk).version
            response = client.get(f"/api/tables/{moved.pk}/")
            state[moved.pk] = {
                "versions": _versions(moved.pk),
                "api_versions": [
                    response_json(client.get(f"/api/tables/{moved.pk}/versions/{v}/")) for v in range(1, current + 1)
                ],
                "data": response_json(response)["data"],
                "etag": response["ETag"],
                "history": client.get(f"/api/tables/{moved.pk}/history/").json(),
            }
        return state

    before = answers()
    assert len(before[table.pk]["versions"]) == 14
    call_command("tables_to_rows", "--all", stdout=io.StringIO())
    assert set(Table.objects.filter(pk__in=[table.pk, other.pk]).values_list("storage", flat=True)) == {"rows"}
    assert answers() == before
