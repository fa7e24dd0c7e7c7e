"""What an instance serves besides its tools, set up in a real browser: Playwright drives Debian's
Chromium against uvicorn. On the instance's admin page the owner writes a prompt in the Prompts rows, gives a
select binding a record template of her own and sets the instance's log level; a real MCP client (the SDK over
a real socket) then gets the prompt with its arguments, reads a record through the template, and receives the
log messages of a call it made without asking for any."""

import asyncio
import concurrent.futures
import json
import re

import pytest

from tests.browser.support import shot
from tests.live_server import run_python

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

ORDERS = [{"id": 1, "customer": "Ada", "total": 12.5}, {"id": 2, "customer": "Grace", "total": 99.0}]
TEMPLATE = "Summarise the orders of {{customer}} since {{since}}, largest first."


def client_session(url: str, key: str) -> dict:
    """A 2025-11-25 SDK client: prompts/list, prompts/get, resources/read and one tools/call, in its own thread
    and event loop (apart from Playwright's); the log messages the call received."""

    async def scenario():
        import httpx2
        from mcp.client import Client
        from mcp.client.streamable_http import streamable_http_client

        logs = []

        async def on_log(params):
            logs.append((params.level, params.data["message"]))

        async with httpx2.AsyncClient(headers={"authorization": f"Bearer {key}"}, timeout=30) as http:
            transport = streamable_http_client(url, http_client=http)
            async with Client(transport, mode="legacy", cache=None, logging_callback=on_log) as client:
                prompts = await client.list_prompts()
                got = await client.get_prompt("order_summary", {"customer": "Grace", "since": "March"})
                record = await client.read_resource("orders://order/2")
                await client.call_tool("orders_all", {})
        return {
            "prompts": [prompt.name for prompt in prompts.prompts],
            "arguments": [(a.name, a.required) for a in prompts.prompts[1].arguments],
            "text": got.messages[0].content.text,
            "record": json.loads(record.contents[0].text),
            "logs": logs,
        }

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, scenario()).result(timeout=60)


def test_prompt_record_template_and_log_level_set_in_the_admin_reach_a_client(server, new_page):
    # given: alice's orders, read whole by one tool and by key by another, both bound to her instance
    made = run_python(
        server["env"],
        "from django.contrib.auth.models import User\n"
        "from tools_app import services\n"
        "alice = User.objects.get(username='alice')\n"
        f"table = services.table_create(owner=alice, name='orders', data={ORDERS!r})\n"
        "instance = services.instance_create(owner=alice, name='Shop', slug='shop-surface')\n"
        "for name, kind in [('orders_all', 'get_all_data'), ('orders_by_id', 'select')]:\n"
        "    tool = services.tool_create(owner=alice, name=name, type=kind, table=table, description=name)\n"
        "    services.binding_create(mcp_instance=instance, tool=tool)\n"
        "_, key = services.api_key_issue(mcp_instance=instance, label='browser')\n"
        "print(json.dumps({'instance': instance.pk, 'select': tool.pk, 'key': key}))\n",
    )
    ids = json.loads(made)
    page = new_page("alice")
    # when: on the instance's page, a record template for the select binding, the log level and a prompt
    page.goto(f"/admin/tools_app/mcpinstance/{ids['instance']}/change/")
    bound = [page.input_value(f"#id_bindings-{row}-tool") for row in range(2)]
    row = bound.index(str(ids["select"]))
    # (the record template is in the row's drawer, the log level in the folded "Logging" section)
    page.locator(f"#id_bindings-{row}-resource_uri").locator("xpath=ancestor::details[1]/summary").click()
    page.fill(f"#id_bindings-{row}-resource_uri", "orders://order/{id}")
    page.locator("#id_log_level").locator("xpath=ancestor::details[1]/summary").click()
    page.select_option("#id_log_level", "debug")
    page.click("#prompts-group .add-row a")
    page.fill("#id_prompts-0-name", "order_summary")
    page.fill("#id_prompts-0-description", "A summary of one customer's orders.")
    page.fill(
        "#id_prompts-0-arguments",
        json.dumps([{"name": "customer", "required": True}, {"name": "since", "description": "From when"}]),
    )
    page.fill("#id_prompts-0-template", TEMPLATE)
    shot(page, "instance-surface-filled")
    page.click("input[name=_continue]")
    page.wait_for_url(re.compile(r".*/tools_app/mcpinstance/\d+/change/.*"))
    shot(page, "instance-surface-saved")
    # then: saved as typed
    assert "was changed successfully" in page.inner_text("ul.messagelist")
    assert page.input_value("#id_prompts-0-template") == TEMPLATE
    assert page.input_value(f"#id_bindings-{row}-resource_uri") == "orders://order/{id}"
    # and a real client gets all three
    seen = client_session(f"{server['base']}/mcp/shop-surface/", ids["key"])
    assert seen["prompts"] == ["usage_guide", "order_summary"]
    assert seen["arguments"] == [("customer", True), ("since", False)]
    assert seen["text"] == "Summarise the orders of Grace since March, largest first."
    assert seen["record"] == ORDERS[1]
    assert seen["logs"] == [
        ("debug", "calling orders_all"),
        ("debug", "running orders_all"),
        ("debug", "orders_all ran; recording the call"),
        ("info", "orders_all done"),
    ]


def test_a_prompt_with_an_undeclared_placeholder_is_refused_on_the_page(server, new_page):
    made = run_python(
        server["env"],
        "from django.contrib.auth.models import User\n"
        "from tools_app import services\n"
        "alice = User.objects.get(username='alice')\n"
        "print(services.instance_create(owner=alice, name='Drafts', slug='drafts-surface').pk)\n",
    )
    page = new_page("alice")
    page.goto(f"/admin/tools_app/mcpinstance/{made}/change/")
    page.click("#prompts-group .add-row a")
    page.fill("#id_prompts-0-name", "broken")
    page.fill("#id_prompts-0-template", "Hello {{who}}")
    page.click("input[name=_continue]")
    # then: the page comes back naming the placeholder, and nothing was saved
    assert "{{who}}" in page.inner_text("#prompts-group .errorlist")
    shot(page, "instance-surface-refused")
    count = run_python(
        server["env"],
        f"from tools_app.models import Prompt\nprint(Prompt.objects.filter(mcp_instance={made}).count())\n",
    )
    assert count == "0"
