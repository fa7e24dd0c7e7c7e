"""Hashed, expiring, revocable API tokens (`POST /api/auth/token/`, `/api/auth/tokens/`), and the
login lockout of the token endpoint and the admin login (django-axes)."""

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.contrib.admin.models import ADDITION, DELETION, LogEntry
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from tests.api_helpers import db_snapshot
from tools_app.api.authentication import unknown_token_digests
from tools_app.models import ApiToken
from tools_app.services import api_token_issue

pytestmark = pytest.mark.django_db

PASSWORD = "pw-123456!"  # the root conftest's make_user default


@pytest.fixture(autouse=True)
def _empty_token_memory():
    unknown_token_digests.clear()
    yield
    unknown_token_digests.clear()


def login(username="owner", password=PASSWORD, **extra):
    return APIClient().post("/api/auth/token/", {"username": username, "password": password}, format="json", **extra)


def caller_token_row(user) -> int:
    return ApiToken.objects.get(user=user).pk


def token_client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


#
# Issue, storage, expiry
#


def test_login_stores_only_a_digest_and_the_prefix(owner):
    """The token is `tht_` + 64 hex digits; the row holds its SHA-512 and its first 15 characters only."""
    # when
    token = login().json()["token"]
    # then
    row = ApiToken.objects.get()
    assert len(token) == 68
    assert token.startswith("tht_")
    assert (row.user, row.token_key, row.digest) == (owner, token[:15], ApiToken.hash_token(token))
    assert token not in str(ApiToken.objects.values().get())


def test_token_expires_after_seven_days_by_default(owner):
    """TOOLHUB_API_TOKEN_TTL_HOURS defaults to 168: a token expires 7 days after login."""
    # when
    login()
    # then
    row = ApiToken.objects.get()
    assert row.expiry - row.created == pytest.approx(timedelta(days=7), abs=timedelta(seconds=2))


def test_token_lifetime_is_configurable_and_zero_means_no_expiry(owner, settings):
    """TOOLHUB_API_TOKEN_TTL_HOURS=0: tokens never expire."""
    # given
    settings.TOOLHUB_API_TOKEN_TTL_HOURS = 0
    # when
    login()
    # then
    assert ApiToken.objects.get().expiry is None


def test_an_expired_token_is_a_401_and_writes_nothing(owner):
    """An expired token is refused with a message saying to log in again."""
    # given
    row, token = api_token_issue(user=owner)
    ApiToken.objects.filter(pk=row.pk).update(expiry=timezone.now() - timedelta(seconds=1))
    before = db_snapshot()
    # when
    response = token_client(token).get("/api/tables/")
    # then
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Token"
    assert response.json() == {
        "error": "AUTHENTICATION_FAILED",
        "message": "Token expired: log in again (POST /api/auth/token/).",
    }
    assert db_snapshot() == before


def test_a_new_login_deletes_the_users_expired_tokens(owner, other_user):
    """Expired tokens can never work again: the next login of their user removes them."""
    # given
    expired, _ = api_token_issue(user=owner)
    others, _ = api_token_issue(user=other_user)
    ApiToken.objects.filter(pk__in=[expired.pk, others.pk]).update(expiry=timezone.now() - timedelta(days=1))
    # when
    login()
    # then
    assert sorted(ApiToken.objects.values_list("user__username", flat=True)) == ["other", "owner"]
    assert not ApiToken.objects.filter(pk=expired.pk).exists()


#
# Password change and deactivation
#


def test_a_password_change_stops_every_token_of_the_user(owner):
    """Every token issued before a password change is refused afterwards (any path: admin, command, shell)."""
    # given
    tokens = [api_token_issue(user=owner)[1] for _ in range(2)]
    owner.set_password("a-new-password-1")
    owner.save()
    before = db_snapshot()
    # when
    responses = [token_client(token).get("/api/tables/") for token in tokens]
    # then
    assert [response.status_code for response in responses] == [401, 401]
    assert responses[0].json()["message"] == (
        "Token revoked: the password changed since it was issued. Log in again (POST /api/auth/token/)."
    )
    assert db_snapshot() == before
    assert token_client(login(password="a-new-password-1").json()["token"]).get("/api/tables/").status_code == 200


