"""Size and shape limits with clear errors, on every surface (docs/input-limits.md).

Request bodies over the limit are 413 (the API's error shape, the admin's page, a JSON-RPC error on MCP),
checked in process and on a real uvicorn socket; table documents over TOOLHUB_MAX_TABLE_BYTES or
TOOLHUB_MAX_TABLE_DEPTH are VALIDATION_ERROR at every write, nothing written; a document stored before the
limits (nested ~900 deep) still renders on every admin page.
"""

import json
import socket
import time

import pytest
from django.urls import reverse

from mcp_app.tests.mcp_harness import Harness, rpc_body
from tests.api_helpers import asgi_post, client_for, db_snapshot
from tests.live_server import Uvicorn, run_python, server_database
from toolhub.request_limits import cap_request_body
from tools_app.models import CallLog, Table, TableSnapshot

pytestmark = pytest.mark.django_db


def nested(depth: int, leaf=1):
    """`depth` objects inside each other: {"a": {"a": ... leaf}}."""
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def table_state(table) -> tuple:
    row = Table.objects.get(pk=table.pk)
    return row.version, row.data


#
# Request bodies: the API and the admin (Django)
#


def test_api_body_over_the_limit_is_413_and_writes_nothing(owner, settings):
    """A body over TOOLHUB_MAX_REQUEST_BYTES: 413 with the API's error shape naming the limit."""
    # given
    settings.TOOLHUB_MAX_REQUEST_BYTES = 1000
    before = db_snapshot()
    # when
    response = client_for(owner).post("/api/tables/", {"name": "big", "data": ["x" * 2000]}, format="json")
    # then
    assert response.status_code == 413
    assert response.json() == {
        "error": "REQUEST_TOO_LARGE",
        "message": "The request body is over the limit of 1000 bytes (TOOLHUB_MAX_REQUEST_BYTES).",
    }
    assert db_snapshot() == before


def test_admin_body_over_the_limit_is_413_and_writes_nothing(client, owner, settings):
    """The admin: 413 with a short page saying the same; nothing written."""
    # given
    settings.TOOLHUB_MAX_REQUEST_BYTES = 1000
    client.force_login(owner)
    before = db_snapshot()
    # when
    response = client.post(
        reverse("admin:tools_app_table_add"), {"name": "big", "description": "", "data": json.dumps(["x" * 2000])}
    )
    # then
    assert response.status_code == 413
    assert response["Content-Type"] == "text/html; charset=utf-8"
    assert b"The request body is over the limit of 1000 bytes (TOOLHUB_MAX_REQUEST_BYTES)." in response.content
    assert db_snapshot() == before


def test_asgi_guard_stops_a_chunked_body_at_the_limit(owner, settings):
    """Under ASGI, a body that declares no length is stopped as soon as it passes the limit (the rest unread)."""
    # given
    from django.core.asgi import get_asgi_application

    settings.TOOLHUB_MAX_REQUEST_BYTES = 1000
    app = cap_request_body(get_asgi_application())
    chunks = [b'{"name": "big", "data": ["' + b"x" * 600, b"x" * 600, b"x" * 600, b'"]}']
    before = db_snapshot()
    # when
    status, body, read, _ = asgi_post(app, "/api/tables/", chunks, [])
    # then
    assert status == 413
    assert json.loads(body) == {
        "error": "REQUEST_TOO_LARGE",
        "message": "The request body is over the limit of 1000 bytes (TOOLHUB_MAX_REQUEST_BYTES).",
    }
    assert read == 2
    assert db_snapshot() == before


def test_asgi_guard_answers_a_declared_length_unread(settings):
    """A Content-Length over the limit is answered before one byte of the body is read."""
    # given
    from django.core.asgi import get_asgi_application

    settings.TOOLHUB_MAX_REQUEST_BYTES = 1000
    app = cap_request_body(get_asgi_application())
    # when
    status, body, read, _ = asgi_post(app, "/api/tables/", [b"x" * 10], [(b"content-length", b"5000")])
    # then
    assert (status, read) == (413, 0)
    assert json.loads(body)["error"] == "REQUEST_TOO_LARGE"


#
# Request bodies: MCP
#


@pytest.fixture
def writer_shop(owner, table, make_tool, instance, bind, make_api_key):
    tool = make_tool(owner, table, type="create", name="orders_create", description="Add orders.")
    bind(instance, tool)
    bind(instance, make_tool(owner, table, type="update", name="orders_update", description="Change orders."))
    _, key = make_api_key(instance)
    return {"tool": tool, "key": key, "table": table}


