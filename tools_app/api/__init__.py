"""The JSON API of tools_app (SPEC §6): tables, tools, the token endpoint, the error handler."""
