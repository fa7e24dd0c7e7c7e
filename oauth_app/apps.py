from django.apps import AppConfig


class OauthAppConfig(AppConfig):
    """OAuth 2.1 authorization for remote MCP clients (issue 16, docs/oauth.md), on django-oauth-toolkit."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "oauth_app"
    verbose_name = "OAuth"

    def ready(self) -> None:
        from tools_app.services import user_credentials_revoked

        from .revocation import revoke_user_grants

        user_credentials_revoked.connect(revoke_user_grants, dispatch_uid="toolhub-oauth-revoke-user-grants")
