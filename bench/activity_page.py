#!/usr/bin/env python
"""The activity page (/admin/activity/, docs/activity.md) over a call log of 100,000 rows: server time.

Seeds N CallLog rows (default 100,000) over the last 24 hours for two owners (owner A: 4 instances and 21
tools, 90 % of the rows; owner B: 1 instance and 6 tools), 5 % failed with a mix of codes (budget refusals,
rate-limit refusals, invalid arguments), durations log-normal around 2 ms; then times, warm, median and p95
of --runs runs each:

- tools_app.activity.activity() alone (its one statement and the Python that shapes the series);
- GET /admin/activity/ through Django's test client (routing, session, the statements, the template with its
  JSON script element): as a superuser (all rows) and as owner A, for the 24 h and 7 d windows;

and prints the payload's size. Then what recording a call pays for the covering indexes: single-row inserts
with the call log's indexes before (A) and after (B) this page, in alternating rounds.

Against a throwaway database it creates and removes: a temporary SQLite file by default; with
DATABASE_URL=postgres://..., the database `th_bench_activity` on that server.

    .venv/bin/python bench/activity_page.py [--calls 100000] [--runs 15]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/activity_page.py
"""

import argparse
import os
import random
import statistics
import sys
import time
from datetime import timedelta

import data_access as throwaway  # bench/data_access.py: the throwaway database

throwaway.BENCH_DATABASE = "th_bench_activity"
CODES = ["QUERY_TOO_EXPENSIVE", "RESULT_TOO_LARGE", "RATE_LIMITED", "INVALID_ARGUMENTS", "INVALID_QUERY"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000, help="call-log rows (default 100000)")
    parser.add_argument("--runs", type=int, default=15, help="timed runs of each measurement (default 15)")
    parser.add_argument(
        "--insert-rounds", type=int, default=5, help="A/B rounds of call-log inserts, old and new indexes (default 5)"
    )
    parser.add_argument("--inserts", type=int, default=1000, help="single-row inserts per round (default 1000)")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "testserver")
    return throwaway.in_throwaway_database(lambda database: run(args, database.label))


def seed(calls: int) -> tuple[object, object]:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.utils import timezone

    from tools_app.models import CallLog
    from tools_app.services import instance_create

    users = get_user_model().objects
    group = Group.objects.get(name="toolhub users")
    owner_a = users.create_user("owner_a", password="bench-password-1", is_staff=True)
    owner_b = users.create_user("owner_b", password="bench-password-1", is_staff=True)
    owner_a.groups.add(group)
    owner_b.groups.add(group)
    users.create_user("root", password="bench-password-1", is_staff=True, is_superuser=True)
    instances_a = [instance_create(owner=owner_a, slug=f"shop{i}", name=f"Shop {i}") for i in range(4)]
    instance_b = instance_create(owner=owner_b, slug="blog", name="Blog")
    tools_a = [f"orders_{i:02d}" for i in range(21)]
    tools_b = [f"posts_{i}" for i in range(6)]
    rng = random.Random(27)
    now = timezone.now()
    rows = []
    for _ in range(calls):
        mine = rng.random() < 0.9
        failed = rng.random() < 0.05
        code = rng.choice(CODES) if failed else ""
        rows.append(
            CallLog(
                owner=owner_a if mine else owner_b,
                mcp_instance=(rng.choice(instances_a + [None]) if mine else instance_b),
                tool_name=rng.choice(tools_a) if mine else rng.choice(tools_b),
                surface="mcp",
                status="error" if failed else "ok",
                error_code=code,
                duration_ms=round(rng.lognormvariate(0.7, 0.8), 3),
                created_at=now - timedelta(seconds=rng.uniform(0, 86_400)),
            )
        )
    CallLog.objects.bulk_create(rows, batch_size=5000)
    return owner_a, users.get(username="root")


def timed(call, runs: int) -> tuple[float, float, float]:
    """(median wall ms, p95 wall ms, median CPU ms) of `runs` calls after one warm-up call."""
    call()
    wall, cpu = [], []
    for _ in range(runs):
        started, started_cpu = time.perf_counter(), time.process_time()
        call()
        wall.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - started_cpu) * 1000)
    return statistics.median(wall), throwaway.percentile(wall, 0.95), statistics.median(cpu)


