"""End to end: the mcp SDK's OAuth client provider against a live toolhub (uvicorn on loopback).

Discovery from the 401, registration (a Client ID Metadata Document served by a local HTTPS server that the
server is told to trust with TOOLHUB_OAUTH_CIMD_TRUSTED_ORIGINS, and Dynamic Client Registration),
authorization by the logged-in owner through the consent page (driven over HTTP: the "browser" is an HTTP
client with the owner's session), token exchange, tools/list and tools/call, refresh with rotation,
revocation -> 401.
"""

import html
import json
import re
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from asgiref.sync import async_to_sync
from mcp.client import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata

from oauth_app.tests.support import DocumentServer, make_certificate
from tests.live_server import Uvicorn, run_python, seed_mcp, server_database

pytestmark = pytest.mark.e2e

PASSWORD = "owner-password-123"
CALLBACK = "http://127.0.0.1:53682/callback"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    directory = tmp_path_factory.mktemp("oauth")
    cert_file, key_file = make_certificate(directory)
    documents = DocumentServer(cert_file, key_file)
    with server_database("oauth", directory, secret="oauth-e2e-secret") as env:
        seeds = {slug: seed_mcp(env, slug=slug, rows=5, user="owner") for slug in ("oa", "ob")}
        run_python(
            env,
            "from django.contrib.auth import get_user_model\n"
            "User = get_user_model()\n"
            f"u = User.objects.get(username='owner'); u.set_password({PASSWORD!r}); u.save()\n"
            f"User.objects.create_user('mallory', password={PASSWORD!r}, is_staff=True)\n"
            "print('ok')",
        )
        env = {
            **env,
            "TOOLHUB_OAUTH_CIMD_TRUSTED_ORIGINS": documents.origin,
            "TOOLHUB_OAUTH_CIMD_CA_FILE": str(cert_file),
            "TOOLHUB_RATE_LIMITS_ENABLED": "false",
        }
        server = Uvicorn(env)
        try:
            yield {"env": env, "server": server, "base": server.base, "seeds": seeds, "documents": documents}
        finally:
            server.stop()
            documents.stop()


class MemoryStorage:
    def __init__(self):
        self.tokens = None
        self.client_info = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info):
        self.client_info = client_info


class Owner:
    """The person at the browser: logs in to the admin, reads the consent page, approves or denies."""

    def __init__(self, base: str, username: str = "owner", *, grant_all: bool = True, approve: bool = True):
        self.base, self.username, self.grant_all, self.approve = base, username, grant_all, approve
        self.pages: list[str] = []
        self.result: AuthorizationCodeResult | None = None
        self.redirect: str = ""

    async def redirect_handler(self, authorization_url: str) -> None:
        async with httpx2.AsyncClient(base_url=self.base, timeout=30) as browser:
            login = await browser.get("/admin/login/")
            csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text)[1]
            logged_in = await browser.post(
                "/admin/login/?next=/admin/",
                data={"username": self.username, "password": PASSWORD, "csrfmiddlewaretoken": csrf},
            )
            assert logged_in.status_code == 302, logged_in.text[:500]
            page = await browser.get(authorization_url)
            self.pages.append(page.text)
            assert page.status_code == 200, page.text[:2000]
            form = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page.text))
            form = {name: html.unescape(value) for name, value in form.items()}
            if self.approve:
                form["allow"] = "Approve"
            if self.grant_all:
                form["grant_all"] = "on"
            answer = await browser.post("/oauth/authorize/", data=form)
            assert answer.status_code == 302, answer.text[:2000]
            self.redirect = answer.headers["location"]
        query = parse_qs(urlsplit(self.redirect).query)
        if "code" in query:
            self.result = AuthorizationCodeResult(
                code=query["code"][0], state=query.get("state", [None])[0], iss=query.get("iss", [None])[0]
            )

    async def callback_handler(self) -> AuthorizationCodeResult:
        assert self.result is not None, f"no code in the redirect: {self.redirect}"
        return self.result


def provider_for(url: str, owner: Owner, *, client_metadata_url: str | None = None, scope: str | None = None):
    metadata = OAuthClientMetadata(
        redirect_uris=[CALLBACK],
        client_name="e2e client",
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
        scope=scope,
    )
    return OAuthClientProvider(
        server_url=url,
        client_metadata=metadata,
        storage=MemoryStorage(),
        redirect_handler=owner.redirect_handler,
        callback_handler=owner.callback_handler,
        client_metadata_url=client_metadata_url,
    )


