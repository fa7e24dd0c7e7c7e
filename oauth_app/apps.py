from django.apps import AppConfig
from django.core import checks

from oauth_app.client_secrets import check_password_hashers


class OauthAppConfig(AppConfig):
    """OAuth 2.1 authorization for remote MCP clients (docs/oauth.md), on django-oauth-toolkit."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "oauth_app"
    verbose_name = "OAuth"

    def ready(self) -> None:
        # Here, not at the top: it imports the models, which load after the app configs.
        from oauth_app import revocation

        revocation.follow_users()
        checks.register(check_password_hashers)
