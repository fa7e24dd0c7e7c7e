"""Fixtures of the browser tests: `uvicorn toolhub.asgi:application` (the admin and the MCP endpoint in one
app) on a free loopback port, in a subprocess with its own freshly migrated database (a temporary SQLite
file, or a temporary PostgreSQL database when the suite runs on PostgreSQL), once per test module; two
staff users, alice and bob; headless Chromium; logged-in pages."""

import os
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.browser.support import (
    CHROMIUM,
    CHROMIUM_ARGS,
    PASSWORD,
    PYTHON,
    ROOT,
    free_port,
    require_browser,
    run_python,
)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """uvicorn serving toolhub.asgi:application on a fresh database with two staff users, alice and bob."""
    require_browser()
    env = {**os.environ, "DJANGO_SECRET_KEY": "browser-secret", "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost"}
    env.pop("DJANGO_DEBUG", None)
    url = os.environ.get("DATABASE_URL", "")
    pg_admin = pg_name = None
    if url.startswith("postgres"):
        parts = urlsplit(url)
        pg_name = f"th_e_browser_{os.getpid()}"
        pg_admin = urlunsplit(parts._replace(path="/postgres"))
        subprocess.run(
            ["psql", pg_admin, "-qc", f"DROP DATABASE IF EXISTS {pg_name}", "-c", f"CREATE DATABASE {pg_name}"],
            check=True,
        )
        env["DATABASE_URL"] = urlunsplit(parts._replace(path=f"/{pg_name}"))
    else:
        env["DATABASE_URL"] = f"sqlite:///{tmp_path_factory.mktemp('browser') / 'server.sqlite3'}"
    subprocess.run([PYTHON, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=300)
    run_python(
        env,
        "from django.contrib.auth.models import Group, User\n"
        "group = Group.objects.get(name='toolhub users')\n"
        "for name in ('alice', 'bob'):\n"
        f"    user = User.objects.create_user(name, password={PASSWORD!r}, is_staff=True)\n"
        "    user.groups.add(group)\n",
    )
    port = free_port()
    process = subprocess.Popen(
        [
            str(Path(PYTHON).with_name("uvicorn")),
            "toolhub.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--lifespan",
            "on",
            "--no-access-log",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        assert process.poll() is None, process.stdout.read().decode()
        try:
            urllib.request.urlopen(f"{base}/admin/login/", timeout=1)
            break
        except (OSError, urllib.error.URLError):
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.2)
    yield {"base": base, "env": env}
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
    if pg_name:
        subprocess.run(["psql", pg_admin, "-qc", f"DROP DATABASE IF EXISTS {pg_name} WITH (FORCE)"], check=False)


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
