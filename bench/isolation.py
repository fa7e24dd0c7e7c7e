#!/usr/bin/env python
"""Isolation under budget-busting queries: light tools/call latency alone, then under a flood.

    python bench/isolation.py [--duration 10] [--light 4] [--flood 4] [--rows 1000] [--database-url URL]

Starts the real server (uvicorn, 1 worker, toolhub.asgi:application) on a fresh database (a temporary
SQLite file, or a database created on the PostgreSQL server of --database-url), seeds two instances of
two users (bench/seed_mcp.py): `light`, called by --light clients with a cheap query (a filter on one id,
a different id each time so that the result cache does not answer), and `flood`, called by --flood
clients that send budget-busting queries in a loop. Each client is a thread with its own keep-alive
HTTP connection speaking MCP (2025-11-25, stateless JSON).

Prints the light calls' p50/p95 alone and under the flood and their ratio (target: p95 under flood
<= 3x alone), every flood payload's answers (code, slowest time; target: its typed error within the
CPU budget + 0.5 s), and the server's RSS growth over the run (VmRSS of the server and its heavy workers, sampled every
20 ms; target < 200 MB).
"""

import argparse
import http.client
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
sys.path.insert(0, str(ROOT))

from tests.live_server import seed_mcp  # noqa: E402

PYTHON = sys.executable
ERA = "2025-11-25"
LIGHT_QUERY = "[?id==`{n}`] | [0]"
DOUBLING = "[@,@]" + "|[@,@]" * 16
FLOOD = {
    "doubling [@,@]|... (125 B)": DOUBLING,
    "to_string of the doubling": DOUBLING + " | to_string(@)",
    "sort_by over the doubling": DOUBLING + " | sort_by(@, &to_string(@))",
    "flatten that doubles": "[@,@]" + "|[@,@][]" * 30,
    "CPU burner (to_string x 256 per row)": " | ".join(["[*].[@,@,@,@] | []"] * 4) + " | [*].to_string(@) | length(@)",
    "== of two doublings": f"({DOUBLING}) == ({DOUBLING})",
    "deep nesting": "[" * 300 + "id" + "]" * 300,
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rss_mib(pid: int, processes: list[int] | None = None) -> float:
    """VmRSS of the server and of its child processes (the heavy workers, tools_app/execution/heavy.py), in MiB."""
    total = 0.0
    for process in [pid, *(children(pid) if processes is None else processes)]:
        try:
            with open(f"/proc/{process}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) / 1024
        except OSError:
            pass  # ended meanwhile
    return total


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


class Client:
    """One MCP client: a keep-alive connection posting tools/call to an instance."""

    def __init__(self, port: int, slug: str, key: str) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.path = f"/mcp/{slug}/"
        self.headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": ERA,
            "Authorization": f"Bearer {key}",
        }

    def call(self, tool: str, query: str) -> dict:
        body = json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": {"query": query}}}
        )
        self.connection.request("POST", self.path, body=body, headers=self.headers)
        response = self.connection.getresponse()
        return json.loads(response.read())


def code_of(reply: dict) -> str:
    result = reply.get("result")
    if result is None:
        return f"JSON-RPC {reply.get('error', {}).get('code')}"
    if not result.get("isError"):
        return "ok"
    return result["content"][0]["text"].split(":", 1)[0]


def light_worker(port: int, seeded: dict, rows: int, stop: threading.Event, samples: list[float], bad: list) -> None:
    client = Client(port, seeded["slug"], seeded["key"])
    rng = random.Random()
    while not stop.is_set():
        query = LIGHT_QUERY.replace("{n}", str(rng.randrange(1, rows + 1)))
        started = time.perf_counter()
        reply = client.call("orders_query", query)
        elapsed = (time.perf_counter() - started) * 1000
        if code_of(reply) != "ok":
            bad.append(code_of(reply))
            print(f"light call answered {code_of(reply)}: {str(reply)[:300]}", file=sys.stderr)
        samples.append(elapsed)


