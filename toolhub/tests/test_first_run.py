"""A first run that just works: the Python check and the .venv repair of scripts/bootstrap.sh
(which scripts/start.sh runs first), and the demo key kept across restarts by seed_demo --key-file.

The bootstrap tests run the real script in a scratch copy of the project with stand-in interpreters (small
shell scripts answering like python3.9 or python3.12 would), so they install nothing.
"""

import io
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command

from tools_app import services
from tools_app.models import ApiKey

ROOT = Path(__file__).resolve().parents[2]

OLD_PYTHON = """#!/bin/bash
case "$1" in
  -c) exit 1;;
  --version) echo "Python 3.9.18";;
esac
"""
# Answers like a Python 3.12: version checks pass, `-m venv DIR` makes DIR/bin/{python,pip} (stand-ins too),
# `-m pip --version` works, and pip records what it was asked to install.
GOOD_PYTHON = """#!/bin/bash
case "$1" in
  -c) if [[ "$2" == *print* ]]; then echo "Python 3.12.1 at $0"; fi; exit 0;;
  --version) echo "Python 3.12.1";;
  -m)
    if [ "$2" = venv ]; then
      mkdir -p "$3/bin"; cp "$0" "$3/bin/python"
      printf '#!/bin/bash\\necho "pip $*" >> pip.log\\n' > "$3/bin/pip"; chmod +x "$3/bin/pip"
    fi
    exit 0;;
esac
"""


def scratch_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "bootstrap.sh", project / "scripts" / "bootstrap.sh")
    for name in ("requirements.txt", "requirements-embedding.txt", "requirements-dev.txt"):
        shutil.copy(ROOT / name, project / name)
    return project


def stand_in(directory: Path, name: str, script: str) -> Path:
    directory.mkdir(exist_ok=True)
    path = directory / name
    path.write_text(script)
    path.chmod(0o755)
    return path


def bootstrap(project: Path, path_dirs: list[Path], **env: str) -> subprocess.CompletedProcess:
    # Only the stand-ins and the basic tools: no real python on PATH.
    tools = project.parent / "tools"
    tools.mkdir(exist_ok=True)
    for tool in ("bash", "dirname", "rm", "mkdir", "cp", "chmod", "sha1sum", "cut", "touch", "cat", "env", "printf"):
        found = shutil.which(tool)
        if found and not (tools / tool).exists():
            (tools / tool).symlink_to(found)
    environment = {"PATH": ":".join(str(p) for p in [*path_dirs, tools]), "HOME": str(project), **env}
    return subprocess.run(
        [shutil.which("bash"), "scripts/bootstrap.sh"],
        cwd=project,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_an_old_python_is_refused_with_how_to_choose_another(tmp_path):
    # given
    project = scratch_project(tmp_path)
    old = stand_in(tmp_path / "bin", "python3", OLD_PYTHON)

    # when
    found_on_path = bootstrap(project, [old.parent])
    named = bootstrap(project, [old.parent], PYTHON=str(old))

    # then
    assert found_on_path.returncode == 1
    assert found_on_path.stderr.splitlines() == [
        "toolhub needs Python 3.11 or newer; found: Python 3.9.18.",
        "Install Python 3.11+ (e.g. apt install python3.11 python3.11-venv, or pyenv) and run again,",
        "naming it if it is not on PATH: PYTHON=/path/to/python3.11 bash scripts/start.sh",
    ]
    assert named.returncode == 1
    assert named.stderr.splitlines()[0] == f"toolhub needs Python 3.11 or newer; PYTHON={old} is: Python 3.9.18."
    assert not (project / ".venv").exists()


def test_the_first_supported_python_is_used_and_named(tmp_path):
    # given
    project = scratch_project(tmp_path)
    stand_in(tmp_path / "bin", "python3", OLD_PYTHON)
    good = stand_in(tmp_path / "bin", "python3.12", GOOD_PYTHON)

    # when
    done = bootstrap(project, [good.parent])

    # then
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == (
        f"Using Python 3.12.1 at {good} (choose another with PYTHON=/path/to/python bash scripts/start.sh)."
    )
    assert (project / ".venv" / "bin" / "python").exists()
    assert (
        (project / "pip.log")
        .read_text()
        .startswith("pip install --quiet --disable-pip-version-check -r requirements.txt")
    )


def test_a_broken_venv_is_rebuilt(tmp_path):
    # given: a .venv whose interpreter is gone (an interrupted run, or a removed Python)
    project = scratch_project(tmp_path)
    good = stand_in(tmp_path / "bin", "python3.11", GOOD_PYTHON)
    (project / ".venv" / "bin").mkdir(parents=True)
    (project / ".venv" / "bin" / "python").symlink_to("/nonexistent/python3.9")
    (project / ".venv" / "leftover").write_text("x")

    # when
    done = bootstrap(project, [good.parent])
    again = bootstrap(project, [good.parent])

    # then
    assert done.returncode == 0, done.stderr
    assert ".venv is broken or uses an unsupported Python: rebuilding it with python3.11." in done.stdout
    assert not (project / ".venv" / "leftover").exists()
    assert (project / ".venv" / "bin" / "python").read_text() == GOOD_PYTHON
    assert again.returncode == 0
    assert "rebuilding" not in again.stdout  # a healthy .venv is kept
    assert (project / "pip.log").read_text().count("pip install") == 1  # and its install stamp too


def test_start_sh_runs_bootstrap_and_keeps_the_demo_key():
    """start.sh delegates the checks to bootstrap.sh and seeds with the key file."""
    script = (ROOT / "scripts" / "start.sh").read_text()
    assert "bash scripts/bootstrap.sh" in script
    assert "manage.py seed_demo --key-file .demo-key" in script
    # an older database's document tables are moved to rows after the migrations, before the demo is seeded
    steps = ["manage.py migrate --noinput", "manage.py tables_to_rows --all", "manage.py seed_demo"]
    assert [script.index(step) for step in steps] == sorted(script.index(step) for step in steps)
    assert ".demo-key" in (ROOT / ".gitignore").read_text().splitlines()


KEY_LINE = re.compile(r"^API key \((.*)\): (thk_\S+)$", re.MULTILINE)


def seed(key_file: Path) -> tuple[str, str]:
    out = io.StringIO()
    call_command("seed_demo", "--key-file", str(key_file), stdout=out)
    match = KEY_LINE.search(out.getvalue())
    assert match is not None, out.getvalue()
    return match.group(1), match.group(2)


@pytest.mark.django_db
def test_the_demo_key_is_kept_across_restarts_and_renewed_when_it_no_longer_works(settings, tmp_path):
    # given
    settings.TOOLHUB_DEV = True
    key_file = tmp_path / ".demo-key"

    # when
    first = seed(key_file)
    restart = seed(key_file)
    services.api_key_revoke(api_key=ApiKey.objects.get())
    after_revoke = seed(key_file)
    ApiKey.objects.all().delete()  # as in a fresh database: the stored key matches nothing
    fresh = seed(key_file)

    # then
    assert first == (f"new; kept in {key_file} for the next runs", first[1])
    assert restart == (f"kept from {key_file}", first[1])
    assert after_revoke[0] == f"new; kept in {key_file} for the next runs"
    assert after_revoke[1] != first[1]
    assert fresh[1] not in (first[1], after_revoke[1])
    assert key_file.read_text() == fresh[1] + "\n"
    assert oct(os.stat(key_file).st_mode & 0o777) == "0o600"
    assert ApiKey.objects.count() == 1
