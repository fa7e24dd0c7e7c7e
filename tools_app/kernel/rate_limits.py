"""THE rate rule: requests per time window, per MCP key and per API user, in one shared store.

Both surfaces ask this module and nothing else: the API through its DRF throttles (tools_app/api/
throttles.py, sync) and the MCP endpoint before the SDK sees a request (mcp_app/rate_limit.py, async).
What a bucket is, which rate applies, where it is counted and what a refusal says is decided here; the
surfaces only translate a refusal (RateLimited) into their own 429 answer. docs/rate-limits.md says
what counts and how to configure it.

Counting is the `limits` package's fixed window (a window opens at a bucket's first request and lasts
the rate's period), in the store named by the settings: Redis when REDIS_URL is set (shared by every
worker and machine), otherwise this process's memory (per worker: with N workers a caller can get up
to N times the rate). No database work happens here.

Domain module: no DRF, no MCP SDK, no request objects.
"""

import asyncio
import functools
import logging
import math
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core import checks
from limits import RateLimitItem, storage, strategies
from limits.aio import strategies as aio_strategies
from limits.storage import MemoryStorage
from limits.util import parse_many

from tools_app.kernel import telemetry
from tools_app.kernel.errors import ErrorCode, ToolhubError
from tools_app.kernel.limits import DEFAULT_RATES, RATE_LIMIT_KEY_PREFIX, RATE_LIMITS_ENABLED, rates

logger = logging.getLogger(__name__)

# Scopes: the kinds of bucket, and the keys of settings.TOOLHUB_RATE_LIMITS holding their default rates.
MCP_KEY = "mcp_key"  # one bucket per MCP API key; an instance's key_rate_limit overrides the default
API_USER = "user"  # one bucket per authenticated API user (token or session)
ANON = "anon"  # one bucket per client IP, for API views open to anonymous callers
TOKEN = "token"  # one bucket per client IP on POST /api/auth/token/
# Where the ASGI gate marks a request it already counted in its `token` bucket, taking its password-hashing slot
# (toolhub/login_gate.py): the view's own count (the API's throttle, the OAuth views) then skips it. Kept here:
# tools_app and oauth_app do not import toolhub.
COUNTED_SCOPE_KEY = "toolhub.token_rate_counted"
RATE_SCOPES = (MCP_KEY, API_USER, ANON, TOKEN)


_WHO = {
    MCP_KEY: "this API key",
    API_USER: "this user",
    ANON: "this address",
    TOKEN: "token requests from this address",
}


class RateLimited(ToolhubError):
    """A request over its rate: RATE_LIMITED (HTTP 429), `retry_after` whole seconds (at least 1)."""

    def __init__(self, *, scope: str, rate: RateLimitItem, retry_after: int):
        message = (
            f"Too many requests for {_WHO.get(scope, scope)}: the limit is {rate_text(rate)}. Retry in {retry_after} s."
        )
        super().__init__(
            ErrorCode.RATE_LIMITED, message, {"retry_after": retry_after, "limit": rate_text(rate), "scope": scope}
        )
        self.retry_after = retry_after


#
# Rates
#


def rate_text(rate: RateLimitItem) -> str:
    """'600 per 1 minute' -> '600 requests per minute' (what messages and docs show)."""
    unit = rate.GRANULARITY.name
    period = unit if rate.multiples == 1 else f"{rate.multiples} {unit}s"
    return f"{rate.amount} request{'s' if rate.amount != 1 else ''} per {period}"


@functools.lru_cache(maxsize=256)
def parse_rate(text: str) -> RateLimitItem:
    """One rate, `<count>/<period>`: '600/minute', '10/second', '5000/hour', '100/5 minutes'.

    Raises ValueError naming what is wrong: not one rate, not a whole count of at least 1, or an unknown
    period (second, minute, hour, day, month, year).
    """
    text = (text or "").strip()
    try:
        rates = list(parse_many(text))
    except ValueError:
        raise ValueError(
            f"{text!r} is not a rate: write <count>/<period>, e.g. '600/minute', '10/second' or '100/5 minutes'."
        ) from None
    if len(rates) != 1:
        raise ValueError(f"{text!r} holds {len(rates)} rates; give exactly one, e.g. '600/minute'.")
    if rates[0].amount < 1 or rates[0].multiples < 1:
        raise ValueError(f"{text!r} allows no request: the count and the period must be at least 1.")
    return rates[0]


