"""End to end: the real server (uvicorn on a free loopback port) and real MCP clients over the socket.

The server runs in a subprocess against its own freshly migrated database (a temporary SQLite file, or
a temporary PostgreSQL database when the tests run on PostgreSQL), seeded by bench/seed_mcp.py. Edits
"through another process" are made by short Python subprocesses on that database.
"""

import json
import subprocess

import httpx2
import pytest
from django.db import connection

from tests.live_server import ROOT, Uvicorn, run_python, sdk_session, seed_mcp, server_database

pytestmark = pytest.mark.e2e

INSPECTOR = ROOT / "node_modules" / ".bin" / "mcp-inspector"


@pytest.fixture(scope="module")
def server_db(tmp_path_factory):
    """A migrated database for the server subprocesses, with the seeded 'e2e' instance; dropped afterwards."""
    with server_database("b_e2e", tmp_path_factory.mktemp("e2e"), secret="e2e-secret") as env:
        yield {"env": env, **seed_mcp(env, slug="e2e", rows=50, user="e2e")}


@pytest.fixture(scope="module")
def uvicorn(server_db):
    """One server for the module's tests that only read through it (each starts its own where it needs one)."""
    with Uvicorn(server_db["env"]) as server:
        yield server


@pytest.mark.parametrize(("mode", "version"), [("legacy", "2025-11-25"), ("auto", "2026-07-28")])
def test_sdk_client_lists_and_calls_over_http(server_db, uvicorn, mode, version):
    """mcp.client.Client over a real socket: handshake era (legacy) and session-less era (auto)."""

    # given
    async def scenario(client):
        listed = await client.list_tools()
        called = await client.call_tool("orders_query", {"query": "[?id==`7`].status | [0]"})
        failed = await client.call_tool("orders_query", {"query": "[?"})
        return client.session.protocol_version, listed, called, failed

    # when
    negotiated, listed, called, failed = sdk_session(f"{uvicorn.base}/mcp/e2e/", server_db["key"], mode, scenario)
    # then
    assert negotiated == version
    assert sorted(tool.name for tool in listed.tools) == ["orders_add", "orders_by_id", "orders_query", "orders_schema"]
    assert called.is_error is False
    assert called.structured_content == {"result": "cancelled"}
    assert failed.is_error is True
    assert failed.content[0].text.startswith("INVALID_QUERY: ")


def test_wrong_key_over_http_is_401(server_db, uvicorn):
    """The real server answers 401 with a Bearer challenge for a wrong key, and 404 for an unknown slug."""
    # given
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    # when
    wrong = httpx2.post(f"{uvicorn.base}/mcp/e2e/", content=body, headers={**headers, "authorization": "Bearer x"})
    unknown = httpx2.post(
        f"{uvicorn.base}/mcp/nowhere/", content=body, headers={**headers, "authorization": f"Bearer {server_db['key']}"}
    )
    # then
    assert wrong.status_code == 401
    assert wrong.headers["www-authenticate"].startswith("Bearer")
    assert unknown.status_code == 404


def test_admin_is_served_by_the_same_app(uvicorn):
    """One ASGI app: everything outside /mcp/ is Django (the admin login page here)."""
    # when
    response = httpx2.get(f"{uvicorn.base}/admin/login/")
    # then
    assert response.status_code == 200
    assert "Django" in response.text or "toolhub" in response.text.lower()


def test_calls_are_recorded_by_the_running_server(server_db, uvicorn):
    """The running server records each call (call-log row and use count) before it answers: the rows are
    there while the server still runs."""
    # given
    before = json.loads(
        run_python(
            server_db["env"],
            "from tools_app.models import CallLog; "
            "print(json.dumps(CallLog.objects.filter(tool_name='orders_by_id').count()))",
        )
    )

    async def scenario(client):
        for _ in range(3):
            await client.call_tool("orders_by_id", {"keys": [1]})

    # when
    sdk_session(f"{uvicorn.base}/mcp/e2e/", server_db["key"], "legacy", scenario)
    # then
    counts = json.loads(
        run_python(
            server_db["env"],
            "from tools_app.models import CallLog; from tools_app.models import Tool; "
            f"print(json.dumps([CallLog.objects.filter(tool_name='orders_by_id', status='ok').count(), "
            f"Tool.objects.get(pk={server_db['tools']['orders_by_id']}).use_count]))",
        )
    )
    assert uvicorn.process.poll() is None  # counted while the server runs
    assert counts[0] == before + 3
    assert counts[1] >= 3