def test_a_deactivated_users_tokens_stop_working(owner):
    """A deactivated user's token is a 401 on the next request."""
    # given
    _, token = api_token_issue(user=owner)
    assert token_client(token).get("/api/tables/").status_code == 200
    owner.is_active = False
    owner.save(update_fields=["is_active"])
    # when
    response = token_client(token).get("/api/tables/")
    # then
    assert response.status_code == 401
    assert response.json() == {"error": "AUTHENTICATION_FAILED", "message": "User inactive or deleted."}


#
# Bad tokens cost no query
#


@pytest.mark.parametrize("token", ["abc", "tht_" + "G" * 64, "thk_" + "a" * 43, "tht_" + "0" * 63, "é" * 68])
def test_a_malformed_token_is_refused_without_a_query(owner, token, django_assert_num_queries):
    """A token not of the issued format is a 401 decided without the database."""
    # when
    with django_assert_num_queries(0):
        response = token_client(token).get("/api/tables/")
    # then
    assert response.status_code == 401
    assert response.json() == {"error": "AUTHENTICATION_FAILED", "message": "Invalid token."}


def test_an_unknown_token_costs_one_query_then_none(owner, django_assert_num_queries):
    """A well-formed token matching no row is looked up once; after that it is refused from memory."""
    # given
    token = "tht_" + "ab" * 32
    # when
    with django_assert_num_queries(1):
        first = token_client(token).get("/api/tables/")
    with django_assert_num_queries(0):
        second = token_client(token).get("/api/tables/")
    # then
    assert (first.status_code, second.status_code) == (401, 401)
    assert first.json() == second.json() == {"error": "AUTHENTICATION_FAILED", "message": "Invalid token."}


def test_the_memory_of_unknown_tokens_is_bounded(owner):
    """A flood of random tokens cannot grow memory without end: at most 10,000 digests are kept."""
    # when
    for number in range(10_050):
        unknown_token_digests.put(f"{number:0128x}", True)
    # then
    assert len(unknown_token_digests) == 10_000
    assert f"{0:0128x}" not in unknown_token_digests
    assert f"{10_049:0128x}" in unknown_token_digests


#
# List and revoke
#


def test_owner_lists_own_tokens_without_secrets(owner, other_user):
    """GET /api/auth/tokens/: the caller's tokens, newest first, as id, prefix, created, expiry, current."""
    # given
    older, _ = api_token_issue(user=owner)
    current, token = api_token_issue(user=owner)
    api_token_issue(user=other_user)
    # when
    response = token_client(token).get("/api/auth/tokens/")
    # then
    assert response.status_code == 200
    body = response.json()
    assert (body["count"], body["next"], body["previous"]) == (2, None, None)
    assert [row["id"] for row in body["results"]] == [current.pk, older.pk]
    assert [row["current"] for row in body["results"]] == [True, False]
    assert set(body["results"][0]) == {"id", "prefix", "created", "expiry", "current"}
    assert body["results"][0]["prefix"] == token[:15]
    assert token not in response.content.decode()
    assert current.digest not in response.content.decode()


def test_owner_revokes_a_token_and_it_stops_working(owner):
    """DELETE /api/auth/tokens/<id>/ → 204; the token is a 401 on the next request; the admin history says so."""
    # given
    _, keeper = api_token_issue(user=owner)
    revoked, token = api_token_issue(user=owner)
    # when
    response = token_client(keeper).delete(f"/api/auth/tokens/{revoked.pk}/")
    # then
    assert response.status_code == 204
    assert token_client(token).get("/api/tables/").status_code == 401
    assert token_client(keeper).get("/api/tables/").status_code == 200
    entry = LogEntry.objects.get(action_flag=DELETION)
    assert (entry.user, entry.object_id, entry.object_repr) == (owner, str(revoked.pk), f"{token[:15]}… of owner")
    assert entry.change_message == f"Revoked API token {token[:15]}… of owner (API)."


