"""The admin's layout in Chromium at 1280x800, 1440x900 and 390x844 (a phone), with long names and many rows.

alice owns a table, 30 tools and an instance whose names are 60 characters long, API keys with long labels
(one with no space to break at), logged calls for every tool and a table too large for the editor. The
tests measure the rendered pages: nothing wider than the window, the JSON editor's width, the call-log
headers, the contrast of the try-it error header, and the confirmations before bulk binding changes.
Screenshots go to artifacts/screenshots/layout-*.png.
"""

import json
import re

import pytest

from tests.browser.support import shot
from tests.live_server import run_python

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

LONG = "warehouse_inventory_records_for_the_northern_distribution_ctr"[:60]
TOOL_COUNT = 30
UNBROKEN_LABEL = "ci-agent-production-eu-west-1-blue-green-deployment-pipeline-runner-0123456789abcdef"
SIZES = {"1280": (1280, 800), "1440": (1440, 900), "390": (390, 844)}

SETUP = f"""
import json, random
from django.contrib.auth.models import User
from tools_app import services
from tools_app.models import Tool
from tools_app import services as mcp
from tools_app.models import CallLog
alice = User.objects.get(username="alice")
table = services.table_create(owner=alice, name={LONG!r}, description="Stock per item. " * 30,
    data=[{{"id": i, "name": f"item {{i}}", "qty": i}} for i in range(300)])
instance = mcp.instance_create(owner=alice, name="Northern distribution center inventory (production)",
    slug="northern")
tools = []
for i in range({TOOL_COUNT}):
    name = f"query_{{i:02d}}_" + {LONG!r}
    tools.append(services.tool_create(owner=alice, name=name[:60], type="query_data" if i % 2 else "get_all_data",
        table=table, description="Answers questions about the northern stock. " * 6))
    mcp.binding_create(mcp_instance=instance, tool=tools[-1])
for label in ("a rather long label for the key used by the nightly CI agent", {UNBROKEN_LABEL!r}, "laptop"):
    mcp.api_key_issue(mcp_instance=instance, label=label)
rng = random.Random(7)
CallLog.objects.bulk_create(
    CallLog(mcp_instance=instance, tool=tool, tool_name=tool.name, owner=alice, surface="mcp",
            status="error" if j == 0 else "ok", error_code="INVALID_QUERY" if j == 0 else "",
            duration_ms=rng.uniform(0.5, 900.0))
    for tool in tools for j in range(4))
# A document too large for the editor (a table stored as rows shows its records view instead).
from django.test import override_settings
with override_settings(TOOLHUB_NEW_TABLE_STORAGE="document"):
    big = services.table_create(owner=alice, name="big_events",
        data=[{{"id": i, "event": "x" * 230}} for i in range(5000)])
print(json.dumps({{"table": table.pk, "big": big.pk, "instance": instance.pk, "tool": tools[1].pk}}))
"""

BINDINGS = """
import json
from tools_app.models import Binding
rows = Binding.objects.filter(mcp_instance__slug="northern")
print(json.dumps({"total": rows.count(), "enabled": rows.filter(enabled=True).count()}))
"""


@pytest.fixture(scope="module")
def ids(server):
    return json.loads(run_python(server["env"], SETUP))


def bindings(server) -> dict:
    return json.loads(run_python(server["env"], BINDINGS))


def overflow(page) -> dict:
    """How far the page is wider than the window, and the first elements sticking out of it that are not
    inside a box scrolling on its own (the change list, a <pre>): those make the page scroll sideways."""
    return page.evaluate(
        """() => {
          const width = innerWidth, out = [];
          const scrolls = (el) => {
            for (let up = el.parentElement; up; up = up.parentElement) {
              if (getComputedStyle(up).overflowX !== 'visible') { return true; }
            }
            return false;
          };
          for (const el of document.querySelectorAll('body *')) {
            const box = el.getBoundingClientRect();
            if (box.width && box.right > width + 1 && !scrolls(el)) {
              out.push(`${el.tagName.toLowerCase()}#${el.id}.${[...el.classList].join('.')} right=${box.right|0}`);
            }
          }
          return {excess: document.scrollingElement.scrollWidth - width, sticking_out: out.slice(0, 5)};
        }"""
    )


def main_pages(ids: dict) -> dict[str, str]:
    return {
        "index": "/admin/",
        "tables": "/admin/tools_app/table/",
        "table": f"/admin/tools_app/table/{ids['table']}/change/",
        "big-table": f"/admin/tools_app/table/{ids['big']}/change/",
        "tools": "/admin/tools_app/tool/",
        "tool": f"/admin/tools_app/tool/{ids['tool']}/change/",
        "try-it": f"/admin/tools_app/tool/{ids['tool']}/try/",
        "instances": "/admin/tools_app/mcpinstance/",
        "instance": f"/admin/tools_app/mcpinstance/{ids['instance']}/change/",
        "bindings": "/admin/tools_app/binding/",
        "keys": "/admin/tools_app/apikey/",
        "calls": "/admin/tools_app/calllog/",
    }


