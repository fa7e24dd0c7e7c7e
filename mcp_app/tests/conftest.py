"""Fixtures shared by the MCP tests."""

import pytest

from mcp_app import server as mcp_server
from mcp_app.auth import auth_cache, key_touches
from mcp_app.recording import recorder
from tools_app.registry.search import index_cache


def _clear_process_state() -> None:
    auth_cache.clear()
    key_touches.clear()
    recorder.clear()
    index_cache.clear()
    mcp_server.result_cache.clear()
    mcp_server.tool_cache.clear()


@pytest.fixture(autouse=True)
def _fresh_process_state():
    """Each test starts and ends with empty per-process caches and an empty call queue."""
    _clear_process_state()
    yield
    _clear_process_state()
