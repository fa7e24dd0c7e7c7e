"""Does a worker give its memory back after an attack? Resident memory before, at the peak of, and after
each step of an attack, side by side for two checkouts.

    python bench/worker_memory.py [--trees before=/path/to/main,after=.] [--megabytes 24]
        [--database-url postgres://postgres@127.0.0.1:5432/postgres]

For each checkout (`--trees name=path,...`, in turn, each on a fresh database: an SQLite file, or a
PostgreSQL database created and dropped on `--database-url`) it starts one uvicorn worker, production-like
(DEBUG off, the real password hasher), and runs, one after another:

1. one CSV import of `--megabytes` MB (`POST /api/tables/import/`, bench/import_memory.py's file);
2. two such imports at once;
3. 600 bad logins at once from 600 addresses (bench/bursts.py).

Printed per step: the worker's resident memory (VmRSS) before, its peak during the step (VmHWM, reset
before it), right after, and `--settle` seconds later. A worker that keeps its peak keeps "after" near
"peak"; one that gives memory back returns near "before".
"""

import argparse
import json
import os
import secrets
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bursts import call, release_together  # noqa: E402
from bench.import_memory import SEED, all_at_once, memory_kb, multipart_file, upload, write_csv  # noqa: E402
from tests.live_server import Uvicorn, run_python, server_database  # noqa: E402


def bad_logins(base: str, count: int) -> list[int]:
    def one(index: int):
        body = json.dumps({"username": f"nobody-{index}", "password": secrets.token_urlsafe(12)}).encode()
        headers = {"Content-Type": "application/json", "X-Forwarded-For": f"10.77.{index // 250}.{index % 250 + 1}"}
        return lambda: call(urllib.request.Request(f"{base}/api/auth/token/", data=body, headers=headers))

    results, _ = release_together([one(index) for index in range(count)])
    return sorted({status for status, _ in results})


def attack(name: str, server: Uvicorn, token: str, one_body, two_bodies, args: argparse.Namespace) -> None:
    """The three steps against `server`, each measured."""
    pid = server.process.pid
    light = urllib.request.Request(f"{server.base}/api/tables/", headers={"Authorization": f"Token {token}"})
    for _ in range(5):
        call(light)
    time.sleep(1)
    steps = [
        ("one import", lambda: upload(server.base, token, *one_body)[0]),
        ("two imports at once", lambda: [answer[0] for answer in all_at_once(server.base, token, two_bodies)]),
        (f"{args.logins} bad logins", lambda: bad_logins(server.base, args.logins)),
    ]
    for label, step in steps:
        before = memory_kb(pid, "VmRSS") / 1024
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM := VmRSS
        statuses = step()
        peak = memory_kb(pid, "VmHWM") / 1024
        right_after = memory_kb(pid, "VmRSS") / 1024
        time.sleep(args.settle)
        later = memory_kb(pid, "VmRSS") / 1024
        print(
            f"{name}: {label} ({statuses}): RSS {before:.0f} MB before, peak {peak:.0f}, "
            f"right after {right_after:.0f}, {args.settle:.0f} s later {later:.0f}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trees", default=f"this={ROOT}", help="name=checkout,... measured in turn")
    parser.add_argument("--megabytes", type=float, default=24)
    parser.add_argument("--logins", type=int, default=600)
    parser.add_argument("--settle", type=float, default=5.0)
    parser.add_argument("--database-url", default="", help="postgres://... (default: an SQLite file)")
    args = parser.parse_args()
    if args.database_url:
        os.environ["DATABASE_URL"] = args.database_url
    else:
        os.environ.pop("DATABASE_URL", None)
    trees = [(name, Path(path).resolve()) for name, _, path in (item.partition("=") for item in args.trees.split(","))]
    with tempfile.TemporaryDirectory() as directory:
        work = Path(directory)
        csv_path = work / "data.csv"
        size = write_csv(csv_path, args.megabytes)
        one_body = multipart_file(csv_path, work, "one")
        two_bodies = [multipart_file(csv_path, work, f"c{n}") for n in range(2)]
        print(f"worker memory: CSV {size / 1e6:.1f} MB, {args.logins} bad logins, settle {args.settle:.0f} s")
        for name, root in trees:
            (work / name).mkdir()
            with server_database("workermem", work / name, secret="w" * 50) as env:
                env.pop("TOOLHUB_DEV", None)
                env["TOOLHUB_MAX_REQUEST_BYTES"] = str(int(size * 1.1) + 1_000_000)
                env["TOOLHUB_MAX_TABLE_BYTES"] = str(200 * 1024 * 1024)
                token = json.loads(run_python(env, SEED))["token"]
                with Uvicorn(env, root=root) as server:
                    attack(name, server, token, one_body, two_bodies, args)


if __name__ == "__main__":
    main()
