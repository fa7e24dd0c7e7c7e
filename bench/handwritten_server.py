"""The benchmark's baseline: a hand-written MCP server holding the same 1,000 orders in memory.

`uvicorn --app-dir bench handwritten_server:app` serves one tool, `orders_query(query)`, at /mcp, stateless
with JSON responses (the same transport settings as toolhub), built on the SDK's high-level MCPServer.
"""

import os
from typing import Any

import jmespath
from bench_data import rows
from mcp.server import MCPServer

DATA = rows(int(os.environ.get("BENCH_ROWS", "1000")))

server = MCPServer("handwritten-orders")


@server.tool()
def orders_query(query: str) -> Any:
    """Query the orders with a JMESPath expression."""
    return jmespath.search(query, DATA)


app = server.streamable_http_app(stateless_http=True, json_response=True, host="127.0.0.1")
