"""A read over rows is bounded by the call's time budget from the first statement of its snapshot on (the version
and collections' statement), on both engines, in the snapshot's own transaction and inside a caller's."""

import time

import pytest
from django.db import connection

from tools_app.data_access import budget
from tools_app.execution.executors import execute
from tools_app.kernel.errors import ToolError
from tools_app.models import Table
from tools_app.tests.execution.test_records import _statement_timeout

# A statement the engine is slow to answer, put in place of the snapshot's first one.
SLOW = {
    "postgresql": "SELECT pg_sleep(5)",
    "sqlite": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 500000000)"
    " SELECT count(*) FROM c",
}


def _stuck_first_statement(execute_, sql, params, many, context):
    """The snapshot's first statement (the one reading field_kinds) replaced by SLOW; on PostgreSQL it may be one
    statement of a message that also sets its timeout (records.engine_cursor), which stays as it is."""
    if '"field_kinds"' in sql and not context.get("replaced"):
        context["replaced"] = True
        parts = [SLOW[connection.vendor] if '"field_kinds"' in part else part for part in sql.split("; ")]
        return execute_("; ".join(parts), (), many, context)
    return execute_(sql, params, many, context)


def _stopped_at_the_first_statement(make_table, make_tool, owner):
    table = make_table(owner, name="orders", data=[{"id": n, "total": n} for n in range(20)])
    assert Table.objects.get(pk=table.pk).storage == "rows"
    tool = make_tool(owner, table=table, type="query_data", json_path="")
    timeout_before = _statement_timeout()
    context: dict = {}
    started = time.monotonic()
    with (
        budget.enforced(budget.Limits(cpu_ms=300, max_elements=10**9, max_bytes=10**9)),
        connection.execute_wrapper(lambda *args: _stuck_first_statement(*args[:4], context)),
        pytest.raises(ToolError) as stopped,
    ):
        execute(tool=tool, arguments={"query": "[?total > `3`].id"})
    elapsed = time.monotonic() - started
    assert context == {"replaced": True}
    assert stopped.value.code == "QUERY_TOO_EXPENSIVE"
    assert "CPU-time budget of 300 ms" in str(stopped.value)
    assert elapsed < 2.5  # the slow statement alone takes 5 s and more
    assert _statement_timeout() == timeout_before
    with budget.enforced(budget.Limits(cpu_ms=60_000, max_elements=10**9, max_bytes=10**9)):
        assert execute(tool=tool, arguments={"query": "[?total > `17`].id"}) == [18, 19]
    assert _statement_timeout() == timeout_before


@pytest.mark.django_db(transaction=True)
def test_the_first_statement_of_a_snapshot_is_stopped_at_the_budget_outside_a_transaction(make_table, make_tool, owner):
    _stopped_at_the_first_statement(make_table, make_tool, owner)
    assert connection.get_autocommit()
    assert not connection.in_atomic_block


def test_the_first_statement_of_a_snapshot_is_stopped_at_the_budget_inside_a_transaction(make_table, make_tool, owner):
    _stopped_at_the_first_statement(make_table, make_tool, owner)
    assert connection.in_atomic_block
