"""Bad logins spread over many client addresses, against 2 uvicorn workers, while another user works.

    python bench/login_burst.py --database-url postgres://postgres@127.0.0.1:5432/postgres \
        [--addresses 4x10,40,150,600] [--workers 2] [--pool-size 10] [--rounds 1] \
        [--trees before=/path/to/main,after=.] [--clients asyncio,threads] [--endpoint login|oauth-token]
        [--database-name NAME]

Creates a database of its own on that server (dropped at the end), migrates it, creates a user `other`
with an API token and a small table, and starts `uvicorn --workers N` with the production password hasher
(PBKDF2, ~0.5 s a hash), DEBUG off and rate limits on (in Redis when REDIS_URL is set: give it one, as in
production; the keys get a prefix of this run's own). uvicorn trusts X-Forwarded-For from the loopback
address (its default --forwarded-allow-ips), as it would from a reverse proxy on the same machine, so each
request of the burst comes from the address it names there.

Each burst `AxK` (`A` alone: K = 1) sends A x K concurrent `POST /api/auth/token/` with wrong passwords
(half for a username that exists, half for made-up ones) from A addresses, K from each: every address stays
within its 10/minute token rate, so the rate limit refuses none of them. Meanwhile `other` calls
`GET /api/tables/` with its token, one request after another, until the burst is answered. Right before
each burst, the same user's `--quiet-calls` calls on the idle server give the quiet p95 that burst is
compared with (the machine's load changes between bursts; the ratio is taken against the quiet moment
next to it).

`--endpoint oauth-token` sends the same bursts as bad OAuth client secrets instead of bad logins: each
request a `POST /oauth/token/` for a confidential client (created with the production hasher) with a random
secret, half in the form body (`client_secret`), half as HTTP Basic; 401 is the wrong secret's answer.

The burst's client (`--clients`): `asyncio` (default: bursts.fire_together, one loop writing every request on
a connection of its own) or `threads` (bursts.release_together: a thread with urllib per request, about four
times the CPU per request). The bench and the server share the machine's cores, so the client's CPU is
printed with the workers': on a 2-core machine the thread client's CPU at 600 requests was what the other
user's p95 mostly waited for (bench/README.md). Both are measured in turn with `--clients asyncio,threads`.

Printed per burst: the status counts of the bad logins (400 = wrong credentials, 429 = refused, 5xx = the
failure this bench looks for) and their p50 / max latency; the other user's requests: count, 5xx, p50 and
p95, and p95 / quiet p95; the workers' resident memory before the burst, right after it and `--pause`
seconds later; the burst's wall time and the CPU time the workers and the burst's client used during it.

`--trees name=path,...` serves each named checkout in turn (same database, same client), `--rounds` times,
alternating (A B A B ...), so that a change and its base are measured side by side under the same load;
then prints, per tree and burst, the medians over the rounds. The bench runs from this checkout.
"""

import argparse
import base64
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bursts import call, cpu_seconds, fire_together, own_cpu_seconds, percentile, release_together, resident_mb  # noqa: E402
from tests.live_server import Uvicorn, run_python, server_database  # noqa: E402

SEED = """
from django.contrib.auth import get_user_model
from tools_app.services import api_token_issue, table_create
User = get_user_model()
User.objects.create_user("victim", password="the-right-password-" + "x" * 8)
other = User.objects.create_user("other", password="another-password-" + "y" * 8)
table_create(owner=other, name="orders", data=[{"id": i, "total": i * 2.5} for i in range(20)])
from django.contrib.auth.hashers import make_password
from oauth2_provider.models import get_application_model
Client = get_application_model()
# A client registered before client secrets had their own fast hasher: its secret stored with the password
# hasher (PBKDF2), the slow path the gate still guards (a client made now has a fast hash and needs no slot).
client = Client.objects.create(
    name="bench", client_type=Client.CLIENT_CONFIDENTIAL, authorization_grant_type=Client.GRANT_AUTHORIZATION_CODE,
    redirect_uris="https://client.example/cb", client_secret=make_password("the-client-secret-" + "z" * 20),
)
print(json.dumps({"token": api_token_issue(user=other, via="bench")[1], "client_id": client.client_id}))
"""


def bad_login(base: str, address: str, username: str) -> urllib.request.Request:
    body = json.dumps({"username": username, "password": secrets.token_urlsafe(12)}).encode()
    headers = {"Content-Type": "application/json", "X-Forwarded-For": address}
    return urllib.request.Request(f"{base}/api/auth/token/", data=body, headers=headers)


