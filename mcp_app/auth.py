"""Who is calling an MCP endpoint: Host/Origin checks and `Authorization: Bearer <key>` (SPEC §4.1, §4.2).

Everything here runs before the MCP SDK sees a request. A key is one instance's key: a key of another
instance is a wrong key (401), an unknown or disabled slug is 404 whatever the key. Only the SHA-256 of
a key is ever compared or kept in memory.

The per-process `auth_cache` only remembers which (slug, key hash) pairs were valid, so that a request
can be handed to the SDK without a database round trip; the MCP handlers then re-check the key and the
instance in the same query that loads what they need (SPEC §1: every request sees the database's state).

Refusals that need no database (a burst of bad keys must not cost a connection each): a key
not of ApiKey's format, and a key hash already found to match no key row, can never become valid (a key
is a fresh random secret), so `auth_cache` remembers them (bounded, least recently used). Whether such a
request is a 404 or a 401 (SPEC §8: an unknown slug is 404 whatever the key) comes from the slug's state
as last read by this process, kept TOOLHUB_AUTH_CACHE_SECONDS (default 5): only the choice between two
refusals may be that old, never a grant.
"""

import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.signals import setting_changed
from django.http.request import split_domain_port, validate_host
from django.utils import timezone
from oauth2_provider.models import get_access_token_model

from tools_app.kernel.caches import LruCache
from tools_app.kernel.limits import AUTH_CACHE_SECONDS
from tools_app.models import ApiKey, McpInstance
from tools_app.oauth import SCOPE_ALL, is_access_token, resource_url, token_checksum


@dataclass(frozen=True, slots=True)
class Credential:
    """What opened an authenticated request: the instance (by id and slug) and the API key or OAuth token.

    Not the pipeline's tools_app.execution Caller (who a call is recorded as): handlers derive that from this."""

    instance_id: int
    slug: str
    api_key_id: int | None  # None: an OAuth access token opened the request
    owner_id: int
    key_rate_limit: str = ""  # the instance's rate per key; empty: the default
    # The instance's log level as last read: a hint for the transport's choice of a streamed answer;
    # the handler re-reads it with the key's re-check and follows it (mcp_app.requests.follow_instance).
    log_level: str = ""
    # OAuth: the access token, the user who authorized it, its client and scopes, and the origin
    # its audience was checked against.
    oauth_token_id: int | None = None
    oauth_user_id: int | None = None
    oauth_client: str = ""
    scopes: frozenset[str] = frozenset()
    base: str = ""
    # What the caller may use (tools_app.grants; mcp_app.requests.grant_of): an API key's read-only flag,
    # label and attributes (fixed when the key is issued), and the username of who authorized the request
    # (the OAuth user; for an API key, the instance's owner).
    key_read_only: bool = False
    key_label: str = ""
    key_attributes: tuple[tuple[str, str], ...] = ()
    username: str = ""
    # Set only in-process, by the admin's "as a client" page (toolhub.as_client): the signed-in user who runs
    # this tools/call from the admin (surface "admin", recorded as that user, no key used). Never set for a
    # request over HTTP: authenticate() builds every Credential of the endpoint, and never sets it.
    admin_user_id: int | None = None

    @property
    def rate_identity(self) -> str:
        """Whose rate a request counts in: the API key, or the (client, user) pair of an OAuth token."""
        if self.api_key_id is not None:
            return str(self.api_key_id)
        return f"oauth:{self.oauth_user_id}:{self.oauth_client}"


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


def insufficient_scope(tool_name: str) -> Denied:
    """A token without `tools:all` calling a tool that changes data (RFC 6750 §3.1; the MCP step-up)."""
    message = (
        f"insufficient_scope: the tool {tool_name!r} changes data; this token was granted only tools that read "
        f"(scope {SCOPE_ALL!r} is needed). Authorize again with that scope."
    )
    challenge = f'Bearer realm="toolhub", error="insufficient_scope", scope="{SCOPE_ALL}"'
    return Denied(403, message, {"WWW-Authenticate": challenge})


#
# Host and Origin (no database)
#


def _allowed_hosts() -> list[str]:
    allowed = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]  # Django's own rule for DEBUG with no ALLOWED_HOSTS
    return allowed


# (Host, Origin) pairs found allowed since the settings last changed: every request checks its pair, and a client
# sends the same one each time. Refusals are not kept (checked again each time); bounded by MAX_HOSTS_ALLOWED.
_hosts_allowed: set[tuple[str | None, str | None]] = set()
MAX_HOSTS_ALLOWED = 1024


def _forget_hosts(**kwargs: Any) -> None:
    """Django's setting_changed receiver: ALLOWED_HOSTS or DEBUG may have changed."""
    _hosts_allowed.clear()


setting_changed.connect(_forget_hosts, dispatch_uid="mcp_app.auth.hosts")


