"""Fixtures shared by the MCP tests."""

import pytest

from mcp_app.auth import auth_cache
from tools_app.execution import pipeline as calls
from tools_app.registry.search import index_cache


def _clear_process_state() -> None:
    auth_cache.clear()
    calls.key_touches.clear()
    index_cache.clear()
    calls.result_cache.clear()
    calls.tool_cache.clear()


@pytest.fixture(autouse=True)
def _fresh_process_state():
    """Each test starts and ends with empty per-process caches."""
    _clear_process_state()
    yield
    _clear_process_state()


@pytest.fixture
def served(owner, table, make_tool, instance, bind, make_api_key):
    """An instance 'shop' with one query tool (orders_query) and one key; a test module may define its own."""
    tool = make_tool(owner, table, name="orders_query")
    bind(instance, tool)
    api_key, plaintext = make_api_key(instance)
    return {"instance": instance, "tool": tool, "api_key": api_key, "key": plaintext}
