#!/usr/bin/env python
"""Benchmark of the data-access layer: one table of N records (default 100,000, ~30 MB).

Measures, through the real entry point `tools_app.execution.executors.execute`: get_data_schema, query_data
with a filter, preview (with preview_keys), select of 10 keys, create of one element, and (through
services.table_update) a rename of the table as the admin saves it; each cold (first call after the
per-process cache was emptied, as after another worker's write) and warm; p50/p95 over repeated
runs; peak memory (tracemalloc peak per operation, ru_maxrss of the process); and jmespath's
interpreter against the compiled query.

It runs against a throwaway database it creates and removes, never the development database:
a temporary SQLite file by default; with DATABASE_URL=postgres://..., the database `th_bench_data`
on that server (dropped first if a previous run left it, and dropped at the end).

    .venv/bin/python bench/data_access.py [--records N] [--warm-runs N] [--cold-runs N]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/data_access.py

Targets: warm query_data p50 <= 50 ms; no read re-parses the document when nothing changed.
"""

import argparse
import gc
import json
import os
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
BENCH_DATABASE = "th_bench_data"
STATUSES = ["new", "paid", "shipped", "cancelled", "refunded"]
FILTER = "[?status=='shipped' && total > `500`].id"
QUERIES = [
    FILTER,
    "[?contains(customer, '-0042')] | length(@)",
    "[*].items[].qty | sum(@)",
    "[?total > `990`].{id: id, customer: customer, total: total}",
    "max_by(@, &total).id",
]
PREVIEW_KEYS = ["id", "customer", "status", "total"]
WORDS = "the order was packed twice and left the warehouse late because the courier asked for a new label".split()


def build_records(count: int, seed: int = 2) -> list[dict[str, Any]]:
    """Order-like records of ~300 bytes of JSON each."""
    rng = random.Random(seed)
    records = []
    for number in range(1, count + 1):
        items = [
            {
                "sku": f"SKU-{rng.randrange(10_000):05d}",
                "qty": rng.randrange(1, 6),
                "price": round(rng.uniform(1, 200), 2),
            }
            for _ in range(rng.randrange(1, 4))
        ]
        records.append(
            {
                "id": number,
                "customer": f"customer-{rng.randrange(5_000):04d}",
                "status": rng.choice(STATUSES),
                "total": round(rng.uniform(1, 1_000), 2),
                "created_at": f"2026-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}T10:00:00Z",
                "items": items,
                "note": " ".join(rng.choice(WORDS) for _ in range(rng.randrange(8, 20))),
            }
        )
    return records


#
# Throwaway database
#


class ThrowawayDatabase:
    """Points DATABASE_URL at a fresh database before Django starts; removes it afterwards."""

    def __init__(self) -> None:
        self.url = os.environ.get("DATABASE_URL", "").strip()
        self.vendor = "postgresql" if self.url.startswith(("postgres://", "postgresql://")) else "sqlite"
        self._tempdir: str | None = None
        self._admin_url: str | None = None

    def __enter__(self) -> "ThrowawayDatabase":
        if self.vendor == "postgresql":
            parts = urlsplit(self.url)
            self._admin_url = urlunsplit(parts._replace(path="/postgres"))
            self._admin(f'DROP DATABASE IF EXISTS "{BENCH_DATABASE}"', f'CREATE DATABASE "{BENCH_DATABASE}"')
            os.environ["DATABASE_URL"] = urlunsplit(parts._replace(path=f"/{BENCH_DATABASE}"))
            self.label = f"PostgreSQL database {BENCH_DATABASE} on {parts.hostname}:{parts.port or 5432}"
        else:
            self._tempdir = tempfile.mkdtemp(prefix="toolhub-bench-")
            path = Path(self._tempdir) / "bench.sqlite3"
            os.environ["DATABASE_URL"] = f"sqlite:///{path}"
            self.label = f"SQLite file {path}"
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self.vendor == "postgresql":
            from django.db import connections

            connections.close_all()
            self._admin(f'DROP DATABASE IF EXISTS "{BENCH_DATABASE}" WITH (FORCE)')
        elif self._tempdir:
            shutil.rmtree(self._tempdir, ignore_errors=True)
        if self.url:
            os.environ["DATABASE_URL"] = self.url
        else:
            os.environ.pop("DATABASE_URL", None)

    def _admin(self, *statements: str) -> None:
        import psycopg

        with psycopg.connect(self._admin_url, autocommit=True) as connection:
            for statement in statements:
                connection.execute(statement)


