#!/usr/bin/env python
"""Tables at scale: toolhub through MCP, the bare engine and DuckDB over the same N records, side by side.

    .venv/bin/python bench/scale.py                                   # 100k and 1M, SQLite and PostgreSQL
    .venv/bin/python bench/scale.py --sizes 100000 --engines sqlite --parts bare,duckdb
    .venv/bin/python bench/scale.py --storage rows                    # once tables can be stored as rows
    .venv/bin/python bench/scale.py --sizes '' --ten-million --engines postgresql --parts mcp,bare --storage rows

Records of the bench shape (bench/data_access.py build_records: id, customer, status, total, created_at,
items, note; ~300 bytes of JSON each) are written once per size as an NDJSON file, then loaded by each
side from that file:

- `mcp`: toolhub as deployed: a fresh database, uvicorn serving toolhub.asgi in its own process, the table
  imported through `POST /api/tables/import/` (timed from the upload's first byte to the answer's last; the
  server's peak RSS growth during it; the client's parse of the answer apart), tools bound
  to an MCP instance, and every call made by the SDK's MCP client over a socket. Reads run on a second,
  freshly started server ("the reader"), writes on a third ("the writer"), so "another worker's first read
  after a write" is a real other process. The first call of the reader is the cold read after a restart;
  the reader is restarted `--restarts` times for more samples. Each timed query differs from the previous
  ones by trailing blanks, so no answer comes from the result cache. RSS = the server's process tree.
- `bare`: the engine alone, in a process of its own: the records written as rows
  (tools_app/data_access/sql/store.py, keys set to `id`, the expression indexes of docs/tables-at-scale.md on
  the `--indexed` fields, by default `status`, `total` and `id`: the fields the questions filter on and the one
  they project), each JMESPath compiled by tools_app/data_access/sql_query.compile_sql_expression and
  run with run_sql (statement, fetch, decoding: what the tools will run), and its statement alone.
- `duckdb`: the same file read by DuckDB (`read_json`) into a table, the same questions in hand-written SQL.

Timings are medians of `--runs` warm runs, in milliseconds. The answers of the three sides are compared
(the MCP answer's first page against the others). Limits for the run: TOOLHUB_MAX_TABLE_BYTES,
TOOLHUB_MAX_REQUEST_BYTES and the owner's data quota are raised so that the document path takes 1M records;
what it then does (time, memory, errors) is what the run reports. Each side of each size stops at
`--timeout` seconds (reported as such).

`--storage document|rows` serves the table as a document, or moves its collections into rows after its tools
are made (tools_app.execution.records.table_to_rows, as `manage.py tables_to_rows` does).

Sizes built in SQL (`--ten-million` for 10,000,000 records, `--sql-sizes` for others; PostgreSQL only): no NDJSON
file and no API import. The table is made once in a database of its own (`--built-database`, kept and reused while
its comment names the same build): the first IMPORTED_FIRST records through toolhub's import, the rest appended by
one INSERT ... SELECT over generate_series as the import lays rows out, then the tools, the indexed fields through
the services (their indexes and ANALYZE) and a VACUUM. The mcp and bare sides each read a fresh copy of it
(CREATE DATABASE ... TEMPLATE, dropped at the end); the duckdb side does not run. A 10M build takes minutes
where the NDJSON file and its import took hours.

Each side's result is printed as it ends (a `SIDE <side> <engine> <time> load average ...` JSON line), and the
progress lines carry the time (UTC): a run stopped during a later side, or killed with the session that started
it, keeps the sides it finished. A copy left by a killed run (6 GB at 10M) is dropped by the next run's copy.

PostgreSQL: `--database-url` names the server (default postgres://postgres@127.0.0.1:5432/postgres); each
side creates its own database there (th_bench_scale_<pid>_<side>) and drops it at the end. SQLite: files in a
temporary directory.
"""

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
PYTHON = sys.executable
DEFAULT_PG = "postgres://postgres@127.0.0.1:5432/postgres"

# The questions, as JMESPath over the root array of records; DuckDB's hand-written SQL beside each.
QUERIES: dict[str, tuple[str, str]] = {
    "filter": (
        "[?status=='shipped' && total > `500`].id",
        "SELECT id FROM orders WHERE status = 'shipped' AND total > 500 ORDER BY pos",
    ),
    "contains": (
        "[?contains(customer, '-004')].id",
        "SELECT id FROM orders WHERE contains(customer, '-004') ORDER BY pos",
    ),
    "sort+slice": (
        "sort_by(@, &total)[-10:].id",
        "SELECT id FROM (SELECT id, pos, total FROM orders ORDER BY total DESC, pos DESC LIMIT 10) ORDER BY total, pos",
    ),
    "length(filter)": (
        "length([?status=='paid'])",
        "SELECT count(*) FROM orders WHERE status = 'paid'",
    ),
    "max_by": (
        "max_by(@, &total).id",
        "SELECT id FROM orders ORDER BY total DESC, pos LIMIT 1",
    ),
    # Selective on the indexed `total` (~300 matches a million records): what an index is for.
    "selective filter": (
        "[?status=='shipped' && total > `998.5`].id",
        "SELECT id FROM orders WHERE status = 'shipped' AND total > 998.5 ORDER BY pos",
    ),
}
PREVIEW = 50
SELECT_KEYS = 10
STATUSES = ["new", "paid", "shipped", "cancelled", "refunded"]
WORDS = "the order was packed twice and left the warehouse late because the courier asked for a new label".split()


#
# Data
#


def iter_records(count: int, seed: int = 2) -> Iterator[dict[str, Any]]:
    """bench/data_access.py build_records, one record at a time (the same records for the same seed)."""
    rng = random.Random(seed)
    for number in range(1, count + 1):
        items = [
            {
                "sku": f"SKU-{rng.randrange(10_000):05d}",
                "qty": rng.randrange(1, 6),
                "price": round(rng.uniform(1, 200), 2),
            }
            for _ in range(rng.randrange(1, 4))
        ]
        yield {
            "id": number,
            "customer": f"customer-{rng.randrange(5_000):04d}",
            "status": rng.choice(STATUSES),
            "total": round(rng.uniform(1, 1_000), 2),
            "created_at": f"2026-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}T10:00:00Z",
            "items": items,
            "note": " ".join(rng.choice(WORDS) for _ in range(rng.randrange(8, 20))),
        }


def write_ndjson(path: Path, count: int) -> int:
    with path.open("w") as out:
        for record in iter_records(count):
            out.write(json.dumps(record, separators=(",", ":")))
            out.write("\n")
    return path.stat().st_size


def read_ndjson(path: Path) -> Iterator[dict[str, Any]]:
    with path.open() as lines:
        for line in lines:
            yield json.loads(line)


