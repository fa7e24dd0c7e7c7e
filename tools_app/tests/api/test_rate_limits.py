"""Rate limits on the JSON API (issue 13): per user, per IP on the token endpoint; 429 RATE_LIMITED with
Retry-After, and nothing done by the refused request. The rule itself: tools_app.kernel.rate_limits."""

import time
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from rest_framework import exceptions

from tests.api_helpers import client_for, db_snapshot
from tools_app import services
from tools_app.api.errors import exception_handler
from tools_app.kernel import rate_limits
from tools_app.models import CallLog, McpInstance, RefusalCount, Table
from tools_app.validators import validate_rate

pytestmark = pytest.mark.django_db


def limited_body(response, window: set[int], *, scope: str, who: str, limit: str) -> dict:
    """The 429 answer's body, after checking its status and that Retry-After is the body's retry_after."""
    assert response.status_code == 429, response.content
    retry_after = int(response.headers["Retry-After"])
    assert retry_after in window
    assert response.json() == {
        "error": "RATE_LIMITED",
        "message": f"Too many requests for {who}: the limit is {limit}. Retry in {retry_after} s.",
        "details": {"retry_after": retry_after, "limit": limit, "scope": scope},
    }
    return response.json()


#
# The rule
#


@pytest.mark.parametrize(
    ("text", "amount", "seconds", "described"),
    [
        ("600/minute", 600, 60, "600 requests per minute"),
        ("1/second", 1, 1, "1 request per second"),
        ("100/5 minutes", 100, 300, "100 requests per 5 minutes"),
        ("5000 per hour", 5000, 3600, "5000 requests per hour"),
    ],
)
def test_rates_parse(text, amount, seconds, described):
    """A rate is <count>/<period>; messages describe it in words."""
    rate = rate_limits.parse_rate(text)
    assert (rate.amount, rate.get_expiry(), rate_limits.describe(rate)) == (amount, seconds, described)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("abc", "'abc' is not a rate: write <count>/<period>, e.g. '600/minute', '10/second' or '100/5 minutes'."),
        ("10/fortnight", "'10/fortnight' is not a rate: write <count>/<period>, e.g. '600/minute', '10/second' or "
         "'100/5 minutes'."),
        ("10/second; 100/minute", "'10/second; 100/minute' holds 2 rates; give exactly one, e.g. '600/minute'."),
        ("0/minute", "'0/minute' allows no request: the count and the period must be at least 1."),
    ],
)  # fmt: skip
def test_bad_rates_are_refused_with_what_is_wrong(text, message):
    with pytest.raises(ValidationError) as raised:
        validate_rate(text)
    assert raised.value.messages == [message]
    assert raised.value.error_list[0].code == "invalid_rate"


def test_empty_rate_means_the_default(settings):
    """An instance without its own rate uses TOOLHUB_RATE_LIMITS['mcp_key']."""
    settings.TOOLHUB_RATE_LIMITS = {**rate_limits.DEFAULT_RATES, "mcp_key": "7/hour"}
    validate_rate("")
    assert (rate_limits.mcp_key_rate(""), rate_limits.mcp_key_rate("3/second")) == ("7/hour", "3/second")


def test_settings_check_names_a_bad_rate_and_a_bad_redis_url(settings):
    settings.TOOLHUB_RATE_LIMITS = {**rate_limits.DEFAULT_RATES, "token": "often"}
    settings.REDIS_URL = "http://cache:6379"
    errors = rate_limits.check_settings()
    assert [(error.id, error.msg) for error in errors] == [
        (
            "toolhub.E101",
            "TOOLHUB_RATE_LIMITS['token']: 'often' is not a rate: write <count>/<period>, e.g. '600/minute', "
            "'10/second' or '100/5 minutes'.",
        ),
        ("toolhub.E102", "REDIS_URL must start with redis:// or rediss://, not 'http://cache:6379'."),
    ]


def test_default_settings_pass_the_check():
    assert rate_limits.check_settings() == []


def test_hits_over_the_rate_raise_with_retry_after(rate_limited):
    """The (N+1)-th request of a window is refused; other buckets are not affected."""
    bucket = rate_limits.Bucket.of(rate_limits.API_USER, 1, "3/minute")
    for _ in range(3):
        rate_limits.hit(bucket)
    with pytest.raises(rate_limits.RateLimited) as raised:
        rate_limits.hit(bucket)
    assert raised.value.retry_after in rate_limited.retry_after_now()
    assert raised.value.status == 429
    rate_limits.hit(rate_limits.Bucket.of(rate_limits.API_USER, 2, "3/minute"))  # another user: own bucket
    rate_limits.hit(rate_limits.Bucket.of(rate_limits.MCP_KEY, 1, "3/minute"))  # key 1 is not user 1


