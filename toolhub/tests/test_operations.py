"""The operations endpoints: /healthz, /readyz, /metrics and its access rules, counters that move by exactly the
calls made on each surface, request ids in answers and error bodies, JSON log lines."""

import json
import logging
import threading
import time

import pytest
from django.db import connection
from django.urls import reverse
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from mcp_app.tests.mcp_harness import Harness
from tests.api_helpers import client_for, db_snapshot
from tools_app.kernel import health, rate_limits, telemetry
from tools_app.models import CallLog

QUERY = {"query": "[?status=='paid'].id"}


def calls(**labels) -> float:
    """toolhub_tool_calls_total for these labels (0 when never counted)."""
    return REGISTRY.get_sample_value("toolhub_tool_calls_total", labels) or 0.0


def sample(name: str, labels: dict | None = None) -> float:
    return REGISTRY.get_sample_value(name, labels or {}) or 0.0


@pytest.fixture(autouse=True)
def _request_ids_in_errors(settings):
    """As in production (the suite's conftest turns them off for the other tests)."""
    settings.TOOLHUB_REQUEST_ID_IN_ERRORS = True


#
# /healthz and /readyz
#


def test_healthz_answers_ok_without_the_database(client):
    """Liveness: 200 {"status": "ok"}; this test has no database access at all (any query would raise)."""
    response = client.get("/healthz")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})
    assert response["Cache-Control"] == "no-store"
    assert len(response["X-Request-ID"]) == 32


@pytest.mark.django_db(transaction=True)
def test_readyz_is_ready_when_the_database_answers_and_migrations_are_applied(client):
    response = client.get("/readyz")
    assert (response.status_code, response.json()) == (
        200,
        {"status": "ok", "checks": {"database": "ok", "migrations": "ok"}},
    )


@pytest.mark.django_db(transaction=True)
def test_readyz_names_unapplied_migrations(client, monkeypatch):
    """503 naming the migrations when some are not applied (the plan is not empty)."""
    from django.db.migrations.executor import MigrationExecutor

    monkeypatch.setattr(health, "_migrations_applied", False)
    monkeypatch.setattr(MigrationExecutor, "migration_plan", lambda self, targets: [("app", False)] * 2)
    response = client.get("/readyz")
    assert (response.status_code, response.json()) == (
        503,
        {"status": "unavailable", "checks": {"database": "ok", "migrations": "2 not applied"}},
    )


def test_readyz_answers_503_in_time_when_the_database_hangs(client, monkeypatch):
    """A database that never answers costs READY_TIMEOUT, not a hang; probes meanwhile join the one check in
    flight instead of starting more."""
    release = threading.Event()
    started_checks = []

    def hanging(result):
        started_checks.append(1)
        release.wait(10)
        result.update(database="ok", migrations="ok")

    monkeypatch.setattr(health, "_check_database", hanging)
    monkeypatch.setattr(health, "READY_TIMEOUT", 0.3)
    try:
        started = time.monotonic()
        answers = [client.get("/readyz") for _ in range(3)]
        elapsed = time.monotonic() - started
    finally:
        release.set()
    for answer in answers:
        assert (answer.status_code, answer.json()) == (
            503,
            {"status": "unavailable", "checks": {"database": "no answer within 0.3 s", "migrations": "unknown"}},
        )
    assert len(started_checks) == 1
    assert elapsed < 2
    # Once the database answers, the next probe starts a fresh check and is ready.
    deadline = time.monotonic() + 5
    while health._in_flight is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert client.get("/readyz").status_code == 200
    assert len(started_checks) == 2


def test_health_answers_leak_no_version_and_need_no_login(client, settings):
    for path in ("/healthz", "/readyz"):
        text = client.get(path).content.decode()
        assert "django" not in text.lower()
        assert "python" not in text.lower()
        assert "0.1.0" not in text


#
# /metrics access
#