#
# Measuring
#


def in_throwaway_database(run: Callable[["ThrowawayDatabase"], int]) -> int:
    """Django set up on a throwaway database (this module's settings for benches), then `run(database)`."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-secret-key-not-for-production")
    os.environ["DJANGO_SETTINGS_MODULE"] = "toolhub.settings"
    with ThrowawayDatabase() as database:
        import django

        django.setup()
        return run(database)


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def timed(
    call: Callable[[], Any], runs: int, before: Callable[[], None] | None = None, cpu: list[float] | None = None
) -> list[float]:
    """Wall milliseconds of `runs` calls; `before` (not timed) runs ahead of each call.

    `cpu`, when given, receives the process CPU milliseconds of each call: on a busy machine the
    wall time includes waiting for a core, the CPU time does not.
    """
    samples = []
    for _ in range(runs):
        if before is not None:
            before()
        start, start_cpu = time.perf_counter(), time.process_time()
        call()
        samples.append((time.perf_counter() - start) * 1000)
        if cpu is not None:
            cpu.append((time.process_time() - start_cpu) * 1000)
    return samples


def traced_peak(call: Callable[[], Any], before: Callable[[], None] | None = None) -> float:
    """Peak MiB allocated by Python during one call (tracemalloc; slows the call, so timed apart)."""
    if before is not None:
        before()
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        call()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return (peak - base) / 2**20


class DataLoadCounter:
    """Counts queries that read a table's `data` column, i.e. document parses."""

    def __enter__(self) -> "DataLoadCounter":
        from django.db import connection

        self.count = 0
        self._wrapper = connection.execute_wrapper(self)
        self._wrapper.__enter__()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._wrapper.__exit__(*exc_info)

    def __call__(self, execute, sql, params, many, context):
        if sql.lstrip().upper().startswith("SELECT") and '"data"' in sql:
            self.count += 1
        return execute(sql, params, many, context)


def max_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kilobytes on Linux


