"""A database made at commit efc5481 (tables stored as one JSON document with history) migrates with today's
migrations and `manage.py tables_to_rows --all`, then answers as efc5481 did: every read tool call, every version
(services and API), the API's table, ETag and history; and a restore to each old version gives that version's
document.

The database and efc5481's answers were made by efc5481's own code (tests/fixtures/efc5481/make.py: seed.py wrote
them, answers.py recorded them). Today's code runs in a subprocess over a scratch database loaded from the
fixture: a copy of efc5481.sqlite3, or efc5481.pg.sql loaded into a scratch PostgreSQL database beside the test
database.
"""

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "tests" / "fixtures" / "efc5481"
POSTGRES = settings.DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"


# Fields the API's table gained after efc5481 (docs/api.md: "Table indexes", a table's `redact_fields`), with the
# values a table made before them has: nothing indexed, nothing redacted. Every other field answers as before.
ADDED = {"api_table": {"indexed_fields": [], "redact_fields": []}}

MIGRATE_MOVE_ANSWER = """
import runpy, sys
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
call_command("tables_to_rows", "--all")
sys.argv = [sys.argv[1], sys.argv[2], "--restore"]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _today(database_url: str, *args: str) -> str:
    env = {
        **os.environ,
        "DJANGO_SECRET_KEY": os.environ.get("DJANGO_SECRET_KEY") or "test",
        "DJANGO_SETTINGS_MODULE": "toolhub.settings",
        "PYTHONPATH": str(ROOT),
        "DATABASE_URL": database_url,
    }
    done = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def scratch_database(tmp_path):
    """The URL of a fresh database holding the fixture, dropped afterwards."""
    if not POSTGRES:
        shutil.copyfile(FIXTURE / "efc5481.sqlite3", tmp_path / "efc5481.sqlite3")
        yield f"sqlite:///{tmp_path / 'efc5481.sqlite3'}"
        return
    import psycopg

    params = settings.DATABASES["default"]
    server = {
        "host": params["HOST"] or None,
        "port": params["PORT"] or None,
        "user": params["USER"] or None,
        "password": params["PASSWORD"] or None,
    }
    name = f"efc5481_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dbname="postgres", autocommit=True, **server) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        with psycopg.connect(dbname=name, autocommit=True, **server) as db:
            db.execute((FIXTURE / "efc5481.pg.sql").read_text(encoding="utf-8"))
        password = f":{params['PASSWORD']}" if params["PASSWORD"] else ""
        yield f"postgres://{params['USER']}{password}@{params['HOST'] or '127.0.0.1'}:{params['PORT'] or 5432}/{name}"
    finally:
        with psycopg.connect(dbname="postgres", autocommit=True, **server) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_a_database_made_at_efc5481_migrates_and_answers_as_efc5481_did(scratch_database, tmp_path):
    recorded = json.loads((FIXTURE / ("answers.pg.json" if POSTGRES else "answers.sqlite.json")).read_text())
    out = tmp_path / "answers.json"
    # One process (Django starts once): today's migrations, the move to rows, then answers.py with its restores.
    moved = _today(scratch_database, "-c", MIGRATE_MOVE_ANSWER, str(FIXTURE / "answers.py"), str(out))
    assert moved.splitlines() == [
        "table 1: moved to rows",
        "table 2: moved to rows",
        "table 3: kept as a document (no collection in it: no array or object at its root or its tools' mounts)",
        "table 4: moved to rows",
        "3 moved, 0 already stored as rows, 1 kept as documents (no collection).",
    ]
    today = json.loads(out.read_text())

    for through in ("reads", "calls"):  # the tool types' entry point; the API's call pipeline
        assert len(recorded[through]) == 76
        for call, answer in recorded[through].items():
            assert today[through][call] == answer, (through, call)
        assert today[through].keys() == recorded[through].keys()
    assert {name: table["version"] for name, table in recorded["tables"].items()} == {
        "catalog": 7,
        "greeting": 4,
        "orders": 7,
        "shop": 9,
    }
    for name, table in recorded["tables"].items():
        for part, value in table.items():
            expected = {**value, **ADDED[part]} if part in ADDED else value
            assert today["tables"][name][part] == expected, (name, part)
    assert today["tables"].keys() == recorded["tables"].keys()
    for name, table in recorded["tables"].items():
        restores = today["restores"][name]
        for version, document in table["versions"].items():
            assert restores[version]["data"] == document, (name, version)
        assert [restores[str(v)]["new_version"] for v in range(1, table["version"] + 1)] == list(
            range(table["version"] + 1, 2 * table["version"] + 1)
        )
