"""The operations endpoints against real uvicorn servers: /readyz with the database unreachable answers 503 in
under 2 s, and /metrics adds up the calls of several workers (prometheus_client's multiprocess mode)."""

import json
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from mcp_app.tests.mcp_harness import rpc_body
from tests.live_server import Uvicorn, free_port, run_python, server_database

pytestmark = pytest.mark.e2e


def get(url: str, headers: dict | None = None) -> tuple[int, Any, bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


@pytest.mark.parametrize("pool", ["10", "0"], ids=["pool", "no-pool"])
def test_readyz_with_the_database_unreachable_is_503_within_2_s(tmp_path, pool):
    """PostgreSQL on a closed port: liveness stays 200, readiness is 503 naming the database, fast."""
    env = {
        "PATH": "/usr/bin:/bin",
        "DJANGO_SECRET_KEY": "ops-secret",
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:{free_port()}/toolhub",
        "DATABASE_POOL_MAX_SIZE": pool,
        "TOOLHUB_JSON_LOGS": "true",
        "TOOLHUB_RATE_LIMITS_ENABLED": "false",
    }
    server = Uvicorn(env)
    try:
        status, _headers, body = get(f"{server.base}/healthz")
        assert (status, json.loads(body)) == (200, {"status": "ok"})
        for _attempt in range(2):
            started = time.monotonic()
            status, headers, body = get(f"{server.base}/readyz", {"X-Request-ID": "probe-1"})
            elapsed = time.monotonic() - started
            answer = json.loads(body)
            assert (status, answer["status"], answer["checks"]["migrations"]) == (503, "unavailable", "unknown")
            assert answer["checks"]["database"].startswith(("unreachable", "no answer")), answer
            assert headers["X-Request-ID"] == "probe-1"
            assert elapsed < 2.0, elapsed
    finally:
        output = server.stop()
    lines = [json.loads(line) for line in output.splitlines() if line.startswith('{"time"')]
    probes = [line for line in lines if line["path"] == "/readyz"]
    assert [(line["request_id"], line["status"], line["surface"]) for line in probes] == [("probe-1", 503, "other")] * 2
    assert "127.0.0.1:" not in json.dumps(probes)


def _call(base: str, key: str, index: int) -> int:
    body = rpc_body("tools/call", {"name": "orders_query", "arguments": {"query": "length(@)"}}, request_id=index)
    request = urllib.request.Request(
        f"{base}/mcp/ops/",
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
        return response.status


def test_metrics_add_up_the_calls_of_every_worker(tmp_path_factory):
    """Two workers, PROMETHEUS_MULTIPROC_DIR set: one scrape counts the calls both served."""
    directory = tmp_path_factory.mktemp("ops")
    metrics_dir = directory / "metrics"
    metrics_dir.mkdir()
    with server_database("ops", directory, secret="ops-secret") as env:
        key = run_python(
            env,
            "from django.contrib.auth import get_user_model\n"
            "from tools_app import services\n"
            "from tools_app.services import api_key_issue, binding_create, instance_create\n"
            "user = get_user_model().objects.create_user('ops', password='pw-123456!')\n"
            "table = services.table_create(owner=user, name='orders', data=[1, 2, 3])\n"
            "tool = services.tool_create(owner=user, name='orders_query', type='query_data', table=table,"
            " description='q')\n"
            "instance = instance_create(owner=user, name='Ops', slug='ops')\n"
            "binding_create(mcp_instance=instance, tool=tool)\n"
            "print(api_key_issue(mcp_instance=instance, label='ops')[1])",
        )
        env = {**env, "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir), "TOOLHUB_METRICS_TOKEN": "scrape-token"}
        server = Uvicorn(env, workers=2)
        try:
            statuses = [_call(server.base, key, index) for index in range(12)]
            status, headers, body = get(f"{server.base}/metrics", {"Authorization": "Bearer scrape-token"})
            refused, _headers, _body = get(f"{server.base}/metrics", {"Authorization": "Bearer nope"})
        finally:
            server.stop()
    assert statuses == [200] * 12
    assert (status, refused) == (200, 401)
    wanted = {"instance": "ops", "outcome": "ok", "surface": "mcp", "tool_type": "query_data"}
    counted = [
        sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
        if sample.name == "toolhub_tool_calls_total" and sample.labels == wanted
    ]
    assert counted == [12.0]
    assert sorted(path.name.split("_")[0] for path in metrics_dir.glob("*.db"))[0] in ("counter", "gauge", "histogram")
