"""One call pipeline: MCP tools/call, POST /api/tools/<id>/call/ and the admin's try-it run the same
calls with the same codes, the same call records and one use count each, visible right after the answer."""

import json

import pytest
from django.test import Client
from django.urls import reverse

from mcp_app.tests.mcp_harness import Harness
from tests.api_helpers import client_for
from tools_app.execution import pipeline as calls
from tools_app.execution.executors import EXECUTORS
from tools_app.models import CallLog, Table, Tool

pytestmark = pytest.mark.django_db

SURFACES = ["mcp", "api", "admin"]


@pytest.fixture
def shop(owner, table, make_tool, instance, bind, make_api_key):
    """Instance 'shop' with orders_query (query_data) and orders_create (create), and a key."""
    query = make_tool(owner, table, name="orders_query")
    create = make_tool(owner, table, type="create", name="orders_create")
    bind(instance, query)
    bind(instance, create)
    return {"query": query, "create": create, "key": make_api_key(instance)[1], "instance": instance}


def call_on(surface: str, shop: dict, owner, tool: Tool, arguments: dict) -> str:
    """Call `tool` through `surface`; return the error code ("" on success)."""
    if surface == "mcp":
        reply = Harness().call("shop", shop["key"], tool.name, arguments)
        result = reply["result"]
        return result["content"][0]["text"].split(":")[0] if result["isError"] else ""
    if surface == "api":
        response = client_for(owner).post(f"/api/tools/{tool.pk}/call/", {"arguments": arguments}, format="json")
        return "" if response.status_code == 200 else response.json()["error"]
    client = Client()
    client.force_login(owner)
    fields = {name: value if isinstance(value, str) else json.dumps(value) for name, value in arguments.items()}
    outcome = client.post(reverse("admin:tools_app_tool_try", args=[tool.pk]), fields).context["outcome"]
    return "" if outcome["ok"] else outcome["code"]


def use_count_read_back(owner, tool: Tool) -> int:
    """The use count as a client reads it right after its call: GET /api/tools/<id>/."""
    return client_for(owner).get(f"/api/tools/{tool.pk}/").json()["use_count"]


CASES = [
    ("query", {"query": "length(@)"}, ""),
    ("query", {"query": "[?"}, "INVALID_QUERY"),
    ("create", {"elements": [{"id": 1, "status": "paid"}]}, "KEY_EXISTS"),
    ("create", {"elements": [{"id": 9, "status": "new"}]}, ""),
]


@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize(("tool_key", "arguments", "code"), CASES)
def test_same_call_same_code_same_record_on_every_surface(surface, tool_key, arguments, code, shop, owner):
    """Each call answers the same code everywhere, leaves one record of that surface and counts one use."""
    # given
    tool = shop[tool_key]
    # when
    answered = call_on(surface, shop, owner, tool, arguments)
    # then
    assert answered == code
    assert use_count_read_back(owner, tool) == 1
    row = CallLog.objects.get()
    assert (row.surface, row.tool_id, row.tool_name, row.owner_id, row.user_id) == (
        surface,
        tool.pk,
        tool.name,
        owner.pk,
        owner.pk,
    )
    assert (row.status, row.error_code) == (("ok", "") if code == "" else ("error", code))
    assert row.mcp_instance_id == (shop["instance"].pk if surface == "mcp" else None)
    assert row.api_key_id == (shop["instance"].api_keys.get().pk if surface == "mcp" else None)
    assert row.duration_ms > 0


@pytest.mark.parametrize("surface", SURFACES)
def test_an_unexpected_failure_is_internal_error_on_every_surface(surface, shop, owner, monkeypatch):
    """A bug in a tool is INTERNAL_ERROR everywhere (it was TOOL_NOT_CALLABLE over MCP, SERVER_ERROR over the
    API); the record says so and the use is counted."""

    # given
    def explode(*args, **kwargs):
        raise RuntimeError("secret internals")

    monkeypatch.setitem(EXECUTORS, "query_data", explode)
    # when
    answered = call_on(surface, shop, owner, shop["query"], {"query": "length(@)"})
    # then
    assert answered == "INTERNAL_ERROR"
    row = CallLog.objects.get()
    assert (row.surface, row.error_code, "secret" in row.error_message) == (surface, "INTERNAL_ERROR", False)
    assert use_count_read_back(owner, shop["query"]) == 1