def check_host_and_origin(host: str | None, origin: str | None) -> None:
    """Raise Denied unless Host, and Origin when present, name a host in ALLOWED_HOSTS (SPEC §4.1, §8).

    A bad Host is 400 (Django's answer to a disallowed host); a foreign Origin is 403, as the MCP
    transport rules require against DNS rebinding.
    """
    pair = (host, origin)
    if pair in _hosts_allowed:
        return
    _check_host_and_origin(host, origin)
    if len(_hosts_allowed) >= MAX_HOSTS_ALLOWED:
        _hosts_allowed.clear()
    _hosts_allowed.add(pair)


def _check_host_and_origin(host: str | None, origin: str | None) -> None:
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


# Stands for every bearer key that is not of ApiKey's format: never equal to a stored SHA-256.
MALFORMED_KEY = "malformed"
# An OAuth access token's "key hash": this prefix and the token's SHA-256 (its token_checksum).
OAUTH_HASH_PREFIX = "oauth:"
INVALID_TOKEN_MESSAGE = "Invalid access token (unknown, revoked or expired): authorize again."
AUDIENCE_MESSAGE = "Invalid access token for this instance: it was issued for another resource (RFC 8707)."
TOKEN_USER_MESSAGE = "Invalid access token for this instance: only its owner or a superuser can authorize access."

MISSING_KEY_MESSAGE = "Missing bearer key: send 'Authorization: Bearer <instance API key>'."
INVALID_KEY_MESSAGE = "Invalid API key for this instance (unknown, revoked, or another instance's)."
INACTIVE_OWNER_MESSAGE = "Invalid API key for this instance: the instance's owner is deactivated."


def key_hash_from_header(authorization: str | None) -> str | None:
    """The SHA-256 of the bearer key in an Authorization header, MALFORMED_KEY for a bearer key that is
    not of ApiKey's format, or None when there is no bearer key."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    if ApiKey.is_well_formed(token):
        return ApiKey.hash_key(token)
    if is_access_token(token):
        return OAUTH_HASH_PREFIX + token_checksum(token)
    return MALFORMED_KEY


def refusal_without_database(slug: str, key_hash: str | None) -> Denied | None:
    """The denial of (slug, key) when it can be decided from this process's memory, else None.

    Decided only for a key that can never be valid (missing, malformed, or a hash already found to match
    no key) on a slug whose state was read within TOOLHUB_AUTH_CACHE_SECONDS.
    """
    if key_hash is not None and not auth_cache.is_unknown_key(key_hash):
        return None
    served = auth_cache.slug_served(slug)
    if served is None:
        return None
    if not served:
        return not_found(slug)
    if key_hash is None:
        return unauthorized(MISSING_KEY_MESSAGE, invalid=False)
    return unauthorized(INVALID_KEY_MESSAGE, invalid=True)


def authenticate(slug: str, key_hash: str | None, base: str = "") -> Credential:
    """Resolve (slug, key) against the database; raise Denied (404 before 401, SPEC §8).

    A key of a deactivated owner's instance is refused (401) like a revoked one. A denied pair
    leaves `auth_cache` (it may have been valid before). Sync: call it from a thread (sync_to_async),
    never from the event loop.
    """
    refusal = refusal_without_database(slug, key_hash)
    if refusal is not None:
        auth_cache.forget(slug, key_hash)
        raise refusal
    instance = (
        McpInstance.objects.filter(slug=slug)
        .values("pk", "enabled", "owner_id", "owner__is_active", "owner__username", "key_rate_limit", "log_level")
        .first()
    )
    auth_cache.note_slug(slug, served=instance is not None and instance["enabled"])
    if instance is None or not instance["enabled"]:
        auth_cache.forget(slug, key_hash)
        raise not_found(slug)
    if key_hash is None:
        raise unauthorized(MISSING_KEY_MESSAGE, invalid=False)
    if key_hash == MALFORMED_KEY:
        raise unauthorized(INVALID_KEY_MESSAGE, invalid=True)
    if key_hash.startswith(OAUTH_HASH_PREFIX):
        return _authenticate_token(slug, key_hash, base, instance)
    key = (
        ApiKey.objects.filter(key_hash=key_hash)
        .values("pk", "mcp_instance_id", "revoked_at", "read_only", "label", "attributes")
        .first()
    )
    if key is None:
        auth_cache.note_unknown_key(key_hash)
    if key is None or key["mcp_instance_id"] != instance["pk"] or key["revoked_at"] is not None:
        auth_cache.forget(slug, key_hash)
        raise unauthorized(INVALID_KEY_MESSAGE, invalid=True)
    if not instance["owner__is_active"]:
        auth_cache.forget(slug, key_hash)
        raise unauthorized(INACTIVE_OWNER_MESSAGE, invalid=True)
    attributes = key["attributes"] if isinstance(key["attributes"], dict) else {}
    return _admitted(
        slug,
        key_hash,
        instance,
        api_key_id=key["pk"],
        key_read_only=key["read_only"],
        key_label=key["label"],
        key_attributes=tuple(sorted((str(name), str(value)) for name, value in attributes.items())),
        username=instance["owner__username"],
    )


def _authenticate_token(slug: str, key_hash: str, base: str, instance: dict) -> Credential:
    """An OAuth access token: known, not expired, issued for this instance's endpoint on this
    server (its audience, RFC 8707), by a user who may still authorize access to the instance."""
    token = (
        get_access_token_model()
        .objects.filter(token_checksum=key_hash[len(OAUTH_HASH_PREFIX) :])
        .values(
            "pk",
            "expires",
            "scope",
            "resource",
            "user_id",
            "user__is_active",
            "user__is_superuser",
            "user__username",
            "application__client_id",
        )
        .first()
    )
    if token is None:
        auth_cache.note_unknown_key(key_hash)
    if token is None or token["expires"] <= timezone.now():
        auth_cache.forget(slug, key_hash)
        raise unauthorized(INVALID_TOKEN_MESSAGE, invalid=True)
    if not base or resource_url(base, slug) not in (token["resource"] or []):
        auth_cache.forget(slug, key_hash)
        raise unauthorized(AUDIENCE_MESSAGE, invalid=True)
    if not token["user__is_active"] or not (token["user__is_superuser"] or token["user_id"] == instance["owner_id"]):
        auth_cache.forget(slug, key_hash)
        raise unauthorized(TOKEN_USER_MESSAGE, invalid=True)
    if not instance["owner__is_active"]:
        auth_cache.forget(slug, key_hash)
        raise unauthorized(INACTIVE_OWNER_MESSAGE, invalid=True)
    return _admitted(
        slug,
        key_hash,
        instance,
        api_key_id=None,
        oauth_token_id=token["pk"],
        oauth_user_id=token["user_id"],
        oauth_client=token["application__client_id"] or "",
        scopes=frozenset((token["scope"] or "").split()),
        base=base,
        username=token["user__username"],
    )


def _admitted(slug: str, key_hash: str, instance: dict, **credential: Any) -> Credential:
    """The caller of an admitted key or token (`credential`: what identifies it), remembered in auth_cache."""
    caller = Credential(
        instance_id=instance["pk"],
        slug=slug,
        owner_id=instance["owner_id"],
        key_rate_limit=instance["key_rate_limit"],
        log_level=instance["log_level"],
        **credential,
    )
    auth_cache.put(slug, key_hash, caller)
    return caller


def oauth_token_live(caller: Credential) -> bool:
    """Whether the caller's access token is still there (not revoked), not expired, and its user active: the
    re-check of a request opened by a token, as the key's is for an API key (SPEC §1)."""
    tokens = get_access_token_model().objects
    return tokens.filter(pk=caller.oauth_token_id, expires__gt=timezone.now(), user__is_active=True).exists()


