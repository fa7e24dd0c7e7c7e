"""The API's whole-table answers of a rows table stream (tools_app.api.streamed; docs/tables-at-scale.md,
"Whole-table views and versions of a rows table"): the bytes are the JSON renderer's for the same answer
gathered, the records are read CHUNK rows per statement in one snapshot, and a table larger than
TOOLHUB_MAX_EVALUATED_BYTES is read whole."""

import asyncio
import json

import pytest
from django.test import AsyncRequestFactory
from rest_framework.test import force_authenticate

from tests.api_helpers import client_for
from tools_app import services
from tools_app.api.renderers import JSONRenderer
from tools_app.api.serializers import TableSerializer
from tools_app.api.views import TableViewSet
from tools_app.execution import records
from tools_app.kernel.errors import ErrorCode, ToolError
from tools_app.models import Table, TableCollection, TableStorage
from tools_app.services import setup

pytestmark = pytest.mark.django_db

DATA = {
    "settings": {"currency": "EUR", "note": 'ü \u2028 \u2029 "q" \\ </script>'},
    "orders": [
        {"id": n, "text": f"order {n} é", "zeta": 1, "alpha": {"b": n, "a": [n, 1.5, None, True]}, "big": 1e16}
        for n in range(7)
    ],
    "catalog": {"KB": {"price": 1.5}, "": {"price": None}, "é": {"p": 1e-7}},
    "empty": [],
}


def rendered(value) -> bytes:
    return JSONRenderer().render(value)


@pytest.fixture
def streamed_table(owner, make_table, make_tool):
    """A table whose collections (an array, an object, an empty array) are stored as rows, at version 1."""
    table = make_table(owner, name="rows", data=DATA, storage="document")
    for mount in ("/orders", "/catalog", "/empty"):
        make_tool(owner, table=table, type="get_all_data", name=f"g{mount.replace('/', '_')}", json_path=mount)
    records.table_to_rows(table.pk)
    assert TableCollection.objects.filter(table=table).count() == 3
    return Table.objects.get(pk=table.pk)


def streamed_body(response) -> bytes:
    assert response.streaming
    return b"".join(response.streaming_content)


def test_get_of_a_streamed_table_streams_the_bytes_the_serializer_renders(owner, streamed_table):
    response = client_for(owner).get(f"/api/tables/{streamed_table.pk}/")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["ETag"] == f'"{streamed_table.version}"'
    assert response["Vary"] == "Accept"
    body = streamed_body(response)
    expected = rendered(TableSerializer(Table.objects.get(pk=streamed_table.pk)).data)
    assert body == expected
    assert json.loads(body)["data"] == DATA


def test_only_the_json_renderer_without_an_indent_streams(owner, other_user, streamed_table):
    """The browsable API and an indented answer are gathered (as before); another user's table is a 404, and
    the same table's plain JSON streams."""
    api = client_for(owner)
    indented = api.get(f"/api/tables/{streamed_table.pk}/", HTTP_ACCEPT="application/json; indent=2")
    assert indented.status_code == 200
    assert not indented.streaming
    assert indented.content == JSONRenderer().render(
        TableSerializer(Table.objects.get(pk=streamed_table.pk)).data, "application/json; indent=2"
    )
    page = api.get(f"/api/tables/{streamed_table.pk}/", HTTP_ACCEPT="text/html")
    assert page.status_code == 200
    assert not page.streaming
    assert b"order 6" in page.content
    hidden = client_for(other_user).get(f"/api/tables/{streamed_table.pk}/")
    assert hidden.status_code == 404
    assert not hidden.streaming
    assert hidden.json()["error"] == "NOT_FOUND"
    assert json.loads(streamed_body(api.get(f"/api/tables/{streamed_table.pk}/?format=json"))) == indented.json()


def test_the_streamed_table_and_the_document_table_send_the_same_data_text(owner, make_table, streamed_table):
    document_table = make_table(owner, name="doc", data=DATA, storage="document")
    api = client_for(owner)
    gathered = api.get(f"/api/tables/{document_table.pk}/")
    assert not gathered.streaming
    streamed = streamed_body(api.get(f"/api/tables/{streamed_table.pk}/"))

    def data_text(body: bytes) -> bytes:
        start = body.index(b',"data":') + len(b',"data":')
        return body[start : body.index(b',"redact_fields":')]

    assert data_text(streamed) == data_text(gathered.content)
    assert b"\\u2028" in data_text(streamed)