def flood_worker(port: int, seeded: dict, stop: threading.Event, outcomes: dict, lock: threading.Lock) -> None:
    client = Client(port, seeded["slug"], seeded["key"])
    names = list(FLOOD)
    random.shuffle(names)
    index = 0
    while not stop.is_set():
        name = names[index % len(names)]
        index += 1
        started = time.perf_counter()
        reply = client.call("orders_query", FLOOD[name])
        elapsed = time.perf_counter() - started
        with lock:
            outcomes.setdefault(name, []).append((code_of(reply), elapsed))


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))]


def run_light(port: int, seeded: dict, args, flood: dict | None) -> tuple[list[float], list, dict]:
    stop = threading.Event()
    samples: list[float] = []
    bad: list = []
    outcomes: dict = {}
    lock = threading.Lock()
    threads = [
        threading.Thread(target=light_worker, args=(port, {**seeded, "key": key}, args.rows, stop, samples, bad))
        for key in seeded["keys"]
    ]
    if flood is not None:
        threads += [
            threading.Thread(target=flood_worker, args=(port, flood, stop, outcomes, lock)) for _ in range(args.flood)
        ]
    for thread in threads:
        thread.start()
    time.sleep(args.warmup)
    samples.clear()
    bad.clear()
    time.sleep(args.duration)
    stop.set()
    for thread in threads:
        thread.join()
    return samples, bad, outcomes


