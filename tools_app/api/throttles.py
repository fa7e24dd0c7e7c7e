"""The API's DRF throttles: DRF decides when to ask (`APIView.check_throttles`, after
authentication and permissions, before the view does anything), tools_app.kernel.rate_limits counts.

- UserRateThrottle: every request of an authenticated user (token or session), one bucket per user; a refusal
  is counted for the user's activity page (tools_app.services.refusals).
- AnonRateThrottle: requests without a user to views open to anonymous callers, one bucket per IP (views
  that need a user answer 401 before any throttle runs, so unauthenticated traffic never reaches the store).
- TokenRateThrottle: POST /api/auth/token/, one bucket per IP, whatever the credentials.

A request over its rate raises RateLimited (RATE_LIMITED, 429, with `retry_after`), which the API's
exception handler answers with `Retry-After`; it is raised rather than returned as False so that the
answer names the limit. Rates: settings.TOOLHUB_RATE_LIMITS, read per request.
"""

from rest_framework.throttling import BaseThrottle

from tools_app.kernel import rate_limits
from tools_app.kernel.rate_limits import COUNTED_SCOPE_KEY
from tools_app.services.refusals import refusals

__all__ = ["AnonRateThrottle", "TokenRateThrottle", "UserRateThrottle"]


class UserRateThrottle(BaseThrottle):
    """One bucket per authenticated user: the `user` rate."""

    def allow_request(self, request, view) -> bool:
        user = request.user
        if user is not None and user.is_authenticated:
            try:
                rate_limits.hit(rate_limits.Bucket.of(rate_limits.API_USER, user.pk))
            except rate_limits.RateLimited:
                # Counted for the user's activity page: in memory, written at most every few seconds.
                if refusals.count(owner_id=user.pk, instance_id=None, scope=rate_limits.API_USER):
                    refusals.flush()
                raise
        return True


class AnonRateThrottle(BaseThrottle):
    """One bucket per client IP for anonymous requests that a view lets through: the `anon` rate."""

    def allow_request(self, request, view) -> bool:
        user = request.user
        if user is None or not user.is_authenticated:
            rate_limits.hit(rate_limits.Bucket.of(rate_limits.ANON, self.get_ident(request)))
        return True


class TokenRateThrottle(BaseThrottle):
    """The token endpoint: one bucket per client IP, the `token` rate (password guessing costs time)."""

    def allow_request(self, request, view) -> bool:
        # Served by the ASGI server, the login gate (toolhub/login_gate.py) already counted this request in
        # the same bucket before Django ran; count it once.
        if not getattr(request._request, "scope", {}).get(COUNTED_SCOPE_KEY):
            rate_limits.hit(rate_limits.Bucket.of(rate_limits.TOKEN, self.get_ident(request)))
        return True
