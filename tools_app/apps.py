from django.apps import AppConfig
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_login_failed
from django.core import checks

from tools_app.kernel import telemetry
from tools_app.kernel.limits import JSON_LOGS
from tools_app.kernel.rate_limits import check_settings


class ToolsAppConfig(AppConfig):
    name = "tools_app"
    # The admin writes it before each model's name (breadcrumbs "Home › toolhub › Tools › orders_query", the
    # sidebar): not "Tools", which repeated the tool list's own name.
    verbose_name = "toolhub"

    def ready(self) -> None:
        # The services plug Table's document reader in (tools_app.models.table); they import the models, so
        # they can only load once the app registry is ready.
        from tools_app import services
        from tools_app.execution import records  # noqa: F401  (plugs the rows readers and writers into the services)

        checks.register(check_settings)
        # JSON log lines when asked (docs/operations.md), traces when an OTLP endpoint is set.
        telemetry.json_logs(JSON_LOGS.get())
        telemetry.setup_tracing()
        user_login_failed.connect(_login_failed, dispatch_uid="toolhub-login-failed-metric")
        # Revocation follows the user: a password change or a deactivation ends every credential it issued.
        services.user_credentials_watch(get_user_model())


def _login_failed(sender, **kwargs) -> None:
    telemetry.auth_failed("login")
