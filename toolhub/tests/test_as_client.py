"""The admin's "see it as a client" page (toolhub.as_client): the lists it shows for a key are the ones the MCP
endpoint answers to that key, it writes nothing, another owner's instance is 404, and its connection check is a
real MCP session with a running server."""

import re
import socket
import time

import httpx2
import pytest

from mcp_app.tests.mcp_harness import Harness
from tests.live_server import Uvicorn, run_python, seed_mcp, server_database
from toolhub import as_client
from tools_app.models import ApiKey


@pytest.fixture
def seen_as_client(owner, table, make_tool, instance, bind):
    """The instance 'shop' with a tool that reads (orders_query) and one that changes data (orders_update),
    a normal key and a read-only key (plaintexts under "normal_key" and "read_only_key")."""
    from tools_app.services import api_key_issue

    bind(instance, make_tool(owner, table, name="orders_query"))
    bind(instance, make_tool(owner, table, type="update", name="orders_update"))
    normal, normal_key = api_key_issue(mcp_instance=instance, label="normal")
    read_only, read_only_key = api_key_issue(mcp_instance=instance, label="reader", read_only=True)
    return {
        "instance": instance,
        "normal": normal,
        "normal_key": normal_key,
        "read_only": read_only,
        "read_only_key": read_only_key,
    }


def page_url(instance) -> str:
    return f"/admin/tools_app/mcpinstance/{instance.pk}/as-client/"


def endpoint_names(key: str, method: str, field: str, name: str = "name") -> list[str]:
    reply = Harness().rpc("shop", key, method)
    return [entry[name] for entry in reply["result"][field]]


def test_the_page_lists_what_the_endpoint_answers_each_key(client, owner, seen_as_client):
    # given
    client.force_login(owner)
    instance = seen_as_client["instance"]
    # when
    normal = client.get(page_url(instance), {"as": seen_as_client["normal"].pk})
    read_only = client.get(page_url(instance), {"as": seen_as_client["read_only"].pk})
    signed_in = client.get(page_url(instance))
    # then: the exact names, and the same as the endpoint's own answer to each key
    assert normal.status_code == read_only.status_code == signed_in.status_code == 200
    assert [tool["name"] for tool in normal.context["listing"]["tools"]] == ["orders_query", "orders_update"]
    assert [tool["name"] for tool in read_only.context["listing"]["tools"]] == ["orders_query"]
    assert [tool["name"] for tool in signed_in.context["listing"]["tools"]] == ["orders_query", "orders_update"]
    assert not read_only.context["listing"]["writes"]
    for label, response in (("normal_key", normal), ("read_only_key", read_only)):
        key = seen_as_client[label]
        listing = response.context["listing"]
        assert [tool["name"] for tool in listing["tools"]] == endpoint_names(key, "tools/list", "tools")
        assert listing["tools"] == Harness().rpc("shop", key, "tools/list")["result"]["tools"]
        assert [p["name"] for p in listing["prompts"]] == endpoint_names(key, "prompts/list", "prompts")
        assert [r["uri"] for r in listing["resources"]] == endpoint_names(key, "resources/list", "resources", "uri")
    assert "<code>orders_update</code>" not in read_only.content.decode()
    assert "<code>orders_update</code>" in normal.content.decode()


def test_showing_the_lists_writes_nothing(client, owner, seen_as_client):
    # given
    client.force_login(owner)
    # when
    response = client.get(page_url(seen_as_client["instance"]), {"as": seen_as_client["normal"].pk})
    # then: a preview is no use of the key
    assert response.status_code == 200
    assert ApiKey.objects.get(pk=seen_as_client["normal"].pk).last_used_at is None


def test_another_owners_instance_is_404(client, other_user, seen_as_client):
    # given
    client.force_login(other_user)
    instance = seen_as_client["instance"]
    # when
    shown = client.get(page_url(instance), {"as": seen_as_client["normal"].pk})
    checked = client.post(page_url(instance), {"key": seen_as_client["normal_key"]})
    # then: 404 whatever is asked, and the key was not used
    assert shown.status_code == checked.status_code == 404
    assert ApiKey.objects.get(pk=seen_as_client["normal"].pk).last_used_at is None


