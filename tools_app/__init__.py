"""toolhub's domain package."""

__version__ = "0.1.0"  # toolhub's version, as in pyproject.toml (a test keeps them equal); MCP serverInfo names it
