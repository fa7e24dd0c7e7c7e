"""What a tools/call costs beyond its own work: the caller's grant is made once per credential, a binding's
pins and the table's redact_fields come with the call's one lookup query, and a pinned call on a table with
redact_fields runs the plain call's statements with its details recorded (docs/call-log.md, "What it costs a
call"). A grant's refusal messages, which the call path formats only for a refusal.
"""

import dataclasses
import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from mcp_app.auth import Credential
from mcp_app.requests import grant_of
from mcp_app.tests.mcp_harness import ERAS, Harness, rpc_body
from tools_app import services
from tools_app.grants import Grant
from tools_app.models import ApiKey, CallLog
from tools_app.selectors import binding_call_target

CUSTOMERS = [
    {"id": 1, "customer": "acme", "item": "anvil"},
    {"id": 2, "customer": "globex", "item": "globe"},
    {"id": 3, "customer": "acme", "item": "rocket"},
]


@pytest.fixture
def pinned_select(owner, make_table, make_tool, instance, bind):
    """A `select` bound with `field` = "customer" and `keys` from the key's `customer` attribute; a key for acme."""
    table = make_table(owner, name="accounts", data=[dict(row) for row in CUSTOMERS])
    mine = make_tool(owner, table, type="select", name="my_orders", description="My orders.")
    bind(
        instance,
        mine,
        pinned_arguments={"field": {"value": "customer"}, "keys": {"from": "key.attributes.customer"}},
    )
    key = services.api_key_issue(mcp_instance=instance, label="acme", attributes={"customer": "acme"})[1]
    return {"table": table, "keys": {"acme": key}, "select": mine, "instance": instance}


def _credential(**fields) -> Credential:
    base = {"instance_id": 1, "slug": "shop", "api_key_id": 7, "owner_id": 1, "key_label": "acme"}
    return Credential(**{**base, "key_attributes": (("customer", "acme"),), "username": "owner", **fields})


def test_a_credentials_grant_is_made_once_and_follows_what_the_credential_says():
    # given
    credential = _credential()

    # when
    first = grant_of(credential)
    again = grant_of(dataclasses.replace(credential))
    read_only = grant_of(_credential(key_read_only=True))
    token = grant_of(_credential(api_key_id=None, oauth_token_id=3, scopes=frozenset({"tools:read"})))

    # then
    assert again is first
    assert first == Grant.of_key(read_only=False, label="acme", attributes={"customer": "acme"}, username="owner")
    assert (first.writes, read_only.writes, token.writes) == (True, False, False)
    assert read_only.read_only_reason == "this API key is read-only"
    assert (token.key_label, token.username) == (None, "owner")


KEY_PIN = {"keys": {"from": "key.attributes.customer"}}
READ_ONLY_KEY = Grant.of_key(read_only=True, label="k", attributes=None, username="o")
ACME_KEY = Grant.of_key(read_only=False, label="k", attributes={"customer": "acme"}, username="o")
NOT_WITH = "Unknown tool 'x' for this caller: it changes data, and "
NO_SOURCE = (
    "Unknown tool 'x' for this caller: its binding takes arguments from key.attributes.customer, "
    "which this caller does not have."
)


@pytest.mark.parametrize(
    ("grant", "tool_type", "read_only", "pins", "message"),
    [
        (Grant(), "query_data", False, None, ""),
        (Grant(), "create", True, None, NOT_WITH + "this instance or binding is read-only."),
        (READ_ONLY_KEY, "create", False, None, NOT_WITH + "this API key is read-only."),
        (READ_ONLY_KEY, "create", False, KEY_PIN, NOT_WITH + "this API key is read-only."),
        (READ_ONLY_KEY, "select", False, KEY_PIN, NO_SOURCE),
        (ACME_KEY, "select", False, KEY_PIN, ""),
        (ACME_KEY, "update", True, {}, NOT_WITH + "this instance or binding is read-only."),
    ],
    ids=["read", "read-only binding", "read-only key", "writes first", "no source", "has the source", "empty pins"],
)
def test_a_refusal_says_why_and_is_empty_for_a_tool_in_the_set(grant, tool_type, read_only, pins, message):
    assert grant.refusal("x", tool_type, read_only=read_only, pins=pins) == message
    assert grant.may_use(tool_type, read_only=read_only, pins=pins) is (message == "")


def test_the_call_target_reads_a_bindings_pins_and_no_pins_as_an_empty_object(pinned_select, owner, make_tool, bind):
    # given
    bind(pinned_select["instance"], make_tool(owner, pinned_select["table"], name="plain"))
    key_id = ApiKey.objects.get(label="acme").pk

    def target(name):
        return binding_call_target(instance_id=pinned_select["instance"].pk, slug="shop", api_key_id=key_id, name=name)

    # when
    pinned, plain = target("my_orders"), target("plain")

    # then
    assert pinned.pinned_arguments == {"field": {"value": "customer"}, "keys": {"from": "key.attributes.customer"}}
    assert plain.pinned_arguments == {}
    assert plain.redact_fields in ("[]", [])
    assert plain.redact_arguments in ("[]", [])


