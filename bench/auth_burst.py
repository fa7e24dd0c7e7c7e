"""A burst of bad credentials against 2 uvicorn workers on PostgreSQL.

    python bench/auth_burst.py --database-url postgres://postgres@127.0.0.1:5432/postgres [--requests 300]

Creates a database of its own on that server, migrates it, seeds one MCP instance (slug `burst`) with a key
and one user with an API token, starts `uvicorn --workers 2`, then fires `--requests` requests at once (one
thread each, released together), split evenly over four kinds of bad credentials:

- MCP `/mcp/burst/` with a malformed bearer key, and with a well-formed key that matches no row;
- API `/api/tables/` with a malformed `Token`, and with a well-formed token that matches no row.

It prints the status counts per kind (401 expected everywhere, never a 5xx), the median and p99 latency,
PostgreSQL's connection count to the database (pg_stat_activity) before, at its peak during, and after the
burst (-1: the server refused the counting connection itself, "too many clients"), and whether a good MCP
call and a good API call answer 200 right after. `--rounds N` repeats the burst (fresh random credentials
each time) and prints each round and the medians. `--settle S` counts the connections again S seconds later.
`--pool-size 0` runs the workers without the connection pool, for comparison: on a shared server that can
exhaust PostgreSQL's max_connections for everyone using it while it runs.
"""

import argparse
import json
import os
import secrets
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bursts import call, release_together  # noqa: E402
from tests.live_server import Uvicorn, run_python, seed_mcp, server_database  # noqa: E402

KINDS = ("mcp-malformed", "mcp-unknown", "api-malformed", "api-unknown")

SEED_TOKEN = """
from django.contrib.auth import get_user_model
from tools_app.services import api_token_issue
user = get_user_model().objects.get(username="bench")
print(json.dumps({"token": api_token_issue(user=user, via="bench")[1]}))
"""

MCP_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
}


def request(base: str, kind: str, credential: str | None = None) -> tuple[int, float]:
    """One request of `kind`; returns (status, seconds). Status 0: no HTTP answer (connection failed)."""
    if kind.startswith("mcp"):
        key = credential or ("thk_" + secrets.token_urlsafe(32) if kind == "mcp-unknown" else secrets.token_hex(8))
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
        req = urllib.request.Request(
            f"{base}/mcp/burst/", data=body, headers={**MCP_HEADERS, "Authorization": f"Bearer {key}"}
        )
    else:
        token = credential or ("tht_" + secrets.token_hex(32) if kind == "api-unknown" else secrets.token_urlsafe(12))
        req = urllib.request.Request(f"{base}/api/tables/", headers={"Authorization": f"Token {token}"})
    return call(req, timeout=60)


