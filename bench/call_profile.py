"""Where a tools/call's CPU goes, in one process: this checkout against a git ref, deterministic.

    .venv/bin/python bench/call_profile.py [--baseline-ref efc5481 | --baseline-root DIR] [--calls 2000] [--rounds 3]
        [--database-url postgres://postgres@127.0.0.1:5432/postgres] [--top 25] [--sql]
        [--call query|select|preview|max_by|sort+slice] [--records 1000]

`--call` other than the default `query` times a call whose arguments differ at every call (new to the result
cache: the keys or the offset moved by one, the expression by a trailing blank) over a table of `--records`
records stored as rows (moved after its tools when the checkout made it a document, as scale.py --storage rows
does); `--baseline-root` compares with a checkout already on disk (e.g. `git archive REF | tar -x -C DIR` with a
.venv link) instead of a worktree of a ref.

For each checkout (this one, and with --baseline-ref a temporary worktree of that ref) a child interpreter
builds the benchmark's setup (bench/seed_mcp.py: a query_data tool over a 1,000-row table, an instance, a key)
on a fresh database (a temporary SQLite file, or a database created on --database-url's server and dropped
after), runs toolhub.asgi's application with its lifespan, and sends it bench/mcp_throughput.py's exact
request (key-authenticated tools/call, ``[?id==`42`] | [0]``) straight through ASGI, one at a time, in the
2025-11-25 (stateless) and 2026-07-28 eras. No sockets, no HTTP parsing: what is measured is toolhub's own
work plus the SDK's. The checkouts' children run at once but work in turns, round by round (the first of each
turn alternating), so that a change of the machine's load meets both alike.

Per era it reports:
- CPU per call: process CPU time (all threads) over `--calls` calls, the median and the minimum of `--rounds`
  rounds, with no profiler attached; and the ratios this checkout / the ref.
- SQL statements per call, and with --sql their text (literals kept), as seen by Django's cursor wrapper on
  every thread (the MCP handlers run their database work in a thread pool).
- A cProfile of `--calls` more calls (every thread: the event loop and each database thread, merged), the
  time per call by area (the package a function's file lives in) and the functions whose own time per call
  (tottime) differs most between the two checkouts. Module paths moved between refs, so functions are matched
  by file name relative to its package root and function name; one that moved shows as gone and new.

The wall clock never enters the figures, so a loaded machine moves them much less than bench/mcp_throughput.py's
requests/s; the profiler slows calls about 2x evenly, so compare its figures between checkouts, not with the
unprofiled CPU per call.
"""

import argparse
import asyncio
import cProfile
import itertools
import json
import os
import pstats
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

HERE = Path(__file__).resolve()
ROOT = HERE.parent.parent
LEGACY, MODERN = "2025-11-25", "2026-07-28"
QUERY = "[?id==`42`] | [0]"
TOOL = "orders_query"
WRITE_TOOL = "orders_add"
SLUG = "bench"


#
# The child: one checkout, in-process
#


