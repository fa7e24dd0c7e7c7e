"""OAuth grants follow the user who gave them: when the user's password changes, the user is deactivated or logs
out everywhere (tools_app.services.user_credentials_revoked), every refresh token the user's authorizations hold
is revoked, and their access tokens and unexchanged authorization codes are deleted. The next request with any
of them is refused, on every worker (the MCP endpoint re-checks a token's row on each request)."""

from typing import Any

from django.utils import timezone
from oauth2_provider.models import AccessToken, Grant, RefreshToken

from tools_app.services import user_credentials_revoked


def revoke_user_grants(sender: Any, user: Any, **kwargs: Any) -> None:
    now = timezone.now()
    RefreshToken.objects.filter(user=user, revoked__isnull=True).update(revoked=now, updated=now, access_token=None)
    AccessToken.objects.filter(user=user).delete()
    Grant.objects.filter(user=user).delete()


def follow_users() -> None:
    """Connect revoke_user_grants to the services' signal (the app's ready(): the models are loaded)."""
    user_credentials_revoked.connect(revoke_user_grants, dispatch_uid="toolhub-oauth-revoke-user-grants")
