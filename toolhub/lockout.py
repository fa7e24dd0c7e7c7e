"""Answers to a login refused before its password was checked (settings AXES_LOCKOUT_CALLABLE, MIDDLEWARE).

- django-axes' lockout: too many failed logins for one username from one address.
- PasswordCheckBusy (toolhub.passwords): every password-hashing slot of the process is taken.

On the API and the OAuth endpoints: HTTP 429 with the API's error shape and code RATE_LIMITED; on the admin
login: HTTP 429 with a short page. Both carry `Retry-After` (seconds) when the wait is known. The API's own
views answer PasswordCheckBusy through the API's exception handler (it is a ToolhubError); the middleware
here answers it for every other view (the admin login, the OAuth token endpoint).
"""

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.deprecation import MiddlewareMixin
from django.utils.html import escape

from toolhub.passwords import PasswordCheckBusy, serving_request
from tools_app.kernel import telemetry
from tools_app.kernel.errors import ErrorCode

__all__ = ["PasswordCheckBusyMiddleware", "lockout_response"]

JSON_PATHS = ("/api/", "/oauth/")


def _refusal(request: HttpRequest, title: str, message: str, seconds: int | None) -> HttpResponse:
    if request.path.startswith(JSON_PATHS):
        body = {"error": ErrorCode.RATE_LIMITED.value, "message": message}
        if (rid := telemetry.error_request_id()) is not None:
            body["request_id"] = rid
        response: HttpResponse = JsonResponse(body, status=429)
    else:
        response = HttpResponse(
            f"<!doctype html><title>{escape(title)}</title><h1>{escape(title)}</h1><p>{escape(message)}</p>",
            status=429,
        )
    if seconds:
        response["Retry-After"] = str(seconds)
    return response


def lockout_response(request: HttpRequest, *args: object) -> HttpResponse:
    """axes calls this as (request, original_response, credentials), or (request, credentials) when async."""
    from axes.helpers import get_cool_off  # axes reads its settings when imported: after Django is set up

    cool_off = get_cool_off(request)
    seconds = int(cool_off.total_seconds()) if cool_off else None
    wait = f"try again in {max(1, round(seconds / 60))} minute(s)" if seconds else "ask an administrator to unlock"
    message = f"Too many failed logins for this username from this address: {wait}."
    telemetry.rate_limited("login_lockout")
    return _refusal(request, "Login locked", message, seconds)


class PasswordCheckBusyMiddleware(MiddlewareMixin):
    """A view that asked for a password hash while every slot was taken answers 429 (see the module). It also
    marks what it wraps as serving a request (toolhub.passwords.serving_request): a hash there is refused at
    once when no slot is free, where a hash outside a request (a management command) waits for one."""

    def __call__(self, request: HttpRequest):  # type: ignore[override]
        if self.async_mode:
            return self.__acall__(request)
        with serving_request():
            return super().__call__(request)

    async def __acall__(self, request: HttpRequest):  # type: ignore[override]
        with serving_request():
            return await super().__acall__(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, PasswordCheckBusy):
            return _refusal(request, "Server busy", exception.message, exception.retry_after)
        return None
