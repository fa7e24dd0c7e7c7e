"""Import streamed into rows (docs/tables-at-scale.md, "Import"): a CSV or NDJSON file becomes a table stored as
rows, written in batches in one transaction; its limits (records, bytes, one record, the owner's quota) refuse at
the row that crosses them and write nothing; the import body has its own limit; a large answer streams. On SQLite
and PostgreSQL alike."""

import io
import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.api_helpers import client_for, db_snapshot, response_json
from tools_app import services
from tools_app.api import data_tools
from tools_app.data_access.sql.codec import record_text
from tools_app.kernel.errors import ToolError
from tools_app.models import (
    Table,
    TableChange,
    TableCollection,
    TableRecord,
    TableRecordBlock,
    TableRecordLayout,
    TableSnapshot,
    TableStorage,
)
from tools_app.validators import TableDocumentEncoder

pytestmark = pytest.mark.django_db

CSV = 'sku,name,price\nKB-01,Keyboard,49.5\nMS-02,Mouse,19\nCB-03,"Cable, 2 m",4.25\n'
RECORDS = [
    {"sku": "KB-01", "name": "Keyboard", "price": 49.5},
    {"sku": "MS-02", "name": "Mouse", "price": 19},
    {"sku": "CB-03", "name": "Cable, 2 m", "price": 4.25},
]


def upload(client, content: bytes, filename: str, **fields):
    file = io.BytesIO(content)
    file.name = filename
    return client.post("/api/tables/import/", {"file": file, **fields}, format="multipart")


def test_a_csv_import_is_stored_as_rows_and_reads_as_the_document(owner):
    response = upload(client_for(owner), CSV.encode(), "p.csv", name="products")
    assert response.status_code == 201
    assert response.json()["data"] == RECORDS
    table = Table.objects.get()
    assert (table.storage, table.rows_since_version, table.version) == (TableStorage.ROWS, 1, 1)
    assert table.data_bytes == len(TableDocumentEncoder().encode(RECORDS))
    collection = TableCollection.objects.get(table=table)
    assert (collection.mount, collection.kind, collection.record_count) == ("", "array", 3)
    rows = TableRecord.objects.filter(collection=collection).order_by("position")
    assert list(rows.values_list("position", flat=True)) == [0, 1024, 2048]
    assert TableSnapshot.objects.get(table=table).data == []
    shown = client_for(owner).get(f"/api/tables/{table.pk}/")
    assert response_json(shown)["data"] == RECORDS


def test_an_ndjson_import_is_stored_as_rows(owner):
    content = b'{"id": 1, "tags": ["a"]}\n\n{"id": 2, "nested": {"b": 1, "a": 2}}\n'
    response = upload(client_for(owner), content, "e.ndjson", name="events")
    assert response.status_code == 201
    table = Table.objects.get()
    assert table.storage == TableStorage.ROWS
    assert table.data == [{"id": 1, "tags": ["a"]}, {"id": 2, "nested": {"b": 1, "a": 2}}]
    assert list(TableRecord.objects.order_by("position").values_list("key", flat=True)) == ["1", "2"]


