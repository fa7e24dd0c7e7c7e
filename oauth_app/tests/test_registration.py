"""Dynamic client registration is bounded: the body, redirect URIs per client, each field, grant and
response types that could never be used, plain-http redirect URIs other than loopback, the number of clients
waiting for an approval, and the expiry of clients nobody approved. Each refusal is a 400
`invalid_client_metadata` naming the limit, and stores nothing."""

import json
import time
from datetime import timedelta

import pytest
from django.contrib.auth import hashers
from django.core.asgi import get_asgi_application
from django.core.handlers.base import BaseHandler
from django.test import RequestFactory
from django.utils import timezone
from oauth2_provider.models import AccessToken, get_application_model

from oauth_app.client_secrets import HASHER_PATH, hashing_client_secrets, is_generated_secret
from oauth_app.tests.support import CALLBACK
from oauth_app.tests.test_oauth import issue
from tests.api_helpers import asgi_post
from toolhub import passwords
from toolhub.request_limits import cap_request_body

Application = get_application_model()


def register(client, metadata=None, *, body: bytes | None = None):
    payload = body if body is not None else json.dumps(metadata).encode()
    return client.post("/oauth/register/", payload, content_type="application/json")


def stored() -> dict:
    return {"clients": Application.objects.count(), "tokens": AccessToken.objects.count()}


def metadata(**changes) -> dict:
    return {
        "client_name": "agent",
        "redirect_uris": [CALLBACK],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        **changes,
    }


def test_a_registration_within_the_bounds_is_stored(client, db):
    answer = register(client, metadata(redirect_uris=[CALLBACK, "https://app.example/cb"]))
    assert answer.status_code == 201
    assert answer.json()["redirect_uris"] == [CALLBACK, "https://app.example/cb"]
    assert stored() == {"clients": 1, "tokens": 1}
    assert Application.objects.get().used_at is None


def test_a_huge_registration_is_refused_fast_from_its_declared_length(client, db):
    # given: 600,000 redirect URIs, 36 MB (as the 42 MB that was accepted and echoed back)
    uris = [f"https://evil.example/phish/{index:07d}/callback/path/long/x" for index in range(600_000)]
    body = json.dumps(metadata(redirect_uris=uris)).encode()
    assert len(body) > 35_000_000
    register(client, metadata())  # warm: the first request pays for imports
    before = stored()
    # The server's time only: the request is built first (the test client copies a body it sends).
    handler = BaseHandler()
    handler.load_middleware()
    request = RequestFactory().post("/oauth/register/", body, content_type="application/json")

    # when
    began = time.perf_counter()
    answer = handler.get_response(request)
    took = time.perf_counter() - began

    # then
    assert answer.status_code == 400
    assert json.loads(answer.content) == {
        "error": "invalid_client_metadata",
        "error_description": f"The registration is {len(body)} bytes; at most 16384 bytes are accepted "
        "(TOOLHUB_OAUTH_DCR_MAX_BODY_BYTES).",
    }
    assert took < 0.05
    assert stored() == before


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("path", "declared"),
    [("/oauth/register/", True), ("/oauth/register/some-client/", True), ("/oauth/register/", False)],
    ids=["register-declared", "update-declared", "register-chunked"],
)
def test_a_huge_registration_is_refused_by_the_asgi_stack_before_its_body_is_read(path, declared):
    """Under ASGI (production) Django reads a whole body before any view: the body cap in front of it refuses a
    registration over TOOLHUB_OAUTH_DCR_MAX_BODY_BYTES with the registration's own 400, from its declared
    length before reading a byte of it, or (no length) as soon as it passes the limit. Nothing stored."""
    app = cap_request_body(get_asgi_application())
    chunks = [b"x" * 8192] * 5_000  # 40 MiB
    headers = [(b"content-length", str(8192 * 5_000).encode())] if declared else []
    before = stored()
    # when
    status, answer, read, _ = asgi_post(app, path, chunks, headers)
    # then
    size = "40960000 bytes" if declared else "over 16384 bytes"
    assert (status, json.loads(answer)) == (
        400,
        {
            "error": "invalid_client_metadata",
            "error_description": f"The registration is {size}; at most 16384 bytes are accepted "
            "(TOOLHUB_OAUTH_DCR_MAX_BODY_BYTES).",
        },
    )
    assert read == (0 if declared else 3)
    assert stored() == before


