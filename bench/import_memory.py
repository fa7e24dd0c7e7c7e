"""How much memory a table import takes in the server process, and how many run at once.

    python bench/import_memory.py [--megabytes 48 | --rows 1000000] [--max-table-mb 200] [--concurrent 4]
        [--only-default] [--database-url postgres://postgres@127.0.0.1:5432/postgres]

Writes a CSV of about `--megabytes` MB (columns id, sku, name, price, qty, active, note: integers, codes,
words, numbers, booleans and a ~40-character note, so the table's JSON is ~1.5x the CSV), starts one
uvicorn process on a database of its own (an SQLite file, or a PostgreSQL database created and dropped on
`--database-url`), and uploads it to `POST /api/tables/import/` from a file on disk (the upload is streamed;
the client holds none of it in memory).

For each upload it prints the answer, the time, and the server's peak resident memory during the request
above its resident memory before it (Linux VmHWM, reset just before: `/proc/<pid>/clear_refs`), as MB and
as a multiple of the file size, and the load average. First with TOOLHUB_MAX_TABLE_BYTES (and
TOOLHUB_MAX_REQUEST_BYTES) raised to `--max-table-mb` (the import succeeds), then with every limit at its
default (`--only-default`: this run only; SPEC §10: a 1,000,000-row CSV imports with default settings),
then `--concurrent` uploads at once by one user (statuses, and the peak growth of all of them together).
`--rows N` writes exactly N rows instead of `--megabytes`.
"""

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.live_server import Uvicorn, run_python, server_database  # noqa: E402

SEED = """
from django.contrib.auth import get_user_model
from tools_app.services import api_token_issue
user = get_user_model().objects.create_user("importer", password="importer-password-1")
print(json.dumps({"token": api_token_issue(user=user, via="bench")[1]}))
"""
WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar".split()


def write_csv(path: Path, megabytes: float, rows: int = 0) -> int:
    """Write the CSV: about `megabytes` MB, or exactly `rows` rows when given; returns its size in bytes."""
    rng = random.Random(7)
    target = int(megabytes * 1_000_000)
    size = 0
    with path.open("w", newline="") as out:
        out.write("id,sku,name,price,qty,active,note\r\n")
        row = 0
        while (row < rows) if rows else (size < target):
            row += 1
            note = " ".join(rng.choice(WORDS) for _ in range(6))
            line = (
                f"{row},SKU-{row:07d},{rng.choice(WORDS).title()} {rng.choice(WORDS)},{rng.randint(1, 99999) / 100},"
                f'{rng.randint(0, 500)},{"true" if row % 3 else "false"},"{note}, ""{rng.choice(WORDS)}"""\r\n'
            )
            out.write(line)
            size += len(line)
    return path.stat().st_size


def multipart_file(csv_path: Path, directory: Path, name: str) -> tuple[Path, str]:
    """The multipart/form-data body of an upload, written to a file; (path, content type)."""
    boundary = uuid.uuid4().hex
    body = directory / f"body-{name}.bin"
    with body.open("wb") as out, csv_path.open("rb") as data:
        out.write(f'--{boundary}\r\nContent-Disposition: form-data; name="name"\r\n\r\n{name}\r\n'.encode())
        out.write(
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="data.csv"\r\n'
            "Content-Type: text/csv\r\n\r\n".encode()
        )
        while chunk := data.read(1 << 20):
            out.write(chunk)
        out.write(f"\r\n--{boundary}--\r\n".encode())
    return body, f"multipart/form-data; boundary={boundary}"


def upload(base: str, token: str, body: Path, content_type: str) -> tuple[int, float, str]:
    with body.open("rb") as stream:
        request = urllib.request.Request(
            f"{base}/api/tables/import/",
            data=stream,
            headers={
                "Authorization": f"Token {token}",
                "Content-Type": content_type,
                "Content-Length": str(body.stat().st_size),
            },
        )
        started = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=600) as response:
                answer = response.read()
                status = response.status
        except urllib.error.HTTPError as error:
            answer = error.read()
            status = error.code
    seconds = time.monotonic() - started
    try:
        parsed = json.loads(answer)
        summary = parsed.get("error") or f"table {parsed.get('id')}, {len(parsed.get('data', []))} records"
        if parsed.get("error"):
            summary += ": " + (parsed.get("message") or "") + " " + json.dumps(parsed.get("fields", ""))[:160]
    except ValueError:
        summary = answer[:120].decode(errors="replace")
    return status, seconds, summary