def bad_client_secret(base: str, address: str, client_id: str, basic: bool) -> urllib.request.Request:
    form = {
        "grant_type": "authorization_code",
        "code": secrets.token_urlsafe(16),
        "redirect_uri": "https://client.example/cb",
        "client_id": client_id,
        "code_verifier": secrets.token_urlsafe(48),
    }
    headers = {"Content-Type": "application/x-www-form-urlencoded", "X-Forwarded-For": address}
    secret = secrets.token_urlsafe(24)
    if basic:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()
    else:
        form["client_secret"] = secret
    return urllib.request.Request(f"{base}/oauth/token/", data=urlencode(form).encode(), headers=headers)


def light_call(base: str, token: str) -> urllib.request.Request:
    return urllib.request.Request(f"{base}/api/tables/", headers={"Authorization": f"Token {token}"})


def burst(
    server: Uvicorn,
    seeded: dict,
    addresses: int,
    per_address: int,
    net: int,
    quiet_calls: int,
    endpoint: str,
    client: str,
) -> dict:
    """One burst from the addresses 10.<net>.x.y (a fresh /16 per burst: no earlier window or lockout counts)."""
    token = seeded["token"]
    base = server.base
    quiet = [call(light_call(base, token))[1] for _ in range(quiet_calls)]
    requests = []
    for index in range(addresses):
        address = f"10.{net}.{index // 250}.{index % 250 + 1}"
        for attempt in range(per_address):
            if endpoint == "oauth-token":
                request = bad_client_secret(base, address, seeded["client_id"], basic=bool((index + attempt) % 2))
            else:
                username = "victim" if (index + attempt) % 2 else f"nobody-{index}-{attempt}"
                request = bad_login(base, address, username)
            requests.append(request)
    pids = server.worker_pids()
    rss_before = resident_mb(pids)
    server_cpu, client_cpu, started = cpu_seconds(pids), own_cpu_seconds(), time.monotonic()
    if client == "threads":
        sends = [lambda request=request: call(request) for request in requests]
        results, light = release_together(sends, meanwhile=lambda: light_call(base, token))
    else:
        results, light = fire_together(requests, meanwhile=lambda: light_call(base, token))
    wall = time.monotonic() - started
    server_cpu, client_cpu = cpu_seconds(pids) - server_cpu, own_cpu_seconds() - client_cpu
    rss_right_after = resident_mb(pids)
    statuses = Counter(status for status, _ in results)
    latencies = [seconds for _, seconds in results]
    light_seconds = [seconds for _, seconds in light]
    quiet_p95 = percentile(quiet, 0.95) * 1000
    other_p95 = percentile(light_seconds, 0.95) * 1000 if light else float("nan")
    return {
        "logins": len(results),
        "statuses": dict(sorted(statuses.items())),
        "login_5xx": sum(count for status, count in statuses.items() if status >= 500 or status == 0),
        "login_p50_ms": statistics.median(latencies) * 1000,
        "login_max_ms": max(latencies) * 1000,
        "quiet_p95_ms": quiet_p95,
        "other_calls": len(light),
        "other_5xx": sum(1 for status, _ in light if status >= 500 or status == 0),
        "other_p50_ms": statistics.median(light_seconds) * 1000 if light else float("nan"),
        "other_p95_ms": other_p95,
        "ratio": other_p95 / quiet_p95,
        "rss_before": rss_before,
        "rss_right_after": rss_right_after,
        "wall_s": wall,
        "server_cpu_s": server_cpu,
        "client_cpu_s": client_cpu,
    }


