"""THE per-process cache mechanism: every cache of toolhub is an LruCache made here.

SPEC §1 allows a per-process cache only when a change made through any worker is seen by every worker on
its next request. So every key holds the version of what it caches, read from the database by the request
itself: a table's `version`, a tool's `updated_at`, a registry scope's fingerprint (count and latest edit
of its tools), a text's hash. A change makes a new key; an old entry is never served again and ages out.
(The one exception is the auth hint of mcp_app.auth: a hint only, re-checked by the request's own query.)

Why not Django's cache framework: the values are live Python objects (parsed documents of tens of MB,
search indexes, model rows) that a shared backend would pickle on every read, and the local-memory
backend pickles too. What is shared between workers is the database; these caches only save parsing and
building in one process.

Each cache is bounded by entries, or by a weight (bytes), evicting the least recently used; all are
thread-safe; `clear_all()` empties every one (tests, and after a restore).
"""

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Generic, TypeVar

__all__ = ["LruCache", "caches", "clear_all"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

# Every live cache; a cache made for a while (a test, a worker simulated in one process) leaves with it.
_registry: "weakref.WeakSet[LruCache]" = weakref.WeakSet()


class LruCache(Generic[K, V]):
    """A bounded, thread-safe LRU map. `capacity`: most entries kept; `max_weight` and `weigh`: most total
    weight kept (entries heavier than `max_entry_weight` are not kept at all). Each bound may be a callable,
    read on every put (e.g. a setting)."""

    def __init__(
        self,
        name: str,
        *,
        capacity: int | Callable[[], int] | None = None,
        max_weight: int | Callable[[], int] | None = None,
        max_entry_weight: int | Callable[[], int] | None = None,
        weigh: Callable[[V], int] | None = None,
    ) -> None:
        self.name = name
        self._capacity = capacity
        self._max_weight = max_weight
        self._max_entry_weight = max_entry_weight
        self._weigh = weigh
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()
        _registry.add(self)

    @property
    def capacity(self) -> int | None:
        return _bound(self._capacity)

    @property
    def max_weight(self) -> int | None:
        return _bound(self._max_weight)

    def get(self, key: K) -> V | None:
        # `in` and a subscript, not dict.get: no call for a miss, the common answer of several caches per call.
        entries = self._entries
        with self._lock:
            if key not in entries:
                return None
            entries.move_to_end(key)
            return entries[key]

    def put(self, key: K, value: V, *, unless: Callable[[V], bool] | None = None) -> V:
        """Store `value` under `key` and return it; with `unless`, keep (and return) the current value when
        `unless(current)` is true, atomically (e.g. a newer version stored by another thread)."""
        weight = self._weigh(value) if self._weigh is not None else 0
        max_entry_weight = _bound(self._max_entry_weight)
        if max_entry_weight is not None and weight > max_entry_weight:
            return value
        with self._lock:
            current = self._entries.get(key)
            if current is not None and unless is not None and unless(current):
                return current
            self._pop(key)
            self._entries[key] = value
            self._weight += weight
            self._evict()
        return value

    def put_many(self, items: Iterable[tuple[K, V]]) -> None:
        for key, value in items:
            self.put(key, value)

    def pop(self, key: K) -> V | None:
        with self._lock:
            return self._pop(key)

    def discard_where(self, predicate: Callable[[K, V], bool]) -> None:
        with self._lock:
            for key in [key for key, value in self._entries.items() if predicate(key, value)]:
                self._pop(key)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._weight = 0

    def keys(self) -> Iterator[K]:
        with self._lock:
            return iter(list(self._entries))

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._entries

    @property
    def weight(self) -> int:
        return self._weight

    def _pop(self, key: K) -> V | None:
        value = self._entries.pop(key, None)
        if value is not None and self._weigh is not None:
            self._weight -= self._weigh(value)
        return value

    def _evict(self) -> None:
        capacity, max_weight = self.capacity, self.max_weight
        while self._entries and (
            (capacity is not None and len(self._entries) > capacity)
            or (max_weight is not None and self._weight > max_weight)
        ):
            _, value = self._entries.popitem(last=False)
            if self._weigh is not None:
                self._weight -= self._weigh(value)


def _bound(bound: int | Callable[[], int] | None) -> int | None:
    return bound() if callable(bound) else bound


def caches() -> list[LruCache]:
    """Every live cache."""
    return list(_registry)


def clear_all() -> None:
    for cache in caches():
        cache.clear()