def memory_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def cpu_seconds(pid: int) -> float:
    """The process's CPU time (user + system): on a loaded shared machine, what the work cost, whatever the wait."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measured(pid: int, run, *args) -> tuple:
    """`run(*args)` and the process's peak RSS growth during it, in MB (its CPU seconds in MEASURED_CPU)."""
    time.sleep(0.5)
    before = memory_kb(pid, "VmRSS")
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM := VmRSS
    cpu = cpu_seconds(pid)
    result = run(*args)
    MEASURED_CPU[0] = cpu_seconds(pid) - cpu
    return result, (memory_kb(pid, "VmHWM") - before) / 1024


MEASURED_CPU = [0.0]


def all_at_once(base: str, token: str, bodies: list[tuple[Path, str]]) -> list:
    """The uploads, all started together; their (status, seconds, summary)."""
    results: list = [None] * len(bodies)

    def one(index: int) -> None:
        results[index] = upload(base, token, *bodies[index])

    threads = [threading.Thread(target=one, args=(n,)) for n in range(len(bodies))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--megabytes", type=float, default=48)
    parser.add_argument("--max-table-mb", type=int, default=200)
    parser.add_argument("--rows", type=int, default=0, help="exactly this many rows (instead of --megabytes)")
    parser.add_argument("--only-default", action="store_true", help="only the run with every limit at its default")
    parser.add_argument("--concurrent", type=int, default=4)
    parser.add_argument("--database-url", default="", help="postgres://... (default: an SQLite file)")
    args = parser.parse_args()
    if args.database_url:
        os.environ["DATABASE_URL"] = args.database_url
    else:
        os.environ.pop("DATABASE_URL", None)
    with tempfile.TemporaryDirectory() as directory:
        work = Path(directory)
        csv_path = work / "data.csv"
        size = write_csv(csv_path, args.megabytes, args.rows)
        file_mb = size / 1_000_000
        rows = f", {args.rows:,} rows" if args.rows else ""
        print(
            f"CSV: {file_mb:.1f} MB{rows}; database: {'PostgreSQL' if args.database_url else 'SQLite'}; "
            f"load average {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        runs = (None,) if args.only_default else (args.max_table_mb * 1024 * 1024, None)
        for number, max_table in enumerate(runs):
            (work / str(number)).mkdir()
            with server_database("importmem", work / str(number), secret="m" * 50) as env:
                env.pop("TOOLHUB_DEV", None)
                if max_table:
                    env["TOOLHUB_MAX_REQUEST_BYTES"] = str(int(size * 1.1) + 1_000_000)
                    env["TOOLHUB_MAX_TABLE_BYTES"] = str(max_table)
                token = json.loads(run_python(env, SEED))["token"]
                label = f"TOOLHUB_MAX_TABLE_BYTES={max_table // 1024 // 1024} MiB" if max_table else "default limits"
                with Uvicorn(env) as server:
                    pid = server.process.pid
                    body, content_type = multipart_file(csv_path, work, "one")
                    (status, seconds, summary), growth = measured(pid, upload, server.base, token, body, content_type)
                    print(
                        f"{label}: one import: {status} in {seconds:.1f} s, server CPU {MEASURED_CPU[0]:.1f} s "
                        f"({summary}); peak RSS growth "
                        f"{growth:.0f} MB = {growth / file_mb:.1f}x the file; load average {os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
                    if max_table is None or args.concurrent < 2:
                        continue
                    bodies = [multipart_file(csv_path, work, f"c{n}") for n in range(args.concurrent)]
                    results, growth = measured(pid, all_at_once, server.base, token, bodies)
                    statuses = sorted(status for status, _, _ in results)
                    print(
                        f"{label}: {args.concurrent} imports at once by one user: statuses {statuses}; "
                        f"peak RSS growth {growth:.0f} MB = {growth / file_mb:.1f}x one file",
                        flush=True,
                    )
                    for status, seconds, summary in results:
                        print(f"    {status} in {seconds:.1f} s: {summary[:160]}")


if __name__ == "__main__":
    main()
