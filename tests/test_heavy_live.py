"""Isolation over a real socket: an expensive query runs in the server's heavy worker
process, and a light call of another client is answered while it runs, although the server has only ONE
MCP database thread — the waiting expensive call lends it (mcp_app.hops, tools_app.execution.heavy).

The SDK's client over uvicorn, on the suite's database (an SQLite file, or PostgreSQL).
"""

import os
import threading
import time
from pathlib import Path

import httpx2
import pytest
from asgiref.sync import async_to_sync
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from tests.live_server import Uvicorn, run_python, seed_mcp, server_database

pytestmark = pytest.mark.e2e

CPU_BUDGET_MS = 4000
# Never finishes within the budget: it is stopped by it (QUERY_TOO_EXPENSIVE) after ~4 s.
BURNER = " | ".join(["[*].[@,@,@,@] | []"] * 5) + " | [*].to_string(@) | length(@)"  # ~10 s of CPU
IDLE_SECONDS = 1.0  # a starting worker uses CPU without pause; one waiting for a job uses none
WARM_UP = "[*].[" + ",".join(["@"] * 8) + "] | [] | [*].to_string(@) | [*].length(@) | sum(@)"


@pytest.fixture(scope="module")
def heavy_server(tmp_path_factory):
    with server_database("heavy", tmp_path_factory.mktemp("heavy"), secret="heavy-secret") as env:
        env = {
            **env,
            "TOOLHUB_MCP_DB_THREADS": "1",
            "TOOLHUB_HEAVY_WORKERS": "1",
            # The heavy lane loads documents; reads over rows run in the server under the engine's budget.
            "TOOLHUB_NEW_TABLE_STORAGE": "document",
            "TOOLHUB_QUERY_CPU_MS": str(CPU_BUDGET_MS),
            # Room for the burner's 1,024,000 to_string calls, so that its CPU budget is what stops it.
            "TOOLHUB_QUERY_MAX_ELEMENTS": "100000000",
            "TOOLHUB_QUERY_MAX_BYTES": str(1024**3),
        }

        heavy = seed_mcp(env, slug="heavy", rows=1000, user="heavy-user")
        light = seed_mcp(env, slug="light", rows=1000, user="light-user")
        assert run_python(env, "from tools_app.models import Table; print(Table.objects.count())") == "2"
        with Uvicorn(env) as uvicorn:
            yield {"uvicorn": uvicorn, "heavy": heavy, "light": light}


def call(base: str, seeded: dict, query: str) -> tuple[object, float]:
    """tools/call of orders_query with the SDK's client; (result, time.monotonic() when it answered)."""

    async def run():
        headers = {"authorization": f"Bearer {seeded['key']}"}
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
            url = f"{base}/mcp/{seeded['slug']}/"
            async with Client(streamable_http_client(url, http_client=http), mode="legacy", cache=None) as client:
                return await client.call_tool("orders_query", {"query": query})

    result = async_to_sync(run)()
    return result, time.monotonic()


def heavy_workers(pid: int) -> list[int]:
    """The processes `pid` spawned through multiprocessing (not its resource tracker)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid and b"spawn_main" in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
    return found


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_an_expensive_query_runs_in_the_worker_while_a_light_call_is_answered(heavy_server):
    base = heavy_server["uvicorn"].base
    server_pid = heavy_server["uvicorn"].process.pid
    # The worker starts with the server; until it has set itself up, expensive reads stay in the server.
    # Warm up until a moderately expensive query (~130 ms of CPU) is seen evaluated by the worker.
    warm, _ = call(base, heavy_server["light"], "[?id==`1`].status | [0]")
    assert warm.is_error is False
    deadline = time.monotonic() + 60
    while not heavy_workers(server_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    (worker,) = heavy_workers(server_pid)
    # Its start-up (a new interpreter, Django's setup) takes seconds of CPU on a busy machine, and a call that
    # turns heavy meanwhile stays in the server: wait until it sits idle, waiting for its first job.
    quiet_since, last = time.monotonic(), cpu_seconds(worker)
    while time.monotonic() - quiet_since < IDLE_SECONDS and time.monotonic() < deadline:
        time.sleep(0.1)
        used = cpu_seconds(worker)
        if used != last:
            quiet_since, last = time.monotonic(), used
    while time.monotonic() < deadline:
        before = cpu_seconds(worker)
        warm, _ = call(base, heavy_server["light"], WARM_UP)
        assert warm.structured_content == {"result": 611_392}
        if cpu_seconds(worker) > before:
            break
    else:
        raise AssertionError("the heavy worker never evaluated a query")
    worker_cpu, server_cpu = cpu_seconds(worker), cpu_seconds(server_pid)

    heavy: dict = {}

    def expensive() -> None:
        heavy["started"] = time.monotonic()
        heavy["result"], heavy["answered"] = call(base, heavy_server["heavy"], BURNER)

    thread = threading.Thread(target=expensive)
    thread.start()
    time.sleep(0.5)  # the expensive call has turned heavy and moved to the worker
    light, light_answered = call(base, heavy_server["light"], "[?id==`7`].status | [0]")
    thread.join(timeout=30)

    assert light.is_error is False
    assert light.structured_content == {"result": "cancelled"}
    assert light_answered < heavy["answered"]  # served by the thread the waiting expensive call lent
    assert heavy["result"].is_error is True
    text = heavy["result"].content[0].text
    assert text.startswith("QUERY_TOO_EXPENSIVE: The call was stopped: it went over its CPU-time budget of 4,000 ms")
    assert heavy["answered"] - heavy["started"] < CPU_BUDGET_MS / 1000 + 0.5 + 1.0  # + the client's own setup
    # The expensive evaluation used the worker's CPU (idle otherwise), more than the server used meanwhile.
    # (On a busy machine the call is stopped by its elapsed-time backstop before it had 4 s of CPU.)
    worker_used, server_used = cpu_seconds(worker) - worker_cpu, cpu_seconds(server_pid) - server_cpu
    assert worker_used >= 0.1
    assert server_used < worker_used
