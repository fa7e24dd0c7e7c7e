"""tools_app.kernel.caches: the one per-process cache mechanism."""

import pytest

from tools_app.kernel import caches
from tools_app.kernel.caches import LruCache


@pytest.fixture
def make_cache(request):
    """make_cache(**options): an LruCache named after the test."""

    def make(**options):
        return LruCache(f"test-{request.node.name}", **options)

    return make


def test_least_recently_used_entry_goes_first(make_cache):
    """Over its capacity the cache drops the entry read or written longest ago."""
    # given
    cache = make_cache(capacity=2)
    cache.put("a", 1)
    cache.put("b", 2)
    # when
    cache.get("a")
    cache.put("c", 3)
    # then
    assert (list(cache.keys()), cache.get("b")) == (["a", "c"], None)


def test_weight_bounds_the_total_and_a_too_heavy_entry_is_not_kept(make_cache):
    """max_weight drops old entries until the total fits; an entry over max_entry_weight is never stored."""
    # given
    cache = make_cache(max_weight=10, max_entry_weight=6, weigh=len)
    # when
    cache.put("a", "xxxx")
    cache.put("b", "yyyy")
    cache.put("c", "zzzz")
    cache.put("d", "wwwwwww")
    # then
    assert (list(cache.keys()), cache.weight) == (["b", "c"], 8)


def test_put_unless_keeps_a_newer_value(make_cache):
    """put(unless=...) keeps the current value when it says so, and returns what is stored."""
    # given
    cache = make_cache(capacity=4)
    cache.put(1, {"version": 3})
    # when
    kept = cache.put(1, {"version": 2}, unless=lambda current: current["version"] > 2)
    replaced = cache.put(1, {"version": 4}, unless=lambda current: current["version"] > 4)
    # then
    assert (kept, replaced, cache.get(1)) == ({"version": 3}, {"version": 4}, {"version": 4})


def test_capacity_read_on_every_put(make_cache, settings):
    """A callable capacity (a setting) is read again on every put."""
    # given
    limit = {"n": 3}
    cache = make_cache(capacity=lambda: limit["n"])
    cache.put_many([(i, i) for i in range(3)])
    # when
    limit["n"] = 1
    cache.put(9, 9)
    # then
    assert list(cache.keys()) == [9]


def test_weight_bounds_read_on_every_put(make_cache):
    """Callable weight bounds (a setting) are read again on every put: a lowered total drops the oldest entries,
    and an entry over the lowered entry bound is not kept."""
    # given
    limit = {"total": 10, "entry": 6}
    cache = make_cache(max_weight=lambda: limit["total"], max_entry_weight=lambda: limit["entry"], weigh=len)
    cache.put_many([("a", "aaa"), ("b", "bbb"), ("c", "ccc")])
    # when
    limit["total"], limit["entry"] = 5, 3
    kept = cache.put("d", "dd")
    refused = cache.put("e", "eeee")
    # then
    assert (kept, refused) == ("dd", "eeee")
    assert (list(cache.keys()), cache.weight, cache.max_weight) == (["c", "d"], 5, 5)


def test_discard_where_pop_and_clear_all(make_cache):
    """discard_where drops matching entries, pop returns the value, clear_all empties every cache."""
    # given
    first, second = make_cache(capacity=9), make_cache(capacity=9)
    first.put_many([("a", 1), ("b", 2), ("c", 3)])
    second.put("x", 1)
    # when
    first.discard_where(lambda key, value: value % 2 == 1)
    popped = first.pop("b")
    sizes = (len(first), len(second), "x" in second)
    caches.clear_all()
    # then
    assert (popped, sizes, len(second)) == (2, (0, 1, True), 0)
    assert {id(first), id(second)} <= {id(cache) for cache in caches.caches()}


def test_a_cache_dropped_leaves_the_registry(make_cache):
    """The registry holds live caches only: one made for a while (a simulated worker) is not kept alive."""
    # given
    import gc

    cache = make_cache(capacity=1)
    assert cache in caches.caches()
    # when
    del cache
    gc.collect()
    # then
    assert not any(c.name == "test-test_a_cache_dropped_leaves_the_registry" for c in caches.caches())


def test_every_process_cache_of_toolhub_is_registered():
    """The caches of the call pipeline, the tables, the registry and the MCP auth hint are all LruCaches."""
    # given
    import mcp_app.auth  # noqa: F401
    import tools_app.execution.pipeline  # noqa: F401
    import tools_app.registry.embedding  # noqa: F401
    import tools_app.registry.search  # noqa: F401

    # then
    expected = {"tables", "results", "tools", "key-touches", "search-indexes", "embedding-vectors", "mcp-auth"}
    assert expected <= {cache.name for cache in caches.caches()}
