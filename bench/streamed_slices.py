"""Peak memory and time of streamed slices of the records and sort(...) selections against the evaluator over the
gathered list (bench/README.md, "Streamed slices of the records").

    PYTHONPATH=. DJANGO_DEBUG=true .venv/bin/python bench/streamed_slices.py
"""

import json
import os
import statistics
import time
import tracemalloc

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolhub.settings")
django.setup()

from tools_app.data_access import streamed  # noqa: E402  (after django.setup)
from tools_app.data_access.query import run_query  # noqa: E402

N, CHUNK = 50_000, 2_000
QUERIES = ["[::100].id", "sort([*].total)[0]", "[1:-1] | length(@)", "[::-1] | [0].id"]


def chunks():
    """The records as records.py reads them, made chunk by chunk (never held whole)."""
    for start in range(0, N, CHUNK):
        rows = []
        for number in range(start, min(N, start + CHUNK)):
            record = {"id": number, "total": (number * 7919) % 10007, "pad": "p" * 100}
            rows.append((number, None, record, len(json.dumps(record))))
        yield rows


def gathered(expression):
    return run_query(expression, [row[2] for chunk in chunks() for row in chunk])


def stream(expression):
    return streamed.run(expression, streamed.plan(expression, "array"), chunks(), "array", limit=10**10, length=N)


def main():
    for expression in QUERIES:
        assert gathered(expression) == stream(expression)
        times = {"gathered": [], "streamed": []}
        peaks = {}
        for _ in range(3):
            for name, run in (("gathered", gathered), ("streamed", stream)):
                tracemalloc.start()
                started = time.perf_counter()
                run(expression)
                times[name].append(time.perf_counter() - started)
                peaks[name] = tracemalloc.get_traced_memory()[1] / 2**20
                tracemalloc.stop()
        ratio = statistics.median(times["streamed"]) / statistics.median(times["gathered"])
        print(
            f"{expression:22} gathered peak {peaks['gathered']:6.1f} MiB | streamed peak {peaks['streamed']:6.1f} MiB"
            f" | time ratio {ratio:.2f}"
        )
    print(os.popen("uptime").read().strip())


if __name__ == "__main__":
    main()
