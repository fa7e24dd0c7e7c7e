"""What a live server's database costs the test suite: migrated per server, or copied from a test run's
migrated template (tests/live_server.py, TOOLHUB_TEST_RUN).

    python bench/server_database.py [--rounds 5] [--database-url postgres://postgres@127.0.0.1:5432/postgres]

Each round makes one database each way, side by side: "migrate" (no test run: `manage.py migrate` on a fresh
database) and "copy" (a test run whose template is already built, as for every server after a run's first).
It prints, per way, the median wall time and the median CPU time of the processes it ran (children's user +
system time), and the ratios copy / migrate. SQLite without --database-url; PostgreSQL with it (databases of
its own on that server, dropped at the end).
"""

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.live_server import TEST_RUN, drop_templates, server_database  # noqa: E402


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one(tag: str, run: str | None) -> tuple[float, float]:
    """(wall, CPU) of making one server database, in a test run `run` or outside any."""
    if run:
        os.environ[TEST_RUN] = run
    else:
        os.environ.pop(TEST_RUN, None)
    with tempfile.TemporaryDirectory() as directory:
        started, cpu = time.monotonic(), children_cpu()
        with server_database(tag, Path(directory), secret="bench-secret"):
            elapsed, spent = time.monotonic() - started, children_cpu() - cpu
    return elapsed, spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--database-url", default="")
    options = parser.parse_args()
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-secret")
    if options.database_url:
        os.environ["DATABASE_URL"] = options.database_url
    else:
        os.environ.pop("DATABASE_URL", None)
    run = f"bench{uuid.uuid4().hex[:8]}"
    try:
        one("b_sdb_warm", run)  # the run's first server builds the template
        results: dict[str, list[tuple[float, float]]] = {"migrate": [], "copy": []}
        for _round in range(options.rounds):
            results["migrate"].append(one("b_sdb_migrate", None))
            results["copy"].append(one("b_sdb_copy", run))
    finally:
        os.environ[TEST_RUN] = run
        drop_templates(run)
    engine = "PostgreSQL" if options.database_url else "SQLite"
    medians = {}
    for way, samples in results.items():
        wall = statistics.median(sample[0] for sample in samples)
        cpu = statistics.median(sample[1] for sample in samples)
        medians[way] = (wall, cpu)
        print(f"{engine} {way:8} wall {wall:7.2f} s   CPU {cpu:6.2f} s   ({len(samples)} rounds)")
    print(
        f"{engine} copy / migrate: wall {medians['copy'][0] / medians['migrate'][0]:.3f}x, "
        f"CPU {medians['copy'][1] / max(medians['migrate'][1], 1e-9):.3f}x; load {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
