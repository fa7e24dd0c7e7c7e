#!/usr/bin/env python
"""What naming records by key costs the admin's History page (docs/history.md, "Admin").

A throwaway database (bench/data_access.py's ThrowawayDatabase) holds a document table of `--records` order
records (~300 B each) with `--writes` update-tool calls through the call pipeline, each changing one record's
status. For one page of 25 entries, it measures the CPU time of:

- by index: the lines with the patch's own paths (`readable_diff` without a namer: what the page showed before);
- by key: `entry_lines` (the document at the page's newest version, stepped back one inverse per entry, each
  path resolved against it), on the first page and on a page `--deep` entries back.

Medians over `--rounds`, side by side in one run, and their ratio:

    .venv/bin/python bench/history_lines.py [--records 100000] [--writes 200] [--deep 150]
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCH_DATABASE = "th_bench_history_lines"
PAGE = 25


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--deep", type=int, default=150, help="entries between the newest and the deep page")
    parser.add_argument("--rounds", type=int, default=7)
    return parser.parse_args()


def cpu_ms(run) -> float:
    start = time.process_time()
    run()
    return (time.process_time() - start) * 1000


def main() -> int:
    options = parse()
    sys.path.insert(0, str(HERE.parent))
    sys.path.insert(1, str(HERE))
    os.chdir(HERE.parent)
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench")
    os.environ["TOOLHUB_RATE_LIMITS_ENABLED"] = "false"
    os.environ["DJANGO_SETTINGS_MODULE"] = "toolhub.settings"
    import data_access  # bench/data_access.py, next to this script
    from data_access import ThrowawayDatabase, build_records

    data_access.BENCH_DATABASE = BENCH_DATABASE
    with ThrowawayDatabase() as database:
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command

        from tools_app import services
        from tools_app.execution.history_lines import entry_lines, readable_diff
        from tools_app.execution.pipeline import Caller, run_tool_call, target_of_tool
        from tools_app.models import Surface, Table, TableChange

        call_command("migrate", verbosity=0)
        owner, _ = get_user_model().objects.get_or_create(username="bench-history-lines")
        records = build_records(options.records)
        table = services.table_create(owner=owner, name="orders", data=records)
        tool = services.tool_create(owner=owner, name="orders_update", type="update", table=table, description="d")
        caller = Caller(surface=Surface.ADMIN, user_id=owner.pk, user=owner)
        step = max(1, len(records) // options.writes)
        for number in range(options.writes):
            record = records[(number * step) % len(records)]
            arguments = {"elements": [{"id": record["id"], "status": f"s{number}"}]}
            assert run_tool_call(caller=caller, target=target_of_tool(tool), name=tool.name, arguments=arguments).ok
        table = Table.objects.get(pk=table.pk)
        entries = list(TableChange.objects.filter(table=table).order_by("-version"))
        first, deep = entries[:PAGE], entries[options.deep : options.deep + PAGE]
        timings: dict[str, list[float]] = {"index, first page": [], "key, first page": [], "key, deep page": []}
        for _ in range(options.rounds):
            timings["index, first page"].append(
                cpu_ms(lambda: [readable_diff(entry.patch, entry.inverse) for entry in first])
            )
            timings["key, first page"].append(cpu_ms(lambda: entry_lines(table, first)))
            timings["key, deep page"].append(cpu_ms(lambda: entry_lines(table, deep)))
        print(f"{database.label}: {options.records} records, {options.writes} writes, page of {PAGE}")
        print(f"sample line: {entry_lines(table, first[:1])[first[0].version][0][0]}")
        base = statistics.median(timings["index, first page"])
        for name, values in timings.items():
            median = statistics.median(values)
            print(f"{name:20} CPU median {median:8.2f} ms  (x{median / base:.1f} of by-index)")
        print(f"load average: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
