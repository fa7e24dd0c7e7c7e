"""Rate limits on /mcp/<slug>/ (issue 13): each authenticated HTTP request counts against its API key's
rate (the instance's key_rate_limit, or the default); over it, HTTP 429 with Retry-After and a JSON-RPC
error, and the request runs nothing."""

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from mcp.shared.exceptions import MCPError

from mcp_app.auth import auth_cache
from mcp_app.rate_limit import RATE_LIMITED_RPC_CODE
from mcp_app.tests.mcp_harness import ERAS, LEGACY, Harness, rpc_body
from tests.api_helpers import db_snapshot
from tools_app.models import ApiKey, CallLog, RefusalCount, Table, Tool
from tools_app.services import instance_update

pytestmark = pytest.mark.django_db


def assert_limited(response, window: set[int], *, request_id, limit: str) -> None:
    """HTTP 429, Retry-After equal to the body's, and the JSON-RPC error naming RATE_LIMITED and the limit."""
    assert response.status_code == 429, response.text
    assert response.headers["content-type"] == "application/json"
    retry_after = int(response.headers["retry-after"])
    assert retry_after in window
    message = f"Too many requests for this API key: the limit is {limit}. Retry in {retry_after} s."
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {
            "code": RATE_LIMITED_RPC_CODE,
            "message": f"RATE_LIMITED: {message}",
            "data": {
                "error": "RATE_LIMITED",
                "message": message,
                "details": {"retry_after": retry_after, "limit": limit, "scope": "mcp_key"},
            },
        },
    }


@pytest.fixture
def limited_shop(owner, table, make_tool, make_instance, bind, make_api_key):
    """Instance 'shop' (3 requests per minute per key) with orders_create and orders_query, two keys."""
    instance = make_instance(owner, "shop", key_rate_limit="3/minute")
    for tool in (make_tool(owner, table, type="create", name="orders_create"), make_tool(owner, table)):
        bind(instance, tool)
    return {"instance": instance, "keys": [make_api_key(instance)[1], make_api_key(instance, "second")[1]]}


def create(harness: Harness, key: str, record_id: int, *, era: str = LEGACY, request_id: int = 1):
    body = rpc_body("tools/call", {"name": "orders_create", "arguments": {"elements": [{"id": record_id}]}}, era=era)
    body["id"] = request_id
    return harness.post("shop", body, key=key, era=era)


@pytest.mark.parametrize("era", ERAS)
def test_the_request_over_a_keys_rate_is_429_and_writes_nothing(era, rate_limited, limited_shop, table):
    """Three requests pass; the fourth, a create, is refused before the SDK: the table's version and data,
    the call log, the tool's use count and the key's last use stay as they were."""
    # given
    harness = Harness()
    key = limited_shop["keys"][0]
    assert harness.rpc("shop", key, "tools/list", era=era)["result"]["tools"]
    for record_id in (9, 10):
        assert create(harness, key, record_id, era=era).json()["result"]["isError"] is False
    before = db_snapshot()
    # when
    response = create(harness, key, 11, era=era, request_id=42)
    # then
    assert_limited(response, rate_limited.retry_after_now(), request_id=42, limit="3 requests per minute")
    assert db_snapshot() == before
    assert Table.objects.get(pk=table.pk).version == 3
    assert CallLog.objects.count() == 2
    assert Tool.objects.get(name="orders_create").use_count == 2


def test_every_authenticated_http_request_counts(rate_limited, limited_shop):
    """Notifications, malformed bodies and GETs count too: one HTTP request, one count."""
    harness = Harness()
    key = limited_shop["keys"][0]
    notification = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert harness.post("shop", notification, key=key).status_code == 202
    assert harness.post("shop", {"jsonrpc": "2.0", "id": 1}, key=key).status_code == 400  # no method
    assert harness.http("GET", "/mcp/shop/", headers={"authorization": f"Bearer {key}"}).status_code == 405
    assert_limited(
        harness.post("shop", notification, key=key),
        rate_limited.retry_after_now(),
        request_id=None,
        limit="3 requests per minute",
    )


def test_unauthenticated_requests_do_not_count(rate_limited, limited_shop):
    """A wrong or missing key is 401 and costs the instance's keys nothing."""
    harness = Harness()
    for key in ("wrong", None):
        for _ in range(4):
            assert harness.post("shop", rpc_body("tools/list"), key=key).status_code == 401
    assert harness.rpc("shop", limited_shop["keys"][0], "tools/list")["result"]["tools"]


def test_keys_do_not_share_a_bucket(rate_limited, limited_shop):
    harness = Harness()
    first, second = limited_shop["keys"]
    for _ in range(3):
        harness.rpc("shop", first, "ping")
    assert harness.post("shop", rpc_body("ping"), key=first).status_code == 429
    statuses = [harness.post("shop", rpc_body("ping"), key=second).status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]


