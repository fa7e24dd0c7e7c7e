"""JSON-RPC 2.0 message shape at the MCP endpoint (mcp_app.messages), and the key check for every answer.

A body that is not one well-formed JSON-RPC message is -32700 (not JSON) or -32600 (not a valid
request), HTTP 400 with `"id": null`, the same in both protocol eras. SPEC §4.2: a revoked key is 401
and a disabled instance 404 on the next request, also when that request would never reach a handler
(malformed, or refused by the SDK itself), though this process saw the key valid before.
"""

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from mcp_app.tests.mcp_harness import ERAS, LEGACY, MODERN, Harness, rpc_body, rpc_headers
from tools_app.models import CallLog, Tool
from tools_app.services import api_key_revoke, instance_update

CALL = rpc_body("tools/call", {"name": "orders_query", "arguments": {"query": "length(@)"}})

MALFORMED = {
    "batch": (
        json.dumps([CALL]),
        -32600,
        "Invalid Request: batches are not supported; send one JSON-RPC message per POST.",
    ),
    "empty batch": ("[]", -32600, "Invalid Request: batches are not supported; send one JSON-RPC message per POST."),
    "number": ("42", -32600, "Invalid Request: the body must be a JSON-RPC request object, not 42."),
    "string": ('"tools/list"', -32600, "Invalid Request: the body must be a JSON-RPC request object, not a string."),
    "no method": ('{"jsonrpc": "2.0", "id": 1}', -32600, 'Invalid Request: "method" is missing.'),
    "jsonrpc 1.0": (
        '{"jsonrpc": "1.0", "id": 1, "method": "tools/list"}',
        -32600,
        'Invalid Request: "jsonrpc" must be "2.0".',
    ),
    "no jsonrpc": ('{"id": 1, "method": "tools/list"}', -32600, 'Invalid Request: "jsonrpc" must be "2.0".'),
    "id null": (
        '{"jsonrpc": "2.0", "id": null, "method": "tools/list"}',
        -32600,
        'Invalid Request: "id" must be a string or an integer, not null.',
    ),
    "id fractional": (
        '{"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}',
        -32600,
        'Invalid Request: "id" must be a string or an integer, not 1.5.',
    ),
    "id boolean": (
        '{"jsonrpc": "2.0", "id": true, "method": "tools/list"}',
        -32600,
        'Invalid Request: "id" must be a string or an integer, not true.',
    ),
    "id object": (
        '{"jsonrpc": "2.0", "id": {}, "method": "tools/list"}',
        -32600,
        'Invalid Request: "id" must be a string or an integer, not an object.',
    ),
    "method number": (
        '{"jsonrpc": "2.0", "id": 1, "method": 5}',
        -32600,
        'Invalid Request: "method" must be a string, not 5.',
    ),
    "params array": (
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1]}',
        -32600,
        'Invalid Request: "params" must be an object (MCP parameters are named), not an array.',
    ),
    "notification without method": (
        '{"jsonrpc": "2.0", "params": {}}',
        -32600,
        'Invalid Request: "method" is missing.',
    ),
    "posted response": (
        '{"jsonrpc": "2.0", "id": 1, "result": {}}',
        -32600,
        "Invalid Request: this endpoint is stateless and sends no requests, so it takes no responses.",
    ),
    "not JSON": (
        '{"jsonrpc": "2.0", "id": 1,',
        -32700,
        "Parse error: the body is not valid JSON (Expecting property name enclosed in double quotes:"
        " line 1 column 28 (char 27)).",
    ),
    "empty body": ("", -32700, "Parse error: the body is not valid JSON (Expecting value: line 1 column 1 (char 0))."),
    "too deep": ("[" * 100_000, -32700, "Parse error: the body is nested too deeply."),
}


def post_raw(harness: Harness, body: str, *, key: str | None, era: str = LEGACY, headers: dict | None = None):
    all_headers = rpc_headers(CALL, era=era, key=key)
    all_headers.update(headers or {})
    return harness.http("POST", "/mcp/shop/", content=body.encode(), headers=all_headers)


