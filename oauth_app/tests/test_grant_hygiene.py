"""OAuth hygiene: no open redirect through the authorization endpoint's errors, grants that end with
the user's password or account, a replayed authorization code that revokes what it issued, and loopback
redirect URIs matched as documented."""

from urllib.parse import parse_qs, urlsplit

import pytest
from oauth2_provider.models import AccessToken, Grant, RefreshToken, get_application_model

from mcp_app.tests.mcp_harness import Harness, rpc_body
from oauth_app.tests.support import CALLBACK, pkce_pair
from oauth_app.tests.test_oauth import authorize_query, issue, refresh
from oauth_app.tests.test_registration import metadata, register
from tools_app import services
from tools_app.models import ApiToken

Application = get_application_model()
EVIL = "https://evil.example/phish"
NOTHING = {"grants": 0, "access": 0, "refresh": 0}
HOST = {"host": "testserver"}  # tokens are bound to http://testserver/mcp/<slug>/


def granted() -> dict:
    """What users granted (a registration's own access token, for managing it, is not a grant)."""
    return {
        "grants": Grant.objects.count(),
        "access": AccessToken.objects.filter(user__isnull=False).count(),
        "refresh": RefreshToken.objects.count(),
    }


@pytest.fixture
def registered(client, db):
    """Clients anyone registered (dynamic registration): one sending back to an attacker's page, one to a
    loopback callback."""
    evil = register(client, metadata(redirect_uris=[EVIL])).json()["client_id"]
    loopback = register(client, metadata(redirect_uris=[CALLBACK])).json()["client_id"]
    return {"evil": Application.objects.get(client_id=evil), "loopback": Application.objects.get(client_id=loopback)}


#
# Errors of the authorization endpoint (RFC 9700 §4.11.2)
#


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"scope": "nonexistent"}, "invalid_scope"),
        ({"code_challenge": None, "code_challenge_method": None}, "invalid_request"),
        ({"response_type": "token"}, "unauthorized_client"),
    ],
)
@pytest.mark.parametrize("who", ["owner", "superuser"])
def test_an_error_for_a_client_nobody_approved_is_a_page_not_a_redirect(
    client, owner, superuser, instance, registered, changes, error, who
):
    # given
    client.force_login(owner if who == "owner" else superuser)

    # when
    answer = client.get(authorize_query(registered["evil"].client_id, instance.slug, redirect_uri=EVIL, **changes))

    # then
    assert answer.status_code == 400
    assert "Location" not in answer
    page = answer.content.decode()
    assert f"cannot be granted ({error}" in page
    assert "You are not sent back to evil.example" in page
    assert granted() == NOTHING


def test_an_error_goes_back_to_a_client_the_user_approved_before(client, owner, instance, registered):
    # given: the owner approved the loopback client once
    loopback = registered["loopback"]
    client.force_login(owner)
    before = client.get(authorize_query(loopback.client_id, instance.slug, scope="nonexistent"))
    issue(client, owner, instance, loopback)

    # when
    after = client.get(authorize_query(loopback.client_id, instance.slug, scope="nonexistent"))

    # then
    assert before.status_code == 400
    assert "Location" not in before
    assert after.status_code == 302
    query = parse_qs(urlsplit(after["Location"]).query)
    assert after["Location"].startswith(CALLBACK + "?")
    assert (query["error"], query["state"]) == (["invalid_scope"], ["s1"])


def test_an_error_goes_back_to_a_client_an_administrator_registered(client, owner, instance, app):
    client.force_login(owner)
    answer = client.get(authorize_query(app.client_id, instance.slug, scope="nonexistent"))
    assert answer.status_code == 302
    assert parse_qs(urlsplit(answer["Location"]).query)["error"] == ["invalid_scope"]


