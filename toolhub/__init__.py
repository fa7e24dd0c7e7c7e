"""toolhub: JSON tables as MCP tools."""

__version__ = "0.1.0"  # the version in pyproject.toml (a test keeps them equal); MCP serverInfo names it