def test_limits_per_instance_differ(rate_limited, owner, limited_shop, make_instance, make_api_key):
    """'shop' allows 3 per key, 'crm' has no rate of its own and gets the default (here 5/minute)."""
    # given
    rate_limited(mcp_key="5/minute")
    crm = make_instance(owner, "crm")
    crm_key = make_api_key(crm)[1]
    harness = Harness()
    # when
    shop_statuses = [harness.post("shop", rpc_body("ping"), key=limited_shop["keys"][0]).status_code for _ in range(6)]
    crm_statuses = [harness.post("crm", rpc_body("ping"), key=crm_key).status_code for _ in range(6)]
    # then
    assert shop_statuses == [200, 200, 200, 429, 429, 429]
    assert crm_statuses == [200, 200, 200, 200, 200, 429]
    refused = harness.post("crm", rpc_body("ping"), key=crm_key)
    assert_limited(refused, rate_limited.retry_after_now(), request_id=1, limit="5 requests per minute")


@pytest.mark.parametrize("method", ["tools/call", "tools/list", "ping"])
def test_a_changed_instance_rate_is_followed_from_the_next_request(method, rate_limited, limited_shop):
    """A worker that knows the key (its auth hint) counts with the rate the hint holds; the request's own
    database check brings the new rate, and from the next request on the worker counts in the new rate
    (a new rate is a new bucket: its count starts at zero)."""
    # given
    harness = Harness()
    key = limited_shop["keys"][0]
    params = {"name": "orders_query", "arguments": {"query": "length(@)"}} if method == "tools/call" else None
    assert [harness.post("shop", rpc_body(method, params), key=key).status_code for _ in range(2)] == [200, 200]
    # when
    instance_update(instance=limited_shop["instance"], key_rate_limit="2/minute")
    statuses = [harness.post("shop", rpc_body(method, params), key=key).status_code for _ in range(4)]
    # then: the first request is counted under 3/minute (its third) and brings the new rate
    assert statuses == [200, 200, 200, 429]
    assert auth_cache.get("shop", ApiKey.hash_key(key)).key_rate_limit == "2/minute"


def test_the_sdk_client_sees_the_refusal(rate_limited, owner, limited_shop):
    """A real client (the SDK's, legacy mode: initialize, notifications/initialized, tools/call) gets the
    JSON-RPC error of the 429 as an MCPError with toolhub's code and data."""
    key = limited_shop["keys"][0]

    async def scenario(client):
        await client.call_tool("orders_create", {"elements": [{"id": 9}]})  # the third request
        await client.call_tool("orders_create", {"elements": [{"id": 10}]})  # the fourth: refused

    with pytest.raises(Exception) as raised:  # noqa: PT011 (the SDK wraps it in task groups)
        Harness().with_client("shop", key, scenario)
    leaf = raised.value
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    assert isinstance(leaf, MCPError)
    assert (leaf.error.code, leaf.error.data["error"]) == (RATE_LIMITED_RPC_CODE, "RATE_LIMITED")
    assert leaf.error.message.startswith("RATE_LIMITED: Too many requests for this API key: the limit is 3 requests")
    assert Table.objects.get(pk=limited_shop["instance"].bindings.first().tool.table_id).version == 2
    assert CallLog.objects.count() == 1


def test_refused_requests_are_counted_for_the_owners_activity_page(rate_limited, owner, limited_shop):
    """The first refusal is written at once (one row); the next ones wait in memory for the next due flush, here
    the activity page's: no statement per refused request."""
    # given
    harness, key = Harness(), limited_shop["keys"][0]
    for _ in range(3):
        assert harness.post("shop", rpc_body("tools/list"), key=key).status_code == 200
    assert harness.post("shop", rpc_body("tools/list"), key=key).status_code == 429
    assert list(RefusalCount.objects.values_list("owner", "mcp_instance", "scope", "count")) == [
        (owner.pk, limited_shop["instance"].pk, "mcp_key", 1)
    ]
    # when: four more refused
    with CaptureQueriesContext(connection) as queries:
        for _ in range(4):
            assert harness.post("shop", rpc_body("tools/list"), key=key).status_code == 429
    # then: counted, not written; the owner's page writes and shows them
    assert not any("refusalcount" in query["sql"] for query in queries.captured_queries)
    assert RefusalCount.objects.count() == 1
    client = Client()
    client.force_login(owner)
    data = client.get("/admin/activity/").context["data"]
    assert data["refusals"]["requests_total"] == 5
    assert sum(RefusalCount.objects.values_list("count", flat=True)) == 5
    assert CallLog.objects.count() == 0
