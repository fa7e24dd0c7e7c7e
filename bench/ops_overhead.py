"""What counting a call costs: the pipeline with its metrics on against the same pipeline with the
metrics report switched off, in one process, interleaved.

    .venv/bin/python bench/ops_overhead.py [--calls 3000] [--blocks 30]

A fresh SQLite database (a temporary file) with a 1,000-row table, a query_data tool bound to an MCP instance;
each call resolves its target as tools/call does (selectors.binding_call_target) and runs
tools_app.execution.pipeline.run_tool_call (the result cache answers, so what is left is resolving, recording and the
metrics). Blocks of calls alternate between "metrics on" (as served, multiprocess mode: PROMETHEUS_MULTIPROC_DIR
is set to a temporary directory, the costlier mode) and "metrics off" (calls.call_finished replaced by a
function that does nothing); tracing is off in both. Prints the median time per call of each and their ratio.
bench/mcp_throughput.py --baseline-ref measures the same over HTTP, where the noise of a shared machine is larger.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--blocks", type=int, default=30)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="toolhub-ops-bench-"))
    (workdir / "metrics").mkdir()
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(workdir / "metrics")
    os.environ["DATABASE_URL"] = f"sqlite:///{workdir / 'bench.sqlite3'}"
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-secret")
    os.environ["DJANGO_SETTINGS_MODULE"] = "toolhub.settings"
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        os.environ.pop(name, None)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from tools_app import services
    from tools_app.execution import pipeline as calls
    from tools_app.kernel import telemetry
    from tools_app.models import Surface
    from tools_app.selectors import binding_call_target

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench", password="pw-123456!")
    rows = [{"id": i, "name": f"item {i}", "qty": i % 7} for i in range(1000)]
    table = services.table_create(owner=user, name="orders", data=rows)
    tool = services.tool_create(owner=user, name="orders_query", type="query_data", table=table, description="q")
    instance = services.instance_create(owner=user, name="Bench", slug="bench")
    services.binding_create(mcp_instance=instance, tool=tool)
    api_key, _plaintext = services.api_key_issue(mcp_instance=instance, label="bench")
    arguments = {"query": "[?id==`42`] | [0]"}
    assert not telemetry.tracing_enabled()

    def one_call() -> None:
        target = binding_call_target(instance_id=instance.pk, slug="bench", api_key_id=api_key.pk, name="orders_query")
        caller = calls.Caller(surface=Surface.MCP, user_id=user.pk, api_key_id=api_key.pk)
        outcome = calls.run_tool_call(caller=caller, target=target, name="orders_query", arguments=arguments)
        assert outcome.ok

    real_report = calls.call_finished
    inside = [0.0, 0]

    def reporting(**kwargs) -> None:  # the real report, timed from the inside
        started = time.perf_counter()
        real_report(**kwargs)
        inside[0] += time.perf_counter() - started
        inside[1] += 1

    def nothing(**_kwargs) -> None:
        return None

    per_block = max(1, args.calls // args.blocks)
    for _ in range(200):  # warm: caches, statements, label children
        one_call()
    timings: dict[str, list[float]] = {"on": [], "off": []}
    for block in range(args.blocks * 2):
        mode = ("on", "off")[block % 2] if (block // 2) % 2 == 0 else ("off", "on")[block % 2]
        calls.call_finished = reporting if mode == "on" else nothing
        started = time.perf_counter()
        for _ in range(per_block):
            one_call()
        timings[mode].append((time.perf_counter() - started) / per_block * 1e6)
    calls.call_finished = real_report
    on, off = statistics.median(timings["on"]), statistics.median(timings["off"])
    counted = telemetry.summary()["calls"]
    print(f"run_tool_call on SQLite, {per_block} calls x {args.blocks} blocks each, interleaved; medians per call")
    print(f"metrics on (multiprocess mode): {on:8.1f} us")
    print(f"metrics off:                    {off:8.1f} us")
    print(f"ratio on/off: {on / off:.3f} ({on - off:+.1f} us per call); calls counted by the metrics: {counted}")
    print(f"time inside the metrics report: {inside[0] / inside[1] * 1e6:.1f} us per call (mean of {inside[1]})")


if __name__ == "__main__":
    main()
