"""Fixtures shared by the MCP tests (the per-process caches are emptied around every test by the root conftest;
`served`, an instance with one tool and a key, is the root conftest's)."""

import pytest

from mcp_app.tests.mcp_harness import Harness


@pytest.fixture
def key(instance, make_api_key):
    """The plaintext of a new key of the instance 'shop'."""
    return make_api_key(instance)[1]


@pytest.fixture
def harness():
    """The MCP endpoint in process (mcp_harness.Harness, default settings)."""
    return Harness()
