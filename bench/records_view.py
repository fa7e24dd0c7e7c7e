#!/usr/bin/env python
"""The admin's records view over a large table: server time of its pages and the process's memory.

    .venv/bin/python bench/records_view.py                      # 1,000,000 records, SQLite
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/records_view.py
    .venv/bin/python bench/records_view.py --records 100000 --runs 9

On a throwaway database (bench/data_access.py): a table `{"orders": [...]}` with a query tool at /orders, moved to
rows (records.table_to_rows), then `--records` records of bench/scale.py's shape (~300 bytes each) appended to its
collection by the storage code (store.write_records, keys by `id`). Then, through Django's test client in this
process (the whole request: middleware, session, admin view, template), alternating in each round:

- the records view's first page, a page deep in the collection (found by the directory), a key search, a filter
  that compiles to SQL (`status == 'shipped'`, first page);
- side by side on a 10,000-record DOCUMENT table (the issue's case): the table's change page (its raw JSON
  editor) and its records view.

Medians of `--runs` rounds in ms, the HTML size, and the process's RSS growth from before the first request to
after the last (and the peak growth, ru_maxrss): bounded by a page, not by the table.
"""

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import bench.data_access  # noqa: E402
from bench.data_access import in_throwaway_database  # noqa: E402
from bench.scale import iter_records  # noqa: E402


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(args: argparse.Namespace, database) -> int:
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection, transaction
    from django.db.models import F
    from django.test import Client
    from django.urls import reverse

    from tools_app import services
    from tools_app.data_access.sql.store import POSITION_GAP, write_records
    from tools_app.execution import records
    from tools_app.models import TableCollection, TableRecord, TableRecordLayout

    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_superuser("bench", password="bench-password-1")
    table = services.table_create(owner=owner, name="big orders", data={"orders": [{"id": 0, "status": "new"}]})
    services.tool_create(
        owner=owner, name="orders_query", type="query_data", table=table, json_path="/orders", description="Orders."
    )
    assert records.table_to_rows(table.pk)
    collection = TableCollection.objects.get(table=table, mount="/orders")
    started = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        written = write_records(
            cursor,
            dialect=records.dialect(),
            records_table=TableRecord._meta.db_table,
            layouts_table=TableRecordLayout._meta.db_table,
            collection_id=collection.pk,
            value=iter_records(args.records),  # type: ignore[arg-type]  # any iterable of records
            key_of=lambda record: str(record["id"]),
            first_position=POSITION_GAP,
        )
        TableCollection.objects.filter(pk=collection.pk).update(record_count=F("record_count") + written)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {TableRecord._meta.db_table}")
    print(f"{database.label}: {written + 1:,} records written as rows in {time.perf_counter() - started:.1f} s")

    small = services.table_create(owner=owner, name="10k orders", data={"orders": list(iter_records(10_000))})
    services.tool_create(
        owner=owner, name="small_query", type="query_data", table=small, json_path="/orders", description="Orders."
    )

    client = Client(HTTP_HOST="localhost")
    client.force_login(owner)
    big_records = reverse("admin:tools_app_table_records", args=[table.pk])
    deep_page = (written + 1) // 50 // 2
    requests = {
        "rows 1M: records view, first page": f"{big_records}?collection=/orders",
        f"rows 1M: page {deep_page:,}": f"{big_records}?collection=/orders&page={deep_page}",
        "rows 1M: key search": f"{big_records}?collection=/orders&key={written // 3}",
        "rows 1M: filter status == 'shipped'": f"{big_records}?collection=/orders&filter=status+%3D%3D+%27shipped%27",
        "document 10k: table change page": reverse("admin:tools_app_table_change", args=[small.pk]),
        "document 10k: records view, first page": reverse("admin:tools_app_table_records", args=[small.pk])
        + "?collection=/orders",
    }
    timings: dict[str, list[float]] = {name: [] for name in requests}
    sizes: dict[str, int] = {}
    refused: dict[str, str] = {}
    rss_before, peak_before = rss_mib(), peak_mib()
    for _round in range(args.runs):
        for name, url in requests.items():
            started = time.perf_counter()
            response = client.get(url)
            timings[name].append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200, (name, response.status_code)
            sizes[name] = len(response.content)
            if response.context_data.get("error"):  # e.g. QUERY_TOO_EXPENSIVE: the budget stopped it
                refused[name] = response.context_data["error"][:120]
    rss_after, peak_after = rss_mib(), peak_mib()
    print(f"load average at the end: {' '.join(f'{value:.2f}' for value in os.getloadavg())}")
    print(f"{'request':48} {'median ms':>10} {'min ms':>8} {'HTML kB':>8}")
    for name, samples in timings.items():
        print(f"{name:48} {statistics.median(samples):10.1f} {min(samples):8.1f} {sizes[name] / 1000:8.1f}")
        if name in refused:
            print(f"    answered: {refused[name]}")
    print(
        f"RSS {rss_before:.0f} -> {rss_after:.0f} MiB over the {args.runs} rounds (growth {rss_after - rss_before:+.0f}"
        f" MiB); peak growth {peak_after - peak_before:+.0f} MiB"
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    os.environ.setdefault("TOOLHUB_MAX_TABLE_BYTES", str(4 * 1024**3))
    # A database of its own on a shared PostgreSQL server (other benches use th_bench_data at the same time).
    bench.data_access.BENCH_DATABASE = os.environ.get("BENCH_DATABASE", "th_bench_records_view")
    return in_throwaway_database(lambda database: run(args, database))


if __name__ == "__main__":
    sys.exit(main())
