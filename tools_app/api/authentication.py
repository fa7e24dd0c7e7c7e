"""`Authorization: Token <token>` for the JSON API (SPEC §6), hashed and expiring tokens.

django-rest-knox's TokenAuthentication parses the header and answers `WWW-Authenticate: Token`; the lookup
is toolhub's, over tools_app.models.ApiToken (knox's layout):

1. A token not of the issued format is refused without a database query.
2. A digest already found to match no token is refused from memory: tokens are random, so such a digest
   can never become valid. The memory is bounded (least recently used goes), so a flood of random tokens
   cannot grow it without end.
3. Otherwise one query (the token row with its user) decides: expired, user deactivated, or password
   changed since the token was issued → 401. Nothing valid is cached: a revocation, a deactivation or a
   password change made through any worker is seen by the next request on every worker.
"""

from django.utils.translation import gettext_lazy as _
from knox.auth import TokenAuthentication as KnoxTokenAuthentication
from rest_framework import exceptions

from tools_app.kernel.caches import LruCache
from tools_app.models import ApiToken
from tools_app.models.api_token import TOKEN_KEY_LENGTH

__all__ = ["TokenAuthentication", "unknown_token_digests"]

# Digests that matched no token row (a burst of bad tokens must not cost a query each).
unknown_token_digests: LruCache[str, bool] = LruCache("api-unknown-token-digests", capacity=10_000)


class TokenAuthentication(KnoxTokenAuthentication):
    """knox's `Token` header scheme over ApiToken, with refusals from memory for tokens that cannot be valid."""

    def authenticate_credentials(self, token: bytes):
        text = token.decode("utf-8", errors="replace")
        if not ApiToken.is_well_formed(text):
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        digest = ApiToken.hash_token(text)
        if digest in unknown_token_digests:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        row = ApiToken.objects.select_related("user").filter(token_key=text[:TOKEN_KEY_LENGTH], digest=digest).first()
        if row is None:
            unknown_token_digests.put(digest, True)
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        if row.expired:
            raise exceptions.AuthenticationFailed(_("Token expired: log in again (POST /api/auth/token/)."))
        if not row.user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        if not row.matches_password_of(row.user):
            raise exceptions.AuthenticationFailed(
                _("Token revoked: the password changed since it was issued. Log in again (POST /api/auth/token/).")
            )
        return (row.user, row)
