"""The objects most tests start from, built through the services: the one home of the root conftest's factory
fixtures (make_user, make_table, make_tool) and of data built once per module (tests/module_data.py)."""

import os
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

# OAuth client secrets' own hasher (settings.PASSWORD_HASHERS): a test that sets the password hashers keeps it.
CLIENT_SECRET_HASHER = "oauth_app.client_secrets.ClientSecretHasher"
# The hashers the tests use: MD5 for users' passwords (PBKDF2 costs ~0.4 s per user), the production hasher
# for OAuth client secrets.
FAST_PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher", CLIENT_SECRET_HASHER]

ORDERS = [
    {"id": 1, "customer": "ada", "status": "paid", "total": 10.5},
    {"id": 2, "customer": "alan", "status": "shipped", "total": 20},
    {"id": 3, "customer": "grace", "status": "new", "total": 7.25},
]


def user(username: str, *, superuser: bool = False, staff: bool = True, password: str = "pw-123456!") -> Any:
    """A staff user in the `toolhub users` group (or a superuser)."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    made = get_user_model().objects.create_user(
        username=username, password=password, is_staff=staff or superuser, is_superuser=superuser
    )
    group = Group.objects.filter(name="toolhub users").first()
    if group and not superuser:
        made.groups.add(group)
    return made


def table(owner, name: str = "orders", data=None, description: str = "", storage: str | None = None) -> Any:
    """A table through the service (version 1), its data ORDERS unless given, stored as
    TOOLHUB_NEW_TABLE_STORAGE says (rows when its data holds a collection), or as `storage` says."""
    from django.test import override_settings

    from tools_app import services

    with override_settings(**({} if storage is None else {"TOOLHUB_NEW_TABLE_STORAGE": storage})):
        return services.table_create(
            owner=owner,
            name=name,
            description=description,
            data=[dict(order) for order in ORDERS] if data is None else data,
        )


def tool(owner, table=None, type: str = "query_data", name: str | None = None, **fields: Any) -> Any:
    """A tool through the service (its description says its type unless given)."""
    from tools_app import services

    fields.setdefault("description", f"A {type} tool for tests.")
    return services.tool_create(owner=owner, name=name or f"{type}_tool", type=type, table=table, **fields)


def migrated_sqlite_file(path: Path) -> None:
    """`path` as a migrated SQLite database, for a process of its own (a subprocess, a spawned worker): a copy of
    the test run's migrated template (tests/live_server.py), which the run builds once, instead of a `migrate` of
    its own (seconds of CPU each)."""
    from tests.live_server import TEST_RUN, sqlite_template_into

    env = {key: value for key, value in os.environ.items() if key != "DJANGO_DEBUG"}
    with closing(sqlite3.connect(path)) as copy:
        sqlite_template_into(os.environ[TEST_RUN], env, copy)
