"""ASGI entry point: `uvicorn toolhub.asgi:application` serves the admin, the API and every MCP endpoint.

One app (SPEC §1, §4.1): /mcp/<slug>/ goes to the MCP endpoint (mcp_app.transport), everything else to
Django. The lifespan is answered here because Django's ASGI handler refuses it, and the MCP SDK's
session manager must run for the life of the process.
"""

import logging
import os
import sys
from collections.abc import Awaitable

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolhub.settings")

from toolhub import memory  # noqa: E402  (after the settings module is named)
from toolhub.login_gate import gate_hashes  # noqa: E402
from toolhub.request_limits import cap_request_body  # noqa: E402

# A body over TOOLHUB_MAX_REQUEST_BYTES is answered 413 before Django buffers it; a login takes the machine's
# password-hashing slot (or is refused 429) before Django runs, as does every other request that can hash a
# password or a client secret (toolhub/login_gate.py).
django_application = cap_request_body(gate_hashes(get_asgi_application()))

from tools_app.kernel.limits import GIL_SWITCH_INTERVAL_MS  # noqa: E402

if GIL_SWITCH_INTERVAL_MS.get() > 0:
    # docs/budgets.md: a thread evaluating an expensive query holds the GIL for this long before the event
    # loop or a light call's thread gets it; Python's default (5 ms) per hand-off adds up across a request.
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_MS.get() / 1000)

# Before the server's threads exist: glibc's arenas capped, so that threads share their free memory
# (toolhub/memory.py).
memory.limit_arenas()

from mcp_app.transport import McpEndpoint  # noqa: E402  (after Django is set up)
from tools_app.execution import heavy  # noqa: E402

logger = logging.getLogger(__name__)

mcp_endpoint = McpEndpoint()


async def lifespan(receive, send) -> None:
    """Run the MCP session manager, and the heavy workers (tools_app.execution.heavy), from startup to shutdown."""
    await receive()  # lifespan.startup
    started = False
    try:
        heavy.workers.start()  # they set themselves up while the server starts serving
        async with mcp_endpoint.running():
            started = True
            memory.freeze_startup_objects()  # what the start made stays out of later collections
            await send({"type": "lifespan.startup.complete"})
            await receive()  # lifespan.shutdown
    except Exception as exc:
        logger.exception("toolhub lifespan failed")
        if not started:
            await send({"type": "lifespan.startup.failed", "message": str(exc)})
            return
    heavy.workers.stop()
    await send({"type": "lifespan.shutdown.complete"})


def route(scope, receive, send) -> Awaitable[None]:
    """The application that serves `scope`, called: awaited by the caller (memory's wrapper), so that every
    resumption of a request's coroutine chain passes one frame fewer than an `async def` doing the await."""
    if scope["type"] == "lifespan":
        return lifespan(receive, send)
    if scope["type"] == "http" and scope["path"].startswith("/mcp/"):
        return mcp_endpoint(scope, receive, send)
    return django_application(scope, receive, send)


# A request that moved a lot of data, or the end of a burst, gives the freed memory back to the system
# (toolhub/memory.py): a worker returns to its size after an attack instead of keeping its peak.
application = memory.trim_after_large_requests(route)
