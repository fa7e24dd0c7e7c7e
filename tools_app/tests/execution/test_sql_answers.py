"""A compiled query's answer over a rows table (tools_app.data_access.sql_query.run_sql, read by records._query) is
received in chunks and bounded by TOOLHUB_MAX_EVALUATED_BYTES as a gathered read is: an answer past it is refused
after about the bound has been read, whatever the collection's size. SQLite and PostgreSQL alike; on PostgreSQL the
chunks are what the connection receives (data_access.sql.chunked), and a statement stopped part-way is cancelled."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from psycopg import pq

from tools_app.data_access import budget, sql_query
from tools_app.data_access.sql import chunked
from tools_app.execution import pipeline as calls
from tools_app.execution import records
from tools_app.execution.call_limits import default_limits
from tools_app.execution.executors import execute
from tools_app.kernel.errors import ToolError
from tools_app.models import Surface, Table

TEXT = "x" * 100
RECORDS = [{"id": n, "text": TEXT} for n in range(200)]
REFUSAL = (
    "QUERY_TOO_EXPENSIVE: This read needs more than 2400 bytes of records evaluated in the server "
    "(TOOLHUB_MAX_EVALUATED_BYTES): narrow it with a filter that compiles to SQL (comparisons on fields), or page it."
)


@pytest.fixture
def texts(make_table, make_tool, owner):
    table = make_table(owner, name="texts", data=RECORDS)
    assert table.storage == "rows"
    return make_tool(owner, table=table, type="query_data", name="query_texts", json_path="")


@pytest.fixture
def fetched(monkeypatch):
    """The rows each fetchmany of a compiled statement's answer returned, 5 rows per chunk."""
    counts: list[int] = []
    real = sql_query.fetch

    class Counting:
        def __init__(self, cursor):
            self.cursor = cursor

        def fetchmany(self, size):
            rows = self.cursor.fetchmany(size)
            counts.append(len(rows))
            return rows

        def close(self):
            self.cursor.close()

    monkeypatch.setattr(sql_query, "FETCH_ROWS", 5)
    monkeypatch.setattr(sql_query, "fetch", lambda cursor, limit: real(Counting(cursor), limit))
    return counts


@pytest.mark.parametrize("query", ["@", "reverse(@)", "map(&text, @)", "[*].text", "sort_by(@, &id)"])
def test_a_compiled_answer_past_the_bound_is_refused_after_reading_about_the_bound(settings, texts, fetched, query):
    """The answer (at least 200 texts of 102 characters: 20,400) is over ten times the bound (2,400): refused once
    the texts received pass the bound, in the fifth chunk at the latest (5 x 5 rows x 102 > 2,400), the rest unread."""
    assert sql_query.compile_sql_expression(query, "sqlite") is not None  # answered by the statement
    settings.TOOLHUB_MAX_EVALUATED_BYTES = 2_400
    with pytest.raises(ToolError) as refused:
        execute(tool=texts, arguments={"query": query})
    assert (refused.value.code, str(refused.value), refused.value.details) == (
        "QUERY_TOO_EXPENSIVE",
        REFUSAL,
        {"limit": 2_400},
    )
    assert fetched[:-1] == [5] * (len(fetched) - 1)
    assert sum(fetched) <= 25
    if query in ("map(&text, @)", "[*].text"):  # one text of exactly 102 characters per row on both engines
        assert fetched == [5, 5, 5, 5, 5]


def test_a_compiled_answer_within_the_bound_is_read_whole_in_chunks(settings, texts, fetched):
    settings.TOOLHUB_MAX_EVALUATED_BYTES = 20_400
    assert execute(tool=texts, arguments={"query": "map(&text, @)"}) == [TEXT] * 200
    assert fetched == [5] * 40 + [0]
    settings.TOOLHUB_MAX_EVALUATED_BYTES = 20_399
    fetched.clear()
    with pytest.raises(ToolError) as refused:
        execute(tool=texts, arguments={"query": "map(&text, @)"})
    assert refused.value.code == "QUERY_TOO_EXPENSIVE"
    assert fetched == [5] * 40


