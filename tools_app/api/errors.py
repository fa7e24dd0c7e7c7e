"""The API's single exception handler: every failure becomes `{"error", "message", "fields"}` (SPEC §6).

`fields` is present only for validation errors. Codes are the UPPER_SNAKE codes of tools_app.kernel.errors for
domain failures and DRF's own codes upper-cased for protocol failures (NOT_AUTHENTICATED, PARSE_ERROR,
METHOD_NOT_ALLOWED, ...). Anything unexpected is a 500 with a log line and no user data in the body.
"""

import logging
import math
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ObjectDoesNotExist, RequestDataTooBig
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DatabaseError, IntegrityError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.serializers import as_serializer_error
from rest_framework.settings import api_settings
from rest_framework.views import set_rollback

from tools_app.kernel import telemetry
from tools_app.kernel.errors import ErrorCode, ToolhubError

logger = logging.getLogger("toolhub.api")

__all__ = ["error_body", "exception_handler", "flatten_fields"]

# Django 5.2 reports a save that found its row deleted meanwhile (save(force_update=True) or update_fields)
# as a bare DatabaseError with one of these messages; Django 6.0 raises Model.NotUpdated, an
# ObjectDoesNotExist, instead.
SAVE_FOUND_NO_ROW = frozenset(
    {"Forced update did not affect any rows.", "Save with update_fields did not affect any rows."}
)
GONE_MESSAGE = "The object no longer exists: it was deleted while the request ran."


def error_body(code: str, message: str, fields: dict | None = None, details: dict | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"error": str(code), "message": message}
    if fields is not None:
        body["fields"] = fields
    if details:
        body["details"] = details
    return body


