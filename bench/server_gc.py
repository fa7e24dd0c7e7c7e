"""Where a served tools/call's CPU goes besides its instructions: the cyclic collector, threads, system calls.

    .venv/bin/python bench/server_gc.py [--baseline-ref efc5481 ...] [--database-url postgres://...]
        [--era 2025-11-25] [--calls 3000] [--rounds 4] [--connections 16]

Serves bench/mcp_throughput.py's call from uvicorn (one worker, as that benchmark runs it) for this checkout and
each --baseline-ref (a temporary worktree, a database of its own migrations and seed), and sends each `--calls`
requests over `--connections` keep-alive connections, round by round, the first of each round rotating. Each server
runs with a `sitecustomize` that times the cyclic collector's runs by generation (gc.callbacks, the thread's CPU
clock) and reports them with the objects the collector tracks (gc.get_objects: frozen ones are not) on SIGUSR2. Per
call (the collector's runs per 1,000 calls), medians of the rounds: the process CPU (user + system, /proc), the
collections and their CPU by generation, voluntary and involuntary context switches (every thread), read and write
system calls and bytes (/proc/PID/io). The CPU figures move with the machine's load (compare the sides' ratios); the
counts do not.
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))

from call_instructions import PYTHON, _env, _send  # noqa: E402
from call_profile import LEGACY, QUERY, TOOL, _database  # noqa: E402
from mcp_throughput import UVICORN, call_body, call_headers, free_port, wait_until_up  # noqa: E402

SITECUSTOMIZE = """
import gc, json, os, signal, time

_collections = {0: [0, 0.0], 1: [0, 0.0], 2: [0, 0.0]}
_started = [0.0]


def _timed(phase, info):
    if phase == "start":
        _started[0] = time.thread_time()
    else:
        entry = _collections[info["generation"]]
        entry[0] += 1
        entry[1] += time.thread_time() - _started[0]


def _report(*_):
    path = os.environ["BENCH_GC_REPORT"] + f".{os.getpid()}"
    with open(path + ".tmp", "w") as out:
        json.dump({"collections": _collections, "tracked": len(gc.get_objects())}, out)
    os.replace(path + ".tmp", path)