def row(name: str, cold: list[float], warm: list[float], warm_cpu: list[float], peaks: tuple[float, float]) -> str:
    return (
        f"{name:<17}{statistics.median(cold):>9.1f}{percentile(cold, 0.95):>9.1f}"
        f"{statistics.median(warm):>9.1f}{percentile(warm, 0.95):>9.1f}{statistics.median(warm_cpu):>9.1f}"
        f"{peaks[0]:>9.1f}{peaks[1]:>9.2f}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000, help="records in the table (default 100000)")
    parser.add_argument("--warm-runs", type=int, default=30, help="timed warm calls per operation (default 30)")
    parser.add_argument("--cold-runs", type=int, default=5, help="timed cold calls per operation (default 5)")
    args = parser.parse_args()
    return in_throwaway_database(lambda database: run(args, database))


def run(args: argparse.Namespace, database: ThrowawayDatabase) -> int:
    import jmespath
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from tools_app import services
    from tools_app.data_access.query import compile_expression
    from tools_app.execution.executors import execute
    from tools_app.models import Table
    from tools_app.services.table_cache import table_cache

    print(f"toolhub data-access benchmark — {database.label}")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_user(username="bench", password="bench-password-1")

    started = time.perf_counter()
    records = build_records(args.records)
    size_mib = len(json.dumps(records, separators=(",", ":"))) / 2**20
    table = services.table_create(owner=owner, name="orders", data=records)
    del records
    print(
        f"table: {args.records:,} records, {size_mib:.1f} MiB of JSON, stored in {time.perf_counter() - started:.1f} s"
    )
    rss_after_setup = max_rss_mib()

    tools = {
        kind: services.tool_create(
            owner=owner, name=f"bench_{kind}", type=kind, table=table, description=f"Benchmark {kind}.", **fields
        )
        for kind, fields in {
            "get_data_schema": {},
            "query_data": {},
            "preview": {"metadata": {"preview_keys": PREVIEW_KEYS}},
            "select": {},
            "create": {},
            "update": {},
            "delete": {},
        }.items()
    }
    step = max(1, args.records // 10)
    select_keys = list(range(1, args.records + 1, step))[:10]
    next_id = iter(range(args.records + 1, args.records + 10_000_000))

    def new_element() -> dict[str, Any]:
        return {"elements": [{"id": next(next_id), "customer": "bench", "status": "new", "total": 1.5}]}

    update_keys = iter(range(1, args.records + 1))
    delete_keys = iter(range(args.records, 0, -1))

    def changed_element() -> dict[str, Any]:
        return {"elements": [{"id": next(update_keys), "status": "paid", "note": "updated by the benchmark"}]}

    calls: dict[str, Callable[[], Any]] = {
        "get_data_schema": lambda: execute(tool=tools["get_data_schema"], arguments={}),
        "query_data": lambda: execute(tool=tools["query_data"], arguments={"query": FILTER}),
        "preview": lambda: execute(tool=tools["preview"], arguments={"offset": args.records // 2, "limit": 50}),
        "select (10 keys)": lambda: execute(tool=tools["select"], arguments={"keys": select_keys}),
        "create (1 elem)": lambda: execute(tool=tools["create"], arguments=new_element()),
        "update (1 elem)": lambda: execute(tool=tools["update"], arguments=changed_element()),
        "delete (1 key)": lambda: execute(tool=tools["delete"], arguments={"keys": [next(delete_keys)]}),
        # As the admin saves a rename: the object comes without its document (the admin defers it).
        "rename table": lambda: services.table_update(
            table=Table.objects.get(pk=table.pk), name=f"orders {next(next_id)}"
        ),
    }
    # Sanity: the operations answer what they should before anything is timed.
    checks = {
        "the filter finds records": bool(calls["query_data"]()),
        "select finds its 10 keys": len(calls["select (10 keys)"]()["items"]) == len(select_keys),
        "preview returns 50 items": len(calls["preview"]()["items"]) == min(50, args.records - args.records // 2),
    }
    failed = [name for name, ok in checks.items() if not ok]
    if failed:
        raise SystemExit(f"benchmark set-up is wrong: {', '.join(failed)} is false")

    print(f"\nmilliseconds (cold: {args.cold_runs} runs after emptying the cache; warm: {args.warm_runs} runs)")
    print("wall p50/p95; 'w cpu' = warm CPU p50; peak = tracemalloc peak MiB of one cold / one warm call")
    print(
        f"{'operation':<17}{'cold p50':>9}{'cold p95':>9}{'warm p50':>9}{'warm p95':>9}{'w cpu':>9}"
        f"{'peak c':>9}{'peak w':>9}"
    )
    results = {}
    loads: dict[str, tuple[int, int]] = {}
    for name, call in calls.items():
        with DataLoadCounter() as cold_loads:
            cold = timed(call, args.cold_runs, before=table_cache.clear)
        call()  # warm the cache for this version (a create leaves the new version cached on commit)
        warm_cpu: list[float] = []
        with DataLoadCounter() as warm_loads:
            warm = timed(call, args.warm_runs, cpu=warm_cpu)
        loads[name] = (cold_loads.count, warm_loads.count)
        peak_cold = traced_peak(call, before=table_cache.clear)
        call()
        peak_warm = traced_peak(call)
        results[name] = (cold, warm)
        print(row(name, cold, warm, warm_cpu, (peak_cold, peak_warm)))
    print("\ndocument loads (queries reading the data column) during the timed runs:")
    for name, (cold_count, warm_count) in loads.items():
        print(f"  {name:<17} cold {cold_count:>3} of {args.cold_runs} calls, warm {warm_count:>3} of {args.warm_runs}")
    print(f"\nru_maxrss: {rss_after_setup:.0f} MiB after building the table, {max_rss_mib():.0f} MiB at the end")

    # The parsed document as the read path holds it, for the interpreter/compiler comparison.
    calls["query_data"]()
    _, data = services.table_data(table.pk)
    print("\njmespath interpreter vs compiled (p50 ms over the cached document)")
    print(f"{'expression':<62}{'interp':>9}{'compiled':>10}{'ratio':>8}")
    for expression in QUERIES:
        interpreted = jmespath.compile(expression)
        compiled = compile_expression(expression)
        assert interpreted.search(data) == compiled.search(data), expression
        slow = statistics.median(timed(lambda e=interpreted: e.search(data), 5))
        fast = statistics.median(timed(lambda e=compiled: e.search(data), 15))
        print(f"{expression:<62}{slow:>9.1f}{fast:>10.1f}{slow / fast:>7.1f}x")

    other = other_worker_reads(table.pk, tools["preview"].pk, lambda: calls["create (1 elem)"](), args.warm_runs)
    print("\nanother process's first read after a write (preview of 50 records; the write made here, the")
    print(f"read in a second process holding the previous version): p50 {statistics.median(other):.1f} ms,")
    print(f"p95 {percentile(other, 0.95):.1f} ms over {len(other)} writes")

    restore_ms = None
    if hasattr(services, "table_restore"):
        current = Table.objects.get(pk=table.pk).version
        target = max(1, current - 20)
        restore = timed(lambda: services.table_restore(table_id=table.pk, version=target), 3)
        restore_ms = statistics.median(restore)
        print(
            f"\nrestore of version {target} (a new version; {current - target} versions back): p50 {restore_ms:.0f} ms"
        )

    if restore_ms is not None:
        from tools_app.models import TableChange

        stored = [
            sum(len(json.dumps(value)) for value in row)
            for row in TableChange.objects.filter(table_id=table.pk).values_list("patch", "inverse", "arguments")
            if len(row[0]) == 1 and row[0][0].get("path")
        ]
        print(
            "\nstorage per one-record write (patch + inverse + arguments, JSON): median"
            f" {statistics.median(stored):.0f} bytes, max {max(stored)} over {len(stored)} writes"
        )

    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")
    writes = {
        name: statistics.median(results[name][1]) for name in ("create (1 elem)", "update (1 elem)", "delete (1 key)")
    }
    print("\ntargets: write p50 <= 20 ms, another process's first read p50 <= 20 ms, restore <= 2 s")
    for name, value in writes.items():
        print(f"  {name:<17} warm p50 {value:.1f} ms, {'met' if value <= 20 else 'NOT met'}")
    first = statistics.median(other)
    print(f"  other-process first read p50 {first:.1f} ms, {'met' if first <= 20 else 'NOT met'}")
    if restore_ms is not None:
        print(f"  restore {restore_ms:.0f} ms, {'met' if restore_ms <= 2000 else 'NOT met'}")
    warm_query = statistics.median(results["query_data"][1])
    verdict = "met" if warm_query <= 50 else "NOT met"
    print(f"\ntarget warm query_data p50 <= 50 ms: {warm_query:.1f} ms, {verdict}")
    return 0 if warm_query <= 50 else 1


READER_SOURCE = """
import os, sys, time
sys.path.insert(0, sys.argv[1])
import django
django.setup()
from tools_app.models import Tool
from tools_app.execution.executors import execute
tool = Tool.objects.get(pk=int(sys.argv[2]))
arguments = {"offset": 10, "limit": 50}
execute(tool=tool, arguments=arguments)
print("ready", flush=True)
for line in sys.stdin:
    if line.strip() != "read":
        break
    start = time.perf_counter()
    execute(tool=tool, arguments=arguments)
    print(f"{(time.perf_counter() - start) * 1000:.3f}", flush=True)
"""


def other_worker_reads(table_id: int, preview_tool_id: int, write: Callable[[], Any], runs: int) -> list[float]:
    """Milliseconds of a second process's first read after each write made here: the reader holds
    the previous version in its cache, as another worker does."""
    import subprocess

    from django.db import connections

    connections.close_all()
    reader = subprocess.Popen(
        [sys.executable, "-c", READER_SOURCE, str(ROOT), str(preview_tool_id)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "toolhub.settings"},
    )
    assert reader.stdin is not None
    assert reader.stdout is not None
    try:
        if reader.stdout.readline().strip() != "ready":
            raise SystemExit("the reader process did not start")
        samples = []
        for _ in range(runs):
            write()
            reader.stdin.write("read\n")
            reader.stdin.flush()
            samples.append(float(reader.stdout.readline()))
        return samples
    finally:
        reader.stdin.close()
        reader.wait(timeout=60)


if __name__ == "__main__":
    sys.exit(main())
