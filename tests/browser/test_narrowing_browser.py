"""A narrowing binding set up in the admin in a real browser, then used by two keys over MCP.

Playwright drives Debian's Chromium against uvicorn (tests/browser/conftest.py); screenshots go to
artifacts/screenshots/.
"""

import asyncio
import concurrent.futures
import json

import pytest

from tests.browser.support import shot
from tests.live_server import run_python

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

NARROWING = {"where": {"customer": {"from": "key.attributes.customer"}}}


def query(url: str, key: str, name: str, expression: str) -> object:
    """One tools/call of `name` with the SDK's client, in its own thread and event loop (apart from Playwright's)."""

    async def scenario():
        import httpx2
        from mcp.client import Client
        from mcp.client.streamable_http import streamable_http_client

        async with httpx2.AsyncClient(headers={"authorization": f"Bearer {key}"}, timeout=30) as http:
            async with Client(streamable_http_client(url, http_client=http), cache=None) as client:
                called = await client.call_tool(name, {"query": expression})
                return called.structured_content

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, scenario()).result(timeout=60)


def test_the_owner_narrows_a_query_tool_in_the_admin_and_each_key_reads_its_own_records(server, new_page):
    # given: alice's orders table, a query tool and a delete tool, an instance and two keys
    seeded = json.loads(
        run_python(
            server["env"],
            "import json\n"
            "from django.contrib.auth.models import User\n"
            "from tools_app import services\n"
            "alice = User.objects.get(username='alice')\n"
            "rows = [{'id': 1, 'customer': 'acme', 'total': 5}, {'id': 2, 'customer': 'globex', 'total': 7},"
            " {'id': 3, 'customer': 'acme', 'total': 0}]\n"
            "table = services.table_create(owner=alice, name='shop_orders', data=rows)\n"
            "query = services.tool_create(owner=alice, name='my_orders', type='query_data', table=table,"
            " description='Query my orders.')\n"
            "delete = services.tool_create(owner=alice, name='drop_orders', type='delete', table=table,"
            " description='Delete orders.')\n"
            "instance = services.instance_create(owner=alice, name='Narrow', slug='narrow')\n"
            "keys = {name: services.api_key_issue(mcp_instance=instance, label=name,"
            " attributes={'customer': name})[1] for name in ('acme', 'globex')}\n"
            "print(json.dumps({'instance': instance.pk, 'query': query.pk, 'delete': delete.pk, 'keys': keys}))\n",
        )
    )
    page = new_page("alice")
    endpoint = f"{server['base']}/mcp/narrow/"

    # when: a narrowing on the delete tool is refused, on the query tool saved
    page.goto("/admin/tools_app/binding/add/")
    page.select_option("#id_mcp_instance", value=str(seeded["instance"]))
    page.select_option("#id_tool", value=str(seeded["delete"]))
    page.fill("#id_pinned_arguments", json.dumps(NARROWING))
    with page.expect_navigation():  # the same address again, with the form's errors: read once it has loaded
        page.click("input[name=_save]")
    refused = page.inner_text("#content")
    shot(page, "narrowing-1-refused-on-a-write")
    page.select_option("#id_tool", value=str(seeded["query"]))
    page.fill("#id_pinned_arguments", json.dumps(NARROWING))
    page.click("input[name=_save]")
    page.wait_for_url("**/admin/tools_app/binding/")
    listing = page.inner_text("#result_list")
    shot(page, "narrowing-2-listed")

    # then
    assert "writes through a narrowed binding are not offered" in refused
    assert "only records whose customer = the caller's key.attributes.customer" in listing
    acme = query(endpoint, seeded["keys"]["acme"], "my_orders", "[].id")
    globex = query(endpoint, seeded["keys"]["globex"], "my_orders", "[].id")
    assert acme == {"result": [1, 3]}
    assert globex == {"result": [2]}
