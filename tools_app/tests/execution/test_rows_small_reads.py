"""The statements of a rows table's small reads, which must cost the same whatever the table's size: a preview at
any offset reads its page in ONE statement over the records (the directory finds the first position inside it),
and a select by key reaches its records by the (collection, key) index, statistics or not. SQLite and PostgreSQL.

The block span is made 4 positions' gaps here, so a few records span many blocks (a real one holds 1,024)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tools_app.execution import records
from tools_app.execution.executors import execute
from tools_app.models import TableRecord
from tools_app.tests.execution.conftest import SMALL_BLOCK_SPAN

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("small_blocks")]

SPAN = SMALL_BLOCK_SPAN
RECORDS = 40


@pytest.fixture
def orders_tools(make_table, make_tool, owner):
    data = [{"id": number, "name": f"n{number}", "status": "new"} for number in range(RECORDS)]
    table = make_table(owner, name="orders", data=data, storage="rows")
    assert records.collections(table.pk)[""].record_count == RECORDS
    preview = make_tool(owner, table=table, type="preview", name="orders_preview", metadata={"preview_keys": ["id"]})
    select = make_tool(owner, table=table, type="select", name="orders_by_id")
    return preview, select


def _over_records(statements) -> list[str]:
    return [s["sql"] for s in statements if f'"{TableRecord._meta.db_table}"' in s["sql"]]


def test_a_preview_reads_its_page_in_one_statement_at_any_offset(orders_tools):
    preview, _select = orders_tools
    counts = set()
    for offset in range(1, RECORDS + 2):
        with CaptureQueriesContext(connection) as statements:
            got = execute(tool=preview, arguments={"offset": offset, "limit": 3})
        assert got == {"items": [{"id": n} for n in range(offset, min(RECORDS, offset + 3))], "total_count": RECORDS}
        assert len(_over_records(statements)) == 1, offset
        counts.add(len(statements))
    assert len(counts) == 1  # the same statements at every depth, past the end included


def test_a_position_at_an_ordinal_is_one_statement(orders_tools):
    preview, _select = orders_tools
    collection = records.collections(preview.table_id)[""]
    positions = list(
        TableRecord.objects.filter(collection_id=collection.id).order_by("position").values_list("position", flat=True)
    )
    for index in (0, 3, 4, 17, RECORDS - 1, RECORDS, RECORDS + 5):
        with CaptureQueriesContext(connection) as statements:
            found = records.position_at(collection, index)
        assert found == (positions[index] if index < RECORDS else None), index
        assert len(statements) == 1


def test_a_select_by_key_takes_the_key_index_without_statistics(orders_tools):
    _preview, select = orders_tools
    with CaptureQueriesContext(connection) as statements:
        got = execute(tool=select, arguments={"keys": [31, 2, 99, 17]})
    assert got == {
        "items": [{"id": 2, "name": "n2", "status": "new"}, {"id": 17, "name": "n17", "status": "new"},
                  {"id": 31, "name": "n31", "status": "new"}],
        "not_found": [99],
    }  # fmt: skip
    [sql] = _over_records(statements)
    if connection.vendor != "sqlite":
        return  # PostgreSQL's planner takes the key index by its own estimates
    with connection.cursor() as cursor:
        cursor.execute('SELECT COUNT(*) FROM sqlite_master WHERE name = "sqlite_stat1"')
        if cursor.fetchone()[0]:
            cursor.execute(f"DELETE FROM sqlite_stat1 WHERE tbl = '{TableRecord._meta.db_table}'")
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}")
        plan = " ".join(str(row[-1]) for row in cursor.fetchall())
    assert "USING INDEX table_record_key (collection_id=? AND key=?)" in plan, plan


@pytest.mark.django_db(transaction=True)
def test_a_read_in_its_own_snapshot_sends_each_statement_with_its_timeout_in_one_message(orders_tools):
    """PostgreSQL, as the server reads (outside a transaction): the snapshot's transaction is the read's own, so each
    statement over the records carries the call's remaining time and sets the timeout back in the same message
    (records.engine_cursor), with no savepoint; inside the snapshot the timeout is the session's again after it, and
    the session's after the read."""
    if connection.vendor != "postgresql":
        pytest.skip("statement_timeout: SQLite's progress handler needs no statement")
    from tools_app.data_access import budget

    preview, select = orders_tools
    with connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = '7s'")
    roomy = budget.Limits(cpu_ms=60_000, max_elements=10**9, max_bytes=10**9)
    with budget.enforced(roomy), CaptureQueriesContext(connection) as statements:
        assert execute(tool=preview, arguments={"offset": 21, "limit": 2}) == {
            "items": [{"id": 21}, {"id": 22}],
            "total_count": RECORDS,
        }
        assert execute(tool=select, arguments={"keys": [5]})["items"] == [{"id": 5, "name": "n5", "status": "new"}]
        with records.snapshot(preview.table_id):
            collection = records.collections(preview.table_id)[""]
            assert records.position_at(collection, 39) is not None
            with connection.cursor() as cursor:
                cursor.execute("SHOW statement_timeout")
                assert cursor.fetchone()[0] == "7s"
    over_records = _over_records(statements)
    assert len(over_records) == 3
    for sql in over_records:
        assert sql.startswith("SELECT set_config('toolhub.timeout_before', current_setting('statement_timeout'), true)")
        assert "; SET LOCAL statement_timeout = " in sql
        assert sql.endswith("; SELECT set_config('statement_timeout', current_setting('toolhub.timeout_before'), true)")
    assert not [s["sql"] for s in statements if "SAVEPOINT" in s["sql"]]
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "7s"
        cursor.execute("SET statement_timeout = DEFAULT")
    assert connection.get_autocommit()