def test_deleting_an_imported_table_deletes_its_rows_without_reading_them(owner):
    # Keys out of JSONB's order: on PostgreSQL the records have layouts, which RESTRICT their deletion.
    content = b"".join(b'{"status": "paid", "id": %d, "items": [{"sku": "A", "qty": 1}]}\n' % n for n in range(1, 31))
    assert upload(client_for(owner), content, "o.ndjson", name="orders").status_code == 201
    other = upload(client_for(owner), CSV.encode(), "p.csv", name="kept")
    assert other.status_code == 201
    table = Table.objects.get(name="orders")
    kept = Table.objects.get(name="kept")
    with CaptureQueriesContext(connection) as queries:
        services.table_delete(table=table)
    # The records go in one statement before anything reads them (the collector's RESTRICT check then finds none).
    statements = [query["sql"] for query in queries.captured_queries]
    deleted = [n for n, sql in enumerate(statements) if sql.startswith('DELETE FROM "tools_app_tablerecord" ')]
    data = '"tools_app_tablerecord"."data"'
    reads = [n for n, sql in enumerate(statements) if sql.startswith("SELECT") and data in sql]
    assert deleted
    assert all(n > deleted[0] for n in reads)
    assert not Table.objects.filter(pk=table.pk).exists()
    assert TableRecord.objects.count() == 3
    assert set(TableCollection.objects.values_list("table_id", flat=True)) == {kept.pk}
    assert TableRecordLayout.objects.exclude(collection__table=kept).count() == 0
    assert TableRecordBlock.objects.exclude(collection__table=kept).count() == 0
    assert Table.objects.get(pk=kept.pk).data == RECORDS


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        (
            "TOOLHUB_MAX_TABLE_RECORDS",
            2,
            "Row 3 (line 4): a table holds at most 2 records (TOOLHUB_MAX_TABLE_RECORDS).",
        ),
        (
            "TOOLHUB_MAX_RECORD_BYTES",
            52,
            "Row 3 (line 4): the record is 53 bytes of JSON; one record is at most 52 bytes "
            "(TOOLHUB_MAX_RECORD_BYTES).",
        ),
        (
            "TOOLHUB_MAX_ROWS_TABLE_BYTES",
            150,
            "By row 3 (line 4) the table is already over 150 bytes of JSON (TOOLHUB_MAX_ROWS_TABLE_BYTES); import a "
            "smaller file.",
        ),
    ],
)
def test_a_rows_limit_refuses_at_the_row_that_crosses_it_and_writes_nothing(owner, settings, setting, value, message):
    setattr(settings, setting, value)
    before = db_snapshot()
    response = upload(client_for(owner), CSV.encode(), "p.csv", name="products")
    assert response.status_code == 400
    assert response.json()["fields"] == {"file": [message]}
    assert db_snapshot() == before
    assert not Table.objects.exists()
    assert not TableRecord.objects.exists()


def test_a_file_over_the_rows_table_limit_is_refused_unread(owner, settings):
    settings.TOOLHUB_MAX_ROWS_TABLE_BYTES = 20
    before = db_snapshot()
    response = upload(client_for(owner), CSV.encode(), "p.csv", name="products")
    assert response.status_code == 400
    assert response.json()["fields"] == {
        "file": [f"The file is {len(CSV)} bytes; a table is at most 20 bytes (TOOLHUB_MAX_ROWS_TABLE_BYTES)."]
    }
    assert db_snapshot() == before


def test_an_import_over_the_owners_quota_is_refused_while_streaming_and_writes_nothing(owner, make_table, settings):
    make_table(owner, name="other", data={"x": "y" * 40})  # 49 bytes of the owner's quota
    settings.TOOLHUB_MAX_OWNER_DATA_BYTES = 150
    before = db_snapshot()
    response = upload(client_for(owner), CSV.encode(), "p.csv", name="products")
    assert response.status_code == 413
    body = response.json()
    assert body["error"] == "QUOTA_EXCEEDED"
    assert body["details"]["quota"] == "TOOLHUB_MAX_OWNER_DATA_BYTES"
    assert (body["details"]["limit"], body["details"]["used"]) == (150, 49)
    assert db_snapshot() == before
    assert list(Table.objects.values_list("name", flat=True)) == ["other"]


def test_the_import_body_has_its_own_limit(owner, settings):
    """The import takes bodies over TOOLHUB_MAX_REQUEST_BYTES, up to TOOLHUB_MAX_IMPORT_BYTES."""
    settings.TOOLHUB_MAX_REQUEST_BYTES = 100
    response = upload(client_for(owner), CSV.encode(), "p.csv", name="products")
    assert response.status_code == 201
    settings.TOOLHUB_MAX_IMPORT_BYTES = 100
    before = db_snapshot()
    response = upload(client_for(owner), CSV.encode(), "p.csv", name="again")
    assert response.status_code == 413
    assert response.json()["message"] == "The request body is over the limit of 100 bytes (TOOLHUB_MAX_IMPORT_BYTES)."
    assert db_snapshot() == before
    other = client_for(owner).post("/api/tables/", {"name": "t", "data": {"x": "y" * 100}}, format="json")
    assert other.status_code == 413
    assert "(TOOLHUB_MAX_REQUEST_BYTES)" in other.json()["message"]


def test_a_large_import_answer_streams_the_same_body(owner, monkeypatch):
    monkeypatch.setattr(data_tools, "STREAM_ANSWER_BYTES", 10)
    monkeypatch.setattr(data_tools, "ANSWER_CHUNK", 7)
    response = upload(client_for(owner), CSV.encode(), "p.csv", name="products")
    assert response.status_code == 201
    assert response.streaming
    body = b"".join(response.streaming_content)
    assert int(response["Content-Length"]) == len(body)
    assert json.loads(body)["data"] == RECORDS