def run(coroutine_function, *args):
    return async_to_sync(coroutine_function)(*args)


async def _session(url: str, provider, scenario):
    async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http), mode="legacy", cache=None) as client:
            return await scenario(client)


def raw_call(url: str, token: str, name: str, arguments: dict) -> httpx2.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    headers = {
        "authorization": f"Bearer {token}",
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2025-11-25",
    }
    return httpx2.post(url, json=body, headers=headers, timeout=30)


def call_count(env: dict, slug: str) -> list:
    return json.loads(
        run_python(
            env,
            "from tools_app.models import CallLog\n"
            f"rows = CallLog.objects.filter(mcp_instance__slug={slug!r}).order_by('id')\n"
            "print(json.dumps([[r.tool_name, r.status, r.oauth_client, r.user.username if r.user else None,"
            " r.api_key_id] for r in rows]))",
        )
    )


def granted(env: dict) -> dict:
    return json.loads(
        run_python(
            env,
            "from oauth2_provider.models import AccessToken, RefreshToken, Grant\n"
            "tokens = AccessToken.objects.exclude(scope='oauth2_provider:registration')\n"
            "print(json.dumps({'access': tokens.count(), 'grants': Grant.objects.count(),"
            " 'refresh_live': RefreshToken.objects.filter(revoked__isnull=True).count()}))",
        )
    )