def select_keys(count: int) -> list[int]:
    step = max(1, count // SELECT_KEYS)
    return list(range(1, count + 1, step))[:SELECT_KEYS]


def summary(value: Any) -> Any:
    """What the sides' answers are compared by: a list's length and its first and last items, else the value."""
    if isinstance(value, list):
        return {"len": len(value), "first": value[:3], "last": value[-3:]}
    return value


#
# Records generated in PostgreSQL (sizes built in SQL: `--ten-million`, `--sql-sizes`)
#
# A size built in SQL skips the NDJSON file and the API import: its table is made once in a database of its own
# (`--built-database`, kept between runs and reused while it holds the same build), then each side reads a copy
# of it (CREATE DATABASE ... TEMPLATE), so the writes of one run never reach the next. The records have
# build_records' fields and value distributions, drawn from a hash of (id, field) instead of random.Random: the
# same records for every build, not the NDJSON sizes' records.

# The first records, imported through toolhub's own import (services.table_import): the table, its collection,
# layouts, directory, field kinds and data_bytes are made as any import makes them; the rest follow them in SQL.
IMPORTED_FIRST = 1024
# What a built database's comment says: a build of another shape (or one that stopped) is made again.
BUILD_MARK = "toolhub bench/scale.py rows build 1: {count} records"


def records_sql(builder: str) -> str:
    """SELECT g, n, record for g in [%(first)s, %(last)s]: record g of the bench shape (`builder`: json keeps
    the keys in build_records' order, jsonb is what a row stores), n its number of items. Every value is a hash
    of (g, field), so the same g gives the same record in any statement. Numbers are written as Python writes
    round(x, 2) (123.4, 500.0): what toolhub stores for them."""

    def draw(slot: int, n: int) -> str:
        return f"((hashint8extended(g, {slot}) & 9223372036854775807) %% {n})"

    def cents(expr: str) -> str:
        return f"(CASE WHEN {expr} %% 100 = 0 THEN round({expr} / 100.0, 1) ELSE trim_scale({expr} / 100.0) END)"

    def item(i: int) -> str:
        return (
            f"{builder}_build_object('sku', 'SKU-' || lpad({draw(10 + i, 10_000)}::text, 5, '0'),"
            f" 'qty', 1 + {draw(20 + i, 5)}, 'price', {cents(f'(100 + {draw(30 + i, 19_901)})')})"
        )

    words = "ARRAY[" + ", ".join(f"'{word}'" for word in WORDS) + "]"
    picks = ", ".join(f"({words})[1 + {draw(40 + i, len(WORDS))}]" for i in range(19))
    statuses = "ARRAY[" + ", ".join(f"'{status}'" for status in STATUSES) + "]"
    items = " ".join(
        f"WHEN {n} THEN {builder}_build_array({', '.join(item(i) for i in range(1, n + 1))})" for n in (1, 2, 3)
    )
    return f"""SELECT g, n, {builder}_build_object(
  'id', g,
  'customer', 'customer-' || lpad({draw(1, 5_000)}::text, 4, '0'),
  'status', ({statuses})[1 + {draw(2, len(STATUSES))}],
  'total', {cents(f"(100 + {draw(3, 99_901)})")},
  'created_at', '2026-' || lpad((1 + {draw(4, 12)})::text, 2, '0') || '-' || lpad((1 + {draw(5, 28)})::text, 2, '0')
    || 'T10:00:00Z',
  'items', CASE n {items} END,
  'note', array_to_string((ARRAY[{picks}])[1:8 + {draw(7, 12)}], ' ')
) AS record
FROM (SELECT g, 1 + {draw(6, 3)} AS n FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS g) AS numbered"""


IMPORT_FIRST = """
import io, json, sys
from django.contrib.auth import get_user_model
from tools_app.services import table_import
owner = get_user_model().objects.get(username="bench")
with table_import(owner=owner, name="orders", file=io.BytesIO(sys.stdin.buffer.read()), fmt="ndjson") as imported:
    print(json.dumps({"table_id": imported.table.pk}))
"""

REUSE = """
import json
from tools_app.models import McpInstance, Table
from tools_app.services import api_key_issue
_, key = api_key_issue(mcp_instance=McpInstance.objects.get(slug="scale"), label="scale run")
print(json.dumps({"key": key, "table_id": Table.objects.get(name="orders").pk, "storage_switch": True}))
"""


def _admin_sql(url: str, *statements: str) -> list[tuple]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        rows: list[tuple] = []
        for statement in statements:
            cursor = connection.execute(statement)
            rows = cursor.fetchall() if cursor.description else []
        return rows


def built_database(args: argparse.Namespace, size: int, env: dict[str, str]) -> str:
    """The name of the database holding `size` records built in SQL as a toolhub table with its tools, built now
    unless `--built-database` already holds that build. What the build took is printed."""
    name = args.built_database.format(size=size)
    parts = urlsplit(args.database_url)
    admin = urlunsplit(parts._replace(path="/postgres"))
    mark = BUILD_MARK.format(count=size) + f", indexed {args.indexed or 'none'}"  # a build per declared fields
    found = _admin_sql(admin, f"SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = '{name}'")
    if found and found[0][0] == mark:
        print(f"  {clock()} {size:,} records: reusing database {name}", flush=True)
        return name
    _admin_sql(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"')
    url = urlunsplit(parts._replace(path=f"/{name}"))
    build_env = {**env, "DATABASE_URL": url}
    timings: dict[str, float] = {}
    started = time.perf_counter()
    subprocess.run([PYTHON, "manage.py", "migrate", "-v0"], cwd=ROOT, env=build_env, check=True)
    run_django(build_env, SEED)
    # The first records through the import, as NDJSON in build_records' key order (json_build_object keeps it).
    first = min(size, IMPORTED_FIRST)
    lines = _admin_sql(url, "SELECT record::text FROM (" + records_sql("json") % {"first": 1, "last": first} + ") s")
    ndjson = "".join(json.dumps(json.loads(line[0]), separators=(",", ":")) + "\n" for line in lines)
    done = subprocess.run(
        [PYTHON, "-c", DJANGO_PRELUDE + IMPORT_FIRST], input=ndjson, cwd=ROOT, env=build_env, capture_output=True,
        text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    table_id = json.loads(done.stdout.strip().splitlines()[-1])["table_id"]
    timings["first records imported s"] = time.perf_counter() - started
    if size > first:
        started = time.perf_counter()
        _insert_generated(url, table_id, [json.loads(line[0]) for line in lines], first + 1, size)
        timings["records inserted in SQL s"] = time.perf_counter() - started
    # The tools, bound to the instance, and the indexed fields declared through the services: their expression
    # indexes and the statistics step (ANALYZE) run as for any table.
    started = time.perf_counter()
    run_django(build_env, TOOLS, str(table_id), "rows", args.indexed, timeout=None)
    timings["tools + indexed fields s"] = time.perf_counter() - started
    # What autovacuum does after a bulk load (the visibility map, hint bits), done now rather than during a run.
    started = time.perf_counter()
    _admin_sql(url, "VACUUM tools_app_tablerecord")
    timings["vacuum s"] = time.perf_counter() - started
    megabytes = _admin_sql(url, f"SELECT pg_database_size('{name}') / 1048576")[0][0]
    _admin_sql(admin, f"COMMENT ON DATABASE \"{name}\" IS '{mark}'")
    built = f"{size:,} records built in database {name} ({megabytes:,} MiB)"
    print(f"  {clock()} {built}: " + json.dumps(timings), flush=True)
    return name


def _insert_generated(url: str, table_id: int, imported: list[dict], first: int, last: int) -> None:
    """Records `first`..`last` appended to the table's one collection in one transaction, as the import lays them
    out (store.write_records): position (id - 1) * POSITION_GAP, key the id's text, the layout row the imported
    records of the same shape got (codec.layout_of), the directory's blocks, record_count and data_bytes (the
    records' JSON text with json's default separators, which is how jsonb prints)."""
    import psycopg

    sys.path.insert(0, str(ROOT))
    from tools_app.data_access.sql.codec import layout_of
    from tools_app.data_access.sql.store import BLOCK_SPAN, BLOCKS_TABLE, POSITION_GAP, layouts_of

    with psycopg.connect(url) as connection, connection.cursor() as cursor:
        cursor.execute("SELECT id FROM tools_app_tablecollection WHERE table_id = %s", (table_id,))
        (collection_id,) = cursor.fetchone()
        cursor.execute("SELECT id, layout FROM tools_app_tablerecordlayout WHERE collection_id = %s", (collection_id,))
        stored = layouts_of(dict(cursor.fetchall()))
        layout_ids = {}
        for record in imported:  # one layout per number of items
            layout = layout_of(record)
            layout_ids[len(record["items"])] = next(id_ for id_, known in stored.items() if known == layout)
        assert sorted(layout_ids) == [1, 2, 3], layout_ids
        layout_case = " ".join(f"WHEN {n} THEN {layout_id}" for n, layout_id in layout_ids.items())
        # The rows' foreign keys (Django's, deferred) are checked at COMMIT one row at a time: 20M checks after a
        # 10M-row insert, minutes under load. Every row here references the collection and the layouts just read,
        # so this transaction skips them (a superuser's setting, as for a restore of a dump).
        cursor.execute("SET LOCAL session_replication_role = replica")
        # The imported records' text as jsonb prints it is as long as the import counted it: "[", ", " between.
        cursor.execute(
            "SELECT t.data_bytes, (SELECT sum(octet_length(data::text)) FROM tools_app_tablerecord"
            " WHERE collection_id = %s) FROM tools_app_table t WHERE t.id = %s",
            (collection_id, table_id),
        )
        counted, printed = cursor.fetchone()
        assert counted == printed + 2 * (first - 2) + 2, (counted, printed, first)
        cursor.execute(
            f"""WITH written AS (
                  INSERT INTO tools_app_tablerecord (collection_id, position, "key", data, layout_id)
                  SELECT %(collection)s, (g - 1) * {POSITION_GAP}, g::text, record, CASE n {layout_case} END
                  FROM ({records_sql("jsonb")}) AS generated
                  RETURNING octet_length(data::text) AS size)
                SELECT count(*), sum(size) FROM written""",
            {"collection": collection_id, "first": first, "last": last},
        )
        count, size = cursor.fetchone()
        assert count == last - first + 1, (count, first, last)
        per_block = BLOCK_SPAN // POSITION_GAP
        cursor.execute(
            f"""INSERT INTO {BLOCKS_TABLE} (collection_id, block, record_count)
                SELECT %(collection)s, b, least({per_block}, %(last)s - b * {per_block})
                FROM generate_series(0, (%(last)s - 1) / {per_block}) AS b
                ON CONFLICT (collection_id, block) DO UPDATE SET record_count = excluded.record_count""",
            {"collection": collection_id, "last": last},
        )
        cursor.execute("UPDATE tools_app_tablecollection SET record_count = %s WHERE id = %s", (last, collection_id))
        # ", " before each record appended to the array's text.
        cursor.execute(
            "UPDATE tools_app_table SET data_bytes = data_bytes + %s WHERE id = %s", (size + 2 * count, table_id)
        )


def sql_built_copy(args: argparse.Namespace, size: int, side: str) -> tuple[str, str]:
    """A fresh copy of the built database for one side (its URL and its name), to be dropped by the caller."""
    name = f"{args.built_database.format(size=size)}_{side}"
    parts = urlsplit(args.database_url)
    admin = urlunsplit(parts._replace(path="/postgres"))
    built = args.built_database.format(size=size)
    started = time.perf_counter()
    _admin_sql(
        admin,
        f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)',
        f'CREATE DATABASE "{name}" TEMPLATE "{built}" STRATEGY FILE_COPY',
    )
    print(f"  {clock()} {name}: copied in {time.perf_counter() - started:.0f} s", flush=True)
    return urlunsplit(parts._replace(path=f"/{name}")), name


#
# Measuring
#


def median_ms(call: Callable[[], Any], runs: int) -> tuple[float, Any]:
    samples, result = [], None
    for _ in range(runs):
        started = time.perf_counter()
        result = call()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples), result


def clock() -> str:
    """The time of day (UTC) on the run's progress lines: a log read later says when each step began."""
    return time.strftime("%H:%M:%S", time.gmtime())


def side_done(side: str, engine: str, out: dict[str, Any]) -> dict[str, Any]:
    """A side's result, printed as it ends: a run stopped during a later side (or its table) keeps it."""
    load = " ".join(f"{v:.1f}" for v in os.getloadavg())
    print(f"SIDE {side} {engine} {clock()} load average {load} " + json.dumps(out), flush=True)
    return out


def progress(out: dict[str, Any]) -> None:
    """What a side measured so far, printed so that a side stopped at --timeout still reports it."""
    print("PART " + json.dumps(out), flush=True)


def max_rss_mib() -> float:
    """This process's peak RSS (VmHWM: ru_maxrss would carry the parent's peak across fork and exec)."""
    return _status_kib(os.getpid(), "VmHWM") / 1024


def rss_mib() -> float:
    return _status_kib(os.getpid(), "VmRSS") / 1024


def _status_kib(pid: int, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree(pid: int) -> list[int]:
    """pid and its descendants (uvicorn's server process and toolhub's heavy workers)."""
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                pending.extend(int(child) for child in (task / "children").read_text().split())
            except OSError:
                pass
    return found


def tree_mib(pid: int, field: str = "VmRSS") -> float:
    return sum(_status_kib(each, field) for each in tree(pid)) / 1024


#
# The bare engine (run in a process of its own: `scale.py --side bare ...`)
#


def side_bare(args: argparse.Namespace) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(BENCH))
    import data_access as throwaway

    throwaway.BENCH_DATABASE = f"th_bench_scale_{os.getpid()}_bare"
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-secret-key-not-for-production")
    os.environ["DJANGO_SETTINGS_MODULE"] = "toolhub.settings"
    if args.built:  # DATABASE_URL names a copy of the size's built database (the caller drops it)
        import django

        django.setup()
        return _bare(args)
    with throwaway.ThrowawayDatabase():
        import django

        django.setup()
        return _bare(args)


def _bare_collection(args: argparse.Namespace, vendor: str, out: dict[str, Any]) -> Any:
    """A document table's one collection, written here from the NDJSON file (timed, the peak RSS growth), keyed
    by id and indexed on the bench's fields."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection, transaction
    from django.test import override_settings

    from tools_app import services
    from tools_app.data_access.sql.indexes import sync_indexes
    from tools_app.data_access.sql.store import write_records
    from tools_app.models import TableCollection, TableRecord, TableRecordLayout

    call_command("migrate", verbosity=0)
    # No password: hashing one waits for a machine-wide hashing slot, which other processes may hold.
    owner = get_user_model().objects.create_user(username="bench", password=None)
    # A document table whose one collection this side writes itself (not laid out as rows at its creation).
    with override_settings(TOOLHUB_NEW_TABLE_STORAGE="document"):
        table = services.table_create(owner=owner, name="orders", data=[])
    collection = TableCollection.objects.create(table=table, mount="", kind="array")
    records_table, layouts_table = TableRecord._meta.db_table, TableRecordLayout._meta.db_table
    rss_before = max_rss_mib()
    started = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        written = write_records(
            cursor,
            dialect=vendor,
            records_table=records_table,
            layouts_table=layouts_table,
            collection_id=collection.pk,
            value=read_ndjson(Path(args.data)),  # type: ignore[arg-type]  # any iterable of records
        )
    out["import_s"] = time.perf_counter() - started
    out["import_peak_rss_growth_mib"] = max_rss_mib() - rss_before
    assert written == args.records, (written, args.records)
    where = f"WHERE collection_id = {collection.pk}"
    started = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        if vendor == "postgresql":
            cursor.execute(f"UPDATE {records_table} SET key = data ->> 'id' {where}")
        else:
            cursor.execute(f"""UPDATE {records_table} SET key = CAST(data ->> '$."id"' AS TEXT) {where}""")
    # The indexes as toolhub builds them (docs/tables-at-scale.md, "Indexes": its names, which run_sql's choice
    # of index on SQLite looks for; PostgreSQL's extended statistics), then its statistics step (ANALYZE).
    with connection.cursor() as cursor:
        built = sync_indexes(cursor, dialect=vendor, records_table=records_table, collection_ids=[collection.pk],
                             fields=[name for name in args.indexed.split(",") if name],
                             in_transaction=False)  # fmt: skip
    assert not built.failed, built.failed
    out["keys_and_indexes_s"] = time.perf_counter() - started
    return collection


def _bare(args: argparse.Namespace) -> dict[str, Any]:
    from django.db import connection, connections, transaction

    from tools_app.data_access.sql import store
    from tools_app.data_access.sql.store import POSITION_GAP
    from tools_app.data_access.sql_query import compile_sql_expression, run_sql, statement_for
    from tools_app.models import TableCollection, TableRecord

    vendor = "postgresql" if connection.vendor == "postgresql" else "sqlite"
    records_table = TableRecord._meta.db_table
    out: dict[str, Any] = {"vendor": vendor}
    if args.built:  # the built table's one collection: keyed by id, indexed as the bench declares
        collection = TableCollection.objects.get(table__name="orders")
    else:
        collection = _bare_collection(args, vendor, out)
    where = f"WHERE collection_id = {collection.pk}"
    runs = args.runs
    queries: dict[str, Any] = {}
    out["queries"] = queries
    progress(out)
    # The collection's field kinds, kept by the write (where the tools' reads take them from), when this
    # version keeps them.
    field_kinds = getattr(store, "field_kinds", None)
    with connection.cursor() as cursor:
        known = None if field_kinds is None else field_kinds(cursor, collection.pk)
    facts = {} if known is None else {"known": known}
    for name, (expression, _) in QUERIES.items():
        query = compile_sql_expression(expression, vendor, "array")
        if query is None:
            queries[name] = {"error": "does not compile"}
            continue
        with connection.cursor() as cursor:  # the statement run_sql runs (on SQLite, after its choice of index)
            statement = statement_for(query, cursor, table=records_table, collection_id=collection.pk, **facts)

        def answered(query=query) -> Any:
            with connection.cursor() as cursor:
                answer = run_sql(query, cursor, table=records_table, collection_id=collection.pk, **facts)
            return None if answer is None else answer.value

        def alone(statement=statement) -> Any:
            with connection.cursor() as cursor:
                cursor.execute(statement.sql, statement.params)
                return len(cursor.fetchall())

        answered()  # warm the engine's caches as the other sides' warm runs are
        ms, value = median_ms(answered, runs)
        statement_ms, _ = median_ms(alone, runs)
        queries[name] = {"ms": ms, "statement_ms": statement_ms, "answer": summary(value)}
        progress(out)

    keys = [str(key) for key in select_keys(args.records)]
    marks = ", ".join(["%s"] * len(keys))
    data = "data::text" if vendor == "postgresql" else "data"

    def select() -> Any:
        with connection.cursor() as cursor:
            cursor.execute(
                f'SELECT {data} FROM {records_table} WHERE collection_id = %s AND "key" IN ({marks}) ORDER BY position',
                [collection.pk, *keys],
            )
            return [json.loads(row[0])["id"] for row in cursor.fetchall()]

    middle = (args.records // 2) * POSITION_GAP

    def preview(cursor_source: Callable[[], Any] = connection.cursor) -> Any:
        with cursor_source() as cursor:
            cursor.execute(
                f"SELECT {data} FROM {records_table} WHERE collection_id = %s AND position >= %s"
                f" ORDER BY position LIMIT {PREVIEW}",
                [collection.pk, middle],
            )
            return [json.loads(row[0])["id"] for row in cursor.fetchall()]

    select()
    queries["select 10 keys"] = dict(zip(("ms", "answer"), median_ms(select, runs), strict=True))
    queries["preview 50"] = dict(zip(("ms", "answer"), median_ms(preview, runs), strict=True))
    queries["preview 50"]["answer"] = summary(queries["preview 50"]["answer"])

    # One-record writes, each read by another connection right after (as another worker would).
    other = connections.create_connection("default")
    next_id = args.records
    writes, reads = [], []
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT MAX(position) FROM {records_table} {where}")
        position = cursor.fetchone()[0]
    cast = "::jsonb" if vendor == "postgresql" else ""
    for _ in range(runs):
        next_id += 1
        position += POSITION_GAP
        record = {"id": next_id, "customer": "bench", "status": "new", "total": 1.5}
        started = time.perf_counter()
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                f'INSERT INTO {records_table} (collection_id, position, "key", data, layout_id)'
                f" VALUES (%s, %s, %s, %s{cast}, NULL)",
                [collection.pk, position, str(next_id), json.dumps(record, separators=(",", ":"))],
            )
        writes.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        with other.cursor() as cursor:
            cursor.execute(
                f'SELECT {data} FROM {records_table} WHERE collection_id = %s AND "key" = %s',
                [collection.pk, str(next_id)],
            )
            found = cursor.fetchall()
        reads.append((time.perf_counter() - started) * 1000)
        assert len(found) == 1
    other.close()
    queries["write 1 record"] = {"ms": statistics.median(writes)}
    queries["other connection's read after it"] = {"ms": statistics.median(reads)}

    # A new connection's first read (the bare engine's "cold read after a restart"; the OS cache stays warm).
    colds = []
    for _ in range(max(1, args.restarts)):
        connection.close()
        started = time.perf_counter()
        preview()
        colds.append((time.perf_counter() - started) * 1000)
    queries["cold read (new connection)"] = {"ms": statistics.median(colds)}
    out["queries"] = queries
    out["rss_mib"] = rss_mib()
    out["max_rss_mib"] = max_rss_mib()
    return out


#
# DuckDB (run in a process of its own: `scale.py --side duckdb ...`)
#


def side_duckdb(args: argparse.Namespace) -> dict[str, Any]:
    import duckdb

    path = Path(args.workdir) / f"duck_{args.records}.duckdb"
    path.unlink(missing_ok=True)
    out: dict[str, Any] = {"version": duckdb.__version__}
    rss_before = max_rss_mib()
    started = time.perf_counter()
    con = duckdb.connect(str(path))
    con.execute(
        "CREATE TABLE orders AS SELECT row_number() OVER () AS pos, * FROM read_json(?, format = 'newline_delimited')",
        [args.data],
    )
    con.execute("CHECKPOINT")
    out["import_s"] = time.perf_counter() - started
    out["import_peak_rss_growth_mib"] = max_rss_mib() - rss_before
    runs = args.runs
    queries: dict[str, Any] = {}
    out["queries"] = queries
    progress(out)

    def column(sql: str, params: list | None = None) -> Callable[[], Any]:
        def call() -> Any:
            rows = con.execute(sql, params or []).fetchall()
            return [row[0] for row in rows]

        return call

    for name, (_, sql) in QUERIES.items():
        call = column(sql)
        call()
        ms, value = median_ms(call, runs)
        if name in ("length(filter)", "max_by"):
            value = value[0]
        queries[name] = {"ms": ms, "answer": summary(value)}
        progress(out)
    keys = select_keys(args.records)
    select = column(f"SELECT id FROM orders WHERE id IN ({', '.join('?' * len(keys))}) ORDER BY pos", keys)
    preview_sql = f"SELECT to_json(o) FROM orders o WHERE pos > ? ORDER BY pos LIMIT {PREVIEW}"
    preview = column(preview_sql, [args.records // 2])
    select()
    queries["select 10 keys"] = dict(zip(("ms", "answer"), median_ms(select, runs), strict=True))
    ms, value = median_ms(preview, runs)
    queries["preview 50"] = {"ms": ms, "answer": summary([json.loads(text)["id"] for text in value])}
    writes, reads = [], []
    other = con.cursor()
    next_id = args.records
    for _ in range(runs):
        next_id += 1
        started = time.perf_counter()
        con.execute(
            "INSERT INTO orders (pos, id, customer, status, total) VALUES (?, ?, 'bench', 'new', 1.5)",
            [next_id, next_id],
        )
        writes.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        found = other.execute("SELECT to_json(o) FROM orders o WHERE id = ?", [next_id]).fetchall()
        reads.append((time.perf_counter() - started) * 1000)
        assert len(found) == 1
    queries["write 1 record"] = {"ms": statistics.median(writes)}
    queries["other connection's read after it"] = {"ms": statistics.median(reads)}
    colds = []
    for _ in range(max(1, args.restarts)):
        con.close()
        started = time.perf_counter()
        con = duckdb.connect(str(path))
        con.execute(preview_sql, [args.records // 2]).fetchall()
        colds.append((time.perf_counter() - started) * 1000)
    queries["cold read (new connection)"] = {"ms": statistics.median(colds)}
    con.close()
    out["queries"] = queries
    out["rss_mib"] = rss_mib()
    out["max_rss_mib"] = max_rss_mib()
    out["file_mib"] = path.stat().st_size / 2**20
    path.unlink(missing_ok=True)
    return out


#
# toolhub through MCP
#

SEED = """
import json, sys, time
from django.contrib.auth import get_user_model
from tools_app.models import Table
from tools_app.services import api_key_issue, instance_create
from toolhub.passwords import PasswordCheckBusy
for attempt in range(300):  # the machine's password-hashing slot may be held by another process for a while
    try:
        user = get_user_model().objects.create_user(username="bench", password="bench-password-1", is_staff=True)
        break
    except PasswordCheckBusy:
        time.sleep(1)
instance = instance_create(owner=user, name="scale", slug="scale", instructions="Orders at scale.")
_, key = api_key_issue(mcp_instance=instance, label="scale")
has_storage = any(field.name == "storage" for field in Table._meta.get_fields())
print(json.dumps({"key": key, "instance_id": instance.pk, "storage_switch": has_storage}))
"""

TOOLS = """
import json, sys
from tools_app import services
from tools_app.models import McpInstance, Table
from tools_app.services import binding_create
table = Table.objects.get(pk=int(sys.argv[1]))
instance = McpInstance.objects.get(slug="scale")
wanted = sys.argv[2]
for kind, name, fields in [
    ("query_data", "orders_query", {}),
    ("preview", "orders_preview", {"metadata": {"preview_keys": ["id", "customer", "status", "total"]}}),
    ("select", "orders_by_id", {}),
    ("create", "orders_add", {}),
]:
    tool = services.tool_create(owner=table.owner, name=f"scale_{name}", type=kind, table=table,
                                description=f"Scale bench {kind}.", **fields)
    binding_create(mcp_instance=instance, tool=tool, name_override=name)
# After the tools: a table moves the collections at its tools' mounts (execution.records.table_to_rows).
if wanted == "rows":
    from tools_app.execution.records import table_to_rows

    table_to_rows(table.pk)
table.refresh_from_db()
# The fields the bare side indexes, declared as an owner would (their expression indexes built after commit).
indexed = [field for field in sys.argv[3].split(",") if field]
if indexed:
    services.table_update(table=table, indexed_fields=indexed)
    table.refresh_from_db()
storage_note = f"the table reads back storage={table.storage!r}"
print(json.dumps({"storage": storage_note}))
"""


DJANGO_PRELUDE = (
    "import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'toolhub.settings'); django.setup()\n"
)


def run_django(env: dict[str, str], code: str, *argv: str, timeout: float | None = 600) -> dict[str, Any]:
    done = subprocess.run(
        [PYTHON, "-c", DJANGO_PRELUDE + code, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def _import_and_bind(
    args: argparse.Namespace, env: dict[str, str], data: Path, out: dict[str, Any], remaining: Callable[[], float]
) -> dict[str, Any]:
    """A fresh database seeded, `data` imported through the API (timed, the server's RSS growth), the tools bound
    and the indexed fields declared; the seed's answer (the instance's key)."""
    from tests.live_server import Uvicorn

    subprocess.run([PYTHON, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=600)
    seeded = run_django(env, SEED, timeout=remaining())
    out["storage_switch"] = seeded["storage_switch"]
    # Import through the API, on a server of its own: its time and the server's peak RSS growth.
    importer = Uvicorn(env)
    try:
        rss_before = tree_mib(importer.process.pid)
        table_id, out["import_s"], out["import_answer_parse_s"] = asyncio.run(_import(importer.base, data, remaining()))
        out["import_peak_rss_growth_mib"] = tree_mib(importer.process.pid, "VmHWM") - rss_before
    finally:
        importer.stop()
    started = time.perf_counter()
    out["tools"] = run_django(env, TOOLS, str(table_id), args.storage, args.indexed, timeout=remaining())["storage"]
    out["tools_s"] = time.perf_counter() - started
    return seeded


class Deadline(Exception):
    pass


def server_env(args: argparse.Namespace, document: bool) -> dict[str, str]:
    """The environment toolhub's servers and scripts run with in this bench (`document`: the table is served as a
    document)."""
    env = {
        **os.environ,
        "DJANGO_SECRET_KEY": "bench-secret",
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "TOOLHUB_RATE_LIMITS_ENABLED": "false",
    }
    if document:
        # The document path refuses tables over 50 MiB; raised so that it takes the run's sizes. Tables stored
        # as rows run with the default limits (records, bytes, import body, owner quota): they must admit them.
        env.update(
            TOOLHUB_MAX_TABLE_BYTES=str(64 * 2**30),
            TOOLHUB_MAX_REQUEST_BYTES=str(64 * 2**30),
            TOOLHUB_MAX_OWNER_DATA_BYTES="0",
        )
    for name in ("DJANGO_DEBUG", "OTEL_EXPORTER_OTLP_ENDPOINT", "PROMETHEUS_MULTIPROC_DIR"):
        env.pop(name, None)
    return env


def side_mcp(args: argparse.Namespace, engine: str, data: Path | None, workdir: Path) -> dict[str, Any]:
    """toolhub through MCP over `data` (imported), or, with `data` None, over a copy of the size's built database."""
    sys.path.insert(0, str(ROOT))
    from tests.live_server import Uvicorn

    deadline = time.monotonic() + args.timeout
    env = server_env(args, document=data is not None and args.storage == "document")
    pg_admin = pg_name = None
    if data is None:
        env["DATABASE_URL"], pg_name = sql_built_copy(args, args.records, "mcp")
        pg_admin = urlunsplit(urlsplit(args.database_url)._replace(path="/postgres"))
    elif engine == "postgresql":
        parts = urlsplit(args.database_url)
        pg_name = f"th_bench_scale_{os.getpid()}_mcp"
        pg_admin = urlunsplit(parts._replace(path="/postgres"))
        subprocess.run(
            ["psql", pg_admin, "-qc", f"DROP DATABASE IF EXISTS {pg_name}", "-c", f"CREATE DATABASE {pg_name}"],
            check=True,
        )
        env["DATABASE_URL"] = urlunsplit(parts._replace(path=f"/{pg_name}"))
    else:
        sqlite_file = workdir / f"mcp_{args.records}.sqlite3"
        sqlite_file.unlink(missing_ok=True)
        env["DATABASE_URL"] = f"sqlite:///{sqlite_file}"
    out: dict[str, Any] = {"queries": {}}
    servers: list[Any] = []

    def remaining() -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise Deadline
        return left

    try:
        if data is None:  # the table, its tools and indexes are the built database's
            seeded = run_django(env, REUSE, timeout=remaining())
            out["storage_switch"] = True
        else:
            seeded = _import_and_bind(args, env, data, out, remaining)
        # A table at exactly TOOLHUB_MAX_TABLE_RECORDS refuses one record more: the writer's limit leaves room
        # for the timed writes (the import above ran with the default).
        writer_env = {**env, "TOOLHUB_MAX_TABLE_RECORDS": str(max(10_000_000, args.records + args.runs))}
        reader, writer = Uvicorn(env), Uvicorn(writer_env)
        servers += [reader, writer]
        url = "/mcp/scale/"
        out["reader_rss_at_start_mib"] = tree_mib(reader.process.pid)
        calls = asyncio.run(_serve(args, reader.base + url, writer.base + url, seeded["key"], remaining))
        out["queries"].update(calls)
        out["reader_rss_after_mib"] = tree_mib(reader.process.pid)
        out["reader_rss_growth_mib"] = out["reader_rss_after_mib"] - out["reader_rss_at_start_mib"]
        out["reader_peak_rss_mib"] = tree_mib(reader.process.pid, "VmHWM")
        # Cold reads: restart the reader, time its first call.
        colds = [calls["cold first read (preview)"]["ms"]]
        for _ in range(args.restarts - 1):
            reader.stop()
            servers.remove(reader)
            reader = Uvicorn(env)
            servers.append(reader)
            colds.append(asyncio.run(_first_read(reader.base + url, seeded["key"], remaining())))
        out["queries"]["cold first read (preview)"] = {"ms": statistics.median(colds), "samples": colds}
    except Deadline:
        out["stopped"] = f"stopped at the {args.timeout} s timeout"
    except Exception as error:  # noqa: BLE001 - reported, the other sides still run
        while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
            error = error.exceptions[0]
        out["stopped"] = f"{type(error).__name__}: {str(error)[:600]}"
    finally:
        for server in servers:
            log = server.stop()
            if "Traceback" in log or "MemoryError" in log or "Killed" in log:
                out.setdefault("server_log", []).append(log[-1500:])
        if pg_name:
            subprocess.run(["psql", pg_admin, "-qc", f"DROP DATABASE IF EXISTS {pg_name} WITH (FORCE)"], check=False)
        else:
            for path in workdir.glob(f"mcp_{args.records}.sqlite3*"):
                path.unlink(missing_ok=True)
    return out


