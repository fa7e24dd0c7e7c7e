"""Client ID Metadata Documents: django-oauth-toolkit's SSRF rules, fetched within a deadline.

The fetch (ToolhubMetadataFetcher.fetch) keeps every rule of the library's SafeMetadataFetcher and reuses its
pieces (URL validation, the public-address check after DNS resolution, the document checks): https only,
every resolved address public (no loopback, private, link-local or metadata address; refused before any
connection), the connection made to the address checked, no redirects. What it adds:

- One deadline for the whole fetch, enforced by the clock: CIMD_FETCH_TIMEOUT_SECONDS
  (TOOLHUB_OAUTH_CIMD_TIMEOUT_SECONDS) from the start of the DNS lookup to the last byte. The library bounds
  each socket read instead, so a server sending one byte every half second held a request for 30 s. Here every
  blocking step (lookup, connect, TLS handshake, each read) gets only what is left of the deadline.
- A byte cap on everything read, headers included: CIMD_MAX_DOCUMENT_SIZE (TOOLHUB_OAUTH_CIMD_MAX_BYTES) for
  the document plus CIMD_MAX_HEADER_BYTES for the status line and headers.
- No database connection held while it waits: the request's connection goes back to the pool (PostgreSQL)
  before the lookup, so a flood of slow documents cannot drain the pool for everyone else.
- The document's `logo_uri` and `client_uri` are kept (ClientDocument) for the consent page: a logo is only
  ever shown from a metadata document the client's own https URL served, never from a dynamic registration.

The library keeps the rest: at most CIMD_MAX_CONCURRENT_FETCHES (TOOLHUB_OAUTH_CIMD_MAX_FETCHES) fetches in
flight per worker, refused at once (no queue) beyond that; a failing URL backed off; documents cached per their
Cache-Control within bounds.

TOOLHUB_OAUTH_CIMD_TRUSTED_ORIGINS (tests only): "host:port" origins fetched although they resolve to a
loopback or private address, trusting TOOLHUB_OAUTH_CIMD_CA_FILE; everything else is the same.
"""

import contextvars
import http.client
import socket
import ssl
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from urllib.parse import urlsplit

import urllib3
from oauth2_provider import cimd as library
from oauth2_provider.settings import oauth2_settings

from oauth_app.models import ClientDocument
from tools_app.kernel.connections import release_connections
from tools_app.kernel.limits import (
    CIMD_MAX_HEADER_BYTES,
    CIMD_MAX_URI_CHARS,
    OAUTH_CIMD_CA_FILE,
    OAUTH_CIMD_TRUSTED_ORIGINS,
)

# DNS lookups run on these threads so that a slow resolver cannot hold a request past its deadline (a lookup
# cannot be interrupted; the request stops waiting for it). A lookup still running when the request gives up
# keeps its thread until the resolver's own timeout: at most this many at once per worker.
DNS_THREADS = 4
_dns = ThreadPoolExecutor(max_workers=DNS_THREADS, thread_name_prefix="toolhub-cimd-dns")


@dataclass
class _Budget:
    deadline: float  # time.monotonic()
    max_bytes: int
    received: int = 0

    def remaining(self) -> float:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the client_id document was not fetched within the deadline")
        return remaining


_budget: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("toolhub_cimd_budget", default=None)


class _BudgetedSocket(ssl.SSLSocket):
    """An SSL socket whose blocking steps each wait only for what is left of the fetch's deadline, and that
    refuses to read past the fetch's byte cap. CPython bounds one handshake or one read by the socket timeout
    as a whole (not per packet), so setting it to the time left before each step bounds the whole fetch."""

    def _time_left(self) -> None:
        budget = _budget.get()
        if budget is not None:
            self.settimeout(budget.remaining())

    def do_handshake(self, block=False):
        self._time_left()
        return super().do_handshake(block)

    def sendall(self, data, flags=0):
        self._time_left()
        return super().sendall(data, flags)

    def read(self, size=1024, buffer=None):
        budget = _budget.get()
        if budget is None:
            return super().read(size, buffer)
        allowance = budget.max_bytes - budget.received
        if allowance <= 0:
            raise ConnectionAbortedError(f"the client_id document's response exceeds {budget.max_bytes} bytes")
        self._time_left()
        result = super().read(min(size, allowance), buffer)
        budget.received += result if isinstance(result, int) else len(result)
        return result


