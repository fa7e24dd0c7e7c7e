"""The instance page's "See it as a client" link, in Chromium: the lists for a read-only key and the connection
check with a pasted key, against the running server."""

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
    assert re.fullmatch(r"Connected: server toolhub \S+, 1 tool listed\.", result), result
    assert ids["key"] not in page.content()  # the pasted key is not shown back