def test_generated_tools_after_an_import_key_and_write_the_rows(owner):
    """generate-tools on an imported table: its first tool keys the records by the detected key field (`sku`);
    the generated writes then work on the rows, and the table reads as the document would."""
    client = client_for(owner)
    table_id = upload(client, CSV.encode(), "p.csv", name="products").json()["id"]
    assert TableCollection.objects.get(table_id=table_id).key_field == "sku"  # guessed from the first record
    generated = client.post(f"/api/tables/{table_id}/generate-tools/", {"writes": True}, format="json")
    assert generated.status_code == 201, generated.json()
    assert TableCollection.objects.get(table_id=table_id).key_field == "sku"
    keys = TableRecord.objects.filter(collection__table_id=table_id).order_by("position").values_list("key", flat=True)
    assert list(keys) == ["KB-01", "MS-02", "CB-03"]
    table = Table.objects.get(pk=table_id)
    assert table.version == 1
    from tools_app.execution.executors import execute
    from tools_app.models import Tool

    update = Tool.objects.get(table_id=table_id, type="update")
    assert execute(tool=update, arguments={"elements": [{"sku": "MS-02", "price": 21}]}) == {
        "updated": 1,
        "version": 2,
    }
    assert Table.objects.get(pk=table_id).data[1] == {"sku": "MS-02", "name": "Mouse", "price": 21}
    assert TableChange.objects.filter(table_id=table_id).count() == 1


def test_writes_to_a_rows_table_meet_the_rows_limits_not_the_document_cap(owner, make_tool, settings):
    """A rows table is not bound by TOOLHUB_MAX_TABLE_BYTES (the document cap) but by the rows limits: the record
    count, one record's bytes and the table's bytes; over one, VALIDATION_ERROR naming it, nothing written."""
    from tools_app.execution.executors import execute
    from tools_app.kernel.errors import ToolError

    table_id = upload(client_for(owner), CSV.encode(), "p.csv", name="products").json()["id"]
    table = Table.objects.get(pk=table_id)
    create = make_tool(owner, table=table, type="create", json_path="", metadata={"key_field": "sku"})
    settings.TOOLHUB_MAX_TABLE_BYTES = 50  # the table is already larger: a document's cap
    assert execute(tool=create, arguments={"elements": [{"sku": "HD-04"}]}) == {"created": 1, "version": 2}
    cases = [
        ("TOOLHUB_MAX_TABLE_RECORDS", 4, [{"sku": "X"}], "The table holds 4 records; 1 more would be over its 4"),
        ("TOOLHUB_MAX_RECORD_BYTES", 20, [{"sku": "Y", "name": "long name"}], "Element 0 is 33 bytes of JSON"),
        ("TOOLHUB_MAX_ROWS_TABLE_BYTES", 180, [{"sku": "Z"}], "at most 180 bytes of JSON (TOOLHUB_MAX_ROWS_TABLE"),
    ]
    for setting, value, elements, message in cases:
        setattr(settings, setting, value)
        before = db_snapshot()
        with pytest.raises(ToolError) as refused:
            execute(tool=create, arguments={"elements": elements})
        assert refused.value.code == "VALIDATION_ERROR"
        assert message in str(refused.value)
        assert setting in str(refused.value)
        assert db_snapshot() == before
        setattr(settings, setting, 10**9)
    assert Table.objects.get(pk=table_id).version == 2
    assert TableRecord.objects.filter(collection__table_id=table_id).count() == 4


def test_under_asgi_a_large_answer_streams_from_an_asynchronous_iterator(owner, monkeypatch):
    """Django gathers a synchronous iterator into one list before an ASGI server sends it: the answer served under
    ASGI iterates asynchronously, chunk by chunk, so the table's text is never held whole there either."""
    import asyncio

    from django.test import AsyncRequestFactory
    from rest_framework.test import force_authenticate

    monkeypatch.setattr(data_tools, "STREAM_ANSWER_BYTES", 10)
    monkeypatch.setattr(data_tools, "ANSWER_CHUNK", 7)
    file = io.BytesIO(CSV.encode())
    file.name = "p.csv"
    request = AsyncRequestFactory().post("/api/tables/import/", {"file": file, "name": "products"})
    force_authenticate(request, user=owner)
    response = data_tools.TableImportView.as_view()(request)
    assert response.status_code == 201
    assert response.is_async

    async def gathered():
        return [chunk async for chunk in response]

    chunks = asyncio.run(gathered())
    assert max(len(chunk) for chunk in chunks) == 7
    assert json.loads(b"".join(chunks))["data"] == RECORDS


