"""API tokens (tools_app.models.ApiToken): issue at login, revoke. Both are in the admin history.

Revocation follows the user: when a user's password changes, the user is deactivated, or the user
logs out everywhere (`user_sign_out_everywhere`), `user_credentials_revoked` is sent, and every kind of credential
the user issued ends: API tokens here (a password change or a deactivation already stops them through their
password fingerprint and the active flag), OAuth grants in oauth_app. An MCP instance's API keys are the
instance's, not the user's: they stay (docs/auth.md).
"""

from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models.signals import post_save, pre_save
from django.dispatch import Signal
from django.utils import timezone

from tools_app.kernel.limits import API_TOKEN_TTL_HOURS
from tools_app.models import ApiToken
from tools_app.models.api_token import TOKEN_KEY_LENGTH
from tools_app.services.history import ADDITION, DELETION, history_record

__all__ = [
    "api_token_issue",
    "api_token_revoke",
    "api_token_ttl",
    "user_credentials_revoked",
    "user_credentials_watch",
    "user_sign_out_everywhere",
]

# Sent with `user` and `reason` ("password", "deactivated" or "everywhere") when every credential the user
# issued must end. Receivers revoke their kind of credential; they run inside the sender's transaction.
user_credentials_revoked = Signal()


def api_token_ttl() -> timedelta | None:
    """How long a new token lives: TOOLHUB_API_TOKEN_TTL_HOURS (default 168, 7 days); 0 = no expiry."""
    hours = API_TOKEN_TTL_HOURS.get()
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


def user_sign_out_everywhere(*, user: Any, actor: Any, via: str = "API") -> int:
    """Log out everywhere: every API token of `user` is revoked, and every other credential the user issued
    (receivers of user_credentials_revoked: OAuth grants). Returns how many API tokens were revoked."""
    with transaction.atomic():
        tokens = list(ApiToken.objects.of_user(user))
        for token in tokens:
            history_record(
                actor=actor,
                obj=token,
                action=DELETION,
                message=f"Revoked API token {token} ({via}: log out everywhere).",
            )
        ApiToken.objects.filter(pk__in=[token.pk for token in tokens]).delete()
        user_credentials_revoked.send(sender=type(user), user=user, reason="everywhere")
    return len(tokens)


_WATCHED = frozenset({"password", "is_active"})


def _user_before_save(sender: Any, instance: Any, update_fields: Any = None, **kwargs: Any) -> None:
    if instance.pk is None or (update_fields is not None and not _WATCHED & set(update_fields)):
        return
    instance._toolhub_credentials_before = sender.objects.filter(pk=instance.pk).values("password", "is_active").first()


def _user_saved(sender: Any, instance: Any, created: bool = False, **kwargs: Any) -> None:
    before = instance.__dict__.pop("_toolhub_credentials_before", None)
    if created or before is None:
        return
    if before["password"] != instance.password:
        user_credentials_revoked.send(sender=sender, user=instance, reason="password")
    elif before["is_active"] and not instance.is_active:
        user_credentials_revoked.send(sender=sender, user=instance, reason="deactivated")


def user_credentials_watch(user_model: Any) -> None:
    """Send user_credentials_revoked when a saved user's password changed or the user was deactivated, by any
    path that saves the user (the admin, `changepassword`, `toolhub_user`, set_password() and save())."""
    pre_save.connect(_user_before_save, sender=user_model, dispatch_uid="toolhub-user-credentials-before")
    post_save.connect(_user_saved, sender=user_model, dispatch_uid="toolhub-user-credentials-saved")