def test_too_many_redirect_uris_are_refused_by_count_first(client, db, settings):
    # given: a body limit high enough for the list to be read
    settings.TOOLHUB_OAUTH_DCR_MAX_BODY_BYTES = 64 * 1024 * 1024
    uris = ["not even a URI"] * 100_000

    # when
    answer = register(client, metadata(redirect_uris=uris))

    # then: the count is what is refused, not the first bad entry
    assert answer.status_code == 400
    assert answer.json()["error"] == "invalid_client_metadata"
    assert answer.json()["error_description"] == (
        "redirect_uris has 100000 entries; at most 10 are accepted (TOOLHUB_OAUTH_DCR_MAX_REDIRECT_URIS)."
    )
    assert stored() == {"clients": 0, "tokens": 0}


@pytest.mark.parametrize(
    ("changes", "description"),
    [
        (
            {"redirect_uris": [CALLBACK] * 11},
            "redirect_uris has 11 entries; at most 10 are accepted (TOOLHUB_OAUTH_DCR_MAX_REDIRECT_URIS).",
        ),
        (
            {"redirect_uris": ["https://app.example/" + "x" * 2000]},
            "redirect_uris[0] is 2020 characters; at most 2000 are accepted (TOOLHUB_OAUTH_DCR_MAX_FIELD_CHARS).",
        ),
        (
            {"client_name": "n" * 256},
            "client_name is 256 characters; at most 255 are accepted (the column's size).",
        ),
        (
            {"logo_uri": "https://logo.example/" + "l" * 2000},
            "logo_uri is 2021 characters; at most 2000 are accepted (TOOLHUB_OAUTH_DCR_MAX_FIELD_CHARS).",
        ),
        (
            {"contacts": ["a@example.com"] * 11},
            "contacts has 11 entries; at most 10 are accepted.",
        ),
        (
            {"redirect_uris": []},
            "redirect_uris must be a non-empty array: the authorization code flow needs one.",
        ),
        (
            {"redirect_uris": ["http://app.example/cb"]},
            "redirect_uris[0] ('http://app.example/cb') can never be used: a redirect URI is https, or http only "
            "to a loopback address (127.0.0.1, [::1], localhost), without a fragment or white space.",
        ),
        (
            {"redirect_uris": ["https://app.example/cb https://evil.example/cb"]},
            "redirect_uris[0] ('https://app.example/cb https://evil.example/cb') can never be used: a redirect URI "
            "is https, or http only to a loopback address (127.0.0.1, [::1], localhost), without a fragment or "
            "white space.",
        ),
        (
            {"grant_types": ["client_credentials"]},
            "grant_types ['client_credentials'] can never be used here: only authorization_code and refresh_token.",
        ),
        (
            {"grant_types": ["implicit", "password"]},
            "grant_types ['implicit', 'password'] can never be used here: only authorization_code and refresh_token.",
        ),
        (
            {"response_types": ["code", "token"]},
            "response_types ['token'] can never be used here: only code.",
        ),
    ],
)
def test_metadata_over_a_bound_is_refused_naming_it(client, db, changes, description):
    answer = register(client, metadata(**changes))
    assert answer.status_code == 400
    assert answer.json() == {"error": "invalid_client_metadata", "error_description": description}
    assert stored() == {"clients": 0, "tokens": 0}


def test_loopback_http_redirect_uris_are_accepted(client, db):
    uris = ["http://127.0.0.1:8080/cb", "http://[::1]/cb", "http://localhost:3000/cb"]
    answer = register(client, metadata(redirect_uris=uris))
    assert answer.status_code == 201
    assert answer.json()["redirect_uris"] == uris


