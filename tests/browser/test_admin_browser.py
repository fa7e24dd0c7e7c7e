"""The admin in a real browser: Playwright drives Debian's Chromium against uvicorn.

The server is `uvicorn toolhub.asgi:application` (the admin and the MCP endpoint in one app) on a free
loopback port, in a subprocess with its own freshly migrated database (a temporary SQLite file, or a
temporary PostgreSQL database when the suite runs on PostgreSQL). Screenshots of every page go to
artifacts/screenshots/. Without Chromium (or Playwright) the tests skip locally and fail in CI.
"""

import asyncio
import concurrent.futures
import json
import re

import pytest

from tests.browser.support import shot
from tests.live_server import run_python

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

INVENTORY = [
    {"id": 1, "name": "bolt", "qty": 120},
    {"id": 2, "name": "nut", "qty": 3},
    {"id": 3, "name": "washer", "qty": 48},
]


def mcp_tool_names(url: str, key: str, call: tuple[str, dict] | None = None) -> tuple[list[str], object]:
    """tools/list (and optionally one tools/call) with the SDK's client and the bearer key.

    Runs in its own thread with its own event loop, apart from Playwright's.
    """

    async def scenario():
        import httpx2
        from mcp.client import Client
        from mcp.client.streamable_http import streamable_http_client

        async with httpx2.AsyncClient(headers={"authorization": f"Bearer {key}"}, timeout=30) as http:
            async with Client(streamable_http_client(url, http_client=http), cache=None) as client:
                listed = await client.list_tools()
                called = await client.call_tool(*call) if call else None
                return sorted(tool.name for tool in listed.tools), called

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, scenario()).result(timeout=60)


def test_owner_goes_from_nothing_to_a_working_endpoint(server, new_page):
    """Log in, create a table, a tool and an instance, bind, create a key, copy the config, try the tool,
    see the calls in the log, disable the binding and see the tool gone from a real MCP client's tools/list."""
    page = new_page("alice")
    shot(page, "01-index")
    assert "Your toolhub" in page.inner_text("#toolhub-dashboard")

    # A table: invalid JSON is refused with its position, then valid JSON is saved.
    page.goto("/admin/tools_app/table/add/")
    page.fill("#id_name", "inventory")
    page.fill("#id_data", '[\n  {"id": 1,, "name": "bolt"}\n]')
    page.click("input[name=_continue]")
    assert "Invalid JSON data at line 2, column 12" in page.inner_text(".errorlist")
    shot(page, "02-table-invalid-json")
    page.fill("#id_data", json.dumps(INVENTORY))
    page.click("input[name=_continue]")
    page.wait_for_url(re.compile(r".*/tools_app/table/\d+/change/.*"))
    assert '"id": 1,' in page.input_value("#id_data")  # shown back pretty-printed
    assert '"item_count": 3' in page.inner_text("#toolhub-shape")
    shot(page, "03-table")

    # A tool on the table.
    page.goto("/admin/tools_app/tool/add/")
    page.fill("#id_name", "inventory_query")
    page.select_option("#id_type", "query_data")
    assert "Evaluates a JMESPath expression" in page.inner_text("#toolhub-type-help")
    page.fill("#id_description", "Query the inventory with JMESPath, e.g. [?qty > `10`].name")
    page.select_option("#id_table", label="inventory")
    page.click("input[name=_continue]")
    page.wait_for_url(re.compile(r".*/tools_app/tool/\d+/change/.*"))
    tool_url = page.url
    shot(page, "04-tool")

    # An instance with the tool bound in its inline.
    page.goto("/admin/tools_app/mcpinstance/add/")
    page.fill("#id_name", "Warehouse")
    page.press("#id_name", "Tab")
    assert page.input_value("#id_slug") == "warehouse"  # prepopulated from the name
    page.select_option("#id_bindings-0-tool", label="inventory_query")
    page.click("input[name=_continue]")
    page.wait_for_url(re.compile(r".*/tools_app/mcpinstance/\d+/change/.*"))
    instance_url = page.url
    endpoint = page.inner_text("#toolhub-endpoint")
    assert endpoint == f"{server['base']}/mcp/warehouse/"
    shot(page, "05-instance")

    # A key, shown once, and the Cursor config copied with the key filled in.
    page.click("#toolhub-new-key-drawer summary")
    page.fill("#toolhub-key-form input[name=label]", "browser")
    page.click("#toolhub-create-key")
    key = page.inner_text("#toolhub-new-key").strip()
    assert key.startswith("thk_")
    page.click("#tab-config-cursor")
    page.click("#config-cursor button.toolhub-copy")
    copied = json.loads(page.evaluate("navigator.clipboard.readText()"))
    assert copied == {
        "mcpServers": {"toolhub-warehouse": {"url": endpoint, "headers": {"Authorization": f"Bearer {key}"}}}
    }
    shot(page, "06-key-created")
    page.goto(instance_url)
    assert key not in page.content()

    # A real MCP client sees and calls the tool.
    names, called = mcp_tool_names(endpoint, key, ("inventory_query", {"query": "[?qty > `10`].name"}))
    assert names == ["inventory_query"]
    assert called.structured_content == {"result": ["bolt", "washer"]}

    # Try it in the admin.
    page.goto(tool_url.replace("/change/", "/try/"))
    page.fill("#id_query", "[?qty < `10`].name")
    page.click("#toolhub-run")
    assert json.loads(page.inner_text("#toolhub-result")) == ["nut"]
    shot(page, "07-try-it")
    page.fill("#id_query", "[?")
    page.click("#toolhub-run")
    assert page.inner_text("#toolhub-error-code") == "INVALID_QUERY"
    shot(page, "08-try-it-error")

    # The calls in the log: two from the admin, one over MCP, each recorded before it answered.
    page.goto("/admin/tools_app/calllog/")
    surfaces = page.locator("#result_list td.field-surface").all_inner_texts()
    assert sorted(surfaces) == ["Admin try-it", "Admin try-it", "MCP"]
    stats_row = page.locator("#toolhub-call-stats tbody tr").first.inner_text()
    assert stats_row.split("\t")[:4] == ["inventory_query", "3", "1", "33.3 %"]
    shot(page, "09-call-log")

    # Disable the binding on the instance page: the tool leaves tools/list.
    page.goto(instance_url)
    page.uncheck("#id_bindings-0-enabled")
    page.click("input[name=_continue]")
    page.wait_for_url(re.compile(r".*/tools_app/mcpinstance/\d+/change/.*"))
    assert not page.is_checked("#id_bindings-0-enabled")
    shot(page, "10-binding-disabled")
    names, _ = mcp_tool_names(endpoint, key)
    assert names == []


