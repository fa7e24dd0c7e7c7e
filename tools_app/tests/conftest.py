"""Fixtures shared by the tests of tools_app: the admin's test clients, logged in; a migrated SQLite file."""

import pytest

from tests.factories import migrated_sqlite_file


@pytest.fixture
def owner_client(client, owner):
    """Django's test client, logged in as `owner`."""
    client.force_login(owner)
    return client


@pytest.fixture
def other_client(client, other_user):
    """Django's test client, logged in as `other_user`."""
    client.force_login(other_user)
    return client


@pytest.fixture
def migrated_sqlite_url(tmp_path) -> str:
    """The URL of a migrated SQLite file for processes of their own; in the SQLite run only (its processes do not
    use the run's database, so the PostgreSQL run would repeat the same test)."""
    from django.conf import settings

    if settings.DATABASES["default"]["ENGINE"] != "django.db.backends.sqlite3":
        pytest.skip("on an SQLite file: the SQLite run runs it")
    migrated_sqlite_file(tmp_path / "migrated.sqlite3")
    return f"sqlite:///{tmp_path / 'migrated.sqlite3'}"


@pytest.fixture
def no_leftover_record_indexes(request):
    """A transactional test starts with no record index: the flush after an earlier transactional test on the
    same worker empties the tables but keeps the indexes it built, and tests comparing the whole set need none."""
    from django.db import connection

    from tools_app.tests.sql_differential import record_indexes

    marker = request.node.get_closest_marker("django_db")
    if marker is not None and marker.kwargs.get("transaction"):
        request.getfixturevalue("transactional_db")
        with connection.cursor() as cursor:
            for name in record_indexes():
                cursor.execute(f"DROP INDEX IF EXISTS {connection.ops.quote_name(name)}")
