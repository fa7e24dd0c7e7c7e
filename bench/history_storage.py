#!/usr/bin/env python
"""What history costs: bytes the database keeps per small change of a large table (docs/history.md).

Two workloads, each against a throwaway database (bench/data_access.py's ThrowawayDatabase: a temporary SQLite
file, or the database `th_bench_history` on the PostgreSQL server of DATABASE_URL, dropped at the end):

- whole: a table of order records (~5.1 MB of JSON), then 10 whole-document `PATCH /api/tables/<id>/` (through
  the API, as a client sends them), each changing 1 KB: one record's note replaced by 1,000 new characters;
- field: a table holding one record with a 500 KB field, then 40 calls of an `update` tool through the call
  pipeline (as over MCP): `--field-change big` replaces the 500 KB field (the issue's "tool updates of a 500 KB
  field"), `small` changes another field of that record.

Changed values are random hex, which PostgreSQL's compression of large values cannot shrink much. One write of
each workload runs before the measured ones (a table's first entry also allocates the first pages of indexes).

It reports, per write, the bytes the history rows and snapshots take (their JSON text, as stored) and the growth
of the database: on PostgreSQL `pg_database_size` (dead row versions included: what a write costs until VACUUM),
on SQLite the pages in use. `--root` runs it against another checkout (e.g. main, for the before figures):

    .venv/bin/python bench/history_storage.py [--root ../main-checkout] [--json]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/history_storage.py

Target: at most 10 KB stored per 1 KB change of the large table.
"""

import argparse
import json
import os
import random
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CHANGE = 1000  # characters changed per whole-document write
BLOB = 500_000  # characters of the large field
BENCH_DATABASE = "th_bench_history"


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=HERE.parent, help="the checkout whose code runs")
    parser.add_argument("--records", type=int, default=17_000, help="records of the large table (~300 B each)")
    parser.add_argument("--writes", type=int, default=10, help="whole-document PATCHes")
    parser.add_argument("--updates", type=int, default=40, help="update-tool calls on the 500 KB record")
    parser.add_argument("--field-change", choices=["big", "small"], default="big")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser.parse_args()


def main() -> int:
    options = parse()
    root = options.root.resolve()
    sys.path.insert(0, str(root))
    sys.path.insert(1, str(HERE))
    os.chdir(root)
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench")
    os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "testserver,localhost")
    os.environ["TOOLHUB_RATE_LIMITS_ENABLED"] = "false"
    os.environ["DJANGO_SETTINGS_MODULE"] = "toolhub.settings"
    import data_access  # bench/data_access.py, next to this script
    from data_access import ThrowawayDatabase, build_records

    data_access.BENCH_DATABASE = BENCH_DATABASE  # its own: never drops another benchmark's database
    with ThrowawayDatabase() as database:
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        result: dict[str, Any] = {"root": str(root), "database": database.vendor}
        result["whole"] = whole_document(build_records(options.records), options.writes)
        result["field"] = field_updates(options.updates, options.field_change)
    if options.json:
        print(json.dumps(result, indent=2))
    else:
        report(result)
    return 0


#
# Measuring
#


def database_bytes() -> int:
    """PostgreSQL: pg_database_size (dead row versions included); SQLite: the pages in use."""
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_database_size(current_database())")
            return int(cursor.fetchone()[0])
        cursor.execute("PRAGMA page_size")
        page = cursor.fetchone()[0]
        cursor.execute("PRAGMA page_count")
        pages = cursor.fetchone()[0]
        cursor.execute("PRAGMA freelist_count")
        free = cursor.fetchone()[0]
        return int((pages - free) * page)


def history_bytes(table_id: int) -> dict[str, int]:
    """The JSON text of the table's history rows (patch, inverse, arguments, result) and of its snapshot."""
    from tools_app.models import TableChange, TableSnapshot

    entries = 0
    for values in TableChange.objects.filter(table_id=table_id).values_list("patch", "inverse", "arguments", "result"):
        entries += sum(len(json.dumps(value)) for value in values if value is not None)
    snapshot = TableSnapshot.objects.filter(table_id=table_id).values_list("data", flat=True).first()
    return {"entries": entries, "snapshot": len(json.dumps(snapshot))}


def measured(table_id: int, run) -> dict[str, int]:
    before_db, before = database_bytes(), history_bytes(table_id)
    run()
    after_db, after = database_bytes(), history_bytes(table_id)
    return {
        "database_growth": after_db - before_db,
        "entries_growth": after["entries"] - before["entries"],
        "snapshot_bytes": after["snapshot"],
        "snapshot_rewritten": int(after["snapshot"] != before["snapshot"]),
    }


