"""The records view of a table in a real browser: from the table's page to a page of 50 records, the next page,
a key search, a JMESPath filter, one record opened, edited and saved (recorded in the history) and deleted
with a confirmation; on a table stored as rows, the same."""

import json

import pytest

from tests.browser.support import shot
from tests.live_server import run_python

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

SETUP = (
    "from django.contrib.auth.models import User\n"
    "from tools_app import services\n"
    "from tools_app.execution import records\n"
    "alice = User.objects.get(username='alice')\n"
    "items = [{'id': n, 'status': 'paid' if n % 3 == 0 else 'new', 'total': n} for n in range(1, 121)]\n"
    "table = services.table_create(owner=alice, name=NAME, data={'orders': items})\n"
    "services.tool_create(owner=alice, name=NAME + '_query', type='query_data', table=table, json_path='/orders',"
    " description='d')\n"
    "if ROWS:\n"
    "    assert records.table_to_rows(table.pk)\n"
    "print(table.pk)\n"
)


@pytest.mark.parametrize("storage", ["document", "rows"])
def test_browse_search_edit_and_delete_records(server, new_page, storage):
    # given: alice's table of 120 orders with a query tool at /orders, a rows table or a document
    name = f"orders_{storage}"
    table_id = run_python(server["env"], f"NAME = {name!r}\nROWS = {storage == 'rows'}\n" + SETUP)
    page = new_page("alice", width=1366, height=900)
    # when: the table's page, within the editor's size on both storages (its JSON editor shown), and its records link
    page.goto(f"/admin/tools_app/table/{table_id}/change/")
    assert page.locator("textarea[name=data]").count() == 1
    page.click("#toolhub-records-panel-link")
    page.wait_for_selector("#toolhub-records")
    shot(page, f"records-{storage}-first-page")
    # then: 50 records of 120, the first one 1
    assert page.locator("#toolhub-records tbody tr").count() == 50
    assert page.inner_text("#toolhub-records-count") == "Records 1–50 of 120."
    assert page.locator("#toolhub-records tbody tr").first.locator("td").first.inner_text() == "1"
    # when: the third page (each link and search is a navigation: the page is read once it has loaded)
    with page.expect_navigation():
        page.click("a[rel=next]")
    with page.expect_navigation():
        page.click("a[rel=next]")
    assert page.inner_text("#toolhub-records-count") == "Records 101–120 of 120."
    assert page.locator("a[rel=next]").count() == 0
    # when: a key, then a filter
    page.fill("input[name=key]", "42")
    with page.expect_navigation():
        page.click("#toolhub-records-search button")
    assert [cell.inner_text() for cell in page.locator("#toolhub-records tbody tr td:first-child").all()] == ["42"]
    page.fill("input[name=key]", "")
    page.fill("input[name=filter]", "status == 'paid' && total > `100`")
    with page.expect_navigation():
        page.click("#toolhub-records-search button")
    keys = [cell.inner_text() for cell in page.locator("#toolhub-records tbody tr td:first-child").all()]
    assert keys == ["102", "105", "108", "111", "114", "117", "120"]
    shot(page, f"records-{storage}-filtered")
    # when: a bad filter
    page.fill("input[name=filter]", "status ==")
    with page.expect_navigation():
        page.click("#toolhub-records-search button")
    assert page.inner_text("#toolhub-records-error").startswith("INVALID_QUERY:")
    # when: record 105 opened, edited and saved
    page.goto(f"/admin/tools_app/table/{table_id}/records/?collection=/orders&key=105")
    page.click("#toolhub-records tbody a")
    page.wait_for_selector("#toolhub-record-form")
    assert json.loads(page.input_value("#id_value")) == {"id": 105, "status": "paid", "total": 105}
    page.fill("#id_value", '{"id": 105, "status": "refunded", "total": 105, "note": "by phone"}')
    page.click("input[name=save]")
    page.wait_for_selector("ul.messagelist")
    shot(page, f"records-{storage}-saved")
    assert "Saved the record '105'; the table is at version 2." in page.inner_text("ul.messagelist")
    assert json.loads(page.input_value("#id_value")) == {
        "id": 105,
        "status": "refunded",
        "total": 105,
        "note": "by phone",
    }
    # then: the history names the write
    page.goto(f"/admin/tools_app/table/{table_id}/history/")
    newest = page.locator("tr.toolhub-history-entry").first.inner_text()
    assert "1 → 2" in newest
    assert "alice" in newest
    assert "Admin" in newest
    # when: deleted, the confirmation dismissed first (nothing written), then accepted
    page.goto(f"/admin/tools_app/table/{table_id}/records/record/?collection=/orders&key=105")
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.click("input[name=delete]")
    assert page.input_value("#id_value")  # still on the record's page
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("input[name=delete]")
    page.wait_for_selector("#toolhub-records")
    assert "Deleted the record '105'; the table is at version 3." in page.inner_text("ul.messagelist")
    assert page.inner_text("#toolhub-records-count") == "Records 1–50 of 119."


def test_a_stale_edit_is_refused_and_keeps_the_text(server, new_page):
    # given: the record page open, then the table written by someone else
    table_id = run_python(server["env"], "NAME = 'stale_orders'\nROWS = True\n" + SETUP)
    page = new_page("alice")
    page.goto(f"/admin/tools_app/table/{table_id}/records/record/?collection=/orders&key=7")
    run_python(
        server["env"],
        "from tools_app.execution import record_pages\n"
        f"record_pages.record_update(table_id={table_id}, mount='/orders', key='8', value={{'id': 8}},"
        " expected_version=1)\n",
    )
    # when
    page.fill("#id_value", '{"id": 7, "status": "mine"}')
    page.click("input[name=save]")
    # then
    assert page.inner_text("#toolhub-record-error").startswith("VERSION_CONFLICT: The table is at version 2")
    assert page.input_value("#id_value") == '{"id": 7, "status": "mine"}'
    shot(page, "records-stale-edit")
