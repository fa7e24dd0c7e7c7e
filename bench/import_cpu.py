#!/usr/bin/env python
"""The CPU an import costs per record: `services.table_import` of an NDJSON file in one process.

    DATABASE_URL=... .venv/bin/python bench/import_cpu.py --records 100000 --runs 3 [--ab OTHER_CHECKOUT]

Writes `--records` records of the bench shape (bench/scale.py iter_records: ~300 bytes of JSON each) as NDJSON
(once, cached under the temporary directory), then imports it `--runs` times into the migrated database
DATABASE_URL names (an SQLite file or PostgreSQL), deleting each table after its run. Prints, per run and as
medians, this process's CPU seconds for the import (SQLite's engine runs in the process) and, on PostgreSQL,
the backend's (its /proc accounting, read before and after), with the load average.

`--ab DIR` runs this script from DIR (another checkout: the baseline) and from this one in turn, one process per
run (A B A B ...), and prints both medians and the ratio: the same machine's drift hits both sides.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def data_file(records: int) -> Path:
    path = Path(tempfile.gettempdir()) / f"toolhub_import_cpu_{records}.ndjson"
    if not path.exists():
        sys.path.insert(0, str(ROOT / "bench"))
        from scale import write_ndjson

        write_ndjson(path, records)
    return path


def backend_cpu(cursor) -> float:
    """The PostgreSQL backend's CPU seconds so far (it runs on this machine), 0 on SQLite."""
    if cursor.db.vendor != "postgresql":
        return 0.0
    cursor.execute("SELECT pg_backend_pid()")
    fields = Path(f"/proc/{cursor.fetchone()[0]}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_once(path: Path) -> dict:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolhub.settings")
    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import connection

    from tools_app.services.imports import table_import

    user, _ = get_user_model().objects.get_or_create(username="import-cpu")
    with connection.cursor() as cursor, path.open("rb") as file:
        backend = backend_cpu(cursor)
        cpu = time.process_time()
        wall = time.perf_counter()
        with table_import(owner=user, name=f"import-cpu-{os.getpid()}", file=file, fmt="ndjson") as imported:
            while imported.document.read(1 << 20):
                pass
        result = {
            "cpu": time.process_time() - cpu,
            "backend": backend_cpu(cursor) - backend,
            "wall": time.perf_counter() - wall,
            "bytes": imported.table.data_bytes,
        }
        imported.table.delete()
    return result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--ab", help="another checkout: run its copy of this script and this one in turn")
    parser.add_argument("--once", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    path = data_file(args.records)
    if args.once:
        print(json.dumps(run_once(path)))
        return 0
    sides = {"this": ROOT, **({"other": Path(args.ab).resolve()} if args.ab else {})}
    results: dict[str, list[dict]] = {side: [] for side in sides}
    for run in range(args.runs):
        for side, root in sides.items():
            done = subprocess.run(
                [sys.executable, str(root / "bench" / "import_cpu.py"), "--records", str(args.records), "--once"],
                cwd=root,
                capture_output=True,
                text=True,
                check=True,
            )
            results[side].append(json.loads(done.stdout.strip().splitlines()[-1]))
            figures = results[side][-1]
            print(
                f"run {run + 1} {side}: cpu {figures['cpu']:.2f} s, backend {figures['backend']:.2f} s, "
                f"wall {figures['wall']:.1f} s, data_bytes {figures['bytes']}, load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    medians = {
        side: {key: statistics.median(run[key] for run in runs) for key in ("cpu", "backend", "wall")}
        for side, runs in results.items()
    }
    for side, figures in medians.items():
        cpu, backend, wall = figures["cpu"], figures["backend"], figures["wall"]
        print(f"median {side}: cpu {cpu:.2f} s, backend {backend:.2f} s, wall {wall:.1f} s")
    if args.ab:
        ratios = [a["cpu"] / b["cpu"] for a, b in zip(results["this"], results["other"], strict=True)]
        print(
            f"cpu this/other per pair: {', '.join(f'{r:.3f}' for r in ratios)}; median {statistics.median(ratios):.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