def _slug_seconds() -> float:
    return AUTH_CACHE_SECONDS.get()


class AuthCache:
    """What this process remembers about keys, all bounded (least recently used goes first):

    - (slug, key hash) -> Credential for keys seen valid: a hint only, re-checked by the request's own query;
    - key hashes that match no key row (and MALFORMED_KEY): refused without a lookup;
    - slug -> whether it was served (exists and enabled) when last read, for TOOLHUB_AUTH_CACHE_SECONDS:
      only used to choose 404 or 401 for a key refused without a lookup.
    """

    def __init__(self, capacity: int = 4096, unknown_capacity: int = 10_000):
        self._store: LruCache[tuple[str, str], Credential] = LruCache("mcp-auth", capacity=capacity)
        self._unknown: LruCache[str, bool] = LruCache("mcp-auth-unknown-keys", capacity=unknown_capacity)
        self._slugs: LruCache[str, tuple[float, bool]] = LruCache("mcp-auth-slugs", capacity=unknown_capacity)

    def get(self, slug: str, key_hash: str | None) -> Credential | None:
        return None if key_hash is None else self._store.get((slug, key_hash))

    def put(self, slug: str, key_hash: str, caller: Credential) -> None:
        self._store.put((slug, key_hash), caller)

    def forget(self, slug: str, key_hash: str | None) -> None:
        if key_hash is not None:
            self._store.pop((slug, key_hash))

    def discard(self, caller: Credential) -> None:
        self._store.discard_where(lambda key, value: value == caller)

    def is_unknown_key(self, key_hash: str) -> bool:
        return key_hash == MALFORMED_KEY or key_hash in self._unknown

    def note_unknown_key(self, key_hash: str) -> None:
        self._unknown.put(key_hash, True)

    def note_slug(self, slug: str, *, served: bool) -> None:
        self._slugs.put(slug, (time.monotonic() + _slug_seconds(), served))

    def slug_served(self, slug: str) -> bool | None:
        """Whether `slug` was served when last read, if that was recent enough; None when not known."""
        entry = self._slugs.get(slug)
        if entry is None or entry[0] < time.monotonic():
            return None
        return entry[1]

    def clear(self) -> None:
        self._store.clear()
        self._unknown.clear()
        self._slugs.clear()

    def __len__(self) -> int:
        return len(self._store)


auth_cache = AuthCache()


__all__ = [
    "AuthCache",
    "Credential",
    "Denied",
    "auth_cache",
    "authenticate",
    "check_host_and_origin",
    "insufficient_scope",
    "key_hash_from_header",
    "oauth_token_live",
    "refusal_without_database",
]
