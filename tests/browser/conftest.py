"""Fixtures of the browser tests: `uvicorn toolhub.asgi:application` (the admin and the MCP endpoint in one
app) on a free loopback port, in a subprocess with its own freshly migrated database (a temporary SQLite
file, or a temporary PostgreSQL database when the suite runs on PostgreSQL), once per test module; two
staff users, alice and bob; headless Chromium, one per worker process for the whole package; logged-in pages.

What each costs, and why it is shared as it is: a module's server keeps its tests apart from other modules'
data (several modules assert on everything alice or bob owns, or on the server's own counters). Chromium
holds no state between browser contexts, so one per worker serves every module. A login checks a password
(about half a second of CPU, toolhub/passwords.py), so each user logs in once per server and later pages
start from that session's cookies. The users' password is hashed once per worker process
(support.password_hash), not by the seeding script of every server."""

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.browser.support import (
    CHROMIUM,
    CHROMIUM_ARGS,
    PAGE_TIMEOUT_MS,
    PASSWORD,
    password_hash,
    require_browser,
)
from tests.live_server import Uvicorn, run_python, server_database


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """uvicorn serving toolhub.asgi:application on a fresh database with two staff users, alice and bob.
    `sessions`: each user's logged-in browser state on this server (new_page fills it)."""
    require_browser()
    with server_database("e_browser", tmp_path_factory.mktemp("browser"), secret="browser-secret") as env:
        # The users are written while uvicorn starts: two processes setting Django up, side by side.
        with ThreadPoolExecutor(max_workers=1) as pool:
            users = pool.submit(
                run_python,
                env,
                "from django.contrib.auth.models import Group, User\n"
                "group = Group.objects.get(name='toolhub users')\n"
                "for name in ('alice', 'bob'):\n"
                f"    user = User.objects.create(username=name, password={password_hash()!r}, is_staff=True)\n"
                "    user.groups.add(group)\n",
            )
            with Uvicorn(env) as uvicorn:
                users.result()
                yield {"base": uvicorn.base, "env": env, "sessions": {}}


# Package scope: Playwright's synchronous API keeps an event loop in this thread while it runs, and code that
# starts its own loop (asyncio.run, async_to_sync) refuses to run beside it; the tests after this package on
# the same worker must find it stopped.
@pytest.fixture(scope="package")
def browser():
    require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def new_page(browser, server):
    """new_page(username, width=1400, height=1000): a page of `username` logged in, on the admin's index, in a
    fresh context allowed to read the clipboard, with that viewport. The user's first page on the server logs
    in through the login form; later ones start from the cookies that login left."""
    contexts = []

    def make(username: str, width: int = 1400, height: int = 1000):
        context = browser.new_context(
            viewport={"width": width, "height": height},
            permissions=["clipboard-read", "clipboard-write"],
            base_url=server["base"],
            storage_state=server["sessions"].get(username),
        )
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(PAGE_TIMEOUT_MS)
        if username in server["sessions"]:
            page.goto("/admin/")
            assert page.url == f"{server['base']}/admin/", page.url  # the session still holds
        else:
            page.goto("/admin/login/")
            page.fill("#id_username", username)
            page.fill("#id_password", PASSWORD)
            page.click("input[type=submit]")
            page.wait_for_url("**/admin/")
            server["sessions"][username] = context.storage_state()
        return page

    yield make
    for context in contexts:
        context.close()
