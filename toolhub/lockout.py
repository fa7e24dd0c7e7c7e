"""The answer to a login refused by django-axes' lockout (settings AXES_LOCKOUT_CALLABLE).

On the API (`POST /api/auth/token/`): HTTP 429 with the API's error shape and code RATE_LIMITED; on the admin
login: HTTP 429 with a short page. Both carry `Retry-After` (seconds until the lockout ends).
"""

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.html import escape

from tools_app.kernel import telemetry
from tools_app.kernel.errors import ErrorCode

__all__ = ["lockout_response"]


def lockout_response(request: HttpRequest, *args: object) -> HttpResponse:
    """axes calls this as (request, original_response, credentials), or (request, credentials) when async."""
    from axes.helpers import get_cool_off  # axes reads its settings when imported: after Django is set up

    cool_off = get_cool_off(request)
    seconds = int(cool_off.total_seconds()) if cool_off else None
    wait = f"try again in {max(1, round(seconds / 60))} minute(s)" if seconds else "ask an administrator to unlock"
    message = f"Too many failed logins for this username from this address: {wait}."
    telemetry.rate_limited("login_lockout")
    if request.path.startswith("/api/"):
        body = {"error": ErrorCode.RATE_LIMITED.value, "message": message}
        if (rid := telemetry.error_request_id()) is not None:
            body["request_id"] = rid
        response: HttpResponse = JsonResponse(body, status=429)
    else:
        response = HttpResponse(
            f"<!doctype html><title>Login locked</title><h1>Login locked</h1><p>{escape(message)}</p>",
            status=429,
        )
    if seconds:
        response["Retry-After"] = str(seconds)
    return response