async def _import(base: str, data: Path, timeout: float) -> tuple[int, float, float]:
    """Import `data` through the API: (table id, seconds from the upload's start to the answer's last byte, seconds
    the client then took to parse the answer). The token is taken before the clock starts (a password hash, which
    may wait for the machine's hashing slot), and the answer (the whole table as JSON, ~300 MB at 1M records) is
    parsed after it stops: neither is the import's work."""
    import httpx2

    async with httpx2.AsyncClient(base_url=base, timeout=timeout) as http:
        for _attempt in range(300):  # 429 while the machine's password-hashing slot is held elsewhere
            asked = await http.post("/api/auth/token/", json={"username": "bench", "password": "bench-password-1"})
            if asked.status_code != 429:
                break
            await asyncio.sleep(1)
        token = asked.json()
        auth = {"Authorization": f"Token {token['token']}"}
        with data.open("rb") as upload:
            started = time.perf_counter()
            answer = await http.post(
                "/api/tables/import/", headers=auth, files={"file": ("orders.ndjson", upload)}, data={"name": "orders"}
            )
            seconds = time.perf_counter() - started
        if answer.status_code != 201:
            raise RuntimeError(f"import answered {answer.status_code}: {answer.text[:600]}")
        started = time.perf_counter()
        table_id = int(answer.json()["id"])
        return table_id, seconds, time.perf_counter() - started


