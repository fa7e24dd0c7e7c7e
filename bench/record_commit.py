#!/usr/bin/env python
"""What the WAL flush costs a read's call record on PostgreSQL (docs/call-log.md, "What it costs a call"): the
pipeline's own record of a read (`pipeline._record`: the call-log row, the use count, the key's last use, one
statement committed by itself) with its asynchronous commit (`SET LOCAL synchronous_commit TO OFF` in the same
message, as it is sent) and without it (`pipeline._unflushed` replaced by one that returns the statement as it is:
a commit that waits for the WAL flush), alternating call by call, in one process.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/record_commit.py
    DATABASE_URL=... .venv/bin/python bench/record_commit.py --calls 400

On a throwaway database (bench/data_access.py, its own name): bench/seed_mcp.py's instance, key and tools over
100 records; the record is that of a query_data call answered with a 3 kB result (kept whole in the call log).
Prints the median and 90th percentile wall milliseconds of each, and their ratio, with the load average: the
flush is a wait for the disk, so the wall time is what it costs a call (CPU time hardly moves).
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import bench.data_access  # noqa: E402
from bench.data_access import in_throwaway_database, percentile  # noqa: E402

bench.data_access.BENCH_DATABASE = "th_bench_record_commit"  # not the other benches' database


def run(args: argparse.Namespace, database) -> int:
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone

    if connection.vendor != "postgresql":
        print("PostgreSQL only (SQLite commits without a flush: synchronous=NORMAL); set DATABASE_URL.")
        return 2
    call_command("migrate", verbosity=0)
    from seed_mcp import seed

    from tools_app.execution import pipeline
    from tools_app.models import Surface
    from tools_app.selectors import binding_call_target

    seeded = seed("bench", 100, "bench")
    key_id = pipeline.ApiKey.objects.get(mcp_instance_id=seeded["instance_id"]).pk
    target = binding_call_target(
        instance_id=seeded["instance_id"], slug="bench", api_key_id=key_id, name="orders_query"
    )
    assert target is not None
    caller = pipeline.Caller(surface=Surface.MCP, user_id=target.owner_id, api_key_id=key_id)
    value = [{"id": n, "customer": f"customer-{n}", "status": "paid", "total": n * 1.5} for n in range(40)]
    arguments = {"query": "[?status=='paid']"}
    asynchronous = pipeline._unflushed

    def record(flushed: bool) -> float:
        pipeline._unflushed = (lambda statement: statement) if flushed else asynchronous
        outcome = pipeline.CallOutcome(name="orders_query", tool_type="query_data", value=value)
        started = time.perf_counter()
        pipeline._record(caller, target, outcome, timezone.now(), arguments)
        return (time.perf_counter() - started) * 1000

    samples: dict[bool, list[float]] = {True: [], False: []}
    for number in range(args.warmup + args.calls):
        order = (True, False) if number % 2 else (False, True)
        for flushed in order:
            took = record(flushed)
            if number >= args.warmup:
                samples[flushed].append(took)
    pipeline._unflushed = asynchronous
    load = os.getloadavg()
    print(f"{args.calls} records each, alternating, PostgreSQL; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print(f"{'record of a read':<34}{'median ms':>10}{'p90 ms':>10}")
    for flushed, label in ((True, "committed with the WAL flush"), (False, "committed asynchronously")):
        print(f"{label:<34}{statistics.median(samples[flushed]):>10.3f}{percentile(samples[flushed], 0.9):>10.3f}")
    ratio = statistics.median(samples[False]) / statistics.median(samples[True])
    print(f"ratio asynchronous / flushed (median): {ratio:.3f}x")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args()
    return in_throwaway_database(lambda database: run(args, database))


if __name__ == "__main__":
    sys.exit(main())
