"""THE table of error codes (SPEC §6, §8): one meaning per code, on every surface.

Each surface translates a ToolhubError the same way: the API into `{"error", "message", "fields"}` with
the code's HTTP status below, MCP into an `isError` result whose text starts with the code (TOOL_NOT_FOUND
and an external tool's TOOL_NOT_CALLABLE are JSON-RPC -32602 there, SPEC §4.4 and §8), the admin's try-it
into the code and message on the page. docs/errors.md is this table for readers; a test keeps the two
equal. A new code is one row here (and one in docs/errors.md).
"""

from dataclasses import dataclass
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
    QUERY_TOO_EXPENSIVE = "QUERY_TOO_EXPENSIVE"
    CURSOR_EXPIRED = "CURSOR_EXPIRED"
    RATE_LIMITED = "RATE_LIMITED"
    REQUEST_TOO_LARGE = "REQUEST_TOO_LARGE"
    VERSION_CONFLICT = "VERSION_CONFLICT"
    IDEMPOTENCY_KEY_REUSED = "IDEMPOTENCY_KEY_REUSED"
    PRECONDITION_FAILED = "PRECONDITION_FAILED"
    QUOTA_EXCEEDED = "QUOTA_EXCEEDED"
    IN_USE = "IN_USE"
    INTERNAL_ERROR = "INTERNAL_ERROR"


@dataclass(frozen=True, slots=True)
class ErrorMeaning:
    status: int  # the HTTP status of the API's answer
    meaning: str  # what the code says, whatever the surface


ERROR_CODES: dict[ErrorCode, ErrorMeaning] = {
    ErrorCode.VALIDATION_ERROR: ErrorMeaning(400, "The request's fields are invalid; `fields` names each one."),
    ErrorCode.NOT_FOUND: ErrorMeaning(404, "No such object, or not the caller's (SPEC §2: it behaves as absent)."),
    ErrorCode.NAME_CONFLICT: ErrorMeaning(
        409,
        "A tool's effective name, or a prompt's name, is already used on an instance (ignoring case); the message "
        "names the tool or prompt and the instance.",
    ),
    ErrorCode.TOOL_NOT_FOUND: ErrorMeaning(
        400,
        "No enabled tool of that name where it was called (an MCP instance, or a registry scope), or none in the "
        "caller's set there (a write through a read-only key, instance or binding; a binding whose pinned "
        "arguments need a value the caller lacks).",
    ),
    ErrorCode.TOOL_DISABLED: ErrorMeaning(400, "The tool exists but its binding is disabled."),
    ErrorCode.TOOL_NOT_CALLABLE: ErrorMeaning(
        400,
        "The tool cannot run here: an external tool served elsewhere, a registry tool without a scope, a tool whose "
        "stored input schema cannot be applied safely (docs/input-limits.md), or a binding pinning an argument its "
        "tool no longer declares.",
    ),
    ErrorCode.INVALID_ARGUMENTS: ErrorMeaning(
        400, "The arguments fail the tool's input schema, or send an argument the binding pins; names the argument."
    ),
    ErrorCode.INVALID_QUERY: ErrorMeaning(400, "The JMESPath expression (or search pattern) is invalid; says where."),
    ErrorCode.MOUNT_NOT_FOUND: ErrorMeaning(400, "The tool's table or its json_path mount does not exist."),
    ErrorCode.MOUNT_TYPE_MISMATCH: ErrorMeaning(400, "The mount holds another kind of value than the tool needs."),
    ErrorCode.KEY_EXISTS: ErrorMeaning(400, "A create names a key that exists (or repeats one); nothing was written."),
    ErrorCode.KEY_NOT_FOUND: ErrorMeaning(400, "An update or delete names a missing key; nothing was written."),
    ErrorCode.RESULT_TOO_LARGE: ErrorMeaning(
        400,
        "A read's result is over the result budget (an instance's max_result_bytes; TOOLHUB_MAX_RESULT_BYTES off"
        " MCP) and is not a list to page; names its size and the budget, and how to narrow the call.",
    ),
    ErrorCode.INVALID_SEARCH_METHOD: ErrorMeaning(400, "Unknown search method; lists the methods."),
    ErrorCode.INVALID_CATEGORY: ErrorMeaning(400, "Unknown category; lists the categories that exist."),
    ErrorCode.REGISTRATION_FAILED: ErrorMeaning(400, "register_tool refused; the message gives the reason."),
    ErrorCode.SEARCH_UNAVAILABLE: ErrorMeaning(400, "The search method needs an extra that is not installed."),
    ErrorCode.QUERY_TOO_EXPENSIVE: ErrorMeaning(
        400, "A call went over its time or size budget and was stopped; names the limit and how to narrow the call."
    ),
    ErrorCode.CURSOR_EXPIRED: ErrorMeaning(
        400, "A paging cursor no longer matches: the table changed, or it belongs to another tool or arguments."
    ),
    ErrorCode.RATE_LIMITED: ErrorMeaning(
        429, "Too many requests or concurrent calls for this key or user; `Retry-After` says when to try again."
    ),
    ErrorCode.REQUEST_TOO_LARGE: ErrorMeaning(413, "The request body is over the server's limit; names the limit."),
    ErrorCode.VERSION_CONFLICT: ErrorMeaning(
        409, "A write named an expected_version the table is no longer at; names the current one. Nothing was written."
    ),
    ErrorCode.IDEMPOTENCY_KEY_REUSED: ErrorMeaning(
        409,
        "An idempotency_key used on this table in the last 24 h came again with other arguments; nothing was written.",
    ),
    ErrorCode.PRECONDITION_FAILED: ErrorMeaning(
        412, "A table write's If-Match names another version than the table's; names the current one (its ETag)."
    ),
    ErrorCode.QUOTA_EXCEEDED: ErrorMeaning(
        413,
        "A write would take the owner over a storage quota; names the quota, its limit and usage. Nothing was written.",
    ),
    ErrorCode.IN_USE: ErrorMeaning(
        409,
        "A delete, rename or breaking schema change of something in use (bound and enabled on an enabled instance, "
        "or called lately); `details.used_by` names the instances, tools and clients. Nothing was changed; "
        "confirm (the API's ?force=true) to go on.",
    ),
    ErrorCode.INTERNAL_ERROR: ErrorMeaning(
        500, "An unexpected failure on the server; it was logged, and the answer reveals nothing of it."
    ),
}


class ToolhubError(Exception):
    """An expected failure with a stable code, a message for people and models, and details."""

    def __init__(self, code: ErrorCode | str, message: str, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.code = ErrorCode(code)
        self.message = message
        self.details = details or {}

    @property
    def status(self) -> int:
        """The HTTP status the API answers this error with."""
        return ERROR_CODES[self.code].status

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"error": str(self.code), "message": self.message}
        if self.details:
            data["details"] = self.details
        return data

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class ToolError(ToolhubError):
    """A tool call that failed for a reason the caller can act on (bad arguments, missing key, ...)."""


__all__ = ["ERROR_CODES", "ErrorCode", "ErrorMeaning", "ToolError", "ToolhubError"]