def test_a_refused_compiled_answer_through_the_pipeline_is_not_cached(settings, texts, owner):
    """Refused over the bound (nothing kept in the result cache), the same call answers once the bound allows it."""
    settings.TOOLHUB_MAX_EVALUATED_BYTES = 2_400
    settings.TOOLHUB_MAX_RESULT_BYTES = 100_000
    calls.result_cache.clear()
    caller = calls.Caller(surface=Surface.API, user_id=owner.pk)
    target = calls.target_of_tool(texts)

    refused = calls.run_tool_call(
        caller=caller, target=target, name="query_texts", arguments={"query": "map(&text, @)"}
    )
    assert (refused.error.code, str(refused.error)) == ("QUERY_TOO_EXPENSIVE", REFUSAL)
    assert [key for key in calls.result_cache._store.keys() if key[2] == texts.table_id] == []
    assert Table.objects.get(pk=texts.table_id).version == 1
    settings.TOOLHUB_MAX_EVALUATED_BYTES = 20_400
    answered = calls.run_tool_call(
        caller=caller, target=target, name="query_texts", arguments={"query": "map(&text, @)"}
    )
    assert answered.value == [TEXT] * 200


@pytest.fixture
def received(monkeypatch):
    """(status, rows, SQLSTATE) of the results a ChunkedCursor received from PostgreSQL: all but the chunks of one
    column (the set_config statements' rows around a statement in a read's own snapshot; the tests' answers have
    more columns)."""
    results: list[tuple[str, int, str | None]] = []
    real = chunked.ChunkedCursor._result

    def counted(self):
        result = real(self)
        if result is not None and (result.nfields != 1 or result.status != pq.ExecStatus.TUPLES_CHUNK):
            state = result.error_field(pq.DiagnosticField.SQLSTATE)
            results.append((pq.ExecStatus(result.status).name, result.ntuples, state.decode() if state else None))
        return result

    monkeypatch.setattr(chunked.ChunkedCursor, "_result", counted)
    return results


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_on_postgresql_an_answer_past_the_bound_arrives_a_chunk_at_a_time_and_the_read_ends_cleanly(
    settings, texts, fetched, received
):
    """`[*].text` (not windowed: its length is unknown before the end) in the read's own snapshot: PostgreSQL sends the
    answer's rows 5 per result, the refusal is the same, and after it the connection is back out of any transaction
    with the session's statement_timeout, and the next call answers."""
    settings.TOOLHUB_MAX_EVALUATED_BYTES = 2_400
    with connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = '7s'")
    with pytest.raises(ToolError) as refused:
        execute(tool=texts, arguments={"query": "[*].text"})
    assert (refused.value.code, str(refused.value)) == ("QUERY_TOO_EXPENSIVE", REFUSAL)
    assert fetched == [5, 5, 5, 5, 5]
    answer_rows = [rows for status, rows, _state in received if status == "TUPLES_CHUNK"]
    assert answer_rows[:5] == [5, 5, 5, 5, 5]
    assert max(rows for _status, rows, _state in received) == 5  # never the whole answer in one result
    assert connection.get_autocommit()
    assert connection.connection.info.transaction_status == pq.TransactionStatus.IDLE
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "7s"
        cursor.execute("SET statement_timeout = DEFAULT")
    assert Table.objects.get(pk=texts.table_id).version == 1
    assert execute(tool=texts, arguments={"query": "length([*].text)"}) == 200


# 2,000,000 rows of 1 kB: 2 GB if it were sent whole. A select-list generate_series streams (one in FROM would be
# gathered in the server first).
BIG = "SELECT generate_series(1, 2000000) AS n, repeat('x', 1000) AS text"
# What the server may have sent before the cancel stops it: the sockets' buffers (here up to 32 MB received and
# 4 MB sent), about 36,000 of these rows. The bound asserted leaves room; the whole answer is 20 times it.
SENT_AT_MOST = 100_000


def _read_two_chunks_and_stop(monkeypatch) -> None:
    monkeypatch.setattr(sql_query, "FETCH_ROWS", 100)
    with records.engine_cursor(chunked=True) as cursor:
        cursor.execute(BIG)
        assert [len(cursor.fetchmany(100)), len(cursor.fetchmany(100))] == [100, 100]
        cursor.close()