MCP_TOO_LARGE = {
    "jsonrpc": "2.0",
    "id": None,
    "error": {
        "code": -32600,
        "message": "REQUEST_TOO_LARGE: the request body is over the limit of 1000 bytes "
        "(TOOLHUB_MAX_MCP_REQUEST_BYTES).",
        "data": {"error": "REQUEST_TOO_LARGE", "limit_bytes": 1000},
    },
}


def test_mcp_body_over_the_limit_is_413_with_a_jsonrpc_error(writer_shop, settings):
    """/mcp/<slug>/: 413 whose body is a JSON-RPC error naming REQUEST_TOO_LARGE and the limit; nothing runs."""
    # given
    settings.TOOLHUB_MAX_MCP_REQUEST_BYTES = 1000
    body = rpc_body("tools/call", {"name": "orders_create", "arguments": {"elements": [{"id": 9, "note": "x" * 2000}]}})
    before = table_state(writer_shop["table"])
    # when
    response = Harness().post("shop", body, key=writer_shop["key"])
    # then
    assert response.status_code == 413
    assert response.json() == MCP_TOO_LARGE
    assert table_state(writer_shop["table"]) == before
    assert CallLog.objects.count() == 0


def test_mcp_body_without_a_length_is_cut_at_the_limit(writer_shop, settings):
    """A body sent without Content-Length is read only until it passes the limit; 413, the rest unread."""
    # given
    from mcp_app.transport import McpEndpoint

    settings.TOOLHUB_MAX_MCP_REQUEST_BYTES = 1000
    chunks = [b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "pad": "', b"x" * 600, b"x" * 600, b'"}']
    # when
    status, body, read, _ = asgi_post(McpEndpoint(db_threads=0), "/mcp/shop/", chunks, [])
    # then
    assert (status, read) == (413, 3)
    assert json.loads(body) == MCP_TOO_LARGE


#
# Request bodies over a real socket (uvicorn, the project's server)
#


@pytest.fixture(scope="module")
def limited_server(tmp_path_factory):
    """uvicorn on its own database, limits lowered to 100,000 bytes (API) and 50,000 bytes (MCP)."""
    with server_database("limits", tmp_path_factory.mktemp("limits"), secret="s") as env:
        env = {**env, "TOOLHUB_MAX_REQUEST_BYTES": "100000", "TOOLHUB_MAX_MCP_REQUEST_BYTES": "50000"}
        key = run_python(
            env,
            "from django.contrib.auth import get_user_model; from tools_app import services\n"
            "u = get_user_model().objects.create_user('live', password='pw-123456!')\n"
            "i = services.instance_create(owner=u, slug='live', name='Live')\n"
            "print(services.api_key_issue(mcp_instance=i, label='t')[1])",
        )
        with Uvicorn(env) as server:
            yield {"server": server, "key": key, "env": env}


