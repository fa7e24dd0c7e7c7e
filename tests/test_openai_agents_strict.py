"""OpenAI Agents' strict conversion, run by the SDK itself against a live server.

The OpenAI Agents SDK (`openai-agents`, pinned in requirements-dev.txt) connects over a real socket with its
own Streamable HTTP client (`agents.mcp.MCPServerStreamableHttp`), lists the tools and converts each with
`MCPUtil.to_function_tool(..., convert_schemas_to_strict=True)`, as an `Agent(mcp_config=
{"convert_schemas_to_strict": True})` does. That conversion runs `agents.strict_schema.
ensure_strict_json_schema` and, when it raises, keeps the tool non-strict and logs why: every tool of the
generated tables, and the search-mode proxy `call_tool`, must come out strict with nothing logged.
"""

import importlib.util
import json
import logging
import os

import pytest
from asgiref.sync import async_to_sync

from tests.live_server import Uvicorn, run_python, server_database

pytestmark = pytest.mark.e2e

if importlib.util.find_spec("agents") is None:
    # In CI the SDK must be there (requirements-dev.txt): fail rather than skip.
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        raise ImportError("openai-agents is missing: install requirements-dev.txt (scripts/bootstrap.sh --test)")
    pytest.skip("openai-agents is installed by requirements-dev.txt", allow_module_level=True)

SEED = """
from django.contrib.auth import get_user_model
from tools_app import services
from tools_app.toolsets import generate_tools

owner = get_user_model().objects.create_user("strict", password="unused-password-1")
shop = services.instance_create(owner=owner, slug="shop", name="Shop")
search = services.instance_create(owner=owner, slug="search", name="Search")
tables = {
    "orders": [
        {"id": 1, "customer": "ada", "status": "paid", "total": 10.5},
        {"id": 2, "customer": "alan", "status": "shipped", "total": 20},
    ],
    "catalog": {"KB-01": {"name": "keyboard", "price": 99}, "MS-02": {"name": "mouse", "price": 25}},
    "people": [
        {"id": "p1", "name": "Ada", "address": {"city": "London", "zip": None}, "tags": ["math"], "age": 36},
        {"id": "p2", "name": "Alan", "address": {"city": "Wilmslow", "zip": "SK9"}, "tags": [], "nick": None},
    ],
    # No key field (a repeated value): the writes cannot take closed records.
    "notes": [{"text": "a", "meta": {}}, {"text": "a", "meta": {"by": "x"}}],
    # Objects nested deeper than the generator closes, and a field holding an object or a string.
    "deep": [{"id": 1, "a": {"b": {"c": {"d": {"e": {"f": 1}}}}}, "mixed": {"x": 1}}, {"id": 2, "mixed": "y"}],
}
for name, data in tables.items():
    table = services.table_create(owner=owner, name=name, data=data)
    generate_tools(owner=owner, table=table, writes=True, mcp_instance=shop)
    generate_tools(owner=owner, table=table, writes=True, mcp_instance=search, name_prefix=name + "_s")
services.instance_update(instance=search, discovery="search")
print(json.dumps({
    "shop": services.api_key_issue(mcp_instance=shop, label="agents")[1],
    "search": services.api_key_issue(mcp_instance=search, label="agents")[1],
}))
"""


@pytest.fixture(scope="module")
def agents_server(tmp_path_factory):
    with server_database("agents", tmp_path_factory.mktemp("agents"), secret="agents-strict") as env:
        keys = json.loads(run_python(env, SEED))
        with Uvicorn(env) as server:
            yield {"base": server.base, "keys": keys}


class Collected(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def converted(url: str, key: str) -> tuple[dict[str, bool], list[str]]:
    """{tool name: strict} as the SDK converts the listed tools, and why a conversion fell back (the SDK's own
    error of ensure_strict_json_schema, which its log leaves out when tool data is not logged)."""
    from agents.mcp import MCPServerStreamableHttp, MCPUtil
    from agents.strict_schema import ensure_strict_json_schema

    sdk_logger = logging.getLogger("openai.agents")
    collected = Collected()
    sdk_logger.addHandler(collected)
    previous = sdk_logger.level
    sdk_logger.setLevel(logging.DEBUG)

    reasons: list[str] = []

    async def run() -> dict[str, bool]:
        params = {"url": url, "headers": {"Authorization": f"Bearer {key}"}, "timeout": 30}
        async with MCPServerStreamableHttp(params=params, name="toolhub", cache_tools_list=False) as server:
            tools = await server.list_tools()
            functions = [MCPUtil.to_function_tool(tool, server, convert_schemas_to_strict=True) for tool in tools]
            for tool, function in zip(tools, functions, strict=True):
                if not function.strict_json_schema:
                    try:
                        ensure_strict_json_schema(json.loads(json.dumps(tool.input_schema)), _reject_open_objects=True)
                    except Exception as exc:
                        reasons.append(f"{tool.name}: {exc} in {json.dumps(tool.input_schema)}")
            return {function.name: function.strict_json_schema for function in functions}

    try:
        strict = async_to_sync(run)()
        return strict, reasons + [m for m in collected.messages if "strict" in m]
    finally:
        sdk_logger.removeHandler(collected)
        sdk_logger.setLevel(previous)


def test_every_generated_tool_converts_strict_with_the_sdk(agents_server):
    # when
    strict, logged = converted(f"{agents_server['base']}/mcp/shop/", agents_server["keys"]["shop"])

    # then: every tool of the 5 tables strict (notes, without a key field, has no select, update or delete)
    assert logged == []
    expected = [
        f"{table}_{kind}"
        for table in ("catalog", "deep", "notes", "orders", "people")
        for kind in ("all", "create", "delete", "preview", "query", "schema", "select", "update")
        if table != "notes" or kind not in ("delete", "select", "update")
    ]
    assert strict == dict.fromkeys(expected, True)


def test_the_search_mode_proxy_converts_strict_with_the_sdk(agents_server):
    # when
    strict, logged = converted(f"{agents_server['base']}/mcp/search/", agents_server["keys"]["search"])

    # then
    assert logged == []
    assert strict == {"call_tool": True}
