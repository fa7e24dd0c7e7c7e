"""OAuth, in process: the authorization endpoint's refusals, client metadata documents that must not
be fetched, and tokens the MCP endpoint refuses. Every refusal also checks that nothing was granted."""

import socket
import time
from datetime import timedelta
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import urllib3
from django.core.cache import cache
from django.utils import timezone
from oauth2_provider import models as oauth2_models
from oauth2_provider.models import AccessToken, Grant, RefreshToken, get_application_model

from mcp_app.auth import auth_cache
from mcp_app.tests.mcp_harness import Harness, rpc_body
from oauth_app.models import ClientDocument
from oauth_app.tests.support import CALLBACK, pkce_pair
from tools_app.models import CallLog, TableChange
from tools_app.oauth import resource_url

Application = get_application_model()


@pytest.fixture(autouse=True)
def _fresh(login_lockout_off):
    cache.clear()
    auth_cache.clear()
    yield
    cache.clear()
    auth_cache.clear()


def nothing_granted() -> dict:
    return {
        "grants": Grant.objects.count(),
        "access": AccessToken.objects.count(),
        "refresh": RefreshToken.objects.count(),
    }


def authorize_query(client_id: str, slug: str, **changes) -> str:
    _verifier, challenge = pkce_pair()
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": CALLBACK,
        "state": "s1",
        "scope": "tools:all",
        "resource": resource_url("http://testserver", slug),
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    params.update(changes)
    return "/oauth/authorize/?" + urlencode({k: v for k, v in params.items() if v is not None})


def test_consent_then_code_exchange_needs_the_verifier(client, owner, instance, app):
    # given
    client.force_login(owner)
    verifier, challenge = pkce_pair()

    # when
    page = client.get(authorize_query(app.client_id, instance.slug, code_challenge=challenge))
    form = {k: v for k, v in page.context["form"].initial.items() if v is not None}
    answer = client.post("/oauth/authorize/", {**form, "allow": "Approve", "grant_all": "on"})
    query = parse_qs(urlsplit(answer["Location"]).query)
    wrong = client.post(
        "/oauth/token/",
        {
            "grant_type": "authorization_code",
            "code": query["code"][0],
            "redirect_uri": CALLBACK,
            "client_id": app.client_id,
            "code_verifier": verifier + "x",
        },
    )

    # then
    assert page.status_code == 200
    assert f"<strong>{instance.name}</strong>" in page.content.decode()
    assert answer.status_code == 302
    assert query["iss"] == ["http://testserver"]
    assert query["state"] == ["s1"]
    assert wrong.status_code == 400
    assert wrong.json()["error"] == "invalid_grant"
    assert AccessToken.objects.count() == 0


def test_pkce_is_required(client, owner, instance, app):
    # given
    client.force_login(owner)

    # when
    answer = client.get(authorize_query(app.client_id, instance.slug, code_challenge=None, code_challenge_method=None))

    # then: the client is sent back with the error, and no code
    assert answer.status_code == 302
    query = parse_qs(urlsplit(answer["Location"]).query)
    assert query["error"] == ["invalid_request"]
    assert "code" not in query
    assert "Code challenge required" in query["error_description"][0]
    assert nothing_granted() == {"grants": 0, "access": 0, "refresh": 0}


@pytest.mark.parametrize("method", ["plain", None])
def test_plain_pkce_is_refused(client, owner, instance, app, method):
    # given
    client.force_login(owner)
    challenge = pkce_pair()[1]

    # when: asked for the consent page, or posting an approval straight away
    page = client.get(authorize_query(app.client_id, instance.slug, code_challenge_method=method))
    posted = client.post(
        "/oauth/authorize/",
        {
            "client_id": app.client_id,
            "redirect_uri": CALLBACK,
            "response_type": "code",
            "scope": "tools:all",
            "state": "s1",
            "resource": resource_url("http://testserver", instance.slug),
            "code_challenge": challenge,
            "code_challenge_method": "plain",
            "allow": "Approve",
        },
    )

    # then
    assert page.status_code == 400
    assert "code_challenge_method=S256" in page.content.decode()
    assert posted.status_code == 302
    query = parse_qs(urlsplit(posted["Location"]).query)
    assert query["error"] == ["invalid_request"]
    assert "code" not in query
    assert nothing_granted() == {"grants": 0, "access": 0, "refresh": 0}


