"""The admin interface (SPEC §7): tables and tools (tools.py), MCP instances, bindings, keys and the call log
(instances.py), API tokens (tokens.py). Importing this package registers every ModelAdmin on the default site."""

from tools_app.admin import instances, tokens, tools
from tools_app.admin.tools import OwnedAdmin, TableAdmin, ToolAdmin

__all__ = ["OwnedAdmin", "TableAdmin", "ToolAdmin", "instances", "tokens", "tools"]
