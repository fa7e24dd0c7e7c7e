"""Retrieval benchmark for the tool registry.

    .venv/bin/python bench/registry/run.py [--methods bm25,regex,embedding,hybrid] [--queries N] [--tune]
                                           [--json out.json]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/registry/run.py

Loads bench/registry/data/tools.jsonl ({"name", "description", "input_schema", "server"}) and
queries.jsonl ({"query", "expected": [names]}), builds the registry's in-memory index through its own
API (unsaved Tool rows), and reports per method recall@1, recall@5, MRR@10 and p50/p95 search
latency; index build time and memory at the data set's size and at 2,000 tools (the set duplicated
with perturbed names and descriptions); and the usage-guide time for 200 tools.

Embedding vectors live in the database (tools_app.models.EmbeddingVector), so the script runs against
a throwaway one it creates and removes, never the development database: a temporary SQLite file by
default; with DATABASE_URL=postgres://..., the database `th_bench_registry` on that server. It times
the embedding index cold with an empty table, cold again with the table filled (a new worker, or a
restart), and the first hybrid search of a second process started on that database.

--tune picks the hybrid weight on one half of the queries (seeded split) and reports it on the other.

Targets: best method recall@5 >= 0.9; bm25 p95 <= 5 ms and build <= 0.5 s at 2,000 tools;
guide for 200 tools <= 20 ms. Seed: index build < 2 s with 1,000+ tools.
"""

import argparse
import atexit
import gc
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
BENCH_DATABASE = "th_bench_registry"
# Set in the second process's environment: use DATABASE_URL as it is (the first process's database).
REUSE_DATABASE = "TOOLHUB_BENCH_REUSE_DATABASE"
PROBE_QUERY = "post a message to the team channel"
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolhub.settings")
os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only")


class ThrowawayDatabase:
    """Points DATABASE_URL at a fresh database before Django starts; close() removes it."""

    def __init__(self) -> None:
        self.url = os.environ.get("DATABASE_URL", "").strip()
        self.vendor = "postgresql" if self.url.startswith(("postgres://", "postgresql://")) else "sqlite"
        self._tempdir: str | None = None
        self._admin_url: str | None = None

    def open(self) -> None:
        if self.vendor == "postgresql":
            parts = urlsplit(self.url)
            self._admin_url = urlunsplit(parts._replace(path="/postgres"))
            self._admin(
                f'DROP DATABASE IF EXISTS "{BENCH_DATABASE}" WITH (FORCE)', f'CREATE DATABASE "{BENCH_DATABASE}"'
            )
            os.environ["DATABASE_URL"] = urlunsplit(parts._replace(path=f"/{BENCH_DATABASE}"))
            self.label = f"PostgreSQL database {BENCH_DATABASE} on {parts.hostname}:{parts.port or 5432}"
        else:
            self._tempdir = tempfile.mkdtemp(prefix="toolhub-bench-registry-")
            os.environ["DATABASE_URL"] = f"sqlite:///{Path(self._tempdir) / 'bench.sqlite3'}"
            self.label = "a temporary SQLite file"

    def close(self) -> None:
        if self.vendor == "postgresql":
            from django.db import connections

            connections.close_all()
            self._admin(f'DROP DATABASE IF EXISTS "{BENCH_DATABASE}" WITH (FORCE)')
        elif self._tempdir:
            shutil.rmtree(self._tempdir, ignore_errors=True)

    def _admin(self, *statements: str) -> None:
        import psycopg

        with psycopg.connect(self._admin_url, autocommit=True) as connection:
            for statement in statements:
                connection.execute(statement)


PROCESS_STARTED = time.perf_counter()
if os.environ.get(REUSE_DATABASE) != "1":
    DATABASE = ThrowawayDatabase()
    DATABASE.open()
    atexit.register(DATABASE.close)

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from tools_app.kernel.errors import ToolError  # noqa: E402
from tools_app.models import EmbeddingVector, Tool  # noqa: E402
from tools_app.registry import embedding, search  # noqa: E402
from tools_app.registry.guide import usage_guide  # noqa: E402
from tools_app.registry.scope import CatalogEntry  # noqa: E402
from tools_app.registry.search import Index, build_index  # noqa: E402