# The calls a run can time (--call): (tool, arguments for N records and the call's number n). The default repeats
# one request (its answer from the result cache after the first); the others differ at every call (the query by
# n trailing blanks, the keys and the offset by n, the write's new id), so each call reads or writes the records.
CALLS = {
    "query": (TOOL, lambda records, n: {"query": QUERY}),
    "select": (
        "orders_by_id",
        lambda records, n: {"keys": [key + n % (records // 10) for key in range(1, records + 1, records // 10)][:10]},
    ),
    "preview": ("orders_preview", lambda records, n: {"offset": records // 2 + n, "limit": 50}),
    "max_by": (TOOL, lambda records, n: {"query": "max_by(@, &total).id" + " " * n}),
    "sort+slice": (TOOL, lambda records, n: {"query": "sort_by(@, &total)[-10:].id" + " " * n}),
    # bench/scale.py's filter (a tenth of the records match), over `status`, `total` and `id` declared indexed.
    "filter": (TOOL, lambda records, n: {"query": "[?status=='shipped' && total > `500`].id" + " " * n}),
    # A create of one new record (an id past the seeded ones, 1..records) through the seed's create tool.
    "write": (
        WRITE_TOOL,
        lambda records, n: {"elements": [{"id": records + 1 + n, "customer": "bench", "status": "new", "total": 1.5}]},
    ),
}


def _request(era: str, key: str, call: str = "query", records: int = 1000, n: int = 0) -> tuple[dict, bytes]:
    tool, arguments = CALLS[call]
    params: dict = {"name": tool, "arguments": arguments(records, n)}
    headers = [
        (b"host", b"127.0.0.1:8000"),
        (b"content-type", b"application/json"),
        (b"accept", b"application/json, text/event-stream"),
        (b"mcp-protocol-version", era.encode()),
        (b"authorization", f"Bearer {key}".encode()),
    ]
    if era == MODERN:
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        headers += [(b"mcp-method", b"tools/call"), (b"mcp-name", tool.encode())]
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()
    headers.append((b"content-length", str(len(body)).encode()))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": f"/mcp/{SLUG}/",
        "raw_path": f"/mcp/{SLUG}/".encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    return scope, body


async def _call(app, scope: dict, body: bytes) -> bytes:
    sent = False
    chunks: list[bytes] = []
    status = 0

    async def receive() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the client never disconnects
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(dict(scope), receive, send)
    answer = b"".join(chunks)
    if status != 200 or b'"isError":false' not in answer:
        raise SystemExit(f"bad answer {status}: {answer[:500]!r}")
    return answer


class _Statements:
    """Every SQL statement any thread sends through Django's cursors while `on`."""

    def __init__(self) -> None:
        self.on = False
        self.seen: list[str] = []
        self.examples: dict[str, str] = {}  # a statement with its first parameters filled in
        self._lock = threading.Lock()

    def install(self) -> None:
        from django.db.backends import utils

        original = utils.CursorWrapper._execute_with_wrappers
        statements = self

        def recording(self, sql, params, many, executor):
            if statements.on:
                text = _SAVEPOINT.sub(r"\1 <name>", sql)  # each savepoint's own name: one line for them all
                with statements._lock:
                    statements.seen.append(text)
                    if text not in statements.examples:
                        statements.examples[text] = sql % _quoted(params) if params and not many else text
            return original(self, sql, params, many, executor)

        utils.CursorWrapper._execute_with_wrappers = recording


def _quoted(params):
    if isinstance(params, dict):
        return {key: _literal(value) for key, value in params.items()}
    return tuple(_literal(value) for value in params)


def _literal(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _ThreadProfiles:
    """A cProfile of the event loop's thread and one per database thread (mcp_app.hops runs each request's
    database work in one hop through `_hop`), merged at the end."""

    def __init__(self) -> None:
        self.on = False
        self.generation = 0  # a new profile per thread each time the list is taken
        self.profiles: list[cProfile.Profile] = []
        self._local = threading.local()
        self._lock = threading.Lock()

    def install(self) -> None:
        from mcp_app import hops

        original = hops._hop
        profiles = self

        def profiled(fn, *args):
            if not profiles.on:
                return original(fn, *args)
            profile = getattr(profiles._local, "profile", None)
            if profile is None or getattr(profiles._local, "generation", None) != profiles.generation:
                profile = profiles._local.profile = cProfile.Profile(time.thread_time)
                profiles._local.generation = profiles.generation
                with profiles._lock:
                    profiles.profiles.append(profile)
            profile.enable()
            try:
                return original(fn, *args)
            finally:
                profile.disable()

        hops._hop = profiled


async def _calls(app, request: Callable[[], tuple[dict, bytes]], count: int, concurrency: int) -> None:
    """`count` calls, `concurrency` at a time (as wrk's connections: each sends its next when answered)."""

    async def client(share: int) -> None:
        for _ in range(share):
            await _call(app, *request())

    shares = [count // concurrency + (1 if i < count % concurrency else 0) for i in range(concurrency)]
    await asyncio.gather(*(client(share) for share in shares))


async def _lifespan(app) -> tuple[asyncio.Task, asyncio.Queue]:
    inbox: asyncio.Queue = asyncio.Queue()
    started = asyncio.get_running_loop().create_future()

    async def send(message: dict) -> None:
        if message["type"] == "lifespan.startup.complete":
            started.set_result(None)
        elif message["type"] == "lifespan.startup.failed":
            started.set_exception(RuntimeError(message.get("message")))

    task = asyncio.create_task(app({"type": "lifespan", "asgi": {"version": "3.0"}}, inbox.get, send))
    await inbox.put({"type": "lifespan.startup"})
    await started
    return task, inbox


def _turn() -> None:
    """Wait for the parent's go (it runs the checkouts' children in turns, so that each round of one is next
    to a round of the other under the same load), after saying this child is ready for its next phase."""
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("the parent went away")


async def _measure(args, key: str) -> dict:
    from toolhub.asgi import application

    statements, profiles = _Statements(), _ThreadProfiles()
    statements.install()
    profiles.install()
    task, inbox = await _lifespan(application)
    out: dict = {"eras": {}}
    numbers = itertools.count()  # across the eras: a later era's calls are new to the result cache too
    try:
        for era in (LEGACY, MODERN):

            def request(era=era) -> tuple[dict, bytes]:
                return _request(era, key, args.call, args.records, next(numbers))

            _turn()
            await _calls(application, request, args.warmup, args.concurrency)
            cpu, wall = [], []
            for _ in range(args.rounds):
                _turn()
                before, clock = time.process_time(), time.perf_counter()
                await _calls(application, request, args.calls, args.concurrency)
                cpu.append((time.process_time() - before) * 1000 / args.calls)
                wall.append((time.perf_counter() - clock) * 1000 / args.calls)
            statements.seen.clear()
            statements.on = True
            sample = 50
            await _calls(application, request, sample, 1)
            statements.on = False
            counts: dict[str, int] = defaultdict(int)
            for sql in statements.seen:
                counts[sql] += 1
            _turn()
            main = cProfile.Profile(time.thread_time)
            profiles.on = True
            main.enable()
            await _calls(application, request, args.profiled, args.concurrency)
            main.disable()
            profiles.on = False
            stats = pstats.Stats(main)
            for profile in profiles.profiles:
                stats.add(profile)
            profiles.profiles.clear()
            profiles.generation += 1
            prof_path = Path(args.out).with_suffix(f".{era}.prof")
            stats.dump_stats(str(prof_path))
            out["eras"][era] = {
                "cpu_ms": cpu,
                "wall_ms": wall,
                "statements_per_call": len(statements.seen) / sample,
                "statements": {statements.examples[sql]: n / sample for sql, n in counts.items()},
                "profile": str(prof_path),
            }
    finally:
        await inbox.put({"type": "lifespan.shutdown"})
        await asyncio.wait_for(task, 30)
    return out


def child(args) -> None:
    root = Path(args.root).resolve()
    os.chdir(root)
    sys.path[:0] = [str(root), str(root / "bench")]
    os.environ["DJANGO_SETTINGS_MODULE"] = "toolhub.settings"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from seed_mcp import seed  # the checkout's own bench/seed_mcp.py

    seeded = seed(SLUG, args.records, "bench")
    key = seeded["key"]
    _preview_tool(seeded)
    if args.call == "filter":
        _declare_indexed(seeded["table_id"], ["status", "total", "id"])
    from django.db import connections

    connections.close_all()
    result = asyncio.run(_measure(args, key))
    Path(args.out).write_text(json.dumps(result))
    print("done", flush=True)


def _preview_tool(seeded: dict) -> None:
    """A preview tool beside the seed's, and the table in rows (as bench/scale.py --storage rows: moved after its
    tools are made, when the checkout made it a document)."""
    from tools_app import services
    from tools_app.models import McpInstance, Table
    from tools_app.services import binding_create

    table = Table.objects.get(pk=seeded["table_id"])
    tool = services.tool_create(
        owner=table.owner,
        name=f"{SLUG}_orders_preview",
        type="preview",
        table=table,
        description="Preview the orders.",
        metadata={"preview_keys": ["id", "customer", "status", "total"]},
    )
    binding_create(
        mcp_instance=McpInstance.objects.get(pk=seeded["instance_id"]), tool=tool, name_override="orders_preview"
    )
    table.refresh_from_db()
    if getattr(table, "storage", "rows") != "rows":
        from tools_app.execution.records import table_to_rows

        table_to_rows(table.pk)


def _declare_indexed(table_id: int, fields: list[str]) -> None:
    """The table's indexed fields, as its owner declares them (the checkout's own service; its indexes built)."""
    from tools_app import services
    from tools_app.models import Table

    services.table_update(table=Table.objects.get(pk=table_id), indexed_fields=fields)


#
# The parent: both checkouts, side by side
#


def _database(database_url: str | None, workdir: Path, label: str) -> tuple[str, str | None]:
    if not database_url:
        return f"sqlite:///{workdir / f'{label}.sqlite3'}", None
    parts = urlsplit(database_url)
    name = f"{parts.path.strip('/') or 'th'}_profile_{label}_{os.getpid()}"  # named after the database given
    admin = urlunsplit(parts._replace(path="/postgres"))
    subprocess.run(
        ["psql", admin, "-qc", f"DROP DATABASE IF EXISTS {name}", "-c", f"CREATE DATABASE {name}"], check=True
    )
    return urlunsplit(parts._replace(path=f"/{name}")), name


def _start_child(args, root: Path, label: str, workdir: Path) -> tuple[subprocess.Popen, Path, str | None]:
    url, pg_name = _database(args.database_url, workdir, label)
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "DJANGO_SECRET_KEY": os.environ.get("DJANGO_SECRET_KEY", "bench-secret"),
        # as bench/mcp_throughput.py: the rate limit is counted, at a rate no run reaches
        "TOOLHUB_RATE_LIMIT_MCP_KEY": os.environ.get("TOOLHUB_RATE_LIMIT_MCP_KEY", "1000000/second"),
    }
    for name in ("DJANGO_DEBUG", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        env.pop(name, None)
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    out = workdir / f"{label}.json"
    command = [
        str(ROOT / ".venv" / "bin" / "python"), str(HERE), "--child", "--root", str(root), "--out", str(out),
        "--calls", str(args.calls), "--rounds", str(args.rounds), "--warmup", str(args.warmup),
        "--profiled", str(args.profiled), "--concurrency", str(args.concurrency),
        "--call", args.call, "--records", str(args.records),
    ]  # fmt: skip
    process = subprocess.Popen(command, env=env, cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return process, out, pg_name


def _run_children(args, roots: dict[str, Path], workdir: Path) -> dict[str, dict]:
    """Every checkout's child at once (each sets itself up meanwhile), then their phases in turns: one child
    works while the others wait, the first of each turn alternating, so that the machine's load moves both
    checkouts' rounds alike."""
    started = {label: _start_child(args, root, f"run{i}", workdir) for i, (label, root) in enumerate(roots.items())}
    try:
        for label, (process, _out, _pg) in started.items():
            if process.stdout is None or process.stdout.readline().strip() != "ready":
                raise SystemExit(f"the child for {label} failed to start")
        waiting = list(started)
        turn = 0
        while waiting:
            for label in waiting if turn % 2 == 0 else reversed(waiting):
                process = started[label][0]
                assert process.stdin is not None
                assert process.stdout is not None
                process.stdin.write("go\n")
                process.stdin.flush()
                if process.stdout.readline().strip() != "ready":
                    if process.wait() != 0:
                        raise SystemExit(f"the child for {label} failed")
            waiting = [label for label in waiting if started[label][0].poll() is None]
            turn += 1
        return {label: json.loads(out.read_text()) for label, (_p, out, _pg) in started.items()}
    finally:
        for process, _out, pg_name in started.values():
            if process.poll() is None:
                process.kill()
            process.wait()
            if pg_name:
                admin = urlunsplit(urlsplit(args.database_url)._replace(path="/postgres"))
                subprocess.run(["psql", admin, "-qc", f"DROP DATABASE IF EXISTS {pg_name}"], check=False)


_PACKAGE_ROOT = re.compile(r".*/(site-packages|lib/python3\.\d+)/")


def _where(filename: str, roots: list[Path]) -> str:
    """A function's file, relative to its checkout or its package directory."""
    if _PACKAGE_ROOT.match(filename):
        return _PACKAGE_ROOT.sub("", filename)
    for root in roots:
        prefix = str(root) + "/"
        if filename.startswith(prefix):
            return filename[len(prefix) :]
    return filename


def _area(where: str) -> str:
    if where.startswith("~") or where.startswith("<"):
        return "builtins"
    parts = where.split("/")
    if parts[0] in ("tools_app", "mcp_app", "toolhub", "oauth_app") and len(parts) > 2:
        return "/".join(parts[:2])
    if parts[0] in ("django",) and len(parts) > 2:
        return "/".join(parts[:3]) if parts[1] == "db" else "/".join(parts[:2])
    return parts[0].removesuffix(".py")


_SAVEPOINT = re.compile(r'((?:RELEASE )?SAVEPOINT) "[^"]+"')
_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


def _functions(path: str, roots: list[Path], calls: int) -> dict[tuple[str, str], tuple[float, float, float]]:
    """(file, function) -> (tottime µs per call, cumtime µs per call, calls per call)."""
    stats = pstats.Stats(path).stats  # type: ignore[attr-defined]
    merged: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for (filename, _line, function), (_cc, ncalls, tottime, cumtime, _callers) in stats.items():
        entry = merged[(_where(filename, roots), _ADDRESS.sub("", function))]
        entry[0] += tottime * 1e6 / calls
        entry[1] += cumtime * 1e6 / calls
        entry[2] += ncalls / calls
    return {key: (a, b, c) for key, (a, b, c) in merged.items()}


def report(args, results: dict[str, dict], roots: dict[str, Path]) -> None:
    labels = list(results)
    all_roots = sorted(roots.values(), key=lambda p: -len(str(p)))
    database = "PostgreSQL" if args.database_url else "SQLite"
    tool, arguments = CALLS[args.call]
    print(
        f"\ntools/call of {tool} ({json.dumps(arguments(args.records, 0))}) over ASGI in-process,"
        f" {args.records:,} records; {database}; load average {os.getloadavg()}"
    )
    for era in (LEGACY, MODERN):
        print(f"\n== era {era}")
        for label in labels:
            data = results[label]["eras"][era]
            cpus = " ".join(f"{c:.3f}" for c in data["cpu_ms"])
            print(
                f"{label:<16} CPU/call median {statistics.median(data['cpu_ms']):.3f} ms, "
                f"min {min(data['cpu_ms']):.3f} (rounds {cpus}); "
                f"wall/call median {statistics.median(data['wall_ms']):.3f}; "
                f"SQL statements/call {data['statements_per_call']:.2f}"
            )
        if len(labels) == 2:
            mine, theirs = (results[label]["eras"][era]["cpu_ms"] for label in labels)
            print(
                f"ratio {labels[0]} / {labels[1]}: median {statistics.median(mine) / statistics.median(theirs):.3f}x,"
                f" min {min(mine) / min(theirs):.3f}x"
            )
            mine, theirs = (results[label]["eras"][era]["wall_ms"] for label in labels)
            ratio = statistics.median(mine) / statistics.median(theirs)
            print(f"wall ratio {labels[0]} / {labels[1]}: median {ratio:.3f}x")
        if args.sql:
            for label in labels:
                print(f"-- statements per call, {label}")
                for sql, n in results[label]["eras"][era]["statements"].items():
                    print(f"  {n:5.2f}x {sql}")
        tables = {
            label: _functions(results[label]["eras"][era]["profile"], all_roots, args.profiled) for label in labels
        }
        areas: dict[str, dict[str, float]] = {label: defaultdict(float) for label in labels}
        for label, table in tables.items():
            for (where, _function), (tottime, _cum, _n) in table.items():
                areas[label][_area(where)] += tottime
        totals = {label: sum(areas[label].values()) for label in labels}
        counted = {
            label: pstats.Stats(results[label]["eras"][era]["profile"]).total_calls / args.profiled  # type: ignore[attr-defined]
            for label in labels
        }
        print("-- Python function calls per call (exact): " + ", ".join(f"{k} {v:.1f}" for k, v in counted.items()))
        print(f"-- profiled time per call by area, µs ({', '.join(f'{k} {v:.0f}' for k, v in totals.items())})")
        names = sorted(
            set().union(*(areas[label] for label in labels)), key=lambda a: -max(areas[x][a] for x in labels)
        )
        for name in names[: args.top]:
            values = "".join(f"{areas[label][name]:>10.1f}" for label in labels)
            diff = f"{areas[labels[0]][name] - areas[labels[-1]][name]:>+10.1f}" if len(labels) == 2 else ""
            print(f"  {name:<44}{values}{diff}")
        if len(labels) == 1:
            (table,) = tables.values()
            print("-- functions by own time per call, µs; cumulative time per call; calls per call")
            for key in sorted(table, key=lambda k: -table[k][0])[: args.top]:
                own, cumulative, calls = table[key]
                print(f"  {own:>8.1f} {cumulative:>8.1f}  n {calls:>5.1f}  {key[0]}:{key[1]}")
        if len(labels) == 2:
            mine, theirs = tables[labels[0]], tables[labels[1]]
            keys = set(mine) | set(theirs)
            zero = (0.0, 0.0, 0.0)
            diffs = sorted(keys, key=lambda k: -abs(mine.get(k, zero)[0] - theirs.get(k, zero)[0]))
            print(f"-- functions by difference of own time per call, µs ({labels[0]} - {labels[1]}); calls per call")
            for key in diffs[: args.top]:
                a, b = mine.get(key, zero), theirs.get(key, zero)
                print(
                    f"  {a[0] - b[0]:>+8.1f}  {a[0]:>7.1f} {b[0]:>7.1f}  n {a[2]:>5.1f} {b[2]:>5.1f}  {key[0]}:{key[1]}"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline-ref", help="also profile this git ref (a temporary worktree)")
    parser.add_argument("--calls", type=int, default=500, help="calls per timed round")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--profiled", type=int, default=1500, help="calls under the profiler")
    parser.add_argument("--concurrency", type=int, default=1, help="calls in flight at once (wrk's -c)")
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--database-url", help="postgres://... server to create the databases on")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--call", choices=sorted(CALLS), default="query", help="the call timed")
    parser.add_argument("--records", type=int, default=1000, help="records of the seeded table")
    parser.add_argument("--baseline-root", help="also profile this checkout (a directory), instead of a ref")
    parser.add_argument("--sql", action="store_true", help="print each statement's text")
    parser.add_argument("--keep", help="keep the profiles and results in this directory")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="toolhub-profile-"))
    workdir.mkdir(parents=True, exist_ok=True)
    roots = {"this checkout": ROOT}
    baseline = workdir / "baseline"
    try:
        if args.baseline_ref:
            subprocess.run(
                ["git", "worktree", "add", "--detach", str(baseline), args.baseline_ref], cwd=ROOT, check=True
            )
            roots[f"@{args.baseline_ref}"] = baseline
        elif args.baseline_root:
            roots[args.baseline_root] = Path(args.baseline_root).resolve()
        results = _run_children(args, roots, workdir)
        report(args, results, roots)
    finally:
        if args.baseline_ref:
            subprocess.run(["git", "worktree", "remove", "--force", str(baseline)], cwd=ROOT, check=False)
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