def test_wrong_redirect_uri_is_refused_without_redirecting(client, owner, instance, app):
    # given
    client.force_login(owner)

    # when
    answer = client.get(authorize_query(app.client_id, instance.slug, redirect_uri="https://evil.example/cb"))
    posted = client.post(
        "/oauth/authorize/",
        {
            "client_id": app.client_id,
            "redirect_uri": "https://evil.example/cb",
            "response_type": "code",
            "scope": "tools:all",
            "resource": resource_url("http://testserver", instance.slug),
            "code_challenge": pkce_pair()[1],
            "code_challenge_method": "S256",
            "allow": "Approve",
        },
    )

    # then
    assert answer.status_code == 400
    assert "Location" not in answer
    assert "Location" not in posted
    assert nothing_granted() == {"grants": 0, "access": 0, "refresh": 0}


def test_only_the_owner_or_a_superuser_can_authorize(client, other_user, superuser, instance, app):
    # when
    client.force_login(other_user)
    refused = client.get(authorize_query(app.client_id, instance.slug))
    client.force_login(superuser)
    allowed = client.get(authorize_query(app.client_id, instance.slug))
    missing = client.get(authorize_query(app.client_id, instance.slug, resource=None))
    unknown = client.get(authorize_query(app.client_id, "nope"))

    # then
    assert refused.status_code == 403
    assert "Only the owner" in refused.content.decode()
    assert allowed.status_code == 200
    assert missing.status_code == 400
    assert "exactly one MCP instance" in missing.content.decode()
    assert unknown.status_code == 400
    assert nothing_granted() == {"grants": 0, "access": 0, "refresh": 0}


def test_anonymous_user_is_sent_to_the_admin_login(client, instance, app):
    answer = client.get(authorize_query(app.client_id, instance.slug))
    assert answer.status_code == 302
    assert answer["Location"].startswith("/admin/login/?next=")


#
# Client ID Metadata Documents that must not be fetched
#


@pytest.fixture
def no_fetch(monkeypatch):
    """Records every connection the metadata fetcher would open (none may be opened)."""
    opened = []

    def refuse(self, *args, **kwargs):
        opened.append(self.host)
        raise AssertionError("no connection may be made")

    monkeypatch.setattr(urllib3.HTTPSConnectionPool, "urlopen", refuse)
    return opened


@pytest.mark.parametrize("host", ["10.20.30.40", "169.254.169.254", "[::1]"])
def test_metadata_document_on_a_private_address_is_not_fetched(client, owner, instance, no_fetch, host):
    # given
    client.force_login(owner)
    client_id = f"https://{host}/client.json"

    # when
    answer = client.get(authorize_query(client_id, instance.slug))

    # then
    assert answer.status_code == 400
    assert "Location" not in answer
    assert no_fetch == []
    assert Application.objects.count() == 0
    assert ClientDocument.objects.count() == 0


def test_metadata_document_resolving_to_loopback_gets_no_connection(client, owner, instance):
    # given: something listens on 127.0.0.1; "localhost" resolves to it
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.3)
    client.force_login(owner)
    client_id = f"https://localhost:{listener.getsockname()[1]}/client.json"

    # when
    answer = client.get(authorize_query(client_id, instance.slug))

    # then
    assert answer.status_code == 400
    with pytest.raises(TimeoutError):
        listener.accept()
    listener.close()
    assert Application.objects.count() == 0


def document(client_id: str, **extra) -> dict:
    return {
        "client_id": client_id,
        "client_name": "Doc client",
        "redirect_uris": [CALLBACK],
        "token_endpoint_auth_method": "none",
        **extra,
    }


def test_trusted_document_is_fetched_once_and_cached(client, owner, instance, documents):
    # given
    client.force_login(owner)
    client_id = documents.url("/ok.json")
    documents.documents["/ok.json"] = document(client_id, logo_uri="https://logo.example/x.png")

    # when
    first = client.get(authorize_query(client_id, instance.slug))
    second = client.get(authorize_query(client_id, instance.slug))
    wrong_redirect = client.get(authorize_query(client_id, instance.slug, redirect_uri="http://127.0.0.1:1/other"))

    # then
    assert first.status_code == 200
    assert second.status_code == 200
    assert 'src="https://logo.example/x.png"' in first.content.decode()
    assert documents.hits["/ok.json"] == 1
    assert wrong_redirect.status_code == 400
    assert "Location" not in wrong_redirect
    assert Grant.objects.count() == 0


