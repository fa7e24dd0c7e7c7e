"""Instructions per tools/call, counted by valgrind (callgrind): this checkout against a git ref, exact.

    .venv/bin/python bench/call_instructions.py [--baseline-ref efc5481] [--database-url postgres://...]
        [--calls 200] [--warmup 300] [--eras 2025-11-25,2026-07-28] [--details-off] [--top 30] [--keep DIR]

bench/call_profile.py's call (mcp_throughput.py's exact request: a key-authenticated tools/call of orders_query,
``[?id==`42`] | [0]``, over 1,000 rows) sent straight into toolhub.asgi's application, one at a time, in a
child interpreter run under `valgrind --tool=callgrind` with its instrumentation off until the warm-up is done:
the parent turns it on (`callgrind_control -i on`) for `--calls` calls and off after them, so the count is the
calls' own, C included (the engine's driver, the JSON codec, str methods, allocations), whatever the machine's
load. Each checkout gets a fresh database of its own migrations and seed (bench/seed_mcp.py, made outside
valgrind), one child per era. `--details-off` adds this checkout with its instance recording metadata only
(McpInstance.record_call_details off).

Prints per era the instructions per call of each side and their ratio, then the functions whose instructions per
call differ most between this checkout and the ref: by own cost (exclusive) and by inclusive cost. Python code
shows as the interpreter's C functions (`_PyEval_EvalFrameDefault` and the object methods it calls): for Python
functions, read bench/call_profile.py's exact calls per call beside this. Counts repeat within a few hundred
instructions per call; what is timing-dependent (the key's last-use touch, due every few seconds: under valgrind
calls are ~50x slower) moves both sides alike.
"""

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve()
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))

# This checkout's harness (imported before a child puts another checkout's bench/ first on the path).
from call_profile import (  # noqa: E402
    LEGACY,
    MODERN,
    QUERY,
    SLUG,
    TOOL,
    _call,
    _database,
    _lifespan,
    _request,
    _turn,
    _where,
)

PYTHON = str(ROOT / ".venv" / "bin" / "python")


#
# The children: one checkout's setup (plain) and one era's calls (under callgrind)
#


def _django(root: Path) -> None:
    os.chdir(root)
    sys.path[:0] = [str(root), str(root / "bench")]
    os.environ["DJANGO_SETTINGS_MODULE"] = "toolhub.settings"
    import django

    django.setup()


def setup_child(args) -> None:
    _django(Path(args.root).resolve())
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from seed_mcp import seed  # the checkout's own bench/seed_mcp.py

    seeded = seed(SLUG, 1000, "bench")
    if args.details_off:
        from tools_app.models import McpInstance

        McpInstance.objects.filter(pk=seeded["instance_id"]).update(record_call_details=False)
    print(json.dumps({"key": seeded["key"]}), flush=True)


async def _counted(args) -> None:
    from toolhub.asgi import application

    scope, body = _request(args.era, args.key)
    task, inbox = await _lifespan(application)
    try:
        for _ in range(args.warmup):
            await _call(application, scope, body)
        _turn()  # the parent turns the instrumentation on
        for _ in range(args.calls):
            await _call(application, scope, body)
        _turn()  # and off
    finally:
        await inbox.put({"type": "lifespan.shutdown"})
        await asyncio.wait_for(task, 30)


def count_child(args) -> None:
    _django(Path(args.root).resolve())
    asyncio.run(_counted(args))


class _Opcodes:
    """Bytecode instructions executed per Python function (own, not its callees'), on the event loop's thread
    and in each database hop (mcp_app.hops._hop, as call_profile.py's profiles), while `on`."""

    def __init__(self) -> None:
        self.on = False
        self.counts: list[dict[tuple[str, int, str], int]] = []
        self._local = threading.local()

    def _mine(self) -> dict[tuple[str, int, str], int]:
        counts = getattr(self._local, "counts", None)
        if counts is None:
            counts = self._local.counts = defaultdict(int)
            self.counts.append(counts)
        return counts

    def tracer(self, frame, event, arg):
        if event != "call":
            return None
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        counts = self._mine()

        def local(frame, event, arg):
            if event == "opcode":
                code = frame.f_code
                counts[(code.co_filename, code.co_firstlineno, code.co_name)] += 1
            return local

        return local

    def install(self) -> None:
        from mcp_app import hops

        original = hops._hop
        opcodes = self

        def traced(fn, *args):
            if not opcodes.on:
                return original(fn, *args)
            sys.settrace(opcodes.tracer)
            try:
                return original(fn, *args)
            finally:
                sys.settrace(None)

        hops._hop = traced


