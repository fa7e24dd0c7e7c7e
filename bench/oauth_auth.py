"""What an OAuth access token costs an MCP call next to an API key, side by side in one run.

A live server (uvicorn, one worker, its own SQLite or PostgreSQL database as the tests make it) serves one
instance; the same tools/call is sent with the instance's API key and with an OAuth access token for it,
alternating, sequentially over one connection each. Prints the median and p90 latency of each and their
ratio. Rate limits are off so that only authentication differs.

    .venv/bin/python bench/oauth_auth.py --calls 300
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx2  # noqa: E402

from tests.live_server import Uvicorn, run_python, seed_mcp, server_database  # noqa: E402

TOKEN = "tho_" + "B" * 43

MAKE_TOKEN = """
from datetime import timedelta
from django.utils import timezone
from django.contrib.auth import get_user_model
from oauth2_provider.models import AccessToken, get_application_model
user = get_user_model().objects.get(username="bench")
app = get_application_model().objects.create(name="bench", client_type="public",
    authorization_grant_type="authorization-code", redirect_uris="http://127.0.0.1:1/cb", client_secret="")
row = AccessToken(user=user, application=app, expires=timezone.now() + timedelta(hours=1), scope="tools:all",
    resource=["{base}/mcp/oauthbench/"])
row._raw_token = "{token}"
row.token = ""
row.save()
print("ok")
"""


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory, server_database("oauthb", Path(directory), secret="b") as env:
        key = seed_mcp(env, slug="oauthbench", rows=100, user="bench")["key"]
        server = Uvicorn({**env, "TOOLHUB_RATE_LIMITS_ENABLED": "false"})
        try:
            run_python(env, MAKE_TOKEN.format(base=server.base, token=TOKEN))
            url = f"{server.base}/mcp/oauthbench/"
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
            body["params"] = {"name": "orders_by_id", "arguments": {"keys": [1, 2]}}
            headers = {"content-type": "application/json", "mcp-protocol-version": "2025-11-25"}
            headers["accept"] = "application/json, text/event-stream"
            times: dict[str, list[float]] = {"API key": [], "OAuth token": []}
            with httpx2.Client(timeout=30) as key_http, httpx2.Client(timeout=30) as token_http:
                clients = {"API key": (key_http, key), "OAuth token": (token_http, TOKEN)}
                for round_ in range(args.calls + 20):
                    for name, (http, credential) in clients.items():
                        began = time.perf_counter()
                        answer = http.post(url, json=body, headers={**headers, "authorization": f"Bearer {credential}"})
                        elapsed = (time.perf_counter() - began) * 1000
                        assert answer.status_code == 200, answer.text
                        if round_ >= 20:  # warm-up rounds are not counted
                            times[name].append(elapsed)
        finally:
            server.stop()
    for name, values in times.items():
        print(f"{name:12s} median {statistics.median(values):6.2f} ms  p90 {percentile(values, 0.9):6.2f} ms")
    ratio = statistics.median(times["OAuth token"]) / statistics.median(times["API key"])
    print(f"OAuth / API key median ratio: {ratio:.2f} ({args.calls} calls each, alternating)")


if __name__ == "__main__":
    main()
