"""Shared fixtures: users, tables, tools, instances, keys (factory style: make_tool(**overrides))."""

import math
import os
import time
import uuid

import pytest

from tests import factories
from tests.factories import FAST_PASSWORD_HASHERS
from tests.live_server import TEST_RUN, drop_templates, postgres_template_into, sqlite_template_into

# The suite sends far more requests than the default rates allow, so rate limits are off in
# tests (servers the tests start inherit this); the rate-limit tests turn them on (`rate_limited`).
os.environ["TOOLHUB_RATE_LIMITS_ENABLED"] = "false"

# The test run's id, which names the migrated template that live servers' databases are copied from
# (tests/live_server.py). Set by the process pytest was started in; its pytest-xdist workers inherit it.
_RUN_STARTED_HERE = TEST_RUN not in os.environ
os.environ.setdefault(TEST_RUN, uuid.uuid4().hex[:12])


def pytest_unconfigure(config):
    """The run's templates are removed by the process that started the run, once its workers are done."""
    if _RUN_STARTED_HERE and not hasattr(config, "workerinput"):
        drop_templates(os.environ[TEST_RUN])


@pytest.fixture(scope="session")
def _test_database_from_template():
    """While the test databases are set up: a test database's `migrate` is a copy of the run's migrated template
    (tests/live_server.py), which the first process to need it builds: on SQLite, the in-memory test database;
    on PostgreSQL, each worker's test database (CREATE DATABASE ... TEMPLATE, as the live servers' databases).
    The same migrations, run once per run instead of once per parallel worker and once more for the live
    servers: each run costs seconds of CPU (PostgreSQL: ~7 s of the test process's and more of the server's).
    Returns the function that puts `migrate` back."""
    from django.core import management
    from django.db import connections

    migrate = management.call_command

    def call_command(name, *args, **options):
        connection = connections[options.get("database", "default")]
        if name != "migrate" or args:
            return migrate(name, *args, **options)
        env = {key: value for key, value in os.environ.items() if key != "DJANGO_DEBUG"}
        if connection.vendor == "sqlite" and connection.is_in_memory_db():
            connection.ensure_connection()
            sqlite_template_into(os.environ[TEST_RUN], env, connection.connection)
            return None
        url = os.environ.get("DATABASE_URL", "")
        if connection.vendor == "postgresql" and url.startswith("postgres"):
            connection.close()  # the test database is dropped and made again as the copy
            postgres_template_into(os.environ[TEST_RUN], env, url, connection.settings_dict["NAME"])
            return None
        return migrate(name, *args, **options)

    management.call_command = call_command
    return lambda: setattr(management, "call_command", migrate)


@pytest.fixture(scope="session")
def django_db_setup(_test_database_from_template, django_db_setup):
    """pytest-django's test databases, copied from the run's template (above)."""
    _test_database_from_template()


