"""Helpers for the browser tests: the Chromium binary and flags, and screenshots kept as artifacts
(artifacts/screenshots/, gitignored). The server itself: tests.live_server."""

import functools
import os
import shutil

import pytest

from tests.live_server import ROOT

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SHOTS = ROOT / "artifacts" / "screenshots"
PASSWORD = "browser-pass-123"
# How long a page's action or wait may take (page.set_default_timeout). The tests check what pages show, not how
# fast: on a busy CI machine (load 10 and more on two cores) an admin form's POST has taken over 15 s.
PAGE_TIMEOUT_MS = 60_000


@functools.cache
def password_hash() -> str:
    """PASSWORD hashed as the servers' settings hash it, once per test process: a seeding script stores it
    instead of hashing the same password again for every user of every server."""
    from django.contrib.auth.hashers import make_password

    return make_password(PASSWORD)


def require_browser():
    """Skip (locally) or fail (CI=true) when Chromium or Playwright is missing."""
    missing = []
    if not (os.path.exists(CHROMIUM) or shutil.which("chromium")):
        missing.append(f"Chromium ({CHROMIUM}; apt-get install chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("the playwright Python package (requirements-dev.txt)")
    if missing:
        reason = "browser tests need " + " and ".join(missing)
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(reason)
        pytest.skip(reason)


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
