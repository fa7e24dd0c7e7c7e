"""A compiled query's answer over a rows table (tools_app.data_access.sql_query.run_sql, read by records._query) is
received in chunks and bounded by TOOLHUB_MAX_EVALUATED_BYTES as a gathered read is: an answer past it is refused
after about the bound has been read, whatever the collection's size. SQLite and PostgreSQL alike."""

import pytest

from tools_app.data_access import sql_query
from tools_app.execution import pipeline as calls
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
