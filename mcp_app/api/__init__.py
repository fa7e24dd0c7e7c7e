"""The JSON API of mcp_app (SPEC §6): MCP instances, their API keys, bindings."""