def test_the_admin_download_of_a_rows_table_streams_the_same_document(client, owner, make_table, make_tool):
    """The whole-table export of a rows table streams its records CHUNK rows at a time, and its text is the one
    the document table's download writes, collections at any mount (an array, an object, nested) included."""
    from django.urls import reverse

    from tools_app.execution import records

    data = {
        "settings": {"currency": "EUR", "note": "ü \u2028"},
        "orders": [{"id": n, "text": f"order {n}", "nested": {"b": n, "a": [n]}} for n in range(5)],
        "catalog": {"KB": {"price": 1.5}, "": {"price": None}, "é": {"p": 1e16}},
        "deep": {"list": [{"id": "x"}]},
    }
    document_table = make_table(owner, name="doc", data=data, storage="document")
    rows_table = make_table(owner, name="rows", data=data, storage="document")
    for mount in ("/orders", "/catalog", "/deep/list"):
        make_tool(owner, table=rows_table, type="get_all_data", name=f"g{mount.replace('/', '_')}", json_path=mount)
    records.table_to_rows(rows_table.pk)
    assert TableCollection.objects.filter(table=rows_table).count() == 3
    client.force_login(owner)
    expected = client.get(reverse("admin:tools_app_table_download", args=[document_table.pk]))
    streamed = client.get(reverse("admin:tools_app_table_download", args=[rows_table.pk]))
    assert streamed.streaming
    assert streamed["Content-Disposition"] == 'attachment; filename="rows.json"'
    assert b"".join(streamed.streaming_content) == expected.content
    assert json.loads(expected.content) == data


def test_a_rows_table_export_reads_its_records_in_chunks(owner, make_table, monkeypatch):
    from tools_app.execution import records

    table = make_table(owner, name="rows", data=[{"id": n} for n in range(7)], storage="rows")
    monkeypatch.setattr(records, "CHUNK", 3)
    pieces = list(records.document_chunks(table.pk))
    assert pieces == [
        "",
        "[",
        '{"id": 0}, {"id": 1}, {"id": 2}',
        ', {"id": 3}, {"id": 4}, {"id": 5}',
        ', {"id": 6}',
        "]",
        "",
    ]


def test_describing_a_large_rows_table_reads_only_its_first_records(owner, make_table, monkeypatch):
    """generate-tools, description drift and the admin's shape read a rows table's first SCHEMA_SAMPLE records of
    each collection, with the collection's true count: a table over TOOLHUB_MAX_EVALUATED_BYTES still gets its
    tools, described with its size and key field."""
    from tools_app import services
    from tools_app.execution import records
    from tools_app.models import Tool
    from tools_app.toolsets import description_drift, generate_tools

    table = make_table(owner, name="big", data=[{"sku": f"S{n:04d}", "n": n} for n in range(60)], storage="rows")
    monkeypatch.setattr(records, "SCHEMA_SAMPLE", 25)
    monkeypatch.setattr(records, "CHUNK", 10)
    version, data, counts = services.table_data_sampled(table.pk)
    assert (version, len(data), counts) == (1, 25, {"": 60})
    monkeypatch.setattr(records, "max_evaluated_bytes", lambda: 500)
    with pytest.raises(ToolError) as refused:  # the whole table is over the evaluator's bytes
        Table.objects.get(pk=table.pk).data  # noqa: B018
    assert refused.value.code == "QUERY_TOO_EXPENSIVE"
    generated = generate_tools(owner=owner, table=table, json_path="", writes=True)
    query = next(tool for tool in generated.tools if tool.type == "query_data")
    assert "60 records" in query.description
    assert Tool.objects.get(pk=query.pk).metadata["key_field"] == "sku"
    assert TableCollection.objects.get(table=table).key_field == "sku"
    assert description_drift(Tool.objects.get(pk=query.pk)) is None


