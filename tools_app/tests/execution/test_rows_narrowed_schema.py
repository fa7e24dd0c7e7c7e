"""get_data_schema narrowed by a binding's `where` over an array collection stored as rows: the count of the
records within it and the first SCHEMA_SAMPLE of them come from two compiled statements (records._narrowed_sample),
with the answer of the records read in chunks and tested one by one, and of the document table."""

import json
import random
import time

import pytest
from django.db import DatabaseError, connection

from tools_app.data_access import budget, narrowing, sql_query
from tools_app.data_access.shape import describe
from tools_app.execution import records
from tools_app.execution.executors import execute
from tools_app.kernel.errors import ToolError
from tools_app.tests.execution.test_records import _statement_timeout

VALUES = ["acme", "globex", 1, 1.0, True, False, 0, None, "1", ["acme"], {"a": 1}, 1.5]
WHERES = [
    {"customer": "acme"},
    {"n": 1},
    {"n": 1.0},
    {"n": True},
    {"n": "1"},
    {"big": 2**70},
    {"customer": "acme", "n": 1},
    {"customer": ["acme"]},
    {"customer": {"a": 1}},
    {"customer": "nobody"},
    {"x": None},
    {"customer": "acme", "x": None},
]


def _records(count: int, seed: int) -> list:
    """Objects of varied fields and types (some fields missing, equal values of different types: 1, 1.0, true),
    with now and then a record that is no object."""
    rng = random.Random(seed)
    made: list = []
    for index in range(count):
        if rng.random() < 0.05:
            made.append(rng.choice(["text", 5, None, [1], 2.5, True]))
            continue
        record: dict = {"id": index}
        for field in ("customer", "n", "x", "extra"):
            if rng.random() < 0.8:
                record[field] = rng.choice(VALUES[:4] if field == "customer" and rng.random() < 0.5 else VALUES)
        if rng.random() < 0.3:
            record[rng.choice(["note", "tags", "z"])] = rng.choice(VALUES)
        if rng.random() < 0.1:
            record["big"] = rng.choice([2**70, 1, "big"])
        made.append(record)
    return made


# The narrowings read in chunks, not by the engine: an object literal compiles on neither engine (an array on
# PostgreSQL only), an all-null narrowing keeps no record that is no object (narrowing.composes), SQLite compares
# no integer beyond 64 bits.
IN_CHUNKS = {
    "sqlite": {"{'customer': {'a': 1}}", "{'customer': ['acme']}", "{'x': None}", "{'big': 1180591620717411303424}"},
    "postgresql": {"{'customer': {'a': 1}}", "{'x': None}"},
}


def _expected(data: list, where: dict, sample: int) -> dict:
    kept = [record for record in data if narrowing.keeps(where)(record)]
    shape = describe(kept[:sample])
    shape["item_count"] = len(kept)
    return shape


@pytest.fixture
def tables(make_table, make_tool, owner):
    """The same records as a document table and as a rows table, a get_data_schema tool of each."""

    def make(data: list) -> tuple:
        document = make_table(owner, name="document", data=data, storage="document")
        rows = make_table(owner, name="rows", data=data, storage="document")
        assert records.table_to_rows(rows.pk) is True
        return (
            make_tool(owner, document, type="get_data_schema", name="document_schema"),
            make_tool(owner, rows, type="get_data_schema", name="rows_schema"),
        )

    return make


@pytest.fixture
def in_chunks(monkeypatch):
    """Switch the narrowed schema to reading every record in chunks (the path kept for what does not compose)."""

    def switch() -> None:
        monkeypatch.setattr(narrowing, "composes", lambda where: False)

    return switch


@pytest.mark.parametrize("sample", [7, records.SCHEMA_SAMPLE])
def test_the_narrowed_schema_is_the_chunked_one_and_the_documents(tables, monkeypatch, in_chunks, sample):
    # given
    monkeypatch.setattr(records, "SCHEMA_SAMPLE", sample)
    data = _records(400, seed=sample)
    document_tool, rows_tool = tables(data)

    chunked_reads: list[str] = []
    first_records = records._first_records

    def in_python(*args, **kwargs):
        chunked_reads.append(str(where))
        return first_records(*args, **kwargs)

    monkeypatch.setattr(records, "_first_records", in_python)

    # when
    by_sql = {}
    for where in WHERES:
        by_sql[str(where)] = execute(tool=rows_tool, arguments={}, where=where)
    read_in_chunks = set(chunked_reads)
    on_document = {str(where): execute(tool=document_tool, arguments={}, where=where) for where in WHERES}
    in_chunks()
    chunked = {str(where): execute(tool=rows_tool, arguments={}, where=where) for where in WHERES}

    # then
    assert read_in_chunks == IN_CHUNKS[connection.vendor]
    expected = {str(where): _expected(data, where, sample) for where in WHERES}
    assert by_sql == expected
    assert chunked == expected
    assert json.dumps(by_sql) == json.dumps(chunked)  # the fields in the same order too
    counts = {key: shape["item_count"] for key, shape in expected.items()}
    if sample > len(data):
        assert on_document == expected
    else:
        assert counts["{'customer': 'acme'}"] > sample  # the sample is a part of the records kept
    assert counts["{'customer': 'nobody'}"] == 0
    assert by_sql["{'n': 1}"]["fields"]["n"] == ["integer", "number"]
    assert by_sql["{'n': True}"]["fields"]["n"] == ["boolean"]