def test_a_document_client_is_stored_without_a_secret_to_hash(client, owner, instance, documents, monkeypatch):
    """A client first seen through its metadata document is public and never sends a secret: it is stored with
    none, so its first sight (an anonymous token request, or the consent page) costs no password hash."""
    hashed: list[str] = []
    monkeypatch.setattr(oauth2_models, "make_password", lambda secret, **kwargs: hashed.append(secret) or "x$y")
    client.force_login(owner)
    client_id = documents.url("/ok.json")
    documents.documents["/ok.json"] = document(client_id)
    # when
    first = client.get(authorize_query(client_id, instance.slug))
    # then
    assert first.status_code == 200
    stored = get_application_model().objects.get(client_id=client_id)
    assert (stored.client_type, stored.client_secret, stored.hash_client_secret) == ("public", "", False)
    assert hashed == []


@pytest.mark.parametrize("problem", ["oversized", "slow", "other client_id", "confidential"])
def test_bad_documents_are_refused(client, owner, instance, documents, problem):
    # given
    client.force_login(owner)
    client_id = documents.url("/bad.json")
    if problem == "oversized":
        documents.documents["/bad.json"] = document(client_id, padding="x" * (20 * 1024))
    elif problem == "slow":
        documents.documents["/bad.json"] = document(client_id)
        documents.delays["/bad.json"] = 3
    elif problem == "other client_id":
        documents.documents["/bad.json"] = document(documents.url("/someone-else.json"))
    else:
        documents.documents["/bad.json"] = document(client_id, token_endpoint_auth_method="client_secret_basic")

    # when
    began = time.monotonic()
    answer = client.get(authorize_query(client_id, instance.slug))
    took = time.monotonic() - began

    # then
    assert answer.status_code == 400
    assert "Location" not in answer
    assert took < 2.5
    assert Application.objects.count() == 0
    assert nothing_granted() == {"grants": 0, "access": 0, "refresh": 0}


def test_switched_off_registration(client, owner, instance, settings):
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "DCR_ENABLED": False}
    answer = client.post("/oauth/register/", {"redirect_uris": [CALLBACK]}, content_type="application/json")
    assert answer.status_code == 404
    assert Application.objects.count() == 0


#
# Tokens at the MCP endpoint
#


def make_token(owner, app, slug: str, *, scope: str = "tools:all", expires_in: int = 3600, raw: str = "") -> str:
    token = raw or "tho_" + "A" * 40 + slug[:3].ljust(3, "x")
    row = AccessToken(
        user=owner,
        application=app,
        expires=timezone.now() + timedelta(seconds=expires_in),
        scope=scope,
        resource=[resource_url("http://localhost", slug)],
    )
    row._raw_token = token
    row.token = ""
    row.save()
    return token


def test_tokens_the_endpoint_refuses(owner, app, reader_writer):
    # given
    harness = Harness()
    slug = reader_writer["instance"].slug
    good = make_token(owner, app, slug, raw="tho_" + "G" * 43)
    expired = make_token(owner, app, slug, expires_in=-1, raw="tho_" + "E" * 43)
    for_other = make_token(owner, app, "other", raw="tho_" + "O" * 43)
    body = rpc_body("tools/call", {"name": "reader", "arguments": {}})

    # when
    ok = harness.post(slug, body, key=good)
    answers = {
        "expired": harness.post(slug, body, key=expired),
        "other instance": harness.post(slug, body, key=for_other),
        "unknown": harness.post(slug, body, key="tho_" + "U" * 43),
        "malformed": harness.post(slug, body, key="tho_short"),
    }
    AccessToken.objects.filter(token_checksum__isnull=False, expires__gt=timezone.now()).exclude(
        resource__icontains="/mcp/other/"
    ).delete()  # revoked
    answers["revoked"] = harness.post(slug, body, key=good)

    # then
    assert ok.status_code == 200
    assert ok.json()["result"]["isError"] is False
    for name, answer in answers.items():
        assert answer.status_code == 401, name
        assert answer.headers["www-authenticate"].startswith('Bearer realm="toolhub", error="invalid_token"'), name
        assert (
            'resource_metadata="http://localhost/.well-known/oauth-protected-resource/mcp/'
            in (answer.headers["www-authenticate"])
        )
    assert CallLog.objects.count() == 1
    row = CallLog.objects.get()
    assert (row.oauth_client, row.user_id, row.api_key_id) == (app.client_id, owner.pk, None)