def test_clients_waiting_for_approval_are_capped(client, db, settings, owner, instance):
    # given: the cap is 2, and two clients wait
    settings.TOOLHUB_OAUTH_DCR_MAX_UNUSED_CLIENTS = 2
    first = register(client, metadata(client_name="one"))
    assert register(client, metadata(client_name="two")).status_code == 201

    # when
    refused = register(client, metadata(client_name="three"))
    issue(client, owner, instance, Application.objects.get(client_id=first.json()["client_id"]))
    client.logout()
    after_an_approval = register(client, metadata(client_name="four"))

    # then
    assert refused.status_code == 400
    assert refused.json() == {
        "error": "invalid_client_metadata",
        "error_description": "2 registered clients are waiting for an owner's approval, the most this server "
        "keeps (TOOLHUB_OAUTH_DCR_MAX_UNUSED_CLIENTS); unapproved clients are removed 24 hours after they "
        "registered. Try again later, or ask the server's administrator to register the client.",
    }
    assert after_an_approval.status_code == 201
    assert sorted(Application.objects.values_list("name", flat=True)) == ["four", "one", "two"]
    assert Application.objects.get(name="one").used_at is not None


def test_clients_nobody_approved_expire_on_the_next_registration(client, db, owner, instance):
    # given: an unused DCR client and an unused metadata-document client, 25 hours old; an approved DCR client
    # and an admin-registered one of the same age
    old = timezone.now() - timedelta(hours=25)
    unused = register(client, metadata(client_name="unused")).json()["client_id"]
    approved_id = register(client, metadata(client_name="approved")).json()["client_id"]
    issue(client, owner, instance, Application.objects.get(client_id=approved_id))
    client.logout()
    Application.objects.create(
        client_id="https://cimd.example/c.json",
        name="document",
        registration_source=Application.RegistrationSource.CIMD,
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=CALLBACK,
    )
    Application.objects.create(
        name="manual",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=CALLBACK,
    )
    Application.objects.update(created=old)
    registration_tokens = AccessToken.objects.filter(application__client_id=unused).count()

    # when
    fresh = register(client, metadata(client_name="fresh"))

    # then: the unused ones (and the registration token) are gone
    assert fresh.status_code == 201
    assert registration_tokens == 1
    assert sorted(Application.objects.values_list("name", flat=True)) == ["approved", "fresh", "manual"]
    assert AccessToken.objects.filter(application__client_id=unused).count() == 0


def test_the_management_endpoint_has_the_same_bounds(client, db):
    # given
    registered = register(client, metadata()).json()
    headers = {"Authorization": f"Bearer {registered['registration_access_token']}"}
    url = f"/oauth/register/{registered['client_id']}/"

    # when
    answer = client.put(
        url, json.dumps(metadata(redirect_uris=[CALLBACK] * 11)), content_type="application/json", headers=headers
    )
    stranger = client.put(url, json.dumps(metadata(redirect_uris=[CALLBACK] * 11)), content_type="application/json")

    # then
    assert answer.status_code == 400
    assert answer.json()["error_description"] == (
        "redirect_uris has 11 entries; at most 10 are accepted (TOOLHUB_OAUTH_DCR_MAX_REDIRECT_URIS)."
    )
    assert stranger.status_code == 401
    assert Application.objects.get().redirect_uris == CALLBACK


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("method", ["client_secret_basic", "none"])
def test_a_registration_stores_its_secret_with_the_fast_hasher_and_no_slot(client, method, monkeypatch, settings):
    """Every registered client's secret is hashed (django-oauth-toolkit stores it hashed, a public client's
    too), with the client-secret hasher: no password hash runs and no hashing slot is taken. The secret
    answered is a generated one and authenticates."""
    seen: list[object] = []
    settings.PASSWORD_HASHERS = ["toolhub.passwords.PBKDF2PasswordHasher", HASHER_PATH]
    monkeypatch.setattr(passwords._HashThreads, "run", lambda self, *args, **kwargs: seen.append(args))
    monkeypatch.setattr(passwords, "_acquire", lambda **kwargs: seen.append("slot"))
    # when
    answer = register(client, metadata(token_endpoint_auth_method=method))
    # then
    assert answer.status_code == 201
    assert seen == []
    stored_client = Application.objects.get()
    assert stored_client.client_secret.startswith("client_secret_sha256$")
    if method == "client_secret_basic":
        secret = answer.json()["client_secret"]
        assert is_generated_secret(secret)
        with hashing_client_secrets():
            assert hashers.check_password(secret, stored_client.client_secret)
    else:
        assert "client_secret" not in answer.json()
