"""The client configuration snippets of docs/mcp-clients.md, each used by a real MCP client against a live server.

Each snippet is read from the page, the demo URL and key are replaced by a live server's, and the official
Python SDK connects over a real socket with exactly the URL and Authorization header that client would
send; the Python snippet is run as written. docs/mcp-clients.md ("How these snippets are tested") says what
this checks and what it cannot (the desktop applications themselves are not run here).
"""

import json
import re
import shlex
import subprocess
import tomllib

import httpx2
import pytest
from asgiref.sync import async_to_sync
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from tests.live_server import PYTHON, ROOT, Uvicorn, server_database

pytestmark = pytest.mark.e2e

DOC = ROOT / "docs" / "mcp-clients.md"
DEMO_BASE = "http://127.0.0.1:8000"
PLACEHOLDER = "thk_your_key_here"


def snippet(title: str) -> tuple[str, str]:
    """(language, text) of the first fenced block under the `## <title>` heading."""
    text = DOC.read_text()
    section = text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```(\w+)\n(.*?)\n```", section, re.DOTALL)
    assert match is not None, f"no code block under {title}"
    return match.group(1), match.group(2)


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """A server with the quick start's demo (seed_demo), and its key."""
    with server_database("b_snippets", tmp_path_factory.mktemp("snippets"), secret="snippets") as env:
        env = {**env, "TOOLHUB_DEV": "true"}
        seeded = subprocess.run(
            [PYTHON, "manage.py", "seed_demo", "--key-file", str(tmp_path_factory.mktemp("k") / ".demo-key")],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        key = re.search(r"^API key \(.*\): (thk_\S+)$", seeded.stdout, re.MULTILINE).group(1)
        with Uvicorn(env) as server:
            yield {"base": server.base, "key": key}


def localise(text: str, live: dict) -> str:
    return text.replace(DEMO_BASE, live["base"]).replace(PLACEHOLDER, live["key"])


def connect_and_query(url: str, headers: dict[str, str]) -> tuple[list[str], object]:
    async def run():
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
            async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
                listed = await client.list_tools()
                called = await client.call_tool("orders_query", {"query": "length(@)"})
                return [tool.name for tool in listed.tools], called.structured_content

    return async_to_sync(run)()


def assert_works(url: str, headers: dict[str, str], live: dict) -> None:
    assert url == f"{live['base']}/mcp/demo/"
    names, result = connect_and_query(url, headers)
    assert "orders_query" in names
    assert result == {"result": 5}


def test_claude_desktop(live):
    """mcp-remote's arguments: the URL, and `--header Name:value` with ${VAR} taken from the server's env."""
    language, text = snippet("Claude Desktop")
    server = json.loads(localise(text, live))["mcpServers"]["toolhub-demo"]
    assert language == "json"
    assert (server["command"], server["args"][:2]) == ("npx", ["-y", "mcp-remote"])
    url, flag, header = server["args"][2:]
    assert flag == "--header"
    name, value = re.sub(r"\$\{(\w+)\}", lambda m: server["env"][m.group(1)], header).split(":", 1)
    assert_works(url, {name: value}, live)


def test_cursor(live):
    language, text = snippet("Cursor")
    server = json.loads(localise(text, live))["mcpServers"]["toolhub-demo"]
    assert language == "json"
    assert_works(server["url"], server["headers"], live)


def test_vs_code(live):
    """VS Code asks for ${input:toolhub-key} once (a promptString input declared in the same file)."""
    language, text = snippet("VS Code (GitHub Copilot agent mode)")
    config = json.loads(localise(text, live))
    server = config["servers"]["toolhub-demo"]
    inputs = {item["id"]: item for item in config["inputs"]}
    assert language == "json"
    assert server["type"] == "http"
    assert (inputs["toolhub-key"]["type"], inputs["toolhub-key"]["password"]) == ("promptString", True)
    headers = {k: v.replace("${input:toolhub-key}", live["key"]) for k, v in server["headers"].items()}
    assert_works(server["url"], headers, live)


def test_claude_code(live):
    """`claude mcp add --transport http NAME URL --header "Name: value"`, as the shell splits it."""
    language, text = snippet("Claude Code")
    words = shlex.split(localise(text, live))
    assert language == "sh"
    assert words[:5] == ["claude", "mcp", "add", "--transport", "http"]
    name, url, flag, header = words[5:]
    assert (name, flag) == ("toolhub-demo", "--header")
    header_name, value = header.split(":", 1)
    assert_works(url, {header_name: value.strip()}, live)


def test_codex(live):
    """Codex's config.toml: url, and bearer_token_env_var naming where the key is (sent as Bearer)."""
    language, text = snippet("Codex")
    server = tomllib.loads(localise(text, live))["mcp_servers"]["toolhub-demo"]
    assert language == "toml"
    environment = {server["bearer_token_env_var"]: live["key"]}
    assert_works(server["url"], {"Authorization": f"Bearer {environment['TOOLHUB_KEY']}"}, live)


def test_python_sdk(live):
    """The Python snippet, run as written (with the live URL and key)."""
    language, text = snippet("Python (the `mcp` SDK)")
    assert language == "python"
    code = localise(text, live) + "\n\nimport asyncio\nasyncio.run(main())\nprint('ok')\n"
    done = subprocess.run([PYTHON, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "ok"