def assert_nothing_recorded(tool):
    assert CallLog.objects.count() == 0
    tool.refresh_from_db()
    assert tool.use_count == 0


def warm(harness: Harness, key: str, era: str) -> None:
    """One good call, so that this process has seen the key valid (auth_cache); its log row is removed."""
    response = harness.post("shop", rpc_body("tools/call", CALL["params"], era=era), key=key, era=era)
    assert response.status_code == 200
    CallLog.objects.all().delete()
    Tool.objects.update(use_count=0)


#
# -32700 / -32600 (JSON-RPC 2.0 §5.1), both eras alike
#


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("kind", list(MALFORMED))
def test_malformed_message_is_a_jsonrpc_error(served, era, kind):
    """Each malformed body: HTTP 400, `"id": null`, the JSON-RPC code and a one-line message naming the fault."""
    # given
    body, code, message = MALFORMED[kind]
    # when
    response = post_raw(Harness(), body, key=served["key"], era=era)
    # then
    assert response.status_code == 400
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    assert_nothing_recorded(served["tool"])


@pytest.mark.parametrize("era", ERAS)
def test_malformed_message_without_a_key_is_401(served, era):
    """The key is checked before the message: a malformed body without a key is 401, not a JSON-RPC error."""
    # when
    response = post_raw(Harness(), "[]", key=None, era=era)
    # then
    assert response.status_code == 401
    assert response.json()["error"]["data"]["error"] == "UNAUTHORIZED"


@pytest.mark.parametrize("era", ERAS)
def test_notification_is_accepted(served, era):
    """A well-formed notification (no id) is still 202 with no body."""
    # when
    response = post_raw(Harness(), '{"jsonrpc": "2.0", "method": "notifications/initialized"}', key=served["key"])
    # then
    assert response.status_code == 202
    assert response.content == b""


@pytest.mark.parametrize("era", ERAS)
def test_string_id_and_null_params_are_accepted(served, era):
    """A string id is answered with that id; `"params": null` is read as no params."""
    # given
    body = rpc_body("tools/list", era=era)
    body["id"] = "req-7"
    if era == LEGACY:
        body["params"] = None
    # when
    response = Harness().post("shop", body, key=served["key"], era=era)
    # then
    assert response.status_code == 200
    assert response.json()["id"] == "req-7"
    assert [tool["name"] for tool in response.json()["result"]["tools"]] == ["orders_query"]


#
# SPEC §4.2: a revoked key or disabled instance is refused on every next request, whatever it is
#


SDK_REFUSED = {
    # name: (era, body, extra headers, the SDK's answer: HTTP status and JSON-RPC code) of requests the
    # SDK answers itself, without reaching a handler
    "tools/call params invalid (2025)": (LEGACY, rpc_body("tools/call", {}), {}, (200, -32602)),
    "tools/call without _meta (2026)": (MODERN, rpc_body("tools/call", {"name": "orders_query"}), {}, (400, -32602)),
    "Mcp-Name mismatch (2026)": (
        MODERN,
        rpc_body("tools/call", {"name": "x"}, era=MODERN),
        {"mcp-name": "y"},
        (400, -32020),
    ),
    "unknown protocol version": (
        LEGACY,
        rpc_body("tools/list"),
        {"mcp-protocol-version": "1999-01-01"},
        (400, -32602),
    ),
    "Accept without JSON": (LEGACY, rpc_body("tools/list"), {"accept": "text/html"}, (406, -32600)),
}


def revoke(served):
    api_key_revoke(api_key=served["api_key"])


