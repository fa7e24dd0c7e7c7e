"""The instance page in a real browser at 1366 px: 27 bindings fit in at most 2,500 px (one line per binding,
overrides in a drawer); a bound row's tool is not editable; enabled and an override are saved from the row; the
call-budget placeholders are fully readable; beyond 50 bindings the list is paged and filtered."""

import pytest

from tests.browser.support import shot
from tests.live_server import run_python

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

MAX_HEIGHT = 2_500


@pytest.fixture(scope="module")
def instances(server):
    """alice's instance 'shop' with 27 bound tools and 'big' with 60; their ids."""
    out = run_python(
        server["env"],
        "from django.contrib.auth.models import User\n"
        "from tools_app import services\n"
        "alice = User.objects.get(username='alice')\n"
        "table = services.table_create(owner=alice, name='orders', data=[{'id': 1, 'status': 'new'}])\n"
        "tools = [services.tool_create(owner=alice, name=f'orders_query_{n:02d}', type='query_data', table=table,"
        " description=f'Query the orders of region {n} with JMESPath: filters, projections, sorting.')"
        " for n in range(60)]\n"
        "shop = services.instance_create(owner=alice, name='Shop', slug='shop')\n"
        "services.binding_create_many(mcp_instance=shop, tools=tools[:27])\n"
        "big = services.instance_create(owner=alice, name='Big', slug='big')\n"
        "services.binding_create_many(mcp_instance=big, tools=tools)\n"
        "print(shop.pk, big.pk)\n",
    )
    shop, big = (int(part) for part in out.split())
    return {"shop": shop, "big": big}


def _height(page) -> int:
    return page.evaluate("document.documentElement.scrollHeight")


def test_27_bindings_fit_in_2500_px(server, new_page, instances):
    page = new_page("alice", width=1366, height=900)
    page.goto(f"/admin/tools_app/mcpinstance/{instances['shop']}/change/")
    page.wait_for_selector("#bindings-group")
    shot(page, "instance-27-bindings")
    height = _height(page)
    print(f"instance page with 27 bindings at 1366 px: {height} px tall")
    assert height <= MAX_HEIGHT
    rows = page.locator("#bindings-group tr.form-row.has_original")
    assert rows.count() == 27
    # one line per binding: no row taller than 60 px
    assert max(row.bounding_box()["height"] for row in rows.all()) <= 60
    # the bindings table stays inside its box (no clipped last header)
    box = page.locator("#bindings-group fieldset").bounding_box()
    table = page.locator("#bindings-group table").bounding_box()
    assert table["x"] + table["width"] <= box["x"] + box["width"] + 1
    # a bound row shows its tool, with no <select> to rebind it; the empty row to bind a tool has one
    assert rows.first.locator("select").count() == 0
    assert rows.first.locator(".toolhub-binding-name").inner_text() == "orders_query_00"
    assert page.locator("#bindings-empty select[name$='-tool']").count() == 1


def test_budget_placeholders_are_readable(server, new_page, instances):
    page = new_page("alice", width=1366, height=900)
    page.goto(f"/admin/tools_app/mcpinstance/{instances['shop']}/change/")
    for name in ("query_cpu_ms", "query_max_elements", "query_max_bytes"):
        field = page.locator(f"#id_{name}")
        placeholder = field.get_attribute("placeholder")
        assert placeholder.endswith("(server default)")
        room, needed = page.evaluate(
            """(input) => {
                const style = getComputedStyle(input);
                const context = document.createElement("canvas").getContext("2d");
                context.font = style.font;
                const padding = parseFloat(style.paddingLeft) + parseFloat(style.paddingRight);
                return [input.clientWidth - padding, context.measureText(input.placeholder).width];
            }""",
            field.element_handle(),
        )
        assert needed <= room, (name, placeholder, needed, room)
    page.locator("#id_query_max_bytes").scroll_into_view_if_needed()
    shot(page, "instance-budgets")


def test_enabled_and_an_override_are_saved_from_the_row(server, new_page, instances):
    page = new_page("alice", width=1366, height=900)
    page.goto(f"/admin/tools_app/mcpinstance/{instances['shop']}/change/")
    row = page.locator("#bindings-group tr.form-row.has_original").nth(1)
    row.locator("input[name$='-enabled']").uncheck()
    row.locator("details.toolhub-drawer summary").click()
    row.locator("textarea[name$='-description_override']").fill("Orders of region 1, for the agent.")
    shot(page, "instance-drawer-open")
    page.click("input[name=_continue]")
    page.wait_for_selector("ul.messagelist")
    saved = run_python(
        server["env"],
        "from tools_app.models import Binding\n"
        f"b = Binding.objects.get(mcp_instance_id={instances['shop']}, tool__name='orders_query_01')\n"
        "print(b.enabled, '|', b.description_override)\n",
    )
    assert saved.strip() == "False | Orders of region 1, for the agent."
    row = page.locator("#bindings-group tr.form-row.has_original").nth(1)
    assert not row.locator("input[name$='-enabled']").is_checked()
    assert row.locator("details.toolhub-drawer summary").inner_text() == "description"


def test_beyond_50_bindings_the_list_is_paged_and_filtered(server, new_page, instances):
    page = new_page("alice", width=1366, height=900)
    page.goto(f"/admin/tools_app/mcpinstance/{instances['big']}/change/")
    rows = page.locator("#bindings-group tr.form-row.has_original")
    assert rows.count() == 50
    assert page.inner_text("#toolhub-bindings-count") == "1–50 of 60"
    with page.expect_navigation():
        page.click("#toolhub-bindings-bar a[rel=next]")
    assert rows.count() == 10
    assert rows.first.locator(".toolhub-binding-name").inner_text() == "orders_query_50"
    page.fill("#toolhub-bindings-bar input[name=bq]", "query_4")
    page.press("#toolhub-bindings-bar input[name=bq]", "Enter")
    page.wait_for_url("**bq=query_4**")
    assert [row.locator(".toolhub-binding-name").inner_text() for row in rows.all()] == [
        f"orders_query_4{n}" for n in range(10)
    ]
    assert page.inner_text("#toolhub-bindings-count") == "1–10 of 10 matching"
    shot(page, "instance-bindings-filtered")
    # saving a filtered page leaves the other bindings as they were
    page.click("input[name=_continue]")
    page.wait_for_selector("ul.messagelist")
    count = run_python(
        server["env"],
        f"from tools_app.models import Binding\nprint(Binding.objects.filter(mcp_instance_id={instances['big']}, "
        "enabled=True).count())\n",
    )
    assert count.strip() == "60"