def test_a_write_with_a_token_records_its_client_in_the_table_history(client, owner, app, reader_writer, table):
    """A table write's history entry names the OAuth client next to the user who authorized it, in the API and the
    admin."""
    # given
    harness = Harness()
    slug = reader_writer["instance"].slug
    token = make_token(owner, app, slug, raw="tho_" + "W" * 43)
    version = table.version

    # when
    write = harness.post(
        slug, rpc_body("tools/call", {"name": "writer", "arguments": {"elements": [{"id": 99}]}}), key=token
    )

    # then
    assert write.json()["result"]["isError"] is False
    entry = TableChange.objects.get(table=table, version=version + 1)
    assert (entry.oauth_client, entry.user_id, entry.api_key_id, entry.surface) == (
        app.client_id,
        owner.pk,
        None,
        "mcp",
    )
    client.force_login(owner)
    (newest, *_) = client.get(f"/api/tables/{table.pk}/history/").json()["results"]
    assert (newest["oauth_client"], newest["user"], newest["api_key"]) == (app.client_id, "owner", None)
    page = client.get(f"/admin/tools_app/table/{table.pk}/history/")
    assert f"MCP, tool writer, as writer, OAuth client {app.client_id}" in page.content.decode()


def test_read_only_token_cannot_call_a_tool_that_changes_data(owner, app, reader_writer, table):
    # given
    harness = Harness()
    slug = reader_writer["instance"].slug
    token = make_token(owner, app, slug, scope="tools:read", raw="tho_" + "R" * 43)
    version = table.version

    # when
    read = harness.post(slug, rpc_body("tools/call", {"name": "reader", "arguments": {}}), key=token)
    write = harness.post(
        slug, rpc_body("tools/call", {"name": "writer", "arguments": {"elements": [{"id": 99}]}}), key=token
    )

    # then
    assert read.status_code == 200
    assert write.status_code == 403
    assert write.headers["www-authenticate"].startswith('Bearer realm="toolhub", error="insufficient_scope"')
    assert "insufficient_scope" in write.text
    table.refresh_from_db()
    assert table.version == version
    assert list(CallLog.objects.values_list("tool_name", flat=True)) == ["reader"]


def test_read_only_token_cannot_reach_a_writing_tool_through_the_call_tool_proxy(owner, app, reader_writer, table):
    """The call_tool proxy runs a tool by name: the token's scope is that tool's, as if called directly."""
    # given
    instance = reader_writer["instance"]
    instance.discovery = "search"
    instance.save(update_fields=["discovery"])
    harness = Harness()
    token = make_token(owner, app, instance.slug, scope="tools:read", raw="tho_" + "P" * 43)
    version = table.version

    # when
    def proxied(name: str, arguments: dict):
        body = rpc_body("tools/call", {"name": "call_tool", "arguments": {"tool_name": name, "arguments": arguments}})
        return harness.post(instance.slug, body, key=token)

    read = proxied("reader", {})
    write = proxied("writer", {"elements": [{"id": 99}]})

    # then
    assert read.status_code == 200
    assert read.json()["result"]["isError"] is False
    assert write.status_code == 403
    assert write.headers["www-authenticate"].startswith('Bearer realm="toolhub", error="insufficient_scope"')
    table.refresh_from_db()
    assert table.version == version
    assert list(CallLog.objects.values_list("tool_name", "oauth_client")) == [("reader", app.client_id)]


#
# Tokens from the endpoints: rotation, replay, revocation, rate limit, the admin
#


def issue(client, owner, instance, app, *, grant_all: bool = True) -> dict:
    """The whole authorization code flow through the test client; the token response."""
    client.force_login(owner)
    verifier, challenge = pkce_pair()
    page = client.get(authorize_query(app.client_id, instance.slug, code_challenge=challenge))
    form = {k: v for k, v in page.context["form"].initial.items() if v is not None}
    answer = client.post(
        "/oauth/authorize/", {**form, "allow": "Approve", **({"grant_all": "on"} if grant_all else {})}
    )
    code = parse_qs(urlsplit(answer["Location"]).query)["code"][0]
    token = client.post(
        "/oauth/token/",
        {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": CALLBACK,
            "client_id": app.client_id,
            "code_verifier": verifier,
            "resource": resource_url("http://testserver", instance.slug),
        },
    )
    assert token.status_code == 200, token.content
    return token.json()


