"""What the result budget costs and saves (docs/paging.md): medians of many runs.

    .venv/bin/python bench/result_budget.py [--repeat 15]

1. Results within the budget: the encoding the classify step now does (`paging.encode_within`, piece by
   piece so it can stop) against the one-shot `json.dumps` it replaces, for results of 200 B to 39 kB.
2. A 67 MB result (300,000 records of 226 bytes): the whole `json.dumps` the old pipeline
   made before refusing it (MCP) or sending it (API), against the first page (`paging.page_of`) and the
   refusal of the same data wrapped in an object (`paging.encoded_size` up to four budgets).

No database: the functions are pure; Django settings are configured in memory for the cursor signer.

3. `--pipeline`: whole calls through the call pipeline (`pipeline.run_tool_call`, the API surface, call log
   included) on a throwaway database, this checkout and the checkout at `--baseline-ref` (extracted with
   `git archive`) run alternately in child processes, medians side by side (wall and CPU ms):
   - a result within the budget, served from the result cache;
   - a list over the budget (2,000 records, ~270 kB): its first page asked again (from the cache), and its
     second page by the cursor, once (the first page just served) and asked again;
   - a rows table (`--rows` records of bench/scale.py's shape, ~300 bytes each, stored as rows): `get_all_data`'s
     first page and the page at the middle of the collection (by cursor), the result cache cleared before
     each call, so the table is read each time.

    .venv/bin/python bench/result_budget.py --pipeline [--rows 100000] [--rounds 2] [--baseline-ref main]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if "--code" in sys.argv:  # a child of --pipeline running another checkout's code
    sys.path.insert(0, sys.argv[sys.argv.index("--code") + 1])
sys.path.insert(1, str(ROOT))

# TOOLHUB_MAX_RESULT_BYTES's default (tools_app/kernel/limits.py), as a literal: --code may run a checkout
# from before that module.
BUDGET = 40_000


def median_ms(function, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def record(i: int, text: int = 40) -> dict:
    return {"id": i, "customer": f"customer {i}", "status": "shipped", "total": i * 1.5, "note": "x" * text}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--pipeline", action="store_true", help="whole calls, this checkout vs --baseline-ref")
    parser.add_argument("--baseline-ref", default="main")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--code", help=argparse.SUPPRESS)  # child: the checkout whose code runs
    args = parser.parse_args()
    if args.code:
        child(args)
        return
    if args.pipeline:
        compare(args)
        return
    pure(args)


def pure(args: argparse.Namespace) -> None:
    from django.conf import settings

    settings.configure(SECRET_KEY="bench-only")
    from tools_app import paging

    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

    print(f"Result budget {BUDGET} bytes; medians of {args.repeat} runs (ms)\n")
    print(f"{'result within the budget':<34}{'json.dumps':>12}{'encode_within':>15}{'ratio':>8}")
    for count in (1, 20, 100, 330):
        value = [record(i) for i in range(count)] if count > 1 else record(1)
        size = len(dumps(value).encode())
        assert size <= BUDGET
        assert paging.encode_within(value, BUDGET) == dumps(value)
        inner = 200 if size < 1000 else 10
        old = median_ms(lambda v=value, n=inner: [dumps(v) for _ in range(n)], args.repeat) / inner
        new = (
            median_ms(lambda v=value, n=inner: [paging.encode_within(v, BUDGET) for _ in range(n)], args.repeat) / inner
        )
        print(f"{f'{size:,} bytes':<34}{old:>12.3f}{new:>15.3f}{new / old:>8.2f}")

    rows = [{"id": i, "text": "x" * 202} for i in range(300_000)]
    size = len(dumps(rows).encode())
    print(f"\nthe issue's 67 MB result: {size:,} bytes, {len(rows):,} records")
    repeat = max(3, args.repeat // 3)
    whole = median_ms(lambda: dumps(rows), repeat)

    def cursor_at(offset: int) -> str:
        return paging.sign_cursor(binding="b" * 32, version=1, offset=offset)

    first = median_ms(lambda: paging.page_of(rows, offset=0, limit=BUDGET, cursor_at=cursor_at), args.repeat)
    middle = median_ms(lambda: paging.page_of(rows, offset=150_000, limit=BUDGET, cursor_at=cursor_at), args.repeat)
    refuse = median_ms(lambda: paging.encoded_size({"rows": rows}, BUDGET * paging.MEASURE_FACTOR), args.repeat)
    page = paging.page_of(rows, offset=0, limit=BUDGET, cursor_at=cursor_at)
    assert page is not None
    print(f"{'json.dumps of all of it (before)':<44}{whole:>10.1f}")
    print(f"{'first page, ' + str(page.shown) + ' items (after)':<44}{first:>10.1f}")
    print(f"{'page at item 150,000 (after)':<44}{middle:>10.1f}")
    print(f"{'refusal of it wrapped in an object (after)':<44}{refuse:>10.1f}")


#
# --pipeline: whole calls, this checkout and a baseline side by side
#

CASES = (
    "fits, cached",
    "over: first page again",
    "over: next page, first time",
    "over: next page again",
    "rows: first page",
    "rows: middle page",
)


def compare(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="result-budget-") as workdir:
        baseline = Path(workdir) / "baseline"
        baseline.mkdir()
        archive = subprocess.run(["git", "archive", args.baseline_ref], cwd=ROOT, check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(baseline)], input=archive.stdout, check=True)
        checkouts = {f"@{args.baseline_ref}": str(baseline), "this checkout": str(ROOT)}
        results: dict[str, dict[str, list[float]]] = {name: {} for name in checkouts}
        for round_number in range(args.rounds):
            for name, code in checkouts.items():
                command = [sys.executable, str(Path(__file__).resolve()), "--code", code, "--rows", str(args.rows)]
                command += ["--repeat", str(args.repeat)]
                done = subprocess.run(command, check=False, capture_output=True, text=True, env=os.environ)
                if done.returncode:
                    print(f"round {round_number + 1}: {name} failed:\n{done.stderr[-3000:]}", file=sys.stderr)
                    continue
                for line in done.stderr.splitlines():
                    if " calls answered " in line:  # the child's note of calls that answered an error
                        print(f"round {round_number + 1}: {name}: {line}", file=sys.stderr)
                measured = json.loads(done.stdout.strip().splitlines()[-1])
                for case, value in measured.items():
                    results[name].setdefault(case, []).append(value)
                print(f"round {round_number + 1}: {name} done", file=sys.stderr)
    load = os.getloadavg()[0]
    print(f"Whole calls through the pipeline, budget {BUDGET} bytes, {args.rows:,} rows; medians over {args.rounds}")
    print(f"rounds of the per-round medians of {args.repeat} calls (ms); load average {load:.1f}\n")
    names = list(checkouts)
    header = "".join(f"{name[:16]:>18}" for name in names)
    print(f"{'case':<34}{header}{'ratio':>8}   (wall; CPU in brackets)")
    for case in CASES:
        cells, walls = [], []
        for name in names:
            wall = statistics.median(results[name].get(f"{case} wall", [float("nan")]))
            cpu = statistics.median(results[name].get(f"{case} cpu", [float("nan")]))
            walls.append(wall)
            cells.append(f"{wall:>9.2f} ({cpu:>6.2f})")
        print(f"{case:<34}{''.join(f'{cell:>18}' for cell in cells)}{walls[1] / walls[0]:>8.2f}")
    outcomes = {name: results[name].get("rows outcome", []) for name in names}
    print(f"\nrows first page answered a page (1) or an error (0), per round: {outcomes}")
    for name in names:
        for case in CASES:
            if results[name].get(f"{case} errors"):
                print(f"{name}: {case}: calls answered an error in rounds: {results[name][f'{case} errors']}")


def child(args: argparse.Namespace) -> None:
    """One checkout's measurements on its own throwaway database; prints them as one JSON line."""
    import bench.data_access
    from bench.data_access import in_throwaway_database

    bench.data_access.BENCH_DATABASE = os.environ.get("BENCH_DATABASE", "th_bench_result_budget")
    in_throwaway_database(lambda database: _measure(args))


