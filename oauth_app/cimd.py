"""Client ID Metadata Documents: django-oauth-toolkit's SSRF-hardened fetcher, plus two things.

- The document's `logo_uri` and `client_uri` are kept (ClientDocument) for the consent page: a logo is only
  ever shown from a metadata document the client's own https URL served, never from a dynamic registration.
- TOOLHUB_OAUTH_CIMD_TRUSTED_ORIGINS (tests only): "host:port" origins fetched although they resolve to a
  loopback or private address, trusting TOOLHUB_OAUTH_CIMD_CA_FILE. Every other origin goes through the
  library's fetcher unchanged: https only, every resolved address public (no loopback, private, link-local
  or metadata address; refused before any connection), no redirects, CIMD_FETCH_TIMEOUT_SECONDS for the
  whole fetch, CIMD_MAX_DOCUMENT_SIZE bytes at most, cached per the document's Cache-Control within bounds.
"""

import ssl
import time
from urllib.parse import urlsplit

import urllib3
from django.conf import settings
from oauth2_provider import cimd as library
from oauth2_provider.settings import oauth2_settings

from oauth_app.models import ClientDocument

MAX_URI_LENGTH = 2000


def _trusted(client_id: str) -> bool:
    parts = urlsplit(client_id)
    origin = f"{(parts.hostname or '').lower()}:{parts.port or 443}"
    return origin in set(getattr(settings, "TOOLHUB_OAUTH_CIMD_TRUSTED_ORIGINS", []) or [])


def _https_uri(value) -> str:
    """`value` if it is an https URL of sane length, else "" (a logo is only loaded over https)."""
    if not isinstance(value, str) or len(value) > MAX_URI_LENGTH:
        return ""
    try:
        parts = urlsplit(value)
    except ValueError:
        return ""
    return value if parts.scheme == "https" and parts.hostname else ""


class ToolhubMetadataFetcher(library.SafeMetadataFetcher):
    def fetch(self, client_id):
        data, max_age = self._fetch_trusted(client_id) if _trusted(client_id) else super().fetch(client_id)
        if data.get("client_id") == client_id:
            ClientDocument.objects.update_or_create(
                client_id=client_id,
                defaults={
                    "logo_uri": _https_uri(data.get("logo_uri")),
                    "client_uri": _https_uri(data.get("client_uri")),
                },
            )
        return data, max_age

    def _fetch_trusted(self, client_id):
        """A trusted test origin: the same fetch without the public-address rule, trusting the test CA."""
        parsed = library._validate_client_id_url(client_id)
        timeout = oauth2_settings.CIMD_FETCH_TIMEOUT_SECONDS
        cafile = getattr(settings, "TOOLHUB_OAUTH_CIMD_CA_FILE", "") or None
        pool = urllib3.HTTPSConnectionPool(
            host=parsed.hostname,
            port=parsed.port or 443,
            timeout=urllib3.Timeout(connect=timeout, read=timeout, total=timeout),
            retries=False,
            maxsize=1,
            ssl_context=ssl.create_default_context(cafile=cafile),
        )
        path = parsed.path + (f"?{parsed.query}" if parsed.query else "")
        began = time.monotonic()
        try:
            response = pool.urlopen("GET", path, redirect=False, preload_content=False)
            try:
                return self._read_document(response)
            finally:
                response.release_conn()
        except urllib3.exceptions.HTTPError as exc:
            raise library.CIMDError(
                f"could not fetch client_id document after {time.monotonic() - began:.1f} s: {exc}"
            ) from exc
        finally:
            pool.close()
