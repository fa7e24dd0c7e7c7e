"""The admin's "see it as a client" page (toolhub.as_client): the lists it shows for a key are the ones the MCP
endpoint answers to that key, it writes nothing, another owner's instance is 404, each listed tool can be called
there and answers as the endpoint answers that key (recorded as the admin's call), and its connection check is a
real MCP session with a running server, with a pasted key or with the signed-in user's session."""

import json
import re
import socket
import time

import httpx2
import pytest
from oauth2_provider.models import AccessToken

from mcp_app.tests.mcp_harness import Harness
from oauth_app.tokens import session_check_token
from tests.live_server import Uvicorn, run_python, seed_mcp, server_database
from toolhub import as_client
from tools_app.models import ApiKey, CallLog, Table


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
    session = client.post(page_url(instance), {"with": "session"})
    called = client.post(page_url(instance), CALL_UPDATE)
    # then: 404 whatever is asked; the key was not used, no token minted, nothing run, recorded or written
    assert shown.status_code == checked.status_code == session.status_code == called.status_code == 404
    assert ApiKey.objects.get(pk=seen_as_client["normal"].pk).last_used_at is None
    assert AccessToken.objects.count() == 0
    assert CallLog.objects.count() == 0
    assert Table.objects.get(name="orders").version == 1


# orders_update setting order 1's status: a write the denial tests expect never to happen.
CALL_UPDATE = {"action": "call", "tool": "orders_update", "arguments": '{"elements": [{"id": 1, "status": "x"}]}'}


def call_from_page(client, instance, tool: str, arguments: str, credential=None) -> dict:
    url = page_url(instance) + (f"?as={credential}" if credential is not None else "")
    response = client.post(url, {"action": "call", "tool": tool, "arguments": arguments})
    assert response.status_code == 200
    return response.context["called"]


def test_each_tool_s_form_starts_with_its_required_arguments(client, owner, seen_as_client):
    # given
    client.force_login(owner)
    # when
    response = client.get(page_url(seen_as_client["instance"]))
    # then: placeholders from each listed input schema's required arguments
    assert [(form["name"], form["arguments"]) for form in response.context["tool_forms"]] == [
        ("orders_query", '{"query": "<query>"}'),
        ("orders_update", '{"elements": []}'),
    ]
    assert response.content.decode().count('name="action" value="call"') == 2


def test_a_declared_example_is_the_form_s_start():
    schema = {
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["query"],
        "examples": [{"query": "[?total > `10`]", "limit": 5}],
    }
    assert as_client.example_of(schema) == {"query": "[?total > `10`]", "limit": 5}
    assert as_client.example_of({**schema, "examples": ["not an object"]}) == {"query": "<query>"}


def test_a_call_from_the_page_answers_as_the_endpoint_and_is_the_admin_s(client, owner, seen_as_client):
    # given
    client.force_login(owner)
    instance = seen_as_client["instance"]
    # when
    called = call_from_page(client, instance, "orders_query", '{"query": "[0]"}', seen_as_client["normal"].pk)
    key_used_at = ApiKey.objects.get(pk=seen_as_client["normal"].pk).last_used_at
    # then: the tools/call result a client with that key gets, shown part by part
    expected = Harness().call("shop", seen_as_client["normal_key"], "orders_query", {"query": "[0]"})["result"]
    answer = called["answer"]
    assert json.loads(answer["json"]) == {"result": expected}
    assert answer["is_error"] is False
    assert answer["text"] == '{"id":1,"customer":"ada","status":"paid","total":10.5}'
    assert json.loads(answer["structured"]) == {"id": 1, "customer": "ada", "status": "paid", "total": 10.5}
    # recorded as the signed-in user's admin call on the instance; the key was not used
    recorded = CallLog.objects.values_list("surface", "user", "api_key", "mcp_instance", "tool_name")
    assert list(recorded.filter(surface="admin")) == [("admin", owner.pk, None, instance.pk, "orders_query")]
    assert key_used_at is None


def test_a_read_only_key_s_call_of_a_write_is_refused_as_the_endpoint_refuses_it(client, owner, seen_as_client):
    # given
    client.force_login(owner)
    instance = seen_as_client["instance"]
    arguments = json.loads(CALL_UPDATE["arguments"])
    # when
    called = call_from_page(client, instance, "orders_update", CALL_UPDATE["arguments"], seen_as_client["read_only"].pk)
    # then: the endpoint's own JSON-RPC error for that key, and no write
    endpoint = Harness().call("shop", seen_as_client["read_only_key"], "orders_update", arguments)
    assert (
        called["answer"]["error"]
        == endpoint["error"]
        == {
            "code": -32602,
            "message": "Unknown tool 'orders_update' for this caller: it changes data, and this API key is read-only.",
        }
    )
    assert Table.objects.get(name="orders").version == 1


def test_the_owner_signed_in_may_write_from_the_page(client, owner, seen_as_client):
    # given
    client.force_login(owner)
    # when
    called = call_from_page(client, seen_as_client["instance"], "orders_update", CALL_UPDATE["arguments"])
    # then
    assert called["answer"]["is_error"] is False
    table = Table.objects.get(name="orders")
    assert table.version == 2
    assert CallLog.objects.get(tool_name="orders_update").surface == "admin"


