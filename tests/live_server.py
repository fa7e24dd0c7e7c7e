"""A real toolhub server for end-to-end and browser tests: a freshly migrated database of its own, uvicorn
serving `toolhub.asgi:application` on a free loopback port in a subprocess, and Django code run against that
database in short subprocesses ("another process")."""

import fcntl
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable

__all__ = [
    "PYTHON",
    "ROOT",
    "TEST_RUN",
    "Uvicorn",
    "drop_templates",
    "free_port",
    "postgres_template_into",
    "run_python",
    "sdk_session",
    "seed_mcp",
    "server_database",
    "sqlite_template_into",
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_python(env: dict, code: str) -> str:
    """Run `code` with Django set up on the server's database; return its last output line."""
    prelude = (
        "import django, json, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'toolhub.settings'); django.setup()\n"
    )
    done = subprocess.run(
        [PYTHON, "-c", prelude + code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


def seed_mcp(env: dict, *, slug: str, rows: int, user: str, root: Path = ROOT) -> dict:
    """bench/seed_mcp.py on the server's database: an instance `slug` of `user` over `rows` orders; its JSON
    line ({"slug", "key", "instance_id", "tools", "table_id"}). `root`: the checkout whose own seed script runs
    (another ref's worktree, in a comparison)."""
    seeded = subprocess.run(
        [PYTHON, "bench/seed_mcp.py", "--slug", slug, "--rows", str(rows), "--user", user],
        cwd=root,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return json.loads(seeded.stdout.strip().splitlines()[-1])


# A test run (toolhub/testenv.py sets TOOLHUB_TEST_RUN in the controller; its pytest-xdist workers inherit it)
# migrates one template database once, under a file lock, and each server's database is a copy of it: a
# fresh `migrate` costs seconds of CPU, and a run starts dozens of servers. Without TOOLHUB_TEST_RUN (the
# scripts under bench/), every server's database is migrated on its own.
TEST_RUN = "TOOLHUB_TEST_RUN"


def template_directory(run: str) -> Path:
    """Where a test run keeps its migrated SQLite template and the lock that guards both templates."""
    return Path(tempfile.gettempdir()) / f"toolhub-template-{run}"


def template_database_name(run: str) -> str:
    """The PostgreSQL template database of a test run."""
    return f"th_template_{run}"


def _migrate(env: dict) -> None:
    subprocess.run([PYTHON, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=300)


def _psql(admin_url: str, *statements: str, check: bool = True) -> None:
    command = ["psql", admin_url, "-q"]
    for statement in statements:
        command += ["-c", statement]
    subprocess.run(command, check=check)


@contextmanager
def _template_lock(run: str) -> Iterator[Path]:
    directory = template_directory(run)
    directory.mkdir(exist_ok=True)
    with open(directory / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield directory
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def sqlite_template_into(run: str, env: dict, copy: sqlite3.Connection) -> None:
    """Copy the run's migrated SQLite template, which the first caller builds, into the open database `copy`
    (a server's file, or a test process's in-memory test database)."""
    with _template_lock(run) as directory:
        template = directory / "template.sqlite3"
        if not template.exists():
            building = directory / "building.sqlite3"
            building.unlink(missing_ok=True)
            _migrate({**env, "DATABASE_URL": f"sqlite:///{building}"})
            building.rename(template)
    # The backup API copies a consistent database whatever state its write-ahead log is in.
    source = sqlite3.connect(template)
    try:
        source.backup(copy)
    finally:
        source.close()


def _sqlite_copy(run: str, env: dict, target: Path) -> None:
    """`target` as a copy of the run's migrated SQLite template."""
    copy = sqlite3.connect(target)
    try:
        sqlite_template_into(run, env, copy)
    finally:
        copy.close()


def _postgres_copy(run: str, env: dict, admin_url: str, name: str, server_url) -> None:
    """Database `name` as a copy of the run's migrated PostgreSQL template, which the first caller builds."""
    template = template_database_name(run)
    with _template_lock(run) as directory:
        marker = directory / "postgres-template-ready"
        if not marker.exists():
            _psql(admin_url, f"DROP DATABASE IF EXISTS {template}", f"CREATE DATABASE {template}")
            _migrate({**env, "DATABASE_URL": server_url(template)})
            marker.touch()
        # CREATE DATABASE ... TEMPLATE needs the template free of connections: copies are made one at a time.
        _psql(admin_url, f"DROP DATABASE IF EXISTS {name}", f"CREATE DATABASE {name} TEMPLATE {template}")


def postgres_template_into(run: str, env: dict, url: str, name: str) -> None:
    """Database `name`, on the server of the PostgreSQL `url`, as a copy of the run's migrated template (a
    server's database, or a test process's test database)."""
    parts = urlsplit(url)
    admin_url = urlunsplit(parts._replace(path="/postgres"))
    _postgres_copy(run, env, admin_url, name, lambda database: urlunsplit(parts._replace(path=f"/{database}")))


def drop_templates(run: str) -> None:
    """Remove a test run's templates (the controller calls this when the run ends)."""
    directory = template_directory(run)
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith("postgres") and (directory / "postgres-template-ready").exists():
        admin_url = urlunsplit(urlsplit(url)._replace(path="/postgres"))
        _psql(admin_url, f"DROP DATABASE IF EXISTS {template_database_name(run)} WITH (FORCE)", check=False)
    shutil.rmtree(directory, ignore_errors=True)


@contextmanager
def server_database(tag: str, directory: Path, *, secret: str, name: str | None = None) -> Iterator[dict]:
    """The environment of a server on a database of its own, migrated: a temporary PostgreSQL database
    `th_<tag>_<pid>` (or `name`; dropped at the end) when the suite runs on PostgreSQL, else an SQLite file in
    `directory`. In a test run, a copy of the run's migrated template (TEST_RUN above)."""
    env = {**os.environ, "DJANGO_SECRET_KEY": secret, "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost"}
    env.pop("DJANGO_DEBUG", None)
    # Password hashes at the processes' own priority. In production a hash runs at niceness 19 and waits for
    # every other process (toolhub/passwords.py); on a busy CI machine (load 10 and more) a login then takes minutes.
    # The servers here check pages, tools and protocols, not the hashing's priority, whose tests set it back
    # (toolhub/tests/test_login_hashing.py).
    env["TOOLHUB_PASSWORD_HASH_NICENESS"] = "0"
    url = os.environ.get("DATABASE_URL", "")
    run = os.environ.get(TEST_RUN, "")
    pg_admin = pg_name = None
    try:
        if url.startswith("postgres"):
            parts = urlsplit(url)
            pg_name = name or f"th_{tag}_{os.getpid()}"
            pg_admin = urlunsplit(parts._replace(path="/postgres"))
            env["DATABASE_URL"] = urlunsplit(parts._replace(path=f"/{pg_name}"))
            if run:
                postgres_template_into(run, env, url, pg_name)
            else:
                _psql(pg_admin, f"DROP DATABASE IF EXISTS {pg_name}", f"CREATE DATABASE {pg_name}")
                _migrate(env)
        else:
            path = directory / "server.sqlite3"
            env["DATABASE_URL"] = f"sqlite:///{path}"
            if run:
                _sqlite_copy(run, env, path)
            else:
                _migrate(env)
        yield env
    finally:
        if pg_name:
            _psql(pg_admin, f"DROP DATABASE IF EXISTS {pg_name} WITH (FORCE)", check=False)


class Uvicorn:
    """uvicorn serving toolhub on a free loopback port; the constructor returns once it answers HTTP.
    As a context manager (`with Uvicorn(env) as server:`), stopped when the block ends."""

    def __init__(self, env: dict, workers: int = 1, *, root: Path = ROOT, options: tuple[str, ...] = ()):
        """`root`: the checkout to serve (benchmarks compare two); `options`: more uvicorn options."""
        self.port = free_port()
        self.process = subprocess.Popen(
            [
                str(Path(PYTHON).with_name("uvicorn")),
                "toolhub.asgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--lifespan",
                "on",
                "--workers",
                str(workers),
                "--no-access-log",
                *options,
            ],
            cwd=root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.process.stdout.read().decode()
            try:
                urllib.request.urlopen(f"{self.base}/mcp/", timeout=1)
            except urllib.error.HTTPError:
                return  # serving (404 for /mcp/ without a slug)
            except OSError:
                time.sleep(0.2)
        raise AssertionError("uvicorn did not start")

    def worker_pids(self) -> list[int]:
        """The worker processes' ids (uvicorn --workers N: children of the server process), or the server's
        own id when it serves alone."""
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text().split()
        workers = [int(pid) for pid in children if b"resource_tracker" not in Path(f"/proc/{pid}/cmdline").read_bytes()]
        return workers or [self.process.pid]

    def __enter__(self) -> "Uvicorn":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> str:
        """Stop the server; return what it printed."""
        self.process.terminate()
        try:
            out, _ = self.process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, _ = self.process.communicate()
        return out.decode()


def sdk_session(url: str, key: str, mode: str, scenario: Any, **options: Any) -> Any:
    """`await scenario(client)` with the SDK's MCP client over a real socket to `url`, `key` as the bearer token;
    `mode` "legacy" (the 2025-11-25 handshake) or "auto" (2026-07-28 when the server offers it); `options` go
    to the Client (say, logging_callback). Returns what the scenario returns."""
    import httpx2
    from asgiref.sync import async_to_sync
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    async def run():
        async with httpx2.AsyncClient(headers={"authorization": f"Bearer {key}"}, timeout=30) as http:
            async with Client(streamable_http_client(url, http_client=http), mode=mode, cache=None, **options) as c:
                return await scenario(c)

    return async_to_sync(run)()
