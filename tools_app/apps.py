from django.apps import AppConfig
from django.conf import settings
from django.contrib.auth.signals import user_login_failed
from django.core import checks

from tools_app.kernel import telemetry
from tools_app.kernel.rate_limits import check_settings


class ToolsAppConfig(AppConfig):
    name = "tools_app"
    verbose_name = "Tools"

    def ready(self) -> None:
        # The services plug Table's document reader in (tools_app.models.table); they import the models, so
        # they can only load once the app registry is ready.
        import tools_app.services  # noqa: F401

        checks.register(check_settings)
        # (docs/operations.md) JSON log lines when asked, traces when an OTLP endpoint is set.
        telemetry.json_logs(bool(getattr(settings, "TOOLHUB_JSON_LOGS", False)))
        telemetry.setup_tracing()
        user_login_failed.connect(_login_failed, dispatch_uid="toolhub-login-failed-metric")


def _login_failed(sender, **kwargs) -> None:
    telemetry.auth_failed("login")
