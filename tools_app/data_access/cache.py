"""Per-process cache of parsed table data, keyed by (table id, version).

SPEC §1 allows per-process caches only when every worker sees every change on its next request:
each read first asks the database for the table's current version (one indexed primary-key lookup)
and uses the cached document only when the versions match. Cached documents are never mutated:
writes build new containers along the changed path (pointer.replace), so a reader in another
thread never sees a half-applied write.
"""

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings


@dataclass
class CachedTable:
    version: int
    data: Any
    # Results derived from this exact version (e.g. get_data_schema per mount).
    derived: dict[Any, Any] = field(default_factory=dict)


class TableCache:
    def __init__(self) -> None:
        self._entries: OrderedDict[int, CachedTable] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def capacity(self) -> int:
        return int(getattr(settings, "TOOLHUB_DATA_CACHE_TABLES", 16))

    def get(self, table_id: int, version: int) -> CachedTable | None:
        with self._lock:
            entry = self._entries.get(table_id)
            if entry is None or entry.version != version:
                return None
            self._entries.move_to_end(table_id)
            return entry

    def put(self, table_id: int, version: int, data: Any) -> CachedTable:
        entry = CachedTable(version=version, data=data)
        with self._lock:
            current = self._entries.get(table_id)
            if current is not None and current.version > version:
                return current  # a newer version arrived first; keep it
            self._entries[table_id] = entry
            self._entries.move_to_end(table_id)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)
        return entry

    def discard(self, table_id: int) -> None:
        with self._lock:
            self._entries.pop(table_id, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


table_cache = TableCache()
