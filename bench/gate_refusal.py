"""What a login the gate refuses costs the server's worker (toolhub/login_gate.py): the ASGI gate called in one
process, with every hashing slot of the machine held, on a `POST /api/auth/token/` with a wrong password,
until the refusal (429) is sent. CPU time of the process per refused request (median over rounds), and, for
scale, the same request through the whole ASGI application as uvicorn serves it (toolhub.asgi.application:
the body cap, the memory trim, the gate).

    .venv/bin/python bench/gate_refusal.py [--requests 5000] [--rounds 7] [--uvicorn-bursts 5]

Then, with `--uvicorn-bursts N` (default 5), the whole server's cost: one uvicorn worker (as
bench/login_burst.py starts it, on an SQLite database of its own), the slot still held by this process, N bursts
of 600 such logins from 600 addresses (bursts.fire_together); the worker's CPU time per refused login (uvicorn's
accept, parse, answer and close included) and the burst client's, medians over the bursts.
"""

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolhub.settings")
os.environ.setdefault("DJANGO_SECRET_KEY", "bench")
os.environ["TOOLHUB_RATE_LIMITS_ENABLED"] = "true"
_directory = tempfile.mkdtemp(prefix="gate-refusal-bench-")
os.environ["DATABASE_URL"] = f"sqlite:///{_directory}/bench.sqlite3"
os.environ["TOOLHUB_PASSWORD_HASH_LOCK_DIR"] = _directory

import django  # noqa: E402

django.setup()

from bench.bursts import cpu_seconds, fire_together, own_cpu_seconds  # noqa: E402
from tests.live_server import Uvicorn, server_database  # noqa: E402
from toolhub.asgi import application  # noqa: E402
from toolhub.login_gate import gate_hashes  # noqa: E402
from toolhub.passwords import slot_limit, take_slot_for_request  # noqa: E402

BODY = json.dumps({"username": "victim", "password": "not-the-password"}).encode()


def scope(index: int) -> dict:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/api/auth/token/",
        "raw_path": b"/api/auth/token/",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1:8000"),
            (b"user-agent", b"Python-urllib/3.11"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(BODY)).encode()),
            (b"x-forwarded-for", f"10.1.{index // 250}.{index % 250 + 1}".encode()),
            (b"connection", b"close"),
        ],
        "client": (f"10.1.{index // 250}.{index % 250 + 1}", 40000),
        "server": ("127.0.0.1", 8000),
    }


async def _never_django(scope: dict, receive, send) -> None:
    raise AssertionError("the gate let a request through while every slot was held")


async def _run(app, requests: int) -> float:
    """CPU seconds per request of `requests` refused requests through `app`."""
    statuses = []

    async def receive() -> dict:
        return {"type": "http.request", "body": BODY, "more_body": False}

    async def send(message: dict) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    started = time.process_time()
    for index in range(requests):
        await app(scope(index), receive, send)
    spent = time.process_time() - started
    assert statuses == [429] * requests, set(statuses)
    return spent / requests


def through_uvicorn(bursts: int, size: int = 600) -> tuple[list[float], list[float]]:
    """(worker CPU seconds per refused login, client CPU seconds per login), one value per burst."""
    server_cpu, client_cpu = [], []
    with server_database("gaterefusal", Path(_directory), secret="g" * 50) as env:
        env.pop("TOOLHUB_DEV", None)
        with Uvicorn(env, workers=1) as server:
            requests = [
                urllib.request.Request(
                    f"{server.base}/api/auth/token/",
                    data=BODY,
                    headers={"Content-Type": "application/json", "X-Forwarded-For": f"10.9.{i // 250}.{i % 250 + 1}"},
                )
                for i in range(size)
            ]
            fire_together(requests[:50])  # warm
            for _ in range(bursts):
                pids = server.worker_pids()
                server_before, client_before = cpu_seconds(pids), own_cpu_seconds()
                results, _ = fire_together(requests)
                server_cpu.append((cpu_seconds(pids) - server_before) / size)
                client_cpu.append((own_cpu_seconds() - client_before) / size)
                assert {status for status, _ in results} == {429}, {status for status, _ in results}
    return server_cpu, client_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--uvicorn-bursts", type=int, default=5, help="bursts of 600 through uvicorn (0: none)")
    args = parser.parse_args()
    held = [take_slot_for_request() for _ in range(slot_limit())]  # every slot of the machine taken
    apps = {"gate": gate_hashes(_never_django), "asgi application": application}
    timings: dict[str, list[float]] = {name: [] for name in apps}
    loop = asyncio.new_event_loop()
    for _ in range(args.rounds):
        for name, app in apps.items():
            timings[name].append(loop.run_until_complete(_run(app, args.requests)))
    served = through_uvicorn(args.uvicorn_bursts) if args.uvicorn_bursts else None
    for slot in held:
        slot.release()
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(f"{args.requests} refused logins x {args.rounds} rounds; load average {load}")
    for name, values in timings.items():
        print(
            f"  {name}: CPU per refused login, median {statistics.median(values) * 1e6:.1f} us "
            f"(min {min(values) * 1e6:.1f} us)"
        )
    if served is not None:
        server_cpu, client_cpu = served
        print(
            f"  through uvicorn, {args.uvicorn_bursts} bursts of 600: worker CPU per refused login, median "
            f"{statistics.median(server_cpu) * 1e6:.0f} us; burst client (bursts.fire_together) "
            f"{statistics.median(client_cpu) * 1e6:.0f} us"
        )


if __name__ == "__main__":
    main()