def prepare(args, workdir: Path) -> tuple[dict, dict, dict]:
    env = {
        **os.environ,
        "DJANGO_SECRET_KEY": os.environ.get("DJANGO_SECRET_KEY", "bench-secret"),
        # What is measured is isolation under budget-busting calls, not the request-rate limit (600/minute
        # per key by default, docs/rate-limits.md), which the light clients' loop would reach in seconds.
        "TOOLHUB_RATE_LIMIT_MCP_KEY": os.environ.get("TOOLHUB_RATE_LIMIT_MCP_KEY", "1000000/second"),
    }
    env.pop("DJANGO_DEBUG", None)
    if args.database_url:
        parts = urlsplit(args.database_url)
        name = f"th_isolation_{os.getpid()}"
        admin = urlunsplit(parts._replace(path="/postgres"))
        subprocess.run(
            ["psql", admin, "-qc", f"DROP DATABASE IF EXISTS {name}", "-c", f"CREATE DATABASE {name}"], check=True
        )
        env["DATABASE_URL"] = urlunsplit(parts._replace(path=f"/{name}"))
        env["BENCH_PG_ADMIN"], env["BENCH_PG_DB"] = admin, name
    else:
        env["DATABASE_URL"] = f"sqlite:///{workdir / 'bench.sqlite3'}"
    subprocess.run([PYTHON, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)

    def seed(slug: str, user: str) -> dict:
        return seed_mcp(env, slug=slug, rows=args.rows, user=user)

    light = seed("light", "light-user")
    # Several MCP clients: one key each, as separate agents would have.
    issue = (
        "import json, sys; import django; django.setup();"
        "from tools_app.models import McpInstance; from tools_app.services import api_key_issue;"
        "instance = McpInstance.objects.get(slug='light');"
        "print(json.dumps([api_key_issue(mcp_instance=instance, label=f'client {n}')[1]"
        f" for n in range({args.light})]))"
    )
    out = subprocess.run(
        [PYTHON, "-c", issue],
        cwd=ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "toolhub.settings"},
        check=True,
        capture_output=True,
        text=True,
    )
    light["keys"] = json.loads(out.stdout.strip().splitlines()[-1])
    return env, light, seed("flood", "flood-user")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds measured per phase")
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--light", type=int, default=4, help="clients sending light calls")
    parser.add_argument("--flood", type=int, default=4, help="clients sending budget-busting queries")
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--database-url", help="postgres://... server to create a benchmark database on")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="toolhub-isolation-"))
    env, light, flood = prepare(args, workdir)
    port = free_port()
    server = subprocess.Popen(
        [PYTHON, "-m", "uvicorn", "toolhub.asgi:application", "--host", "127.0.0.1", "--port", str(port)]
        + ["--lifespan", "on", "--no-access-log", "--log-level", "warning", "--workers", "1"],
        cwd=ROOT,
        env=env,
    )
    peak = {"rss": 0.0}
    sampling = threading.Event()

    def sample_rss() -> None:
        processes: list[int] = []
        samples = 0
        while not sampling.is_set():
            if samples % 50 == 0:
                processes = children(server.pid)  # once a second: a heavy worker may have been replaced
            samples += 1
            try:
                peak["rss"] = max(peak["rss"], rss_mib(server.pid, processes))
            except OSError:
                return
            time.sleep(0.02)

    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/mcp/light/", timeout=1)
                break
            except urllib.error.HTTPError:
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("the server did not start") from None
                time.sleep(0.2)
        budget_ms = int(env.get("TOOLHUB_QUERY_CPU_MS", "2000"))
        print(f"toolhub isolation benchmark — {'PostgreSQL' if args.database_url else 'SQLite'}, {os.cpu_count()} CPUs")
        print(
            f"{args.light} light clients ({LIGHT_QUERY!r} over {args.rows} rows, a key each), {args.flood} flood"
            f" clients of another user (one key); {args.duration:g} s per phase after {args.warmup:g} s of warm-up;"
            f" CPU budget {budget_ms} ms; load average {os.getloadavg()[0]:.1f}"
        )
        alone, bad_alone, _ = run_light(port, light, args, None)
        base_rss = rss_mib(server.pid)
        sampler = threading.Thread(target=sample_rss)
        sampler.start()
        flooded, bad_flooded, outcomes = run_light(port, light, args, flood)
        sampling.set()
        sampler.join()
    finally:
        server.terminate()
        server.wait(timeout=30)
        if args.database_url:
            subprocess.run(
                ["psql", env["BENCH_PG_ADMIN"], "-qc", f"DROP DATABASE IF EXISTS {env['BENCH_PG_DB']} WITH (FORCE)"],
                check=False,
            )

    p50_alone, p95_alone = statistics.median(alone), percentile(alone, 0.95)
    p50_flood, p95_flood = statistics.median(flooded), percentile(flooded, 0.95)
    ratio = p95_flood / p95_alone
    print("\nlight tools/call      calls    p50 ms    p95 ms   errors")
    print(f"  alone           {len(alone):>9}{p50_alone:>10.2f}{p95_alone:>10.2f}{len(bad_alone):>9}")
    print(f"  under flood     {len(flooded):>9}{p50_flood:>10.2f}{p95_flood:>10.2f}{len(bad_flooded):>9}")
    print(f"  p95 ratio (flood / alone): {ratio:.2f}x (target <= 3x: {'met' if ratio <= 3 else 'NOT met'})")

    print("\nflood payloads (answers during the flood phase)       calls  slowest s  codes")
    slowest_all = 0.0
    untyped = 0
    for name, answers in outcomes.items():
        codes: dict[str, int] = {}
        for code, _ in answers:
            codes[code] = codes.get(code, 0) + 1
        slowest = max(elapsed for _, elapsed in answers)
        slowest_all = max(slowest_all, slowest)
        untyped += sum(count for code, count in codes.items() if code not in ("QUERY_TOO_EXPENSIVE", "RATE_LIMITED"))
        shown = ", ".join(f"{code} x{count}" for code, count in sorted(codes.items()))
        print(f"  {name:<50}{len(answers):>6}{slowest:>10.2f}  {shown}")
    limit_s = budget_ms / 1000 + 0.5
    print(
        f"  slowest answer {slowest_all:.2f} s (target <= budget + 0.5 s = {limit_s:.1f} s: "
        f"{'met' if slowest_all <= limit_s else 'NOT met'}); answers other than the typed errors: {untyped}"
    )
    growth = peak["rss"] - base_rss
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")
    print(
        f"\nserver RSS: {base_rss:.0f} MiB before the flood, peak {peak['rss']:.0f} MiB during it:"
        f" growth {growth:.0f} MiB"
        f" (target < 200 MB: {'met' if growth * 1.048576 < 200 else 'NOT met'})"
    )
    return 0 if ratio <= 3 and slowest_all <= limit_s and untyped == 0 and growth * 1.048576 < 200 else 1


if __name__ == "__main__":
    sys.exit(main())
