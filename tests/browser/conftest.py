"""Fixtures of the browser tests: `uvicorn toolhub.asgi:application` (the admin and the MCP endpoint in one
app) on a free loopback port, in a subprocess with its own freshly migrated database (a temporary SQLite
file, or a temporary PostgreSQL database when the suite runs on PostgreSQL), once per test module; two
staff users, alice and bob; headless Chromium; logged-in pages."""

import pytest

from tests.browser.support import CHROMIUM, CHROMIUM_ARGS, PASSWORD, require_browser
from tests.live_server import Uvicorn, run_python, server_database


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """uvicorn serving toolhub.asgi:application on a fresh database with two staff users, alice and bob."""
    require_browser()
    with server_database("e_browser", tmp_path_factory.mktemp("browser"), secret="browser-secret") as env:
        run_python(
            env,
            "from django.contrib.auth.models import Group, User\n"
            "group = Group.objects.get(name='toolhub users')\n"
            "for name in ('alice', 'bob'):\n"
            f"    user = User.objects.create_user(name, password={PASSWORD!r}, is_staff=True)\n"
            "    user.groups.add(group)\n",
        )
        with Uvicorn(env) as uvicorn:
            yield {"base": uvicorn.base, "env": env}


@pytest.fixture(scope="module")
def browser(server):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def new_page(browser, server):
    """new_page(username, width=1400, height=1000): a logged-in page in a fresh context allowed to read the
    clipboard, with that viewport."""
    contexts = []

    def make(username: str, width: int = 1400, height: int = 1000):
        context = browser.new_context(
            viewport={"width": width, "height": height},
            permissions=["clipboard-read", "clipboard-write"],
            base_url=server["base"],
        )
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(15_000)
        page.goto("/admin/login/")
        page.fill("#id_username", username)
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        page.wait_for_url("**/admin/")
        return page

    yield make
    for context in contexts:
        context.close()