def test_a_streamed_table_over_the_evaluated_bytes_limit_is_read_whole(owner, streamed_table, settings, monkeypatch):
    """Gathered, this table is over TOOLHUB_MAX_EVALUATED_BYTES (QUERY_TOO_EXPENSIVE); streamed, it is sent whole,
    its records read CHUNK rows per statement."""
    settings.TOOLHUB_MAX_EVALUATED_BYTES = 100
    with pytest.raises(Exception) as refused:
        records.whole_document(streamed_table.pk, streamed_table.version)
    assert getattr(refused.value, "code", None) == "QUERY_TOO_EXPENSIVE"
    monkeypatch.setattr(records, "CHUNK", 2)
    statements = []
    chunks = records._chunks

    def counted(*args, **kwargs):
        for chunk in chunks(*args, **kwargs):
            statements.append(len(chunk))
            yield chunk

    monkeypatch.setattr(records, "_chunks", counted)
    body = streamed_body(client_for(owner).get(f"/api/tables/{streamed_table.pk}/"))
    assert json.loads(body)["data"] == DATA
    assert statements == [2, 2, 2, 1, 2, 1]  # 7 orders, then the catalog's 3 members; the empty array reads none


def test_the_streamed_data_is_the_version_its_etag_names_after_a_write_meanwhile(owner, streamed_table):
    """The ETag is the version read with the table; a write committed before the records are read leaves the
    answer at that version (rebuilt from the rows and the log of the snapshot)."""
    version = streamed_table.version
    encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    before = "".join(records.document_text(streamed_table.pk, version, encode, (",", ":")))
    services.table_update(table=Table.objects.get(pk=streamed_table.pk), data={**DATA, "orders": DATA["orders"][:2]})
    assert Table.objects.get(pk=streamed_table.pk).version == version + 1
    pieces = list(records.document_text(streamed_table.pk, version, encode, (",", ":")))
    assert "".join(pieces) == before
    assert json.loads(before) == DATA
    now = "".join(records.document_text(streamed_table.pk, None, encode, (",", ":")))
    assert json.loads(now)["orders"] == DATA["orders"][:2]


def test_the_current_version_streams_and_an_older_one_is_gathered(owner, streamed_table):
    services.table_update(table=Table.objects.get(pk=streamed_table.pk), data={**DATA, "empty": [{"id": "x"}]})
    api = client_for(owner)
    current = api.get(f"/api/tables/{streamed_table.pk}/versions/2/")
    assert current.status_code == 200
    body = streamed_body(current)
    assert body == rendered({"version": 2, "data": services.table_version_data(streamed_table.pk, 2)})
    assert json.loads(body) == {"version": 2, "data": {**DATA, "empty": [{"id": "x"}]}}
    older = api.get(f"/api/tables/{streamed_table.pk}/versions/1/")
    assert older.status_code == 200
    assert not older.streaming
    assert older.json() == {"version": 1, "data": DATA}
    assert api.get(f"/api/tables/{streamed_table.pk}/versions/3/").status_code == 404


def test_setup_export_with_data_streams_the_rows_tables_and_equals_the_gathered_document(
    owner, make_table, streamed_table
):
    make_table(owner, name="doc", data={"a": [1, "ü"]})
    api = client_for(owner)
    response = api.get("/api/setup/export/?data=true")
    assert response.status_code == 200
    body = streamed_body(response)
    assert body == rendered(setup.setup_export(owner=owner, with_data=True))
    assert [table["data"] for table in json.loads(body)["tables"]] == [{"a": [1, "ü"]}, DATA]
    without = api.get("/api/setup/export/")
    assert not without.streaming
    assert "data" not in without.json()["tables"][0]
    indented = api.get("/api/setup/export/?data=true", HTTP_ACCEPT="application/json; indent=2")
    assert not indented.streaming
    assert indented.json() == json.loads(body)


