"""Rate limits counted in Redis: every process that shares REDIS_URL shares the counts.

Redis runs on this machine and in CI (127.0.0.1:6379); these tests use db 5 and a key prefix of their own,
and delete their keys afterwards. Nothing is skipped: without Redis they fail.
"""

import json
import os
import urllib.error
import urllib.request
import uuid

import pytest
import redis

from mcp_app.tests.mcp_harness import Harness, rpc_body
from tests.api_helpers import client_for
from tests.live_server import Uvicorn, run_python, server_database
from tools_app.kernel import rate_limits

REDIS_URL = "redis://127.0.0.1:6379/5"


@pytest.fixture
def redis_prefix():
    """A key prefix of this test's own; its keys are deleted afterwards."""
    prefix = f"toolhub-test-{uuid.uuid4().hex[:12]}"
    yield prefix
    client = redis.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(f"{prefix}:*"))
    if keys:
        client.delete(*keys)
    client.close()


def redis_keys(prefix: str) -> list[str]:
    client = redis.Redis.from_url(REDIS_URL)
    try:
        return sorted(key.decode() for key in client.scan_iter(f"{prefix}:*"))
    finally:
        client.close()


@pytest.mark.django_db
def test_both_surfaces_count_in_redis(rate_limited, settings, redis_prefix, owner, instance, make_api_key):
    """In process: the API (sync client) and MCP (asyncio client) count in Redis under the prefix."""
    # given
    settings.REDIS_URL = REDIS_URL
    settings.TOOLHUB_RATE_LIMIT_KEY_PREFIX = redis_prefix
    rate_limited(user="2/minute", mcp_key="2/minute")
    api_key, key = make_api_key(instance)
    client, harness = client_for(owner), Harness()
    # when
    api = [client.get("/api/tables/").status_code for _ in range(3)]
    mcp = [harness.post("shop", rpc_body("ping"), key=key).status_code for _ in range(3)]
    # then
    assert (api, mcp) == ([200, 200, 429], [200, 200, 429])
    assert redis_keys(redis_prefix) == [
        f"{redis_prefix}:LIMITER/mcp_key/{api_key.pk}/2/1/minute",
        f"{redis_prefix}:LIMITER/user/{owner.pk}/2/1/minute",
    ]


@pytest.fixture(scope="module")
def shared_server_db(tmp_path_factory):
    """One database for two servers: a user with an API token, an instance 'rl' (5 requests per minute per
    key) and its key."""
    with server_database("rl", tmp_path_factory.mktemp("rl"), secret="rl-secret") as env:
        seeded = run_python(
            env,
            "from django.contrib.auth import get_user_model\n"
            "from tools_app.services import api_key_issue, instance_create\n"
            "from tools_app.services.tokens import api_token_issue\n"
            "user = get_user_model().objects.create_user('rl', password='pw-123456!')\n"
            "instance = instance_create(owner=user, name='RL', slug='rl', key_rate_limit='5/minute')\n"
            "print(json.dumps({'key': api_key_issue(mcp_instance=instance, label='rl')[1],"
            " 'token': api_token_issue(user=user)[1]}))",
        )
        yield {"env": env, **json.loads(seeded)}


def mcp_ping(base: str, key: str) -> int:
    request = urllib.request.Request(
        f"{base}/mcp/rl/",
        data=json.dumps(rpc_body("ping")).encode(),
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-11-25",
            "Authorization": f"Bearer {key}",
        },
        method="POST",
    )
    return _status(request)


def api_get(base: str, token: str) -> int:
    return _status(urllib.request.Request(f"{base}/api/tables/", headers={"Authorization": f"Token {token}"}))


REFUSALS: list[tuple[int, dict]] = []  # (Retry-After, body) of every 429 seen


def _status(request: urllib.request.Request) -> int:
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as error:
        if error.code == 429:
            REFUSALS.append((int(error.headers["Retry-After"]), json.loads(error.read())))
        return error.code


@pytest.fixture
def two_servers(shared_server_db, redis_prefix, request):
    """Two separate uvicorn processes on the same database; with Redis (param True) or memory counts."""
    env = {
        **shared_server_db["env"],
        "TOOLHUB_RATE_LIMITS_ENABLED": "true",
        "TOOLHUB_RATE_LIMIT_KEY_PREFIX": redis_prefix,
        "TOOLHUB_RATE_LIMIT_USER": "4/minute",
    }
    env.pop("REDIS_URL", None)
    if request.param:
        env["REDIS_URL"] = REDIS_URL
    servers = [Uvicorn(env), Uvicorn(env)]
    try:
        yield servers
    finally:
        for server in servers:
            server.stop()


@pytest.mark.e2e
@pytest.mark.parametrize("two_servers", [True], indirect=True, ids=["redis"])
def test_two_processes_share_the_counts_in_redis(two_servers, shared_server_db, redis_prefix):
    """With REDIS_URL, a key's 5 requests per minute are 5 across both servers; so are a user's 4."""
    first, second = (server.base for server in two_servers)
    key, token = shared_server_db["key"], shared_server_db["token"]
    REFUSALS.clear()
    # MCP: 3 on the first server, then 3 on the second: the sixth is over 5/minute
    assert [mcp_ping(first, key) for _ in range(3)] == [200, 200, 200]
    assert [mcp_ping(second, key) for _ in range(3)] == [200, 200, 429]
    assert mcp_ping(first, key) == 429
    # API: 2 + 3 requests of one user: the fifth is over 4/minute
    assert [api_get(first, token) for _ in range(2)] == [200, 200]
    assert [api_get(second, token) for _ in range(3)] == [200, 200, 429]
    assert len(redis_keys(redis_prefix)) == 2
    # the answers: Retry-After and the body of each surface
    assert [(1 <= retry_after <= 60) for retry_after, _ in REFUSALS] == [True, True, True]
    assert [body["error"]["data"]["details"]["limit"] for _, body in REFUSALS[:2]] == ["5 requests per minute"] * 2
    assert [body["error"]["code"] for _, body in REFUSALS[:2]] == [-32029, -32029]
    assert (REFUSALS[2][1]["error"], REFUSALS[2][1]["details"]["limit"]) == ("RATE_LIMITED", "4 requests per minute")


@pytest.mark.e2e
@pytest.mark.parametrize("two_servers", [False], indirect=True, ids=["memory"])
def test_without_redis_each_process_counts_alone(two_servers, shared_server_db):
    """Without REDIS_URL the counts are per process (docs/rate-limits.md): 3 + 3 requests all pass."""
    first, second = (server.base for server in two_servers)
    key = shared_server_db["key"]
    assert [mcp_ping(first, key) for _ in range(3)] + [mcp_ping(second, key) for _ in range(3)] == [200] * 6
    assert [mcp_ping(first, key) for _ in range(3)] == [200, 200, 429]


def test_the_test_environment_turns_limits_off():
    """Servers started by tests inherit limits off unless a test turns them on (conftest.py)."""
    assert os.environ["TOOLHUB_RATE_LIMITS_ENABLED"] == "false"
    assert rate_limits.DEFAULT_RATES["mcp_key"] == "600/minute"
