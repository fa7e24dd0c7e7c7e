"""Data built once per test module, for the modules whose every test starts from the same objects.

pytest-django wraps each test in a transaction that it rolls back. `built_once` opens one more transaction
around them, for a module: the data is built in it once (when the module's first test that needs it starts,
on each parallel worker that runs some of those tests), every test runs in a savepoint inside it and is rolled
back to the data as built, and the whole transaction is rolled back after the module's last test. So no test
sees another's writes, and no other module sees the data, as with data built per test; the data is never
committed, so other connections (threads, processes, live servers) do not see it either.

Building a module's objects through the services costs about a second of each test's setup on a loaded
machine (full_clean, schema checks, row layouts, name and lock queries: a few dozen statements per object).

For modules of a few dozen tests. On PostgreSQL the 136 tests of tools_app/tests/api/test_permissions.py had
their calls take 3.4x as long in one transaction, more than the setup saved (likely cause: past 64 writing
savepoints, every visibility check of the transaction reads the subtransaction log).

For tests with the `db` fixture only: a `transactional_db` test flushes the database, which a transaction
around it cannot hold; pytest-django runs those after the others.

    _shop_once, shop = fixtures_built_once("shop", build_shop)  # in the module's namespace, for pytest
"""

import copy
import inspect
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from django.db import transaction
from django.test import override_settings

from tests.factories import FAST_PASSWORD_HASHERS

T = TypeVar("T")


def built_once(django_db_blocker, build: Callable[[], T]) -> Iterator[T]:
    """The body of a module-scoped fixture: yields what `build()` returns, built in a transaction that holds the
    module's tests and is rolled back after them (see above)."""
    with django_db_blocker.unblock():
        outer = transaction.atomic()
        # As a test case's own transaction: durable blocks in the code under test nest in it, as in a test's.
        outer._from_testcase = True  # type: ignore[attr-defined]
        outer.__enter__()
        try:
            with override_settings(PASSWORD_HASHERS=FAST_PASSWORD_HASHERS):
                built = build()
        except BaseException:
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)
            raise
    try:
        yield built
    finally:
        with django_db_blocker.unblock():
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)


def fixtures_built_once(name: str, build: Callable[[], Any]) -> tuple[Any, Any]:
    """Two fixtures: `_<name>_once`, module-scoped, what `build()` returns, built once (built_once); and `<name>`,
    each test's own deep copy of it (its own Python objects, as Django's setUpTestData gives each test). The
    second names the first among its arguments, so that pytest sets the module's data up before the test's
    transaction (a higher scope first), never inside it."""
    once_name = f"_{name}_once"

    def once(django_db_setup, django_db_blocker):
        yield from built_once(django_db_blocker, build)

    def each(**fixtures):
        return copy.deepcopy(fixtures[once_name])

    each.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(argument, inspect.Parameter.KEYWORD_ONLY) for argument in (once_name, "db")]
    )
    once.__doc__ = f"{build.__name__}'s objects, built once for the module (tests.module_data)."
    each.__doc__ = f"{build.__name__}'s objects, this test's own copy."
    return pytest.fixture(scope="module", name=once_name)(once), pytest.fixture(name=name)(each)