@pytest.mark.parametrize("who", ["other", "root"])
def test_another_users_token_is_a_404_and_stays(owner, other_user, superuser, who):
    """Only its owner revokes a token, superusers included: anyone else gets a 404 and nothing changes."""
    # given
    target, token = api_token_issue(user=owner)
    caller = {"other": other_user, "root": superuser}[who]
    _, caller_token = api_token_issue(user=caller)
    before = db_snapshot()
    # when
    response = token_client(caller_token).delete(f"/api/auth/tokens/{target.pk}/")
    listed = token_client(caller_token).get("/api/auth/tokens/")
    # then
    assert response.status_code == 404
    assert response.json()["error"] == "NOT_FOUND"
    assert [row["id"] for row in listed.json()["results"]] == [caller_token_row(caller)]
    assert db_snapshot() == before
    assert token_client(token).get("/api/tables/").status_code == 200


@pytest.mark.parametrize("token_id", ["abc", "0", "-1", "99999999999999999999"])
def test_a_malformed_token_id_is_a_404(owner, token_id):
    """Any id that is not one of the caller's tokens is the same JSON 404."""
    _, token = api_token_issue(user=owner)
    before = db_snapshot()
    response = token_client(token).delete(f"/api/auth/tokens/{token_id}/")
    assert response.status_code == 404
    assert db_snapshot() == before


def test_token_list_needs_credentials(owner):
    """No credentials → 401, no data."""
    api_token_issue(user=owner)
    response = APIClient().get("/api/auth/tokens/")
    assert response.status_code == 401
    assert response.json()["error"] == "NOT_AUTHENTICATED"


def test_login_is_in_the_admin_history(owner):
    """A token issued at login shows up in the admin's history of the owner's token."""
    # when
    token = login().json()["token"]
    # then
    row = ApiToken.objects.get()
    entry = LogEntry.objects.get()
    assert (entry.user, entry.action_flag, entry.object_id) == (owner, ADDITION, str(row.pk))
    assert entry.change_message == (
        f"Created API token {token[:15]}… of owner (API login; expires {row.expiry:%Y-%m-%d %H:%M} UTC)."
    )


def test_schema_documents_the_token_endpoints():
    """/api/schema/ lists /api/auth/tokens/ (GET) and /api/auth/tokens/{id}/ (DELETE)."""
    import yaml

    schema = yaml.safe_load(APIClient().get("/api/schema/").content)
    assert sorted(schema["paths"]["/api/auth/tokens/"]) == ["get"]
    assert sorted(schema["paths"]["/api/auth/tokens/{id}/"]) == ["delete"]


#
# Login lockout (django-axes)
#


@pytest.fixture
def lockout(settings):
    settings.AXES_ENABLED = True
    settings.AXES_FAILURE_LIMIT = 3
    settings.AXES_COOLOFF_TIME = timedelta(minutes=15)


@pytest.mark.usefixtures("lockout")
def test_token_endpoint_locks_out_after_repeated_failures(owner):
    """The 3rd failure (TOOLHUB_LOGIN_FAILURE_LIMIT here) is a 429 RATE_LIMITED with Retry-After; while locked,
    the right password is refused too, and no token is issued."""
    # when
    failures = [login(password="wrong") for _ in range(3)]
    locked = login()
    # then
    assert [response.status_code for response in failures] == [400, 400, 429]
    assert locked.status_code == 429
    assert locked.headers["Retry-After"] == "900"
    assert locked.json() == {
        "error": "RATE_LIMITED",
        "message": "Too many failed logins for this username from this address: try again in 15 minute(s).",
    }
    assert not ApiToken.objects.exists()
    assert AccessAttempt.objects.get().username == "owner"


@pytest.mark.usefixtures("lockout")
def test_lockout_is_per_username(owner, other_user):
    """Another username from the same address still logs in."""
    for _ in range(3):
        login(password="wrong")
    assert login(username="other").status_code == 200