def test_a_binding_s_name_and_narrowing_apply_to_the_page_s_call(client, owner, table, make_tool, instance, bind):
    # given: orders_query bound as 'my_orders', narrowed to the key's customer
    from tools_app.services import api_key_issue

    narrowing = {"where": {"customer": {"from": "key.attributes.customer"}}}
    bind(instance, make_tool(owner, table, name="orders_query"), name_override="my_orders", pinned_arguments=narrowing)
    alan, alan_key = api_key_issue(mcp_instance=instance, label="alan", attributes={"customer": "alan"})
    client.force_login(owner)
    # when
    called = call_from_page(client, instance, "my_orders", '{"query": "[].id"}', alan.pk)
    by_tool_name = call_from_page(client, instance, "orders_query", '{"query": "[].id"}', alan.pk)
    # then: alan's orders only, under the binding's name, as the endpoint answers alan's key
    assert json.loads(called["answer"]["structured"]) == {"result": [2]}
    assert json.loads(called["answer"]["json"]) == {
        "result": Harness().call("shop", alan_key, "my_orders", {"query": "[].id"})["result"]
    }
    assert by_tool_name["answer"]["error"]["code"] == -32602


def test_call_tool_runs_a_tool_that_search_discovery_does_not_list(
    client, owner, table, make_tool, make_instance, bind
):
    # given: discovery 'search' lists only call_tool here (no registry tool is bound)
    instance = make_instance(owner, discovery="search")
    bind(instance, make_tool(owner, table, name="orders_query"))
    client.force_login(owner)
    arguments = '{"tool_name": "orders_query", "arguments": "{\\"query\\": \\"[0].id\\"}"}'
    # when
    listed = client.get(page_url(instance)).context["tool_forms"]
    called = call_from_page(client, instance, "call_tool", arguments)
    # then: the proxied tool ran, recorded under its own name
    assert [form["name"] for form in listed] == ["call_tool"]
    assert json.loads(called["answer"]["structured"]) == {"result": 1}
    assert list(CallLog.objects.values_list("surface", "tool_name")) == [("admin", "orders_query")]


def test_a_disabled_instance_s_tools_are_not_called(client, owner, seen_as_client):
    # given
    from tools_app.services import instance_update

    instance = seen_as_client["instance"]
    instance_update(instance=instance, enabled=False)
    client.force_login(owner)
    # when
    response = client.post(page_url(instance), CALL_UPDATE)
    # then
    assert response.status_code == 200
    assert response.context["called"] is None
    assert CallLog.objects.count() == 0
    assert Table.objects.get(name="orders").version == 1


def test_arguments_that_are_no_json_object_are_not_sent(client, owner, seen_as_client):
    # given
    client.force_login(owner)
    instance = seen_as_client["instance"]
    # when
    broken = call_from_page(client, instance, "orders_query", '{"query": ')
    listed = call_from_page(client, instance, "orders_query", "[1]")
    # then
    assert broken["problem"] == "Invalid arguments at line 1, column 10: Expecting value."
    assert listed["problem"] == "The arguments must be a JSON object, e.g. {}."
    assert "answer" not in broken
    assert "answer" not in listed
    assert CallLog.objects.count() == 0


def test_a_call_without_the_csrf_token_is_refused(owner, seen_as_client):
    # given
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    # when
    response = client.post(page_url(seen_as_client["instance"]), CALL_UPDATE)
    session = client.post(page_url(seen_as_client["instance"]), {"with": "session"})
    # then
    assert response.status_code == session.status_code == 403
    assert CallLog.objects.count() == 0
    assert AccessToken.objects.count() == 0
    assert Table.objects.get(name="orders").version == 1


def test_the_session_token_reaches_one_endpoint_and_is_gone_after(owner, seen_as_client, make_instance):
    # given
    make_instance(owner, slug="other")
    # when
    with session_check_token(user=owner, resource="http://localhost/mcp/shop/", seconds=15) as token:
        listed = Harness().rpc("shop", token, "tools/list")
        elsewhere = Harness().post("other", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, key=token)
        stored = list(AccessToken.objects.values_list("token", "scope", "application", "user"))
    after = Harness().post("shop", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, key=token)
    # then: the owner's tools on its endpoint only; only the token's hash was stored, and it is deleted
    assert [tool["name"] for tool in listed["result"]["tools"]] == ["orders_query", "orders_update"]
    assert elsewhere.status_code == after.status_code == 401
    assert stored == [("", "tools:all", None, owner.pk)]
    assert AccessToken.objects.count() == 0


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
            yield {"server": server, "env": env, **seeded}


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


def check(http: httpx2.Client, instance_id: int, key: str | None) -> str:
    """The connection check's result line, with `key`, or with the session when `key` is None."""
    url = f"/admin/tools_app/mcpinstance/{instance_id}/as-client/"
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', http.get(url).text).group(1)
    form = {"with": "session"} if key is None else {"with": "key", "key": key}
    response = http.post(
        url, data={"csrfmiddlewaretoken": token, **form}, headers={"referer": str(http.base_url) + url}
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
    session = check(http, as_client_server["instance_id"], None)
    tokens_left = run_python(
        as_client_server["env"], "from oauth2_provider.models import AccessToken; print(AccessToken.objects.count())"
    )
    # then: the server's name and the number of tools tools/list returned; the exact refusal
    tools = len(as_client_server["tools"])
    assert re.fullmatch(
        rf"Connected with the pasted key: server <code>toolhub [^<]+</code>, {tools} tools listed\.", good
    ), good
    assert bad == (
        "Failed with the pasted key: <code>MCPError: UNAUTHORIZED: Invalid API key for this instance "
        "(unknown, revoked, or another instance&#x27;s).</code>"
    )
    assert re.fullmatch(
        rf"Connected with your session \(ascl\): server <code>toolhub [^<]+</code>, {tools} tools listed\.", session
    ), session
    assert tokens_left.strip() == "0"  # the session's token was deleted after the check


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