def _assert_cancelled_after_little(received) -> None:
    answer = [rows for status, rows, _state in received if status == "TUPLES_CHUNK"]
    assert answer[:2] == [100, 100]
    assert max(answer) == 100
    assert sum(answer) < SENT_AT_MOST
    assert received[-1] == ("FATAL_ERROR", 0, "57014")  # the statement was cancelled, not read to its end


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_statement_stopped_part_way_in_a_transaction_is_cancelled_and_the_transaction_goes_on(monkeypatch, received):
    """Inside a caller's transaction (the test's): the message ran in a savepoint of its own, rolled back after the
    cancel, so what the transaction did before is still there and its next statements run."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMPORARY TABLE written_before (n integer); INSERT INTO written_before VALUES (1)")
    _read_two_chunks_and_stop(monkeypatch)
    _assert_cancelled_after_little(received)
    assert connection.connection.info.transaction_status == pq.TransactionStatus.INTRANS
    with connection.cursor() as cursor:
        cursor.execute("SELECT n FROM written_before")
        assert cursor.fetchall() == [(1,)]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_statement_stopped_part_way_outside_a_transaction_is_cancelled_and_the_connection_is_idle(
    monkeypatch, received
):
    """In autocommit, alone and in a read's own snapshot (under a budget: the statements carry their timeout)."""
    _read_two_chunks_and_stop(monkeypatch)
    _assert_cancelled_after_little(received)
    assert connection.connection.info.transaction_status == pq.TransactionStatus.IDLE
    received.clear()
    roomy = budget.Limits(cpu_ms=600_000, max_elements=10**9, max_bytes=10**9)
    with budget.enforced(roomy):
        _read_two_chunks_and_stop(monkeypatch)  # alone: SET LOCAL statement_timeout; BIG in one message
        _assert_cancelled_after_little(received)
        received.clear()
        with records._read_transaction():
            _read_two_chunks_and_stop(monkeypatch)  # the read's own snapshot: the timeout set back in the message
            _assert_cancelled_after_little(received)
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
                assert cursor.fetchone() == (1,)
    assert connection.get_autocommit()
    assert connection.connection.info.transaction_status == pq.TransactionStatus.IDLE


def test_the_time_budget_stops_an_answer_part_way(monkeypatch, texts, fetched):
    """The call's time runs out after the second chunk (the clock jumps an hour): QUERY_TOO_EXPENSIVE from the
    check after that chunk, the rest unread, nothing written, and the next call answers."""
    real_clock = budget._monotonic
    jumped = [0.0]
    monkeypatch.setattr(budget, "_monotonic", lambda: real_clock() + jumped[0])
    real_fetch = sql_query.fetch

    class Late:
        def __init__(self, cursor):
            self.cursor = cursor
            self.chunks = 0

        def fetchmany(self, size):
            self.chunks += 1
            if self.chunks == 2:
                jumped[0] = 3_600.0
            return self.cursor.fetchmany(size)

        def close(self):
            self.cursor.close()

    monkeypatch.setattr(sql_query, "fetch", lambda cursor, limit: real_fetch(Late(cursor), limit))
    with pytest.raises(ToolError) as refused:
        execute(tool=texts, arguments={"query": "[*].text"})
    assert refused.value.code == "QUERY_TOO_EXPENSIVE"
    assert refused.value.details == {"limit": "CPU-time budget", "value": default_limits().cpu_ms, "unit": "ms"}
    assert fetched == [5, 5]
    assert Table.objects.get(pk=texts.table_id).version == 1
    jumped[0] = 0.0
    assert execute(tool=texts, arguments={"query": "length([*].text)"}) == 200


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_on_postgresql_a_small_answer_is_still_one_message_and_cancels_nothing(monkeypatch, texts):
    """The read's own snapshot as the server runs it: the table's head, the snapshot's statement, then the compiled
    statement in ONE message (its savepoint, the saved timeout, the call's, the statement, the timeout set back), and
    the commit: no round trip per chunk, no cancel request for an answer read to its end."""
    import psycopg

    cancels: list[int] = []
    monkeypatch.setattr(psycopg.Connection, "cancel_safe", lambda self, **kwargs: cancels.append(1))
    with CaptureQueriesContext(connection) as statements:
        assert execute(tool=texts, arguments={"query": "[?id < `3`].id"}) == [0, 1, 2]
    sent = [statement["sql"] for statement in statements.captured_queries]
    assert [sql.split()[0] for sql in sent] == ["SELECT", "BEGIN", "SELECT", "SAVEPOINT", "COMMIT"]
    message = sent[3]
    assert message.startswith(
        "SAVEPOINT toolhub_chunked; SELECT set_config('toolhub.timeout_before', current_setting('statement_timeout'), "
        "true); SET LOCAL statement_timeout = "
    )
    assert message.endswith(
        "; SELECT set_config('statement_timeout', current_setting('toolhub.timeout_before'), true); "
        "RELEASE SAVEPOINT toolhub_chunked"
    )
    assert cancels == []