@pytest.mark.parametrize(
    ("first", "key_field"),
    [
        ({"name": "a", "id": 1, "sku": "x"}, "id"),
        ({"name": "a", "sku": "x", "product_code": "y"}, "product_code"),
        ({"name": "a", "key": True}, "id"),
        ({"name": "a"}, "id"),
        ("not a record", "id"),
    ],
)
def test_an_imported_table_is_keyed_by_the_field_generate_tools_would_pick(first, key_field):
    from tools_app.services.tables import likely_key_field

    assert likely_key_field(first) == key_field


def test_saving_an_imported_table_with_its_data_unchanged_is_no_data_write(owner):
    """The admin's form sends the data it shows: on a rows table the same document renames; a changed one is a
    data write of the changed records only (tools_app/tests/execution/test_rows_replace.py)."""
    from tools_app import services

    table_id = upload(client_for(owner), CSV.encode(), "p.csv", name="products").json()["id"]
    table = Table.objects.get(pk=table_id)
    services.table_update(table=table, name="renamed", data=RECORDS)
    table.refresh_from_db()
    assert (table.name, table.version) == ("renamed", 1)
    services.table_update(table=table, name="again", data=RECORDS[:1])
    table.refresh_from_db()
    assert (table.name, table.version, table.data) == ("again", 2, RECORDS[:1])
    assert TableRecord.objects.filter(collection__table=table).count() == 1


def test_an_ndjson_import_walks_a_record_only_when_its_text_may_break_a_rule(owner, settings, monkeypatch):
    """A record's JSON check and nesting walk run only for a line whose text may hold what they refuse (a NaN,
    Infinity, NUL or surrogate escape; more brackets than the depth allows): the rest of a large file is
    checked by its text alone. What the walks refuse is still refused, nothing written."""
    from tools_app.services import imports

    walked = {"validate_json_value": 0, "nesting_beyond": 0}

    def counted(name):
        original = getattr(imports, name)

        def call(*args, **kwargs):
            walked[name] += 1
            return original(*args, **kwargs)

        return call

    for name in walked:
        monkeypatch.setattr(imports, name, counted(name))
    settings.TOOLHUB_MAX_TABLE_DEPTH = 3  # a record may nest 2 levels: at most 2 brackets skip the walk
    content = (
        b'{"id": 1, "tags": ["a"]}\n'
        b'{"id": 2, "note": "NaN is no number", "a": [1], "b": [2]}\n'
        b'{"id": 3, "note": "plain"}\n'
    )
    response = upload(client_for(owner), content, "e.ndjson", name="events")
    assert response.status_code == 201
    assert walked == {"validate_json_value": 1, "nesting_beyond": 1}
    assert Table.objects.get().data[1] == {"id": 2, "note": "NaN is no number", "a": [1], "b": [2]}

    refused = {
        b'{"id": 1, "x": NaN}\n': "NaN and Infinity are not JSON numbers.",
        b'{"id": 1, "x": -Infinity}\n': "NaN and Infinity are not JSON numbers.",
        b'{"id": 1, "x": "a\\u0000b"}\n': "Strings must not contain the character U+0000 (NUL).",
        b'{"id": 1, "x": [[1]]}\n': "A table document nests at most 3 levels of objects and arrays "
        "(TOOLHUB_MAX_TABLE_DEPTH); this one goes deeper at [0].x[0].",
    }
    before = db_snapshot()
    for line, message in refused.items():
        response = upload(client_for(owner), line, "bad.ndjson", name="bad")
        assert response.status_code == 400, line
        assert message in json.dumps(response.json()), (line, response.json())
    assert db_snapshot() == before
    assert walked == {"validate_json_value": 4, "nesting_beyond": 2}


def test_an_ndjson_line_with_a_number_beyond_a_float_is_refused_before_its_nesting(owner, settings):
    """A line holding a number beyond a 64-bit float is refused naming it, as its parse refuses it, even when the
    line also nests too deep; nothing is written."""
    settings.TOOLHUB_MAX_TABLE_DEPTH = 3
    before = db_snapshot()
    response = upload(client_for(owner), b'{"id": 1}\n{"id": 2, "x": [[[1e400]]]}\n', "deep.ndjson", name="deep")
    assert response.status_code == 400
    assert response.json()["fields"] == {
        "file": [
            "Line 2: the number 1e400 at column 19 is too large: numbers are at most about 1.8e308 (a 64-bit float)."
        ]
    }
    assert db_snapshot() == before


