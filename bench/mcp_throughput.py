"""tools/call throughput: toolhub vs a hand-written MCP server, both protocol eras, side by side.

    .venv/bin/python bench/mcp_throughput.py [--duration 10] [--connections 16] [--database-url URL]

Serves a query_data tool over a 1,000-row table from toolhub (uvicorn, 1 worker, a fresh database:
a temporary SQLite file unless --database-url names a PostgreSQL server database to create) and the
same rows from bench/handwritten_server.py (the SDK's MCPServer, data in memory), then drives both
with wrk (bench/mcp_call.lua) in the 2025-11-25 (stateless) and 2026-07-28 eras and prints
requests/s, p50, p99 and the ratio toolhub / hand-written. `--vary N` makes the queries differ
(N distinct ids), so toolhub's per-version result cache only helps after N calls.

`--rounds N` repeats the whole comparison N times, alternating which server goes first, and prints
medians and each round's ratio: on a shared, noisy machine one run proves little.

`--baseline-ref REF` compares toolhub with toolhub itself at the git ref REF (say `main`, before
the metrics), served from a temporary worktree, instead of the hand-written server. Each side runs on a
database of its own, made by its own migrations and seeded by its own bench/seed_mcp.py: a database shared
with another ref holds this checkout's tables (a new table of records starts as rows, whose document is an
empty array), which an older ref would read as no records and answer `null`, less work than the call it is
compared with. Both sides' sample answers must hold the same values, else the run stops. TOOLHUB_NEW_TABLE_STORAGE
in the environment (document|rows) says how this checkout stores the table. The baseline side:
this checkout runs with its metrics on in multiprocess mode (PROMETHEUS_MULTIPROC_DIR, as with several
workers) and tracing off (no OTEL_EXPORTER_OTLP_ENDPOINT), so the ratio is what the metrics cost a call.
With `--same-env` both run in the same environment (metrics as configured, no multiprocess directory): the
ratio is then what the change between REF and this checkout costs a call.

Besides requests/s, each server's CPU time per call is read from /proc (user + system time of the uvicorn
process over the timed run, divided by the requests wrk counted): on a busy machine, where wall-clock
throughput swings with the other processes, the CPU per call is the steadier figure. On a PostgreSQL server
of this machine, the CPU of the backends serving each toolhub's database is read the same way ("PostgreSQL
CPU ms/call"): the statements' parsing, planning and running, which the uvicorn process's figure leaves out.
"""

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
sys.path.insert(0, str(ROOT))

from tests.live_server import seed_mcp  # noqa: E402

PYTHON = str(ROOT / ".venv" / "bin" / "python")
UVICORN = str(ROOT / ".venv" / "bin" / "uvicorn")
LEGACY, MODERN = "2025-11-25", "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def call_body(tool: str, query: str, era: str) -> str:
    params: dict = {"name": tool, "arguments": {"query": query}}
    if era == MODERN:
        params["_meta"] = META
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})


def call_headers(tool: str, era: str, key: str | None) -> dict[str, str]:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": era,
    }
    if era == MODERN:
        headers.update({"Mcp-Method": "tools/call", "Mcp-Name": tool})
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return headers


def post(url: str, body: str, headers: dict[str, str]) -> dict:
    request = urllib.request.Request(url, data=body.encode(), headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def wait_until_up(url: str, process: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"server for {url} exited with {process.returncode}")
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except urllib.error.HTTPError:
            return  # any HTTP answer means it is serving
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"server for {url} did not start")


def prepare_database(
    env: dict[str, str], database_url: str | None, workdir: Path, *, root: Path = ROOT, label: str = "bench"
) -> dict[str, str]:
    """A fresh database for the checkout at `root`, made by its own migrations (`label` names it)."""
    if database_url:
        parts = urlsplit(database_url)
        name = f"th_{label}_{os.getpid()}"
        admin = urlunsplit(parts._replace(path="/postgres"))
        subprocess.run(
            ["psql", admin, "-qc", f"DROP DATABASE IF EXISTS {name}", "-c", f"CREATE DATABASE {name}"], check=True
        )
        env = {**env, "DATABASE_URL": urlunsplit(parts._replace(path=f"/{name}")), "BENCH_PG_ADMIN": admin}
        env["BENCH_PG_DB"] = name
    else:
        env = {**env, "DATABASE_URL": f"sqlite:///{workdir / f'{label}.sqlite3'}"}
    subprocess.run([PYTHON, "manage.py", "migrate", "-v0"], cwd=root, env=env, check=True)
    return env


