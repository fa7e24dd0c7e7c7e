"""django-oauth-toolkit's validator with toolhub's rules (OAUTH2_PROVIDER OAUTH2_VALIDATOR_CLASS).

On top of the library's checks (PKCE S256 required, exact redirect URIs, audience narrowing, rotation):
- only the authorization code grant and refresh tokens (no client credentials, device, implicit or password);
- an `http` redirect URI only for a native client's loopback callback (RFC 8252: 127.0.0.1, [::1], localhost):
  the swapped-in application model (oauth_app.models.Client) lets `http` through the library's scheme
  check, this validator limits it to loopback;
- a client registered by a metadata document or by dynamic registration is refused once that way of
  registering is switched off (TOOLHUB_OAUTH_CIMD, TOOLHUB_OAUTH_DCR);
- a client secret is checked with the fast client-secret hasher (oauth_app.client_secrets); one stored with
  the slow password hasher is checked with it (in a hashing slot) and then stored again with the fast one; a
  generated secret is never checked against a slow hash; a client authenticated with a secret not of the
  generated shape is marked (Client.old_secret_fast_at, and oauth_app.client_secrets.fast_secret_clients in
  this process: its stored hash is now the fast one), so that every worker's ASGI gate gives its next
  requests no hashing slot;
- the first authorization code issued to a client marks it used (Client.used_at): an unused one expires
  (oauth_app.registration);
- an authorization code presented again after it was exchanged revokes every token that exchange issued (the
  whole refresh-token family; RFC 6749 §4.1.2, OAuth 2.1): whoever replays it, the code has leaked.
"""

import hashlib
from contextvars import ContextVar
from datetime import timedelta
from urllib.parse import urlsplit

from django.contrib.auth.hashers import check_password, identify_hasher, make_password
from django.utils import timezone
from django.utils.crypto import constant_time_compare
from oauth2_provider.models import Grant, RefreshToken
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauth2_provider.settings import oauth2_settings
from oauthlib.oauth2.rfc6749 import errors

from oauth_app.client_secrets import ALGORITHM as CLIENT_SECRET_HASHER
from oauth_app.client_secrets import fast_secret_clients, hashing_client_secrets, is_generated_secret
from oauth_app.models import Client, RedeemedCode

# Set by _check_secret when a secret not of the generated shape matched: its client's stored hash is now the
# fast one (it was, or check_password just stored it again with it).
_old_secret_matched: ContextVar[bool] = ContextVar("toolhub_old_client_secret_matched", default=False)

GRANT_TYPES = frozenset({"authorization_code", "refresh_token"})
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})


def redirect_uri_acceptable(uri: str) -> bool:
    """https anywhere; http only to a loopback address (a native client's own callback)."""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return False
    if parts.scheme == "https":
        return bool(parts.hostname)
    return parts.scheme == "http" and (parts.hostname or "") in LOOPBACK_HOSTS


def _checksum(code: str) -> str:
    return hashlib.sha256(code.encode("utf-8")).hexdigest()


def revoke_replayed_code(code: str, application) -> int:
    """Revoke every token issued for `code` (already exchanged) by `application`; how many families."""
    families = set(
        RedeemedCode.objects.filter(code_checksum=_checksum(code), application=application).values_list(
            "token_family", flat=True
        )
    )
    for family in families:
        RefreshToken.revoke_family(family)
    return len(families)


def _rehash(stored_secret: str, secret: str) -> None:
    """Store `secret` (just checked against `stored_secret`) with the fast client-secret hasher, if the row
    still holds that hash. Whoever holds the same stored hash holds the same secret, so matching on it is
    exact."""
    Client.objects.filter(client_secret=stored_secret).update(
        client_secret=make_password(secret, hasher=CLIENT_SECRET_HASHER)
    )


def _mark_fast(client) -> None:
    """Mark `client` (its secret, not of the generated shape, just matched and is now stored fast) for every
    worker's gate: in the database once (after the rehash, in the same request), in this process always."""
    if client.old_secret_fast_at is None:
        client.old_secret_fast_at = timezone.now()
        Client.objects.filter(pk=client.pk, old_secret_fast_at__isnull=True).update(
            old_secret_fast_at=client.old_secret_fast_at
        )
    fast_secret_clients.mark(client.client_id)


def registration_allowed(application) -> bool:
    """Whether the way `application` was registered is still switched on."""
    source = getattr(application, "registration_source", None)
    sources = type(application).RegistrationSource
    if source == sources.CIMD:
        return bool(oauth2_settings.CIMD_ENABLED)
    if source == getattr(sources, "DCR", None):
        return bool(oauth2_settings.DCR_ENABLED)
    return True


