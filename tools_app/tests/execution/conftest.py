"""Fixtures of the execution tests."""

import pytest

from tools_app.data_access.sql import store

# A directory block of 4 positions' gaps (a real one holds 1,024): a few records span many blocks.
SMALL_BLOCK_SPAN = 4 * store.POSITION_GAP


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(store, "BLOCK_SPAN", SMALL_BLOCK_SPAN)
    return SMALL_BLOCK_SPAN


@pytest.fixture
def stuck_records(monkeypatch):
    """PostgreSQL: `stick()` sends reads of rows through a view of the records table whose every row costs the
    engine a 100 ms pg_sleep (a statement over 50 rows: 5 s), `release()` back to the table; the view and its
    function are dropped at the end. On SQLite the test is skipped (no pg_sleep: SQLite's progress handler has
    tests of its own)."""
    from django.db import connection

    from tools_app.execution import records
    from tools_app.models import TableRecord

    if connection.vendor != "postgresql":
        pytest.skip("pg_sleep: SQLite's progress handler is checked by tests of its own")

    class Stuck:
        def stick(self) -> None:
            with connection.cursor() as cursor:
                cursor.execute(
                    "CREATE OR REPLACE FUNCTION th_stuck_row() RETURNS boolean LANGUAGE plpgsql VOLATILE"
                    " AS $$ BEGIN PERFORM pg_sleep(0.1); RETURN true; END $$"
                )
                cursor.execute(
                    "CREATE OR REPLACE VIEW th_stuck_records AS"
                    f' SELECT * FROM "{TableRecord._meta.db_table}" WHERE th_stuck_row()'
                )
            monkeypatch.setattr(records, "_records_table", lambda: "th_stuck_records")

        def release(self) -> None:
            monkeypatch.setattr(records, "_records_table", lambda: TableRecord._meta.db_table)

    try:
        yield Stuck()
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP VIEW IF EXISTS th_stuck_records")
            cursor.execute("DROP FUNCTION IF EXISTS th_stuck_row()")
