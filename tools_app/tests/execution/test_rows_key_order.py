"""A rows table answers in its records' written key order, compared as JSON text (json.dumps without sort_keys:
dict equality ignores key order), on SQLite and PostgreSQL (docs/tables-at-scale.md, "Storage": PostgreSQL's
jsonb sorts an object's keys, and each record's layout gives them back).

What the records' key order is, is what their writer gave: a table created or imported as rows, or grown by the
data tools, keeps the order it was written in. A document table moved by `tables_to_rows` keeps the order of the
document it moves, which its snapshot keeps as written on both engines (docs/history.md), so the moved table
answers as the document table did."""

import copy
import io
import json

import pytest

from tests.api_helpers import client_for, response_json
from tools_app.execution import record_pages, records
from tools_app.execution.executors import execute
from tools_app.kernel.errors import ToolError
from tools_app.models import Table, TableStorage
from tools_app.services.table_cache import table_cache

# Keys out of jsonb's order (shorter first, then bytewise) at every depth: the record, an object inside it, and
# objects inside an array inside that.
RECORDS = [
    {"customer": "Ada", "n": 1, "x": {"zeta": 1, "a": [{"bb": 1, "a": 2}]}, "id": 1},
    {"customer": "Alan", "n": 2, "x": {"zeta": 2, "a": []}, "id": 2},
    {"status": "new", "id": 3, "x": {"zeta": 3, "a": [{"bb": 0, "a": 0}, {"yy": 1, "b": 1}]}, "customer": "Grace"},
]

READ_TYPES = ("get_data_schema", "get_all_data", "query_data", "preview", "select")
CALLS = [
    ("get_data_schema", {}),
    ("get_all_data", {}),
    ("preview", {}),
    ("preview", {"offset": 1, "limit": 1}),
    ("select", {"keys": [3, 1]}),
    ("select", {"keys": ["Ada"], "field": "customer"}),
    ("query_data", {"query": "@"}),
    ("query_data", {"query": "[?n > `1` || status == 'new']"}),
    ("query_data", {"query": "[*].x"}),
    ("query_data", {"query": "[*].{c: customer, x: x, id: id}"}),
    ("query_data", {"query": "[*].[x, customer]"}),
    ("query_data", {"query": "[*].x.a[]"}),
    ("query_data", {"query": "{n: length(@), first: [0], xs: [*].x}"}),
    ("query_data", {"query": "[?id > `1`] | {k: [0].x, m: [*].customer}"}),
    ("query_data", {"query": "[-1]"}),
    ("query_data", {"query": "sort_by(@, &customer)[-2:]"}),
    ("query_data", {"query": "max_by(@, &id)"}),
]


def _tools(make_tool, owner, table, prefix):
    return {
        kind: make_tool(
            owner,
            table=table,
            type=kind,
            name=f"{prefix}_{kind}",
            json_path="",
            metadata={"key_field": "id", **({"preview_keys": ["customer", "x", "id"]} if kind == "preview" else {})},
        )
        for kind in READ_TYPES
    }


def _text(tool, arguments, fresh=table_cache.clear):
    """(the JSON text of a direct call's answer, the status and JSON text of the same call through the API's
    pipeline); `fresh()` runs before each, emptying this process's table cache by default."""
    fresh()
    try:
        direct = json.dumps(execute(tool=tool, arguments=arguments), ensure_ascii=False)
    except ToolError as exc:
        direct = f"{exc.code}: {exc}"
    fresh()
    called = client_for(tool.owner).post(f"/api/tools/{tool.pk}/call/", {"arguments": arguments}, format="json")
    return direct, called.status_code, json.dumps(response_json(called), ensure_ascii=False)


def _document_as_written(tool, arguments):
    """What the document table answers over its document in its written order, read through this process's cache
    as a whole-data write leaves it there (the write's own value), not through its snapshot."""

    def seeded():
        table_cache.clear()
        version = Table.objects.values_list("version", flat=True).get(pk=tool.table_id)
        table_cache.put(tool.table_id, version, copy.deepcopy(RECORDS), 1)

    return _text(tool, arguments, seeded)


