"""The endpoint's database thread pool (mcp_app.hops.DatabaseHops), as production runs it.

Each pool thread has its own connection and sees only committed data, so these tests commit
(transactional_db) instead of running inside one test transaction. SPEC §1: an edit committed through
any connection is seen by the next request; SPEC §4.2: a revoked key is refused on the next request.
"""

import asyncio
import json
import threading
import time

import httpx2
import pytest
from asgiref.sync import async_to_sync
from django.db import connection, connections

from mcp_app import handlers as mcp_server
from mcp_app.tests.mcp_harness import BASE_URL, ERAS, LEGACY, Harness, rpc_body, rpc_headers
from tools_app.execution.executors import execute
from tools_app.models import CallLog
from tools_app.services import api_key_revoke, binding_update

pytestmark = pytest.mark.django_db(transaction=True)

POOL_THREADS = 3


def open_backends() -> set[int]:
    """Process ids of the server connections to this test database (PostgreSQL)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
        return {row[0] for row in cursor.fetchall()}


def backends_opened_since(before: set[int], timeout: float = 10.0) -> set[int]:
    """Connections opened since `before` that are still open, once closed ones are gone (or after timeout).

    A server process leaves pg_stat_activity shortly after its client hangs up, not at the instant
    the socket closes, so a closed connection is given a moment to disappear.
    """
    deadline = time.monotonic() + timeout
    opened = open_backends() - before
    while opened and time.monotonic() < deadline:
        time.sleep(0.05)
        opened = open_backends() - before
    return opened


def concurrent_calls(harness: Harness, key: str, queries: list[str], era: str = LEGACY) -> list[dict]:
    """Send one tools/call per query at the same time, through one running endpoint; replies in order."""

    async def run() -> list[dict]:
        async with harness.endpoint.running():
            transport = httpx2.ASGITransport(app=harness.endpoint)
            async with httpx2.AsyncClient(transport=transport, base_url=BASE_URL) as http:

                async def one(query: str) -> dict:
                    body = rpc_body("tools/call", {"name": "orders_query", "arguments": {"query": query}}, era=era)
                    response = await http.post(
                        "/mcp/shop/", content=json.dumps(body).encode(), headers=rpc_headers(body, era=era, key=key)
                    )
                    return response.json()

                return await asyncio.gather(*(one(query) for query in queries))

    return async_to_sync(run)()


# PostgreSQL: each call now records itself on its pool thread, and an in-memory SQLite test database refuses
# concurrent writers ("database table is locked") where a file database waits for its lock (settings).
@pytest.mark.postgres
@pytest.mark.parametrize("era", ERAS)
def test_concurrent_calls_run_on_the_pool_threads(served, monkeypatch, era):
    """Concurrent calls each get their own answer; the database work, recording included, runs on the
    pool's threads only."""
    # given
    threads_seen = set()
    original = mcp_server.call_tool_sync

    def spy(*args):
        threads_seen.add(threading.current_thread().name)
        return original(*args)

    monkeypatch.setattr(mcp_server, "call_tool_sync", spy)
    queries = [f"[?id==`{n}`].customer | [0]" for n in (1, 2, 3)] * 4
    # when
    replies = concurrent_calls(Harness(db_threads=POOL_THREADS), served["key"], queries, era=era)
    # then
    assert [reply["result"]["structuredContent"]["result"] for reply in replies] == ["ada", "alan", "grace"] * 4
    assert threads_seen
    assert all(name.startswith("toolhub-mcp-db") for name in threads_seen)
    assert threading.current_thread().name not in threads_seen
    assert CallLog.objects.filter(status="ok", tool_name="orders_query").count() == 12


def test_pool_sees_a_committed_table_write_on_the_next_call(served, make_tool, owner):
    """A write committed elsewhere changes the table version, so the next call misses the result cache."""
    # given
    harness = Harness(db_threads=POOL_THREADS)
    first = harness.call("shop", served["key"], "orders_query", {"query": "length(@)"})["result"]
    # when: a data tool's write (either storage), not through the pool
    create = make_tool(owner, served["table"], type="create", name="orders_create")
    assert execute(tool=create, arguments={"elements": [{"id": 4}]}) == {"created": 1, "version": 2}
    second = harness.call("shop", served["key"], "orders_query", {"query": "length(@)"})["result"]
    # then
    assert first["structuredContent"] == {"result": 3}
    assert second["structuredContent"] == {"result": 4}


def test_pool_sees_a_committed_binding_disable_on_the_next_call(served):
    """Disabling the binding through another connection makes the next call -32602 and records no use."""
    # given
    harness = Harness(db_threads=POOL_THREADS)
    assert harness.call("shop", served["key"], "orders_query", {"query": "length(@)"})["result"]["isError"] is False
    # when
    binding_update(binding=served["binding"], enabled=False)
    reply = harness.call("shop", served["key"], "orders_query", {"query": "length(@)"})
    # then
    assert reply["error"]["code"] == -32602
    assert "not enabled on this instance" in reply["error"]["message"]
    assert list(CallLog.objects.order_by("id").values_list("status", "error_code")) == [
        ("ok", ""),
        ("error", "TOOL_NOT_FOUND"),
    ]
    served["binding"].tool.refresh_from_db()
    assert served["binding"].tool.use_count == 1


def test_pool_refuses_a_key_revoked_after_use(served):
    """A key revoked through another connection is 401 on the next request, even with the cached caller."""
    # given
    harness = Harness(db_threads=POOL_THREADS)
    assert harness.call("shop", served["key"], "orders_query", {"query": "length(@)"})["result"]["isError"] is False
    # when
    api_key_revoke(api_key=served["api_key"])
    body = rpc_body("tools/call", {"name": "orders_query", "arguments": {"query": "length(@)"}})
    response = harness.post("shop", body, key=served["key"])
    # then
    assert response.status_code == 401
    assert CallLog.objects.count() == 1


@pytest.mark.postgres
def test_pool_threads_close_their_connections_when_the_endpoint_stops(served, monkeypatch):
    """Stopping the endpoint closes every pool thread's connection (none is left open to the database)."""
    if connection.vendor != "postgresql":
        pytest.skip("Django never closes connections to an in-memory SQLite test database; run on PostgreSQL.")
    # given
    backends_before = open_backends()
    wrappers = []
    original = mcp_server.call_tool_sync

    def spy(*args):
        result = original(*args)
        wrappers.append(connections["default"])  # this pool thread's own connection wrapper
        return result

    monkeypatch.setattr(mcp_server, "call_tool_sync", spy)
    # when
    replies = concurrent_calls(Harness(db_threads=POOL_THREADS), served["key"], ["length(@)"] * 9)
    # then
    assert all(reply["result"]["structuredContent"] == {"result": 3} for reply in replies)
    assert len(wrappers) == 9
    assert len({id(wrapper) for wrapper in wrappers}) <= POOL_THREADS
    assert all(wrapper.connection is None for wrapper in wrappers)
    assert connection.connection is not None  # the test's own connection is not touched
    assert backends_opened_since(backends_before) == set()
