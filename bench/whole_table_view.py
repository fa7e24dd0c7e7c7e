"""A worker's memory while it serves a rows table whole over the API: `GET /api/tables/<id>/` streamed
(tools_app.api.streamed) against the same answer gathered (`Accept: application/json; indent=1`, which the JSON
renderer writes from the whole document, bounded by TOOLHUB_MAX_EVALUATED_BYTES), side by side on one server.

    python bench/whole_table_view.py [--sizes 100000,1000000] [--repeat 3]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres python bench/whole_table_view.py ...

For each size, a table stored as rows is created in the server's database (services.table_create_rows, records of
~290 bytes of JSON); one uvicorn worker serves it. Each read is measured by the worker's resident memory before it
(VmRSS) and its peak during it (VmHWM, reset before), the bytes received and the wall time; each series of --repeat
reads on a fresh worker (median time, largest growth). Last, the setup export with data (`GET
/api/setup/export/?data=true`: every table made) once, on a fresh worker.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.import_memory import memory_kb  # noqa: E402
from tests.live_server import PYTHON, Uvicorn, server_database  # noqa: E402

SEED = """
from django.contrib.auth import get_user_model
from tools_app import services
user = get_user_model().objects.create_user("reader", password="reader-password-1")
print(json.dumps({"token": services.api_token_issue(user=user, via="bench")[1]}))
"""
TABLE = """
from django.contrib.auth import get_user_model
from tools_app.services.tables import table_create_rows
import tools_app.execution.records  # plugs the rows writer in
user = get_user_model().objects.get(username="reader")
def records(table):
    for n in range({size}):
        yield {{"id": n, "sku": f"SKU-{{n:08d}}", "customer": f"customer {{n % 977}}", "status": ("new", "paid",
               "shipped")[n % 3], "total": (n % 100000) / 100, "items": [{{"sku": f"I{{n % 50}}", "qty": n % 7}}],
               "note": "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november " * 2}}
table = table_create_rows(owner=user, name="t{size}", records=records)
print(json.dumps({{"id": table.pk}}))
"""


def run_python(env: dict, code: str) -> str:
    """tests.live_server.run_python without its two-minute timeout (a million records take longer to write)."""
    prelude = (
        "import django, json, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'toolhub.settings'); django.setup()\n"
    )
    done = subprocess.run(
        [PYTHON, "-c", prelude + code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def reset_peak(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM := VmRSS


def read(url: str, token: str, pid: int, accept: str = "application/json") -> dict:
    request = urllib.request.Request(url, headers={"Authorization": f"Token {token}", "Accept": accept})
    before = memory_kb(pid, "VmRSS")
    reset_peak(pid)
    started = time.monotonic()
    size, status, chunked = 0, 0, False
    try:
        with urllib.request.urlopen(request, timeout=600) as response:
            status, chunked = response.status, response.headers.get("Transfer-Encoding") == "chunked"
            while block := response.read(1 << 20):
                size += len(block)
    except urllib.error.HTTPError as exc:
        status = exc.code
        size = len(exc.read())
    seconds = time.monotonic() - started
    peak = memory_kb(pid, "VmHWM")
    return {"status": status, "chunked": chunked, "bytes": size, "s": seconds, "growth_mb": (peak - before) / 1024}


def series(env: dict, token: str, url: str, repeat: int, accept: str = "application/json") -> dict:
    """`repeat` reads of `url` on a fresh worker (a freed peak is reused by the next read, so each series starts
    from a worker that served only a warm-up request): the median time, the largest growth."""
    with Uvicorn(env) as server:
        pid = server.process.pid  # one worker: the server process (its children are the heavy lane's)
        read(f"{server.base}/api/tables/", token, pid)  # warm: imports, connection
        runs = [read(f"{server.base}{url}", token, pid, accept) for _ in range(repeat)]
    return {
        "status": runs[0]["status"],
        "chunked": runs[0]["chunked"],
        "bytes": runs[0]["bytes"],
        "s": round(statistics.median(run["s"] for run in runs), 2),
        "growth_mb": round(max(run["growth_mb"] for run in runs), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    engine = "postgresql" if os.environ.get("DATABASE_URL", "").startswith("postgres") else "sqlite"
    with tempfile.TemporaryDirectory() as directory, server_database("wtv", Path(directory), secret="b") as env:
        env = {**env, "TOOLHUB_MAX_OWNER_DATA_BYTES": str(1 << 40)}
        token = json.loads(run_python(env, SEED))["token"]
        tables = {size: json.loads(run_python(env, TABLE.format(size=size))) for size in sizes}
        for size in sizes:
            url = f"/api/tables/{tables[size]['id']}/"
            result = {
                "engine": engine,
                "records": size,
                "streamed": series(env, token, url, args.repeat),
                "gathered": series(env, token, url, args.repeat, "application/json; indent=1"),
                "load": round(os.getloadavg()[0], 1),
            }
            print(json.dumps(result), flush=True)
        export = series(env, token, "/api/setup/export/?data=true", 1)
        print(json.dumps({"engine": engine, "setup_export_all_tables": export, "load": round(os.getloadavg()[0], 1)}))


if __name__ == "__main__":
    main()