def test_three_mcp_calls_are_counted_before_the_next_read(shop, owner):
    """Read-your-writes for usage: three tools/calls, then GET /api/tools/<id>/ shows use_count 3 at once."""
    # given
    harness = Harness()
    # when
    for _ in range(3):
        harness.call("shop", shop["key"], "orders_query", {"query": "length(@)"})
    # then
    assert use_count_read_back(owner, shop["query"]) == 3
    assert CallLog.objects.filter(surface="mcp", status="ok").count() == 3


@pytest.mark.parametrize("surface", SURFACES)
def test_a_write_whose_record_fails_is_rolled_back(surface, shop, owner, table, monkeypatch, caplog):
    """A write and its record are one transaction: when the record cannot be written the write is not
    kept, the call answers INTERNAL_ERROR, and nothing is counted or logged as done."""

    # given
    def refuse(*args, **kwargs):
        raise RuntimeError("call log down")

    monkeypatch.setattr(calls, "_write", refuse)
    before = [(t.version, t.data) for t in Table.objects.filter(pk=table.pk)]
    # when
    answered = call_on(surface, shop, owner, shop["create"], {"elements": [{"id": 9, "status": "new"}]})
    # then
    assert answered == "INTERNAL_ERROR"
    assert [(t.version, t.data) for t in Table.objects.filter(pk=table.pk)] == before
    assert CallLog.objects.count() == 0
    assert Tool.objects.get(pk=shop["create"].pk).use_count == 0
    assert "Could not record" in caplog.text


@pytest.mark.parametrize("surface", SURFACES)
def test_a_read_whose_record_fails_says_so(surface, shop, owner, monkeypatch, caplog):
    """A read that cannot be recorded answers INTERNAL_ERROR (never a silent loss of the record)."""

    # given
    def refuse(*args, **kwargs):
        raise RuntimeError("call log down")

    monkeypatch.setattr(calls, "_write", refuse)
    # when
    answered = call_on(surface, shop, owner, shop["query"], {"query": "length(@)"})
    # then
    assert answered == "INTERNAL_ERROR"
    assert CallLog.objects.count() == 0
    assert "Could not record" in caplog.text


def test_every_error_code_is_documented_with_its_meaning():
    """docs/errors.md lists exactly the codes of tools_app.kernel.errors, each with its HTTP status and meaning."""
    from pathlib import Path

    from tools_app.kernel.errors import ERROR_CODES

    # given
    doc = (Path(__file__).resolve().parents[3] / "docs" / "errors.md").read_text()
    rows = [line for line in doc.splitlines() if line.startswith("| `")]
    # when
    documented = {line.split("`")[1]: line for line in rows}
    # then
    assert sorted(documented) == sorted(str(code) for code in ERROR_CODES)
    for code, meaning in ERROR_CODES.items():
        assert f"| {meaning.status} |" in documented[str(code)]
        assert meaning.meaning in documented[str(code)]


@pytest.mark.parametrize("method", ["post", "patch"])
def test_an_api_write_validates_the_tool_once(method, owner, table, make_tool, monkeypatch):
    """Validation runs once per write, in the service: Tool.clean runs once per API create or update."""
    # given
    tool = make_tool(owner, table, name="orders_query")
    original, runs = Tool.clean, []

    def counted(self):
        runs.append(self.name)
        return original(self)

    monkeypatch.setattr(Tool, "clean", counted)
    api = client_for(owner)
    # when
    if method == "post":
        body = {"name": "orders_all", "type": "get_all_data", "table": table.pk, "description": "All orders."}
        response = api.post("/api/tools/", body, format="json")
    else:
        response = api.patch(f"/api/tools/{tool.pk}/", {"description": "Query orders."}, format="json")
    # then
    assert response.status_code == (201 if method == "post" else 200)
    assert runs == ["orders_all" if method == "post" else "orders_query"]


def test_an_external_tool_deleted_after_resolution_is_not_found(owner, make_tool, instance):
    """A target resolved to an external tool that is deleted before the refusal names it: TOOL_NOT_FOUND,
    recorded without the tool, no use counted; nothing raises."""
    # given
    from tools_app.models import Surface

    external = make_tool(owner, None, type="external", name="weather", description="Elsewhere.")
    target = calls.CallTarget(
        owner_id=owner.pk,
        instance_id=instance.pk,
        max_result_bytes=instance.max_result_bytes,
        enabled=True,
        tool_id=external.pk,
        tool_name="weather",
        tool_type="external",
        tool_changed=external.updated_at,
    )
    external.delete()
    caller = calls.Caller(surface=Surface.MCP, user_id=owner.pk)
    # when
    outcome = calls.run_tool_call(caller=caller, target=target, name="weather", arguments={})
    # then
    assert (outcome.refused, outcome.error.code) == (True, "TOOL_NOT_FOUND")
    assert list(CallLog.objects.values_list("tool_id", "tool_name", "error_code")) == [
        (None, "weather", "TOOL_NOT_FOUND")
    ]