class ConnectionSampler:
    """Counts the server's connections to the database every 20 ms while running; keeps the peak."""

    def __init__(self, admin_url: str, database: str) -> None:
        self.admin_url, self.database = admin_url, database
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def count(self) -> int:
        """The connection count now; -1 when PostgreSQL refuses another connection (max_connections reached)."""
        try:
            with psycopg.connect(self.admin_url, autocommit=True) as conn:
                query = "SELECT count(*) FROM pg_stat_activity WHERE datname = %s"
                return conn.execute(query, [self.database]).fetchone()[0]
        except psycopg.OperationalError:
            return -1

    def _run(self) -> None:
        try:
            with psycopg.connect(self.admin_url, autocommit=True) as conn:
                while not self._stop.is_set():
                    row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", [self.database])
                    self.peak = max(self.peak, row.fetchone()[0])
                    time.sleep(0.02)
        except psycopg.OperationalError:
            self.peak = -1  # the sampler itself could not connect: the server was full

    def __enter__(self) -> "ConnectionSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def burst(base: str, total: int) -> tuple[dict[str, Counter], list[float]]:
    kinds = [KINDS[i % len(KINDS)] for i in range(total)]
    results, _ = release_together([lambda kind=kind: request(base, kind) for kind in kinds])
    counts: dict[str, Counter] = {kind: Counter() for kind in KINDS}
    for kind, (status, _) in zip(kinds, results, strict=True):
        counts[kind][status] += 1
    return counts, [seconds for _, seconds in results]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", required=True, help="postgres://... server to create the database on")
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--pool-size", type=int, default=None, help="DATABASE_POOL_MAX_SIZE (default: settings')")
    parser.add_argument("--settle", type=float, default=0, help="then wait this long and count connections again")
    args = parser.parse_args()
    if not args.database_url.startswith("postgres"):
        raise SystemExit("--database-url must name a PostgreSQL server")

    os.environ["DATABASE_URL"] = args.database_url
    admin_url = urlunsplit(urlsplit(args.database_url)._replace(path="/postgres"))
    with (
        tempfile.TemporaryDirectory() as directory,
        server_database("authburst", Path(directory), secret="bench-secret-" + "a" * 40) as env,
    ):
        if args.pool_size is not None:
            env["DATABASE_POOL_MAX_SIZE"] = str(args.pool_size)
        name = urlsplit(env["DATABASE_URL"]).path.lstrip("/")
        seeded = seed_mcp(env, slug="burst", rows=10, user="bench")
        token = json.loads(run_python(env, SEED_TOKEN))["token"]
        options = ("--log-level", "warning", "--backlog", "4096")
        with Uvicorn(env, workers=args.workers, options=options) as server:
            run_rounds(args, env, server.base, admin_url, name, seeded, token)


def run_rounds(
    args: argparse.Namespace, env: dict, base: str, admin_url: str, name: str, seeded: dict, token: str
) -> None:
    sampler = ConnectionSampler(admin_url, name)
    # Warm both workers: a few good calls each way, so that each has opened its pool.
    for _ in range(4 * args.workers):
        request(base, "mcp-malformed", seeded["key"])
        request(base, "api-malformed", token)
    time.sleep(0.5)
    print(
        f"auth burst: {args.requests} concurrent requests with bad credentials, {args.workers} uvicorn workers, "
        f"PostgreSQL, pool size {env.get('DATABASE_POOL_MAX_SIZE', 'default (10)')} per worker"
    )
    print(f"kinds: {', '.join(KINDS)} ({args.requests // len(KINDS)} each)")
    rows = []
    for number in range(1, args.rounds + 1):
        before = sampler.count()
        with ConnectionSampler(admin_url, name) as during:
            counts, latencies = burst(base, args.requests)
        time.sleep(1.0)
        after = sampler.count()
        good_mcp = request(base, "mcp-malformed", seeded["key"])[0]
        good_api = request(base, "api-malformed", token)[0]
        total = Counter()
        for counter in counts.values():
            total.update(counter)
        five_xx = sum(count for status, count in total.items() if status >= 500 or status == 0)
        latencies.sort()
        row = {
            "401": total[401],
            "5xx": five_xx,
            "other": sum(total.values()) - total[401] - five_xx,
            "p50_ms": statistics.median(latencies) * 1000,
            "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1000,
            "before": before,
            "peak": during.peak,
            "after": after,
            "good": (good_mcp, good_api),
        }
        rows.append(row)
        per_kind = "  ".join(f"{kind}={dict(counts[kind])}" for kind in KINDS)
        print(
            f"round {number}: 401={row['401']} 5xx={row['5xx']} other={row['other']}  "
            f"p50={row['p50_ms']:.0f} ms p99={row['p99_ms']:.0f} ms  "
            f"pg connections before={before} peak={during.peak} after={after}  "
            f"right after: MCP {good_mcp}, API {good_api}\n         {per_kind}"
        )
    print(
        f"medians over {len(rows)} round(s): 401={statistics.median(r['401'] for r in rows):.0f} "
        f"5xx={statistics.median(r['5xx'] for r in rows):.0f} "
        f"p50={statistics.median(r['p50_ms'] for r in rows):.0f} ms "
        f"p99={statistics.median(r['p99_ms'] for r in rows):.0f} ms "
        f"pg connections before={statistics.median(r['before'] for r in rows):.0f} "
        f"peak={statistics.median(r['peak'] for r in rows):.0f} "
        f"after={statistics.median(r['after'] for r in rows):.0f}"
    )
    if args.settle:
        time.sleep(args.settle)
        print(f"pg connections {args.settle:.0f} s after the last burst: {sampler.count()}")


if __name__ == "__main__":
    main()
