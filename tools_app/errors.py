"""Error codes and the base error every toolhub layer raises (SPEC §6, §8).

Surfaces translate a ToolhubError: the API into `{"error", "message", "fields"}`, MCP into an
`isError` result whose text starts with the code, the admin into a message.
"""

from enum import StrEnum
from typing import Any


class ErrorCode(StrEnum):
    VALIDATION_ERROR = "VALIDATION_ERROR"
    NOT_FOUND = "NOT_FOUND"
    NAME_CONFLICT = "NAME_CONFLICT"
    TOOL_NOT_FOUND = "TOOL_NOT_FOUND"
    TOOL_DISABLED = "TOOL_DISABLED"
    TOOL_NOT_CALLABLE = "TOOL_NOT_CALLABLE"
    INVALID_ARGUMENTS = "INVALID_ARGUMENTS"
    INVALID_QUERY = "INVALID_QUERY"
    MOUNT_NOT_FOUND = "MOUNT_NOT_FOUND"
    MOUNT_TYPE_MISMATCH = "MOUNT_TYPE_MISMATCH"
    KEY_EXISTS = "KEY_EXISTS"
    KEY_NOT_FOUND = "KEY_NOT_FOUND"
    RESULT_TOO_LARGE = "RESULT_TOO_LARGE"
    INVALID_SEARCH_METHOD = "INVALID_SEARCH_METHOD"
    INVALID_CATEGORY = "INVALID_CATEGORY"
    REGISTRATION_FAILED = "REGISTRATION_FAILED"
    SEARCH_UNAVAILABLE = "SEARCH_UNAVAILABLE"


class ToolhubError(Exception):
    """An expected failure with a stable code, a message for people and models, and details."""

    def __init__(self, code: ErrorCode | str, message: str, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.code = ErrorCode(code)
        self.message = message
        self.details = details or {}

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"error": str(self.code), "message": self.message}
        if self.details:
            data["details"] = self.details
        return data

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"