def load_tools(path: Path) -> list[CatalogEntry]:
    entries = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        row = json.loads(line)
        metadata = {"mcp_server": row.get("server") or ""}
        if row.get("category"):
            metadata["category"] = row["category"]
        if row.get("tags"):
            metadata["tags"] = row["tags"]
        tool = Tool(
            id=number,
            name=row["name"],
            type="external",
            description=row.get("description") or "",
            input_schema=row.get("input_schema") or {"type": "object"},
            metadata=metadata,
        )
        entries.append(CatalogEntry(tool.name, tool.description, tool))
    return entries


def perturbed(entries: list[CatalogEntry], size: int) -> list[CatalogEntry]:
    """`size` entries: the originals, then copies with new names and shuffled description words."""
    rng = random.Random(5)
    out = list(entries)
    copy_number = 2
    while len(out) < size:
        for entry in entries:
            if len(out) >= size:
                break
            words = entry.description.split()
            rng.shuffle(words)
            name = f"{entry.name[:58]}_v{copy_number}"
            tool = Tool(
                id=len(out) + 1,
                name=name,
                type="external",
                description=" ".join(words),
                input_schema=entry.tool.input_schema,
                metadata=entry.tool.metadata,
            )
            out.append(CatalogEntry(name, tool.description, tool))
        copy_number += 1
    return out


def measure_build(entries: list[CatalogEntry]) -> tuple[Index, float, float, float]:
    """(index, wall seconds (best of three), CPU seconds, MiB allocated by the build)."""
    times = []
    for _ in range(3):
        gc.collect()
        started = time.perf_counter()
        index = build_index(entries)
        times.append(time.perf_counter() - started)
    cpu_started = time.thread_time()
    build_index(entries)
    cpu_seconds = time.thread_time() - cpu_started
    gc.collect()
    tracemalloc.start()
    index = build_index(entries)
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return index, min(times), cpu_seconds, current / 2**20


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(pct / 100 * len(ordered)) - 1))]