def raw_exchange(port: int, head: bytes, body_chunks: list[bytes]) -> bytes:
    """Send `head` and the chunks on a plain socket (a refused body may be cut short); return the response."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head)
        for chunk in body_chunks:
            try:
                sock.sendall(chunk)
            except OSError:  # the server answered and closed without reading the rest
                break
        received = b""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                data = sock.recv(65536)
            except ConnectionResetError:
                break
            if not data:
                break
            received += data
            if b"\r\n\r\n" in received:
                headers, _, rest = received.partition(b"\r\n\r\n")
                lines = headers.split(b"\r\n")
                length = next(
                    (int(line.split(b":")[1]) for line in lines if line.lower().startswith(b"content-length:")), None
                )
                if length is not None and len(rest) >= length:
                    break
        return received


def split_response(raw: bytes) -> tuple[int, bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


@pytest.mark.e2e
def test_live_api_declared_oversize_is_413_without_reading_the_body(limited_server):
    """uvicorn: a POST declaring 100 MB gets 413 at once; the client never has to send the body."""
    # when
    head = (
        b"POST /api/tables/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100000000\r\n\r\n"
    )
    status, body = split_response(raw_exchange(limited_server["server"].port, head, []))
    # then
    assert status == 413
    assert json.loads(body) == {
        "error": "REQUEST_TOO_LARGE",
        "message": "The request body is over the limit of 100000 bytes (TOOLHUB_MAX_REQUEST_BYTES).",
    }


@pytest.mark.e2e
def test_live_api_chunked_oversize_is_413(limited_server):
    """uvicorn: a chunked body (no length) is refused once it passes the limit."""
    # given
    head = (
        b"POST /api/tables/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )
    chunk = b"x" * 30_000
    chunks = [f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n" for _ in range(10)] + [b"0\r\n\r\n"]
    # when
    status, body = split_response(raw_exchange(limited_server["server"].port, head, chunks))
    # then
    assert status == 413
    assert json.loads(body)["error"] == "REQUEST_TOO_LARGE"


@pytest.mark.e2e
def test_live_mcp_oversize_is_413_with_a_jsonrpc_error(limited_server):
    """uvicorn, /mcp/<slug>/: 413 with the JSON-RPC error, for a declared length and for a body actually sent."""
    # given
    payload = json.dumps(rpc_body("tools/list")).encode()[:-1] + b',"pad":"' + b"x" * 60_000 + b'"}'
    common = (
        f"POST /mcp/live/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nAuthorization: Bearer {limited_server['key']}\r\n"
    ).encode()
    # when
    declared = split_response(
        raw_exchange(limited_server["server"].port, common + b"Content-Length: 100000000\r\n\r\n", [])
    )
    sent = split_response(
        raw_exchange(
            limited_server["server"].port, common + f"Content-Length: {len(payload)}\r\n\r\n".encode(), [payload]
        )
    )
    # then
    expected = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32600,
            "message": "REQUEST_TOO_LARGE: the request body is over the limit of 50000 bytes "
            "(TOOLHUB_MAX_MCP_REQUEST_BYTES).",
            "data": {"error": "REQUEST_TOO_LARGE", "limit_bytes": 50000},
        },
    }
    assert declared[0] == sent[0] == 413
    assert json.loads(declared[1]) == json.loads(sent[1]) == expected


#
# Table documents: depth and size, at every write
#

TOO_DEEP = (
    "A table document nests at most 64 levels of objects and arrays (TOOLHUB_MAX_TABLE_DEPTH); this one goes "
    "deeper at {where}."
)


def test_api_table_create_refuses_a_document_too_deep(owner):
    """POST /api/tables/ with 65 levels: 400 VALIDATION_ERROR on data naming the limit; 64 levels is fine."""
    # given
    before = db_snapshot()
    # when
    refused = client_for(owner).post("/api/tables/", {"name": "deep", "data": nested(65)}, format="json")
    written = db_snapshot()
    accepted = client_for(owner).post("/api/tables/", {"name": "ok", "data": nested(64)}, format="json")
    # then
    assert refused.status_code == 400
    assert refused.json() == {
        "error": "VALIDATION_ERROR",
        "message": "Invalid input.",
        "fields": {"data": [TOO_DEEP.format(where="a" + ".a" * 63)]},
    }
    assert written == before
    assert accepted.status_code == 201


def test_api_table_update_refuses_a_document_too_large(owner, make_table, settings):
    """PATCH /api/tables/<id>/ over TOOLHUB_MAX_TABLE_BYTES: 400 naming the limit and the size; unchanged."""
    # given
    table = make_table(owner, data=[1])
    settings.TOOLHUB_MAX_TABLE_BYTES = 100
    before = db_snapshot()
    # when
    response = client_for(owner).patch(f"/api/tables/{table.pk}/", {"data": ["x" * 200]}, format="json")
    # then
    assert response.status_code == 400
    assert response.json()["fields"] == {
        "data": ["A table document is at most 100 bytes of JSON (TOOLHUB_MAX_TABLE_BYTES); this one is 204 bytes."]
    }
    assert db_snapshot() == before


def test_admin_table_form_refuses_a_document_too_deep(client, owner):
    """The admin's table form: the same error on data; nothing written."""
    # given
    client.force_login(owner)
    before = db_snapshot()
    # when
    response = client.post(
        reverse("admin:tools_app_table_add"), {"name": "deep", "description": "", "data": json.dumps(nested(70))}
    )
    # then
    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {"data": [TOO_DEEP.format(where="a" + ".a" * 63)]}
    assert db_snapshot() == before


def test_pipeline_create_refuses_an_element_too_deep_on_every_surface(owner, writer_shop):
    """create over MCP and the API: an element that would nest the table 65 deep is VALIDATION_ERROR."""
    # given
    table, tool = writer_shop["table"], writer_shop["tool"]
    before = table_state(table)
    element = {"id": 9, "deep": nested(63)}  # the root array is level 1, the element 2, `deep` 3 to 65
    # when
    over_mcp = Harness().call("shop", writer_shop["key"], "orders_create", {"elements": [element]})["result"]
    over_api = client_for(owner).post(
        f"/api/tools/{tool.pk}/call/", {"arguments": {"elements": [element]}}, format="json"
    )
    # then
    message = (
        "A table document nests at most 64 levels of objects and arrays (TOOLHUB_MAX_TABLE_DEPTH): "
        "elements[0]" + ".deep" + ".a" * 62 + " would go deeper at the mount '(root)'. Nothing was written."
    )
    assert over_mcp["isError"] is True
    assert over_mcp["content"][0]["text"] == f"VALIDATION_ERROR: {message}"
    assert over_api.status_code == 400
    assert over_api.json() == {
        "error": "VALIDATION_ERROR",
        "message": message,
        "details": {"path": ["elements", 0], "limit": 64},
    }
    assert table_state(table) == before
    assert list(CallLog.objects.values_list("error_code", flat=True)) == ["VALIDATION_ERROR", "VALIDATION_ERROR"]