def _rows_table(how, make_table, owner):
    """A rows table holding RECORDS, created through the service or imported through the API."""
    if how == "created":
        return make_table(owner, name="created", data=copy.deepcopy(RECORDS))
    content = b"".join(json.dumps(record).encode() + b"\n" for record in RECORDS)
    file = io.BytesIO(content)
    file.name = "records.ndjson"
    response = client_for(owner).post("/api/tables/import/", {"file": file, "name": "imported"}, format="multipart")
    assert response.status_code == 201
    return Table.objects.get(name="imported")


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "evaluated"])
@pytest.mark.parametrize("how", ["created", "imported"])
def test_a_rows_table_answers_in_the_written_key_order(how, compiled, make_table, make_tool, owner, monkeypatch):
    document = make_table(owner, name="document", data=copy.deepcopy(RECORDS), storage="document")
    stored = _rows_table(how, make_table, owner)
    assert stored.storage == TableStorage.ROWS
    if not compiled:  # every query gathered, streamed or split for the evaluator: no statement of its own
        monkeypatch.setattr(records, "compile_sql_expression", lambda *_args, **_kwargs: None)
    document_tools = _tools(make_tool, owner, document, "d")
    rows_tools = _tools(make_tool, owner, stored, "r")
    # The reference is in the written order, not jsonb's, so the comparison below tells the orders apart.
    assert _document_as_written(document_tools["get_all_data"], {})[0] == json.dumps(RECORDS)
    for kind, arguments in CALLS:
        expected = _document_as_written(document_tools[kind], arguments)
        assert expected[1] == 200, (kind, arguments)
        assert _text(rows_tools[kind], arguments) == expected, (kind, arguments)


def test_records_written_by_the_data_tools_keep_their_key_order(make_table, make_tool, owner):
    table = make_table(owner, name="written", data=[{"id": 1}])
    assert table.storage == TableStorage.ROWS
    create = make_tool(owner, table=table, type="create", name="c", json_path="", metadata={"key_field": "id"})
    update = make_tool(owner, table=table, type="update", name="u", json_path="", metadata={"key_field": "id"})
    read = make_tool(owner, table=table, type="get_all_data", name="r", json_path="", metadata={"key_field": "id"})
    execute(tool=create, arguments={"elements": copy.deepcopy(RECORDS[1:])})
    # A merge keeps the record's own keys in place and appends the new ones in the element's order.
    execute(tool=update, arguments={"elements": [{"id": 1, "x": {"zeta": 1, "a": [{"bb": 1, "a": 2}]}, "n": 1}]})
    execute(tool=update, arguments={"elements": [{"id": 2, "x": {"b": {"yy": 1, "a": 0}}}]})
    merged = [
        {"id": 1, "x": {"zeta": 1, "a": [{"bb": 1, "a": 2}]}, "n": 1},
        {"customer": "Alan", "n": 2, "x": {"zeta": 2, "a": [], "b": {"yy": 1, "a": 0}}, "id": 2},
        RECORDS[2],
    ]
    assert _text(read, {})[0] == json.dumps(merged)


@pytest.mark.parametrize("how", ["created", "imported"])
def test_whole_table_views_and_the_records_view_keep_the_written_key_order(how, make_table, owner):
    stored = _rows_table(how, make_table, owner)
    table_cache.clear()
    client = client_for(owner)
    shown = response_json(client.get(f"/api/tables/{stored.pk}/"))
    assert json.dumps(shown["data"]) == json.dumps(RECORDS)
    exported = "".join(records.document_chunks(stored.pk))
    assert exported == json.dumps(RECORDS)
    pages = {
        "first": record_pages.record_page(table_id=stored.pk, mount="", limit=2),
        "second": record_pages.record_page(table_id=stored.pk, mount="", offset=1, limit=2),
        "by key": record_pages.record_page(table_id=stored.pk, mount="", key="3"),
        "filtered": record_pages.record_page(table_id=stored.pk, mount="", filter_text="n > `1` || status == 'new'"),
        "one": [record_pages.record_get(table_id=stored.pk, mount="", key="1")],
    }
    texts = {
        name: json.dumps([item.value for item in (page if isinstance(page, list) else page.items)])
        for name, page in pages.items()
    }
    assert texts == {
        "first": json.dumps(RECORDS[:2]),
        "second": json.dumps(RECORDS[1:]),
        "by key": json.dumps(RECORDS[2:]),
        "filtered": json.dumps(RECORDS[1:]),
        "one": json.dumps(RECORDS[:1]),
    }


def test_a_moved_table_answers_in_its_document_s_key_order(make_table, make_tool, owner):
    document = make_table(owner, name="document", data=copy.deepcopy(RECORDS), storage="document")
    moved = make_table(owner, name="moved", data=copy.deepcopy(RECORDS), storage="document")
    document_tools = _tools(make_tool, owner, document, "d")
    moved_tools = _tools(make_tool, owner, moved, "m")
    table_cache.clear()  # the move reads the document as any other process would: from its snapshot
    assert records.table_to_rows(moved.pk) is True
    for kind, arguments in CALLS:
        assert _text(moved_tools[kind], arguments) == _text(document_tools[kind], arguments), (kind, arguments)
    # The document's own order, as written, read from its snapshot (the cache emptied) on both engines.
    assert _text(document_tools["get_all_data"], {})[0] == json.dumps(RECORDS)
    assert _text(moved_tools["get_all_data"], {})[0] == json.dumps(RECORDS)
