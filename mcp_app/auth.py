"""Who is calling an MCP endpoint: Host/Origin checks and `Authorization: Bearer <key>` (SPEC §4.1, §4.2).

Everything here runs before the MCP SDK sees a request. A key is one instance's key: a key of another
instance is a wrong key (401), an unknown or disabled slug is 404 whatever the key. Only the SHA-256 of
a key is ever compared or kept in memory.

The per-process `auth_cache` only remembers which (slug, key hash) pairs were valid, so that a request
can be handed to the SDK without a database round trip; the MCP handlers then re-check the key and the
instance in the same query that loads what they need (SPEC §1: every request sees the database's state).
"""

from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import split_domain_port, validate_host

from tools_app.caches import LruCache
from tools_app.models import ApiKey, McpInstance


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated request: the instance (by id and slug) and the key that opened it."""

    instance_id: int
    slug: str
    api_key_id: int
    owner_id: int
    key_rate_limit: str = ""  # the instance's rate per key (issue 13); empty: the default


class Denied(Exception):
    """An HTTP-level refusal (no MCP processing happens): status, message and extra headers."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def not_found(slug: str) -> Denied:
    return Denied(404, f"No MCP instance is served at /mcp/{slug}/.")


def unauthorized(message: str, *, invalid: bool) -> Denied:
    challenge = 'Bearer realm="toolhub"' + (', error="invalid_token"' if invalid else "")
    return Denied(401, message, {"WWW-Authenticate": challenge})


#
# Host and Origin (no database)
#


def _allowed_hosts() -> list[str]:
    allowed = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]  # Django's own rule for DEBUG with no ALLOWED_HOSTS
    return allowed


def check_host_and_origin(host: str | None, origin: str | None) -> None:
    """Raise Denied unless Host, and Origin when present, name a host in ALLOWED_HOSTS (SPEC §4.1, §8).

    A bad Host is 400 (Django's answer to a disallowed host); a foreign Origin is 403, as the MCP
    transport rules require against DNS rebinding.
    """
    allowed = _allowed_hosts()
    domain, _port = split_domain_port(host or "")
    if not domain or not validate_host(domain, allowed):
        raise Denied(400, f"Invalid Host header {host!r}: add it to DJANGO_ALLOWED_HOSTS to serve MCP under it.")
    if origin is not None:
        origin_domain, _ = split_domain_port(urlsplit(origin).netloc) if origin != "null" else ("", "")
        if not origin_domain or not validate_host(origin_domain, allowed):
            raise Denied(403, f"Origin {origin!r} is not allowed: its host is not in DJANGO_ALLOWED_HOSTS.")


#
# Bearer keys
#


def key_hash_from_header(authorization: str | None) -> str | None:
    """The SHA-256 of the bearer key in an Authorization header, or None when there is no bearer key."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return ApiKey.hash_key(token)


def authenticate(slug: str, key_hash: str | None) -> Caller:
    """Resolve (slug, key) against the database; raise Denied (404 before 401, SPEC §8).

    A denied pair leaves `auth_cache` (it may have been valid before). Sync: call it from a thread
    (sync_to_async), never from the event loop.
    """
    instance = McpInstance.objects.filter(slug=slug).values("pk", "enabled", "owner_id", "key_rate_limit").first()
    if instance is None or not instance["enabled"]:
        auth_cache.forget(slug, key_hash)
        raise not_found(slug)
    if key_hash is None:
        raise unauthorized("Missing bearer key: send 'Authorization: Bearer <instance API key>'.", invalid=False)
    key_id = (
        ApiKey.objects.filter(key_hash=key_hash, mcp_instance_id=instance["pk"], revoked_at__isnull=True)
        .values_list("pk", flat=True)
        .first()
    )
    if key_id is None:
        auth_cache.forget(slug, key_hash)
        raise unauthorized("Invalid API key for this instance (unknown, revoked, or another instance's).", invalid=True)
    caller = Caller(
        instance_id=instance["pk"],
        slug=slug,
        api_key_id=key_id,
        owner_id=instance["owner_id"],
        key_rate_limit=instance["key_rate_limit"],
    )
    auth_cache.put(slug, key_hash, caller)
    return caller


class AuthCache:
    """(slug, key hash) -> Caller for keys seen valid in this process; a hint only, re-checked per request."""

    def __init__(self, capacity: int = 4096):
        self._store: LruCache[tuple[str, str], Caller] = LruCache("mcp-auth", capacity=capacity)

    def get(self, slug: str, key_hash: str | None) -> Caller | None:
        return None if key_hash is None else self._store.get((slug, key_hash))

    def put(self, slug: str, key_hash: str, caller: Caller) -> None:
        self._store.put((slug, key_hash), caller)

    def forget(self, slug: str, key_hash: str | None) -> None:
        if key_hash is not None:
            self._store.pop((slug, key_hash))

    def discard(self, caller: Caller) -> None:
        self._store.discard_where(lambda key, value: value == caller)

    def clear(self) -> None:
        self._store.clear()

    def __len__(self) -> int:
        return len(self._store)


auth_cache = AuthCache()


__all__ = [
    "AuthCache",
    "Caller",
    "Denied",
    "auth_cache",
    "authenticate",
    "check_host_and_origin",
    "key_hash_from_header",
]