def test_main_pages_are_no_wider_than_the_window(server, new_page, ids):
    """Every main page, try-it with an error shown included, fits the window at each of SIZES: nothing to
    scroll sideways. Each page loads once and is measured at each size in turn: the admin follows the window's
    width through CSS media queries, which apply again on every resize (no toolhub script reads the width)."""
    page = new_page("alice", *SIZES["1280"])
    for name, url in main_pages(ids).items():
        page.goto(url)
        if name == "try-it":
            page.fill("#id_query", "[?")
            page.click("#toolhub-run")
            page.wait_for_selector("#toolhub-error-code")
        for size, (width, height) in SIZES.items():
            page.set_viewport_size({"width": width, "height": height})
            shot(page, f"layout-{size}-{name}")
            assert overflow(page) == {"excess": 0, "sticking_out": []}, (size, name)


def test_change_lists_show_every_column_without_scrolling(server, new_page, ids):
    """Beside the navigation and the filters, the tool, binding and call lists and the per-tool call
    statistics fit their box at 1280 and 1440 px: long names wrap instead of pushing columns out of sight."""
    page = new_page("alice", *SIZES["1280"])
    # How far each scrolling box (the list, the statistics) is wider than what it shows.
    boxes = {"/admin/tools_app/tool/": 1, "/admin/tools_app/binding/": 1, "/admin/tools_app/calllog/": 2}
    for url, count in boxes.items():
        page.goto(url)
        for size in ("1280", "1440"):
            width, height = SIZES[size]
            page.set_viewport_size({"width": width, "height": height})
            hidden = page.evaluate(
                "[...document.querySelectorAll('#changelist-form .results, #toolhub-call-stats .toolhub-scroll')]"
                ".map(box => box.scrollWidth - box.clientWidth)"
            )
            assert hidden == [0] * count, (size, url)
    # Break points after each "_" (admin.js), the name itself unchanged.
    page.goto("/admin/tools_app/tool/?q=query_07")
    name = page.locator("#result_list tbody th a").first
    assert name.inner_text() == f"query_07_{LONG}"[:60]
    assert name.evaluate("a => a.querySelectorAll('wbr').length") == f"query_07_{LONG}"[:60].count("_")


def test_json_editor_keeps_its_width_when_it_shows_an_error(server, new_page, ids):
    """A live JSON error appears under the editor; the editor stays as wide as before."""
    page = new_page("alice", 1280, 800)
    page.goto(f"/admin/tools_app/table/{ids['table']}/change/")
    editor = page.locator("#id_data")
    before = editor.bounding_box()
    page.fill("#id_data", '[{"id": 1,, "name": "bolt"}]')
    status = page.locator(".field-data .toolhub-json-status.toolhub-invalid")
    status.wait_for()
    assert "(the server reports the line and column on save)" in status.inner_text()
    after = editor.bounding_box()
    assert (after["x"], after["width"]) == (before["x"], before["width"])
    assert status.bounding_box()["y"] >= after["y"] + after["height"]
    shot(page, "layout-1280-json-error")


def test_call_stats_headers_are_spaced_and_numbers_line_up(server, new_page, ids):
    """The per-tool statistics in the call log have padded headers; numeric columns align right."""
    page = new_page("alice", 1280, 800)
    page.goto("/admin/tools_app/calllog/")
    headers = page.evaluate(
        "[...document.querySelectorAll('#toolhub-call-stats thead th')].map(th => {"
        " const style = getComputedStyle(th);"
        " return [th.textContent, style.paddingLeft, style.paddingRight, style.textAlign]; })"
    )
    assert headers == [
        ["tool", "8px", "8px", "left"],
        ["calls", "8px", "8px", "right"],
        ["errors", "8px", "8px", "right"],
        ["error rate", "8px", "8px", "right"],
        ["p50", "8px", "8px", "right"],
        ["p95", "8px", "8px", "right"],
        ["last call", "8px", "8px", "left"],
    ]
    row = page.locator("#toolhub-call-stats tbody tr", has_text=f"query_00_{LONG}"[:60])
    assert row.inner_text().split("\t")[:4] == [f"query_00_{LONG}"[:60], "4", "1", "25.0 %"]
    aligned = row.evaluate("tr => [...tr.cells].map(td => getComputedStyle(td).textAlign)")
    assert aligned == ["left", "right", "right", "right", "right", "right", "left"]