def run(args: argparse.Namespace, label: str) -> int:
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import setup_test_environment

    from tools_app import activity
    from tools_app.models import CallLog

    print(f"The activity page over {args.calls:,} call-log rows — {label}")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    owner_a, root = seed(args.calls)
    print(f"seeded in {time.perf_counter() - started:.1f} s; {CallLog.objects.count():,} rows")
    if CallLog.objects.count() != args.calls:
        print("seeding failed", file=sys.stderr)
        return 1

    setup_test_environment()  # the test client's response.context
    with connection.cursor() as cursor:  # what autovacuum would have done after a bulk load
        cursor.execute("ANALYZE" if connection.vendor == "sqlite" else "VACUUM ANALYZE mcp_app_calllog")
    start, end = activity.window_bounds(activity.WINDOWS["24h"])
    groups = CallLog.objects.filter(owner=owner_a, created_at__gte=start, created_at__lt=end)
    sql, params = activity.activity_groups(groups, activity.WINDOWS["24h"], start).query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(("EXPLAIN QUERY PLAN " if connection.vendor == "sqlite" else "EXPLAIN ") + sql, params)
        lines = [str(row[-1]) for row in cursor.fetchall()]
        plan = " / ".join(line.strip() for line in lines if "Scan" in line or "SEARCH" in line or "SCAN" in line)
    print(f"plan of an owner's statement: {plan[:300]}")
    print(f"{'measurement':<48} {'median ms':>10} {'p95 ms':>8} {'CPU ms':>8}")
    for window in ("24h", "7d"):
        median, p95, cpu = timed(
            lambda window=window: activity.activity(CallLog.objects.all(), activity.WINDOWS[window]), args.runs
        )
        print(f"{'activity() alone, all rows, ' + window:<48} {median:>10.1f} {p95:>8.1f} {cpu:>8.1f}")
    worst = 0.0
    for who, user in (("superuser", root), ("owner A", owner_a)):
        client = Client()
        client.force_login(user)
        for window in ("24h", "7d"):
            response = client.get("/admin/activity/", {"window": window})
            assert response.status_code == 200, response.status_code
            total = response.context["data"]["total"]["calls"]
            size = len(response.content)
            median, p95, cpu = timed(
                lambda client=client, window=window: client.get("/admin/activity/", {"window": window}), args.runs
            )
            worst = max(worst, median)
            name = f"GET /admin/activity/ {who}, {window} ({total:,} calls)"
            print(f"{name:<48} {median:>10.1f} {p95:>8.1f} {cpu:>8.1f}   page {size / 1024:.0f} KiB")
    print(f"load average {os.getloadavg()[0]:.1f}; slowest page median {worst:.0f} ms (target ≤ 1000 ms)")
    if args.insert_rounds:
        insert_ab(args, owner_a)
    return 0


# The call log's indexes before the activity page (A) and with it (B): what recording a call pays for it.
INDEXES_A = [
    "CREATE INDEX ab_owner_created ON mcp_app_calllog (owner_id, created_at DESC)",
    "CREATE INDEX ab_created ON mcp_app_calllog (created_at)",
]
INDEXES_B = [
    "CREATE INDEX ab_owner_activity ON mcp_app_calllog "
    "(owner_id, created_at, mcp_instance_id, tool_name, status, error_code, duration_ms)",
    "CREATE INDEX ab_activity ON mcp_app_calllog (created_at, mcp_instance_id, tool_name, status, error_code, "
    "duration_ms)",
]


def insert_ab(args: argparse.Namespace, owner) -> None:
    """Single-row inserts (autocommit, as the call pipeline records a call) into the 100,000-row call log, with
    index set A and B alternately; median µs per insert of each round."""
    from django.db import connection
    from django.utils import timezone

    from tools_app.models import CallLog

    def use(statements: list[str]) -> None:
        with connection.cursor() as cursor:
            for name in ("ab_owner_created", "ab_created", "ab_owner_activity", "ab_activity"):
                cursor.execute(f"DROP INDEX IF EXISTS {name}")
            for statement in statements:
                cursor.execute(statement)

    with connection.cursor() as cursor:  # the migration's indexes out of the way: A and B are added by hand
        cursor.execute("DROP INDEX IF EXISTS calllog_owner_activity")
        cursor.execute("DROP INDEX IF EXISTS calllog_activity")
    rounds: dict[str, list[float]] = {"A": [], "B": []}
    for _ in range(args.insert_rounds):
        for label, statements in (("A", INDEXES_A), ("B", INDEXES_B)):
            use(statements)
            started = time.perf_counter()
            for n in range(args.inserts):
                CallLog.objects.create(
                    owner=owner,
                    tool_name=f"orders_{n % 21:02d}",
                    status="ok",
                    duration_ms=1.5,
                    created_at=timezone.now(),
                )
            rounds[label].append((time.perf_counter() - started) * 1e6 / args.inserts)
    a, b = statistics.median(rounds["A"]), statistics.median(rounds["B"])
    print(
        f"call-log insert, {args.inserts} single-row inserts x {args.insert_rounds} rounds alternating: "
        f"A (before) {a:.0f} µs, B (covering indexes) {b:.0f} µs per insert, B/A {b / a:.2f}; "
        f"rounds A {[round(x) for x in rounds['A']]} B {[round(x) for x in rounds['B']]}; "
        f"load average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    sys.exit(main())
