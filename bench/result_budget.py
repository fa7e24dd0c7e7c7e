"""What the result budget costs and saves (issue 12 item 3, docs/paging.md): medians of many runs.

    .venv/bin/python bench/result_budget.py [--repeat 15]

1. Results within the budget: the encoding the classify step now does (`paging.encode_within`, piece by
   piece so it can stop) against the one-shot `json.dumps` it replaces, for results of 200 B to 39 kB.
2. The 67 MB result of issue 12 (300,000 records of 226 bytes): the whole `json.dumps` the old pipeline
   made before refusing it (MCP) or sending it (API), against the first page (`paging.page_of`) and the
   refusal of the same data wrapped in an object (`paging.measure` up to four budgets).

No database: the functions are pure; Django settings are configured in memory for the cursor signer.
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from django.conf import settings  # noqa: E402

settings.configure(SECRET_KEY="bench-only")

from tools_app import paging  # noqa: E402
from tools_app.kernel import limits  # noqa: E402

BUDGET = limits.MAX_RESULT_BYTES.default


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
    args = parser.parse_args()
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
    refuse = median_ms(lambda: paging.measure({"rows": rows}, BUDGET * paging.MEASURE_FACTOR), args.repeat)
    page = paging.page_of(rows, offset=0, limit=BUDGET, cursor_at=cursor_at)
    assert page is not None
    print(f"{'json.dumps of all of it (before)':<44}{whole:>10.1f}")
    print(f"{'first page, ' + str(page.shown) + ' items (after)':<44}{first:>10.1f}")
    print(f"{'page at item 150,000 (after)':<44}{middle:>10.1f}")
    print(f"{'refusal of it wrapped in an object (after)':<44}{refuse:>10.1f}")


if __name__ == "__main__":
    main()
