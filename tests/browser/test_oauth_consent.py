"""The OAuth consent page in the browser: the owner logged in to the admin sees which client (its
host prominent), which instance and which access, approves with a click and the client gets a code with the
issuer (RFC 9207); no Content-Security-Policy violation. A user who is not the instance's owner is refused."""

import json
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from oauth_app.tests.support import pkce_pair
from tests.live_server import run_python

CALLBACK = "http://127.0.0.1:9/callback"

SETUP = f"""
from django.contrib.auth.models import User
from oauth2_provider.models import get_application_model
from tools_app import services
alice = User.objects.get(username="alice")
instance = services.instance_create(owner=alice, name="Consent shop", slug="consent-shop")
Application = get_application_model()
app = Application.objects.create(
    name="Browser client", client_type="public", authorization_grant_type="authorization-code",
    redirect_uris={CALLBACK!r}, client_secret="", registration_source="dcr",
)
print(json.dumps({{"client_id": app.client_id}}))
"""

LISTEN = """
window.__cspViolations = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__cspViolations.push(`${e.violatedDirective} blocked ${e.blockedURI || 'inline'}`);
});
"""


@pytest.fixture(scope="module")
def client_id(server):
    return json.loads(run_python(server["env"], SETUP))["client_id"]


def authorize_url(base: str, client_id: str) -> str:
    _verifier, challenge = pkce_pair()
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": CALLBACK,
        "state": "browser-state",
        "scope": "tools:read tools:all",
        "resource": f"{base}/mcp/consent-shop/",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    return "/oauth/authorize/?" + urlencode(query)


def test_owner_approves_in_the_consent_page(server, new_page, client_id, tmp_path):
    # given
    page = new_page("alice")
    page.add_init_script(LISTEN)
    redirected: list[str] = []
    page.route("http://127.0.0.1:9/**", lambda route: (redirected.append(route.request.url), route.fulfill(body="ok")))

    # when
    page.goto(authorize_url(server["base"], client_id))
    page.screenshot(path=str(tmp_path / "consent.png"), full_page=True)
    heading = page.inner_text("h1")
    host = page.inner_text(".oauth-host")
    violations = page.evaluate("window.__cspViolations")
    page.click("input[name=allow]")
    page.wait_for_url("http://127.0.0.1:9/**")

    # then
    assert heading == "Allow Browser client to use Consent shop?"
    assert host == "127.0.0.1"
    assert violations == []
    query = parse_qs(urlsplit(redirected[0]).query)
    assert query["state"] == ["browser-state"]
    assert query["iss"] == [server["base"]]
    assert len(query["code"][0]) > 20


def test_another_user_is_refused(server, new_page, client_id):
    # when
    page = new_page("bob")
    response = page.goto(authorize_url(server["base"], client_id))

    # then
    assert response.status == 403
    assert page.inner_text("h1") == "Not your instance"
    assert "Nothing was granted." in page.inner_text("#content-main")