def test_the_memory_store_sweeps_inline_without_a_timer_thread(rate_limited, monkeypatch):
    """No expiry thread per count (upstream's 10 ms Timer); a bucket never asked again is swept inline."""
    monkeypatch.setattr(rate_limits.SweptMemoryStorage, "SWEEP_SECONDS", 0.0)
    rate_limits.hit(rate_limits.Bucket.of(rate_limits.API_USER, "gone", "1/second"))
    store = rate_limits._sync_limiter().storage
    assert list(store.storage) == ["LIMITER/user/gone/1/1/second"]
    time.sleep(1.05)
    rate_limits.hit(rate_limits.Bucket.of(rate_limits.API_USER, "other", "1/second"))
    assert list(store.storage) == ["LIMITER/user/other/1/1/second"]
    assert not store.timer.is_alive()


def test_nothing_is_counted_when_limits_are_off(rate_limited, settings):
    settings.TOOLHUB_RATE_LIMITS_ENABLED = False
    bucket = rate_limits.Bucket.of(rate_limits.API_USER, 1, "1/minute")
    for _ in range(5):
        rate_limits.hit(bucket)


def test_an_unreachable_store_serves_the_request_and_logs(rate_limited, settings, caplog):
    """Fail open: a Redis outage does not refuse requests; it is logged."""
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    rate_limits.hit(rate_limits.Bucket.of(rate_limits.API_USER, 1, "1/minute"))
    rate_limits.hit(rate_limits.Bucket.of(rate_limits.API_USER, 1, "1/minute"))
    assert caplog.text.count("The rate-limit store failed: a user request was served uncounted.") == 2


#
# Per user
#


@pytest.fixture
def orders_creator(owner, table, make_tool):
    return {"create": make_tool(owner, table, type="create", name="orders_create"), "table": table}


def test_the_request_over_a_users_rate_is_429_and_writes_nothing(rate_limited, owner, orders_creator):
    """The third call of a '2/minute' user is refused before the view runs: the table's version and data,
    the call log and every other row stay as they were."""
    # given
    rate_limited(user="2/minute")
    client = client_for(owner)
    url = f"/api/tools/{orders_creator['create'].pk}/call/"
    assert client.get("/api/tables/").status_code == 200
    assert client.post(url, {"arguments": {"elements": [{"id": 9}]}}, format="json").status_code == 200
    before = db_snapshot()
    version = Table.objects.get(pk=orders_creator["table"].pk).version
    # when
    response = client.post(url, {"arguments": {"elements": [{"id": 10}]}}, format="json")
    # then
    limited_body(response, rate_limited.retry_after_now(), scope="user", who="this user", limit="2 requests per minute")
    assert db_snapshot() == before
    assert Table.objects.get(pk=orders_creator["table"].pk).version == version == 2
    assert CallLog.objects.count() == 1


def test_users_do_not_share_a_bucket(rate_limited, owner, other_user):
    # given
    rate_limited(user="2/minute")
    mine, theirs = client_for(owner), client_for(other_user)
    for _ in range(2):
        assert mine.get("/api/tables/").status_code == 200
    # when / then
    assert mine.get("/api/tables/").status_code == 429
    assert [theirs.get("/api/tables/").status_code for _ in range(3)] == [200, 200, 429]


def test_token_users_are_counted_per_user(rate_limited, owner):
    """A token-authenticated user has the same bucket as a session of the same user."""
    rate_limited(user="2/minute")
    token = client_for().post("/api/auth/token/", {"username": "owner", "password": "pw-123456!"}).json()["token"]
    by_token = client_for()
    by_token.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    by_session = client_for()
    by_session.force_login(owner)
    assert by_token.get("/api/tables/").status_code == 200
    assert by_session.get("/api/tables/").status_code == 200
    limited_body(
        by_token.get("/api/tables/"),
        rate_limited.retry_after_now(),
        scope="user",
        who="this user",
        limit="2 requests per minute",
    )


def test_unauthenticated_requests_are_401_and_not_counted(rate_limited, owner):
    """No credentials: 401 before any throttle; the user's bucket and the anonymous ones stay empty."""
    rate_limited(user="1/minute", anon="1/minute")
    for _ in range(3):
        assert client_for().get("/api/tables/").status_code == 401
    assert client_for(owner).get("/api/tables/").status_code == 200


def test_instance_rate_is_a_field_of_the_api(rate_limited, owner):
    """key_rate_limit is read and written through /api/mcp-instances/; a bad rate is a 400 naming the field
    and nothing is written."""
    client = client_for(owner)
    created = client.post("/api/mcp-instances/", {"name": "Shop", "slug": "shop", "key_rate_limit": "30/minute"})
    assert (created.status_code, created.json()["key_rate_limit"]) == (201, "30/minute")
    before = db_snapshot()
    refused = client.patch(f"/api/mcp-instances/{created.json()['id']}/", {"key_rate_limit": "30 a minute"})
    assert refused.status_code == 400
    assert refused.json() == {
        "error": "VALIDATION_ERROR",
        "message": "Invalid input.",
        "fields": {
            "key_rate_limit": [
                "'30 a minute' is not a rate: write <count>/<period>, e.g. '600/minute', '10/second' or "
                "'100/5 minutes'."
            ]
        },
    }
    assert db_snapshot() == before
    assert McpInstance.objects.get().key_rate_limit == "30/minute"


