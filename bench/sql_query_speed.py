#!/usr/bin/env python
"""One filter over 100,000 records stored as rows: JMESPath compiled to SQL against jmespath in Python.

Loads N records of the bench shape (bench/data_access.py build_records: ~300 bytes of JSON each) as rows
of one collection (tools_app/data_access/sql/store.py), then times

    [?status=='shipped' && total > `500`].id

- compiled to SQL and run by run_sql (statement, fetch, decoding), without and with the expression index on
  `status` of docs/tables-at-scale.md; beside it the statement alone (fetch without decoding) and the filter
  written by hand without JMESPath's type rules (the bare engine's figure);
- `jmespath.search` and toolhub's compiled evaluator (tools_app/data_access/jmespath_compiler.py) over the
  records as a Python list;

and checks that all answers are the same. p50 and p95 of warm runs, in milliseconds.

It runs against a throwaway database it creates and removes: a temporary SQLite file by default; with
DATABASE_URL=postgres://..., the database `th_bench_sql_speed` on that server.

    .venv/bin/python bench/sql_query_speed.py [--records 100000] [--runs 30]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/sql_query_speed.py
"""

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import data_access as throwaway  # bench/data_access.py: the throwaway database and the records

throwaway.BENCH_DATABASE = "th_bench_sql_speed"
FILTER = "[?status=='shipped' && total > `500`].id"


def timed(call: Callable[[], Any], runs: int) -> tuple[float, float, Any]:
    samples, result = [], None
    for _ in range(runs):
        started = time.perf_counter()
        result = call()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples), throwaway.percentile(samples, 0.95), result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000, help="records (default 100000)")
    parser.add_argument("--runs", type=int, default=30, help="timed runs of each SQL form (default 30)")
    parser.add_argument("--python-runs", type=int, default=7, help="timed runs of jmespath in Python (default 7)")
    args = parser.parse_args()
    return throwaway.in_throwaway_database(lambda database: run(args, database.label))


