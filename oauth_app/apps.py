from django.apps import AppConfig


class OauthAppConfig(AppConfig):
    """OAuth 2.1 authorization for remote MCP clients (docs/oauth.md), on django-oauth-toolkit."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "oauth_app"
    verbose_name = "OAuth"
