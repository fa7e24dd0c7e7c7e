#!/usr/bin/env python
"""Deep pages of a rows table, one checkout's code against another's on the same database (docs/tables-at-scale.md,
"Ordinals: the directory of positions"; figures in bench/README.md).

    DATABASE_URL=sqlite:////tmp/deep.sqlite3 .venv/bin/python bench/deep_pages.py --build 1000000
    DATABASE_URL=sqlite:////tmp/deep.sqlite3 .venv/bin/python bench/deep_pages.py --code /path/to/main --runs 7
    DATABASE_URL=sqlite:////tmp/deep.sqlite3 .venv/bin/python bench/deep_pages.py --runs 7   # this checkout

`--build N` migrates the database at DATABASE_URL (this checkout's migrations: run it with the newest) and writes a
table `{"orders": [...]}` moved to rows with N records of bench/scale.py's shape (store.write_records, as
bench/records_view.py does), a `preview` tool (preview keys) and a `get_all_data` tool at /orders. Without it, the
calls below are timed with the code of `--code` (default: this checkout), the result cache cleared before each,
medians of `--runs` in wall and CPU ms, and the first item's id (or the error code) printed as JSON: run it once per
checkout, alternately, for a side-by-side figure.

- `preview` at offset 0 and 500,000 (limit 50), through the executor;
- the records view's page 1 and page 10,000 (record_pages.record_page, offset 499,950);
- `get_all_data` by a cursor at 500,000 through the call pipeline (API surface, 40,000-byte result budget);
- the records view's filters `status == 'shipped'`, `total > 500` and `status == 'shipped' && total > 990`.
"""

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if "--code" in sys.argv:
    sys.path.insert(0, sys.argv[sys.argv.index("--code") + 1])
sys.path.insert(1, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolhub.settings")
os.environ.setdefault("TOOLHUB_MAX_TABLE_BYTES", str(4 * 1024**3))
MIDDLE = 500_000


def build(count: int) -> None:
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection, transaction
    from django.db.models import F

    from bench.scale import iter_records
    from tools_app import services
    from tools_app.data_access.sql.store import POSITION_GAP, write_records
    from tools_app.execution import records
    from tools_app.models import TableCollection, TableRecord, TableRecordLayout

    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_user("bench")  # no password: no hash slot to wait for
    table = services.table_create(owner=owner, name="big orders", data={"orders": [{"id": 0, "status": "new"}]})
    keys = ["id", "customer", "status", "total"]
    services.tool_create(
        owner=owner, name="orders_preview", type="preview", table=table, json_path="/orders", description="Orders.",
        metadata={"preview_keys": keys},
    )  # fmt: skip
    services.tool_create(
        owner=owner, name="orders_all", type="get_all_data", table=table, json_path="/orders", description="All."
    )
    assert records.table_to_rows(table.pk)
    collection = TableCollection.objects.get(table=table, mount="/orders")
    with transaction.atomic(), connection.cursor() as cursor:
        written = write_records(
            cursor,
            dialect=records.dialect(),
            records_table=TableRecord._meta.db_table,
            layouts_table=TableRecordLayout._meta.db_table,
            collection_id=collection.pk,
            value=iter_records(count),  # type: ignore[arg-type]  # any iterable of records
            key_of=lambda record: str(record["id"]),
            first_position=POSITION_GAP,
        )
        TableCollection.objects.filter(pk=collection.pk).update(record_count=F("record_count") + written)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {TableRecord._meta.db_table}")
    print(f"{written + 1:,} records as rows")


def measure(runs: int) -> dict:
    from django.test.utils import override_settings

    from tools_app.execution import pipeline, record_pages
    from tools_app.execution.executors import execute
    from tools_app.models import Surface, Tool
    from tools_app.paging import sign_cursor, tool_binding

    preview, listing = Tool.objects.get(name="orders_preview"), Tool.objects.get(name="orders_all")
    caller = pipeline.Caller(surface=Surface.API, user_id=listing.owner_id, user=listing.owner)
    binding = tool_binding(tool_id=listing.pk, tool_changed=listing.updated_at.isoformat(), arguments={})

    def page(offset: int, text: str = "") -> object:
        found = record_pages.record_page(table_id=preview.table_id, mount="/orders", offset=offset, filter_text=text)
        return found.items[0].value["id"]

    def by_cursor(offset: int) -> object:
        cursor = sign_cursor(binding=binding, version=listing.table.version, offset=offset)
        target = pipeline.target_of_tool(listing)
        outcome = pipeline.run_tool_call(caller=caller, target=target, name=listing.name, arguments={"cursor": cursor})
        if outcome.error is not None:
            raise outcome.error
        return outcome.value["items"][0]["id"]

    cases = {
        "preview offset 0": lambda run: execute(tool=preview, arguments={"offset": run, "limit": 50})["items"][0]["id"],
        "preview offset 500,000": lambda run: execute(tool=preview, arguments={"offset": MIDDLE + run, "limit": 50})[
            "items"
        ][0]["id"],
        "records view page 1": lambda run: page(run),
        "records view page 10,000": lambda run: page(MIDDLE - 50 + run),
        "get_all_data cursor at 500,000": lambda run: by_cursor(MIDDLE + run),
        "filter status == 'shipped'": lambda run: page(0, "status == 'shipped'"),
        "filter total > 500": lambda run: page(0, "total > `500`"),
        "filter status == 'shipped' && total > 990": lambda run: page(0, "status == 'shipped' && total > `990`"),
    }
    measured: dict = {}
    with override_settings(TOOLHUB_MAX_RESULT_BYTES=40_000):
        for name, call in cases.items():
            walls, cpus, answer = [], [], None
            for run in range(runs):
                pipeline.result_cache.clear()
                wall, cpu = time.perf_counter(), time.process_time()
                try:
                    answer = call(run)
                except Exception as exc:  # noqa: BLE001  # the answer is what is measured: an error code too
                    answer = str(getattr(exc, "code", type(exc).__name__))
                walls.append((time.perf_counter() - wall) * 1000)
                cpus.append((time.process_time() - cpu) * 1000)
            measured[name] = {"wall": round(statistics.median(walls), 1), "cpu": round(statistics.median(cpus), 1)}
            measured[name]["answer"] = answer
    return measured


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", type=int, help="write the table with this many records, then stop")
    parser.add_argument("--code", default=str(ROOT), help="the checkout whose code is timed")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    import django

    django.setup()
    if args.build:
        build(args.build)
        return 0
    measured = measure(args.runs)
    print(json.dumps({"code": args.code, "load": round(os.getloadavg()[0], 1), **measured}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