@pytest.mark.parametrize(
    ("who", "header", "status", "code"),
    [
        ("anonymous", None, 401, "NOT_AUTHENTICATED"),
        ("anonymous", "Bearer wrong-token", 401, "AUTHENTICATION_FAILED"),
        ("anonymous", "Bearer metrics-secret-token", 200, None),
        ("anonymous", "Token metrics-secret-token", 401, "NOT_AUTHENTICATED"),
        ("owner", None, 403, "PERMISSION_DENIED"),
        ("superuser", None, 200, None),
    ],
)
def test_metrics_access(client, settings, owner, superuser, who, header, status, code):
    """A superuser's session or the bearer token; anyone else 401 (no or wrong credentials) or 403."""
    settings.TOOLHUB_METRICS_TOKEN = "metrics-secret-token"
    if who != "anonymous":
        client.force_login({"owner": owner, "superuser": superuser}[who])
    before = db_snapshot()
    failures = sample("toolhub_auth_failures_total", {"surface": "metrics"})
    extra = {"HTTP_AUTHORIZATION": header} if header else {}
    response = client.get("/metrics", **extra)
    assert response.status_code == status
    if code is None:
        assert response["Content-Type"].startswith("text/plain; version=")
        assert "toolhub_tool_calls" in response.content.decode()
    else:
        body = response.json()
        assert (body["error"], body["request_id"]) == (code, response["X-Request-ID"])
        assert "toolhub_" not in response.content.decode()
    if status == 401:
        assert response["WWW-Authenticate"] == 'Bearer realm="metrics"'
    wrong = header == "Bearer wrong-token"
    assert sample("toolhub_auth_failures_total", {"surface": "metrics"}) - failures == (1 if wrong else 0)
    assert db_snapshot() == before


def test_metrics_bearer_is_refused_when_no_token_is_configured(client, settings):
    settings.TOOLHUB_METRICS_TOKEN = ""
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer ")
    assert response.status_code == 401
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer anything")
    assert (response.status_code, response.json()["error"]) == (401, "AUTHENTICATION_FAILED")


#
# Counters move by exactly the calls made
#


def test_mcp_calls_are_counted_by_instance_type_surface_and_outcome(served, settings):
    harness = Harness()
    ok = {"instance": "shop", "tool_type": "query_data", "surface": "mcp", "outcome": "ok"}
    bad = {**ok, "outcome": "INVALID_QUERY"}
    missing = {"instance": "shop", "tool_type": "", "surface": "mcp", "outcome": "TOOL_NOT_FOUND"}
    duration = {"instance": "shop", "tool_type": "query_data", "surface": "mcp"}
    before = (calls(**ok), calls(**bad), calls(**missing), sample("toolhub_tool_call_duration_seconds_count", duration))
    sizes = sample("toolhub_tool_result_bytes_sum", {"tool_type": "query_data", "surface": "mcp"})
    for _ in range(3):
        harness.call("shop", served["key"], "orders_query", QUERY)
    harness.call("shop", served["key"], "orders_query", {"query": "[?"})
    harness.call("shop", served["key"], "no_such_tool", {})
    after = (calls(**ok), calls(**bad), calls(**missing), sample("toolhub_tool_call_duration_seconds_count", duration))
    assert [b - a for a, b in zip(before, after, strict=True)] == [3, 1, 1, 4]
    # Each successful result is "[1]": 3 bytes.
    assert sample("toolhub_tool_result_bytes_sum", {"tool_type": "query_data", "surface": "mcp"}) - sizes == 9
    assert CallLog.objects.count() == 5


def test_api_calls_are_counted(served, owner):
    ok = {"instance": "", "tool_type": "query_data", "surface": "api", "outcome": "ok"}
    bad = {**ok, "outcome": "INVALID_ARGUMENTS"}
    before = calls(**ok), calls(**bad)
    api = client_for(owner)
    url = f"/api/tools/{served['tool'].pk}/call/"
    assert api.post(url, {"arguments": QUERY}, format="json").status_code == 200
    assert api.post(url, {"arguments": QUERY}, format="json").status_code == 200
    refused = api.post(url, {"arguments": {"query": 5}}, format="json")
    assert refused.status_code == 400
    assert refused.json()["request_id"] == refused["X-Request-ID"]
    assert (calls(**ok) - before[0], calls(**bad) - before[1]) == (2, 1)


