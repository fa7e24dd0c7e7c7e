"""Drive the MCP endpoint in process: raw JSON-RPC over httpx2's ASGITransport, or the SDK's own client.

Tests are sync functions; each call runs its coroutine through async_to_sync. By default the endpoint's
database hops use Django's shared thread (db_threads=0), which is then the test's own thread, so the
handlers see the test's transaction. `Harness(db_threads=N)` uses the production thread pool instead:
each pool thread has its own connection and sees only committed data (tests with `transactional_db`).
"""

import json
from typing import Any

import httpx2
from asgiref.sync import async_to_sync
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CLIENT_CAPABILITIES_META_KEY, PROTOCOL_VERSION_META_KEY

from mcp_app.transport import McpEndpoint

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
ERAS = (LEGACY, MODERN)
BASE_URL = "http://localhost"


def rpc_body(method: str, params: dict | None = None, *, era: str = LEGACY, request_id: int = 1) -> dict:
    params = dict(params or {})
    if era == MODERN:
        params["_meta"] = {
            **params.get("_meta", {}),
            PROTOCOL_VERSION_META_KEY: MODERN,
            CLIENT_CAPABILITIES_META_KEY: {},
        }
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params:
        body["params"] = params
    return body


def rpc_headers(body: dict, *, era: str = LEGACY, key: str | None = None) -> dict[str, str]:
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": era,
    }
    if era == MODERN:
        headers["mcp-method"] = body.get("method", "")
        params = body.get("params") or {}
        name = params.get("uri") if body.get("method") == "resources/read" else params.get("name")
        if isinstance(name, str):
            headers["mcp-name"] = name
    if key is not None:
        headers["authorization"] = f"Bearer {key}"
    return headers


class Harness:
    """One endpoint (its own SDK session manager), started for each request or client session."""

    def __init__(self, *, db_threads: int = 0) -> None:
        self.endpoint = McpEndpoint(db_threads=db_threads)

    async def _request(self, method: str, path: str, content: bytes, headers: dict[str, str]) -> httpx2.Response:
        async with self.endpoint.running():
            transport = httpx2.ASGITransport(app=self.endpoint)
            async with httpx2.AsyncClient(transport=transport, base_url=BASE_URL) as http:
                return await http.request(method, path, content=content, headers=headers)

    def http(
        self, method: str, path: str, *, content: bytes = b"", headers: dict[str, str] | None = None
    ) -> httpx2.Response:
        return async_to_sync(self._request)(method, path, content, headers or {})

    def post(
        self,
        slug: str,
        body: dict,
        *,
        key: str | None = None,
        era: str = LEGACY,
        headers: dict[str, str] | None = None,
        path: str | None = None,
    ) -> httpx2.Response:
        all_headers = rpc_headers(body, era=era, key=key)
        all_headers.update(headers or {})
        return self.http("POST", path or f"/mcp/{slug}/", content=json.dumps(body).encode(), headers=all_headers)

    def rpc(self, slug: str, key: str, method: str, params: dict | None = None, *, era: str = LEGACY) -> dict[str, Any]:
        """A JSON-RPC exchange that must succeed at the HTTP level; returns the decoded reply."""
        response = self.post(slug, rpc_body(method, params, era=era), key=key, era=era)
        assert response.headers["content-type"].startswith("application/json"), response.text
        return response.json()

    def call(self, slug: str, key: str, name: str, arguments: dict | None = None, *, era: str = LEGACY) -> dict:
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        return self.rpc(slug, key, "tools/call", params, era=era)

    def with_client(self, slug: str, key: str, scenario, *, mode: str = "legacy", headers: dict | None = None):
        """Run `await scenario(client)` with the SDK's Client connected through the ASGI app."""

        async def run():
            async with self.endpoint.running():
                http = httpx2.AsyncClient(
                    transport=httpx2.ASGITransport(app=self.endpoint),
                    headers={"authorization": f"Bearer {key}", **(headers or {})},
                )
                async with http:
                    transport = streamable_http_client(f"{BASE_URL}/mcp/{slug}/", http_client=http)
                    async with Client(transport, mode=mode, cache=None) as client:
                        return await scenario(client)

        return async_to_sync(run)()
