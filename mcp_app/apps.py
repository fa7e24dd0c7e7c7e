from django.apps import AppConfig


class McpAppConfig(AppConfig):
    name = "mcp_app"
    verbose_name = "MCP"

    def ready(self):
        # API and admin calls are recorded through tools_app.calls (tools_app never imports mcp_app);
        # the call log is ours, so we plug in the recorder that writes its rows.
        from tools_app.calls import register_recorder

        from .recording import log_finished_call

        register_recorder(log_finished_call)
