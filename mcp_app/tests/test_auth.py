"""SPEC §4.1, §4.2, §8: who may reach an MCP endpoint (Host, Origin, bearer key, slug)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from mcp_app.tests.mcp_harness import ERAS, LEGACY, Harness, rpc_body
from tools_app.execution.pipeline import KEY_TOUCH_INTERVAL, key_touches
from tools_app.models import ApiKey, CallLog, Tool
from tools_app.services import api_key_revoke, instance_update


def call_body(era=LEGACY):
    return rpc_body("tools/call", {"name": "orders_query", "arguments": {"query": "length(@)"}}, era=era)


def assert_nothing_recorded(tool):
    assert CallLog.objects.count() == 0
    tool.refresh_from_db()
    assert tool.use_count == 0
    assert tool.last_used is None


@pytest.mark.parametrize("era", ERAS)
def test_valid_key_reaches_the_tools(served, era):
    """A key of the instance, as a Bearer token, is let through to tools/call."""
    # when
    response = Harness().post("shop", call_body(era), key=served["key"], era=era)
    # then
    assert response.status_code == 200
    assert response.json()["result"]["structuredContent"] == {"result": 3}


@pytest.mark.parametrize("era", ERAS)
def test_missing_key_is_401_with_bearer_challenge(served, era):
    """No Authorization header: 401 and `WWW-Authenticate: Bearer`; the tool never runs."""
    # when
    response = Harness().post("shop", call_body(era), era=era)
    # then
    assert response.status_code == 401
    # With the OAuth hints (RFC 9728 resource metadata, the scope to ask for)
    assert response.headers["www-authenticate"] == (
        'Bearer realm="toolhub", scope="tools:all", '
        'resource_metadata="http://localhost/.well-known/oauth-protected-resource/mcp/shop/"'
    )
    assert response.json()["error"]["data"]["error"] == "UNAUTHORIZED"
    assert_nothing_recorded(served["tool"])


@pytest.mark.parametrize(
    "authorization",
    ["Bearer thk_not-a-real-key", "Basic dXNlcjpwdw==", "Bearer", "Token abc"],
)
def test_wrong_key_or_scheme_is_401(served, authorization):
    """A key that is not one of the instance's, or another scheme, is 401 with a Bearer challenge."""
    # when
    response = Harness().post("shop", call_body(), headers={"authorization": authorization})
    # then
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer ")
    assert_nothing_recorded(served["tool"])


def test_bearer_scheme_is_case_insensitive(served):
    """`bearer <key>` works like `Bearer <key>` (RFC 9110: auth schemes are case-insensitive)."""
    # when
    response = Harness().post("shop", call_body(), headers={"authorization": f"bearer {served['key']}"})
    # then
    assert response.status_code == 200


def test_other_instances_key_is_a_wrong_key(served, owner, make_instance, make_api_key):
    """SPEC §4.2: a key of another instance (same owner) is 401 here."""
    # given
    other = make_instance(owner, slug="other")
    _, other_key = make_api_key(other)
    # when
    response = Harness().post("shop", call_body(), key=other_key)
    # then
    assert response.status_code == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]
    assert_nothing_recorded(served["tool"])


def test_revoked_key_is_401(served):
    """A revoked key is refused like a wrong one."""
    # given
    api_key_revoke(api_key=served["api_key"])
    # when
    response = Harness().post("shop", call_body(), key=served["key"])
    # then
    assert response.status_code == 401
    assert_nothing_recorded(served["tool"])


@pytest.mark.parametrize("era", ERAS)
def test_key_revoked_after_use_is_refused_on_the_next_request(served, era):
    """SPEC §1: a revocation made anywhere is seen by the next request, though this process saw the key valid."""
    # given
    harness = Harness()
    assert harness.post("shop", call_body(era), key=served["key"], era=era).status_code == 200
    api_key_revoke(api_key=served["api_key"])
    # when
    response = harness.post("shop", call_body(era), key=served["key"], era=era)
    # then
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer ")
    assert CallLog.objects.count() == 1  # only the call made before the revocation