@pytest.mark.parametrize("storage", ["document", "rows"])
def test_a_read_is_cached_and_paged_under_the_version_it_read(owner, make_table, make_tool, storage):
    """The version a read's target carries was read before a write committed: the answer is the newer version's,
    cached under that version (never the older one), and a cursor of the older version is expired."""
    from dataclasses import replace

    from tools_app.execution import records
    from tools_app.execution.executors import execute
    from tools_app.models import Surface

    table = make_table(owner, name="moving", data=[{"id": 1}], storage="document")
    everything = make_tool(owner, table, type="get_all_data", name="everything", json_path="")
    create = make_tool(owner, table, type="create", name="add", json_path="", metadata={"key_field": "id"})
    if storage == "rows":
        records.table_to_rows(table.pk)
    stale = replace(calls.target_of_tool(everything), table_version=1)
    cursor = calls.sign_cursor(binding=calls._binding(stale, {}), version=1, offset=1)
    assert execute(tool=create, arguments={"elements": [{"id": 2}]}) == {"created": 1, "version": 2}
    calls.result_cache.clear()
    caller = calls.Caller(surface=Surface.API, user_id=owner.pk)

    outcome = calls.run_tool_call(caller=caller, target=stale, name="everything", arguments={})

    assert outcome.value == [{"id": 1}, {"id": 2}]
    cached = [key for key in calls.result_cache._store.keys() if key[2] == table.pk]
    assert [key[3] for key in cached] == [2]
    paged = calls.run_tool_call(caller=caller, target=stale, name="everything", arguments={"cursor": cursor})
    assert paged.error.code == "CURSOR_EXPIRED"
    assert "changed since this cursor" in str(paged.error)


def _statements_of(call) -> list[str]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        call()
    return [query["sql"] for query in queries.captured_queries]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_reads_record_commits_without_the_wal_flush_and_a_writes_with_it(shop, owner, table):
    """PostgreSQL: the record of a call that changed no table data commits asynchronously (synchronous_commit off
    for its own implicit transaction, never the connection's); a write's change and record commit with the flush."""
    from django.db import connection

    # given
    harness = Harness()
    # when
    read = _statements_of(lambda: harness.call("shop", shop["key"], "orders_query", {"query": "length(@)"}))
    write = _statements_of(
        lambda: harness.call("shop", shop["key"], "orders_create", {"elements": [{"id": 9, "status": "new"}]})
    )
    # then
    recorded = [sql for sql in read if 'INSERT INTO "mcp_app_calllog"' in sql]
    assert len(recorded) == 1
    assert recorded[0].startswith("SET LOCAL synchronous_commit TO OFF; WITH used AS (UPDATE")
    assert [sql for sql in write if "synchronous_commit" in sql] == []
    assert sum('INSERT INTO "mcp_app_calllog"' in sql for sql in write) == 1
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone() == ("on",)
    assert list(CallLog.objects.order_by("pk").values_list("tool_name", "status", "arguments")) == [
        ("orders_query", "ok", '{"query":"length(@)"}'),
        ("orders_create", "ok", '{"elements":[{"id":9,"status":"new"}]}'),
    ]
    assert Tool.objects.get(pk=shop["query"].pk).use_count == 1
    assert Table.objects.get(pk=table.pk).version == 2


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_async_commit_setting_holds_for_its_statement_alone():
    """The prefix and the statement run as one implicit transaction: the setting is off inside it and back on
    after it; inside an atomic block the statement is sent as it is."""
    from django.db import connection, transaction

    # given
    statement = "SELECT current_setting('synchronous_commit')"
    # when
    with connection.cursor() as cursor:
        cursor.execute(calls._unflushed(statement))
        cursor.nextset()
        inside = cursor.fetchone()
        cursor.execute("SHOW synchronous_commit")
        after = cursor.fetchone()
    # then
    assert (inside, after) == (("off",), ("on",))
    with transaction.atomic():
        assert calls._unflushed(statement) == statement
