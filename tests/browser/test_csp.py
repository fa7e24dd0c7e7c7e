"""The Content-Security-Policy in Chromium: every admin page, try-it, the API docs and the
browsable API work under it, and the browser reports no violation.

Violations are caught two ways: a `securitypolicyviolation` listener installed before any page script
(Playwright's init scripts are not subject to the page's CSP), and Chromium's console messages
("Refused to ..."). The server is the one of tests/browser/conftest.py (uvicorn, its own database).
"""

import json
import re

import pytest

from tests.browser.support import shot
from tests.live_server import run_python

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

SETUP = """
import json
from django.contrib.auth.models import User
from tools_app import services
alice = User.objects.get(username="alice")
table = services.table_create(owner=alice, name="csp_orders", description="Orders.",
    data=[{"id": 1, "status": "paid"}, {"id": 2, "status": "shipped"}])
tool = services.tool_create(owner=alice, name="csp_query", type="query_data", table=table,
    description="Query orders. ![pixel](http://attacker.invalid/p.png) <img src=x onerror=alert(1)>")
guide = services.tool_create(owner=alice, name="csp_guide", type="get_tool_usage_guide",
    description="The usage guide.")
instance = services.instance_create(owner=alice, name="CSP shop", slug="csp-shop")
for bound in (tool, guide):
    services.binding_create(mcp_instance=instance, tool=bound)
services.api_key_issue(mcp_instance=instance, label="csp key")
print(json.dumps({"table": table.pk, "tool": tool.pk, "instance": instance.pk}))
"""

LISTEN = """
window.__cspViolations = [];
document.addEventListener('securitypolicyviolation', (e) => {
  const where = `${e.sourceFile}:${e.lineNumber}`;
  window.__cspViolations.push(`${e.violatedDirective} blocked ${e.blockedURI || 'inline'} at ${where}`);
});
"""


@pytest.fixture(scope="module")
def csp_objects(server):
    return json.loads(run_python(server["env"], SETUP))


@pytest.fixture
def watched_page(new_page):
    """A logged-in page of alice that records CSP violations and console errors of every page it loads."""

    def make():
        page = new_page("alice")
        page.context.add_init_script(LISTEN)
        console: list[str] = []
        page.on("console", lambda msg: console.append(msg.text) if msg.type in ("error", "warning") else None)
        page.on("pageerror", lambda error: console.append(f"page error: {error}"))
        return page, console

    return make


def violations(page, console: list[str]) -> list[str]:
    found = list(page.evaluate("window.__cspViolations || []"))
    found += [text for text in console if "Content Security Policy" in text or "Refused to" in text]
    return found


def admin_pages(csp_objects: dict) -> dict[str, str]:
    return {
        "index": "/admin/",
        "tables": "/admin/tools_app/table/",
        "table": f"/admin/tools_app/table/{csp_objects['table']}/change/",
        "table-add": "/admin/tools_app/table/add/",
        "tools": "/admin/tools_app/tool/",
        "tool": f"/admin/tools_app/tool/{csp_objects['tool']}/change/",
        "tool-add": "/admin/tools_app/tool/add/",
        "instances": "/admin/tools_app/mcpinstance/",
        "instance": f"/admin/tools_app/mcpinstance/{csp_objects['instance']}/change/",
        "bindings": "/admin/tools_app/binding/",
        "keys": "/admin/tools_app/apikey/",
        "calls": "/admin/tools_app/calllog/",
        "activity": "/admin/activity/",
        "doc": "/admin/docs/activity.md",
        "password": "/admin/password_change/",
    }


def test_every_page_sends_the_policy(server, csp_objects):
    """The admin, the API docs and the API answer with the policy: scripts from toolhub only, no framing."""
    import urllib.request

    # when
    with urllib.request.urlopen(f"{server['base']}/api/docs/") as response:
        policy = response.headers["Content-Security-Policy"]
        headers = {name.lower(): value for name, value in response.headers.items()}
    # then
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["script-src"] == "'self'"
    assert re.fullmatch(r"'self' 'nonce-[A-Za-z0-9+/=]{24}'", directives["style-src"])
    assert (directives["default-src"], directives["img-src"], directives["object-src"]) == (
        "'self'",
        "'self' data:",
        "'none'",
    )
    assert (directives["frame-ancestors"], directives["form-action"], directives["base-uri"]) == (
        "'none'",
        "'self'",
        "'self'",
    )
    assert (headers["x-frame-options"], headers["referrer-policy"]) == ("DENY", "same-origin")
    assert headers["x-content-type-options"] == "nosniff"


def test_admin_pages_work_without_violations(server, watched_page, csp_objects):
    """Every admin page loads its scripts and styles under the CSP; the instance page renders the guide
    with the description's remote image dropped and its raw HTML shown as text."""
    page, console = watched_page()
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    for name, url in admin_pages(csp_objects).items():
        response = page.goto(url)
        assert response.status == 200, (name, response.status)
        page.wait_for_load_state("load")
        assert violations(page, console) == [], name
        shot(page, f"csp-{name}")
    # The rendered guide: text of the tag, no <img>, nothing fetched from the attacker.
    page.goto(admin_pages(csp_objects)["instance"].replace("/change/", "/guide/"))
    guide = page.locator("#toolhub-guide")
    assert guide.locator("img").count() == 0
    assert "<img src=x onerror=alert(1)>" in guide.inner_text()
    assert not [url for url in requested if "attacker.invalid" in url]


def test_try_it_runs_the_tool_under_the_policy(server, watched_page, csp_objects):
    """try-it fills the example, runs the tool and shows the result with the CSP on."""
    page, console = watched_page()
    page.goto(f"/admin/tools_app/tool/{csp_objects['tool']}/try/")
    page.fill("#id_query", "[?status=='shipped'].id")
    page.click("#toolhub-run")
    assert json.loads(page.inner_text("#toolhub-result")) == [2]
    assert violations(page, console) == []
    shot(page, "csp-try-it")


def test_api_docs_render_every_operation_under_the_policy(server, watched_page):
    """Swagger UI (drf-spectacular's split view, the sidecar's files) renders the schema with no violation."""
    page, console = watched_page()
    page.goto("/api/docs/", wait_until="networkidle")
    page.wait_for_selector(".opblock")
    assert page.locator(".opblock-summary-path").count() >= 29
    page.locator(".opblock-summary").first.click()  # expand an operation: more of Swagger UI's rendering
    page.wait_for_selector(".opblock-body")
    assert violations(page, console) == []
    shot(page, "csp-api-docs")


def test_browsable_api_works_under_the_policy(server, watched_page, csp_objects):
    """DRF's browsable API (session login) lists the tools and its forms' scripts run, with no violation."""
    page, console = watched_page()
    page.goto("/api/tools/")
    assert "csp_query" in page.inner_text(".response-info")
    page.goto(f"/api/tables/{csp_objects['table']}/")
    # DRF's scripts ran: the raw-data form's tabs and the OPTIONS button are wired by its JavaScript.
    assert page.evaluate("typeof window.jQuery === 'function'")
    assert violations(page, console) == []
    shot(page, "csp-browsable-api")