def default_rate(scope: str) -> str:
    """The rate of `scope` from settings.TOOLHUB_RATE_LIMITS, falling back to DEFAULT_RATES."""
    return rates().get(scope) or DEFAULT_RATES[scope]


def check_settings(**kwargs: Any) -> list[checks.CheckMessage]:
    """System check (registered by ToolsAppConfig.ready): every configured default rate parses, and
    REDIS_URL, when set, is a redis:// or rediss:// URL."""
    errors: list[checks.CheckMessage] = []
    for scope in RATE_SCOPES:
        try:
            parse_rate(default_rate(scope))
        except ValueError as exc:
            errors.append(checks.Error(f"TOOLHUB_RATE_LIMITS[{scope!r}]: {exc}", id="toolhub.E101"))
    uri = storage_uri()
    if uri != "memory://" and not uri.startswith(("redis://", "rediss://")):
        errors.append(checks.Error(f"REDIS_URL must start with redis:// or rediss://, not {uri!r}.", id="toolhub.E102"))
    return errors


def enabled() -> bool:
    return RATE_LIMITS_ENABLED.get()


def mcp_key_rate(instance_rate: str | None) -> str:
    """The rate of one MCP key: its instance's key_rate_limit, else the `mcp_key` default."""
    return instance_rate or default_rate(MCP_KEY)


#
# The store: one sync limiter per process, one async limiter per event loop, over the same keys
#


def storage_uri() -> str:
    """`redis://...` from REDIS_URL, or `memory://` (per process)."""
    return (getattr(settings, "REDIS_URL", "") or "").strip() or "memory://"


def _storage_options(uri: str) -> dict[str, Any]:
    if uri.startswith(("redis", "rediss")):
        return {"key_prefix": RATE_LIMIT_KEY_PREFIX.get()}
    return {}


_lock = threading.Lock()
_sync: dict[str, strategies.FixedWindowRateLimiter] = {}
# An asyncio Redis connection belongs to the loop that opened it: one async limiter per running loop (one
# per worker in production; tests run each request on a loop of its own). Only for Redis: see ahit().
_async: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[str, aio_strategies.FixedWindowRateLimiter]]"
_async = weakref.WeakKeyDictionary()


class SweptMemoryStorage(MemoryStorage):
    """limits' memory store without its expiry thread. Upstream starts a threading.Timer (10 ms) on every
    count whose last timer has finished: under load a new thread about every 10 ms, which cost the MCP
    endpoint about a third of its throughput (bench/README.md). Expired counts are already dropped when
    read; the sweep of the others (buckets never asked again) runs inline, at most once a second."""

    SWEEP_SECONDS = 1.0

    def __init__(self, uri: str | None = None, **options: Any) -> None:
        super().__init__(uri, **options)
        self.timer.cancel()
        self._next_sweep = time.monotonic() + self.SWEEP_SECONDS

    # Replaces MemoryStorage.__schedule_expiry (name-mangled), which incr() and decr() call.
    def _MemoryStorage__schedule_expiry(self) -> None:
        now = time.monotonic()
        if now >= self._next_sweep:
            self._next_sweep = now + self.SWEEP_SECONDS
            self._MemoryStorage__expire_events()  # type: ignore[attr-defined]


def _sync_limiter(uri: str | None = None) -> strategies.FixedWindowRateLimiter:
    """The process's limiter over `uri` (storage_uri() when not given)."""
    uri = uri or storage_uri()
    limiter = _sync.get(uri)
    if limiter is None:
        with _lock:
            limiter = _sync.get(uri)
            if limiter is None:
                store = (
                    SweptMemoryStorage()
                    if uri == "memory://"
                    else storage.storage_from_string(uri, **_storage_options(uri))
                )
                limiter = strategies.FixedWindowRateLimiter(store)
                _sync[uri] = limiter
    return limiter


