"""The floor plan holds: no import cycle among the product's modules, and imports inside functions only
where Django or a spawned worker needs them: two AppConfig.ready() and the heavy worker (docs/architecture.md)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_product_has_no_import_cycle_and_function_level_imports_only_where_django_needs_them():
    # when
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "import_graph.py")], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    # then
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert "import cycles: 0" in lines
    assert "function-level imports of project modules: 4" in lines
    assert [line.split()[0].rsplit(":", 1)[0] for line in lines if line.startswith("  ")] == [
        "oauth_app/apps.py",
        "tools_app/apps.py",  # the services, which plug Table's document reader in
        "tools_app/apps.py",  # the rows readers and writers, which plug into the services
        "tools_app/execution/heavy.py",
    ]
