from django.apps import AppConfig


class ToolsAppConfig(AppConfig):
    name = "tools_app"
    verbose_name = "Tools"

    def ready(self) -> None:
        from django.conf import settings
        from django.contrib.auth.signals import user_login_failed
        from django.core import checks

        from tools_app import telemetry
        from tools_app.rate_limits import check_settings

        checks.register(check_settings)
        # Issue 18 (docs/operations.md): JSON log lines when asked, traces when an OTLP endpoint is set.
        telemetry.json_logs(bool(getattr(settings, "TOOLHUB_JSON_LOGS", False)))
        telemetry.setup_tracing()
        user_login_failed.connect(_login_failed, dispatch_uid="toolhub-login-failed-metric")


def _login_failed(sender, **kwargs) -> None:
    from tools_app import telemetry

    telemetry.auth_failed("login")
