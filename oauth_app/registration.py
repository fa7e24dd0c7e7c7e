"""Bounds of dynamic client registration (RFC 7591 `POST /oauth/register/`, RFC 7592 `PUT`), checked before
django-oauth-toolkit reads the metadata: registration is open to anyone, so what one may store is small.

- the body: at most TOOLHUB_OAUTH_DCR_MAX_BODY_BYTES, refused from its declared length without being read;
- redirect URIs: 1 to TOOLHUB_OAUTH_DCR_MAX_REDIRECT_URIS (counted before any is looked at), each at most
  TOOLHUB_OAUTH_DCR_MAX_FIELD_CHARS characters, `https` or `http` to a loopback address only (what the
  authorization endpoint accepts, oauth_app.validators);
- every other string field at most TOOLHUB_OAUTH_DCR_MAX_FIELD_CHARS characters (`client_name` at most 255,
  its column); `grant_types` only `authorization_code` and `refresh_token`, `response_types` only `code`: the
  only ones the server ever honours, so a client asking for another could never be used;
- clients nobody approved: deleted TOOLHUB_OAUTH_UNUSED_CLIENT_HOURS after they were registered (dynamic
  registration or metadata document; lazily, on each registration: no cron), and at most
  TOOLHUB_OAUTH_DCR_MAX_UNUSED_CLIENTS registered ones wait at once.

Over a bound: 400 `invalid_client_metadata` (RFC 7591 §3.2.2) naming the field and the limit, nothing stored.
"""

import json
from datetime import timedelta
from typing import Any

from django.http import HttpResponse
from django.utils import timezone
from oauth2_provider.models import get_application_model

from oauth_app.registration_body import max_registration_bytes, refusal_body, too_large_description
from oauth_app.validators import GRANT_TYPES, redirect_uri_acceptable
from tools_app.kernel import limits

CLIENT_NAME_CHARS = 255  # the column's size
RESPONSE_TYPES = frozenset({"code"})
# Deleted per registration at most, so that one registration never pays for a long backlog.
CLEANUP_BATCH = 500


class RegistrationRefused(Exception):
    def __init__(self, description: str):
        super().__init__(description)
        self.description = description


def refusal_response(description: str) -> HttpResponse:
    return HttpResponse(refusal_body(description), status=400, content_type="application/json")


def check_body_size(request) -> None:
    """The declared length first (the body is not read; under ASGI, toolhub.request_limits refused it before
    Django read it), then the body itself (a body without a length)."""
    declared = request.META.get("CONTENT_LENGTH") or ""
    size = int(declared) if declared.isdigit() else len(request.body)
    if size > max_registration_bytes():
        raise RegistrationRefused(too_large_description(size))


def _check_string(field: str, value: Any, limit: int, setting: str) -> None:
    if isinstance(value, str) and len(value) > limit:
        raise RegistrationRefused(f"{field} is {len(value)} characters; at most {limit} are accepted ({setting}).")


def check_metadata(data: Any) -> None:
    """The bounds of one registration's metadata (the library checks the rest: types, auth method)."""
    if not isinstance(data, dict):
        return  # the library answers "must be a JSON object"
    max_uris = limits.OAUTH_DCR_MAX_REDIRECT_URIS.get()
    max_chars = limits.OAUTH_DCR_MAX_FIELD_CHARS.get()
    field_setting = "TOOLHUB_OAUTH_DCR_MAX_FIELD_CHARS"

    uris = data.get("redirect_uris")
    if not isinstance(uris, list) or not uris:
        raise RegistrationRefused("redirect_uris must be a non-empty array: the authorization code flow needs one.")
    if len(uris) > max_uris:
        raise RegistrationRefused(
            f"redirect_uris has {len(uris)} entries; at most {max_uris} are accepted "
            "(TOOLHUB_OAUTH_DCR_MAX_REDIRECT_URIS)."
        )
    for index, uri in enumerate(uris):
        if not isinstance(uri, str):
            raise RegistrationRefused(f"redirect_uris[{index}] must be a string.")
        _check_string(f"redirect_uris[{index}]", uri, max_chars, field_setting)
        if not redirect_uri_acceptable(uri) or "#" in uri or any(c.isspace() for c in uri):
            raise RegistrationRefused(
                f"redirect_uris[{index}] ({uri[:100]!r}) can never be used: a redirect URI is https, or http only to "
                "a loopback address (127.0.0.1, [::1], localhost), without a fragment or white space."
            )

    for field, value in data.items():
        if field == "client_name":
            _check_string(field, value, CLIENT_NAME_CHARS, "the column's size")
        elif isinstance(value, str):
            _check_string(field, value, max_chars, field_setting)
        elif isinstance(value, list) and field != "redirect_uris":
            if len(value) > max_uris:
                raise RegistrationRefused(f"{field} has {len(value)} entries; at most {max_uris} are accepted.")
            for index, item in enumerate(value):
                _check_string(f"{field}[{index}]", item, max_chars, field_setting)

    grant_types = data.get("grant_types", ["authorization_code"])
    if isinstance(grant_types, list):
        unusable = sorted({g for g in grant_types if isinstance(g, str)} - GRANT_TYPES)
        if unusable:
            raise RegistrationRefused(
                f"grant_types {unusable} can never be used here: only authorization_code and refresh_token."
            )
    response_types = data.get("response_types", ["code"])
    if isinstance(response_types, list):
        unusable = sorted({r for r in response_types if isinstance(r, str)} - RESPONSE_TYPES)
        if unusable:
            raise RegistrationRefused(f"response_types {unusable} can never be used here: only code.")


def parse_metadata(request) -> Any:
    """The registration's metadata within the bounds above, or RegistrationRefused. Not JSON: None (the library
    says so)."""
    check_body_size(request)
    try:
        data = json.loads(request.body)
    except (json.JSONDecodeError, ValueError):
        return None
    check_metadata(data)
    return data


def remove_unused_clients() -> int:
    """Delete the clients registered by dynamic registration or a metadata document that no owner approved
    within TOOLHUB_OAUTH_UNUSED_CLIENT_HOURS (their registration tokens with them); how many."""
    application = get_application_model()
    hours = limits.OAUTH_UNUSED_CLIENT_HOURS.get()
    sources = [application.RegistrationSource.DCR, application.RegistrationSource.CIMD]
    stale = application.objects.filter(
        registration_source__in=sources, used_at__isnull=True, created__lt=timezone.now() - timedelta(hours=hours)
    )
    ids = list(stale.values_list("pk", flat=True)[:CLEANUP_BATCH])
    if not ids:
        return 0
    application.objects.filter(pk__in=ids).delete()
    return len(ids)


def check_unused_quota() -> None:
    application = get_application_model()
    limit = limits.OAUTH_DCR_MAX_UNUSED_CLIENTS.get()
    waiting = application.objects.filter(
        registration_source=application.RegistrationSource.DCR, used_at__isnull=True
    ).count()
    if waiting >= limit:
        hours = limits.OAUTH_UNUSED_CLIENT_HOURS.get()
        raise RegistrationRefused(
            f"{waiting} registered clients are waiting for an owner's approval, the most this server keeps "
            f"(TOOLHUB_OAUTH_DCR_MAX_UNUSED_CLIENTS); unapproved clients are removed {hours:g} hours after they "
            "registered. Try again later, or ask the server's administrator to register the client."
        )