def test_admin_try_it_calls_are_counted(served, client, owner):
    client.force_login(owner)
    ok = {"instance": "", "tool_type": "query_data", "surface": "admin", "outcome": "ok"}
    before = calls(**ok)
    response = client.post(reverse("admin:tools_app_tool_try", args=[served["tool"].pk]), QUERY)
    assert response.status_code == 200
    assert calls(**ok) - before == 1


def test_metrics_text_carries_the_counted_call(served, client, superuser):
    """The same number in the Prometheus text format as in the registry."""
    Harness().call("shop", served["key"], "orders_query", QUERY)
    client.force_login(superuser)
    text = client.get("/metrics").content.decode()
    families = {family.name: family for family in text_string_to_metric_families(text)}
    wanted = {"instance": "shop", "tool_type": "query_data", "surface": "mcp", "outcome": "ok"}
    values = [
        s.value for s in families["toolhub_tool_calls"].samples if s.labels == wanted and s.name.endswith("total")
    ]
    assert values == [calls(**wanted)]
    for name in (
        "toolhub_tool_call_duration_seconds",
        "toolhub_tool_result_bytes",
        "toolhub_rate_limit_refusals",
        "toolhub_auth_failures",
        "toolhub_search_duration_seconds",
        "toolhub_table_write_duration_seconds",
        "toolhub_budget_refusals",
    ):
        assert name in families, name


# The element budget refuses in the evaluator; over rows the query runs in SQL under the time budget instead.
@pytest.mark.usefixtures("document_storage")
def test_budget_refusals_are_counted(served, settings):
    settings.TOOLHUB_QUERY_MAX_ELEMENTS = 1
    from tools_app.models import McpInstance

    McpInstance.objects.filter(slug="shop").update(query_max_elements=1)
    labels = {"instance": "shop", "tool_type": "query_data", "surface": "mcp"}
    before = sample("toolhub_budget_refusals_total", labels)
    reply = Harness().call("shop", served["key"], "orders_query", {"query": "[*].[id, id, id, customer]"})
    assert reply["result"]["isError"] is True
    assert reply["result"]["content"][0]["text"].startswith("QUERY_TOO_EXPENSIVE")
    assert sample("toolhub_budget_refusals_total", labels) - before == 1


def test_rate_limit_refusals_are_counted_on_mcp_and_api(served, owner, rate_limited):
    rate_limited(mcp_key="2/minute", user="1/minute")
    before = (
        sample("toolhub_rate_limit_refusals_total", {"scope": "mcp_key"}),
        sample("toolhub_rate_limit_refusals_total", {"scope": "user"}),
    )
    harness = Harness()
    statuses = [harness.post("shop", {"jsonrpc": "2.0", "id": 1, "method": "ping"}, key=served["key"]).status_code]
    statuses += [harness.post("shop", {"jsonrpc": "2.0", "id": 2, "method": "ping"}, key=served["key"]).status_code]
    limited = harness.post("shop", {"jsonrpc": "2.0", "id": 3, "method": "ping"}, key=served["key"])
    api = client_for(owner)
    api_statuses = [api.get("/api/tables/").status_code, api.get("/api/tables/").status_code]
    assert statuses + [limited.status_code] == [200, 200, 429]
    assert limited.json()["error"]["data"]["request_id"] == limited.headers["x-request-id"]
    assert api_statuses == [200, 429]
    after = (
        sample("toolhub_rate_limit_refusals_total", {"scope": "mcp_key"}),
        sample("toolhub_rate_limit_refusals_total", {"scope": "user"}),
    )
    assert (after[0] - before[0], after[1] - before[1]) == (1, 1)
    rate_limits.reset()