def _client(url: str, key: str, timeout: float) -> Any:
    import httpx2
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    class Session:
        async def __aenter__(self) -> Any:
            self.http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=timeout)
            await self.http.__aenter__()
            self.client = Client(streamable_http_client(url, http_client=self.http))
            return await self.client.__aenter__()

        async def __aexit__(self, *exc: Any) -> None:
            await self.client.__aexit__(*exc)
            await self.http.__aexit__(*exc)

    return Session()


def _outcome(result: Any) -> Any:
    """The call's answer for comparison (a page's items and whether more follow), or its error."""
    if result.is_error:
        text = " ".join(getattr(part, "text", "") for part in result.content)
        return {"error": text[:300]}
    content = result.structured_content or {}
    value = content.get("result", content)
    if isinstance(value, dict) and "items" in value and "next_cursor" in value:
        return {"page": summary(value["items"]), "total": value.get("total"), "more": bool(value["next_cursor"])}
    if isinstance(value, dict) and "items" in value:
        return summary([item.get("id") if isinstance(item, dict) else item for item in value["items"]])
    return summary(value)


async def _first_read(url: str, key: str, timeout: float) -> float:
    async with _client(url, key, timeout) as client:
        started = time.perf_counter()
        result = await client.call_tool("orders_preview", {"offset": 10, "limit": PREVIEW})
        elapsed = (time.perf_counter() - started) * 1000
    if result.is_error:
        raise RuntimeError(f"cold preview failed: {_outcome(result)}")
    return elapsed


