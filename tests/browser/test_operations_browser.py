"""The operator's page in Chromium. The module's own server (conftest), a superuser `root` and the staff
user `alice`; four MCP calls (one failing, one to a tool that does not exist) are made over HTTP; the page,
reached from the admin's index, shows exactly those numbers, the same as /metrics. alice sees no link and
gets 403. Screenshot: artifacts/screenshots/operations.png."""

import json
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from mcp_app.tests.mcp_harness import rpc_body
from tests.browser.support import password_hash, shot
from tests.live_server import run_python

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

SETUP = """
from django.contrib.auth.models import User
from tools_app import services
root = User.objects.create(username="root", password=PASSWORD_HASH, is_staff=True, is_superuser=True)
alice = User.objects.get(username="alice")
table = services.table_create(owner=alice, name="orders", data=[{"id": 1}, {"id": 2}])
tool = services.tool_create(owner=alice, name="orders_query", type="query_data", table=table, description="q")
instance = services.instance_create(owner=alice, name="Shop", slug="shop")
services.binding_create(mcp_instance=instance, tool=tool)
print(services.api_key_issue(mcp_instance=instance, label="ops")[1])
"""


@pytest.fixture(scope="module")
def shop_key(server):
    """alice's instance 'shop' serving orders_query, and the superuser `root`: the instance's key. The server is
    this module's own (conftest: module scope), so its counters hold only this module's calls."""
    return run_python(server["env"], f"PASSWORD_HASH = {password_hash()!r}\n" + SETUP)


def mcp_call(server, key: str, name: str, query: str) -> dict:
    body = rpc_body("tools/call", {"name": name, "arguments": {"query": query}})
    request = urllib.request.Request(
        f"{server['base']}/mcp/shop/",
        data=json.dumps(body).encode(),
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-11-25",
            "Authorization": f"Bearer {key}",
        },
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def wait_until_ready(server, seconds: float = 60) -> None:
    """Until /readyz answers 200. A server's first readiness check loads the migration graph, which on a busy
    machine takes longer than the check's 1.5 s answer time (the page then says "not ready (... no answer within
    1.5 s ...)"); once seen applied, the migrations are not checked again, and a check is one query."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(f"{server['base']}/readyz", timeout=30) as response:
                if response.status == 200:
                    return
        except urllib.error.HTTPError as refused:  # 503: not ready yet
            if time.monotonic() > deadline:
                raise AssertionError(f"the server is not ready: {refused.read()!r}") from None
        time.sleep(0.2)


def test_operations_page_shows_the_calls_made(server, shop_key, new_page):
    replies = [mcp_call(server, shop_key, "orders_query", "[].id") for _ in range(2)]
    replies.append(mcp_call(server, shop_key, "orders_query", "[?"))
    replies.append(mcp_call(server, shop_key, "no_such_tool", "@"))
    assert [reply.get("result", {}).get("isError") for reply in replies] == [False, False, True, None]
    wait_until_ready(server)
    page = new_page("root")
    page.click("#toolhub-operations-link a")
    page.wait_for_url("**/admin/operations/")
    assert page.inner_text("#ops-calls") == "4"
    assert page.inner_text("#ops-error-rate") == "50.0 %"
    assert page.inner_text("#ops-ready").startswith("ready (database: ok; migrations: ok)")
    assert "not configured" in page.inner_text("#ops-redis")
    slowest = page.inner_text("#ops-slowest")
    assert "shop\tquery_data\t3" in slowest
    refusals = [row.split("\t") for row in page.inner_text("#ops-refusals tbody").splitlines()]
    assert sorted(refusals) == [["tool call: INVALID_QUERY", "1"], ["tool call: TOOL_NOT_FOUND", "1"]]
    shot(page, "operations")
    metrics = page.goto("/metrics")
    assert metrics.status == 200
    wanted = {"instance": "shop", "outcome": "ok", "surface": "mcp", "tool_type": "query_data"}
    counted = [
        sample.value
        for family in text_string_to_metric_families(metrics.text())
        for sample in family.samples
        if sample.name == "toolhub_tool_calls_total" and sample.labels == wanted
    ]
    assert counted == [2.0]


def test_the_page_is_for_superusers_only(server, shop_key, new_page):
    page = new_page("alice")
    assert page.locator("#toolhub-operations-link").count() == 0
    response = page.goto("/admin/operations/")
    assert response.status == 403
    assert page.goto("/metrics").status == 403