def test_deny_on_the_consent_page_goes_back_to_any_client(client, owner, instance, registered):
    # given: the consent page of a client nobody approved (it names where it sends back)
    client.force_login(owner)
    page = client.get(authorize_query(registered["evil"].client_id, instance.slug, redirect_uri=EVIL))
    form = {k: v for k, v in page.context["form"].initial.items() if v is not None}

    # when
    denied = client.post("/oauth/authorize/", form)

    # then
    assert page.status_code == 200
    assert "evil.example" in page.content.decode()
    assert denied.status_code == 302
    assert denied["Location"].startswith(EVIL + "?error=access_denied")
    assert granted() == NOTHING


#
# A replayed authorization code revokes what it issued (RFC 6749 §4.1.2)
#


def authorization_code(client, owner, instance, application) -> tuple[str, str]:
    """The owner approves `application`: (code, verifier)."""
    client.force_login(owner)
    verifier, challenge = pkce_pair()
    page = client.get(authorize_query(application.client_id, instance.slug, code_challenge=challenge))
    form = {k: v for k, v in page.context["form"].initial.items() if v is not None}
    answer = client.post("/oauth/authorize/", {**form, "allow": "Approve", "grant_all": "on"})
    return parse_qs(urlsplit(answer["Location"]).query)["code"][0], verifier


def exchange(client, application, code: str, verifier: str):
    return client.post(
        "/oauth/token/",
        {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": CALLBACK,
            "client_id": application.client_id,
            "code_verifier": verifier,
        },
    )


def test_a_replayed_code_revokes_the_tokens_it_issued(client, owner, instance, app, reader_writer):
    # given: a code exchanged, its tokens refreshed once, and a token of another authorization
    code, verifier = authorization_code(client, owner, instance, app)
    first = exchange(client, app, code, verifier).json()
    rotated = refresh(client, app, first["refresh_token"]).json()
    other = issue(client, owner, instance, app)
    tools_list = rpc_body("tools/list")
    assert Harness().post(instance.slug, tools_list, key=rotated["access_token"], headers=HOST).status_code == 200

    # when: the code is presented again
    replay = exchange(client, app, code, verifier)

    # then: refused, and every token of that exchange (the rotated ones too) stops working; the other stays
    assert replay.status_code == 400
    assert replay.json()["error"] == "invalid_grant"
    assert Harness().post(instance.slug, tools_list, key=rotated["access_token"], headers=HOST).status_code == 401
    assert refresh(client, app, rotated["refresh_token"]).status_code == 400
    assert Harness().post(instance.slug, tools_list, key=other["access_token"], headers=HOST).status_code == 200
    assert RefreshToken.objects.filter(revoked__isnull=True).count() == 1
    assert AccessToken.objects.filter(user__isnull=False).count() == 1


def test_a_code_that_was_never_exchanged_revokes_nothing(client, owner, instance, app):
    tokens = issue(client, owner, instance, app)
    unknown = exchange(client, app, "never-issued", "v" * 43)
    assert unknown.status_code == 400
    assert RefreshToken.objects.filter(revoked__isnull=True).count() == 1
    assert refresh(client, app, tokens["refresh_token"]).status_code == 200


#
# Grants follow the user: password change, deactivation, log out everywhere
#


def works(client, app, instance, tokens) -> dict:
    """Whether the access token still answers on the MCP endpoint and the refresh token still refreshes."""
    answer = Harness().post(instance.slug, rpc_body("tools/list"), key=tokens["access_token"], headers=HOST)
    refreshed = refresh(client, app, tokens["refresh_token"])
    return {"access": answer.status_code, "refresh": refreshed.status_code}