def test_anonymous_views_are_limited_per_ip(rate_limited):
    """Views open to anonymous callers (the API root, the schema) count per address under the `anon` rate."""
    rate_limited(anon="2/minute")
    client = client_for()
    assert [client.get(url).status_code for url in ("/api/", "/api/schema/")] == [200, 200]
    limited_body(
        client.get("/api/"),
        rate_limited.retry_after_now(),
        scope="anon",
        who="this address",
        limit="2 requests per minute",
    )
    assert client.get("/api/", REMOTE_ADDR="10.0.0.3").status_code == 200


def test_a_drf_throttled_exception_is_rate_limited_too():
    """Any DRF throttle that answers the DRF way gets the same code and a whole-second Retry-After."""
    response = exception_handler(exceptions.Throttled(wait=2.2), {})
    assert (response.status_code, response["Retry-After"]) == (429, "3")
    assert response.data == {
        "error": "RATE_LIMITED",
        "message": "Too many requests. Retry in 3 s.",
        "details": {"retry_after": 3},
    }


#
# Per IP: the token endpoint
#


def test_token_endpoint_is_limited_per_ip_whatever_the_credentials(rate_limited, owner):
    """Password guessing: the 4th attempt from one address within the window is 429 (right password or not)
    and mints no token; another address still gets its answer."""
    # given
    rate_limited(token="3/minute")
    client = client_for()
    wrong = {"username": "owner", "password": "guess"}
    assert [client.post("/api/auth/token/", wrong).status_code for _ in range(3)] == [400, 400, 400]
    before = db_snapshot()
    # when
    response = client.post("/api/auth/token/", {"username": "owner", "password": "pw-123456!"})
    # then
    limited_body(
        response,
        rate_limited.retry_after_now(),
        scope="token",
        who="token requests from this address",
        limit="3 requests per minute",
    )
    assert db_snapshot() == before
    other = client.post("/api/auth/token/", {"username": "owner", "password": "pw-123456!"}, REMOTE_ADDR="10.0.0.2")
    assert other.status_code == 200


def test_a_forwarded_for_header_does_not_open_a_new_bucket(rate_limited, owner):
    """The address is the connection's (NUM_PROXIES = 0): a client cannot pick its own bucket."""
    rate_limited(token="1/minute")
    client = client_for()
    assert client.post("/api/auth/token/", {"username": "x", "password": "y"}).status_code == 400
    response = client.post("/api/auth/token/", {"username": "x", "password": "y"}, HTTP_X_FORWARDED_FOR="10.9.9.9")
    assert response.status_code == 429


def test_default_rates_are_the_documented_values():
    """The defaults are the ones the README and docs/rate-limits.md give in their settings tables."""
    assert rate_limits.DEFAULT_RATES == {
        "mcp_key": "600/minute",
        "user": "600/minute",
        "anon": "60/minute",
        "token": "10/minute",
    }
    root = Path(__file__).resolve().parents[3]
    for doc in (root / "README.md", root / "docs" / "rate-limits.md"):
        text = doc.read_text()
        for scope, variable in [("mcp_key", "MCP_KEY"), ("user", "USER"), ("token", "TOKEN"), ("anon", "ANON")]:
            assert f"| `TOOLHUB_RATE_LIMIT_{variable}` | `{rate_limits.DEFAULT_RATES[scope]}` |" in text, doc


def test_the_schema_documents_the_429(rate_limited):
    """Every throttled operation lists 429 with the error shape; the token endpoint too."""
    schema = client_for().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    operations = [operation for path in schema["paths"].values() for operation in path.values()]
    assert all("429" in operation["responses"] for operation in operations)
    token = schema["paths"]["/api/auth/token/"]["post"]["responses"]["429"]
    assert token["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}


def test_a_users_refused_requests_are_counted_for_its_activity_page(rate_limited, owner, other_user):
    # given
    rate_limited(user="1/minute")
    mine = client_for(owner)
    assert mine.get("/api/tables/").status_code == 200
    # when
    statuses = [mine.get("/api/tables/").status_code for _ in range(3)]
    # then: the first refusal written at once, the next two at the next due flush (here, the page's)
    assert statuses == [429, 429, 429]
    assert list(RefusalCount.objects.values_list("owner", "mcp_instance", "scope", "count")) == [
        (owner.pk, None, "user", 1)
    ]
    assert sorted(services.refusals.pending.values()) == [2]
    staff = Client()
    staff.force_login(owner)
    assert staff.get("/admin/activity/").context["data"]["refusals"]["requests_total"] == 3
    assert RefusalCount.objects.filter(owner=other_user).count() == 0