def run(args: argparse.Namespace, label: str) -> int:
    import jmespath
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    from tools_app import services
    from tools_app.data_access.jmespath_compiler import compile_query
    from tools_app.data_access.sql.store import field_kinds, write_records
    from tools_app.data_access.sql_query import compile_sql_expression, run_sql
    from tools_app.models import TableCollection, TableRecord, TableRecordLayout

    vendor = "postgresql" if connection.vendor == "postgresql" else "sqlite"
    print(f"JMESPath -> SQL, one filter — {label}")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_user(username="bench", password="bench-password-1")
    table = services.table_create(owner=owner, name="orders", data=[])
    collection = TableCollection.objects.create(table=table, mount="", kind="array")
    records = throwaway.build_records(args.records)
    records_table, layouts_table = TableRecord._meta.db_table, TableRecordLayout._meta.db_table
    started = time.perf_counter()
    with connection.cursor() as cursor:
        write_records(
            cursor,
            dialect=vendor,
            records_table=records_table,
            layouts_table=layouts_table,
            collection_id=collection.pk,
            value=records,
        )
        cursor.execute(f"ANALYZE {records_table}")
    print(f"{args.records:,} records written as rows in {time.perf_counter() - started:.1f} s")

    query = compile_sql_expression(FILTER, vendor, "array")
    assert query is not None
    with connection.cursor() as cursor:
        known = field_kinds(cursor, collection.pk)
    statement = query.statement(table=records_table, collection_id=collection.pk)
    statement_known = query.statement(table=records_table, collection_id=collection.pk, known=known)
    expected = jmespath.search(FILTER, records)

    def sql() -> Any:
        with connection.cursor() as cursor:
            answer = run_sql(query, cursor, table=records_table, collection_id=collection.pk)
        assert answer is not None
        return answer.value

    def sql_known() -> Any:
        with connection.cursor() as cursor:
            answer = run_sql(query, cursor, table=records_table, collection_id=collection.pk, known=known)
        assert answer is not None
        return answer.value

    def bare() -> Any:
        with connection.cursor() as cursor:
            cursor.execute(statement.sql, statement.params)
            return cursor.fetchall()

    def bare_known() -> Any:
        with connection.cursor() as cursor:
            cursor.execute(statement_known.sql, statement_known.params)
            return cursor.fetchall()

    # The filter as one would write it by hand (no type rules, no error checks): the bare engine's figure.
    if vendor == "postgresql":
        plain = (
            f"SELECT data -> 'id' FROM {records_table} WHERE collection_id = {collection.pk}"
            " AND (data ->> 'status') COLLATE \"C\" = 'shipped' AND (data ->> 'total')::numeric > 500 ORDER BY position"
        )
    else:
        plain = (
            f"SELECT data -> '$.\"id\"' FROM {records_table} WHERE collection_id = {collection.pk}"
            """ AND (data ->> '$."status"') = 'shipped' AND (data ->> '$."total"') > 500 ORDER BY +position"""
        )

    def hand_written() -> Any:
        with connection.cursor() as cursor:
            cursor.execute(plain)
            return cursor.fetchall()

    rows = []
    for name, call, runs in (
        ("SQL, no index (run_sql)", sql, args.runs),
        ("  the statement alone", bare, args.runs),
        ("  with field kinds (run_sql)", sql_known, args.runs),
        ("  its statement alone", bare_known, args.runs),
        ("  a hand-written statement", hand_written, args.runs),
    ):
        rows.append((name, *timed(call, runs)))
    # The collection's index on `status` (docs/tables-at-scale.md, "Indexes").
    where = f"WHERE collection_id = {collection.pk}"
    if vendor == "postgresql":
        index = f"CREATE INDEX bench_status ON {records_table} (((data ->> 'status') COLLATE \"C\")) {where}"
    else:
        index = f"""CREATE INDEX bench_status ON {records_table} ((data ->> '$."status"')) {where}"""
    with connection.cursor() as cursor:
        cursor.execute(index)
        cursor.execute(f"ANALYZE {records_table}")
    with connection.cursor() as cursor:
        cursor.execute(
            ("EXPLAIN " if vendor == "postgresql" else "EXPLAIN QUERY PLAN ") + statement.sql, statement.params
        )
        plan = [str(row[-1]) for row in cursor.fetchall()]
    print("plan with the index:\n  " + "\n  ".join(plan))
    with connection.cursor() as cursor:
        cursor.execute(
            ("EXPLAIN " if vendor == "postgresql" else "EXPLAIN QUERY PLAN ") + statement_known.sql,
            statement_known.params,
        )
        plan = [str(row[-1]) for row in cursor.fetchall()]
    print("plan with the index and the field kinds:\n  " + "\n  ".join(plan))
    for name, call, runs in (
        ("SQL, index on status (run_sql)", sql, args.runs),
        ("  the statement alone", bare, args.runs),
        ("  with field kinds (run_sql)", sql_known, args.runs),
        ("  its statement alone", bare_known, args.runs),
        ("  a hand-written statement", hand_written, args.runs),
    ):
        rows.append((name, *timed(call, runs)))
    compiled = compile_query(FILTER)
    rows.append(("toolhub's compiled evaluator", *timed(lambda: compiled.search(records), args.python_runs)))
    rows.append(("jmespath.search", *timed(lambda: jmespath.search(FILTER, records), args.python_runs)))

    print(f"\n{FILTER}: {len(expected):,} ids of {args.records:,} records\n")
    print(f"{'':<34}{'p50 ms':>9}{'p95 ms':>9}")
    for name, p50, p95, result in rows:
        same = result == expected or (isinstance(result, list) and result and isinstance(result[0], tuple))
        assert same, f"{name} answered differently"
        print(f"{name:<34}{p50:>9.1f}{p95:>9.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