gc.callbacks.append(_timed)
signal.signal(signal.SIGUSR2, _report)
"""

FIGURES = [
    ("CPU us", lambda d: (d["user"] + d["system"]) * 1e6),
    ("gen 0 runs per 1,000", lambda d: d["runs0"] * 1000),
    ("gen 1 runs per 1,000", lambda d: d["runs1"] * 1000),
    ("full runs per 1,000", lambda d: d["runs2"] * 1000),
    ("gen 0 CPU us", lambda d: d["cpu0"] * 1e6),
    ("gen 1 CPU us", lambda d: d["cpu1"] * 1e6),
    ("full CPU us", lambda d: d["cpu2"] * 1e6),
    ("voluntary switches", lambda d: d["voluntary"]),
    ("involuntary switches", lambda d: d["involuntary"]),
    ("read syscalls", lambda d: d["syscr"]),
    ("write syscalls", lambda d: d["syscw"]),
    ("bytes written", lambda d: d["wchar"]),
]


def _collector(pid: int, report: Path) -> dict:
    path = Path(f"{report}.{pid}")
    path.unlink(missing_ok=True)
    os.kill(pid, signal.SIGUSR2)
    deadline = time.monotonic() + 30
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"no collector report from {pid}")
        time.sleep(0.02)
    return json.loads(path.read_text())


def snapshot(pid: int, report: Path) -> dict[str, float]:
    """The process's counters now (cumulative)."""
    collector = _collector(pid, report)
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    figures: dict[str, float] = {"user": int(stat[11]) / tick, "system": int(stat[12]) / tick}
    figures["voluntary"] = figures["involuntary"] = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
        except FileNotFoundError:
            continue  # a thread that ended meanwhile
        for line in status.splitlines():
            if line.startswith("voluntary_ctxt_switches"):
                figures["voluntary"] += int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches"):
                figures["involuntary"] += int(line.split()[1])
    io = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
    figures.update({name: int(io[name]) for name in ("syscr", "syscw", "wchar")})
    for generation, (runs, cpu) in collector["collections"].items():
        figures[f"runs{generation}"], figures[f"cpu{generation}"] = runs, cpu
    figures["tracked"] = collector["tracked"]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline-ref", action="append", default=[], help="also serve this git ref; repeatable")
    parser.add_argument("--database-url", help="postgres://... server to create the databases on")
    parser.add_argument("--era", default=LEGACY)
    parser.add_argument("--calls", type=int, default=3000, help="requests per side per round")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--connections", type=int, default=16)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="toolhub-server-gc-"))
    (workdir / "site").mkdir()
    (workdir / "site" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    report = workdir / "collector"
    sides: dict[str, Path] = {"this checkout": ROOT}
    for i, ref in enumerate(args.baseline_ref):
        worktree = workdir / f"baseline{i}"
        subprocess.run(["git", "worktree", "add", "--detach", str(worktree), ref], cwd=ROOT, check=True)
        sides[f"@{ref}"] = worktree
    servers: dict[str, tuple[subprocess.Popen, int, bytes, dict[str, str]]] = {}
    databases: list[str] = []
    try:
        for i, (label, root) in enumerate(sides.items()):
            url, pg_name = _database(args.database_url, workdir, f"gc{i}")
            if pg_name:
                databases.append(pg_name)
            env = {**_env(url), "PYTHONPATH": str(workdir / "site"), "BENCH_GC_REPORT": str(report)}
            env.pop("PYTHONHASHSEED")
            seeded = subprocess.run(
                [PYTHON, str(HERE.parent / "call_instructions.py"), "--setup-child", "--root", str(root)],
                env=env,
                cwd=root,
                capture_output=True,
                text=True,
                check=True,
            )
            key = json.loads(seeded.stdout.strip().splitlines()[-1])["key"]
            port = free_port()
            command = [
                UVICORN, "toolhub.asgi:application", "--port", str(port), "--lifespan", "on", "--host", "127.0.0.1",
                "--no-access-log", "--log-level", "warning", "--workers", "1",
            ]  # fmt: skip
            process = subprocess.Popen(command, env=env, cwd=root)
            servers[label] = (
                process,
                port,
                call_body(TOOL, QUERY, args.era).encode(),
                call_headers(TOOL, args.era, key),
            )
            wait_until_up(f"http://127.0.0.1:{port}/mcp/bench/", process, timeout=60)
        for _process, port, body, headers in servers.values():
            _send(port, body, headers, args.warmup, args.connections)
        rounds: dict[str, list[dict[str, float]]] = {label: [] for label in servers}
        tracked: dict[str, float] = {}
        labels = list(servers)
        for number in range(args.rounds):
            for label in labels[number % len(labels) :] + labels[: number % len(labels)]:
                process, port, body, headers = servers[label]
                before = snapshot(process.pid, report)
                _send(port, body, headers, args.calls, args.connections)
                after = snapshot(process.pid, report)
                rounds[label].append({name: (after[name] - before[name]) / args.calls for name in after})
                tracked[label] = after["tracked"]
        database = "PostgreSQL" if args.database_url else "SQLite"
        print(
            f"per tools/call, era {args.era}, {database}, uvicorn, {args.connections} connections, {args.rounds} rounds"
            f" of {args.calls} (medians); load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}"
        )
        print(f"{'':<22}" + "".join(f"{label:>18}" for label in servers))
        for name, figure in FIGURES:
            values = [statistics.median(figure(entry) for entry in rounds[label]) for label in servers]
            print(f"{name:<22}" + "".join(f"{value:>18,.2f}" for value in values))
        print(f"{'objects tracked':<22}" + "".join(f"{tracked[label]:>18,.0f}" for label in servers))
    finally:
        for process, *_rest in servers.values():
            process.terminate()
        for process, *_rest in servers.values():
            process.wait(timeout=30)
        for worktree in (root for label, root in sides.items() if label != "this checkout"):
            subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=ROOT, check=False)
        if args.database_url:
            from urllib.parse import urlsplit, urlunsplit

            admin = urlunsplit(urlsplit(args.database_url)._replace(path="/postgres"))
            for name in databases:
                subprocess.run(["psql", admin, "-qc", f"DROP DATABASE IF EXISTS {name}"], check=False)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
