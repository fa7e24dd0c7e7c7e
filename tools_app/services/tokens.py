"""API tokens (tools_app.models.ApiToken): issue at login, revoke. Both are in the admin history."""

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from tools_app.models import ApiToken
from tools_app.models.api_token import TOKEN_KEY_LENGTH
from tools_app.services.history import ADDITION, DELETION, history_record

__all__ = ["api_token_issue", "api_token_revoke", "api_token_ttl"]


def api_token_ttl() -> timedelta | None:
    """How long a new token lives: TOOLHUB_API_TOKEN_TTL_HOURS (default 168, 7 days); 0 = no expiry."""
    hours = float(getattr(settings, "TOOLHUB_API_TOKEN_TTL_HOURS", 168))
    return timedelta(hours=hours) if hours > 0 else None


def api_token_issue(*, user: Any, via: str = "API") -> tuple[ApiToken, str]:
    """Create a token for `user`; return it with its plaintext, which is never stored and cannot be shown again.

    The user's expired tokens are deleted on the way (they can never work again).
    """
    plaintext = ApiToken.generate()
    ttl = api_token_ttl()
    with transaction.atomic():
        ApiToken.objects.of_user(user).expired().delete()
        token = ApiToken(
            user=user,
            token_key=plaintext[:TOKEN_KEY_LENGTH],
            digest=ApiToken.hash_token(plaintext),
            password_fingerprint=ApiToken.fingerprint(user),
            expiry=timezone.now() + ttl if ttl is not None else None,
        )
        token.full_clean()
        token.save()
        expires = f"expires {token.expiry:%Y-%m-%d %H:%M} UTC" if token.expiry else "never expires"
        history_record(actor=user, obj=token, action=ADDITION, message=f"Created API token {token} ({via}; {expires}).")
    return token, plaintext


def api_token_revoke(*, api_token: ApiToken, actor: Any, via: str = "API") -> None:
    """Revoke (delete) a token: it stops working on every worker's next request."""
    with transaction.atomic():
        history_record(actor=actor, obj=api_token, action=DELETION, message=f"Revoked API token {api_token} ({via}).")
        api_token.delete()
