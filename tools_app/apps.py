from django.apps import AppConfig


class ToolsAppConfig(AppConfig):
    name = "tools_app"
    verbose_name = "Tools"

    def ready(self) -> None:
        from django.conf import settings
        from django.contrib.auth.signals import user_login_failed
        from django.core import checks

        from . import telemetry
        from .rate_limits import check_settings

        checks.register(check_settings)
        # Issue 18 (docs/operations.md): JSON log lines when asked, traces when an OTLP endpoint is set.
        telemetry.json_logs(bool(getattr(settings, "TOOLHUB_JSON_LOGS", False)))
        telemetry.setup_tracing()
        user_login_failed.connect(_login_failed, dispatch_uid="toolhub-login-failed-metric")
        # Revocation follows the user: a password change or a deactivation ends every credential it issued.
        from django.contrib.auth import get_user_model

        from .services.tokens import user_credentials_watch

        user_credentials_watch(get_user_model())


def _login_failed(sender, **kwargs) -> None:
    from . import telemetry

    telemetry.auth_failed("login")
