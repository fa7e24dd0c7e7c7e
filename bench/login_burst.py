"""Bad logins spread over many client addresses, against 2 uvicorn workers, while another user works.

    python bench/login_burst.py --database-url postgres://postgres@127.0.0.1:5432/postgres \
        [--addresses 4x10,40,150] [--workers 2] [--pool-size 10]

Creates a database of its own on that server (dropped at the end), migrates it, creates a user `other`
with an API token and a small table, and starts `uvicorn --workers N` with the production password hasher
(PBKDF2, ~0.5 s a hash). uvicorn trusts X-Forwarded-For from the loopback address (its default
--forwarded-allow-ips), as it would from a reverse proxy on the same machine, so each request of the burst
comes from the address it names there.

Each burst `AxK` (`A` alone: K = 1) sends A x K concurrent `POST /api/auth/token/` with wrong passwords
(half for a username that exists, half for made-up ones) from A addresses, K from each: every address stays
within its 10/minute token rate, so the rate limit refuses none of them. Meanwhile `other` calls
`GET /api/tables/` with its token, one request after another, until the burst is answered.

Printed per burst: the status counts of the bad logins (401/400 = refused, 429 = rate limited, 5xx = the
failure this bench looks for) and their p50 / max latency; the other user's requests: count, 5xx, p50 and
p95, beside the same user's p50 / p95 on a quiet server (measured first).
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
import urllib.error
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.live_server import Uvicorn, run_python, server_database  # noqa: E402

SEED = """
from django.contrib.auth import get_user_model
from tools_app.services import api_token_issue, table_create
User = get_user_model()
User.objects.create_user("victim", password="the-right-password-" + "x" * 8)
other = User.objects.create_user("other", password="another-password-" + "y" * 8)
table_create(owner=other, name="orders", data=[{"id": i, "total": i * 2.5} for i in range(20)])
print(json.dumps({"token": api_token_issue(user=other, via="bench")[1]}))
"""


def call(request: urllib.request.Request) -> tuple[int, float]:
    """(status, seconds); status 0 when no HTTP answer came."""
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            response.read()
            status = response.status
    except urllib.error.HTTPError as error:
        error.read()
        status = error.code
    except OSError:
        status = 0
    return status, time.monotonic() - started


def bad_login(base: str, address: str, username: str) -> urllib.request.Request:
    body = json.dumps({"username": username, "password": secrets.token_urlsafe(12)}).encode()
    headers = {"Content-Type": "application/json", "X-Forwarded-For": address}
    return urllib.request.Request(f"{base}/api/auth/token/", data=body, headers=headers)


def light_call(base: str, token: str) -> urllib.request.Request:
    return urllib.request.Request(f"{base}/api/tables/", headers={"Authorization": f"Token {token}"})


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def burst(base: str, token: str, addresses: int, per_address: int, round_number: int) -> dict:
    requests = []
    for index in range(addresses):
        # A fresh /16 per burst, so that no earlier burst's rate-limit window or lockout counts.
        address = f"10.{round_number}.{index // 250}.{index % 250 + 1}"
        for attempt in range(per_address):
            username = "victim" if (index + attempt) % 2 else f"nobody-{index}-{attempt}"
            requests.append(bad_login(base, address, username))
    gate = threading.Barrier(len(requests) + 1)
    done = threading.Event()
    light: list[tuple[int, float]] = []

    def one(request: urllib.request.Request) -> tuple[int, float]:
        gate.wait()
        return call(request)

    def other_user() -> None:
        gate.wait()
        while not done.is_set():
            light.append(call(light_call(base, token)))

    watcher = threading.Thread(target=other_user)
    watcher.start()
    with ThreadPoolExecutor(max_workers=len(requests)) as pool:
        results = list(pool.map(one, requests))
    done.set()
    watcher.join()
    statuses = Counter(status for status, _ in results)
    latencies = [seconds for _, seconds in results]
    light_seconds = [seconds for _, seconds in light]
    return {
        "logins": len(results),
        "statuses": dict(sorted(statuses.items())),
        "login_5xx": sum(count for status, count in statuses.items() if status >= 500 or status == 0),
        "login_p50_ms": statistics.median(latencies) * 1000,
        "login_max_ms": max(latencies) * 1000,
        "other_calls": len(light),
        "other_5xx": sum(1 for status, _ in light if status >= 500 or status == 0),
        "other_p50_ms": statistics.median(light_seconds) * 1000 if light else float("nan"),
        "other_p95_ms": percentile(light_seconds, 0.95) * 1000 if light else float("nan"),
    }


def parse_burst(text: str) -> tuple[int, int]:
    addresses, _, per_address = text.partition("x")
    return int(addresses), int(per_address or 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", required=True, help="postgres://... server to create the database on")
    parser.add_argument("--addresses", default="4x10,40,150", help="bursts, comma-separated: A or AxK")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--pool-size", type=int, default=None, help="DATABASE_POOL_MAX_SIZE (default: settings')")
    parser.add_argument("--quiet-calls", type=int, default=40)
    parser.add_argument("--pause", type=float, default=5.0, help="seconds between bursts")
    args = parser.parse_args()
    if not args.database_url.startswith("postgres"):
        raise SystemExit("--database-url must name a PostgreSQL server")
    os.environ["DATABASE_URL"] = args.database_url
    with (
        tempfile.TemporaryDirectory() as directory,
        server_database("loginburst", Path(directory), secret="b" * 50) as env,
    ):
        env.pop("TOOLHUB_DEV", None)  # production-like: the real password hasher, no development mode
        if args.pool_size is not None:
            env["DATABASE_POOL_MAX_SIZE"] = str(args.pool_size)
        token = json.loads(run_python(env, SEED))["token"]
        with Uvicorn(env, workers=args.workers) as server:
            for _ in range(4 * args.workers):  # warm both workers
                call(light_call(server.base, token))
            quiet = [call(light_call(server.base, token))[1] for _ in range(args.quiet_calls)]
            quiet_p50, quiet_p95 = statistics.median(quiet) * 1000, percentile(quiet, 0.95) * 1000
            print(
                f"login burst: {args.workers} uvicorn workers, PostgreSQL, pool size "
                f"{env.get('DATABASE_POOL_MAX_SIZE', 'default (10)')} per worker; other user quiet: "
                f"p50 {quiet_p50:.0f} ms, p95 {quiet_p95:.0f} ms"
            )
            for number, spec in enumerate(args.addresses.split(","), start=1):
                addresses, per_address = parse_burst(spec)
                row = burst(server.base, token, addresses, per_address, number)
                print(
                    f"{addresses} address(es) x {per_address}: {row['logins']} bad logins {row['statuses']} "
                    f"(5xx {row['login_5xx']}), p50 {row['login_p50_ms']:.0f} ms, max {row['login_max_ms']:.0f} ms | "
                    f"other user: {row['other_calls']} calls, 5xx {row['other_5xx']}, "
                    f"p50 {row['other_p50_ms']:.0f} ms, p95 {row['other_p95_ms']:.0f} ms "
                    f"({row['other_p95_ms'] / quiet_p95:.1f}x quiet p95)",
                    flush=True,
                )
                time.sleep(args.pause)


if __name__ == "__main__":
    main()
