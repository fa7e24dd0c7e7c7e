"""A call's detail page in a real browser (docs/call-log.md): Playwright drives Debian's Chromium against
uvicorn. A tools/call made over MCP opens from the call log as its client saw it, redacted, and "Open in
try-it" fills the try-it form with its arguments."""

import json
import urllib.request

import pytest

from tests.browser.support import shot
from tests.live_server import run_python

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

SSN = "123-45-6789"
PEOPLE = [{"id": 1, "name": "ada", "ssn": SSN}, {"id": 2, "name": "alan", "ssn": "987-65-4321"}]


def mcp_call(base: str, slug: str, key: str, name: str, arguments: dict) -> dict:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    request = urllib.request.Request(
        f"{base}/mcp/{slug}/",
        data=json.dumps(body).encode(),
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-11-25",
            "Authorization": f"Bearer {key}",
        },
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_a_call_opens_as_its_client_saw_it_and_reopens_in_try_it(server, new_page):
    # given: alice's people table with `ssn` redacted, a query tool bound to an instance, and a key
    seeded = json.loads(
        run_python(
            server["env"],
            "from django.contrib.auth.models import User\n"
            "from tools_app import services\n"
            "alice = User.objects.get(username='alice')\n"
            f"table = services.table_create(owner=alice, name='people', data={PEOPLE!r}, redact_fields=['ssn'])\n"
            "tool = services.tool_create(owner=alice, name='people_query', type='query_data', table=table,"
            " description='Query people.')\n"
            "instance = services.instance_create(owner=alice, name='People', slug='people')\n"
            "services.binding_create(mcp_instance=instance, tool=tool)\n"
            "key = services.api_key_issue(mcp_instance=instance, label='laptop')[1]\n"
            "print(json.dumps({'key': key, 'tool': tool.pk}))\n",
        )
    )
    # when: an MCP client calls it, naming the SSN in its query
    reply = mcp_call(server["base"], "people", seeded["key"], "people_query", {"query": f"[?ssn=='{SSN}'].name"})
    assert reply["result"]["isError"] is False
    assert json.loads(reply["result"]["content"][0]["text"]) == ["ada"]
    page = new_page("alice", width=1366, height=900)
    page.goto("/admin/tools_app/calllog/")
    page.click("#result_list tbody tr a")
    page.wait_for_selector("#toolhub-call-arguments")
    shot(page, "call-detail")
    # then: the call as its client saw it, with no SSN anywhere on the page
    assert SSN not in page.content()
    assert json.loads(page.inner_text("#toolhub-call-arguments")) == {"query": "[?ssn=='[redacted]'].name"}
    assert json.loads(page.inner_text("#toolhub-call-result")) == ["ada"]
    facts = page.inner_text("#toolhub-call-facts")
    for fact in ("MCP", "alice", "laptop", "/mcp/people/", "people_query"):
        assert fact in facts
    assert page.is_visible("#toolhub-call-redacted")
    # when: open it in try-it
    page.click("#toolhub-open-try-it")
    page.wait_for_selector("#toolhub-try-form")
    shot(page, "call-detail-try-it")
    # then: the raw arguments are filled in, as recorded
    assert json.loads(page.input_value("textarea[name=__raw_arguments]")) == {"query": "[?ssn=='[redacted]'].name"}


def test_another_user_cannot_open_the_call(server, new_page):
    # given: a call of alice's tool through the API surface
    call_id = run_python(
        server["env"],
        "from django.contrib.auth.models import User\n"
        "from tools_app import services\n"
        "from tools_app.execution.pipeline import Caller, run_tool_call, target_of_tool\n"
        "from tools_app.models import CallLog, Surface\n"
        "alice = User.objects.get(username='alice')\n"
        "table = services.table_create(owner=alice, name='private', data=[{'id': 1}])\n"
        "tool = services.tool_create(owner=alice, name='private_all', type='get_all_data', table=table,"
        " description='All.')\n"
        "caller = Caller(surface=Surface.API, user_id=alice.pk, user=alice)\n"
        "assert run_tool_call(caller=caller, target=target_of_tool(tool), name=tool.name, arguments={}).ok\n"
        "print(CallLog.objects.latest('id').pk)\n",
    )
    # when / then
    page = new_page("bob")
    response = page.goto(f"/admin/tools_app/calllog/{call_id}/change/")
    assert response.status == 404