#
# Workloads
#


def _owner():
    from django.contrib.auth import get_user_model

    user, _ = get_user_model().objects.get_or_create(username="bench-history")
    return user


def whole_document(records: list[dict], writes: int) -> dict[str, Any]:
    """`writes` PATCHes of `data` through the API, each replacing one record's note by CHANGE new characters."""
    from rest_framework.test import APIClient

    from tools_app import services
    from tools_app.models import Table

    owner = _owner()
    table = services.table_create(owner=owner, name="orders", data=records)
    client = APIClient()
    client.force_authenticate(owner)
    document = json.loads(json.dumps(records))
    size = len(json.dumps(document))
    statuses: list[int] = []

    rng = random.Random(7)

    def write(number: int) -> None:
        document[(number * 997) % len(document)]["note"] = rng.randbytes(CHANGE // 2).hex()
        response = client.patch(f"/api/tables/{table.pk}/", {"data": document}, format="json")
        statuses.append(response.status_code)

    def run() -> None:
        for number in range(1, writes + 1):
            write(number)

    write(0)  # the first entry of a table also allocates its indexes' first pages: not a cost per change
    figures = measured(table.pk, run)
    table.refresh_from_db()
    assert table.version == writes + 2, (table.version, statuses)
    assert services.table_data(table.pk)[1] == document
    return {
        "document_bytes": size,
        "writes": writes,
        "statuses": sorted(set(statuses)),
        **figures,
        "per_change_database": figures["database_growth"] // writes,
        "per_change_entries": figures["entries_growth"] // writes,
        "version": Table.objects.get(pk=table.pk).version,
    }


def field_updates(updates: int, change: str) -> dict[str, Any]:
    """`updates` calls of an update tool on a record holding a BLOB-character field, through the call pipeline."""
    from tools_app import services
    from tools_app.execution.pipeline import Caller, run_tool_call, target_of_tool
    from tools_app.models import Surface

    owner = _owner()
    rng = random.Random(11)  # random hex: PostgreSQL's compression of large values cannot shrink it much
    records = [{"id": 1, "status": "new", "blob": rng.randbytes(BLOB // 2).hex()}]
    records += [{"id": n, "status": "new"} for n in range(2, 50)]
    table = services.table_create(owner=owner, name="blobs", data=records)
    tool = services.tool_create(
        owner=owner, name="blobs_update", type="update", table=table, description="Update blob records."
    )
    caller = Caller(surface=Surface.MCP, user_id=owner.pk, user=owner)

    def update(number: int) -> None:
        if change == "big":
            element = {"id": 1, "blob": rng.randbytes(BLOB // 2).hex()}
        else:
            element = {"id": 1, "status": f"status-{number}"}
        outcome = run_tool_call(
            caller=caller, target=target_of_tool(tool), name=tool.name, arguments={"elements": [element]}
        )
        assert outcome.ok, outcome

    def run() -> None:
        for number in range(1, updates + 1):
            update(number)

    update(0)  # as above: the first entry is not measured
    figures = measured(table.pk, run)
    return {
        "updates": updates,
        "change": change,
        **figures,
        "per_update_database": figures["database_growth"] // updates,
        "per_update_entries": figures["entries_growth"] // updates,
    }


def report(result: dict[str, Any]) -> None:
    whole, field = result["whole"], result["field"]
    print(f"{result['root']} on {result['database']}")
    print(
        f"whole-document PATCH x{whole['writes']} of a {whole['document_bytes']:,}-byte table, {CHANGE} B changed "
        f"each (HTTP {whole['statuses']}):"
    )
    print(
        f"  database +{whole['database_growth']:,} B ({whole['per_change_database']:,} B per change); history rows "
        f"+{whole['entries_growth']:,} B ({whole['per_change_entries']:,} B per change); snapshot rewritten: "
        f"{bool(whole['snapshot_rewritten'])}"
    )
    print(f"update tool x{field['updates']} on a record with a {BLOB:,}-character field ({field['change']} change):")
    print(
        f"  database +{field['database_growth']:,} B ({field['per_update_database']:,} B per update); history rows "
        f"+{field['entries_growth']:,} B ({field['per_update_entries']:,} B per update)"
    )


if __name__ == "__main__":
    sys.exit(main())