async def _traced(args) -> dict[str, int]:
    from toolhub.asgi import application

    opcodes = _Opcodes()
    opcodes.install()
    scope, body = _request(args.era, args.key)
    task, inbox = await _lifespan(application)
    try:
        for _ in range(args.warmup):
            await _call(application, scope, body)
        opcodes.on = True
        sys.settrace(opcodes.tracer)
        for _ in range(args.calls):
            await _call(application, scope, body)
        sys.settrace(None)
        opcodes.on = False
    finally:
        await inbox.put({"type": "lifespan.shutdown"})
        await asyncio.wait_for(task, 30)
    merged: dict[str, int] = defaultdict(int)
    for counts in opcodes.counts:
        for (filename, _line, name), n in counts.items():
            merged[f"{_where(filename, [Path(args.root).resolve()])}:{name}"] += n
    return merged


def opcodes_child(args) -> None:
    _django(Path(args.root).resolve())
    merged = asyncio.run(_traced(args))
    Path(args.out).write_text(json.dumps(merged))


#
# The parent
#


def _env(database_url: str) -> dict[str, str]:
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SECRET_KEY": os.environ.get("DJANGO_SECRET_KEY", "bench-secret"),
        "TOOLHUB_RATE_LIMIT_MCP_KEY": os.environ.get("TOOLHUB_RATE_LIMIT_MCP_KEY", "1000000/second"),
        "PYTHONHASHSEED": "0",
    }
    for name in ("DJANGO_DEBUG", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        env.pop(name, None)
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    return env


def _control(pid: int, switch: str) -> None:
    done = subprocess.run(["callgrind_control", "-i", switch, str(pid)], capture_output=True, text=True)
    if "OK" not in done.stdout:
        raise SystemExit(f"callgrind_control -i {switch} failed: {done.stdout} {done.stderr}")


def count(args, root: Path, env: dict[str, str], key: str, era: str, out: Path) -> dict[str, int]:
    """The instructions of `--calls` calls in `era`, counted by callgrind; its output file at `out`."""
    command = [
        *_callgrind(args, out),
        PYTHON, str(HERE), "--count-child", "--root", str(root), "--era", era, "--key", key,
        "--calls", str(args.calls), "--warmup", str(args.warmup),
    ]  # fmt: skip
    process = subprocess.Popen(
        command, env=env, cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        for switch in ("on", "off"):
            if process.stdout.readline().strip() != "ready":
                raise SystemExit(f"the child for {root} ({era}) failed")
            _control(process.pid, switch)
            process.stdin.write("go\n")
            process.stdin.flush()
        if process.wait() != 0:
            raise SystemExit(f"the child for {root} ({era}) failed")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return _totals(out)


def count_server(args, root: Path, env: dict[str, str], key: str, era: str, out: Path) -> dict[str, int]:
    """The instructions of `--calls` requests served by uvicorn (one worker, as bench/mcp_throughput.py runs it)
    under callgrind, sent over `--connections` keep-alive connections at once (wrk's 16); the HTTP client runs
    outside valgrind."""
    # Here, not at the top: it puts this checkout first on sys.path, where a child's other checkout must be.
    from mcp_throughput import UVICORN, call_body, call_headers, free_port, wait_until_up

    port = free_port()
    command = [
        *_callgrind(args, out),
        UVICORN, "toolhub.asgi:application", "--port", str(port), "--lifespan", "on", "--host", "127.0.0.1",
        "--no-access-log", "--log-level", "warning", "--workers", "1",
    ]  # fmt: skip
    process = subprocess.Popen(command, env=env, cwd=root, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/mcp/{SLUG}/"
        wait_until_up(url, process, timeout=600)
        body = call_body(TOOL, QUERY, era).encode()
        headers = call_headers(TOOL, era, key)
        _send(port, body, headers, args.warmup, args.connections)
        _control(process.pid, "on")
        _send(port, body, headers, args.calls, args.connections)
        _control(process.pid, "off")
    finally:
        process.terminate()
        process.wait(timeout=120)
    return _totals(out)


def _send(port: int, body: bytes, headers: dict[str, str], count: int, connections: int) -> None:
    """`count` requests over `connections` keep-alive connections, each sending its next when answered."""
    import http.client
    import threading

    failures: list[str] = []

    def client(share: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        for _ in range(share):
            connection.request("POST", f"/mcp/{SLUG}/", body, headers)
            response = connection.getresponse()
            answer = response.read()
            if response.status != 200 or b'"isError":false' not in answer:
                failures.append(f"{response.status} {answer[:300]!r}")
        connection.close()

    shares = [count // connections + (1 if i < count % connections else 0) for i in range(connections)]
    threads = [threading.Thread(target=client, args=(share,)) for share in shares if share]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise SystemExit(f"bad answers: {failures[:3]}")


def count_opcodes(args, root: Path, env: dict[str, str], key: str, era: str, out: Path) -> dict[str, int]:
    """Bytecode instructions of `--calls` calls in `era` (no valgrind): {"Ir": total}; per function in `out`."""
    command = [
        PYTHON, str(HERE), "--opcodes-child", "--root", str(root), "--era", era, "--key", key,
        "--calls", str(args.calls), "--warmup", str(args.warmup), "--out", str(out),
    ]  # fmt: skip
    subprocess.run(command, env=env, cwd=root, check=True, stdout=subprocess.DEVNULL)
    return {"Ir": sum(json.loads(out.read_text()).values())}


def _totals(out: Path) -> dict[str, int]:
    """Event -> count over the counted calls (Ir; with --cache-sim also the simulated caches' misses and the
    branch predictor's mispredictions)."""
    text = out.read_text()
    events = re.search(r"^events: (.+)$", text, re.MULTILINE)
    totals = re.search(r"^totals: (.+)$", text, re.MULTILINE)
    if events is None or totals is None:
        raise SystemExit(f"no totals in {out}")
    return dict(zip(events.group(1).split(), map(int, totals.group(1).split()), strict=True))


def _estimate(total: dict[str, int]) -> int:
    """callgrind_annotate's cycle estimate: Ir + 10 x (L1 misses + mispredictions) + 100 x last-level misses."""
    l1 = total["I1mr"] + total["D1mr"] + total["D1mw"]
    last = total["ILmr"] + total["DLmr"] + total["DLmw"]
    return total["Ir"] + 10 * (l1 + total["Bcm"] + total["Bim"]) + 100 * last


def _callgrind(args, out: Path) -> list[str]:
    command = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]
    if args.cache_sim:
        command += ["--cache-sim=yes", "--branch-sim=yes"]
    return command


_COLLECTOR = re.compile(r"gcmodule\.c:gc_collect_main \[")
_LINE = re.compile(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*)$")


def functions(path: Path, calls: int, inclusive: bool) -> dict[str, float]:
    """Function -> instructions per call (own, or with its callees'), from callgrind_annotate; with --opcodes,
    bytecode instructions per call (own only)."""
    if path.suffix == ".json":
        return {} if inclusive else {name: n / calls for name, n in json.loads(path.read_text()).items()}
    text = subprocess.run(
        ["callgrind_annotate", f"--inclusive={'yes' if inclusive else 'no'}", "--threshold=100", str(path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    table: dict[str, float] = {}
    body = text.split("Ir", 2)[-1]
    for line in body.splitlines():
        match = _LINE.match(line)
        if match and ":" in match.group(2) and "PROGRAM TOTALS" not in line:
            name = match.group(2).strip()
            table[name] = table.get(name, 0.0) + int(match.group(1).replace(",", "")) / calls
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--baseline-ref", action="append", default=[], help="also count this git ref (a temporary worktree); repeatable"
    )
    parser.add_argument("--database-url", help="postgres://... server to create the databases on")
    parser.add_argument("--calls", type=int, default=200, help="calls counted per era")
    parser.add_argument("--warmup", type=int, default=300, help="calls before the count (instrumentation off)")
    parser.add_argument("--eras", default=f"{LEGACY},{MODERN}")
    parser.add_argument(
        "--server", action="store_true", help="count uvicorn serving HTTP (as mcp_throughput.py), not ASGI in process"
    )
    parser.add_argument(
        "--cache-sim", action="store_true", help="also simulate the caches and the branch predictor (misses)"
    )
    parser.add_argument("--connections", type=int, default=16, help="with --server: connections at once")
    parser.add_argument("--details-off", action="store_true", help="also this checkout with record_call_details off")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--keep", help="keep the callgrind files in this directory")
    parser.add_argument(
        "--opcodes",
        action="store_true",
        help="count Python bytecode instructions per function (sys.settrace, in process) instead of callgrind's",
    )
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--opcodes-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--setup-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--count-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    parser.add_argument("--era", help=argparse.SUPPRESS)
    parser.add_argument("--key", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.setup_child:
        setup_child(args)
        return
    if args.count_child:
        count_child(args)
        return
    if args.opcodes_child:
        opcodes_child(args)
        return
    if not args.opcodes and not shutil.which("valgrind"):
        raise SystemExit("valgrind is not installed (Debian package 'valgrind').")
    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="toolhub-instructions-"))
    workdir.mkdir(parents=True, exist_ok=True)
    worktrees = [workdir / f"baseline{i}" for i in range(len(args.baseline_ref))]
    sides: list[tuple[str, Path, bool]] = [("this checkout", ROOT, False)]
    if args.details_off:
        sides.append(("details off", ROOT, True))
    databases: list[str] = []
    try:
        for ref, worktree in zip(args.baseline_ref, worktrees, strict=True):
            subprocess.run(["git", "worktree", "add", "--detach", str(worktree), ref], cwd=ROOT, check=True)
            sides.append((f"@{ref}", worktree, False))
        setups = {}
        for i, (label, root, details_off) in enumerate(sides):
            url, pg_name = _database(args.database_url, workdir, f"count{i}")
            if pg_name:
                databases.append(pg_name)
            env = _env(url)
            command = [PYTHON, str(HERE), "--setup-child", "--root", str(root)]
            seeded = subprocess.run(
                command + (["--details-off"] if details_off else []), env=env, cwd=root, capture_output=True, text=True
            )
            if seeded.returncode != 0:
                raise SystemExit(f"the setup of {label} failed:\n{seeded.stderr}")
            setups[label] = (root, env, json.loads(seeded.stdout.strip().splitlines()[-1])["key"])
        database = "PostgreSQL" if args.database_url else "SQLite"
        how = f"uvicorn over HTTP, {args.connections} connections" if args.server else "ASGI in process"
        unit = "Python bytecode instructions" if args.opcodes else "callgrind Ir"
        print(f"instructions per tools/call ({unit}), {args.calls} calls after {args.warmup}; {database}; {how}")
        for era in args.eras.split(","):
            counts: dict[str, dict[str, int]] = {}
            files: dict[str, Path] = {}
            for i, (label, (root, env, key)) in enumerate(setups.items()):
                files[label] = workdir / (f"opcodes.{era}.{i}.json" if args.opcodes else f"callgrind.{era}.{i}.out")
                counter = count_opcodes if args.opcodes else count_server if args.server else count
                counts[label] = counter(args, root, env, key, era, files[label])
            print(f"\n== era {era}")
            first = next(iter(counts))
            for label, total in counts.items():
                ratio = f"  {total['Ir'] / counts[first]['Ir']:.4f}x of {first}" if label != first else ""
                print(f"{label:<16} {total['Ir'] / args.calls:>14,.0f} per call{ratio}")
            if args.cache_sim:
                print(f"{'per call':<16}" + "".join(f"{label:>18}" for label in counts))
                for event in [*next(iter(counts.values())), "CEst"]:
                    values = [_estimate(total) if event == "CEst" else total[event] for total in counts.values()]
                    print(f"{event:<16}" + "".join(f"{value / args.calls:>18,.0f}" for value in values))
            if not args.opcodes:
                # The cyclic collector's runs (gen 0, 1 and full), with what they free: allocation-driven, so
                # deterministic, but a full one comes every few hundred calls; count enough calls to hold some.
                collector = {
                    label: sum(
                        n for name, n in functions(path, args.calls, inclusive=True).items() if _COLLECTOR.search(name)
                    )
                    for label, path in files.items()
                }
                print("the collector, per call: " + ", ".join(f"{k} {v:,.0f}" for k, v in collector.items()))
            for ref in (f"@{name}" for name in args.baseline_ref):
                for inclusive in (False,) if args.opcodes else (False, True):
                    mine = functions(files[first], args.calls, inclusive)
                    theirs = functions(files[ref], args.calls, inclusive)
                    keys = sorted(set(mine) | set(theirs), key=lambda k: -abs(mine.get(k, 0) - theirs.get(k, 0)))
                    kind = "inclusive" if inclusive else "own"
                    print(f"-- functions by difference of {kind} instructions per call ({first} - {ref})")
                    for name in keys[: args.top]:
                        a, b = mine.get(name, 0.0), theirs.get(name, 0.0)
                        print(f"  {a - b:>+10,.0f} {a:>12,.0f} {b:>12,.0f}  {name[:150]}")
    finally:
        for worktree in worktrees:
            if worktree.exists():
                subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=ROOT, check=False)
        if args.database_url:
            from urllib.parse import urlsplit, urlunsplit

            admin = urlunsplit(urlsplit(args.database_url)._replace(path="/postgres"))
            for name in databases:
                subprocess.run(["psql", admin, "-qc", f"DROP DATABASE IF EXISTS {name}"], check=False)
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