def test_pipeline_element_at_the_depth_limit_is_written(writer_shop):
    """One level less fits exactly: written, version +1."""
    # given
    element = {"id": 9, "deep": nested(62)}
    # when
    result = Harness().call("shop", writer_shop["key"], "orders_create", {"elements": [element]})["result"]
    # then
    assert result["isError"] is False
    assert table_state(writer_shop["table"])[0] == 2


def test_pipeline_update_refuses_a_patch_too_deep(writer_shop):
    """update (merge patch) is held to the same depth."""
    # given
    before = table_state(writer_shop["table"])
    # when
    result = Harness().call("shop", writer_shop["key"], "orders_update", {"elements": [{"id": 1, "deep": nested(63)}]})
    # then
    assert result["result"]["content"][0]["text"].startswith(
        "VALIDATION_ERROR: A table document nests at most 64 levels of objects and arrays (TOOLHUB_MAX_TABLE_DEPTH)"
    )
    assert table_state(writer_shop["table"]) == before


# TOOLHUB_MAX_TABLE_BYTES bounds a document; a rows table's records are bounded by TOOLHUB_MAX_ROWS_TABLE_BYTES
# (tools_app/tests/execution/test_rows_replace.py).
@pytest.mark.usefixtures("document_storage")
def test_pipeline_create_refuses_a_document_too_large(writer_shop, settings):
    """create that would grow the document over TOOLHUB_MAX_TABLE_BYTES: VALIDATION_ERROR; nothing written."""
    # given
    settings.TOOLHUB_MAX_TABLE_BYTES = 400
    before = table_state(writer_shop["table"])
    # when
    result = Harness().call("shop", writer_shop["key"], "orders_create", {"elements": [{"id": 9, "note": "x" * 200}]})
    # then
    assert result["result"]["content"][0]["text"] == (
        "VALIDATION_ERROR: A table document is at most 400 bytes of JSON (TOOLHUB_MAX_TABLE_BYTES); this one is "
        "415 bytes. Nothing was written."
    )
    assert table_state(writer_shop["table"]) == before


#
# A document stored before the limits still renders on every admin page
#


# A document stored before the depth limit: the table page's read-only summary of a document.
@pytest.mark.usefixtures("document_storage")
def test_admin_pages_render_a_table_nested_900_deep(client, superuser, owner, make_table, make_tool, instance, bind):
    """A table nested ~900 levels made the superuser's tool page a 500 (every table document was
    parsed for the table <select>). Every page renders; the table page shows a read-only summary."""
    # given
    table = make_table(owner, data=[{"id": 1}])
    # stored before the depth limit existed:
    TableSnapshot.objects.filter(table=table).update(data={"rows": [{"id": 1, "deep": nested(900)}]})
    tool = make_tool(owner, table, name="rows_all", type="get_all_data", json_path="/rows")
    bind(instance, tool)
    client.force_login(superuser)
    pages = [
        reverse("admin:index"),
        reverse("admin:tools_app_table_changelist"),
        reverse("admin:tools_app_table_change", args=[table.pk]),
        reverse("admin:tools_app_table_download", args=[table.pk]),
        reverse("admin:tools_app_tool_changelist"),
        reverse("admin:tools_app_tool_add"),
        reverse("admin:tools_app_tool_change", args=[tool.pk]),
        reverse("admin:tools_app_tool_try", args=[tool.pk]),
        reverse("admin:tools_app_mcpinstance_changelist"),
        reverse("admin:tools_app_mcpinstance_change", args=[instance.pk]),
    ]
    # when
    statuses = [client.get(page).status_code for page in pages]
    table_page = client.get(reverse("admin:tools_app_table_change", args=[table.pk])).content.decode()
    tried = client.post(reverse("admin:tools_app_tool_try", args=[tool.pk]), {"__raw_arguments": "{}"})
    download = client.get(reverse("admin:tools_app_table_download", args=[table.pk]))
    # then
    assert statuses == [200] * len(pages)
    assert "nests more than <strong>64</strong> levels deep" in table_page
    assert tried.status_code == 200
    assert tried.context["outcome"]["ok"] is True
    assert tried.context["outcome"]["result"].startswith('[\n  {\n    "id": 1,\n    "deep": {\n      "a": {')
    assert tried.context["outcome"]["truncated"] is True  # indented 900 levels deep: over the page's cap
    assert json.loads(download.content) == {"rows": [{"id": 1, "deep": nested(900)}]}
