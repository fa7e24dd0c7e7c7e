"""What counting one request costs: tools_app.kernel.rate_limits.hit / ahit, per store.

    .venv/bin/python bench/rate_limits.py [--hits 20000] [--rounds 5] [--redis-url redis://127.0.0.1:6379/5]

Times `hit` (the API's throttles, sync) and `ahit` (the MCP endpoint, on the event loop) against the
in-memory store and against Redis (a key prefix of its own, deleted at the end), and prints the median
over the rounds of the mean microseconds per counted request. No database is used.
"""

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolhub.settings")
os.environ.setdefault("DJANGO_SECRET_KEY", "bench-secret")

import django  # noqa: E402

django.setup()

import redis  # noqa: E402
from django.conf import settings  # noqa: E402

from tools_app.kernel import rate_limits  # noqa: E402


def per_hit_sync(count: int) -> float:
    bucket = rate_limits.Bucket.of(rate_limits.API_USER, uuid.uuid4().hex, "1000000000/hour")
    started = time.perf_counter()
    for _ in range(count):
        rate_limits.hit(bucket)
    return (time.perf_counter() - started) / count * 1e6


def per_hit_async(count: int) -> float:
    async def run() -> float:
        bucket = rate_limits.Bucket.of(rate_limits.MCP_KEY, uuid.uuid4().hex, "1000000000/hour")
        await rate_limits.ahit(bucket)  # opens the loop's connection outside the timing
        started = time.perf_counter()
        for _ in range(count):
            await rate_limits.ahit(bucket)
        return (time.perf_counter() - started) / count * 1e6

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hits", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/5")
    args = parser.parse_args()
    settings.TOOLHUB_RATE_LIMITS_ENABLED = True
    prefix = f"toolhub-bench-{uuid.uuid4().hex[:8]}"
    settings.TOOLHUB_RATE_LIMIT_KEY_PREFIX = prefix
    print(f"{args.hits} counted requests per round, {args.rounds} rounds; median of the rounds' means")
    print(f"{'store':8} {'call':18} {'us/request':>10}   (each round)")
    try:
        for store, url in (("memory", ""), ("redis", args.redis_url)):
            settings.REDIS_URL = url
            rate_limits.reset()
            for name, measure in (("hit (API, sync)", per_hit_sync), ("ahit (MCP, async)", per_hit_async)):
                hits = args.hits if store == "memory" else max(1, args.hits // 10)
                rounds = [measure(hits) for _ in range(args.rounds)]
                each = " ".join(f"{value:.1f}" for value in rounds)
                print(f"{store:8} {name:18} {statistics.median(rounds):10.1f}   ({each})")
    finally:
        client = redis.Redis.from_url(args.redis_url)
        keys = list(client.scan_iter(f"{prefix}:*"))
        if keys:
            client.delete(*keys)
        client.close()


if __name__ == "__main__":
    main()
