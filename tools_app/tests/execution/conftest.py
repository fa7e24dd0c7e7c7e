"""Fixtures of the execution tests."""

import pytest

from tools_app.data_access.sql import store

# A directory block of 4 positions' gaps (a real one holds 1,024): a few records span many blocks.
SMALL_BLOCK_SPAN = 4 * store.POSITION_GAP


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(store, "BLOCK_SPAN", SMALL_BLOCK_SPAN)
    return SMALL_BLOCK_SPAN