def rss_mib() -> float:
    """The process's resident memory now (not its peak), in MiB."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def evaluate(index: Index, queries: list[dict], method: str) -> dict:
    """recall@1: the first result is an expected tool. recall@5: the share of the expected tools in the top
    five (of at most five), averaged over queries; for one expected tool, whether it is there. MRR@10: of
    the first expected tool. all@5: every expected tool in the top five, over the multi-tool queries."""
    hits1 = 0
    found5 = 0.0
    reciprocal = 0.0
    multi = multi_all = 0
    latencies = []
    cpu = []
    for item in queries:
        expected = {name.lower() for name in item["expected"]}
        started, started_cpu = time.perf_counter(), time.thread_time()
        try:
            results = index.search(item["query"], method, 10)
        except ToolError:  # a natural-language query is often not a valid regex: a miss
            results = []
        latencies.append((time.perf_counter() - started) * 1000)
        cpu.append((time.thread_time() - started_cpu) * 1000)
        ranked = [hit.doc.name.lower() for hit in results]
        rank = next((i + 1 for i, name in enumerate(ranked) if name in expected), None)
        if rank == 1:
            hits1 += 1
        top5 = expected & set(ranked[:5])
        found5 += len(top5) / min(len(expected), 5)
        if len(expected) > 1:
            multi += 1
            multi_all += top5 == expected
        if rank is not None:
            reciprocal += 1 / rank
    count = len(queries)
    return {
        "recall@1": hits1 / count,
        "recall@5": found5 / count,
        "mrr@10": reciprocal / count,
        "all@5_multi": multi_all / multi if multi else 0.0,
        "p50_ms": statistics.median(latencies),
        "p95_ms": percentile(latencies, 95),
        # CPU time of the searching thread: what the search costs when the machine is shared.
        "cpu_p50_ms": statistics.median(cpu),
        "cpu_p95_ms": percentile(cpu, 95),
    }


BASE_RSS = [0.0]
SET = ["outside"]


def data_folder(name: str) -> Path:
    return DATA / "outside" if name == "outside" else DATA


class StaticScope:
    """A RegistryScope over fixed entries (the guide needs a scope; no database here)."""

    allow_registration = False
    owner = None

    def __init__(self, entries: list[CatalogEntry]):
        self._entries = entries

    def entries(self) -> list[CatalogEntry]:
        return self._entries

    def fingerprint(self) -> tuple:
        return ("bench", id(self._entries))

    def register(self, tool) -> None:
        raise NotImplementedError


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default=",".join(search.METHODS))
    parser.add_argument("--queries", type=int, default=0, help="Use only the first N queries (0 = all).")
    parser.add_argument("--hybrid-weight", type=float, default=None, help="bm25 share of the hybrid score.")
    parser.add_argument("--tune", action="store_true", help="Tune the hybrid weight on half of the queries.")
    parser.add_argument("--json", help="Also write the figures to this file.")
    parser.add_argument(
        "--set",
        choices=("outside", "own"),
        default="outside",
        help="outside: data/outside (BFCL + NESTFUL, build_outside.py); own: data/ (the issue-5 set).",
    )
    parser.add_argument(
        "--split",
        choices=("held_out", "tune", "all"),
        default="held_out",
        help="Which queries of the outside set to score (the held-out part is the one reported).",
    )
    args = parser.parse_args()
    call_command("migrate", verbosity=0, interactive=False)
    if args.hybrid_weight is not None:
        search.HYBRID_WEIGHT = args.hybrid_weight

    SET[0] = args.set
    folder = data_folder(args.set)
    entries = load_tools(folder / "tools.jsonl")
    queries = [json.loads(line) for line in (folder / "queries.jsonl").read_text().splitlines() if line.strip()]
    all_queries = queries
    if args.set == "outside" and args.split != "all":
        queries = [q for q in queries if q["split"] == args.split]
    if args.queries:
        queries = queries[: args.queries]
    known = {entry.name.lower() for entry in entries}
    missing = sorted({name for q in queries for name in q["expected"] if name.lower() not in known})
    report: dict = {
        "set": args.set,
        "split": args.split,
        "tools": len(entries),
        "queries": len(queries),
        "unknown_expected_names": missing[:20],
    }
    print(
        f"set: {args.set} ({args.split})  tools: {len(entries)}  queries: {len(queries)}  "
        f"expected names not in the set: {len(missing)}"
    )

    index, seconds, cpu_seconds, mib = measure_build(entries)
    gc.collect()
    BASE_RSS[0] = rss_mib()
    big_entries = perturbed(entries, 2000)
    big_index, big_seconds, big_cpu, big_mib = measure_build(big_entries)
    report["build"] = {
        f"{len(entries)}_tools": {
            "seconds": round(seconds, 4),
            "cpu_seconds": round(cpu_seconds, 4),
            "python_mib": round(mib, 1),
        },
        "2000_tools": {
            "seconds": round(big_seconds, 4),
            "cpu_seconds": round(big_cpu, 4),
            "python_mib": round(big_mib, 1),
        },
    }
    print(
        f"index build (bm25/regex): {len(entries)} tools {seconds * 1000:.0f} ms (CPU {cpu_seconds * 1000:.0f} ms), "
        f"{mib:.1f} MiB; 2000 tools {big_seconds * 1000:.0f} ms (CPU {big_cpu * 1000:.0f} ms), {big_mib:.1f} MiB"
    )

    semantic = ("embedding", "hybrid")
    methods = [m for m in args.methods.split(",") if m]
    # Methods without the model first, so that their added RSS is theirs (the model, once loaded, stays).
    methods.sort(key=lambda m: m in semantic)

    report["methods"] = {}
    header = (
        f"\n{'method':<10} {'recall@1':>9} {'recall@5':>9} {'MRR@10':>7} {'all@5':>6} {'p50 ms':>8} {'p95 ms':>8} "
        f"{'cpu p95':>8} {'RSS+ MiB':>9}"
    )
    print(header)
    for method in list(methods):
        if method in semantic and "embedding" not in report["build"]:
            if not embedding.available():  # loads the model: only after the methods that do without it
                print("embedding extra not installed: skipping embedding and hybrid")
                methods = [m for m in methods if m not in semantic]
                args.tune = False
                break
            # The cold embedding build is timed on the 2,000 tools (an empty vector table); the scored set's
            # vectors are then read from the table like a restarted worker's.
            report["build"]["embedding"] = measure_embedding(big_entries, big_index)
            print(header)
        # Query vectors are cached per process: without this, hybrid would reuse embedding's and time no encoding.
        embedding.vector_cache.clear()
        figures = evaluate(index, queries, method)
        # Resident memory this method has added to the process since the index was built (model, vectors).
        figures["added_rss_mib"] = rss_mib() - BASE_RSS[0]
        report["methods"][method] = {key: round(value, 4) for key, value in figures.items()}
        print(
            f"{method:<10} {figures['recall@1']:>9.3f} {figures['recall@5']:>9.3f} {figures['mrr@10']:>7.3f} "
            f"{figures['all@5_multi']:>6.3f} {figures['p50_ms']:>8.2f} {figures['p95_ms']:>8.2f} "
            f"{figures['cpu_p95_ms']:>8.2f} {figures['added_rss_mib']:>9.0f}"
        )

    if "hybrid" in methods:
        embedding.vector_cache.clear()
        big_hybrid = evaluate(big_index, queries, "hybrid")
        report["hybrid_at_2000"] = {key: round(value, 4) for key, value in big_hybrid.items()}
        print(
            f"\nhybrid at 2000 tools: p50 {big_hybrid['p50_ms']:.2f} ms, p95 {big_hybrid['p95_ms']:.2f} ms "
            f"(CPU p95 {big_hybrid['cpu_p95_ms']:.2f} ms)"
        )
    big = evaluate(big_index, queries, "bm25")
    report["bm25_at_2000"] = {key: round(value, 4) for key, value in big.items()}
    print(
        f"\nbm25 at 2000 tools: p50 {big['p50_ms']:.2f} ms, p95 {big['p95_ms']:.2f} ms "
        f"(CPU p95 {big['cpu_p95_ms']:.2f} ms)"
    )

    cold = []
    for _ in range(5):
        search.index_cache.clear()
        cold.append(usage_guide(scope=StaticScope(entries[:200]))["metadata"]["generation_time_ms"])
    scope = StaticScope(entries[:200])
    usage_guide(scope=scope)
    warm = [usage_guide(scope=scope)["metadata"]["generation_time_ms"] for _ in range(20)]
    report["guide_200_tools_ms"] = {
        "cold_p50 (index build + render)": statistics.median(cold),
        "warm_p50": statistics.median(warm),
        "warm_max": max(warm),
    }
    print(
        f"guide for 200 tools: cold (index build + render) p50 {statistics.median(cold):.1f} ms; "
        f"warm p50 {statistics.median(warm):.2f} ms, max {max(warm):.2f} ms"
    )

    if args.tune and embedding.available():
        if args.set == "outside":
            tuning = [q for q in all_queries if q["split"] == "tune"]
            held_out = [q for q in all_queries if q["split"] == "held_out"]
        else:
            tuning, held_out = halves(queries)
        report["hybrid_tuning"] = tune_hybrid(index, tuning, held_out)

    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")


def measure_embedding(entries: list[CatalogEntry], index: Index) -> dict:
    """Model load; the embedding index cold with an empty vector table, then with it filled; and the first
    hybrid search of a second process on the same database."""
    embedding.reset()  # available() loaded it: time a fresh load
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    started = time.perf_counter()
    embedding.encoder()
    model_seconds = time.perf_counter() - started

    embedding.vector_cache.clear()
    started, started_cpu = time.perf_counter(), time.process_time()
    index.vectors()
    empty_seconds, empty_cpu = time.perf_counter() - started, time.process_time() - started_cpu
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    stored = EmbeddingVector.objects.count()

    # A new worker (or a restart): nothing in this process, every vector in the database.
    warm = []
    for _ in range(3):
        embedding.vector_cache.clear()
        gc.collect()
        started, started_cpu = time.perf_counter(), time.process_time()
        fresh = build_index(entries)
        fresh.vectors()
        warm.append((time.perf_counter() - started, time.process_time() - started_cpu))
    warm_seconds, warm_cpu = min(warm)

    probe = json.loads(
        subprocess.run(
            [sys.executable, __file__, "--probe"],
            env={**os.environ, REUSE_DATABASE: "1", "TOOLHUB_BENCH_SET": SET[0]},
            check=True,
            capture_output=True,
            text=True,
        ).stdout.splitlines()[-1]
    )
    figures = {
        "model": embedding.MODEL_ID,
        "model_load_seconds": round(model_seconds, 2),
        "cold_empty_db_seconds": round(empty_seconds, 2),
        "cold_empty_db_cpu_seconds": round(empty_cpu, 2),
        "vectors_stored": stored,
        "cold_warm_db_seconds": round(warm_seconds, 3),
        "cold_warm_db_cpu_seconds": round(warm_cpu, 3),
        "second_process_first_hybrid": probe,
        "vectors_mib": round(index.vectors().nbytes / 2**20, 2),
        "peak_rss_growth_mib": round(rss_after - rss_before, 1),
    }
    print(
        f"embedding index, {len(entries)} tools ({DATABASE.label}): model load {model_seconds:.1f} s; "
        f"cold with an empty vector table {empty_seconds:.1f} s (CPU {empty_cpu:.1f} s, {stored} vectors stored); "
        f"cold with the table filled {warm_seconds * 1000:.0f} ms (CPU {warm_cpu * 1000:.0f} ms, bm25 build "
        f"included); vectors {index.vectors().nbytes / 2**20:.1f} MiB, peak RSS +{rss_after - rss_before:.0f} MiB"
    )
    print(
        f"second process, first hybrid search: {probe['first_search_seconds'] * 1000:.0f} ms "
        f"(model load {probe['model_load_seconds'] * 1000:.0f} ms, index + stored vectors "
        f"{probe['index_seconds'] * 1000:.0f} ms, query {probe['query_seconds'] * 1000:.0f} ms; "
        f"{probe['texts_embedded']} texts embedded); process start to answer {probe['process_seconds']:.1f} s"
    )
    return figures


def probe() -> None:
    """The second process: its first hybrid search over the catalogue, phase by phase, as one JSON line."""
    entries = load_tools(data_folder(os.environ.get("TOOLHUB_BENCH_SET", "outside")) / "tools.jsonl")
    texts: list[int] = []
    started = time.perf_counter()
    loaded = embedding.encoder()
    model_seconds = time.perf_counter() - started
    original = loaded.encode
    loaded.encode = lambda batch: texts.append(len(batch)) or original(batch)
    index_started = time.perf_counter()
    index = build_index(entries)
    index.vectors()
    query_started = time.perf_counter()
    hits = index.search(PROBE_QUERY, "hybrid", 5)
    done = time.perf_counter()
    print(
        json.dumps(
            {
                "first_search_seconds": round(done - started, 3),
                "model_load_seconds": round(model_seconds, 3),
                "index_seconds": round(query_started - index_started, 3),
                "query_seconds": round(done - query_started, 3),
                "texts_embedded": sum(texts),
                "process_seconds": round(done - PROCESS_STARTED, 2),
                "top": hits[0].doc.name if hits else None,
            }
        )
    )


def halves(queries: list[dict]) -> tuple[list[dict], list[dict]]:
    """Two seeded halves of the own set (it has no fixed split)."""
    rng = random.Random(5)
    order = list(range(len(queries)))
    rng.shuffle(order)
    half = len(order) // 2
    return [queries[i] for i in sorted(order[:half])], [queries[i] for i in sorted(order[half:])]


def tune_hybrid(index: Index, tuning: list[dict], held_out: list[dict]) -> dict:
    """The hybrid weight with the best MRR@10 on the tuning queries, reported on the held-out ones."""
    chosen_before = search.HYBRID_WEIGHT
    grid = [round(step * 0.05, 2) for step in range(21)]
    rows = []
    print(f"\nhybrid weight (bm25 share), tuned on {len(tuning)} queries, held out {len(held_out)}:")
    print(f"{'weight':>6} {'tune r@1':>9} {'tune r@5':>9} {'tune MRR':>9}")
    for weight in grid:
        search.HYBRID_WEIGHT = weight
        figures = evaluate(index, tuning, "hybrid")
        rows.append((weight, figures))
        print(f"{weight:>6.2f} {figures['recall@1']:>9.3f} {figures['recall@5']:>9.3f} {figures['mrr@10']:>9.3f}")
    best_weight, best = max(rows, key=lambda row: (row[1]["mrr@10"], row[1]["recall@5"], -abs(row[0] - 0.5)))
    report: dict = {"tuning_queries": len(tuning), "held_out_queries": len(held_out), "grid": {}}
    for weight, figures in rows:
        report["grid"][str(weight)] = {key: round(figures[key], 4) for key in ("recall@1", "recall@5", "mrr@10")}
    candidates = {"chosen": best_weight, "in code": chosen_before}
    if best_weight == chosen_before:
        candidates.pop("in code")
    for label, weight in candidates.items():
        search.HYBRID_WEIGHT = weight
        held = evaluate(index, held_out, "hybrid")
        report[label] = {
            "weight": weight,
            "held_out": {key: round(held[key], 4) for key in ("recall@1", "recall@5", "mrr@10")},
        }
        print(
            f"{label} weight {weight:.2f} on the held-out half: recall@1 {held['recall@1']:.3f}, "
            f"recall@5 {held['recall@5']:.3f}, MRR@10 {held['mrr@10']:.3f}"
        )
    search.HYBRID_WEIGHT = chosen_before
    return report


if __name__ == "__main__":
    if "--probe" in sys.argv:
        probe()
    else:
        main()
