"""A server process gives freed memory back to the system (toolhub/memory.py): after a request that moved a
lot of data, and after a burst of requests, glibc's malloc_trim(0) runs off the event loop."""

import asyncio
import gc
import json
import subprocess
import sys
import weakref

import pytest

from tests.live_server import ROOT
from toolhub import memory

pytestmark = pytest.mark.skipif(memory._libc is None, reason="the C library is not glibc")

# In a fresh process: 200 MB of 2 KB blocks (the C allocator's, not Python's small-object arenas) allocated
# by a thread (as a request's), then all but one block in 16 freed: the free space between the kept blocks
# is whole pages, which glibc keeps until malloc_trim. Prints the resident MB after the free and after
# toolhub.memory.trim().
FRAGMENTED_HEAP = """
import json, os, threading
from toolhub import memory

def resident_mb():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

kept = []

def allocate():
    blocks = [bytes(2048) + bytes([i % 256]) for i in range(100_000)]
    kept.extend(blocks[::16])
    del blocks

thread = threading.Thread(target=allocate)
thread.start()
thread.join()
freed = resident_mb()
trimmed = memory.trim()
print(json.dumps({"freed": freed, "after_trim": resident_mb(), "trimmed": trimmed}))
"""


def test_trim_gives_a_fragmented_heap_back_to_the_system():
    """~190 MB freed between live blocks stays resident until malloc_trim(0); then most of it is given back."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "MALLOC_ARENA_MAX": "2"}
    done = subprocess.run(
        [sys.executable, "-c", FRAGMENTED_HEAP], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    figures = json.loads(done.stdout)
    assert figures["trimmed"] is True
    assert figures["freed"] - figures["after_trim"] > 150, figures


def test_trim_collects_reference_cycles_first():
    """What a request built is often held in reference cycles until the cyclic collector runs: trim()
    collects them first, so that their memory is free when the allocator gives pages back."""

    class Node:
        pass

    gc.disable()  # no automatic collection may free the cycle behind the test's back
    try:
        node = Node()
        node.itself, node.payload = node, bytearray(10_000_000)
        dropped = weakref.ref(node)
        del node
        assert dropped() is not None  # unreachable, but alive until a collection
        # when
        assert memory.trim() is True
        # then
        assert dropped() is None
    finally:
        gc.enable()


@pytest.fixture
def trims(monkeypatch, settings):
    """Each trim the wrapper asks for (the real one stubbed out), with the threshold at 1,000 bytes."""
    settings.TOOLHUB_MALLOC_TRIM_AFTER_BYTES = 1000
    asked: list[str] = []
    monkeypatch.setattr(memory, "trim", lambda: asked.append("trim") or True)
    return asked


def serve(app, requests: list[tuple[bytes, bytes]]) -> list[int]:
    """Run (request body, answer body) pairs through the ASGI `app` at once; their statuses."""

    async def one(request_body: bytes, answer_body: bytes) -> int:
        sent: list[dict] = []
        pending = [{"type": "http.request", "body": request_body, "more_body": False}]

        async def receive():
            return pending.pop(0) if pending else {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": "/x", "headers": [], "answer": answer_body}
        await app(scope, receive, send)
        return sent[0]["status"]

    async def run():
        statuses = await asyncio.gather(*(one(*pair) for pair in requests))
        await asyncio.sleep(0.05)  # the trim runs in the loop's executor
        return statuses

    return asyncio.run(run())


async def echo_app(scope, receive, send):
    """Reads the body, lets the other requests in, answers `scope["answer"]`."""
    await receive()
    await asyncio.sleep(0.01)
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": scope["answer"]})


@pytest.mark.parametrize(
    ("requests", "expected"),
    [
        ([(b"x" * 999, b"")], []),
        ([(b"x" * 1000, b"")], ["trim"]),
        ([(b"", b"y" * 1000)], ["trim"]),
        ([(b"x" * 500, b"y" * 500)], ["trim"]),
        ([(b"x" * 10, b"y" * 10)] * (memory.BURST_REQUESTS - 1), []),
        ([(b"x" * 10, b"y" * 10)] * memory.BURST_REQUESTS, ["trim"]),
    ],
    ids=["small", "large-body", "large-answer", "both-halves", "not-a-burst", "burst"],
)
def test_a_trim_follows_a_large_request_or_a_burst(trims, requests, expected):
    """A request that received and sent 1,000 bytes or more in all is followed by one trim, as is the end of
    BURST_REQUESTS requests in flight at once; smaller requests and smaller crowds are not."""
    statuses = serve(memory.trim_after_large_requests(echo_app), requests)
    assert statuses == [200] * len(requests)
    assert trims == expected


def test_the_server_application_trims():
    """What uvicorn serves (toolhub.asgi.application) is behind the trimming wrapper, and glibc's arenas were
    capped when it was imported."""
    import toolhub.asgi

    assert toolhub.asgi.application.__qualname__ == "trim_after_large_requests.<locals>.counted"


# In a fresh process (a freeze lasts for the process): garbage of the start (an unreachable cycle), an object
# alive at the start and one made after it; then whether the collector still sees each, and a second freeze.
FREEZE = """
import gc, json, weakref
from toolhub import memory

class Node:
    pass

gc.disable()  # no automatic collection before the freeze's own
garbage = Node()
garbage.itself = garbage
dropped = weakref.ref(garbage)
del garbage
kept = [Node()]
first = memory.freeze_startup_objects()
gc.enable()
later = [Node()]
seen = {id(o) for o in gc.get_objects()}
print(json.dumps({
    "first": first, "again": memory.freeze_startup_objects(), "garbage_collected": dropped() is None,
    "kept_seen": id(kept) in seen, "later_seen": id(later) in seen, "frozen": gc.get_freeze_count() > 1000,
}))
"""


def test_the_objects_of_the_start_are_left_out_of_later_collections():
    """The start's garbage is collected, then what is alive is frozen (never walked again by a collection),
    once per process; what is made afterwards is collected as usual."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", FREEZE], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(done.stdout) == {
        "first": True,
        "again": False,
        "garbage_collected": True,
        "kept_seen": False,
        "later_seen": True,
        "frozen": True,
    }


def test_the_server_freezes_what_its_start_made_once_started(monkeypatch):
    """toolhub.asgi's lifespan freezes the start's objects after the MCP session manager and the heavy
    workers have started, before it reports the startup complete."""
    import contextlib

    import toolhub.asgi

    events: list[str] = []

    @contextlib.asynccontextmanager
    async def running():
        events.append("mcp started")
        yield

    monkeypatch.setattr(toolhub.asgi.heavy.workers, "start", lambda: events.append("heavy started"))
    monkeypatch.setattr(toolhub.asgi.heavy.workers, "stop", lambda: events.append("heavy stopped"))
    monkeypatch.setattr(toolhub.asgi.mcp_endpoint, "running", running)
    monkeypatch.setattr(memory, "freeze_startup_objects", lambda: events.append("frozen") or True)
    messages = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]

    async def receive():
        return messages.pop(0)

    async def send(message):
        events.append(message["type"])

    asyncio.run(toolhub.asgi.lifespan(receive, send))
    assert events == [
        "heavy started",
        "mcp started",
        "frozen",
        "lifespan.startup.complete",
        "heavy stopped",
        "lifespan.shutdown.complete",
    ]
