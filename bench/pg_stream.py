#!/usr/bin/env python
"""Peak memory of a worker answering compiled queries over a large rows table: on PostgreSQL the answer received
whole by a plain cursor (`plain`: as before) or a chunk at a time (`chunked`: records.engine_cursor(chunked=True),
tools_app/data_access/sql/chunked.py), side by side; on SQLite (`--sqlite N`) the one way it is read.

    .venv/bin/python bench/pg_stream.py                          # 1M records on PostgreSQL, 3 rounds
    .venv/bin/python bench/pg_stream.py --size 100000 --rounds 1 --sqlite 200000

PostgreSQL's table is bench/scale.py's SQL build of `--size` records (~300 bytes of JSON each), made once in the
database `--built-database` and reused while it holds that build. SQLite's is written into a temporary file by
tools_app.data_access.sql.store.write_records from the same records.

Each measure runs in a process of its own (peak RSS is per process): Django set up, a small compiled query run once
(the warm process), then the query as the tools run it (records._run_compiled in a read's snapshot, under a budget of
10 minutes so that only TOOLHUB_MAX_EVALUATED_BYTES, 50 MiB by default, stops it). Printed per measure: the peak RSS
growth over the warm process (MiB), the elapsed time (ms, a figure to compare side by side only, with the load
average), and the outcome (the answer's length, or the error code). Sides alternate within each round.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
DEFAULT_PG = "postgres://postgres@127.0.0.1:5432/postgres"

QUERIES = [
    "[?total > `0`]",  # every record: refused at the bound (the memory the refusal costs)
    "[?total > `990`]",  # ~1% of the records, answered
    "[?id == `5`].id",  # one value: a small answer over a scan of all rows
]


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(side: str, query: str) -> dict[str, Any]:
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-secret-key-not-for-production")
    os.environ["DJANGO_SETTINGS_MODULE"] = "toolhub.settings"
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.db import connection

    from tools_app.data_access import budget
    from tools_app.data_access.sql_query import compile_sql_expression
    from tools_app.execution import records
    from tools_app.kernel.errors import ToolError
    from tools_app.models import Table

    if side == "plain":
        records._cursor = lambda chunked: connection.cursor()  # type: ignore[assignment]  # the cursor before
    table = Table.objects.get(name="orders")
    limits = budget.Limits(cpu_ms=600_000, max_elements=10**12, max_bytes=10**12)

    def run(expression: str) -> Any:
        compiled = compile_sql_expression(expression, connection.vendor, "array")
        assert compiled is not None, expression
        with budget.enforced(limits), records.snapshot(table.pk):
            answer = records._run_compiled(compiled, records.collections(table.pk)[""])
        assert answer is not None, expression
        return answer.value

    run("[?id == `1`].id")
    before = peak_rss_mib()
    started = time.perf_counter()
    try:
        value = run(query)
        outcome = f"{len(value)} items" if isinstance(value, list) else repr(value)
    except ToolError as exc:
        outcome = exc.code
    elapsed = (time.perf_counter() - started) * 1000
    with connection.cursor() as cursor:  # the connection works after the answer or its refusal
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)
    return {"peak_rss_growth_mib": round(peak_rss_mib() - before, 1), "ms": round(elapsed), "outcome": outcome}


def measure(url: str, side: str, query: str) -> dict[str, Any]:
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_SECRET_KEY": "bench-secret", "DJANGO_ALLOWED_HOSTS": "localhost"}
    done = subprocess.run(
        [PYTHON, __file__, "--child", side, "--query", query], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def sqlite_database(count: int, directory: str) -> str:
    """A SQLite file holding a table `orders` of `count` records as rows (keyed and indexed as bench/scale.py's)."""
    url = f"sqlite:///{directory}/bench.sqlite3"
    code = f"""
import os, sys
sys.path.insert(0, {str(ROOT)!r}); sys.path.insert(0, {str(ROOT / "bench")!r})
os.environ["DJANGO_SETTINGS_MODULE"] = "toolhub.settings"
import django; django.setup()
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection, transaction
from django.test import override_settings
from scale import iter_records
from tools_app import services
from tools_app.data_access.sql.store import write_records
from tools_app.models import TableCollection, TableRecord, TableRecordLayout
call_command("migrate", verbosity=0)
owner = get_user_model().objects.create_user(username="bench", password=None)
with override_settings(TOOLHUB_NEW_TABLE_STORAGE="document"):
    table = services.table_create(owner=owner, name="orders", data=[])
collection = TableCollection.objects.create(table=table, mount="", kind="array")
with transaction.atomic(), connection.cursor() as cursor:
    written = write_records(cursor, dialect="sqlite", records_table=TableRecord._meta.db_table,
                            layouts_table=TableRecordLayout._meta.db_table, collection_id=collection.pk,
                            value=iter_records({count}))
TableCollection.objects.filter(pk=collection.pk).update(record_count=written)
"""
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_SECRET_KEY": "bench-secret"}
    subprocess.run([PYTHON, "-c", code], cwd=ROOT, env=env, check=True)
    return url


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1_000_000, help="records of PostgreSQL's table (0: none)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--database-url", default=os.environ.get("BENCH_PG_URL", DEFAULT_PG))
    parser.add_argument("--built-database", default="th_bench_scale_rows_{size}", help="as bench/scale.py's")
    parser.add_argument("--indexed", default="status,total", help="the build's indexed fields (bench/scale.py's)")
    parser.add_argument("--sqlite", type=int, default=0, help="records of a SQLite table measured too (0: none)")
    parser.add_argument("--queries", default="\n".join(QUERIES), help="JMESPath expressions, one a line")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--query", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.query)))
        return 0

    queries = [query for query in args.queries.splitlines() if query]
    print(f"bench/pg_stream.py — {os.cpu_count()} CPUs, load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}")
    if args.size:
        sys.path.insert(0, str(ROOT / "bench"))
        from urllib.parse import urlsplit, urlunsplit

        import scale

        built = scale.built_database(args, args.size, scale.server_env(args, False))
        url = urlunsplit(urlsplit(args.database_url)._replace(path=f"/{built}"))
        for round_ in range(1, args.rounds + 1):
            for query in queries:
                for side in ("plain", "chunked") if round_ % 2 else ("chunked", "plain"):
                    result = measure(url, side, query)
                    load = os.getloadavg()[0]
                    print(f"PG {args.size:,} round {round_} {side:7} {query!r}: {json.dumps(result)} load {load:.1f}",
                          flush=True)  # fmt: skip
    if args.sqlite:
        with tempfile.TemporaryDirectory(prefix="toolhub-pg-stream-") as directory:
            url = sqlite_database(args.sqlite, directory)
            for query in queries:
                result = measure(url, "sqlite", query)
                load = os.getloadavg()[0]
                print(f"SQLite {args.sqlite:,} {query!r}: {json.dumps(result)} load {load:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