@pytest.mark.parametrize("change", ["password", "deactivated", "everywhere", "everywhere-api", "everywhere-admin"])
def test_grants_end_with_the_users_password_account_or_log_out_everywhere(
    client, owner, superuser, instance, app, reader_writer, change
):
    # given: the owner and a superuser each authorized the client; the owner has an API token too
    mine = issue(client, owner, instance, app)
    theirs = issue(client, superuser, instance, app)
    code, _verifier = authorization_code(client, owner, instance, app)  # approved, not exchanged yet
    client.logout()
    api_token, plaintext = services.api_token_issue(user=owner)

    # when
    if change == "password":
        owner.set_password("another-password-42")
        owner.save()
    elif change == "deactivated":
        owner.is_active = False
        owner.save(update_fields=["is_active"])
    elif change == "everywhere":
        assert services.user_sign_out_everywhere(user=owner, actor=owner) == 1
    elif change == "everywhere-api":
        answer = client.post("/api/auth/tokens/revoke-all/", HTTP_AUTHORIZATION=f"Token {plaintext}")
        assert (answer.status_code, answer.json()) == (200, {"revoked": 1})
    else:
        client.force_login(owner)
        answer = client.post("/admin/tools_app/apitoken/log-out-everywhere/")
        assert (answer.status_code, answer["Location"]) == (302, "/admin/tools_app/apitoken/")
        assert client.get("/admin/").status_code == 200  # the admin session stays
        client.logout()

    # then: every grant of the owner ended, the superuser's stands
    assert works(client, app, instance, mine) == {"access": 401, "refresh": 400}
    assert RefreshToken.objects.filter(user=owner, revoked__isnull=True).count() == 0
    assert AccessToken.objects.filter(user=owner).count() == 0
    assert Grant.objects.filter(code=code).count() == 0
    assert RefreshToken.objects.filter(user=superuser, revoked__isnull=True).count() == 1
    assert AccessToken.objects.filter(user=superuser).count() == 1
    if change != "deactivated":  # (an instance of a deactivated owner answers no token at all)
        assert works(client, app, instance, theirs) == {"access": 200, "refresh": 200}
    assert ApiToken.objects.filter(pk=api_token.pk).exists() is (not change.startswith("everywhere"))


def test_saving_a_user_without_a_credential_change_keeps_the_grants(client, owner, instance, app, reader_writer):
    tokens = issue(client, owner, instance, app)
    client.logout()
    owner.email = "owner@example.com"
    owner.save()
    owner.last_login = None
    owner.save(update_fields=["last_login"])
    assert works(client, app, instance, tokens) == {"access": 200, "refresh": 200}


#
# Redirect URI matching, as docs/oauth.md says
#


@pytest.mark.parametrize(
    ("asked", "status"),
    [
        ("http://127.0.0.1:53682/callback", 200),  # as registered
        ("http://127.0.0.1:1234/callback", 200),  # a loopback IP: any port (RFC 8252 §7.3)
        ("http://127.0.0.1/callback", 200),
        ("http://[::1]:999/callback", 200),
        ("http://localhost:3000/callback", 200),
        ("http://localhost:3001/callback", 400),  # "localhost" is a name: its port must match
        ("http://localhost:53682/callback", 400),  # nor does a name match a registered address
        ("http://127.0.0.1:1234/other", 400),  # the path must match
        ("http://127.0.0.1:1234/callback?x=1", 400),  # and the query
        ("https://127.0.0.1:53682/callback", 400),  # and the scheme
        ("https://app.example/cb", 200),
        ("https://app.example:8443/cb", 400),  # any other host: the port too
    ],
)
def test_redirect_uris_match_as_documented(client, owner, instance, asked, status):
    # given: an administrator registered loopback callbacks and an https one
    application = Application.objects.create(
        name="native",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris="http://127.0.0.1:53682/callback http://[::1]/callback http://localhost:3000/callback "
        "https://app.example/cb",
    )
    client.force_login(owner)

    # when
    answer = client.get(authorize_query(application.client_id, instance.slug, redirect_uri=asked))

    # then
    assert answer.status_code == status
    assert "Location" not in answer


def test_resource_metadata_names_no_instance_and_says_no_more_than_the_endpoint(client, owner, make_instance):
    # given: an instance whose name is its owner's private text
    make_instance(owner, slug="payroll", name="Acme payroll, do not share")

    # when
    known = client.get("/.well-known/oauth-protected-resource/mcp/payroll/")
    unknown = client.get("/.well-known/oauth-protected-resource/mcp/nope/")
    endpoint = Harness().post("nope", rpc_body("tools/list"))

    # then
    assert known.json()["resource_name"] == "toolhub MCP instance payroll"
    assert "Acme" not in known.content.decode()
    assert (unknown.status_code, endpoint.status_code) == (404, 404)
