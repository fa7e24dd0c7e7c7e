"""How much memory a process's table cache keeps: a process reading many document tables, side by side for two
checkouts (before and after the cache was bounded in bytes).

    python bench/table_cache_memory.py [--trees before=/path/to/base,after=.] [--tables 20] [--mib 5]
        [--rounds 2] [--database-url postgres://postgres@127.0.0.1:5432/postgres]

For each checkout (`--trees name=path,...`, in turn, each on a fresh database: an SQLite file, or a PostgreSQL
database created and dropped on `--database-url`) one process creates `--tables` document tables of about
`--mib` MiB of JSON each (bench/bench_data.py's records), and another, fresh, reads each of them whole through
the table cache (services.table_data, what every read of a document table goes through), in order, `--rounds`
times. Printed per checkout: the reading process's resident memory (VmRSS) before the reads, after them
(malloc_trim'd, so what the cache holds, not freed memory glibc kept) and its peak (VmHWM); the tables and the
JSON bytes the cache holds at the end; and how many snapshot loads the last round made (a table the cache kept is
not loaded again). Also printed once: what one parsed document takes in memory (tracemalloc) against its JSON.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.live_server import PYTHON, server_database  # noqa: E402

PRELUDE = (
    "import django, json, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'toolhub.settings'); django.setup()\n"
)

SEED = """
import sys
sys.path.insert(0, os.getcwd())
from django.contrib.auth import get_user_model
from bench.bench_data import rows
from tools_app import services
owner = get_user_model().objects.create_user("cache-bench", password="cache-bench-password-1")
records = rows(int({mib} * 1024 * 1024 / 90))
ids = [services.table_create(owner=owner, name=f"t{{i}}", data=records).pk for i in range({tables})]
print(json.dumps({{"ids": ids}}))
"""

READ = """
import ctypes, gc, time
from pathlib import Path
from django.db import connection
from django.test.utils import CaptureQueriesContext
from tools_app import services
from tools_app.models import Table
from tools_app.services.table_cache import table_cache

def status(field):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) // 1024

def trimmed():
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    return status("VmRSS")

ids = {ids}
sizes = dict(Table.objects.filter(pk__in=ids).values_list("pk", "data_bytes"))
Table.objects.count()
before = trimmed()
started = time.perf_counter()
for round_ in range({rounds}):
    with CaptureQueriesContext(connection) as queries:
        for pk in ids:
            services.table_data(pk)
loads = sum(1 for query in queries.captured_queries if "snapshot" in query["sql"])
seconds = time.perf_counter() - started
held = [pk for pk in ids if table_cache.held(pk) is not None]
print(json.dumps({{
    "rss_before_mib": before, "rss_after_mib": trimmed(), "peak_mib": status("VmHWM"), "seconds": round(seconds, 1),
    "held": len(held), "held_json_mib": round(sum(sizes[pk] for pk in held) / 2**20, 1),
    "last_round_loads": loads,
}}))
"""

PARSED = """
import json, tracemalloc
from bench.bench_data import rows
text = json.dumps(rows(int({mib} * 1024 * 1024 / 90)))
tracemalloc.start()
document = json.loads(text)
parsed = tracemalloc.get_traced_memory()[0]
print(json.dumps({{"json_mib": round(len(text) / 2**20, 2), "parsed_mib": round(parsed / 2**20, 1),
                  "factor": round(parsed / len(text), 2)}}))
"""


def run(tree: Path, env: dict, code: str, *, django: bool = True) -> dict:
    done = subprocess.run(
        [PYTHON, "-c", (PRELUDE if django else "") + code],
        cwd=tree,
        env={**env, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trees", default=f"this={ROOT}")
    parser.add_argument("--tables", type=int, default=20)
    parser.add_argument("--mib", type=float, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--database-url", default="")
    args = parser.parse_args()
    if args.database_url:
        os.environ["DATABASE_URL"] = args.database_url
    else:
        os.environ.pop("DATABASE_URL", None)
    parsed = run(ROOT, dict(os.environ), PARSED.format(mib=args.mib), django=False)
    print(f"one document: {parsed['json_mib']} MiB of JSON, {parsed['parsed_mib']} MiB parsed ({parsed['factor']}x)")
    engine = "PostgreSQL" if args.database_url else "SQLite"
    print(f"{args.tables} document tables of ~{args.mib} MiB of JSON, {args.rounds} rounds of reads, {engine}")
    print("| tree | RSS before | RSS after (trimmed) | peak | tables held | JSON held | loads in last round | time |")
    print("|---|---|---|---|---|---|---|---|")
    for pair in args.trees.split(","):
        name, path = pair.split("=", 1)
        tree = Path(path).resolve()
        with tempfile.TemporaryDirectory() as directory:
            with server_database(f"cache_{name}", Path(directory), secret="cache-bench-secret-" + "x" * 40) as env:
                env = {**env, "TOOLHUB_NEW_TABLE_STORAGE": "document", "TOOLHUB_MAX_TABLE_BYTES": str(2**30)}
                ids = run(tree, env, SEED.format(mib=args.mib, tables=args.tables))["ids"]
                out = run(tree, env, READ.format(ids=ids, rounds=args.rounds))
        print(
            f"| {name} | {out['rss_before_mib']} MiB | {out['rss_after_mib']} MiB | {out['peak_mib']} MiB |"
            f" {out['held']} | {out['held_json_mib']} MiB | {out['last_round_loads']} | {out['seconds']} s |"
        )


if __name__ == "__main__":
    main()
