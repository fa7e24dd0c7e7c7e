#!/usr/bin/env python
"""Queries that do not compile to SQL over 200,000 records stored as rows: gathered whole, against streamed.

Loads N records of the bench shape (bench/data_access.py build_records: ~300 bytes of JSON each, ~60 MB in
all) as the root collection of a rows table (records.create_collection), then runs through `records.read`
(the read every data tool makes) queries that do not compile to SQL: three that decompose per record

    [?length(items) > `2`].id                                  a filter keeping ids
    length([?max(items[*].price) > `190`])                     a count: nothing kept
    [?status=='shipped'].{id: id, n: length(items)} | [:20]    a projection, then a tail (kept: 20)

and (`--set reduced`, or `all`) four that do not decompose per record, reduced chunk by chunk to what their
answer depends on (a top-k keeps k records, an extreme the best one):

    sort_by(@, &length(items))[:10].id                         a top-k over the records
    sort_by([?status=='paid'], &to_number(total))[-5:].id      a top-k over a filter, from the end
    reverse(sort_by(@, &total))[:3].id                         reversed
    max_by(@, &length(items)).id                               an extreme

and (`--set summary`) two summary multi-selects over the whole collection, answered branch by branch
(tools_app/data_access/multiselect.py: each branch by the path it takes alone, here compiled to SQL)

    {n: length(@), shipped: length([?status=='shipped']), top: max_by(@, &total).id, first: [0].id}
    [?status=='shipped'] | {n: length(@), ids: [:3].id, top: max_by(@, &total).id}

each of them three ways, side by side in one run (a summary: *kept whole*, the path before the split, which
gathers the collection, under the default bound and the raised one, then *branches* under the default bound):

- *gathered* (the path before streaming: every record read into one list, then the evaluator), under the
  default TOOLHUB_MAX_EVALUATED_BYTES (50 MiB): what a call got (QUERY_TOO_EXPENSIVE) and how long it took;
- *gathered* with the bound raised to 1 GiB: the time and memory the gathering path needs to answer;
- *streamed* (tools_app/data_access/streamed.py: chunk by chunk, only results kept) under the default bound.

`--set schema` (not in `all`) times get_data_schema narrowed by a binding's `where` (records.schema) two ways
side by side: *chunked* (the path before: every record read in chunks and tested in Python) and *engine* (the
count and the first SCHEMA_SAMPLE records kept by two compiled statements, records._narrowed_sample), over
narrowings keeping a fifth of the records (more than the sample) and a few dozen.

Prints medians of wall and CPU milliseconds over --runs runs, and the peak of Python allocations during one
run (tracemalloc, run apart from the timed ones), and checks that both answering paths give the same answer.

It runs against a throwaway database it creates and removes: a temporary SQLite file by default; with
DATABASE_URL=postgres://..., the database `th_bench_streamed` (or --database) on that server, dropped and
created again.

    .venv/bin/python bench/streamed_query.py [--records 200000] [--runs 3] [--set all|decomposed|reduced]
        [--queries 1,4]
    .venv/bin/python bench/streamed_query.py --set summary --records 100000
    .venv/bin/python bench/streamed_query.py --set schema
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/streamed_query.py
"""

import argparse
import os
import statistics
from typing import Any
from unittest import mock

import data_access as throwaway  # bench/data_access.py: the throwaway database and the records

throwaway.BENCH_DATABASE = "th_bench_streamed"
QUERIES = {
    "decomposed": [
        "[?length(items) > `2`].id",
        "length([?max(items[*].price) > `190`])",
        "[?status=='shipped'].{id: id, n: length(items)} | [:20]",
    ],
    "reduced": [
        "sort_by(@, &length(items))[:10].id",
        "sort_by([?status=='paid'], &to_number(total))[-5:].id",
        "reverse(sort_by(@, &total))[:3].id",
        "max_by(@, &length(items)).id",
    ],
    "summary": [
        "{n: length(@), shipped: length([?status=='shipped']), top: max_by(@, &total).id, first: [0].id}",
        "[?status=='shipped'] | {n: length(@), ids: [:3].id, top: max_by(@, &total).id}",
    ],
}
RAISED_BOUND = 2**30
NARROWINGS = [{"status": "shipped"}, {"customer": "customer-0042"}]  # --set schema: ~40,000 and ~40 of 200,000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000, help="records (default 200000)")
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each way (default 3)")
    parser.add_argument("--set", choices=["all", *QUERIES, "schema"], default="all", help="which queries (default all)")
    parser.add_argument("--queries", default="", help="1-based positions of the queries to run (default all)")
    parser.add_argument("--database", default=throwaway.BENCH_DATABASE, help="the PostgreSQL database it replaces")
    args = parser.parse_args()
    throwaway.BENCH_DATABASE = args.database
    return throwaway.in_throwaway_database(lambda database: run(args, database.label))