@pytest.mark.parametrize("method", ["tools/list", "ping"])
def test_the_recheck_of_a_request_reads_no_password_hash(served, method):
    """The instance's re-check brings its owner along (the registry needs them), never the owner's password hash."""
    # given
    harness = Harness()
    assert harness.post("shop", call_body(LEGACY), key=served["key"]).status_code == 200  # the key seen once

    # when
    with CaptureQueriesContext(connection) as queries:
        response = harness.post("shop", rpc_body(method), key=served["key"])

    # then
    assert response.status_code == 200
    rechecks = [q["sql"] for q in queries.captured_queries if 'FROM "mcp_app_mcpinstance"' in q["sql"]]
    assert len(rechecks) == 1
    assert '"auth_user"."username"' in rechecks[0]
    assert '"auth_user"."password"' not in rechecks[0]


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("method", ["tools/list", "ping", "no/such/method"])
def test_revocation_is_seen_by_every_method(served, era, method):
    """The re-check covers tools/list, ping and unknown methods too, not only tools/call."""
    # given
    harness = Harness()
    assert harness.post("shop", call_body(era), key=served["key"], era=era).status_code == 200
    api_key_revoke(api_key=served["api_key"])
    # when
    response = harness.post("shop", rpc_body(method, era=era), key=served["key"], era=era)
    # then
    assert response.status_code == 401


@pytest.mark.parametrize("key_kind", ["valid", "none", "wrong"])
def test_unknown_slug_is_404_whatever_the_key(served, key_kind):
    """SPEC §8: an unknown slug is 404, with a valid key of another instance, no key or a wrong key."""
    # given
    key = {"valid": served["key"], "none": None, "wrong": "thk_wrong"}[key_kind]
    # when
    response = Harness().post("nowhere", call_body(), key=key)
    # then
    assert response.status_code == 404
    assert response.json()["error"]["data"]["error"] == "NOT_FOUND"
    assert_nothing_recorded(served["tool"])


def test_disabled_instance_is_404(served):
    """SPEC §4.2: a disabled instance is 404 even with its own valid key."""
    # given
    instance_update(instance=served["instance"], enabled=False)
    # when
    response = Harness().post("shop", call_body(), key=served["key"])
    # then
    assert response.status_code == 404
    assert_nothing_recorded(served["tool"])


@pytest.mark.parametrize("era", ERAS)
def test_instance_disabled_after_use_is_404_on_the_next_request(served, era):
    """Disabling an instance is seen by the next request, though its key was seen valid before."""
    # given
    harness = Harness()
    assert harness.post("shop", call_body(era), key=served["key"], era=era).status_code == 200
    instance_update(instance=served["instance"], enabled=False)
    # when
    response = harness.post("shop", call_body(era), key=served["key"], era=era)
    # then
    assert response.status_code == 404


def test_paths_other_than_an_instance_are_404(served):
    """Only /mcp/<slug>/ (with or without the trailing slash) is an endpoint."""
    # when
    deeper = Harness().post("shop", call_body(), key=served["key"], path="/mcp/shop/extra/")
    no_slash = Harness().post("shop", call_body(), key=served["key"], path="/mcp/shop")
    # then
    assert deeper.status_code == 404
    assert no_slash.status_code == 200


@pytest.mark.parametrize(
    ("origin", "status"),
    [
        ("http://evil.example", 403),
        ("null", 403),
        ("http://localhost:6274", 200),
        ("http://127.0.0.1", 200),
    ],
)
def test_origin_host_must_be_an_allowed_host(served, origin, status):
    """SPEC §8: an Origin whose host is not in ALLOWED_HOSTS is 403 (DNS rebinding); allowed hosts pass."""
    # when
    response = Harness().post("shop", call_body(), key=served["key"], headers={"origin": origin})
    # then
    assert response.status_code == status
    assert CallLog.objects.count() == (1 if status == 200 else 0)


def test_host_not_in_allowed_hosts_is_400(served):
    """A Host header outside ALLOWED_HOSTS is refused like Django refuses it (400), before any key check."""
    # when
    response = Harness().post("shop", call_body(), key=served["key"], headers={"host": "evil.example"})
    # then
    assert response.status_code == 400
    assert "Invalid Host header" in response.json()["error"]["data"]["message"]
    assert_nothing_recorded(served["tool"])