async def _serve(
    args: argparse.Namespace, read_url: str, write_url: str, key: str, remaining: Callable[[], float]
) -> dict[str, Any]:
    calls: dict[str, Any] = {}
    async with _client(read_url, key, remaining()) as reader, _client(write_url, key, remaining()) as writer:
        started = time.perf_counter()
        first = await reader.call_tool("orders_preview", {"offset": 10, "limit": PREVIEW})
        calls["cold first read (preview)"] = {"ms": (time.perf_counter() - started) * 1000, "answer": _outcome(first)}

        async def timed(name: str, tool: str, arguments: Callable[[int], dict]) -> None:
            samples, outcome = [], None
            for run in range(args.runs + 1):  # run 0 warms the reader (the first query after the cold read)
                remaining()
                started = time.perf_counter()
                result = await reader.call_tool(tool, arguments(run))
                elapsed = (time.perf_counter() - started) * 1000
                outcome = _outcome(result)
                if result.is_error:  # how long the refusal took (a budget's stop is due at the budget)
                    calls[name] = {"ms": None, "error_ms": elapsed, "answer": outcome}
                    return
                if run:
                    samples.append(elapsed)
            calls[name] = {"ms": statistics.median(samples), "answer": outcome}

        for name, (expression, _) in QUERIES.items():
            # Trailing blanks make each call's arguments new to the result cache; the expression is the same.
            await timed(name, "orders_query", lambda run, e=expression: {"query": e + " " * run})
        keys = select_keys(args.records)
        await timed("select 10 keys", "orders_by_id", lambda run: {"keys": keys[run % 2 :] + keys[: run % 2]})
        await timed("preview 50", "orders_preview", lambda run: {"offset": args.records // 2 + run, "limit": PREVIEW})

        writes, reads = [], []
        next_id = args.records
        for _ in range(args.runs):
            remaining()
            next_id += 1
            element = {"id": next_id, "customer": "bench", "status": "new", "total": 1.5}
            started = time.perf_counter()
            wrote = await writer.call_tool("orders_add", {"elements": [element]})
            writes.append((time.perf_counter() - started) * 1000)
            if wrote.is_error:
                calls["write 1 record"] = {"ms": None, "answer": _outcome(wrote)}
                break
            started = time.perf_counter()
            read = await reader.call_tool("orders_by_id", {"keys": [next_id]})
            reads.append((time.perf_counter() - started) * 1000)
            if _outcome(read) != summary([next_id]):
                calls["another worker's read after it"] = {"ms": None, "answer": _outcome(read)}
                break
        calls.setdefault("write 1 record", {"ms": statistics.median(writes) if writes else None})
        calls.setdefault("another worker's read after it", {"ms": statistics.median(reads) if reads else None})
    return calls


#
# The run
#


def run_side(args: argparse.Namespace, side: str, engine: str, size: int, data: Path | None, workdir: Path) -> dict:
    """bare/duckdb in a child process (its own peak RSS), bounded by --timeout. `data` None: the bare side reads a
    copy of the size's built database."""
    env = {**os.environ}
    copy = None
    if side == "bare":
        env["DATABASE_URL"] = args.database_url if engine == "postgresql" else ""
    if data is None:
        env["DATABASE_URL"], copy = sql_built_copy(args, size, "bare")
    command = [
        PYTHON, __file__, "--side", side, "--records", str(size), "--data", str(data), "--workdir", str(workdir),
        "--runs", str(args.runs), "--restarts", str(args.restarts), "--indexed", args.indexed,
        *(["--built"] if data is None else []),
    ]  # fmt: skip
    try:
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired as stopped:
        output = stopped.stdout.decode() if isinstance(stopped.stdout, bytes) else stopped.stdout or ""
        parts = [line[5:] for line in output.splitlines() if line.startswith("PART ")]
        return {**(json.loads(parts[-1]) if parts else {}), "stopped": f"stopped at the {args.timeout} s timeout"}
    finally:
        if copy:
            admin = urlunsplit(urlsplit(args.database_url)._replace(path="/postgres"))
            _admin_sql(admin, f'DROP DATABASE IF EXISTS "{copy}" WITH (FORCE)')
    if done.returncode != 0:
        return {"stopped": done.stderr[-1500:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def print_size(size: int, megabytes: float, results: dict[tuple[str, str], dict]) -> None:
    columns = list(results)
    names = []
    for result in results.values():
        for name in result.get("queries", {}):
            if name not in names:
                names.append(name)
    header = [f"{side} {engine}" if side != "duckdb" else "duckdb" for side, engine in columns]
    print(f"\n{size:,} records ({megabytes:.0f} MiB NDJSON): p50 ms")
    print(f"{'':<34}" + "".join(f"{label:>20}" for label in header))
    for name in names:
        cells = []
        for column in columns:
            entry = results[column].get("queries", {}).get(name)
            if entry is None:
                cells.append("—")
            elif entry.get("ms") is None and "error_ms" in entry:
                cells.append(f"error in {entry['error_ms']:.0f}")
            elif entry.get("ms") is None:
                cells.append("error")
            else:
                text = f"{entry['ms']:.1f}"
                if "statement_ms" in entry:
                    text += f" ({entry['statement_ms']:.1f})"
                cells.append(text)
        print(f"{name:<34}" + "".join(f"{cell:>20}" for cell in cells))
    for label, key in (
        ("import s", "import_s"),
        ("client's parse of the import's answer s", "import_answer_parse_s"),
        ("import peak RSS growth MiB", "import_peak_rss_growth_mib"),
        ("keys + indexes s", "keys_and_indexes_s"),
        ("tools + indexed fields s", "tools_s"),
        ("reader RSS at start MiB", "reader_rss_at_start_mib"),
        ("reader RSS growth serving MiB", "reader_rss_growth_mib"),
        ("reader peak RSS MiB", "reader_peak_rss_mib"),
        ("process RSS at the end MiB", "rss_mib"),
        ("process peak RSS MiB", "max_rss_mib"),
    ):
        values = [results[column].get(key) for column in columns]
        if any(value is not None for value in values):
            print(f"{label:<34}" + "".join(f"{'—' if v is None else f'{v:.1f}':>20}" for v in values))
    print("(bare: run_sql, then the statement alone in parentheses)")
    for column, result in results.items():
        for key in ("stopped", "tools", "server_log"):
            if key in result:
                print(f"  {column[0]} {column[1]}: {key}: {result[key]}")
    # Do the sides agree? The MCP answers are first pages of the full lists.
    for name in QUERIES:
        answers = {column: results[column].get("queries", {}).get(name, {}).get("answer") for column in columns}
        shown = {f"{side} {engine}": answer for (side, engine), answer in answers.items() if answer is not None}
        whole = {json.dumps(a, sort_keys=True) for a in shown.values() if not (isinstance(a, dict) and "page" in a)}
        verdict = "same" if len(whole) <= 1 else "DIFFER"
        print(f"  answers of {name}: {verdict}: {json.dumps(shown, sort_keys=True)[:400]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100000,1000000", help="record counts, comma-separated")
    parser.add_argument("--ten-million", action="store_true", help="add 10,000,000 records (PostgreSQL only)")
    parser.add_argument("--engines", default="sqlite,postgresql", help="sqlite, postgresql or both")
    parser.add_argument("--parts", default="mcp,bare,duckdb", help="sides to run: mcp, bare, duckdb")
    parser.add_argument("--mcp-sizes", default="", help="sizes for the mcp side only (default: --sizes)")
    parser.add_argument("--storage", choices=("document", "rows"), default="document")
    parser.add_argument(
        "--indexed",
        default="status,total,id",
        help="the table's indexed_fields (both sides); '' for none",
    )
    parser.add_argument("--runs", type=int, default=5, help="timed runs per operation (medians)")
    parser.add_argument("--restarts", type=int, default=3, help="cold reads (server restarts)")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per side and size")
    parser.add_argument("--database-url", default=os.environ.get("BENCH_PG_URL", DEFAULT_PG))
    parser.add_argument(
        "--sql-sizes",
        default="",
        help="sizes built in PostgreSQL (no NDJSON, no API import, no duckdb side); --ten-million adds 10,000,000",
    )
    parser.add_argument(
        "--built-database",
        default="th_bench_scale_rows_{size}",
        help="the kept database of a size built in SQL ({size} is replaced), reused while it holds that build",
    )
    # Internal: one side in a child process.
    parser.add_argument("--side", help=argparse.SUPPRESS)
    parser.add_argument("--records", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    parser.add_argument("--built", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        result = side_bare(args) if args.side == "bare" else side_duckdb(args)
        print(json.dumps(result))
        return 0

    sizes = [int(size) for size in args.sizes.split(",") if size]
    mcp_sizes = [int(size) for size in args.mcp_sizes.split(",") if size] or sizes
    engines = [engine for engine in args.engines.split(",") if engine]
    parts = [part for part in args.parts.split(",") if part]
    sql_sizes = [int(size) for size in args.sql_sizes.split(",") if size]
    if args.ten_million:
        sql_sizes.append(10_000_000)
    if sql_sizes and "postgresql" not in engines:
        raise SystemExit("--ten-million and --sql-sizes run on PostgreSQL only: add --engines postgresql")
    sizes += [size for size in sql_sizes if size not in sizes]
    mcp_sizes += [size for size in sql_sizes if size not in mcp_sizes]
    sample = list(iter_records(50))
    sys.path.insert(0, str(BENCH))
    from data_access import build_records

    assert sample == build_records(50), "iter_records drifted from data_access.build_records"

    print(f"bench/scale.py — {os.cpu_count()} CPUs, load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}")
    print(
        f"storage asked for: {args.storage}; runs {args.runs}; restarts {args.restarts}; timeout {args.timeout} s",
        flush=True,
    )
    workdir = Path(tempfile.mkdtemp(prefix="toolhub-scale-"))
    try:
        for size in sizes:
            data: Path | None = workdir / f"orders_{size}.ndjson"
            started = time.perf_counter()
            if size in sql_sizes:
                built_database(args, size, server_env(args, document=False))
                data, megabytes = None, 0.0
            else:
                megabytes = write_ndjson(data, size) / 2**20
                took = time.perf_counter() - started
                print(f"\n{size:,} records written to NDJSON ({megabytes:.0f} MiB) in {took:.0f} s")
            results: dict[tuple[str, str], dict] = {}
            for engine in engines:
                if (size > 1_000_000 or data is None) and engine != "postgresql":
                    continue
                if "mcp" in parts and size in mcp_sizes:
                    print(f"  {clock()} mcp {engine} ...", flush=True)
                    args.records = size
                    mcp = side_mcp(args, engine, data, workdir)
                    if args.storage == "rows" and not mcp.get("storage_switch"):
                        print("  --storage rows: no Table.storage field yet; measured the storage the table has")
                    results[("mcp", engine)] = side_done("mcp", engine, mcp)
                if "bare" in parts:
                    print(f"  {clock()} bare {engine} ...", flush=True)
                    bare = run_side(args, "bare", engine, size, data, workdir)
                    results[("bare", engine)] = side_done("bare", engine, bare)
            if "duckdb" in parts and data is not None:
                print(f"  {clock()} duckdb ...", flush=True)
                results[("duckdb", "")] = side_done("duckdb", "", run_side(args, "duckdb", "", size, data, workdir))
            print_size(size, megabytes, results)
            print(f"load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}")
            (workdir / f"orders_{size}.ndjson").unlink(missing_ok=True)
            print("JSON " + json.dumps({f"{s} {e}": r for (s, e), r in results.items()}))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
