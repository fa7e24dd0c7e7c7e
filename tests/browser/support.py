"""Helpers for the browser tests: the Chromium binary and flags, Django code run against the server's
database, and screenshots kept as artifacts (artifacts/screenshots/, gitignored)."""

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_python(env: dict, code: str) -> str:
    """Run `code` with Django set up on the server's database; return its last output line."""
    prelude = "import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'toolhub.settings'); django.setup()\n"
    done = subprocess.run(
        [PYTHON, "-c", prelude + code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
