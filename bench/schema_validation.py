#!/usr/bin/env python
"""Argument validation: jsonschema's own Draft 2020-12 validator against toolhub's (tools_app.safe_schema).

Two hostile inputs a caller controls: `uniqueItems` over N distinct objects (jsonschema compares
them pairwise) and `pattern: ^(a+)+$` against N a's and a '!' (Python's re backtracks). Prints the median
wall time of each over a few runs; the plain validator is skipped where it would take minutes.

    .venv/bin/python bench/schema_validation.py [--runs N]
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolhub.settings")
os.environ.setdefault("DJANGO_SECRET_KEY", "bench")

import django  # noqa: E402

django.setup()

from jsonschema import Draft202012Validator  # noqa: E402

from tools_app.safe_schema import validator_for  # noqa: E402


def median_ms(validate, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        validate()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}; median of {args.runs} runs, milliseconds")
    print(f"{'input':<40}{'jsonschema':>14}{'toolhub':>14}")

    unique = {"type": "array", "uniqueItems": True}
    for count in (500, 1_000, 2_000, 20_000):
        items = [{"id": number} for number in range(count)]
        plain = Draft202012Validator(unique)
        ours = validator_for(unique)
        plain_ms = median_ms(lambda: plain.is_valid(items), args.runs) if count <= 2_000 else None  # noqa: B023
        ours_ms = median_ms(lambda: ours.is_valid(items), args.runs)  # noqa: B023
        shown = "(skipped)" if plain_ms is None else f"{plain_ms:.1f}"
        print(f"{f'uniqueItems, {count:,} objects':<40}{shown:>14}{ours_ms:>14.1f}")

    pattern = {"type": "string", "pattern": "^(a+)+$"}
    for length in (18, 20, 22, 100_000):
        text = "a" * length + "!"
        plain = Draft202012Validator(pattern)
        ours = validator_for(pattern)
        plain_ms = median_ms(lambda: plain.is_valid(text), args.runs) if length <= 22 else None  # noqa: B023
        ours_ms = median_ms(lambda: ours.is_valid(text), args.runs)  # noqa: B023
        shown = "(skipped)" if plain_ms is None else f"{plain_ms:.1f}"
        print(f"{f'^(a+)+$ on {length:,} a and !':<40}{shown:>14}{ours_ms:>14.1f}")


if __name__ == "__main__":
    main()
