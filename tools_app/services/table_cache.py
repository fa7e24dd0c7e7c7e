"""Per-process cache of parsed table data, keyed by (table id, version).

SPEC §1 allows per-process caches only when every worker sees every change on its next request:
each read first asks the database for the table's current version (one indexed primary-key lookup)
and uses the cached document only when the versions match. Cached documents are never mutated:
writes build new containers along the changed path (pointer.replace), so a reader in another
thread never sees a half-applied write.
"""

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tools_app.kernel.caches import LruCache
from tools_app.kernel.limits import DATA_CACHE_TABLES


@dataclass
class CachedTable:
    version: int
    data: Any
    # Results derived from this exact version (e.g. get_data_schema per mount).
    derived: dict[Any, Any] = field(default_factory=dict)


class TableCache:
    """Parsed documents by table id, each with its version (one entry per table: an old version is replaced,
    not kept beside the new one, since a document can be tens of MB)."""

    def __init__(self) -> None:
        self._store: LruCache[int, CachedTable] = LruCache("tables", capacity=DATA_CACHE_TABLES.get)

    @property
    def capacity(self) -> int:
        return self._store.capacity or 0

    def get(self, table_id: int, version: int) -> CachedTable | None:
        entry = self._store.get(table_id)
        return entry if entry is not None and entry.version == version else None

    def held(self, table_id: int) -> CachedTable | None:
        """The version of the table this process holds, whatever it is (a writer catches it up through the log)."""
        return self._store.get(table_id)

    def put(self, table_id: int, version: int, data: Any) -> CachedTable:
        # A newer version stored first (by a later write in another thread) is kept.
        return self._store.put(table_id, CachedTable(version=version, data=data), unless=lambda c: c.version > version)

    def discard(self, table_id: int) -> None:
        self._store.pop(table_id)

    def clear(self) -> None:
        self._store.clear()


table_cache = TableCache()


_pause_lock = threading.Lock()
_pause_depth = 0
_collector_was_enabled = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a table document is parsed.

    Parsing 30 MB of JSON allocates millions of containers, and the collector would walk the
    growing heap again and again: about half of the parse time (bench/data_access.py). JSON values
    hold no reference cycles, so reference counting frees them all the same. Nested and concurrent
    pauses share one counter; the collector is enabled again when the last one ends.
    """
    global _pause_depth, _collector_was_enabled
    with _pause_lock:
        if _pause_depth == 0:
            _collector_was_enabled = gc.isenabled()
            gc.disable()
        _pause_depth += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pause_depth -= 1
            if _pause_depth == 0 and _collector_was_enabled:
                gc.enable()
