"""The typed error of the data-access layer."""

from ..errors import ErrorCode, ToolhubError


class ToolError(ToolhubError):
    """A tool call that failed for a reason the caller can act on (bad arguments, missing key, ...)."""


__all__ = ["ErrorCode", "ToolError"]
