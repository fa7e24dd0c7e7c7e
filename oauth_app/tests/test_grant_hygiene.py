"""OAuth hygiene (issue 26): no open redirect through the authorization endpoint's errors, grants that end with
the user's password or account, a replayed authorization code that revokes what it issued, and loopback
redirect URIs matched as documented."""

from urllib.parse import parse_qs, urlsplit

import pytest
from oauth2_provider.models import AccessToken, Grant, RefreshToken, get_application_model

from oauth_app.tests.test_oauth import CALLBACK, app, authorize_query, issue  # noqa: F401 (app: a fixture)
from oauth_app.tests.test_registration import metadata, register

Application = get_application_model()
EVIL = "https://evil.example/phish"
NOTHING = {"grants": 0, "access": 0, "refresh": 0}


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


def test_an_error_goes_back_to_a_client_an_administrator_registered(client, owner, instance, app):  # noqa: F811
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