def test_a_revoked_or_foreign_key_id_is_404(client, owner, seen_as_client):
    # given
    client.force_login(owner)
    revoked = seen_as_client["read_only"]
    from tools_app.services import api_key_revoke

    api_key_revoke(api_key=revoked)
    # when
    response = client.get(page_url(seen_as_client["instance"]), {"as": revoked.pk})
    unknown = client.get(page_url(seen_as_client["instance"]), {"as": "nope"})
    # then
    assert response.status_code == unknown.status_code == 404


PASSWORD = "as-client-pw-1!"


@pytest.fixture(scope="module")
def as_client_server(tmp_path_factory):
    """A running server with the seeded instance 'ascl' of user 'ascl' (password PASSWORD) and its key."""
    with server_database("as_client", tmp_path_factory.mktemp("as_client"), secret="as-client-secret") as env:
        seeded = seed_mcp(env, slug="ascl", rows=5, user="ascl")
        run_python(
            env,
            "from django.contrib.auth import get_user_model; u = get_user_model().objects.get(username='ascl'); "
            f"u.is_staff = True; u.set_password({PASSWORD!r}); u.save(); print('ok')",
        )
        with Uvicorn(env) as server:
            yield {"server": server, **seeded}


def signed_in(base: str) -> httpx2.Client:
    http = httpx2.Client(base_url=base, timeout=60, follow_redirects=True)
    login = http.get("/admin/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text).group(1)
    done = http.post(
        "/admin/login/?next=/admin/", data={"csrfmiddlewaretoken": token, "username": "ascl", "password": PASSWORD}
    )
    assert done.status_code == 200, done.text[:500]
    assert "/admin/login/" not in str(done.url), done.text[:500]
    return http


def check(http: httpx2.Client, instance_id: int, key: str) -> str:
    url = f"/admin/tools_app/mcpinstance/{instance_id}/as-client/"
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', http.get(url).text).group(1)
    response = http.post(
        url, data={"csrfmiddlewaretoken": token, "key": key}, headers={"referer": str(http.base_url) + url}
    )
    assert response.status_code == 200, response.text[:500]
    return re.search(r'<p id="toolhub-check-result"[^>]*>(.*?)</p>', response.text, re.S).group(1)


@pytest.mark.e2e
def test_the_connection_check_talks_mcp_to_the_running_server(as_client_server):
    # given
    server = as_client_server["server"]
    http = signed_in(server.base)
    # when
    good = check(http, as_client_server["instance_id"], as_client_server["key"])
    bad = check(http, as_client_server["instance_id"], "thk_" + "x" * 43)
    # then: the server's name and the number of tools tools/list returned; the exact refusal
    tools = len(as_client_server["tools"])
    assert re.fullmatch(rf"Connected: server <code>toolhub [^<]+</code>, {tools} tools listed\.", good), good
    assert bad == (
        "Failed: <code>MCPError: UNAUTHORIZED: Invalid API key for this instance "
        "(unknown, revoked, or another instance&#x27;s).</code>"
    )


def test_a_post_without_a_key_says_what_is_missing(client, owner, seen_as_client):
    # given
    client.force_login(owner)
    # when
    response = client.post(page_url(seen_as_client["instance"]), {"key": "  "})
    # then: no session was tried
    assert response.status_code == 200
    assert response.context["check"] == {
        "ok": False,
        "error": "Paste one of this instance's API keys to check the connection.",
    }


def test_the_connection_check_gives_up_on_a_server_that_never_answers(monkeypatch):
    # given: a socket that accepts connections and never answers
    monkeypatch.setattr(as_client, "CHECK_SECONDS", 0.5)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/mcp/shop/"
        # when
        started = time.monotonic()
        result = as_client.connection_check(url, "thk_" + "x" * 43)
        elapsed = time.monotonic() - started
    # then
    assert result == {"ok": False, "error": "No answer within 0.5 seconds."}
    assert elapsed < 3