class ToolhubValidator(OAuth2Validator):
    def _check_secret(self, provided_secret, stored_secret):
        # No secret sent (a confidential client's id alone, or Basic `id:`): refused without hashing the empty
        # string against the stored hash.
        if not provided_secret and stored_secret:
            return False
        with hashing_client_secrets():
            try:
                algorithm = identify_hasher(stored_secret).algorithm
            except ValueError:  # stored readable (hash_client_secret off)
                algorithm = None
            if algorithm is None:
                matched = constant_time_compare(provided_secret, stored_secret)
            elif algorithm != CLIENT_SECRET_HASHER and is_generated_secret(provided_secret):
                # Every generated secret is stored with the fast hasher, so this pair cannot match: refused
                # without the slow hash. The ASGI gate lets such a secret through without a hashing slot
                # (toolhub/login_gate.py), so it must never cost one.
                return False
            else:
                # A secret stored with the slow password hasher (before client secrets had their own) is
                # checked with it, in a hashing slot, and on success stored again with the fast one.
                matched = check_password(
                    provided_secret,
                    stored_secret,
                    setter=lambda secret: _rehash(stored_secret, secret),
                    preferred=CLIENT_SECRET_HASHER,
                )
        if matched and not is_generated_secret(provided_secret):
            _old_secret_matched.set(True)
        return matched

    def _marking_fast_secrets(self, authenticate, request) -> bool:
        """`authenticate(request)`; when it authenticated the client with a secret not of the generated shape,
        the client is marked as one whose secret is checked fast (oauth_app.client_secrets)."""
        marker = _old_secret_matched.set(False)
        try:
            authenticated = authenticate(request)
            if authenticated and _old_secret_matched.get() and request.client is not None:
                _mark_fast(request.client)
            return authenticated
        finally:
            _old_secret_matched.reset(marker)

    def _authenticate_basic_auth(self, request):
        return self._marking_fast_secrets(super()._authenticate_basic_auth, request)

    def _authenticate_request_body(self, request):
        return self._marking_fast_secrets(super()._authenticate_request_body, request)

    def _load_application(self, client_id, request):
        client = super()._load_application(client_id, request)
        if client is not None and not registration_allowed(client):
            request.client = None
            return None
        return client

    def validate_grant_type(self, client_id, grant_type, client, request, *args, **kwargs):
        if grant_type not in GRANT_TYPES:
            return False
        return super().validate_grant_type(client_id, grant_type, client, request, *args, **kwargs)

    def validate_redirect_uri(self, client_id, redirect_uri, request, *args, **kwargs):
        if not redirect_uri_acceptable(redirect_uri):
            return False
        return super().validate_redirect_uri(client_id, redirect_uri, request, *args, **kwargs)

    def save_authorization_code(self, client_id, code, request, *args, **kwargs):
        super().save_authorization_code(client_id, code, request, *args, **kwargs)
        client = request.client
        if client is not None and client.used_at is None:
            client.used_at = timezone.now()
            type(client).objects.filter(pk=client.pk, used_at__isnull=True).update(used_at=client.used_at)

    def validate_code(self, client_id, code, client, request, *args, **kwargs):
        if super().validate_code(client_id, code, client, request, *args, **kwargs):
            return True
        if not Grant.objects.filter(code=code, application=client).exists():
            revoke_replayed_code(code, client)  # gone: exchanged already (an expired one is still there)
        return False

    def invalidate_authorization_code(self, client_id, code, request, *args, **kwargs):
        try:
            super().invalidate_authorization_code(client_id, code, request, *args, **kwargs)
        except errors.InvalidGrantError:
            # Two exchanges of one code at once: the one that lost the race issued tokens too.
            revoke_replayed_code(code, request.client)
            raise

    def save_bearer_token(self, token, request, *args, **kwargs):
        result = super().save_bearer_token(token, request, *args, **kwargs)
        if request.grant_type == "authorization_code" and token.get("refresh_token"):
            family = (
                RefreshToken.objects.filter(token_checksum=_checksum(token["refresh_token"]))
                .values_list("token_family", flat=True)
                .first()
            )
            if family is not None:
                now = timezone.now()
                RedeemedCode.objects.filter(expires__lt=now).delete()
                RedeemedCode.objects.create(
                    code_checksum=_checksum(request.code),
                    application=request.client,
                    token_family=family,
                    expires=now + timedelta(seconds=oauth2_settings.REFRESH_TOKEN_EXPIRE_SECONDS),
                )
        return result
