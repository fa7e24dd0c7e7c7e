"""Token generators for django-oauth-toolkit (OAUTH2_PROVIDER ACCESS_TOKEN_GENERATOR / REFRESH_TOKEN_GENERATOR),
and the one token toolhub issues to itself: the admin's connection check as the signed-in user.

oauthlib's random token, behind a prefix that tells an access token from an API key at a glance, so the MCP
endpoint refuses anything of another shape without a database lookup (tools_app.oauth).
"""

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from django.utils import timezone
from oauth2_provider.models import get_access_token_model, set_token_value
from oauthlib.common import generate_token

from tools_app.oauth import ACCESS_TOKEN_PREFIX, REFRESH_TOKEN_PREFIX, SCOPE_ALL, TOKEN_RANDOM_LENGTH


def access_token(request, *args, **kwargs) -> str:
    return ACCESS_TOKEN_PREFIX + generate_token(TOKEN_RANDOM_LENGTH)


def refresh_token(request, *args, **kwargs) -> str:
    return REFRESH_TOKEN_PREFIX + generate_token(TOKEN_RANDOM_LENGTH)


@contextmanager
def session_check_token(*, user: Any, resource: str, seconds: float) -> Iterator[str]:
    """A fresh access token of `user` for the one instance endpoint `resource` (its audience, RFC 8707), scope
    tools:all (what the owner signed in may use), expiring after `seconds`, and deleted when the block ends.

    For the admin's connection check "with my session" (toolhub.as_client): the server mints it, hands it to
    the check's MCP client in the same process and deletes it; it is never sent to the browser, logged, or
    kept (only its SHA-256 is stored, as for every token). No client application: the check is no client of
    the user's, and the endpoint accepts a token without one as it does any other."""
    raw = access_token(None)
    row = get_access_token_model()(
        user=user,
        application=None,
        expires=timezone.now() + timedelta(seconds=seconds),
        scope=SCOPE_ALL,
        resource=[resource],
    )
    set_token_value(row, raw)
    row.save()
    try:
        yield raw
    finally:
        get_access_token_model().objects.filter(pk=row.pk).delete()