def _async_limiter() -> aio_strategies.FixedWindowRateLimiter:
    uri = storage_uri()
    loop = asyncio.get_running_loop()
    cached = _async.get(loop)
    if cached is None or cached[0] != uri:
        # redis-py's asyncio client (limits' default async Redis client is another library, coredis).
        options = {**_storage_options(uri), "implementation": "redispy"}
        limiter = aio_strategies.FixedWindowRateLimiter(storage.storage_from_string(f"async+{uri}", **options))
        cached = (uri, limiter)
        _async[loop] = cached
    return cached[1]


@dataclass(frozen=True, slots=True)
class Bucket:
    """Who is counted (`scope` and an identity: a key id, a user id, an IP) under which rate."""

    scope: str
    identity: str
    rate: RateLimitItem

    @classmethod
    def of(cls, scope: str, identity: object, rate: str | None = None) -> "Bucket":
        return cls(scope, str(identity), parse_rate(rate or default_rate(scope)))

    @property
    def identifiers(self) -> tuple[str, str]:
        return (self.scope, self.identity)


def _retry_after(reset_time: float) -> int:
    return max(1, math.ceil(reset_time - time.time()))


def _store_failed(bucket: Bucket) -> None:
    # Fail open: a store that cannot be reached (Redis down) must not take the service down with it.
    logger.warning("The rate-limit store failed: a %s request was served uncounted.", bucket.scope, exc_info=True)


def hit(bucket: Bucket) -> None:
    """Count one request in `bucket`; raise RateLimited when it is over the rate (it is not served).
    When the store cannot be reached the request is served and a warning logged."""
    if enabled():
        _count(_sync_limiter(), bucket)


def _count(limiter: strategies.FixedWindowRateLimiter, bucket: Bucket) -> None:
    """hit() with the limiter at hand, the rate limits known to be on."""
    try:
        if limiter.hit(bucket.rate, *bucket.identifiers):
            return
        reset_time = limiter.get_window_stats(bucket.rate, *bucket.identifiers).reset_time
    except Exception:
        _store_failed(bucket)
        return
    telemetry.rate_limited(bucket.scope)
    raise RateLimited(scope=bucket.scope, rate=bucket.rate, retry_after=_retry_after(reset_time))


async def ahit(bucket: Bucket) -> None:
    """hit() for the event loop (the MCP endpoint): same buckets, same store, no thread hop. The memory
    store is the sync one (no I/O: microseconds under a lock), so one process has one set of counts."""
    if not enabled():
        return
    uri = storage_uri()
    if uri == "memory://":
        _count(_sync_limiter(uri), bucket)
        return
    limiter = _async_limiter()
    try:
        if await limiter.hit(bucket.rate, *bucket.identifiers):
            return
        reset_time = (await limiter.get_window_stats(bucket.rate, *bucket.identifiers)).reset_time
    except Exception:
        _store_failed(bucket)
        return
    telemetry.rate_limited(bucket.scope)
    raise RateLimited(scope=bucket.scope, rate=bucket.rate, retry_after=_retry_after(reset_time))


def reset() -> None:
    """Drop this process's limiters, and with them the counts of a memory store (tests). A Redis store
    keeps its counts: tests clear their own key prefix."""
    with _lock:
        _sync.clear()
    _async.clear()


__all__ = [
    "ANON",
    "API_USER",
    "COUNTED_SCOPE_KEY",
    "DEFAULT_RATES",
    "MCP_KEY",
    "RATE_SCOPES",
    "TOKEN",
    "Bucket",
    "check_settings",
    "RateLimited",
    "ahit",
    "default_rate",
    "enabled",
    "hit",
    "mcp_key_rate",
    "parse_rate",
    "rate_text",
    "reset",
    "storage_uri",
]