def _measure(args: argparse.Namespace) -> int:
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection, transaction
    from django.test.utils import override_settings

    from bench.scale import iter_records
    from tools_app import services
    from tools_app.data_access.sql.store import delete_records, write_records
    from tools_app.execution import pipeline, records
    from tools_app.models import Surface, TableCollection, TableRecord, TableRecordLayout
    from tools_app.paging import sign_cursor, tool_binding

    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_user("bench")  # no password: no hash slot to wait for
    small = services.table_create(owner=owner, name="small", data=[record(i) for i in range(100)])
    listed = services.table_create(owner=owner, name="listed", data=[record(i) for i in range(2_000)])
    big = services.table_create(owner=owner, name="big", data=[{"id": 0}])
    tools = {}
    for name, table in (("small", small), ("listed", listed), ("big", big)):
        tools[name] = services.tool_create(
            owner=owner, name=f"{name}_all", type="get_all_data", table=table, json_path="", description="All."
        )
    assert records.table_to_rows(big.pk)
    collection = TableCollection.objects.get(table=big, mount="")
    with transaction.atomic(), connection.cursor() as cursor:
        held = list(TableRecord.objects.filter(collection=collection).values_list("position", flat=True))
        # Through the storage code, which keeps the collection's directory of positions with its rows.
        delete_records(cursor, records_table=TableRecord._meta.db_table, collection_id=collection.pk, positions=held)
        count = write_records(
            cursor,
            dialect=records.dialect(),
            records_table=TableRecord._meta.db_table,
            layouts_table=TableRecordLayout._meta.db_table,
            collection_id=collection.pk,
            value=iter_records(args.rows),  # type: ignore[arg-type]
            key_of=lambda item: str(item["id"]),
        )
        TableCollection.objects.filter(pk=collection.pk).update(record_count=count)
    caller = pipeline.Caller(surface=Surface.API, user_id=owner.pk, user=owner)

    def call(name: str, arguments: dict) -> pipeline.CallOutcome:
        tool = tools[name]
        return pipeline.run_tool_call(
            caller=caller, target=pipeline.target_of_tool(tool), name=tool.name, arguments=arguments
        )

    def cursor_of(name: str, offset: int) -> str:
        tool = tools[name]
        binding = tool_binding(tool_id=tool.pk, tool_changed=tool.updated_at.isoformat(), arguments={})
        return sign_cursor(binding=binding, version=tool.table.version, offset=offset)

    measured: dict[str, float] = {}

    def timed(case: str, run, before=None) -> None:
        walls, cpus, errors = [], [], []
        for _ in range(args.repeat):
            if before is not None:
                before()
            wall, cpu = time.perf_counter(), time.process_time()
            outcome = run()
            walls.append((time.perf_counter() - wall) * 1000)
            cpus.append((time.process_time() - cpu) * 1000)
            if outcome.error is not None:
                errors.append(str(outcome.error.code))
        measured[f"{case} wall"] = statistics.median(walls)
        measured[f"{case} cpu"] = statistics.median(cpus)
        if errors:
            print(f"{case}: {len(errors)} of {args.repeat} calls answered {sorted(set(errors))}", file=sys.stderr)
            measured[f"{case} errors"] = float(len(errors))

    with override_settings(TOOLHUB_MAX_RESULT_BYTES=BUDGET):
        call("small", {})
        timed("fits, cached", lambda: call("small", {}))
        first = call("listed", {})
        assert first.value["next_cursor"], "the list is paged"
        second = {"cursor": first.value["next_cursor"]}
        timed("over: first page again", lambda: call("listed", {}))

        def fresh_first_page() -> None:
            pipeline.result_cache.clear()
            call("listed", {})

        timed("over: next page, first time", lambda: call("listed", second), before=fresh_first_page)
        call("listed", second)
        timed("over: next page again", lambda: call("listed", second))
        clear = pipeline.result_cache.clear
        outcome = call("big", {})
        measured["rows outcome"] = float(outcome.error is None and "items" in outcome.value)
        timed("rows: first page", lambda: call("big", {}), before=clear)
        middle = {"cursor": cursor_of("big", args.rows // 2)}
        timed("rows: middle page", lambda: call("big", middle), before=clear)
    print(json.dumps(measured))
    return 0


if __name__ == "__main__":
    main()
