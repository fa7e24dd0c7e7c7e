#!/usr/bin/env python
"""Differential fuzz of JMESPath compiled to SQL (tools_app/data_access/sql_query.py) against jmespath itself.

Generates collections (arrays and objects of records: ints, floats, big integers, strings with unicode,
booleans, nulls, missing fields, nested objects and arrays) and queries over them (filters, projections,
multi-selects, sort_by, sort, reverse, map, slices, length/sum/avg/min/max/max_by/min_by, pipes; tools_app/tests/
sql_differential.py), stores each collection as rows, and compares for every pair the outcome of the
compiled SQL (or of the Python evaluator, when the data sends the query there) with `jmespath.search` on
the original collection: the result with its exact types and key order, or the exception class and message.

It runs against a throwaway database it creates and removes: a temporary SQLite file by default; with
DATABASE_URL=postgres://..., the database `th_bench_sql_fuzz` on that server.

    .venv/bin/python bench/sql_fuzz.py [--pairs 100000] [--per-collection 50] [--seed 1]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/sql_fuzz.py

Prints the count of pairs, how each was answered and the number of differences (target: 0), and the first
differences found. Exit status 1 when there is one.
"""

import argparse
import random
import time

import data_access as throwaway  # bench/data_access.py: the throwaway database

throwaway.BENCH_DATABASE = "th_bench_sql_fuzz"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=100_000, help="query/collection pairs (default 100000)")
    parser.add_argument("--per-collection", type=int, default=50, help="queries per collection (default 50)")
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    parser.add_argument("--show", type=int, default=10, help="differences printed (default 10)")
    args = parser.parse_args()
    return throwaway.in_throwaway_database(lambda database: run(args, database.label))


def run(args: argparse.Namespace, label: str) -> int:
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from tools_app import services
    from tools_app.tests import sql_differential as differential

    print(f"JMESPath -> SQL differential fuzz — {label}")
    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_user(username="fuzz", password="fuzz-password-1")
    table = services.table_create(owner=owner, name="fuzz", data=[])
    rng = random.Random(args.seed)
    tally = differential.Tally()
    started = time.perf_counter()
    collections = 0
    while tally.pairs < args.pairs:
        stored = differential.store(table, f"/c{collections}", differential.random_collection(rng))
        collections += 1
        for _ in range(min(args.per_collection, args.pairs - tally.pairs)):
            tally.add(differential.query(rng, stored.root), stored)
        if collections % 200 == 0:
            print(f"  {tally.line()} ({time.perf_counter() - started:.0f} s)", flush=True)
    print(f"{collections:,} collections; {tally.line()}; {time.perf_counter() - started:.0f} s")
    for expression, data, expected, got in tally.differences[: args.show]:
        print(f"\nDIFFERENCE {expression}\n  data: {data!r}\n  jmespath: {expected!r}\n  sql: {got!r}")
    return 1 if tally.differences else 0


if __name__ == "__main__":
    raise SystemExit(main())
