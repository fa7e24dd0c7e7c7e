from django.apps import AppConfig


class McpAppConfig(AppConfig):
    """The MCP interface (SPEC §4): the endpoint /mcp/<slug>/ over the domain in tools_app.

    It has no models of its own any more: McpInstance, ApiKey, Binding and CallLog moved to tools_app
    (tools_app migration 0005); its migrations stay, as the history of their tables.
    """

    name = "mcp_app"
    verbose_name = "MCP"