@pytest.mark.django_db(transaction=True)  # the pieces are read in asgiref's thread, on its own connection
def test_under_asgi_the_table_streams_from_an_asynchronous_iterator(owner, streamed_table):
    request = AsyncRequestFactory().get(f"/api/tables/{streamed_table.pk}/")
    force_authenticate(request, user=owner)
    response = TableViewSet.as_view({"get": "retrieve"})(request, pk=str(streamed_table.pk))
    assert response.status_code == 200
    assert response.is_async

    async def gathered():
        return [chunk async for chunk in response]

    body = b"".join(asyncio.run(gathered()))
    assert body == rendered(TableSerializer(Table.objects.get(pk=streamed_table.pk)).data)
    assert Table.objects.get(pk=streamed_table.pk).storage == TableStorage.ROWS


@pytest.mark.parametrize(
    ("failure", "said"),
    [
        (
            ToolError(ErrorCode.QUERY_TOO_EXPENSIVE, "over the budget"),
            b"This answer was cut after its first bytes; it is not JSON. QUERY_TOO_EXPENSIVE: over the budget\n",
        ),
        (
            RuntimeError("secret detail"),
            b"This answer was cut after its first bytes; it is not JSON. INTERNAL_ERROR: the server failed to read"
            b" the rest of this answer (logged)\n",
        ),
    ],
)
def test_a_failure_after_the_first_bytes_ends_the_body_so_it_is_not_json_and_is_logged(
    owner, streamed_table, monkeypatch, caplog, failure, said
):
    """The status is sent with the first bytes; a failure after them ends the body with a NUL byte (never valid in
    JSON, whatever came before) and a line naming it, and logs it with its traceback."""
    monkeypatch.setattr(records, "CHUNK", 2)
    chunks = records._chunks

    def failing(*args, **kwargs):
        for number, chunk in enumerate(chunks(*args, **kwargs)):
            if number == 1:
                raise failure
            yield chunk

    monkeypatch.setattr(records, "_chunks", failing)
    with caplog.at_level("ERROR", logger="toolhub.api"):
        response = client_for(owner).get(f"/api/tables/{streamed_table.pk}/")
        assert response.status_code == 200
        body = streamed_body(response)
    sent, _nul, tail = body.partition(b"\x00")
    assert tail == b"\n" + said
    assert b'"orders":[{"id":0,' in sent  # the first chunk went out before the failure
    assert b"secret detail" not in body
    with pytest.raises(json.JSONDecodeError):
        json.loads(body)
    assert [(record.levelname, record.getMessage()) for record in caplog.records] == [
        ("ERROR", f"Streamed answer to /api/tables/{streamed_table.pk}/ cut: {failure}")
    ]
    assert caplog.records[0].exc_info[1] is failure


def test_an_older_version_over_the_evaluated_bytes_is_refused_naming_it_and_the_current_one_streams(
    owner, streamed_table, settings
):
    """An older version is rebuilt in the server from the current records and the history (held whole): over
    TOOLHUB_MAX_EVALUATED_BYTES it is refused before any byte, with an error naming the version and the setting."""
    services.table_update(table=Table.objects.get(pk=streamed_table.pk), data={**DATA, "empty": [{"id": "x"}]})
    settings.TOOLHUB_MAX_EVALUATED_BYTES = 100
    api = client_for(owner)
    older = api.get(f"/api/tables/{streamed_table.pk}/versions/1/")
    assert older.status_code == 400
    assert not older.streaming
    body = older.json()
    assert body["error"] == "QUERY_TOO_EXPENSIVE"
    assert body["message"].startswith(
        "Version 1 of this table is rebuilt in the server from its current records and its history, and its records"
        " are more than 100 bytes (TOOLHUB_MAX_EVALUATED_BYTES)"
    )
    assert body["details"] == {"limit": 100, "version": 1}
    current = api.get(f"/api/tables/{streamed_table.pk}/versions/2/")
    assert current.status_code == 200
    assert json.loads(streamed_body(current)) == {"version": 2, "data": {**DATA, "empty": [{"id": "x"}]}}