def test_an_import_answers_and_stores_each_record_as_its_own_encodings(owner):
    """Each record is encoded once for both texts: the answer's document is json.JSONEncoder()'s text of the records
    (data_bytes its length) and each row holds codec.record_text's, for ASCII records and for those beyond it."""
    records = [
        {"id": 1, "note": "a, b: c", "total": 1e16, "tiny": 1.5e-07, "big": 10**20, "items": [{"sku": "K", "q": 2}]},
        {"id": 2, "note": "caf\u00e9 \U0001f600", "k\x7f": "\x7f", "nested": {"b": 1, "a": [None, True, -0.0]}},
        {"id": 3, "note": "NaN and Infinity, as words"},
    ]
    content = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records).encode()
    response = upload(client_for(owner), content, "e.ndjson", name="events")
    assert response.status_code == 201
    document = json.JSONEncoder().encode(records)
    assert document.encode() in response.content
    table = Table.objects.get()
    assert table.data_bytes == len(document)
    assert table.data == records
    with connection.cursor() as cursor:
        cast = "::text" if connection.vendor == "postgresql" else ""
        cursor.execute(f'SELECT data{cast} FROM "{TableRecord._meta.db_table}" ORDER BY position')
        stored = [row[0] for row in cursor.fetchall()]
    expected = [record_text(record, dialect=connection.vendor) for record in records]
    if connection.vendor == "postgresql":
        # JSONB keeps its own text: the same values as the text written (numbers as written, no exponent).
        assert [json.loads(text) for text in stored] == [json.loads(text) for text in expected]
        assert "e+" not in "".join(stored)
    else:
        assert stored == expected


def _write_stream(records, *, batch):
    """store.write_records of `records` (a stream) into a new collection; its id."""
    from tools_app.data_access.sql import store

    table = Table.objects.create(owner=_stream_owner(), name=f"s{Table.objects.count()}", storage=TableStorage.ROWS)
    collection = TableCollection.objects.create(table=table, mount="", kind="array", key_field="id")
    with connection.cursor() as cursor:
        count = store.write_records(
            cursor,
            dialect=connection.vendor,
            records_table=TableRecord._meta.db_table,
            layouts_table=TableRecordLayout._meta.db_table,
            collection_id=collection.pk,
            value=records,
            batch=batch,
            key_of=lambda record: str(record["id"]),
        )
    assert count == sum(1 for _ in TableRecord.objects.filter(collection=collection))
    return collection.pk


def _stream_owner():
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get_or_create(username="stream-owner")[0]


def _shaped(n: int) -> dict:
    """Record n: keys out of JSONB's order (a layout on PostgreSQL); from 400 on a nested shape, from 650 another."""
    if n < 400:
        return {"id": n, "status": "paid", "b": n % 7}
    if n < 650:
        return {"id": n, "items": [{"sku": f"S{n}", "qty": n % 3}]}
    return {"note": "x" * (n % 5), "id": n, "deep": {"zz": [{"b": 1, "a": 2}], "a": None}}


def test_a_stream_written_past_its_first_batches_reads_back_in_order_with_each_layout():
    """More rows than a batch, new layouts appearing after the first batches (on PostgreSQL while the rows' COPY
    is open: it is ended for the layout's statements and opened again): every record reads back as written."""
    from tools_app.data_access.sql import store

    records = [_shaped(n) for n in range(700)]
    collection_id = _write_stream(iter(records), batch=150)
    with connection.cursor() as cursor:
        read = list(
            store.iter_records(
                cursor,
                dialect=connection.vendor,
                records_table=TableRecord._meta.db_table,
                layouts_table=TableRecordLayout._meta.db_table,
                collection_id=collection_id,
            )
        )
    assert read == [(str(n), record) for n, record in enumerate(records)]
    assert [json.dumps(record) for _key, record in read] == [json.dumps(record) for record in records]  # key order
    positions = TableRecord.objects.filter(collection_id=collection_id).order_by("position")
    assert list(positions.values_list("position", flat=True)) == [n * 1024 for n in range(700)]
    layouts = TableRecordLayout.objects.filter(collection_id=collection_id).count()
    assert layouts == (3 if connection.vendor == "postgresql" else 0)
    assert TableCollection.objects.get(pk=collection_id).field_kinds["fields"]["deep"] == ["null", "object"]


