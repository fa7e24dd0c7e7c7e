#!/usr/bin/env python
"""Server time of the admin's instance page with many bindings.

    .venv/bin/python bench/instance_page.py                    # 27 and 200 bindings, SQLite
    .venv/bin/python bench/instance_page.py --bindings 27,200,500 --runs 9

On a throwaway database (bench/data_access.py): an owner with a table and N query tools (demo-like names and
descriptions), one instance per size with all N bound. Each round GETs every instance's change page through
Django's test client in this process (middleware, session, admin view, template: what the server spends),
alternating the sizes; medians of `--runs` rounds in ms (wall, and the process's CPU time: on a shared machine
the wall time includes waiting for a core), and the HTML size.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.data_access import in_throwaway_database  # noqa: E402


def run(args: argparse.Namespace, database) -> int:
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client
    from django.urls import reverse

    from tools_app import services

    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_superuser("bench", password="bench-password-1")
    table = services.table_create(owner=owner, name="orders", data=[{"id": 1, "status": "new", "total": 3}])
    sizes = [int(size) for size in args.bindings.split(",")]
    tools = [
        services.tool_create(
            owner=owner,
            name=f"orders_query_{number:03d}",
            type="query_data",
            table=table,
            description=f"Query the orders of region {number} with JMESPath: filters, projections, sorting.",
        )
        for number in range(max(sizes))
    ]
    urls = {}
    for size in sizes:
        instance = services.instance_create(owner=owner, name=f"With {size}", slug=f"with-{size}")
        services.binding_create_many(mcp_instance=instance, tools=tools[:size])
        urls[size] = reverse("admin:tools_app_mcpinstance_change", args=[instance.pk])
    client = Client(HTTP_HOST="localhost")
    client.force_login(owner)
    timings: dict[int, list[float]] = {size: [] for size in sizes}
    cpu: dict[int, list[float]] = {size: [] for size in sizes}
    html: dict[int, int] = {}
    for _round in range(args.runs):
        for size, url in urls.items():
            started, started_cpu = time.perf_counter(), time.process_time()
            response = client.get(url)
            timings[size].append((time.perf_counter() - started) * 1000)
            cpu[size].append((time.process_time() - started_cpu) * 1000)
            assert response.status_code == 200, (size, response.status_code)
            html[size] = len(response.content)
    print(f"{database.label}; load average at the end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(f"{'bindings':>8} {'median ms':>10} {'min ms':>8} {'CPU ms':>8} {'HTML kB':>8}")
    for size in sizes:
        samples = timings[size]
        line = f"{size:8} {statistics.median(samples):10.1f} {min(samples):8.1f} {statistics.median(cpu[size]):8.1f}"
        print(f"{line} {html[size] / 1000:8.1f}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bindings", default="27,200")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    return in_throwaway_database(lambda database: run(args, database))


if __name__ == "__main__":
    sys.exit(main())