def drop_database(env: dict[str, str]) -> None:
    if "BENCH_PG_DB" in env:
        subprocess.run(
            ["psql", env["BENCH_PG_ADMIN"], "-qc", f"DROP DATABASE IF EXISTS {env['BENCH_PG_DB']}"], check=False
        )


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` so far (Linux /proc), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def database_cpu(env: dict[str, str] | None) -> dict[int, float]:
    """CPU seconds so far of each PostgreSQL backend serving the database of `env` (a server on this machine;
    empty for SQLite or a server whose processes this user cannot read)."""
    if not env or "BENCH_PG_DB" not in env:
        return {}
    query = f"SELECT pid FROM pg_stat_activity WHERE datname = '{env['BENCH_PG_DB']}'"
    listed = subprocess.run(
        ["psql", env["BENCH_PG_ADMIN"], "-Atc", query],
        capture_output=True,
        text=True,
        check=True,
    )
    seconds = {}
    for pid in listed.stdout.split():
        try:
            seconds[int(pid)] = cpu_seconds(int(pid))
        except OSError:  # gone since, or not readable
            continue
    return seconds


def run_wrk(
    url: str, body: str, headers: dict[str, str], args, vary: int, pid: int, database: dict[str, str] | None = None
) -> dict:
    env = {
        **os.environ,
        "MCP_BODY": body,
        "MCP_HEADERS": "\n".join(f"{k}: {v}" for k, v in headers.items()),
        "MCP_VARY": str(vary),
        "MCP_THREADS": str(args.threads),
    }
    base = ["wrk", f"-t{args.threads}", f"-c{args.connections}", "-s", str(BENCH / "mcp_call.lua")]
    subprocess.run([*base, f"-d{args.warmup}s", url], env=env, check=True, capture_output=True)
    cpu_before, database_before = cpu_seconds(pid), database_cpu(database)
    out = subprocess.run([*base, f"-d{args.duration}s", url], env=env, check=True, capture_output=True, text=True)
    cpu = cpu_seconds(pid) - cpu_before
    # A backend that started during the run counts from zero; one that ended during it is not counted.
    database_after = database_cpu(database)
    database_seconds = sum(seconds - database_before.get(backend, 0.0) for backend, seconds in database_after.items())
    text = out.stdout

    def number(pattern: str) -> float:
        match = re.search(pattern, text)
        if not match:
            raise SystemExit(f"could not read {pattern!r} from wrk output:\n{text}")
        return float(match.group(1))

    requests = int(number(r"(\d+) requests in"))
    return {
        "cpu_ms": cpu * 1000 / max(requests, 1),
        "db_cpu_ms": database_seconds * 1000 / max(requests, 1) if database_after else None,
        "rps": number(r"Requests/sec:\s+([\d.]+)"),
        "p50_ms": number(r"LATENCY_P50_US (\d+)") / 1000,
        "p99_ms": number(r"LATENCY_P99_US (\d+)") / 1000,
        "bad": int(number(r"BAD_RESPONSES (\d+)")),
        "requests": int(number(r"(\d+) requests in")),
    }


def report(args, query: str, eras: list[str], runs: dict[tuple[str, str], list[dict]]) -> None:
    """Medians over the rounds; the ratio is the median of the rounds' own ratios (both servers ran in turn)."""
    print()
    print(
        f"tools/call of query_data over {args.rows} rows; query {query!r}; wrk -t{args.threads} "
        f"-c{args.connections} -d{args.duration}s; database {'PostgreSQL' if args.database_url else 'SQLite'}; "
        f"{args.rounds} round(s), medians"
    )
    if args.baseline_ref and args.same_env:
        print(f"toolhub at {args.baseline_ref} vs this checkout, same environment, tracing off")
    elif args.baseline_ref:
        print(f"toolhub at {args.baseline_ref} vs this checkout with metrics on (multiprocess mode), tracing off")
    print(
        f"{'era':<12}{'server':<13}{'req/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'bad':>6}   ratio   (each round)"
        "   CPU ms/call  ratio (each round)"
    )
    for era in eras:
        baseline_runs = runs[(era, "handwritten")]
        for name in ("handwritten", "toolhub"):
            these = runs[(era, name)]
            rps = statistics.median(r["rps"] for r in these)
            p50 = statistics.median(r["p50_ms"] for r in these)
            p99 = statistics.median(r["p99_ms"] for r in these)
            bad = sum(r["bad"] for r in these)
            cpu = statistics.median(r["cpu_ms"] for r in these)
            ratio = rounds = cpu_ratio = cpu_rounds = ""
            if name == "toolhub":
                pairs = list(zip(these, baseline_runs, strict=True))
                ratios = [mine["rps"] / theirs["rps"] for mine, theirs in pairs]
                ratio = f"{statistics.median(ratios):.2f}x"
                rounds = "  (" + " ".join(f"{value:.2f}" for value in ratios) + ")"
                cpu_ratios = [mine["cpu_ms"] / theirs["cpu_ms"] for mine, theirs in pairs]
                cpu_ratio = f"{statistics.median(cpu_ratios):.2f}x"
                cpu_rounds = "  (" + " ".join(f"{value:.2f}" for value in cpu_ratios) + ")"
            database = ""
            if all(r.get("db_cpu_ms") is not None for r in these):
                database = f"   PostgreSQL {statistics.median(r['db_cpu_ms'] for r in these):.3f} CPU ms/call"
                if name == "toolhub" and all(r.get("db_cpu_ms") for r in baseline_runs):
                    database_ratios = [mine["db_cpu_ms"] / theirs["db_cpu_ms"] for mine, theirs in pairs]
                    database += f" {statistics.median(database_ratios):.2f}x"
                    database += " (" + " ".join(f"{value:.2f}" for value in database_ratios) + ")"
            label = name
            if args.baseline_ref:
                label = f"@{args.baseline_ref}"[:12] if name == "handwritten" else "this checkout"[:12]
            print(
                f"{era:<12}{label:<13}{rps:>10.0f}{p50:>9.2f}{p99:>9.2f}{bad:>6}   {ratio:<7}{rounds:<24}"
                f"{cpu:>8.3f}     {cpu_ratio:<6}{cpu_rounds}{database}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--query", default="[?id==`{n}`] | [0]", help="JMESPath; {n} is 42, or 1..N with --vary")
    parser.add_argument("--vary", type=int, default=0, help="cycle through N distinct queries")
    parser.add_argument("--database-url", help="postgres://... server to create a benchmark database on")
    parser.add_argument("--eras", default=f"{LEGACY},{MODERN}")
    parser.add_argument("--rounds", type=int, default=1, help="repeat, alternating which server runs first")
    parser.add_argument("--baseline-ref", help="compare with toolhub at this git ref, not the hand-written server")
    parser.add_argument(
        "--same-env", action="store_true", help="with --baseline-ref: both in the same environment (no metrics dir)"
    )
    args = parser.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("wrk is not installed (Debian package 'wrk').")

    workdir = Path(tempfile.mkdtemp(prefix="toolhub-bench-"))
    env = {
        **os.environ,
        "DJANGO_SECRET_KEY": os.environ.get("DJANGO_SECRET_KEY", "bench-secret"),
        "BENCH_ROWS": str(args.rows),
        # One key sends thousands of calls a second here, far over the default 600/minute. The
        # limit stays on (its counting is part of what a call costs) with a rate no run reaches; set
        # TOOLHUB_RATE_LIMIT_MCP_KEY (or TOOLHUB_RATE_LIMITS_ENABLED=false) in the environment to change it.
        "TOOLHUB_RATE_LIMIT_MCP_KEY": os.environ.get("TOOLHUB_RATE_LIMIT_MCP_KEY", "1000000/second"),
    }
    env.pop("DJANGO_DEBUG", None)
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "PROMETHEUS_MULTIPROC_DIR"):
        env.pop(name, None)  # tracing off; the baseline without a metrics directory
    base_env = env
    env = prepare_database(base_env, args.database_url, workdir)
    databases = [env]
    seeded = seed_mcp(env, slug="bench", rows=args.rows, user="bench")
    toolhub_port, handwritten_port = free_port(), free_port()
    common = ["--host", "127.0.0.1", "--no-access-log", "--log-level", "warning", "--workers", "1"]
    toolhub_env = baseline_env = env
    baseline_key = None
    if args.baseline_ref:
        baseline_dir = workdir / "baseline"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(baseline_dir), args.baseline_ref], cwd=ROOT, check=True
        )
        # The ref's own database, migrations and seed (the module docstring): its own storage of the table.
        ref_env = {key: value for key, value in base_env.items() if key != "TOOLHUB_NEW_TABLE_STORAGE"}
        baseline_env = prepare_database(ref_env, args.database_url, workdir, root=baseline_dir, label="bench_ref")
        databases.append(baseline_env)
        baseline_key = seed_mcp(baseline_env, slug="bench", rows=args.rows, user="bench", root=baseline_dir)["key"]
        metrics_dir = workdir / "metrics"
        metrics_dir.mkdir()
        toolhub_env = env if args.same_env else {**env, "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}
        baseline = [UVICORN, "toolhub.asgi:application", "--port", str(handwritten_port), "--lifespan", "on"]
        baseline_cwd = baseline_dir
    else:
        baseline = [UVICORN, "--app-dir", str(BENCH), "handwritten_server:app", "--port", str(handwritten_port)]
        baseline_cwd = ROOT
    servers = {
        "toolhub": subprocess.Popen(
            [UVICORN, "toolhub.asgi:application", "--port", str(toolhub_port), "--lifespan", "on", *common],
            cwd=ROOT,
            env=toolhub_env,
        ),
        "handwritten": subprocess.Popen([*baseline, *common], cwd=baseline_cwd, env=baseline_env),
    }
    baseline_path = "/mcp/bench/" if args.baseline_ref else "/mcp"
    urls = {
        "toolhub": f"http://127.0.0.1:{toolhub_port}/mcp/bench/",
        "handwritten": f"http://127.0.0.1:{handwritten_port}{baseline_path}",
    }
    tools = {"toolhub": "orders_query", "handwritten": "orders_query"}
    # Whose PostgreSQL backends' CPU counts for each server (the hand-written server uses no database).
    database_envs = {"toolhub": toolhub_env, "handwritten": baseline_env if args.baseline_ref else None}
    keys = {"toolhub": seeded["key"], "handwritten": baseline_key}
    try:
        for name, process in servers.items():
            wait_until_up(urls[name], process)
        query = args.query if args.vary else args.query.replace("{n}", "42")
        eras = args.eras.split(",")
        requests = {}
        samples: dict[str, object] = {}
        for era in eras:
            for name in ("handwritten", "toolhub"):
                body = call_body(tools[name], query, era)
                headers = call_headers(tools[name], era, keys[name])
                sample = post(urls[name], body.replace("{n}", "42"), headers)
                if sample.get("result", {}).get("isError") is not False:
                    raise SystemExit(f"{name} answered a bad sample for {era}: {sample}")
                if args.baseline_ref:  # the values, not their text: an older ref's jsonb orders keys its own way
                    samples[name] = [json.loads(item["text"]) for item in sample["result"]["content"]]
                requests[(era, name)] = (body, headers)
            if args.baseline_ref and samples["toolhub"] != samples["handwritten"]:
                raise SystemExit(f"the two servers answer differently, so their costs do not compare: {samples}")
        runs: dict[tuple[str, str], list[dict]] = {key: [] for key in requests}
        for round_number in range(args.rounds):
            order = ("handwritten", "toolhub") if round_number % 2 == 0 else ("toolhub", "handwritten")
            for era in eras:
                for name in order:
                    body, headers = requests[(era, name)]
                    pid = servers[name].pid
                    run = run_wrk(urls[name], body, headers, args, args.vary, pid, database_envs[name])
                    runs[(era, name)].append(run)
        report(args, query, eras, runs)
    finally:
        for process in servers.values():
            process.terminate()
        for process in servers.values():
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
        for database in databases:
            drop_database(database)
        if args.baseline_ref:
            subprocess.run(["git", "worktree", "remove", "--force", str(workdir / "baseline")], cwd=ROOT, check=False)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