REDACTED_ITEMS = [{**CUSTOMERS[0], "item": "[redacted]"}, {**CUSTOMERS[2], "item": "[redacted]"}]
REDACTED_CUSTOMERS = [{**CUSTOMERS[0], "customer": "[redacted]"}, {**CUSTOMERS[2], "customer": "[redacted]"}]


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize(
    ("redact", "arguments", "items"),
    [
        ({"redact_fields": ["item"]}, {"field": "customer", "keys": ["acme"]}, REDACTED_ITEMS),
        # the pinned keys redacted, and the value they held where the result repeats it
        ({"redact_arguments": ["keys"]}, {"field": "customer", "keys": "[redacted]"}, REDACTED_CUSTOMERS),
    ],
    ids=["table redact_fields", "tool redact_arguments"],
)
def test_a_pinned_call_with_redaction_costs_the_plain_calls_statements(pinned_select, era, redact, arguments, items):
    """Pins, the caller's grant, the table's redact_fields, the tool's redact_arguments and the recorded details add
    no statement: the call's one query (key re-check, binding, pins, table version, redact_fields and
    redact_arguments) and its record."""
    # given
    if "redact_fields" in redact:
        services.table_update(table=pinned_select["table"], **redact)
    else:
        services.tool_update(tool=pinned_select["select"], **redact)
    harness, key = Harness(), pinned_select["keys"]["acme"]
    body = rpc_body("tools/call", {"name": "my_orders", "arguments": {}}, era=era)
    assert harness.post("shop", body, key=key, era=era).status_code == 200  # the key and the tool seen once
    CallLog.objects.all().delete()

    # when
    with CaptureQueriesContext(connection) as queries:
        reply = harness.post("shop", body, key=key, era=era).json()

    # then
    assert reply["result"]["structuredContent"] == {"items": [CUSTOMERS[0], CUSTOMERS[2]], "not_found": []}
    statements = [q["sql"].split()[0] for q in queries.captured_queries if "SAVEPOINT" not in q["sql"]]
    assert statements == (["SELECT", "WITH"] if connection.vendor == "postgresql" else ["SELECT", "UPDATE", "INSERT"])
    call = CallLog.objects.get()
    assert json.loads(call.arguments) == arguments
    assert json.loads(call.result_excerpt) == {"items": items, "not_found": []}
    assert call.recorded_bytes == len(call.arguments.encode()) + len(call.result_excerpt.encode())


def _statement(sql: str) -> str:
    """A statement as its verb and the first table it names (`SELECT tools_app_table`), for a readable exact list."""
    sql = re.sub(r"^\d+ times: ", "", sql)  # an executemany, as Django's capture shows it
    verb = sql.split()[0]
    table = re.search(r'(?:FROM|INTO|UPDATE) "([a-z_]+)"', sql)
    return f"{verb} {table.group(1) if table else ''}".strip()


def test_a_one_record_create_on_a_rows_table_costs_its_pinned_statements(
    owner, make_table, make_tool, instance, bind, make_api_key, django_capture_on_commit_callbacks
):
    """A one-record write through MCP (the create a client sends to add a record) runs exactly these statements
    (docs/tables-at-scale.md, "What a one-record write costs"): the call's lookup; under the table's row lock (read
    once, with the owner's other tables' bytes for the quota) the collections, the existing keys with the last
    position, the collection's count and field kinds, the record, its directory block, the history entry and the
    version, which returns the history bounds checked after the commit (one statement on PostgreSQL); the call's
    record. A new statement
    here is a cost every write pays: add it knowingly. The write opens no savepoint of its own: the change's
    transaction is rolled back whole when it fails."""
    # given
    table = make_table(owner, name="orders", data=[{"id": n, "status": "paid"} for n in range(1, 41)])
    bind(instance, make_tool(owner, table, type="create", name="orders_add"))
    harness, key = Harness(), make_api_key(instance)[1]

    def add(record_id: int) -> dict:
        body = rpc_body("tools/call", {"name": "orders_add", "arguments": {"elements": [{"id": record_id}]}})
        with django_capture_on_commit_callbacks(execute=True):
            return harness.post("shop", body, key=key).json()

    assert add(41)["result"]["structuredContent"] == {"created": 1, "version": 2}  # the key and the tool seen once

    # when
    with CaptureQueriesContext(connection) as queries:
        reply = add(42)

    # then
    assert reply["result"]["structuredContent"] == {"created": 1, "version": 3}
    statements = [_statement(q["sql"]) for q in queries.captured_queries if "SAVEPOINT" not in q["sql"]]
    postgresql = connection.vendor == "postgresql"
    assert statements == [
        "SELECT mcp_app_mcpinstance",  # the call's target, key re-check and table version
        "SELECT tools_app_table",  # the row lock: version, size, owner, storage, the owner's other tables' bytes
        "SELECT tools_app_tablecollection",  # the collections (their record counts: the table's)
        "SELECT tools_app_tablerecord",  # the keys already held, and the last position
        "UPDATE tools_app_tablecollection",  # its record count, returning its field kinds
        "INSERT tools_app_tablerecord",
        "INSERT tools_app_tablerecordblock",  # the directory
        # the history entry and the version (one statement on PostgreSQL), the call's record
        *(["WITH tools_app_tablechange"] if postgresql else ["INSERT tools_app_tablechange", "UPDATE tools_app_table"]),
        *(["WITH tools_app_tool"] if postgresql else ["UPDATE tools_app_tool", "INSERT mcp_app_calllog"]),
    ]  # the history bounds checked after the commit come back from the version's UPDATE: no statement of their own
    # The change's transaction (a savepoint here only because the test holds a transaction); on SQLite the record's.
    savepoints = sum("SAVEPOINT" in q["sql"] and "RELEASE" not in q["sql"] for q in queries.captured_queries)
    assert savepoints == (1 if postgresql else 2)
    assert list(table.collections.values_list("record_count", flat=True)) == [42]


