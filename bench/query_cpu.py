#!/usr/bin/env python
"""CPU medians of the data-access benchmark's queries through `run_query`, for comparing two checkouts.

    python bench/query_cpu.py                      # this checkout
    python bench/query_cpu.py --root /path/to/other/checkout

Builds bench/data_access.py's 100,000 records (no database), then times each of its QUERIES 15 times with
the thread's CPU clock (time.thread_time, so a busy machine's waits do not count) and prints the medians
in milliseconds. A checkout with per-call budgets runs them under the server's default budget,
as every call does. Run it for two checkouts in turn, a few rounds, to compare them on a shared machine.
"""

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(Path(__file__).resolve().parents[1]), help="checkout to measure")
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    sys.path[:0] = [args.root, os.path.join(args.root, "bench")]
    os.environ["DJANGO_SETTINGS_MODULE"] = "toolhub.settings"
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-secret-key-not-for-production")
    import django

    django.setup()
    from data_access import QUERIES, build_records

    from tools_app.data_access.query import run_query

    try:
        from tools_app.data_access.budget import enforced
        from tools_app.execution.call_limits import default_limits

        def budgeted():
            return enforced(default_limits())
    except ImportError:  # a checkout without budgets
        budgeted = contextlib.nullcontext

    data = json.loads(json.dumps(build_records(100_000)))
    print(f"run_query CPU p50 (ms, {args.runs} runs) in {args.root}")
    for expression in QUERIES:
        samples = []
        for _ in range(args.runs):
            started = time.thread_time()
            with budgeted():
                run_query(expression, data)
            samples.append((time.thread_time() - started) * 1000)
        print(f"  {expression:<62}{statistics.median(samples):>8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