def test_auth_failures_are_counted_on_mcp_api_and_login(served, client):
    labels = [{"surface": surface} for surface in ("mcp", "api", "login")]
    before = [sample("toolhub_auth_failures_total", label) for label in labels]
    denied = Harness().post("shop", {"jsonrpc": "2.0", "id": 1, "method": "ping"}, key="thk_wrong")
    api = client_for(None)
    token_refused = api.get("/api/tables/", HTTP_AUTHORIZATION="Token not-a-token")
    login = client.post("/api/auth/token/", {"username": "owner", "password": "wrong"}, content_type="application/json")
    after = [sample("toolhub_auth_failures_total", label) for label in labels]
    assert (denied.status_code, token_refused.status_code, login.status_code) == (401, 401, 400)
    assert denied.json()["error"]["data"]["request_id"] == denied.headers["x-request-id"]
    assert [b - a for a, b in zip(before, after, strict=True)] == [1, 1, 1]


def test_search_and_table_writes_are_timed(owner, table, make_tool):
    from tools_app import services
    from tools_app.registry import search_tools
    from tools_app.registry.scope import UserScope

    make_tool(owner, table, name="orders_query")
    searches = sample("toolhub_search_duration_seconds_count", {"method": "bm25"})
    writes = sample("toolhub_table_write_duration_seconds_count")
    search_tools(scope=UserScope(owner), query="orders", method="bm25")
    services.table_write(table_id=table.pk, change=lambda data, derived: (data, None, [], [], {}))
    assert sample("toolhub_search_duration_seconds_count", {"method": "bm25"}) - searches == 1
    assert sample("toolhub_table_write_duration_seconds_count") - writes == 1


#
# Request ids and JSON logs
#


def test_a_well_formed_request_id_is_kept_and_a_bad_one_replaced(client):
    assert client.get("/healthz", HTTP_X_REQUEST_ID="lb-1234.abc").headers["X-Request-ID"] == "lb-1234.abc"
    replaced = client.get("/healthz", HTTP_X_REQUEST_ID="x" * 65).headers["X-Request-ID"]
    assert len(replaced) == 32
    assert replaced != "x" * 65
    assert client.get("/healthz", HTTP_X_REQUEST_ID="a b\x01").headers["X-Request-ID"] != "a b\x01"


def test_api_error_bodies_keep_the_spec_shape_and_add_the_request_id(client, settings):
    response = client_for(None).get("/api/tables/")
    body = response.json()
    assert response.status_code == 401
    assert set(body) == {"error", "message", "request_id"}
    assert body["request_id"] == response["X-Request-ID"]
    missing = client.get("/api/nope/")
    assert missing.json()["request_id"] == missing["X-Request-ID"]
    settings.TOOLHUB_REQUEST_ID_IN_ERRORS = False
    plain = client_for(None).get("/api/tables/")
    assert (set(plain.json()), len(plain["X-Request-ID"])) == ({"error", "message"}, 32)


def test_mcp_tool_errors_carry_the_request_id(served):
    response = Harness().post(
        "shop",
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "nope", "arguments": {}}},
        key=served["key"],
        headers={"x-request-id": "client-42"},
    )
    assert response.headers["x-request-id"] == "client-42"
    assert response.json()["error"]["data"] == {"request_id": "client-42"}


@pytest.fixture
def json_lines(caplog):
    telemetry.json_logs(True)
    caplog.set_level(logging.INFO, logger="toolhub.requests")
    caplog.set_level(logging.INFO, logger="toolhub.calls")
    yield lambda name: [json.loads(r.getMessage()) for r in caplog.records if r.name == name]
    telemetry.json_logs(False)


def test_json_logs_one_line_per_request_and_per_call_without_arguments(served, json_lines):
    harness = Harness()
    secret_argument = "[?customer=='very-secret-value'].id"
    harness.post(
        "shop",
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "orders_query", "arguments": {
            "query": secret_argument}}},
        key=served["key"],
        headers={"x-request-id": "req-1"},
    )  # fmt: skip
    (request,) = json_lines("toolhub.requests")
    (call,) = json_lines("toolhub.calls")
    api_key_id = CallLog.objects.get().api_key_id
    assert {k: v for k, v in request.items() if k not in ("time", "duration_ms")} == {
        "event": "request",
        "request_id": "req-1",
        "surface": "mcp",
        "method": "POST",
        "path": "/mcp/shop/",
        "status": 200,
        "user_id": None,
        "api_key_id": api_key_id,
        "instance": "shop",
    }
    assert {k: v for k, v in call.items() if k not in ("time", "duration_ms")} == {
        "event": "tool_call",
        "request_id": "req-1",
        "surface": "mcp",
        "user_id": served["tool"].owner_id,
        "api_key_id": api_key_id,
        "instance": "shop",
        "tool": "orders_query",
        "tool_type": "query_data",
        "outcome": "ok",
    }
    assert call["time"].endswith("Z")
    assert call["duration_ms"] >= 0
    everything = json.dumps(json_lines("toolhub.requests") + json_lines("toolhub.calls"))
    assert "very-secret-value" not in everything
    assert served["key"] not in everything


