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
from tools_app.kernel.limits import TABLE_CACHE_BYTES

# What an entry weighs beyond its document's JSON text: the entry itself, its key and the parsed containers of a
# small document (about 660 bytes for a 23-byte document, measured with tracemalloc), so that a process caching
# thousands of small tables is bounded too.
ENTRY_BYTES = 1024


@dataclass
class CachedTable:
    version: int
    data: Any
    # The document's JSON text in bytes: the text it was parsed from, or that size moved by the patches applied
    # to it since (table_log). What the cache weighs it by, with ENTRY_BYTES.
    size: int
    # Results derived from this exact version (e.g. get_data_schema per mount).
    derived: dict[Any, Any] = field(default_factory=dict)

    @property
    def weight(self) -> int:
        return self.size + ENTRY_BYTES


class TableCache:
    """Parsed documents by table id, each with its version (one entry per table: an old version is replaced,
    not kept beside the new one, since a document can be tens of MB).

    Bounded by TOOLHUB_TABLE_CACHE_BYTES, read on every put: the least recently used documents leave until the
    weights of those kept (CachedTable.weight) fit; a document heavier than the whole bound is not kept at all
    (put returns it, uncached, so the read that parsed it is still answered)."""

    def __init__(self) -> None:
        self._store: LruCache[int, CachedTable] = LruCache(
            "tables",
            max_weight=TABLE_CACHE_BYTES.get,
            max_entry_weight=TABLE_CACHE_BYTES.get,
            weigh=lambda entry: entry.weight,
        )

    @property
    def weight(self) -> int:
        """The weight of the documents held now."""
        return self._store.weight

    def table_ids(self) -> list[int]:
        """The tables held now, least recently used first."""
        return list(self._store.keys())

    def get(self, table_id: int, version: int) -> CachedTable | None:
        entry = self._store.get(table_id)
        return entry if entry is not None and entry.version == version else None

    def held(self, table_id: int) -> CachedTable | None:
        """The version of the table this process holds, whatever it is (a writer catches it up through the log)."""
        return self._store.get(table_id)

    def put(self, table_id: int, version: int, data: Any, size: int) -> CachedTable:
        """Keep `data`, the document at `version` whose JSON text is `size` bytes, and return its entry; a newer
        version stored first (by a later write in another thread) is kept, and returned instead."""
        entry = CachedTable(version=version, data=data, size=max(size, 0))
        return self._store.put(table_id, entry, unless=lambda current: current.version > version)

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
