"""Readiness and the facts of the operator's page (docs/operations.md).

`readiness()` answers /readyz: the database answers a query and every migration is applied, decided in a
thread of its own so that a database that does not answer costs READY_TIMEOUT seconds, never a hang.
`status()` is what the operator's page shows about the server itself. Neither is shown to anyone but a
superuser with more than "ok" or what failed: no versions, hosts or settings leave through /readyz.

Domain module: no DRF, no admin, no MCP SDK.
"""

import platform
import threading
import tomllib
from pathlib import Path
from typing import Any

import django
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections

from tools_app.kernel import telemetry

__all__ = ["READY_TIMEOUT", "readiness", "status"]

READY_TIMEOUT = 1.5  # seconds: /readyz answers within this (plus a little) whatever the database does

_migrations_applied = False  # once seen applied, not asked again by this process


class _Check:
    """One database check in flight: every probe that arrives while it runs waits for it, none starts another,
    so a database that hangs costs one thread per process, however often the probes come."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: dict[str, str] = {}


_in_flight: _Check | None = None
_in_flight_lock = threading.Lock()


def _check_database(result: dict[str, str]) -> None:
    """The database answers a query, and no migration is left to apply (in the check's own thread)."""
    global _migrations_applied
    connection = connections[DEFAULT_DB_ALIAS]
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
        result["database"] = "ok"
        if not _migrations_applied:
            from django.db.migrations.executor import MigrationExecutor

            executor = MigrationExecutor(connection)
            pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
            if pending:
                result["migrations"] = f"{len(pending)} not applied"
                return
            _migrations_applied = True
        result["migrations"] = "ok"
    except Exception as exc:  # what failed is named; the driver's message (hosts, users) is not
        result.setdefault("database", f"unreachable ({type(exc).__name__})")
        result.setdefault("migrations", "unknown")
    finally:
        connection.close()


def _run(check: _Check) -> None:
    global _in_flight
    try:
        _check_database(check.result)
    finally:
        with _in_flight_lock:
            if _in_flight is check:
                _in_flight = None
        check.done.set()


def readiness(timeout: float | None = None) -> tuple[bool, dict[str, str]]:
    """(ready, {check: "ok" or what is wrong}) for the database and the migrations, within `timeout` s
    (default READY_TIMEOUT). Joins the check in flight, if any, rather than starting another."""
    global _in_flight
    timeout = READY_TIMEOUT if timeout is None else timeout
    with _in_flight_lock:
        check = _in_flight
        if check is None:
            check = _in_flight = _Check()
            threading.Thread(target=_run, args=(check,), name="toolhub-readyz", daemon=True).start()
    if not check.done.wait(timeout):
        return False, {"database": f"no answer within {timeout:g} s", "migrations": "unknown"}
    checks = dict(check.result)
    return all(value == "ok" for value in checks.values()) and len(checks) == 2, checks


def _version() -> str:
    try:
        with open(Path(settings.BASE_DIR) / "pyproject.toml", "rb") as file:
            return str(tomllib.load(file)["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "unknown"


def _database() -> dict[str, Any]:
    connection = connections[DEFAULT_DB_ALIAS]
    facts: dict[str, Any] = {"vendor": connection.vendor}
    try:
        connection.ensure_connection()
        server = connection.connection.info.server_version if connection.vendor == "postgresql" else None
        if server:
            facts["server_version"] = f"{server // 10000}.{server % 10000}"
        elif connection.vendor == "sqlite":
            import sqlite3

            facts["server_version"] = sqlite3.sqlite_version
    except Exception as exc:
        facts["error"] = type(exc).__name__
    return facts


def _redis() -> dict[str, Any]:
    url = getattr(settings, "REDIS_URL", "")
    if not url:
        return {"configured": False, "state": "not configured: rate limits are counted in each worker's memory"}
    try:
        import redis

        client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
        try:
            info = client.info("server")
            return {"configured": True, "state": "ok", "version": info.get("redis_version", "")}
        finally:
            client.close()
    except Exception as exc:
        return {"configured": True, "state": f"unreachable ({type(exc).__name__})"}


def status() -> dict[str, Any]:
    """What the operator's page shows: versions, the database and its readiness, Redis, the pool."""
    ready, checks = readiness()
    return {
        "version": _version(),
        "python": platform.python_version(),
        "django": django.get_version(),
        "database": _database(),
        "ready": ready,
        "checks": checks,
        "redis": _redis(),
        "pool": telemetry.update_pool_gauges(),
        "pool_max_size": settings.DATABASES[DEFAULT_DB_ALIAS].get("OPTIONS", {}).get("pool", {}).get("max_size")
        if isinstance(settings.DATABASES[DEFAULT_DB_ALIAS].get("OPTIONS", {}).get("pool"), dict)
        else None,
    }