@pytest.mark.skipif(not INSPECTOR.exists(), reason="MCP Inspector not installed (npm install in the project root)")
def test_mcp_inspector_cli_lists_and_calls(server_db, uvicorn):
    """The MCP Inspector CLI (2.12.0) lists the tools and calls one with a bearer header."""
    # given
    common = [
        str(INSPECTOR),
        "--cli",
        f"{uvicorn.base}/mcp/e2e/",
        "--transport",
        "http",
        "--header",
        f"Authorization: Bearer {server_db['key']}",
    ]
    # when
    listed = subprocess.run([*common, "--method", "tools/list"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    called = subprocess.run(
        [*common, "--method", "tools/call", "--tool-name", "orders_query", "--tool-arg", "query=length(@)"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    # then
    assert listed.returncode == 0, listed.stderr
    names = sorted(tool["name"] for tool in json.loads(listed.stdout)["tools"])
    assert names == ["orders_add", "orders_by_id", "orders_query", "orders_schema"]
    assert called.returncode == 0, called.stderr
    result = json.loads(called.stdout)
    assert result["isError"] is False
    assert result["structuredContent"] == {"result": 50}


def new_connection_each_time() -> httpx2.Client:
    """An HTTP client that keeps no connection alive: each request opens a TCP connection of its own, so that the
    kernel spreads the requests over the server's workers. One client for them all, made once (a client's set-up,
    its TLS context, costs more than a request to a local server)."""
    return httpx2.Client(limits=httpx2.Limits(max_keepalive_connections=0), timeout=30)


@pytest.mark.postgres
def test_two_workers_see_a_binding_disabled_by_another_process(server_db):
    """SPEC §1: with `uvicorn --workers 2`, a binding disabled by another process is gone from the very
    next tools/list, whichever worker answers (many requests, each on a new connection)."""
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: several worker processes share one database")
    # given
    server = Uvicorn(server_db["env"], workers=2)
    url = f"{server.base}/mcp/e2e/"
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "authorization": f"Bearer {server_db['key']}",
    }

    http = new_connection_each_time()

    def listed_names() -> list[str]:
        response = http.post(url, content=body, headers=headers)
        assert response.status_code == 200
        return sorted(tool["name"] for tool in response.json()["result"]["tools"])

    toggle = (
        "from tools_app.models import Binding; from tools_app.services import binding_update; "
        "b = Binding.objects.get(mcp_instance__slug='e2e', name_override='orders_schema'); "
        "binding_update(binding=b, enabled={enabled}); print(json.dumps(b.enabled))"
    )
    try:
        workers = subprocess.run(
            ["pgrep", "-P", str(server.process.pid)], capture_output=True, text=True, check=False
        ).stdout.split()
        warm = [listed_names() for _ in range(40)]
        # when
        assert run_python(server_db["env"], toggle.format(enabled=False)) == "false"
        after = [listed_names() for _ in range(60)]
    finally:
        run_python(server_db["env"], toggle.format(enabled=True))
        http.close()
        server.stop()
    # then
    assert len(workers) >= 2
    assert all("orders_schema" in names for names in warm)
    assert all(names == ["orders_add", "orders_by_id", "orders_query"] for names in after)


@pytest.mark.postgres
def test_two_workers_refuse_a_deactivated_owners_key_and_token_on_the_next_request(server_db):
    """With `uvicorn --workers 2`, once another process deactivates the owner, the owner's MCP key
    and API token are a 401 on the very next request, whichever worker answers; active again, they work."""
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: several worker processes share one database")
    # given
    token = run_python(
        server_db["env"],
        "from django.contrib.auth import get_user_model; from tools_app.services import api_token_issue; "
        "print(api_token_issue(user=get_user_model().objects.get(username='e2e'))[1])",
    )
    server = Uvicorn(server_db["env"], workers=2)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    mcp_headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "authorization": f"Bearer {server_db['key']}",
    }

    http = new_connection_each_time()

    def statuses() -> tuple[int, int]:
        mcp = http.post(f"{server.base}/mcp/e2e/", content=body, headers=mcp_headers)
        api = http.get(f"{server.base}/api/tables/", headers={"authorization": f"Token {token}"})
        return mcp.status_code, api.status_code

    activate = (
        "from django.contrib.auth import get_user_model; u = get_user_model().objects.get(username='e2e'); "
        "u.is_active = {active}; u.save(update_fields=['is_active']); print(json.dumps(u.is_active))"
    )
    active = True
    try:
        warm = {statuses() for _ in range(20)}
        # when
        active = False
        assert run_python(server_db["env"], activate.format(active=False)) == "false"
        refused = {statuses() for _ in range(30)}
        assert run_python(server_db["env"], activate.format(active=True)) == "true"
        active = True
        again = {statuses() for _ in range(20)}
    finally:
        if not active:  # the module's other tests need the owner active
            run_python(server_db["env"], activate.format(active=True))
        http.close()
        server.stop()
    # then
    assert warm == {(200, 200)}
    assert refused == {(401, 401)}
    assert again == {(200, 200)}