def test_a_preview_of_a_rows_table_costs_its_pinned_statements(
    owner, make_table, make_tool, instance, bind, make_api_key
):
    """A preview of a table stored as rows through MCP: the call's lookup (which reads the table's version and
    storage: no statement of the table's head after it), the collections with the version, the page's records, and
    the call's record (one statement on PostgreSQL, committed without the WAL flush outside the test's
    transaction)."""
    # given
    table = make_table(owner, name="orders", data=[{"id": n, "status": "paid"} for n in range(1, 41)], storage="rows")
    preview_keys = {"preview_keys": ["id", "status"]}
    bind(instance, make_tool(owner, table, type="preview", name="orders_preview", metadata=preview_keys))
    harness, key = Harness(), make_api_key(instance)[1]

    def preview(offset: int) -> dict:
        body = rpc_body("tools/call", {"name": "orders_preview", "arguments": {"offset": offset, "limit": 2}})
        return harness.post("shop", body, key=key).json()

    preview(0)  # the key and the tool seen once

    # when
    with CaptureQueriesContext(connection) as queries:
        reply = preview(20)

    # then
    assert reply["result"]["structuredContent"] == {
        "items": [{"id": 21, "status": "paid"}, {"id": 22, "status": "paid"}],
        "total_count": 40,
    }
    # Inside the test's transaction PostgreSQL's budget sets statement_timeout around each statement under a
    # savepoint; outside one it rides in the statement's own message (records.engine_cursor).
    sent = [q["sql"] for q in queries.captured_queries]
    statements = [_statement(sql) for sql in sent if "SAVEPOINT" not in sql and "statement_timeout" not in sql]
    postgresql = connection.vendor == "postgresql"
    assert statements == [
        "SELECT mcp_app_mcpinstance",  # the call's target, key re-check, table version and storage
        "SELECT tools_app_table",  # the read's snapshot: the version with the collections
        "WITH tools_app_tablerecordblock",  # the page's records, found through the directory
        *(["WITH tools_app_tool"] if postgresql else ["UPDATE tools_app_tool", "INSERT mcp_app_calllog"]),
    ]


@pytest.mark.postgres
def test_a_layout_is_looked_up_once_per_process_and_only_once_committed(
    owner, make_table, make_tool, instance, bind, make_api_key, django_capture_on_commit_callbacks
):
    """A record whose key order JSONB would change gets a layout (docs/tables-at-scale.md, "Storage"); a write of
    the same order after a committed one looks none up (the layouts are learned after the commit only)."""
    if connection.vendor != "postgresql":
        pytest.skip("Layouts are PostgreSQL's (JSONB sorts object keys).")
    # given
    table = make_table(owner, name="orders", data=[{"id": 1}])
    bind(instance, make_tool(owner, table, type="create", name="orders_add"))
    bind(instance, make_tool(owner, table, type="select", name="orders_get"))
    harness, key = Harness(), make_api_key(instance)[1]

    def call(name: str, arguments: dict) -> tuple[dict, list[str]]:
        body = rpc_body("tools/call", {"name": name, "arguments": arguments})
        with CaptureQueriesContext(connection) as queries, django_capture_on_commit_callbacks(execute=True):
            reply = harness.post("shop", body, key=key).json()
        return reply["result"], [_statement(q["sql"]) for q in queries.captured_queries]

    def record(n: int) -> dict:
        return {"id": n, "customer": "c", "status": "new", "total": 1.5}

    # when
    refused, refused_statements = call("orders_add", {"elements": [record(2), {"id": 1}]})  # KEY_EXISTS
    first, first_statements = call("orders_add", {"elements": [record(2)]})
    second, second_statements = call("orders_add", {"elements": [record(3)]})
    read, _ = call("orders_get", {"keys": [2, 3]})

    # then
    assert refused["structuredContent"]["error"] == "KEY_EXISTS"
    assert "SELECT tools_app_tablerecordlayout" not in refused_statements  # refused before it writes
    assert (first["structuredContent"], second["structuredContent"]) == (
        {"created": 1, "version": 2},
        {"created": 1, "version": 3},
    )
    assert first_statements.count("SELECT tools_app_tablerecordlayout") == 1
    assert "SELECT tools_app_tablerecordlayout" not in second_statements
    assert [list(item) for item in read["structuredContent"]["items"]] == [["id", "customer", "status", "total"]] * 2