def run(args: argparse.Namespace, label: str) -> int:
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection, transaction
    from django.test import override_settings

    from tools_app import services
    from tools_app.data_access import multiselect, streamed
    from tools_app.data_access.operations import Mount, query_data
    from tools_app.data_access.sql_query import compile_sql_expression
    from tools_app.execution import records
    from tools_app.kernel.errors import ToolError
    from tools_app.models import Table

    vendor = "postgresql" if connection.vendor == "postgresql" else "sqlite"
    if args.set == "schema":
        print(f"get_data_schema narrowed by `where`, chunked vs engine — {label}")
    else:
        print(f"Queries that do not compile to SQL, gathered vs streamed — {label}")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_user(username="bench", password="bench-password-1")
    with override_settings(TOOLHUB_NEW_TABLE_STORAGE="document"):  # a document, moved here with its records
        table = services.table_create(owner=owner, name="orders", data=[])
    with transaction.atomic():
        count = records.create_collection(table.pk, throwaway.build_records(args.records))
        Table.objects.filter(pk=table.pk).update(storage="rows")
    print(f"{count:,} records, {records.max_evaluated_bytes():,} bytes the default bound\n")
    if args.set == "schema":
        return narrowed_schema(args, table.pk)

    def read(expression: str) -> Any:
        return records.read(
            table.pk, 1, Mount("", "id"), query_data, {"query": expression}, over_collection=records.query_collection
        )

    def attempt(expression: str) -> tuple[str, Any]:
        try:
            return "answer", read(expression)
        except ToolError as error:
            return error.code, None

    gathering = mock.patch.object(streamed, "plan", return_value=None)
    whole = mock.patch.object(multiselect, "split", return_value=None)
    raised = override_settings(TOOLHUB_MAX_EVALUATED_BYTES=RAISED_BOUND)
    print(f"{'query':<58}{'way':<22}{'outcome':<21}{'wall ms':>9}{'cpu ms':>9}{'peak MiB':>10}")
    chosen = [expression for name, queries in QUERIES.items() if args.set in ("all", name) for expression in queries]
    if args.queries:
        chosen = [chosen[int(position) - 1] for position in args.queries.split(",")]
    for expression in chosen:
        assert compile_sql_expression(expression, vendor, "array") is None, expression
        ways: tuple[tuple[str, tuple[Any, ...]], ...]
        if expression in QUERIES["summary"]:
            assert multiselect.split(expression, "array") is not None, expression
            ways = (("kept whole, 50 MiB", (whole,)), ("kept whole, 1 GiB", (whole, raised)), ("branches, 50 MiB", ()))
        else:
            assert streamed.plan(expression, "array") is not None, expression
            ways = (
                ("gathered, 50 MiB", (gathering,)),
                ("gathered, 1 GiB", (gathering, raised)),
                ("streamed, 50 MiB", ()),
            )
        answers = []
        for way, contexts in ways:
            for context in contexts:
                context.__enter__()
            try:
                cpu: list[float] = []
                last: list[tuple[str, Any]] = []
                wall = throwaway.timed(
                    lambda expression=expression, last=last: last.append(attempt(expression)), args.runs, cpu=cpu
                )
                outcome, answer = last[-1]
                peak = throwaway.traced_peak(lambda expression=expression: attempt(expression))
            finally:
                for context in reversed(contexts):
                    context.__exit__(None, None, None)
            if outcome == "answer":
                answers.append(answer)
            shown = expression if way == ways[0][0] else ""
            print(
                f"{shown:<58}{way:<22}{str(outcome):<21}{statistics.median(wall):>9.0f}"
                f"{statistics.median(cpu):>9.0f}{peak:>10.1f}"
            )
        assert all(answer == answers[0] for answer in answers), f"different answers for {expression}"
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end; answers equal wherever both answered")
    return 0


def narrowed_schema(args: argparse.Namespace, table_id: int) -> int:
    """get_data_schema narrowed by each of NARROWINGS, read in chunks (narrowing.composes answering False: the
    path kept for a narrowing the engine cannot answer) and by the engine; the answers must be equal."""
    from tools_app.data_access import narrowing
    from tools_app.data_access.operations import Mount
    from tools_app.execution import records

    in_chunks = mock.patch.object(narrowing, "composes", return_value=False)
    print(f"{'narrowing':<34}{'way':<10}{'item_count':>11}{'wall ms':>9}{'cpu ms':>9}{'peak MiB':>10}")
    for where in NARROWINGS:
        answers = []
        for way, contexts in (("chunked", (in_chunks,)), ("engine", ())):
            for context in contexts:
                context.__enter__()
            try:
                last: list[Any] = []
                cpu: list[float] = []

                def schema(where=where, last=last) -> None:
                    last.append(records.schema(table_id, 1, Mount("", "id"), {}, where=where))

                wall = throwaway.timed(schema, args.runs, cpu=cpu)
                peak = throwaway.traced_peak(schema)
            finally:
                for context in reversed(contexts):
                    context.__exit__(None, None, None)
            answers.append(last[-1])
            shown = str(where) if way == "chunked" else ""
            print(
                f"{shown:<34}{way:<10}{last[-1]['item_count']:>11,}{statistics.median(wall):>9.0f}"
                f"{statistics.median(cpu):>9.0f}{peak:>10.1f}"
            )
        assert answers[0] == answers[1], f"different schemas for {where}"
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end; the schemas equal")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
