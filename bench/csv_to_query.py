"""From a 10,000-row CSV to an MCP client calling `query` on it: the README's walk-through, timed.

Starts a server as scripts/start.sh does (a fresh SQLite database, the demo seeded, uvicorn on a free port),
then runs the walk-through's steps over HTTP, exactly as the README's commands do: log in for an API token,
import the CSV, find the demo instance, generate the tools bound to it, and call `sales_query` with the
official MCP SDK client using the demo key. Prints each step's time and the total (start-up excluded).

    .venv/bin/python bench/csv_to_query.py [--rows 10000] [--runs 3]
"""

import argparse
import asyncio
import io
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx2  # noqa: E402
from mcp.client import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from tests.live_server import PYTHON, Uvicorn, server_database  # noqa: E402

STATUSES = ["paid", "new", "shipped", "cancelled"]


def sales_csv(rows: int) -> bytes:
    out = io.StringIO()
    out.write("id,customer,status,total,country\n")
    for n in range(1, rows + 1):
        out.write(f"{n},customer {n % 997},{STATUSES[n % 4]},{(n * 37) % 1000 + 0.5},{['FR', 'DE', 'US'][n % 3]}\n")
    return out.getvalue().encode()


async def walk_through(base: str, key: str, csv: bytes, name: str) -> dict[str, float]:
    times: dict[str, float] = {}
    async with httpx2.AsyncClient(base_url=base, timeout=120) as http:
        start = time.perf_counter()
        token = (await http.post("/api/auth/token/", json={"username": "demo", "password": "demo-password"})).json()[
            "token"
        ]
        auth = {"Authorization": f"Token {token}"}
        times["token"] = time.perf_counter() - start

        mark = time.perf_counter()
        imported = await http.post(
            "/api/tables/import/", headers=auth, files={"file": ("sales.csv", csv)}, data={"name": name}
        )
        assert imported.status_code == 201, imported.text
        table = imported.json()["id"]
        times["import"] = time.perf_counter() - mark

        mark = time.perf_counter()
        instances = (await http.get("/api/mcp-instances/", headers=auth)).json()["results"]
        instance = next(item["id"] for item in instances if item["slug"] == "demo")
        generated = await http.post(
            f"/api/tables/{table}/generate-tools/", headers=auth, json={"mcp_instance": instance}
        )
        assert generated.status_code == 201, generated.text
        times["generate"] = time.perf_counter() - mark

    mark = time.perf_counter()
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=120) as http:
        async with Client(streamable_http_client(f"{base}/mcp/demo/", http_client=http)) as client:
            result = await client.call_tool(f"{name}_query", {"query": "[?status=='paid'] | length(@)"})
    assert result.structured_content == {"result": len(csv.splitlines()[1:]) // 4}, result
    times["mcp_query"] = time.perf_counter() - mark
    times["total"] = time.perf_counter() - start
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    csv = sales_csv(args.rows)
    with tempfile.TemporaryDirectory() as directory, server_database("b_csv", Path(directory), secret="bench") as env:
        env = {**env, "TOOLHUB_DEV": "true"}
        seeded = subprocess.run(
            [PYTHON, "manage.py", "seed_demo", "--key-file", os.path.join(directory, ".demo-key")],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        key = re.search(r"^API key \(.*\): (thk_\S+)$", seeded.stdout, re.MULTILINE).group(1)
        server = Uvicorn(env)
        try:
            runs = [asyncio.run(walk_through(server.base, key, csv, f"sales{n}")) for n in range(args.runs)]
        finally:
            server.stop()
    print(f"CSV: {args.rows} rows, {len(csv):,} bytes; {args.runs} runs on a fresh SQLite database")
    for step in runs[0]:
        values = [run[step] for run in runs]
        print(
            f"  {step:10s} median {statistics.median(values) * 1000:8.0f} ms   runs: "
            + ", ".join(f"{v:.2f} s" for v in values)
        )
    print(json.dumps({step: round(statistics.median(run[step] for run in runs), 3) for step in runs[0]}))


if __name__ == "__main__":
    main()