def test_second_user_sees_none_of_the_first_users_objects(server, new_page):
    """A second staff user lists none of another user's objects and cannot open them."""
    ids = json.loads(
        run_python(
            server["env"],
            "import json\n"
            "from django.contrib.auth.models import User\n"
            "from tools_app import services\n"
            "from tools_app import services as mcp\n"
            "alice = User.objects.get(username='alice')\n"
            "table = services.table_create(owner=alice, name='alice_private', data=[{'id': 1}])\n"
            "tool = services.tool_create(owner=alice, name='alice_secret', type='get_all_data', table=table,"
            " description='d')\n"
            "instance = mcp.instance_create(owner=alice, name='Alice only', slug='alice-only')\n"
            "mcp.binding_create(mcp_instance=instance, tool=tool)\n"
            "mcp.api_key_issue(mcp_instance=instance, label='alice key')\n"
            "print(json.dumps({'table': table.pk, 'tool': tool.pk, 'instance': instance.pk}))\n",
        )
    )
    page = new_page("bob")
    dashboard = page.inner_text("#toolhub-dashboard")
    assert "0 tables" in dashboard
    assert "Alice only" not in dashboard
    shot(page, "11-bob-index")
    for model in ("table", "tool", "mcpinstance", "binding", "apikey"):
        page.goto(f"/admin/tools_app/{model}/")
        body = page.inner_text("#content")
        assert "alice" not in body.lower(), model
        assert page.locator("#result_list").count() == 0, model
        shot(page, f"12-bob-{model}")
    page.goto("/admin/tools_app/calllog/")
    assert page.locator("#result_list").count() == 0
    for path in (
        f"/admin/tools_app/table/{ids['table']}/change/",
        f"/admin/tools_app/tool/{ids['tool']}/change/",
        f"/admin/tools_app/mcpinstance/{ids['instance']}/change/",
    ):
        page.goto(path)
        assert page.url == f"{server['base']}/admin/", path
        assert "doesn’t exist" in page.inner_text(".messagelist"), path
    page.goto("/admin/tools_app/tool/add/")
    options = page.locator("#id_table option").all_inner_texts()
    assert options == ["---------"]
    shot(page, "13-bob-tool-add")