def contrast(foreground: str, background: str) -> float:
    """WCAG contrast ratio of two computed `rgb(r, g, b)` colours."""

    def luminance(colour: str) -> float:
        channels = [int(c) / 255 for c in re.findall(r"\d+", colour)[:3]]
        linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    light, dark = sorted((luminance(foreground), luminance(background)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def test_try_it_error_header_is_readable(server, new_page, ids):
    """On the red error header the duration is as readable as the word "Error" (contrast at least 4.5:1)."""
    page = new_page("alice", 1280, 800)
    page.goto(f"/admin/tools_app/tool/{ids['tool']}/try/")
    page.fill("#id_query", "[?")
    page.click("#toolhub-run")
    header = page.locator("#toolhub-outcome h2")
    assert re.fullmatch(r"Error \(\d+(\.\d+)? ms\)", header.inner_text())
    colours = page.evaluate(
        "[getComputedStyle(document.querySelector('#toolhub-outcome h2 .toolhub-muted')).color,"
        " getComputedStyle(document.querySelector('#toolhub-outcome h2')).backgroundColor]"
    )
    assert contrast(*colours) >= 4.5, colours
    shot(page, "layout-1280-try-it-error")


def test_revoke_buttons_are_on_screen_on_a_phone(server, new_page, ids):
    """At 390px the API-key table shows one block per key, its Revoke button inside the window."""
    page = new_page("alice", 390, 844)
    page.goto(f"/admin/tools_app/mcpinstance/{ids['instance']}/change/")
    buttons = page.locator("#toolhub-keys button.toolhub-danger")
    assert buttons.count() == 3
    for index in range(3):
        box = buttons.nth(index).bounding_box()
        assert 0 <= box["x"]
        assert box["x"] + box["width"] <= 390
    assert UNBROKEN_LABEL in page.inner_text("#toolhub-keys")
    shot(page, "layout-390-keys")


def test_upload_hint_points_up_to_the_file_field(server, new_page, ids):
    """A table too large for the editor says the upload field is above its summary, where it is."""
    page = new_page("alice", 1280, 800)
    page.goto(f"/admin/tools_app/table/{ids['big']}/change/")
    note = page.locator(".toolhub-large-note")
    assert "upload it with “Replace data from a file” above;" in note.inner_text()
    assert page.locator("#id_data_file").bounding_box()["y"] < note.bounding_box()["y"]


def choose_rows_and_action(page, count: int, action: str) -> None:
    checkboxes = page.locator("#result_list input.action-select")
    for index in range(count):
        checkboxes.nth(index).check()
    page.select_option("#changelist-form select[name=action]", action)


def test_disable_and_unbind_selected_ask_first(server, new_page, ids):
    """The bindings list asks before "Disable selected" and "Unbind selected"; cancelling changes nothing."""
    page = new_page("alice", 1280, 800)
    asked: list[str] = []

    def answer(accept: bool):
        def handler(dialog):
            asked.append(dialog.message)
            if accept:
                dialog.accept()
            else:
                dialog.dismiss()

        return handler

    before = bindings(server)
    assert before == {"total": TOOL_COUNT, "enabled": TOOL_COUNT}
    page.goto("/admin/tools_app/binding/?mcp_instance__id__exact=" + str(ids["instance"]))
    page.once("dialog", answer(False))
    choose_rows_and_action(page, 2, "disable_bindings")
    page.click("#changelist-form button[name=index]")
    assert asked == [
        "Disable the selected bindings (2)? MCP clients stop seeing those tools until they are enabled again."
    ]
    assert bindings(server) == before

    page.goto("/admin/tools_app/binding/?mcp_instance__id__exact=" + str(ids["instance"]))
    page.once("dialog", answer(False))
    choose_rows_and_action(page, 3, "unbind")
    page.click("#changelist-form button[name=index]")
    assert asked[1] == (
        "Unbind the selected tools (3)? Their bindings, with any name or description override, are removed;"
        " the tools themselves stay."
    )
    assert bindings(server) == before

    page.once("dialog", answer(True))
    page.click("#changelist-form button[name=index]")
    # The bindings are in use (bound and enabled on an enabled instance): the change guard's page asks again.
    page.wait_for_selector("input[name=confirm_in_use]")
    assert bindings(server) == before
    page.check("input[name=confirm_in_use]")
    page.click("input[type=submit][value=Unbind]")
    page.wait_for_selector(".messagelist .success")
    assert "Unbound 3 tool(s)" in page.inner_text(".messagelist")
    assert bindings(server) == {"total": TOOL_COUNT - 3, "enabled": TOOL_COUNT - 3}
    shot(page, "layout-1280-unbound")


def test_disable_all_on_the_instance_page_asks_first(server, new_page, ids):
    """ "Disable all" names the instance and does nothing when cancelled; accepted, it disables every binding."""
    page = new_page("alice", 1280, 800)
    asked: list[str] = []
    page.goto(f"/admin/tools_app/mcpinstance/{ids['instance']}/change/")
    before = bindings(server)
    assert before["enabled"] == before["total"] > 0

    def dismiss(dialog):
        asked.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", dismiss)
    page.click("#toolhub-disable-all")
    assert asked == [
        "Disable all bindings of Northern distribution center inventory (production)? Its MCP clients see "
        "none of its tools until they are enabled again."
    ]
    assert bindings(server) == before

    page.once("dialog", lambda dialog: dialog.accept())
    with page.expect_navigation():
        page.click("#toolhub-disable-all")
    assert bindings(server) == {"total": before["total"], "enabled": 0}
