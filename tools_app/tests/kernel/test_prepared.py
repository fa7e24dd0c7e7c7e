"""tools_app.kernel.prepared: a tools/call's lookup is prepared once per PostgreSQL connection and answers as the
plain statement does, also after its prepared statement went stale under the running server."""

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from tools_app.kernel import prepared
from tools_app.selectors import binding_call_target


def _target(served, name="orders_query"):
    return binding_call_target(
        instance_id=served["instance"].pk, slug="shop", api_key_id=served["api_key"].pk, name=name
    )


def _prepared_lookups() -> list[str]:
    """The statements this session holds prepared that read the call's target (earlier tests' ones included:
    the session outlives a test)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements ORDER BY prepare_time")
        return [row[0] for row in cursor.fetchall() if "mcp_app_binding" in row[0]]


def _current(statements: list[str]) -> list[str]:
    """Those of the text the next lookup runs (a generation's comment after the first)."""
    generation = prepared._generation
    if generation:
        return [text for text in statements if text.endswith(f"/* toolhub {generation} */")]
    return [text for text in statements if "/* toolhub" not in text]


def _column_type(table: str, column: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = %s::regclass AND attname = %s",
            [table, column],
        )
        return cursor.fetchone()[0]


def _prepare_lookup(served):
    """The lookup's current statement, prepared on this test's connection. The pool hands out connections in
    turn, and one may hold the statement an earlier test made stale: the first lookup then meets it, moves to
    a new generation and runs unprepared, and the second prepares the new text."""
    for _ in range(2):
        target = _target(served)
        if len(_current(_prepared_lookups())) == 1:
            return target
    raise AssertionError(f"the lookup is not prepared on this connection: {_prepared_lookups()}")


@pytest.fixture
def plain_targets(served):
    """The call's targets (the bound tool, and a name no binding has) as the plain statement reads them."""
    with transaction.atomic():  # inside a transaction the statement is never prepared
        return _target(served), _target(served, "nothing_here")


def test_the_lookup_is_prepared_once_per_connection_and_answers_as_the_plain_statement(
    postgres_db, served, plain_targets
):
    # when
    first, again, missing = _target(served), _target(served), _target(served, "nothing_here")

    # then
    assert (first, missing) == plain_targets
    assert again == first
    assert first.tool_id == served["tool"].pk
    assert missing.tool_id is None
    assert len(_current(_prepared_lookups())) == 1


def test_inside_a_transaction_or_switched_off_the_lookup_is_not_prepared(postgres_db, served, settings):
    # given
    before = _prepared_lookups()

    # when
    with transaction.atomic():
        in_transaction = _target(served)
    settings.TOOLHUB_PREPARED_STATEMENTS = False
    switched_off = _target(served)

    # then
    assert in_transaction.tool_id == switched_off.tool_id == served["tool"].pk
    assert _prepared_lookups() == before


def test_a_lookup_whose_result_type_changed_under_the_server_runs_unprepared_then_is_prepared_again(
    postgres_db, served, plain_targets
):
    """A migration that changes a returned column's type (from another process: psycopg does not see it) makes
    PostgreSQL refuse the prepared statement; the call still gets its answer, and the next one a fresh statement."""
    # given
    expected = plain_targets[0]
    assert _prepare_lookup(served) == expected
    before = _column_type("mcp_app_mcpinstance", "log_level")
    generation = prepared._generation
    try:
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE mcp_app_mcpinstance ALTER COLUMN log_level TYPE varchar(99)")

        # when
        stale, fresh = _target(served), _target(served)
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE mcp_app_mcpinstance ALTER COLUMN log_level TYPE {before}")

    # then
    assert stale == fresh == expected
    assert prepared._generation > generation
    assert len(_current(_prepared_lookups())) == 1
    assert _current(_prepared_lookups())[0].endswith(f"/* toolhub {prepared._generation} */")


def test_a_lookup_dropped_behind_psycopgs_back_runs_unprepared_then_is_prepared_again(
    postgres_db, served, plain_targets
):
    """A DEALLOCATE ALL that psycopg did not see (as a pooler's DISCARD ALL would do) drops the prepared statement."""
    # given
    assert _prepare_lookup(served) == plain_targets[0]
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")
    assert _prepared_lookups() == []
    generation = prepared._generation

    # when
    dropped, fresh = _target(served), _target(served)

    # then
    assert dropped == fresh == plain_targets[0]
    assert prepared._generation > generation
    assert len(_current(_prepared_lookups())) == 1


def test_another_error_of_the_lookup_is_raised(postgres_db, served, monkeypatch):
    """Only a stale statement is retried: an error of the statement itself reaches the caller."""
    # given
    monkeypatch.setattr(prepared, "_generation", 0)

    # when
    with pytest.raises(Exception, match="no_such_column"):
        prepared.fetch_one("SELECT no_such_column FROM mcp_app_mcpinstance WHERE id = %(id)s", {"id": 1})

    # then
    assert prepared._generation == 0


def test_the_query_log_shows_a_prepared_lookup_with_its_values(postgres_db, served):
    """Django's query log (CaptureQueriesContext, DEBUG) gets one entry per lookup: the statement as the plain cursor
    sends it, with its values, though psycopg leaves the text of a prepared execution unset."""
    # given
    _target(served)

    # when
    with CaptureQueriesContext(connection) as queries:
        _target(served)

    # then
    assert len(queries.captured_queries) == 1
    logged = queries.captured_queries[0]["sql"]
    assert logged.startswith('SELECT i."id", i."owner_id"')
    assert f'WHERE i."id" = {served["instance"].pk} AND i."slug" = \'shop\' AND i."enabled"' in logged
    assert f'k."id" = {served["api_key"].pk} AND k."revoked_at" IS NULL' in logged