def test_discovery_from_the_401(world):
    # when
    url = f"{world['base']}/mcp/oa/"
    answer = httpx2.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=30)
    metadata_url = f"{world['base']}/.well-known/oauth-protected-resource/mcp/oa/"
    prm = httpx2.get(metadata_url, timeout=30).json()
    server = httpx2.get(f"{world['base']}/.well-known/oauth-authorization-server", timeout=30).json()

    # then
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == (
        f'Bearer realm="toolhub", scope="tools:all", resource_metadata="{metadata_url}"'
    )
    assert prm == {
        "resource": url,
        "authorization_servers": [world["base"]],
        "scopes_supported": ["tools:all", "tools:read"],
        "bearer_methods_supported": ["header"],
        "resource_name": "toolhub MCP instance oa",
    }
    assert server["issuer"] == world["base"]
    assert server["code_challenge_methods_supported"] == ["S256"]
    assert server["authorization_response_iss_parameter_supported"] is True
    assert server["client_id_metadata_document_supported"] is True
    assert server["registration_endpoint"] == f"{world['base']}/oauth/register/"
    assert server["revocation_endpoint"] == f"{world['base']}/oauth/revoke/"
    assert server["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert server["response_types_supported"] == ["code"]
    unknown = httpx2.get(f"{world['base']}/.well-known/oauth-protected-resource/mcp/nope/", timeout=30)
    assert unknown.status_code == 404


def test_dynamic_registration_authorize_list_call_refresh_revoke(world):
    # given
    base, env = world["base"], world["env"]
    url = f"{base}/mcp/oa/"
    owner = Owner(base)
    provider = provider_for(url, owner)
    before = len(call_count(env, "oa"))

    async def scenario(client):
        listed = await client.list_tools()
        read = await client.call_tool("orders_by_id", {"keys": [1]})
        write = await client.call_tool("orders_add", {"elements": [{"id": 900, "item": "oauth"}]})
        return listed, read, write

    # when
    listed, read, write = run(_session, url, provider, scenario)

    # then: registered dynamically, authorized by the owner with every tool, and called
    assert sorted(tool.name for tool in listed.tools) == ["orders_add", "orders_by_id", "orders_query", "orders_schema"]
    assert read.is_error is False
    assert read.structured_content["items"][0]["id"] == 1
    assert write.is_error is False
    assert write.structured_content["created"] == 1
    assert "Dynamic registration" in owner.pages[0] or "dynamic registration" in owner.pages[0]
    assert "<strong>oa instance</strong>" in owner.pages[0]
    assert "127.0.0.1" in owner.pages[0]
    assert "<img" not in owner.pages[0]  # no logo for a dynamically registered client
    assert parse_qs(urlsplit(owner.redirect).query)["iss"] == [base]
    tokens = provider.context.current_tokens
    assert tokens.access_token.startswith("tho_")
    assert tokens.refresh_token.startswith("thr_")
    assert set(tokens.scope.split()) == {"tools:all"}
    client_id = provider.context.client_info.client_id
    rows = call_count(env, "oa")[before:]
    assert rows == [
        ["orders_by_id", "ok", client_id, "owner", None],
        ["orders_add", "ok", client_id, "owner", None],
    ]
    stored = run_python(
        env,
        "from oauth2_provider.models import AccessToken\n"
        f"print(AccessToken.objects.filter(token={tokens.access_token!r}).count(),"
        " AccessToken.objects.exclude(token='').count())",
    )
    assert stored == "0 0"  # only checksums are stored

    # when: the token for instance oa is used on instance ob, and on the JSON API
    other = raw_call(f"{base}/mcp/ob/", tokens.access_token, "orders_by_id", {"keys": [1]})
    api = httpx2.get(f"{base}/api/tools/", headers={"authorization": f"Bearer {tokens.access_token}"}, timeout=30)

    # then
    assert other.status_code == 401
    assert 'error="invalid_token"' in other.headers["www-authenticate"]
    assert "issued for another resource" in other.text
    assert api.status_code == 401
    assert call_count(env, "ob") == []

    # when: the access token expires on the client's side, the next call refreshes (rotation)
    old_access, old_refresh = tokens.access_token, tokens.refresh_token
    provider.context.token_expiry_time = 1.0

    async def again(client):
        return await client.call_tool("orders_by_id", {"keys": [2]})

    refreshed = run(_session, url, provider, again)

    # then
    assert refreshed.is_error is False
    new = provider.context.current_tokens
    assert new.access_token != old_access
    assert new.refresh_token != old_refresh
    assert raw_call(url, old_access, "orders_by_id", {"keys": [1]}).status_code == 401

    # when: the client revokes its access token (RFC 7009)
    revoked = httpx2.post(
        f"{base}/oauth/revoke/",
        data={"token": new.access_token, "client_id": client_id, "token_type_hint": "access_token"},
        timeout=30,
    )
    after = raw_call(url, new.access_token, "orders_by_id", {"keys": [1]})

    # then
    assert revoked.status_code == 200
    assert after.status_code == 401
    assert 'error="invalid_token"' in after.headers["www-authenticate"]
    assert len(call_count(env, "oa")) == before + 3


def test_client_id_metadata_document_and_read_only_consent(world):
    # given: a client identified by its metadata document on a local HTTPS server the server trusts
    base, env, documents = world["base"], world["env"], world["documents"]
    url = f"{base}/mcp/ob/"
    client_id = documents.url("/clients/e2e.json")
    documents.documents["/clients/e2e.json"] = {
        "client_id": client_id,
        "client_name": "Metadata client",
        "logo_uri": "https://logo.example/e2e.png",
        "redirect_uris": [CALLBACK],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }
    owner = Owner(base, grant_all=False)  # the owner unticks "tools that change data"
    provider = provider_for(url, owner, client_metadata_url=client_id)

    async def scenario(client):
        return await client.call_tool("orders_by_id", {"keys": [3]})

    # when
    read = run(_session, url, provider, scenario)

    # then
    assert read.is_error is False
    page = owner.pages[0]
    assert "Metadata client" in page
    assert f"localhost:{documents.port}" in client_id
    assert 'src="https://logo.example/e2e.png"' in page
    assert provider.context.client_info.client_id == client_id
    assert provider.context.current_tokens.scope == "tools:read"
    assert documents.hits["/clients/e2e.json"] == 1

    # when: a tool that changes data, outside the granted scope
    before = call_count(env, "ob")
    refused = raw_call(url, provider.context.current_tokens.access_token, "orders_add", {"elements": [{"id": 901}]})

    # then: 403 insufficient_scope, nothing run or recorded
    assert refused.status_code == 403
    assert refused.headers["www-authenticate"] == (
        'Bearer realm="toolhub", error="insufficient_scope", scope="tools:all", '
        f'resource_metadata="{base}/.well-known/oauth-protected-resource/mcp/ob/"'
    )
    assert call_count(env, "ob") == before
    data = run_python(
        env,
        "from tools_app.models import Table\n"
        "print(any(r.get('id') == 901 for r in Table.objects.get(name='ob_orders').data))",
    )
    assert data == "False"


def test_only_the_owner_can_authorize(world):
    # given
    base, env = world["base"], world["env"]
    url = f"{base}/mcp/oa/"
    mallory = Owner(base, username="mallory")
    provider = provider_for(url, mallory)
    before = granted(env)

    async def scenario(client):
        return await client.list_tools()

    # when
    with pytest.raises(BaseException):  # noqa: B017, PT011 (the consent page refuses: the flow cannot finish)
        run(_session, url, provider, scenario)

    # then
    assert granted(env) == before