def test_allowed_hosts_setting_is_followed(served, settings):
    """ALLOWED_HOSTS decides: a host added there is served."""
    # given
    settings.ALLOWED_HOSTS = ["mcp.example.com"]
    # when
    response = Harness().post(
        "shop",
        call_body(),
        key=served["key"],
        headers={"host": "mcp.example.com", "origin": "https://mcp.example.com"},
    )
    # then
    assert response.status_code == 200


def test_a_host_served_before_is_refused_once_allowed_hosts_drops_it(served, settings):
    """A (Host, Origin) pair found allowed is kept only until the settings change: the same pair is 400 once
    ALLOWED_HOSTS no longer names its host, and nothing of that call is recorded."""
    # given
    settings.ALLOWED_HOSTS = ["mcp.example.com"]
    headers = {"host": "mcp.example.com", "origin": "https://mcp.example.com"}
    served_before = Harness().post("shop", call_body(), key=served["key"], headers=headers)
    assert served_before.status_code == 200
    assert CallLog.objects.count() == 1
    # when
    settings.ALLOWED_HOSTS = ["other.example.com"]
    response = Harness().post("shop", call_body(), key=served["key"], headers=headers)
    # then
    assert response.status_code == 400
    assert "Invalid Host header 'mcp.example.com'" in response.json()["error"]["data"]["message"]
    assert CallLog.objects.count() == 1


def test_get_is_405_after_auth(served):
    """Stateless endpoint: GET (a server-to-client stream) is 405 with `Allow: POST`; unauthenticated GET is 401."""
    # when
    authorized = Harness().http("GET", "/mcp/shop/", headers={"authorization": f"Bearer {served['key']}"})
    anonymous = Harness().http("GET", "/mcp/shop/")
    # then
    assert authorized.status_code == 405
    assert authorized.headers["allow"] == "POST"
    assert anonymous.status_code == 401


def test_last_used_at_is_kept_without_a_write_per_request(served):
    """A key's last_used_at is set by its first request and written at most once a minute per process."""
    # given
    harness = Harness()
    # when
    harness.post("shop", call_body(), key=served["key"])
    first = ApiKey.objects.get(pk=served["api_key"].pk).last_used_at
    harness.post("shop", call_body(), key=served["key"])
    # then
    assert first is not None
    assert ApiKey.objects.get(pk=served["api_key"].pk).last_used_at == first  # the second call wrote no key
    assert key_touches.due(served["api_key"].pk) is False
    assert key_touches.due(served["api_key"].pk, now=10**9 + KEY_TOUCH_INTERVAL) is True


def test_tool_owned_by_nobody_else_is_untouched_by_denied_calls(served, other_user, make_table, make_tool):
    """Denied requests write nothing anywhere: no call log, no use count on any tool."""
    # given
    foreign = make_tool(other_user, make_table(other_user), name="orders_query")
    # when
    Harness().post("shop", call_body(), key="thk_guess")
    # then
    assert_nothing_recorded(served["tool"])
    assert Tool.objects.get(pk=foreign.pk).use_count == 0


#
# Refusals without a database lookup; deactivated owners
#


def _deactivate(user):
    user.is_active = False
    user.save(update_fields=["is_active"])


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("method", ["tools/call", "tools/list", "ping"])
def test_deactivated_owners_key_is_refused_on_the_next_request(served, owner, era, method):
    """Once the instance's owner is deactivated, its key is a 401 on the next request, though this
    process saw the key valid; nothing is recorded."""
    # given
    harness = Harness()
    assert harness.post("shop", call_body(era), key=served["key"], era=era).status_code == 200
    _deactivate(owner)
    body = call_body(era) if method == "tools/call" else rpc_body(method, era=era)

    # when
    response = harness.post("shop", body, key=served["key"], era=era)

    # then
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == (
        'Bearer realm="toolhub", error="invalid_token", scope="tools:all", '
        'resource_metadata="http://localhost/.well-known/oauth-protected-resource/mcp/shop/"'
    )
    message = "Invalid API key for this instance: the instance's owner is deactivated."
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32001,
            "message": f"UNAUTHORIZED: {message}",
            "data": {"error": "UNAUTHORIZED", "message": message, "status": 401},
        },
    }
    assert CallLog.objects.count() == 1  # only the call made before the deactivation
    assert ApiKey.objects.get().revoked_at is None  # refused, not revoked: reactivating the owner restores it


