"""Fixtures shared by the MCP tests (the per-process caches are emptied around every test by the root conftest)."""

import pytest


@pytest.fixture
def served(owner, table, make_tool, instance, bind, make_api_key):
    """An instance 'shop' with one query tool (orders_query) and one key; a test module may define its own."""
    tool = make_tool(owner, table, name="orders_query")
    bind(instance, tool)
    api_key, plaintext = make_api_key(instance)
    return {"instance": instance, "tool": tool, "api_key": api_key, "key": plaintext}