def test_a_stream_that_raises_past_its_first_batch_writes_nothing_and_the_connection_goes_on():
    """The stream's refusal with rows already sent (on PostgreSQL inside the open COPY, which is aborted): the
    refusal is the stream's own exception, the transaction rolls back, and the connection takes the next
    statement."""
    from django.db import transaction

    class Refused(Exception):
        pass

    def stream():
        for n in range(700):
            if n == 500:
                raise Refused("row 500")
            yield _shaped(n)

    before = db_snapshot()
    with pytest.raises(Refused, match="row 500"), transaction.atomic():
        _write_stream(stream(), batch=150)
    assert db_snapshot() == before
    assert not TableRecord.objects.exists()
    assert _write_stream(iter([_shaped(1), _shaped(2)]), batch=150)
    assert TableRecord.objects.count() == 2


def test_an_import_over_the_quota_past_its_first_batch_is_refused_and_writes_nothing(owner, settings):
    """The quota crossed by row 5,501, after a batch of 5,000 rows went out (on PostgreSQL inside the COPY, where
    the connection takes no other statement): QUOTA_EXCEEDED with the exact sizes, nothing written."""
    records = [{"id": n} for n in range(1, 5502)]
    content = "".join(json.dumps(record) + "\n" for record in records).encode()
    settings.TOOLHUB_MAX_OWNER_DATA_BYTES = len(json.dumps(records[:5500]))
    before = db_snapshot()
    response = upload(client_for(owner), content, "n.ndjson", name="numbers")
    assert response.status_code == 413
    body = response.json()
    assert body["error"] == "QUOTA_EXCEEDED"
    assert body["details"] == {
        "quota": "TOOLHUB_MAX_OWNER_DATA_BYTES",
        "limit": len(json.dumps(records[:5500])),
        "used": 0,
        "requested": len(json.dumps(records)),
    }
    assert db_snapshot() == before
    assert not Table.objects.exists()
    settings.TOOLHUB_MAX_OWNER_DATA_BYTES = len(json.dumps(records))
    assert upload(client_for(owner), content, "n.ndjson", name="numbers").status_code == 201
    assert TableRecord.objects.count() == 5501


def test_an_upload_spooled_to_disk_imports_and_is_refused_as_one_in_memory(owner, settings):
    """An upload over FILE_UPLOAD_MAX_MEMORY_SIZE is a temporary file behind two wrappers, which the import reads
    directly: the same table, and the same refusal naming the line of a byte that is not UTF-8."""
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 10
    response = upload(client_for(owner), CSV.encode(), "p.csv", name="products")
    assert response.status_code == 201
    assert response.json()["data"] == RECORDS
    before = db_snapshot()
    response = upload(client_for(owner), b"sku,name\nA,caf\xe9\n", "q.csv", name="bad")
    assert response.status_code == 400
    assert response.json()["fields"] == {
        "file": [
            "The file is not UTF-8 text: line 2 has the byte 0xe9 (at byte offset 14). Save it as UTF-8 and upload it "
            "again."
        ]
    }
    assert db_snapshot() == before


def test_a_failed_batch_written_while_the_next_is_encoded_is_the_engines_error_and_writes_nothing():
    """A batch that breaks a constraint fails in the engine while the next one is being made (SQLite: on the
    writer's thread; PostgreSQL: inside the open COPY): write_records raises Django's IntegrityError, as a
    statement run in place would, and the transaction rolls back."""
    from django.db import IntegrityError, transaction

    from tools_app.data_access.sql import store

    table = Table.objects.create(owner=_stream_owner(), name="dup", storage=TableStorage.ROWS)
    collection = TableCollection.objects.create(table=table, mount="", kind="array", key_field="id")
    positions = [n * 1024 for n in range(300)]
    positions[130] = positions[10]  # the second batch (a full one) holds a position the first wrote
    before = db_snapshot()
    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        store.write_records(
            cursor,
            dialect=connection.vendor,
            records_table=TableRecord._meta.db_table,
            layouts_table=TableRecordLayout._meta.db_table,
            collection_id=collection.pk,
            value=iter([{"id": n} for n in range(300)]),
            batch=120,
            positions=positions,
        )
    assert db_snapshot() == before
    assert not TableRecord.objects.exists()
