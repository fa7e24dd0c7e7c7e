"""The table History in a real browser: Playwright drives Debian's Chromium against uvicorn: the
History page of a table shows each write as a readable diff, a version opens, and "Restore this version" asks
for a confirmation, then writes the old document as a new version."""

import json

import pytest

from tests.browser.support import shot
from tests.live_server import run_python

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

STOCK = [{"id": 1, "name": "bolt", "qty": 120}, {"id": 2, "name": "nut", "qty": 3}]


def test_history_shows_diffs_opens_a_version_and_restores_it(server, new_page):
    # given: alice's table, changed twice through the call pipeline (an update and a delete)
    table_id = run_python(
        server["env"],
        "from django.contrib.auth.models import User\n"
        "from tools_app import services\n"
        "from tools_app.execution.pipeline import Caller, run_tool_call, target_of_tool\n"
        "from tools_app.models import Surface\n"
        "alice = User.objects.get(username='alice')\n"
        f"table = services.table_create(owner=alice, name='stock', data={STOCK!r})\n"
        "caller = Caller(surface=Surface.ADMIN, user_id=alice.pk, user=alice)\n"
        "for kind, arguments in [('update', {'elements': [{'id': 2, 'qty': 30}]}), ('delete', {'keys': [1]})]:\n"
        "    tool = services.tool_create(owner=alice, name=f'stock_{kind}', type=kind, table=table, description='d')\n"
        "    assert run_tool_call(caller=caller, target=target_of_tool(tool), name=tool.name, arguments=arguments).ok\n"
        "print(table.pk)\n",
    )
    page = new_page("alice")
    # when: the table's page, then its History
    page.goto(f"/admin/tools_app/table/{table_id}/change/")
    page.click("a.historylink")
    page.wait_for_selector("#toolhub-history")
    shot(page, "table-history")
    # then: newest first, each a readable diff naming who and through what
    rows = page.locator("tr.toolhub-history-entry")
    assert rows.count() == 2
    newest, oldest = rows.nth(0).inner_text(), rows.nth(1).inner_text()
    assert "2 → 3" in newest
    assert "alice" in newest
    assert "tool stock_delete" in newest
    # records are named by key in their collection (the root's under the table's name), not by index
    assert '− removed stock › 1: {"id": 1, "name": "bolt", "qty": 120}' in newest
    assert "~ changed stock › 2 · qty: 3 → 30" in oldest
    # when: open version 1
    page.click("a[href$='/history/1/']")
    page.wait_for_selector("#toolhub-version-document")
    shot(page, "table-version")
    assert json.loads(page.inner_text("#toolhub-version-document")) == STOCK
    # when: restore it, confirming
    page.click("#toolhub-restore-link")
    page.wait_for_selector("#toolhub-restore-confirm")
    shot(page, "table-restore-confirm")
    assert "written as version 4" in page.inner_text("#content-main")
    page.click("#toolhub-restore-confirm")
    page.wait_for_selector("#toolhub-history")
    shot(page, "table-history-restored")
    # then: the message, the restore on top of the history, and the document as it was
    assert "Restored version 1 of stock as version 4." in page.inner_text("ul.messagelist")
    top = page.locator("tr.toolhub-history-entry").nth(0).inner_text()
    assert "3 → 4" in top
    assert "Admin, restore of version 1" in top
    assert '+ added stock › 1: {"id": 1, "name": "bolt", "qty": 120}' in top
    assert "~ changed stock › 2 · qty: 30 → 3" in top
    stored = run_python(
        server["env"],
        f"from tools_app import services\nprint(json.dumps(services.table_data({table_id})))\n",
    )
    assert json.loads(stored) == [4, STOCK]


def test_history_of_a_rows_table_names_records_by_key(server, new_page):
    # given: alice's shop with an array of orders and an object of customers, moved to rows, then written
    table_id = run_python(
        server["env"],
        "from django.contrib.auth.models import User\n"
        "from tools_app import services\n"
        "from tools_app.execution import records\n"
        "from tools_app.execution.pipeline import Caller, run_tool_call, target_of_tool\n"
        "from tools_app.models import Surface\n"
        "alice = User.objects.get(username='alice')\n"
        "data = {'orders': [{'id': 1042, 'status': 'paid'}], 'customers': {'c1': {'name': 'Ann'}}}\n"
        "table = services.table_create(owner=alice, name='shop', data=data)\n"
        "caller = Caller(surface=Surface.ADMIN, user_id=alice.pk, user=alice)\n"
        "tools = {m: services.tool_create(owner=alice, name=f'shop_update{m[1:]}', type='update', table=table,\n"
        "                                 json_path=m, description='d') for m in ('/orders', '/customers')}\n"
        "assert records.table_to_rows(table.pk)\n"
        "for mount, arguments in [('/orders', {'elements': [{'id': 1042, 'status': 'shipped'}]}),\n"
        "                         ('/customers', {'elements': [{'key': 'c1', 'content': {'name': 'Anna'}}]})]:\n"
        "    tool = tools[mount]\n"
        "    assert run_tool_call(caller=caller, target=target_of_tool(tool), name=tool.name, arguments=arguments).ok\n"
        "print(table.pk)\n",
    )
    page = new_page("alice")
    page.goto(f"/admin/tools_app/table/{table_id}/history/")
    page.wait_for_selector("#toolhub-history")
    shot(page, "table-history-rows")
    rows = page.locator("tr.toolhub-history-entry")
    assert rows.count() == 2
    assert '~ changed customers › c1 · name: "Ann" → "Anna"' in rows.nth(0).inner_text()
    assert '~ changed orders › 1042 · status: "paid" → "shipped"' in rows.nth(1).inner_text()


def test_another_user_cannot_see_the_history(server, new_page):
    table_id = run_python(
        server["env"],
        "from django.contrib.auth.models import User\n"
        "from tools_app import services\n"
        "alice = User.objects.get(username='alice')\n"
        "print(services.table_create(owner=alice, name='private', data=[]).pk)\n",
    )
    page = new_page("bob")
    response = page.goto(f"/admin/tools_app/table/{table_id}/history/")
    assert response.status == 404
    response = page.goto(f"/admin/tools_app/table/{table_id}/history/1/restore/")
    assert response.status == 404