def flatten_fields(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """DRF's error tree as `{field: [messages]}`; nested errors get dotted keys (`arguments.query`)."""
    if isinstance(detail, Mapping):
        flat: dict[str, list[str]] = {}
        for key, value in detail.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            for field, messages in flatten_fields(value, name).items():
                flat.setdefault(field, []).extend(messages)
        return flat
    if isinstance(detail, list | tuple):
        if all(not isinstance(item, Mapping | list | tuple) for item in detail):
            return {prefix or api_settings.NON_FIELD_ERRORS_KEY: [str(item) for item in detail]}
        flat = {}
        for index, item in enumerate(detail):
            for field, messages in flatten_fields(item, f"{prefix}.{index}" if prefix else str(index)).items():
                flat.setdefault(field, []).extend(messages)
        return flat
    return {prefix or api_settings.NON_FIELD_ERRORS_KEY: [str(detail)]}


def _first_with_code(detail: Any, code: str) -> str | None:
    """The first message in an error tree carrying `code` (ErrorDetail keeps the Django error's code)."""
    if isinstance(detail, Mapping):
        detail = list(detail.values())
    if isinstance(detail, list | tuple):
        for item in detail:
            found = _first_with_code(item, code)
            if found is not None:
                return found
        return None
    return str(detail) if getattr(detail, "code", None) == code else None


def _validation_response(detail: Any) -> Response:
    fields = flatten_fields(detail)
    # SPEC §2.4/§8: a binding-name collision (binding, override or rename) is a 409 NAME_CONFLICT.
    conflict = _first_with_code(detail, ErrorCode.NAME_CONFLICT)
    if conflict is not None:
        return Response(error_body(ErrorCode.NAME_CONFLICT, conflict, fields), status=status.HTTP_409_CONFLICT)
    return Response(error_body(ErrorCode.VALIDATION_ERROR, "Invalid input.", fields), status=400)


def exception_handler(exc: Exception, context: dict) -> Response:
    """REST_FRAMEWORK["EXCEPTION_HANDLER"]: map any exception to the one error shape, with the request's id
    (`request_id`, as in its X-Request-ID header) so that a user can quote it."""
    response = _response_for(exc, context)
    rid = telemetry.error_request_id()
    if rid is not None and isinstance(response.data, dict):
        response.data["request_id"] = rid
    return response


def _response_for(exc: Exception, context: dict) -> Response:
    set_rollback()
    if isinstance(exc, exceptions.AuthenticationFailed):
        telemetry.auth_failed("api")
    if isinstance(exc, DjangoValidationError):
        return _validation_response(as_serializer_error(exc))
    if isinstance(exc, exceptions.ValidationError):
        return _validation_response(as_serializer_error(exc))
    if isinstance(exc, ToolhubError):
        # The code's status comes from the one table of codes (tools_app.kernel.errors.ERROR_CODES).
        return Response(
            error_body(exc.code, exc.message, details=exc.details), status=exc.status, headers=_retry_after(exc)
        )
    if isinstance(exc, exceptions.Throttled):
        # A DRF throttle that returned False instead of raising RateLimited: the same code and header.
        wait = max(1, math.ceil(exc.wait or 1))
        return Response(
            error_body(ErrorCode.RATE_LIMITED, f"Too many requests. Retry in {wait} s.", details={"retry_after": wait}),
            status=status.HTTP_429_TOO_MANY_REQUESTS,
            headers={"Retry-After": str(wait)},
        )
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or None)
    elif isinstance(exc, ObjectDoesNotExist) or (isinstance(exc, DatabaseError) and str(exc) in SAVE_FOUND_NO_ROW):
        # The view found the object, then a concurrent request deleted it before the service's write.
        exc = exceptions.NotFound(GONE_MESSAGE)
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    elif isinstance(exc, IntegrityError):
        # A uniqueness race lost after validation passed: the write was rolled back, nothing half-applied.
        logger.warning("IntegrityError turned into 409: %s", exc)
        return Response(
            error_body("CONFLICT", "The change conflicts with data saved at the same time; retry the request."),
            status=status.HTTP_409_CONFLICT,
        )
    if isinstance(exc, RequestDataTooBig):
        # A body that declared no length and ran past DATA_UPLOAD_MAX_MEMORY_SIZE (= TOOLHUB_MAX_REQUEST_BYTES);
        # one that declared its length was refused before the view (toolhub.request_limits).
        return Response(
            error_body(ErrorCode.REQUEST_TOO_LARGE, f"The request body is over the limit ({exc})."),
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, RecursionError):
        # json.loads and the validators give up on input nested deeper than Python's recursion limit.
        return Response(
            error_body(ErrorCode.VALIDATION_ERROR, "The input is nested too deeply to process."),
            status=status.HTTP_400_BAD_REQUEST,
        )
    if isinstance(exc, exceptions.APIException):
        headers = {}
        if getattr(exc, "auth_header", None):
            headers["WWW-Authenticate"] = exc.auth_header
        if getattr(exc, "wait", None):
            headers["Retry-After"] = str(int(exc.wait))
        code = exc.get_codes() if isinstance(exc.get_codes(), str) else exc.default_code
        return Response(error_body(code.upper(), _message(exc.detail)), status=exc.status_code, headers=headers)
    view = context.get("view")
    logger.exception("Unhandled error in %s", type(view).__name__ if view else "the API", exc_info=exc)
    return Response(
        error_body(ErrorCode.INTERNAL_ERROR, "An unexpected error occurred; it has been logged."),
        status=status.HTTP_500_INTERNAL_SERVER_ERROR,
    )


def _retry_after(exc: ToolhubError) -> dict[str, str]:
    """RATE_LIMITED answers say when to try again (RFC 9110 Retry-After, whole seconds)."""
    retry_after = exc.details.get("retry_after") if exc.code == ErrorCode.RATE_LIMITED else None
    return {"Retry-After": str(retry_after)} if retry_after is not None else {}


def _message(detail: Any) -> str:
    if isinstance(detail, Mapping):
        detail = next(iter(detail.values()), "")
    if isinstance(detail, list | tuple):
        detail = detail[0] if detail else ""
    return str(detail)
