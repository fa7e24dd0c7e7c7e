"""/api/docs/ works with no network (SPEC §6): headless Chromium renders Swagger UI from toolhub's own assets,
served by the module's uvicorn (tests/browser/conftest.py).

Every request that leaves the loopback interface is aborted and recorded; the page must still render
every operation of the schema. A screenshot is saved to artifacts/api-docs.png (gitignored).
"""

from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.browser.support import PAGE_TIMEOUT_MS

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"


def test_swagger_ui_renders_every_operation_offline(server, browser):
    """The docs page loads its scripts and the schema from toolhub and lists the API's operations."""
    # given
    blocked: list[str] = []
    served: list[str] = []

    def only_loopback(route):
        host = urlsplit(route.request.url).hostname or ""
        if host in LOOPBACK or route.request.url.startswith(("data:", "blob:")):
            served.append(route.request.url)
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    ARTIFACTS.mkdir(exist_ok=True)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.set_default_timeout(PAGE_TIMEOUT_MS)
        page.route("**/*", only_loopback)

        # when
        response = page.goto(f"{server['base']}/api/docs/", wait_until="networkidle")
        page.wait_for_selector(".opblock")
        operations = page.locator(".opblock-summary-path").all_inner_texts()
        title = page.locator(".info .title").inner_text()
        page.screenshot(path=str(ARTIFACTS / "api-docs.png"), full_page=True)
    finally:
        context.close()

    # then
    assert response is not None
    assert response.status == 200
    assert blocked == []
    assert any("/static/drf_spectacular_sidecar/swagger-ui-dist/" in url for url in served)
    assert any(url.endswith("/api/schema/") for url in served)
    assert title.startswith("toolhub API")
    paths = {text.replace("\u200b", "").strip() for text in operations}
    assert {
        "/api/tables/",
        "/api/tables/{id}/",
        "/api/tools/{id}/call/",
        "/api/tools/by-table/{table_id}/",
        "/api/mcp-instances/{instance_pk}/keys/",
        "/api/bindings/{id}/",
        "/api/auth/token/",
    } <= paths
    assert len(operations) >= 29