def test_deactivated_owners_key_is_refused_on_first_use(served, owner):
    """A key never seen by this process is refused too when its owner is inactive."""
    # given
    _deactivate(owner)
    # when
    response = Harness().post("shop", call_body(), key=served["key"])
    # then
    assert response.status_code == 401
    assert_nothing_recorded(served["tool"])


def test_reactivated_owners_key_works_again(served, owner):
    """Deactivation refuses the key without destroying it: the owner active again, the key works."""
    # given
    _deactivate(owner)
    assert Harness().post("shop", call_body(), key=served["key"]).status_code == 401
    owner.is_active = True
    owner.save(update_fields=["is_active"])
    # when
    response = Harness().post("shop", call_body(), key=served["key"])
    # then
    assert response.status_code == 200


@pytest.mark.parametrize(
    ("authorization", "status"),
    [
        ("Bearer thk_not-a-real-key", 401),  # not of the key format
        ("Bearer " + "thk_" + "A" * 43, 401),  # of the format, matching no key
        ("Basic dXNlcjpwdw==", 401),  # no bearer key
        (None, 401),
    ],
)
def test_a_key_that_cannot_be_valid_costs_no_query_the_second_time(
    served, authorization, status, django_assert_num_queries
):
    """Once this process knows the slug, a missing, malformed or known-unknown key is refused from
    memory: no database query, the same answer."""
    # given
    headers = {"authorization": authorization} if authorization else {}
    harness = Harness()
    first = harness.post("shop", call_body(), headers=headers)

    # when
    with django_assert_num_queries(0):
        second = harness.post("shop", call_body(), headers=headers)

    # then
    assert (first.status_code, second.status_code) == (status, status)
    assert second.json() == first.json()
    assert second.headers["www-authenticate"] == first.headers["www-authenticate"]
    assert_nothing_recorded(served["tool"])


def test_unknown_slug_with_a_bad_key_is_404_from_memory(served, django_assert_num_queries):
    """SPEC §8 holds for refusals from memory: an unknown slug stays 404 whatever the key."""
    # given
    harness = Harness()
    assert harness.post("nope", call_body(), key="garbage").status_code == 404
    # when
    with django_assert_num_queries(0):
        response = harness.post("nope", call_body(), key="another-garbage")
    # then
    assert response.status_code == 404
    assert response.json()["error"]["data"] == {
        "error": "NOT_FOUND",
        "message": "No MCP instance is served at /mcp/nope/.",
        "status": 404,
    }


def test_slug_state_is_read_again_after_the_cache_time(served, settings, django_assert_num_queries):
    """The slug's state used for refusals from memory is kept TOOLHUB_AUTH_CACHE_SECONDS only."""
    # given
    settings.TOOLHUB_AUTH_CACHE_SECONDS = 0
    harness = Harness()
    assert harness.post("shop", call_body(), key="garbage").status_code == 401
    # when
    with django_assert_num_queries(1):  # the instance row; the key needs no lookup
        response = harness.post("shop", call_body(), key="garbage")
    # then
    assert response.status_code == 401


def test_a_valid_key_is_never_refused_from_memory(served, django_assert_num_queries):
    """A well-formed key not known to be unknown always reaches the database: a new key works at once."""
    # given
    harness = Harness()
    assert harness.post("shop", call_body(), key="thk_" + "C" * 43).status_code == 401
    # when
    response = harness.post("shop", call_body(), key=served["key"])
    # then
    assert response.status_code == 200


def test_auth_cache_of_unknown_keys_is_bounded():
    """A flood of random keys cannot grow memory without end: the oldest unknown hashes are dropped."""
    from mcp_app.auth import MALFORMED_KEY, AuthCache

    # given
    cache = AuthCache(unknown_capacity=3)
    # when
    for number in range(10):
        cache.note_unknown_key(f"hash-{number}")
    # then
    assert [cache.is_unknown_key(f"hash-{number}") for number in range(10)] == [False] * 7 + [True] * 3
    assert cache.is_unknown_key(MALFORMED_KEY) is True
