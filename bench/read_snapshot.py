#!/usr/bin/env python
"""What one snapshot per read costs a read of a table stored as rows (docs/tables-at-scale.md, "One snapshot per
read"): the same small reads with the snapshot (records.snapshot: PostgreSQL's REPEATABLE READ, READ ONLY
transaction, SQLite's deferred read transaction, plus one primary-key read of the version in it) and without it
(records.snapshot replaced by one that yields the version the executors read, with no transaction and no query:
the statements each in autocommit, as before), alternating in each round, in one process.

    .venv/bin/python bench/read_snapshot.py                      # SQLite
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/read_snapshot.py
    .venv/bin/python bench/read_snapshot.py --records 20000 --calls 300 --rounds 5

On a throwaway database (bench/data_access.py, its own name on PostgreSQL): a table of `--records` records of
bench/scale.py's shape moved to rows, read through the executors (executors.execute, no budget): select of 3 keys,
a filter that compiles to one statement, preview of 10 records. Per read: the median wall and CPU microseconds of
a call with and without the snapshot and their ratio (CPU is what the machine's load does not inflate).
"""

import argparse
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import bench.data_access  # noqa: E402
from bench.data_access import in_throwaway_database  # noqa: E402
from bench.scale import iter_records  # noqa: E402

bench.data_access.BENCH_DATABASE = "th_bench_read_snapshot"  # not the other benches' database


def run(args: argparse.Namespace, database) -> int:
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from tools_app import services
    from tools_app.execution import records
    from tools_app.execution.executors import execute

    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_superuser("bench", password="bench-password-1")
    table = services.table_create(owner=owner, name="orders", data=list(iter_records(args.records)))
    tools = {
        kind: services.tool_create(
            owner=owner,
            name=f"orders_{kind}",
            type=kind,
            table=table,
            json_path="",
            description="Orders.",
            metadata={"key_field": "id", **({"preview_keys": ["id", "status"]} if kind == "preview" else {})},
        )
        for kind in ("select", "query_data", "preview")
    }
    assert records.table_to_rows(table.pk)
    reads = {
        "select 3 keys": (tools["select"], {"keys": [1, args.records // 2, args.records - 1]}),
        "compiled filter": (tools["query_data"], {"query": f"[?id == `{args.records // 3}`].status"}),
        "preview 10": (tools["preview"], {"limit": 10, "offset": 100}),
    }
    real = records.snapshot
    version = table.version

    @contextlib.contextmanager
    def none(_table_id: int):
        yield version

    modes = {"snapshot": real, "none": none}
    wall: dict[tuple[str, str], list[float]] = {(read, mode): [] for read in reads for mode in modes}
    cpu: dict[tuple[str, str], list[float]] = {(read, mode): [] for read in reads for mode in modes}
    for tool, arguments in reads.values():  # warm: plans, layouts, the document cache
        for _ in range(20):
            execute(tool=tool, arguments=arguments)
    for _round in range(args.rounds):
        for read, (tool, arguments) in reads.items():
            for mode, snapshot_of in modes.items():
                records.snapshot = snapshot_of  # type: ignore[assignment]
                for _ in range(args.calls):
                    started, started_cpu = time.perf_counter(), time.process_time()
                    execute(tool=tool, arguments=arguments)
                    wall[(read, mode)].append((time.perf_counter() - started) * 1e6)
                    cpu[(read, mode)].append((time.process_time() - started_cpu) * 1e6)
    records.snapshot = real
    print(f"{database.label}: {args.records:,} records as rows; {args.rounds} rounds x {args.calls} calls per read")
    print(f"load average at the end: {' '.join(f'{value:.2f}' for value in os.getloadavg())}")
    print(f"{'read':18} {'wall µs snap/none':>20} {'ratio':>6} {'CPU µs snap/none':>20} {'ratio':>6}")
    for read in reads:
        w = [statistics.median(wall[(read, mode)]) for mode in modes]
        c = [statistics.median(cpu[(read, mode)]) for mode in modes]
        print(f"{read:18} {w[0]:9.0f} / {w[1]:8.0f} {w[0] / w[1]:6.2f} {c[0]:9.0f} / {c[1]:8.0f} {c[0] / c[1]:6.2f}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    return in_throwaway_database(lambda database: run(args, database))


if __name__ == "__main__":
    sys.exit(main())