def disable(served):
    instance_update(instance=served["instance"], enabled=False)


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("kind", ["batch", "id null", "id fractional", "jsonrpc 1.0", "number", "not JSON"])
@pytest.mark.parametrize(("change", "status"), [(revoke, 401), (disable, 404)])
def test_malformed_message_after_revocation_is_refused(served, era, kind, change, status):
    """A key seen valid, then revoked (or its instance disabled): a malformed request is 401 (404), not 400."""
    # given
    harness = Harness()
    warm(harness, served["key"], era)
    change(served)
    # when
    response = post_raw(harness, MALFORMED[kind][0], key=served["key"], era=era)
    # then
    assert response.status_code == status
    assert response.json()["error"]["data"]["error"] == {401: "UNAUTHORIZED", 404: "NOT_FOUND"}[status]
    if status == 401:
        assert response.headers["www-authenticate"].startswith("Bearer ")
    assert_nothing_recorded(served["tool"])


@pytest.mark.parametrize("kind", list(SDK_REFUSED))
@pytest.mark.parametrize(("change", "status"), [(revoke, 401), (disable, 404)])
def test_request_the_sdk_refuses_after_revocation_is_refused(served, kind, change, status):
    """Requests the SDK answers by itself (bad params, headers, versions) are 401/404 once the key is gone."""
    # given
    era, body, headers, _ = SDK_REFUSED[kind]
    harness = Harness()
    warm(harness, served["key"], era)
    change(served)
    # when
    response = harness.post("shop", body, key=served["key"], era=era, headers=headers)
    # then
    assert response.status_code == status
    assert_nothing_recorded(served["tool"])


@pytest.mark.parametrize("kind", list(SDK_REFUSED))
def test_request_the_sdk_refuses_still_gets_its_answer_with_a_valid_key(served, kind):
    """With a valid key, the SDK's own refusals go out as before (checked once, then sent)."""
    # given
    era, body, headers, (status, code) = SDK_REFUSED[kind]
    harness = Harness()
    warm(harness, served["key"], era)
    # when
    response = harness.post("shop", body, key=served["key"], era=era, headers=headers)
    # then
    assert response.status_code == status
    assert response.json()["error"]["code"] == code
    assert_nothing_recorded(served["tool"])


@pytest.mark.parametrize("era", ERAS)
def test_notification_after_revocation_is_401(served, era):
    """A notification gets no handler either: 401 once the key is revoked."""
    # given
    harness = Harness()
    warm(harness, served["key"], era)
    revoke(served)
    # when
    response = post_raw(harness, '{"jsonrpc": "2.0", "method": "notifications/initialized"}', key=served["key"])
    # then
    assert response.status_code == 401


def test_revoked_key_leaves_the_auth_cache(served):
    """Once the database refused a key, the next well-formed request does not start from the cached pair."""
    # given
    from mcp_app.auth import auth_cache

    harness = Harness()
    warm(harness, served["key"], LEGACY)
    assert len(auth_cache) == 1
    revoke(served)
    # when
    response = post_raw(harness, "[]", key=served["key"])
    # then
    assert response.status_code == 401
    assert len(auth_cache) == 0


@pytest.mark.parametrize("era", ERAS)
def test_good_call_with_a_seen_key_is_one_query(served, era):
    """The cheap path stays cheap: a repeated good call reads with one SQL statement (re-check + lookup, no
    auth query), then records itself: the call-log row and the use count, no key write."""
    # given
    harness = Harness()
    warm(harness, served["key"], era)
    # when
    with CaptureQueriesContext(connection) as queries:
        response = harness.post("shop", rpc_body("tools/call", CALL["params"], era=era), key=served["key"], era=era)
    # then
    assert response.json()["result"]["structuredContent"] == {"result": 3}
    statements = [q["sql"].split()[0] for q in queries.captured_queries if "SAVEPOINT" not in q["sql"]]
    # PostgreSQL records in one statement (WITH ... UPDATE use count ... INSERT); SQLite in two.
    assert statements == (["SELECT", "WITH"] if connection.vendor == "postgresql" else ["SELECT", "UPDATE", "INSERT"])