@pytest.mark.usefixtures("lockout")
def test_axes_reset_unlocks(owner):
    """`manage.py axes_reset_username owner` lifts the lockout: the right password works again."""
    # given
    for _ in range(3):
        login(password="wrong")
    assert login().status_code == 429
    # when
    call_command("axes_reset_username", "owner")
    # then
    assert login().status_code == 200
    assert not AccessAttempt.objects.exists()


@pytest.mark.usefixtures("lockout")
def test_a_success_resets_the_failure_count(owner):
    """Failures below the limit are forgotten after a successful login."""
    for _ in range(2):
        login(password="wrong")
    assert login().status_code == 200
    assert [login(password="wrong").status_code for _ in range(2)] == [400, 400]


@pytest.mark.usefixtures("lockout")
def test_admin_login_locks_out_and_a_superuser_sees_and_clears_it(client, owner, superuser):
    """The admin login locks out the same way (HTML 429); a superuser sees the attempt in the admin (Axes) and
    unlocks by deleting it."""
    # given
    form = {"username": "owner", "password": "wrong", "next": "/admin/"}
    statuses = [client.post("/admin/login/", form).status_code for _ in range(3)]
    locked = client.post("/admin/login/", {**form, "password": PASSWORD})
    attempt = AccessAttempt.objects.get()
    admin = APIClient()
    admin.force_login(superuser)
    # when
    listed = admin.get("/admin/axes/accessattempt/")
    deleted = admin.post(f"/admin/axes/accessattempt/{attempt.pk}/delete/", {"post": "yes"}, format="multipart")
    # then
    assert statuses == [200, 200, 429]
    assert locked.status_code == 429
    assert b"Too many failed logins" in locked.content
    assert listed.status_code == 200
    assert b"owner" in listed.content
    assert deleted.status_code == 302
    assert client.post("/admin/login/", {**form, "password": PASSWORD}).status_code == 302


def test_superuser_revokes_a_token_in_the_admin(client, owner, superuser):
    """A superuser sees every user's tokens in the admin; deleting one revokes it, recorded once by the admin."""
    # given
    row, token = api_token_issue(user=owner)
    client.force_login(superuser)
    # when
    listed = client.get("/admin/tools_app/apitoken/")
    deleted = client.post(f"/admin/tools_app/apitoken/{row.pk}/delete/", {"post": "yes"})
    # then
    assert listed.status_code == 200
    assert token[:15] in listed.content.decode()
    assert deleted.status_code == 302
    assert not ApiToken.objects.exists()
    assert token_client(token).get("/api/tables/").status_code == 401
    assert list(LogEntry.objects.filter(action_flag=DELETION).values_list("user__username", "change_message")) == [
        ("root", f"Revoked API token {token[:15]}… of owner (admin).")
    ]


def test_staff_user_cannot_see_tokens_in_the_admin(client, owner):
    """A toolhub user (staff, no token permission) has no token page; nothing is revoked."""
    # given
    row, _ = api_token_issue(user=owner)
    client.force_login(owner)
    before = db_snapshot()
    # when
    response = client.post(f"/admin/tools_app/apitoken/{row.pk}/delete/", {"post": "yes"})
    # then
    assert response.status_code == 403
    assert db_snapshot() == before


@pytest.mark.usefixtures("lockout")
def test_a_username_longer_than_any_is_a_400_and_writes_nothing(owner):
    """A 256-character username (found by the schema fuzzer: it overflowed the lockout's record, a 500 on
    PostgreSQL) is refused by its length before any login is tried: no attempt recorded, no token."""
    # given
    before = db_snapshot()
    # when
    response = login(username="u" * 256, password="wrong")
    # then
    assert response.status_code == 400
    assert response.json() == {
        "error": "VALIDATION_ERROR",
        "message": "Invalid input.",
        "fields": {"username": ["Ensure this field has no more than 150 characters."]},
    }
    assert not AccessAttempt.objects.exists()
    assert db_snapshot() == before
