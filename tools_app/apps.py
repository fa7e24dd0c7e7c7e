from django.apps import AppConfig


class ToolsAppConfig(AppConfig):
    name = "tools_app"
    verbose_name = "Tools"

    def ready(self) -> None:
        from django.core import checks

        from .rate_limits import check_settings

        checks.register(check_settings)
