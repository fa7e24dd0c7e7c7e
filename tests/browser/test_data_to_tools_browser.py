"""From a CSV to a working tool in the admin, in a real browser: upload the file on the table
page, run "Generate tools" on the table, try the generated query tool."""

import json
import re

import pytest

from tests.browser.support import shot

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

STATUSES = ["paid", "new", "shipped"]
ROWS = 200
CSV = "id,customer,status,total\n" + "".join(
    f"{n},customer {n},{STATUSES[n % 3]},{n * 1.5}\n" for n in range(1, ROWS + 1)
)


def test_upload_a_csv_generate_tools_and_try_one(server, new_page):
    page = new_page("bob")

    # Upload the CSV as a new table.
    page.goto("/admin/tools_app/table/add/")
    page.fill("#id_name", "sales")
    page.set_input_files("#id_data_file", files=[{"name": "sales.csv", "mimeType": "text/csv", "buffer": CSV.encode()}])
    page.click("input[name=_continue]")
    page.wait_for_url(re.compile(r".*/tools_app/table/\d+/change/.*"))
    assert f'"item_count": {ROWS}' in page.inner_text("#toolhub-shape")
    table_id = re.search(r"/table/(\d+)/change/", page.url).group(1)
    shot(page, "data-01-table-from-csv")

    # Generate its tools with the changelist action (a form first, then the tools).
    page.goto("/admin/tools_app/table/")
    page.check(f"input.action-select[value='{table_id}']")
    page.select_option("select[name=action]", "generate_tools_action")
    page.click("button[name=index]")
    assert "Bind to MCP instance" in page.inner_text("#toolhub-action-form")
    shot(page, "data-02-generate-form")
    page.click("#toolhub-action-form input[type=submit]")
    page.wait_for_url(re.compile(r".*/tools_app/table/$"))
    message = page.inner_text("ul.messagelist")  # as written: the table's name keeps its case
    assert "sales: created 5 tools (sales_schema, sales_all, sales_query, sales_preview, sales_select)." in message
    shot(page, "data-03-generated")

    # The query tool's description carries the verified examples; try one of them.
    page.goto(f"/admin/tools_app/table/{table_id}/change/")
    page.goto(page.get_by_role("link", name="sales_query", exact=True).first.get_attribute("href"))
    description = page.input_value("#id_description")
    assert "Examples run on this data: `length(@)` -> 200; `[?status=='new'] | length(@)` -> 67" in description
    page.goto(page.url.replace("/change/", "/try/"))
    page.fill("#id_query", "[?status=='new'] | length(@)")
    page.click("#toolhub-run")
    assert json.loads(page.inner_text("#toolhub-result")) == 67
    shot(page, "data-04-try-generated")