def test_a_narrowed_schema_of_30000_records_fetches_only_its_sample(tables, monkeypatch):
    """No record is read in chunks: one row of the count, SCHEMA_SAMPLE rows of records."""
    # given
    data = [{"id": n, "customer": "acme" if n % 3 else "globex", "n": [1, 1.0, True][n % 3]} for n in range(30_000)]
    _document_tool, rows_tool = tables(data)
    fetched: list[int] = []
    fetch = sql_query.fetch

    def counted(cursor, limit):
        rows = fetch(cursor, limit)
        fetched.append(len(rows))
        return rows

    def no_chunks(*args, **kwargs):
        raise AssertionError("the records were read in chunks")

    monkeypatch.setattr(sql_query, "fetch", counted)
    monkeypatch.setattr(records, "_chunks", no_chunks)

    # when
    shape = execute(tool=rows_tool, arguments={}, where={"customer": "acme"})

    # then
    assert fetched == [1, records.SCHEMA_SAMPLE]
    assert shape == {
        "root_type": "array",
        "item_count": 20_000,
        "item_types": ["object"],
        "fields": {"id": ["integer"], "customer": ["string"], "n": ["boolean", "number"]},
        "item_template": {"id": "integer", "customer": "string", "n": "number"},
        "optional_fields": [],
    }


def test_a_sample_over_the_evaluated_bytes_is_read_in_chunks_with_the_count_of_the_engine(
    tables, monkeypatch, settings
):
    # given
    data = [{"id": n, "customer": "acme" if n % 2 else "globex", "text": "x" * (n % 7) * 50} for n in range(600)]
    document_tool, rows_tool = tables(data)
    settings.TOOLHUB_MAX_EVALUATED_BYTES = 4_000
    monkeypatch.setattr(records, "SCHEMA_SAMPLE", 100)
    refusals: list[bool] = []
    is_over = budget.is_over_evaluated_bytes

    def seen(error):
        refusals.append(is_over(error))
        return refusals[-1]

    monkeypatch.setattr(budget, "is_over_evaluated_bytes", seen)

    # when
    shape = execute(tool=rows_tool, arguments={}, where={"customer": "acme"})

    # then
    assert refusals == [True]
    assert shape == _expected(data, {"customer": "acme"}, 100)
    assert shape["item_count"] == 300


def test_an_all_null_narrowing_keeps_no_record_that_is_no_object(tables):
    """`[?x == null]` keeps a string; the narrowing does not: such a narrowing is tested in Python."""
    # given
    data = [{"x": None, "a": 1}, "text", 5, [1], {"b": True}, {"x": 2}]
    document_tool, rows_tool = tables(data)

    # when
    shape = execute(tool=rows_tool, arguments={}, where={"x": None})

    # then
    assert shape == execute(tool=document_tool, arguments={}, where={"x": None})
    assert shape["item_count"] == 2
    assert shape["item_types"] == ["object"]


@pytest.mark.django_db(transaction=True)
def test_a_narrowed_schema_the_engine_is_slow_to_count_is_stopped_at_its_budget(
    make_table, make_tool, owner, stuck_records
):
    """Each row read costs the engine 100 ms (5 s in all); under a 400 ms budget the count's statement is
    cancelled by PostgreSQL, and the next call answers."""
    table = make_table(owner, name="stuck", data=[{"id": n, "customer": "acme"} for n in range(50)])
    tool = make_tool(owner, table=table, type="get_data_schema", json_path="")
    records.table_to_rows(table.pk)
    stuck_records.stick()
    timeout_before = _statement_timeout()
    started = time.monotonic()
    with budget.enforced(budget.Limits(cpu_ms=400, max_elements=10**9, max_bytes=10**9)):
        with pytest.raises(ToolError) as stopped:
            execute(tool=tool, arguments={}, where={"customer": "acme"})
    elapsed = time.monotonic() - started
    assert stopped.value.code == "QUERY_TOO_EXPENSIVE"
    assert "CPU-time budget of 400 ms" in str(stopped.value)
    assert "the database statement ran over its" in str(stopped.value)
    assert isinstance(stopped.value.__cause__, DatabaseError)
    assert elapsed < 2.0
    assert _statement_timeout() == timeout_before
    stuck_records.release()
    with budget.enforced(budget.Limits(cpu_ms=60_000, max_elements=10**9, max_bytes=10**9)):
        assert execute(tool=tool, arguments={}, where={"customer": "acme"})["item_count"] == 50


@pytest.mark.django_db(transaction=True)
def test_a_narrowed_schema_over_its_budget_is_stopped_in_the_engine(make_table, make_tool, owner):
    # given
    data = [{"id": n, "customer": "acme" if n % 2 else "globex", "text": f"t{n * 7919}"} for n in range(40_000)]
    table = make_table(owner, name="slow", data=data)
    tool = make_tool(owner, table=table, type="get_data_schema", json_path="")
    records.table_to_rows(table.pk)

    # when
    with budget.enforced(budget.Limits(cpu_ms=5, max_elements=10**9, max_bytes=10**9)):
        with pytest.raises(ToolError) as stopped:
            execute(tool=tool, arguments={}, where={"customer": "acme"})

    # then
    assert stopped.value.code == "QUERY_TOO_EXPENSIVE"
    assert "CPU-time budget of 5 ms" in str(stopped.value)
    assert isinstance(stopped.value.__cause__, DatabaseError)
    with budget.enforced(budget.Limits(cpu_ms=60_000, max_elements=10**9, max_bytes=10**9)):
        assert execute(tool=tool, arguments={}, where={"customer": "acme"})["item_count"] == 20_000