def refresh(client, app, refresh_token: str):
    return client.post(
        "/oauth/token/", {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": app.client_id}
    )


def test_refresh_rotates_and_a_replayed_refresh_token_revokes_the_family(client, owner, instance, app):
    # given
    first = issue(client, owner, instance, app)

    # when
    second = refresh(client, app, first["refresh_token"])
    replay = refresh(client, app, first["refresh_token"])
    after_replay = refresh(client, app, second.json()["refresh_token"])

    # then
    assert second.status_code == 200
    assert second.json()["refresh_token"] != first["refresh_token"]
    assert second.json()["access_token"].startswith("tho_")
    assert second.json()["expires_in"] == 3600
    assert replay.status_code == 400
    assert replay.json()["error"] == "invalid_grant"
    assert after_replay.status_code == 400  # the whole family is revoked
    assert RefreshToken.objects.filter(revoked__isnull=True).count() == 0
    assert AccessToken.objects.filter(resource__icontains="/mcp/").count() == 0
    assert AccessToken.objects.exclude(token="").count() == 0  # only checksums are ever stored


def test_read_only_consent_grants_tools_read(client, owner, instance, app):
    tokens = issue(client, owner, instance, app, grant_all=False)
    assert tokens["scope"] == "tools:read"


def test_token_endpoint_is_rate_limited_per_address(client, app, rate_limited):
    # given
    rate_limited(token="2/minute")
    data = {"grant_type": "authorization_code", "code": "nope", "redirect_uri": CALLBACK, "client_id": app.client_id}

    # when
    answers = [client.post("/oauth/token/", data) for _ in range(3)]

    # then
    assert [answer.status_code for answer in answers] == [400, 400, 429]
    assert answers[2].json()["error"] == "RATE_LIMITED"
    assert int(answers[2]["Retry-After"]) in rate_limited.retry_after_now()
    assert AccessToken.objects.count() == 0


def test_oauth_switched_off(client, settings, instance):
    # given
    settings.TOOLHUB_OAUTH_ENABLED = False
    harness = Harness()

    # when
    metadata = client.get(f"/.well-known/oauth-protected-resource/mcp/{instance.slug}/")
    server = client.get("/.well-known/oauth-authorization-server")
    unauthorized = harness.post(instance.slug, rpc_body("tools/list"))

    # then
    assert (metadata.status_code, server.status_code) == (404, 404)
    assert unauthorized.headers["www-authenticate"] == 'Bearer realm="toolhub"'


def test_cimd_switched_off(client, owner, instance, settings, no_fetch):
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "CIMD_ENABLED": False}
    client.force_login(owner)
    answer = client.get(authorize_query("https://client.example/c.json", instance.slug))
    server = client.get("/.well-known/oauth-authorization-server").json()
    assert answer.status_code == 400
    assert server["client_id_metadata_document_supported"] is False
    assert no_fetch == []


def test_users_see_and_revoke_their_authorized_clients_in_the_admin(
    client, owner, other_user, superuser, instance, app, make_instance
):
    # given: the owner authorized a client for its instance, and a superuser one for the same instance
    tokens = issue(client, owner, instance, app)
    issue(client, superuser, instance, app)
    other_user.is_staff = True
    other_user.save()
    url = "/admin/oauth_app/authorizedclient/"

    # when
    client.force_login(other_user)
    stranger = client.get(url)
    client.force_login(owner)
    mine = client.get(url)
    per_instance = client.get(url + f"?instance={instance.slug}")
    ids = list(mine.context["cl"].queryset.values_list("pk", flat=True))
    revoked = client.post(url, {"action": "revoke_selected", "_selected_action": ids})

    # then: the stranger sees none; the owner sees both (its instance's), and revokes them
    assert stranger.status_code == 200
    assert stranger.context["cl"].result_count == 0
    assert mine.context["cl"].result_count == 2
    assert per_instance.context["cl"].result_count == 2
    assert revoked.status_code == 302
    assert RefreshToken.objects.filter(revoked__isnull=True).count() == 0
    answer = Harness().post(
        instance.slug, rpc_body("tools/list"), key=tokens["access_token"], headers={"host": "testserver"}
    )
    assert answer.status_code == 401


@pytest.mark.parametrize("method", ["tools/call", "tools/list"])
def test_token_stops_working_when_the_user_who_authorized_it_is_deactivated(superuser, app, reader_writer, method):
    # given: a superuser authorized a client for the owner's instance; this process has seen the token valid
    harness = Harness()
    slug = reader_writer["instance"].slug
    token = make_token(superuser, app, slug, raw="tho_" + "S" * 43)
    call = rpc_body("tools/call", {"name": "reader", "arguments": {}})
    assert harness.post(slug, call, key=token).status_code == 200
    superuser.is_active = False
    superuser.save()

    # when
    body = call if method == "tools/call" else rpc_body("tools/list")
    answer = harness.post(slug, body, key=token)

    # then
    assert answer.status_code == 401
    assert CallLog.objects.count() == 1