def _trusted(client_id: str) -> bool:
    parts = urlsplit(client_id)
    origin = f"{(parts.hostname or '').lower()}:{parts.port or 443}"
    return origin in set(OAUTH_CIMD_TRUSTED_ORIGINS.raw() or [])


def _https_uri(value) -> str:
    """`value` if it is an https URL of sane length, else "" (a logo is only loaded over https)."""
    if not isinstance(value, str) or len(value) > CIMD_MAX_URI_CHARS:
        return ""
    try:
        parts = urlsplit(value)
    except ValueError:
        return ""
    return value if parts.scheme == "https" and parts.hostname else ""


def _any_addresses(hostname: str, port: int) -> list[str]:
    """A trusted test origin's addresses, loopback included."""
    try:
        infos = socket.getaddrinfo(hostname, port, proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        raise library.CIMDError(f"could not resolve client_id host: {exc}") from exc
    return [info[4][0] for info in infos]


class ToolhubMetadataFetcher(library.SafeMetadataFetcher):
    def fetch(self, client_id):
        data, max_age = self._fetch(client_id)
        if data.get("client_id") == client_id:
            ClientDocument.objects.update_or_create(
                client_id=client_id,
                defaults={
                    "logo_uri": _https_uri(data.get("logo_uri")),
                    "client_uri": _https_uri(data.get("client_uri")),
                },
            )
        return data, max_age

    def _fetch(self, client_id):
        timeout = float(oauth2_settings.CIMD_FETCH_TIMEOUT_SECONDS)
        budget = _Budget(
            deadline=time.monotonic() + timeout,
            max_bytes=oauth2_settings.CIMD_MAX_DOCUMENT_SIZE + CIMD_MAX_HEADER_BYTES,
        )
        parsed = library._validate_client_id_url(client_id)
        port = parsed.port or 443
        trusted = _trusted(client_id)
        release_connections()

        resolve = _any_addresses if trusted else library._resolve_and_validate
        lookup = _dns.submit(resolve, parsed.hostname, port)
        try:
            addresses = lookup.result(timeout=budget.remaining())
        except (FutureTimeout, TimeoutError) as exc:
            lookup.cancel()
            raise library.CIMDError(f"could not resolve the client_id host within {timeout:g} s") from exc

        cafile = (OAUTH_CIMD_CA_FILE.get() or None) if trusted else None
        context = ssl.create_default_context(cafile=cafile)
        context.sslsocket_class = _BudgetedSocket
        path = parsed.path + (f"?{parsed.query}" if parsed.query else "")
        headers = {"Host": parsed.netloc, "Accept": "application/json, application/*+json"}
        token = _budget.set(budget)
        began = time.monotonic()
        problem: BaseException | None = None
        try:
            for address in addresses:
                try:
                    remaining = budget.remaining()
                except TimeoutError as exc:
                    problem = exc
                    break
                # The connection goes to the address checked (no second lookup); SNI, the certificate check and
                # the Host header use the real host name.
                pool = urllib3.HTTPSConnectionPool(
                    host=address,
                    port=port,
                    timeout=urllib3.Timeout(connect=remaining, read=remaining),
                    retries=False,
                    maxsize=1,
                    ssl_context=context,
                    server_hostname=parsed.hostname,
                )
                try:
                    response = pool.urlopen("GET", path, headers=headers, redirect=False, preload_content=False)
                    try:
                        return self._read_document(response)
                    finally:
                        response.release_conn()
                except (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError) as exc:
                    problem = exc
                finally:
                    pool.close()
        finally:
            _budget.reset(token)
        raise library.CIMDError(
            f"could not fetch the client_id document (stopped after {time.monotonic() - began:.1f} s, "
            f"limit {timeout:g} s, {budget.received} bytes read): {problem}"
        )