def test_json_logs_for_an_api_request(owner, json_lines):
    client_for(owner).get("/api/tables/", HTTP_X_REQUEST_ID="api-7")
    (line,) = json_lines("toolhub.requests")
    assert (line["request_id"], line["surface"], line["status"], line["user_id"], line["path"]) == (
        "api-7",
        "api",
        200,
        owner.pk,
        "/api/tables/",
    )


def test_no_log_lines_when_json_logs_are_off(served, caplog):
    caplog.set_level(logging.INFO, logger="toolhub.calls")
    Harness().call("shop", served["key"], "orders_query", QUERY)
    assert [r for r in caplog.records if r.name in ("toolhub.calls", "toolhub.requests")] == []


#
# The operator's page
#


def test_operations_page_is_for_superusers_only(client, owner, superuser, served):
    url = reverse("toolhub-operations")
    assert client.get(url).status_code == 302  # to the admin login
    client.force_login(owner)
    assert client.get(url).status_code == 403
    client.force_login(superuser)
    Harness().call("shop", served["key"], "orders_query", QUERY)
    response = client.get(url)
    assert response.status_code == 200
    numbers = response.context["calls"]
    assert numbers["calls"] == int(sum(s.value for s in _call_samples()))
    means = [row["mean_ms"] for row in numbers["slowest"]]
    assert (len(means) <= 5, means) == (True, sorted(means, reverse=True))
    everything = telemetry.summary(slowest=100_000)["slowest"]
    assert any(row["instance"] == "shop" and row["tool_type"] == "query_data" for row in everything)
    assert response.context["status"]["database"]["vendor"] == connection.vendor


def _call_samples():
    for family in REGISTRY.collect():
        if family.name == "toolhub_tool_calls":
            yield from (s for s in family.samples if s.name.endswith("_total"))


@pytest.mark.postgres
def test_metrics_report_the_connection_pool(client, superuser, settings):
    """On PostgreSQL with the pool (DATABASE_POOL_MAX_SIZE > 0), a scrape reads this worker's pool."""
    if not settings.DATABASES["default"].get("OPTIONS", {}).get("pool"):
        pytest.skip("the connection pool is off")
    client.force_login(superuser)
    text = client.get("/metrics").content.decode()
    states = {
        sample.labels["state"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "toolhub_db_pool_connections"
    }
    assert set(states) == {"size", "available", "waiting"}
    assert states["size"] >= 1


def test_a_login_lockout_is_counted_as_a_rate_limit_refusal(owner, client):
    lockouts = sample("toolhub_rate_limit_refusals_total", {"scope": "login_lockout"})
    failures = sample("toolhub_auth_failures_total", {"surface": "login"})
    statuses = [
        client.post(
            "/api/auth/token/", {"username": "owner", "password": "wrong"}, content_type="application/json"
        ).status_code
        for _ in range(6)
    ]
    assert statuses == [400, 400, 400, 400, 429, 429]
    assert sample("toolhub_rate_limit_refusals_total", {"scope": "login_lockout"}) - lockouts == 2
    assert sample("toolhub_auth_failures_total", {"surface": "login"}) - failures == 6  # every refused attempt


def test_the_operator_page_names_an_unreachable_redis_quickly(settings):
    from tests.live_server import free_port

    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    started = time.monotonic()
    facts = health._redis()
    assert facts == {"configured": True, "state": "unreachable (ConnectionError)"}
    assert time.monotonic() - started < 2.5
    settings.REDIS_URL = ""
    assert health._redis()["configured"] is False