def parse_burst(text: str) -> tuple[int, int]:
    addresses, _, per_address = text.partition("x")
    return int(addresses), int(per_address or 1)


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", required=True, help="postgres://... server to create the database on")
    parser.add_argument("--addresses", default="4x10,40,150,600", help="bursts, comma-separated: A or AxK")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--pool-size", type=int, default=None, help="DATABASE_POOL_MAX_SIZE (default: settings')")
    parser.add_argument("--quiet-calls", type=int, default=40, help="quiet calls measured before each burst")
    parser.add_argument("--pause", type=float, default=5.0, help="seconds between bursts (memory measured after)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument(
        "--database-name", default=None, help="the database the bench creates and drops (default th_loginburst_<pid>)"
    )
    parser.add_argument("--trees", default=f"this={ROOT}", help="name=checkout,... served in turn each round")
    parser.add_argument(
        "--clients",
        default="asyncio",
        help="burst clients, comma-separated, each in turn: asyncio (one loop, raw sockets) or threads (urllib)",
    )
    parser.add_argument("--endpoint", choices=("login", "oauth-token"), default="login", help="what the burst sends")
    args = parser.parse_args()
    if not args.database_url.startswith("postgres"):
        raise SystemExit("--database-url must name a PostgreSQL server")
    clients = args.clients.split(",")
    if not set(clients) <= {"asyncio", "threads"}:
        raise SystemExit("--clients: asyncio, threads")
    trees = [
        (f"{name}/{client}" if len(clients) > 1 else name, Path(path).resolve(), client)
        for name, _, path in (item.partition("=") for item in args.trees.split(","))
        for client in clients
    ]
    bursts = [parse_burst(spec) for spec in args.addresses.split(",")]
    os.environ["DATABASE_URL"] = args.database_url
    rows: dict[tuple[str, int], list[dict]] = {}
    net = 0
    with (
        tempfile.TemporaryDirectory() as directory,
        server_database("loginburst", Path(directory), secret="b" * 50, name=args.database_name) as env,
    ):
        env.pop("TOOLHUB_DEV", None)  # production-like: the real password hasher, no development mode
        env["TOOLHUB_RATE_LIMITS_ENABLED"] = "true"
        # The hashing slots of this run's servers alone: the default directory is the machine's, which another
        # server or bench on the machine may be hashing in.
        env["TOOLHUB_PASSWORD_HASH_LOCK_DIR"] = str(Path(directory) / "hash-slots")
        env.setdefault("TOOLHUB_RATE_LIMIT_KEY_PREFIX", f"login-burst-{os.getpid()}")
        if args.pool_size is not None:
            env["DATABASE_POOL_MAX_SIZE"] = str(args.pool_size)
        seeded = json.loads(run_python(env, SEED))
        token = seeded["token"]
        print(
            f"{args.endpoint} burst: {args.workers} uvicorn workers, PostgreSQL, pool size "
            f"{env.get('DATABASE_POOL_MAX_SIZE', 'default (10)')} per worker, rate limits in "
            f"{'Redis' if env.get('REDIS_URL') else 'each worker'}; trees: "
            + ", ".join(f"{name} ({path})" for name, path, _ in trees),
            flush=True,
        )
        for round_number in range(1, args.rounds + 1):
            for name, root, client in trees:
                with Uvicorn(env, workers=args.workers, root=root) as server:
                    for index in range(4 * args.workers):  # warm both workers: calls and a login each
                        call(light_call(server.base, token))
                        if index < 2 * args.workers:
                            call(bad_login(server.base, f"10.255.{round_number}.{index + 1}", "victim"))
                            time.sleep(0.6)
                    print(f"round {round_number}, {name}: load average {load()}", flush=True)
                    for number, (addresses, per_address) in enumerate(bursts):
                        net += 1
                        row = burst(
                            server, seeded, addresses, per_address, net, args.quiet_calls, args.endpoint, client
                        )
                        time.sleep(args.pause)
                        row["rss_later"] = resident_mb(server.worker_pids())
                        rows.setdefault((name, number), []).append(row)
                        print(
                            f"  {addresses} address(es) x {per_address}: {row['logins']} bad logins "
                            f"{row['statuses']} (5xx {row['login_5xx']}), p50 {row['login_p50_ms']:.0f} ms, "
                            f"max {row['login_max_ms']:.0f} ms | other user: {row['other_calls']} calls, "
                            f"5xx {row['other_5xx']}, p50 {row['other_p50_ms']:.0f} ms, p95 {row['other_p95_ms']:.0f} "
                            f"ms = {row['ratio']:.1f}x quiet p95 ({row['quiet_p95_ms']:.0f} ms) | workers' RSS "
                            f"{row['rss_before']:.0f} -> {row['rss_right_after']:.0f} -> {row['rss_later']:.0f} MB | "
                            f"burst {row['wall_s']:.2f} s: CPU workers {row['server_cpu_s']:.2f} s, burst client "
                            f"{row['client_cpu_s']:.2f} s",
                            flush=True,
                        )
    print(f"\nmedians over {args.rounds} round(s); load average at the end {load()}")
    for number, (addresses, per_address) in enumerate(bursts):
        for name, _, _ in trees:
            done = rows[(name, number)]

            def median(key: str, done: list[dict] = done) -> float:
                return statistics.median(row[key] for row in done)

            print(
                f"  {addresses}x{per_address} {name}: other user p95 {median('other_p95_ms'):.0f} ms, "
                f"quiet p95 {median('quiet_p95_ms'):.0f} ms, ratio {median('ratio'):.1f}x, 5xx "
                f"{sum(row['login_5xx'] + row['other_5xx'] for row in done)}, bad-login p50 "
                f"{median('login_p50_ms'):.0f} ms, workers' RSS {median('rss_before'):.0f} -> "
                f"{median('rss_right_after'):.0f} -> {median('rss_later'):.0f} MB, CPU during the burst: workers "
                f"{median('server_cpu_s'):.2f} s, burst client {median('client_cpu_s'):.2f} s"
            )


if __name__ == "__main__":
    main()