@pytest.fixture(scope="session", autouse=True)
def _flush_by_delete():
    """On PostgreSQL, the flush after each transactional test (pytest-django's TransactionTestCase teardown)
    empties the tables with DELETE instead of Django's TRUNCATE: the database ends as empty either way, but a
    TRUNCATE makes new files for every table, index and TOAST table and drops the old ones, whatever they hold
    (measured on the suite's 38 tables holding a few rows: 1.8 to 3.2 s a flush, against 0.2 to 0.5 s with
    DELETE). The foreign keys are checked at the commit (deferred), when every table is empty. A flush that
    resets sequences or cascades keeps TRUNCATE."""
    from django.conf import settings

    if settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
        yield
        return
    from django.db.backends.postgresql.operations import DatabaseOperations

    truncate = DatabaseOperations.sql_flush

    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if reset_sequences or allow_cascade or not tables:
            return truncate(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        deletes = [f"{style.SQL_KEYWORD('DELETE FROM')} {style.SQL_FIELD(self.quote_name(t))};" for t in tables]
        return [f"{style.SQL_KEYWORD('SET CONSTRAINTS ALL DEFERRED')};", *deletes]

    DatabaseOperations.sql_flush = sql_flush
    yield
    DatabaseOperations.sql_flush = truncate


@pytest.fixture
def make_user(db):
    """make_user(username, **fields): a staff user in the `toolhub users` group (or a superuser)."""

    def make(username: str, *, superuser: bool = False, staff: bool = True, password: str = "pw-123456!"):
        return factories.user(username, superuser=superuser, staff=staff, password=password)

    return make


@pytest.fixture
def owner(make_user):
    return make_user("owner")


@pytest.fixture
def other_user(make_user):
    return make_user("other")


@pytest.fixture
def superuser(make_user):
    return make_user("root", superuser=True)


@pytest.fixture
def make_table(db):
    """make_table(owner, name="orders", data=..., storage=None): a table through the service (version 1), stored
    as TOOLHUB_NEW_TABLE_STORAGE says (rows when its data holds a collection), or as `storage` says: "document"
    makes a document table (the side of a differential test that `records.table_to_rows` then moves, or a test of
    the document storage itself)."""

    def make(owner, name: str = "orders", data=None, description: str = "", storage: str | None = None):
        return factories.table(owner, name, data, description, storage)

    return make


@pytest.fixture
def document_storage(settings):
    """New tables start as documents (TOOLHUB_NEW_TABLE_STORAGE's default is rows), for the tests of the document
    storage itself: its snapshot and log of RFC 6902 patches, its cache, its whole-document reads. A module uses
    it with `pytestmark = pytest.mark.usefixtures("document_storage")` and says why."""
    settings.TOOLHUB_NEW_TABLE_STORAGE = "document"


@pytest.fixture
def table(make_table, owner):
    return make_table(owner)


@pytest.fixture
def make_tool(db):
    """make_tool(owner, table=None, type="query_data", name=..., **fields): a tool through the service."""

    def make(owner, table=None, type: str = "query_data", name: str | None = None, **fields):
        return factories.tool(owner, table, type, name, **fields)

    return make


@pytest.fixture
def make_instance(db):
    """make_instance(owner, slug="shop", **fields): an MCP instance through the service."""
    from tools_app.services import instance_create

    def make(owner, slug: str = "shop", **fields):
        fields.setdefault("name", slug.title())
        return instance_create(owner=owner, slug=slug, **fields)

    return make


@pytest.fixture
def instance(make_instance, owner):
    return make_instance(owner)


@pytest.fixture
def bind(db):
    """bind(instance, tool, **fields): a binding through the service."""
    from tools_app.services import binding_create

    def make(instance, tool, **fields):
        return binding_create(mcp_instance=instance, tool=tool, **fields)

    return make


@pytest.fixture
def served(owner, table, make_tool, instance, bind, make_api_key):
    """The instance 'shop' serving one query tool, orders_query, with one key (plaintext in "key")."""
    tool = make_tool(owner, table, name="orders_query")
    binding = bind(instance, tool)
    api_key, plaintext = make_api_key(instance)
    return {
        "instance": instance,
        "tool": tool,
        "binding": binding,
        "table": table,
        "api_key": api_key,
        "key": plaintext,
    }


PAGED_RECORDS = [{"id": i, "name": f"n{i:03d}"} for i in range(100)]


@pytest.fixture
def records(owner, make_table):
    """A table 'records' of 100 rows {"id": 0..99, "name": "n000".."n099"}: a list that the paging tests cut
    into pages."""
    return make_table(owner, name="records", data=[dict(r) for r in PAGED_RECORDS])


@pytest.fixture
def make_api_key(db):
    """make_api_key(instance, label="test") -> (ApiKey, plaintext)."""
    from tools_app.services import api_key_issue

    def make(instance, label: str = "test"):
        return api_key_issue(mcp_instance=instance, label=label)

    return make


@pytest.fixture(autouse=True)
def _no_rate_limits(settings):
    """Rate limits off (see above); `rate_limited` turns them on with fresh counts."""
    settings.TOOLHUB_RATE_LIMITS_ENABLED = False


@pytest.fixture
def rate_limited(settings):
    """Rate limits on, counted in this process's memory from zero: set(**rates) sets the default rates
    (keys of TOOLHUB_RATE_LIMITS: mcp_key, user, anon, token)."""
    from tools_app.kernel import rate_limits

    settings.TOOLHUB_RATE_LIMITS_ENABLED = True
    settings.REDIS_URL = ""
    settings.TOOLHUB_RATE_LIMITS = dict(rate_limits.DEFAULT_RATES)
    rate_limits.reset()

    def set_rates(**rates: str) -> None:
        settings.TOOLHUB_RATE_LIMITS = {**settings.TOOLHUB_RATE_LIMITS, **rates}

    started = time.time()

    def retry_after_now(period: int = 60) -> set[int]:
        """The Retry-After values a window of `period` seconds opened during this test can show now: it
        opened after `started`, so at most ceil(elapsed) seconds of it have gone."""
        return set(range(period - math.ceil(time.time() - started), period + 1))

    set_rates.retry_after_now = retry_after_now  # type: ignore[attr-defined]
    from tools_app.services.refusals import refusals

    refusals.clear()  # the refusals this process counted for the activity page, not yet written
    yield set_rates
    rate_limits.reset()
    refusals.clear()


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """PBKDF2 costs ~0.4 s per user created; tests do not need a slow hash. (The password-hashing slots are
    each test process's own: toolhub/testenv.py.) OAuth client secrets keep their own hasher, as in production."""
    settings.PASSWORD_HASHERS = FAST_PASSWORD_HASHERS


@pytest.fixture
def login_lockout_off(settings):
    """django-axes off, for a test that logs in with `Client.login()` (which passes no request, so axes
    would refuse it) and is not about the lockout (the lockout's own tests keep it on)."""
    settings.AXES_ENABLED = False


def _forget_process_state() -> None:
    from mcp_app.auth import auth_cache
    from tools_app.execution import pipeline, records
    from tools_app.execution.call_limits import call_slots
    from tools_app.kernel.limits import forget_reads
    from tools_app.registry.search import index_cache
    from tools_app.services.table_cache import table_cache

    table_cache.clear()
    call_slots.forget_heavy_callers()
    auth_cache.clear()
    pipeline.key_touches.clear()
    index_cache.clear()
    pipeline.result_cache.clear()
    pipeline.tool_cache.clear()
    records.forget_layouts()
    forget_reads()  # pytest-django's `del settings.X` sends no setting_changed


@pytest.fixture(autouse=True)
def _clear_process_state():
    """Each test starts and ends with empty per-process caches (tables, keys, tools, results, search indexes)
    and no remembered heavy callers (test databases reuse ids)."""
    _forget_process_state()
    yield
    _forget_process_state()


@pytest.fixture
def postgres_db(transactional_db):
    """Committed data that other connections (threads, processes) see: PostgreSQL only, skipped on SQLite (its
    test database lives in memory, so another connection sees nothing)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (row locks, concurrent connections): set DATABASE_URL=postgres://... to run")


def pytest_runtest_setup(item):
    """Tests marked `postgres` need PostgreSQL (several connections writing at once): skipped on SQLite."""
    if item.get_closest_marker("postgres") is None:
        return
    from django.conf import settings

    if settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
        pytest.skip("needs PostgreSQL: set DATABASE_URL (see README, Running the tests)")
