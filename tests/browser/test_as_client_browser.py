"""The instance page's "See it as a client" link, in Chromium: the lists for a read-only key, a tool called from the
page, and the connection check with a pasted key and with the session, against the running server."""

import json
import re

import pytest

from tests.live_server import run_python

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


def test_a_read_only_key_sees_no_write_tool_and_the_connection_check_connects(server, new_page):
    # given: alice's instance with a tool that reads and one that changes data, a read-only key
    made = run_python(
        server["env"],
        "from django.contrib.auth.models import User\n"
        "from tools_app import services\n"
        "alice = User.objects.get(username='alice')\n"
        "table = services.table_create(owner=alice, name='as_client_orders', data=[{'id': 1}])\n"
        "instance = services.instance_create(owner=alice, name='Seen', slug='seen-as-client')\n"
        "for name, kind in [('orders_query', 'query_data'), ('orders_update', 'update')]:\n"
        "    tool = services.tool_create(owner=alice, name=name, type=kind, table=table, description=name)\n"
        "    services.binding_create(mcp_instance=instance, tool=tool)\n"
        "reader, key = services.api_key_issue(mcp_instance=instance, label='reader', read_only=True)\n"
        "print(json.dumps({'instance': instance.pk, 'reader': reader.pk, 'key': key}))\n",
    )
    ids = json.loads(made)
    page = new_page("alice")
    page.goto(f"/admin/tools_app/mcpinstance/{ids['instance']}/change/")
    # when: the link, then the read-only key
    page.click("#toolhub-as-client-link")
    owner_tools = page.locator("#toolhub-as-client-tools code").all_inner_texts()
    page.select_option("#toolhub-as", str(ids["reader"]))
    page.click("#toolhub-as-client-form button")
    page.wait_for_url(re.compile(rf".*as=({ids['reader']})$"))
    reader_tools = page.locator("#toolhub-as-client-tools code").all_inner_texts()
    page.fill("#toolhub-check-key", ids["key"])
    page.click("#toolhub-check-form button")
    page.wait_for_selector("#toolhub-check-result")
    result = page.inner_text("#toolhub-check-result")
    page.screenshot(path="/tmp/client27_as_client.png", full_page=True)
    # then
    assert owner_tools == ["orders_query", "orders_update"]
    assert reader_tools == ["orders_query"]
    assert re.fullmatch(r"Connected with the pasted key: server toolhub \S+, 1 tool listed\.", result), result
    assert ids["key"] not in page.content()  # the pasted key is not shown back


def test_a_tool_called_from_the_page_and_the_session_check(server, new_page):
    # given: alice's instance with orders_query bound as 'my_orders'
    made = run_python(
        server["env"],
        "from django.contrib.auth.models import User\n"
        "from tools_app import services\n"
        "alice = User.objects.get(username='alice')\n"
        "table = services.table_create(owner=alice, name='as_client_calls', data=[{'id': 1}, {'id': 2}])\n"
        "instance = services.instance_create(owner=alice, name='Called', slug='called-as-client')\n"
        "tool = services.tool_create(\n"
        "    owner=alice, name='calls_query', type='query_data', table=table, description='Orders by query.'\n"
        ")\n"
        "services.binding_create(mcp_instance=instance, tool=tool, name_override='my_orders')\n"
        "print(json.dumps({'instance': instance.pk}))\n",
    )
    ids = json.loads(made)
    page = new_page("alice")
    page.goto(f"/admin/tools_app/mcpinstance/{ids['instance']}/as-client/")
    # when: the tool's form, with arguments typed over its placeholder
    prefilled = page.input_value("#toolhub-as-client-tools textarea")
    page.click("#toolhub-as-client-tools details.toolhub-call summary")
    page.fill("#toolhub-as-client-tools textarea", '{"query": "[].id"}')
    page.click("#toolhub-as-client-tools .toolhub-call-form button")
    page.wait_for_selector("#toolhub-call-answer")
    is_error = page.inner_text(".toolhub-call-is-error")
    structured = page.inner_text(".toolhub-call-structured")
    page.screenshot(path="/tmp/client27_as_client_call.png", full_page=True)
    # then the session check (no key typed)
    page.click("#toolhub-check-with-session")
    page.wait_for_selector("#toolhub-check-result")
    result = page.inner_text("#toolhub-check-result")
    page.screenshot(path="/tmp/client27_as_client_session.png", full_page=True)
    recorded = run_python(
        server["env"],
        "from tools_app.models import CallLog\n"
        "from oauth2_provider.models import AccessToken\n"
        "print(json.dumps([list(CallLog.objects.values_list('surface', 'tool_name', 'user__username')),"
        " AccessToken.objects.count()]))\n",
    )
    # then
    assert prefilled == '{"query": "<query>"}'
    assert is_error == "false"
    assert json.loads(structured) == {"result": [1, 2]}
    assert re.fullmatch(r"Connected with your session \(alice\): server toolhub \S+, 1 tool listed\.", result), result
    assert json.loads(recorded) == [[["admin", "my_orders", "alice"]], 0]
