"""Chart.js is served from toolhub's own static files (docs/activity.md): the file is the release package.json
pins, with its licence beside it; after `npm install`, byte for byte the package's built file."""

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENDORED = ROOT / "tools_app" / "static" / "toolhub" / "vendor" / "chartjs"


def pinned_version() -> str:
    return json.loads((ROOT / "package.json").read_text())["devDependencies"]["chart.js"]


def test_the_vendored_chart_js_is_the_pinned_release_with_its_licence():
    banner = (VENDORED / "chart.umd.min.js").read_text(encoding="utf-8")[:200]
    version = re.search(r"Chart\.js v(\d+\.\d+\.\d+)", banner)
    assert version is not None
    assert version.group(1) == pinned_version() == "4.6.1"
    licence = (VENDORED / "LICENSE.md").read_text(encoding="utf-8")
    assert licence.startswith("The MIT License (MIT)")
    assert "Chart.js Contributors" in licence


def test_the_vendored_file_is_the_installed_package_file():
    installed = ROOT / "node_modules" / "chart.js" / "dist" / "chart.umd.min.js"
    package = ROOT / "node_modules" / "chart.js" / "package.json"
    if not installed.is_file():
        # Without `npm install` (a deployment): the pin and the lock file still name the same release.
        lock = json.loads((ROOT / "package-lock.json").read_text())
        assert lock["packages"]["node_modules/chart.js"]["version"] == pinned_version()
        return
    assert json.loads(package.read_text())["version"] == pinned_version()
    assert installed.read_bytes() == (VENDORED / "chart.umd.min.js").read_bytes()
