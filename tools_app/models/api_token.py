"""ApiToken: a user's token for the JSON API (SPEC §6, `Authorization: Token <token>`), stored hashed.

The layout is django-rest-knox's AuthToken (a SHA-512 `digest` of the whole token, and the token's first 15
characters, `token_key`, to find the row), and settings point knox at this model (KNOX_TOKEN_MODEL), so the
API's authentication class (tools_app.api.authentication) is knox's with toolhub's checks added. The model is
declared here rather than inherited from knox so that the domain imports no DRF package.

A token stops working when it expires, when it is revoked (its row is deleted), when its user is deactivated,
and when its user's password changes: `password_fingerprint` is an HMAC of the password hash at issue time,
the same idea as Django's session invalidation on a password change.
"""

import hashlib
import re
import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.crypto import constant_time_compare, salted_hmac

API_TOKEN_PREFIX = "tht_"
# knox's scheme: the prefix, then 32 random bytes as 64 hex digits. Anything else is refused unlooked-up.
API_TOKEN_FORMAT = re.compile(r"tht_[0-9a-f]{64}")
TOKEN_KEY_LENGTH = 15  # knox's CONSTANTS.TOKEN_KEY_LENGTH: the stored, displayable start of a token


class ApiTokenQuerySet(models.QuerySet):
    def of_user(self, user) -> "ApiTokenQuerySet":
        """The tokens of `user` (a token is listed and revoked by its own user only, superusers included)."""
        if user is None or not user.is_authenticated:
            return self.none()
        return self.filter(user=user)

    def expired(self) -> "ApiTokenQuerySet":
        return self.filter(expiry__lt=timezone.now())


class ApiToken(models.Model):
    """An API token of one user. Only a SHA-512 of the token is stored; the token is shown once, at login."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="auth_token_set", editable=False
    )
    token_key = models.CharField("prefix", max_length=25, db_index=True, editable=False)
    digest = models.CharField(max_length=128, unique=True, editable=False)
    password_fingerprint = models.CharField(max_length=64, editable=False)
    created = models.DateTimeField(auto_now_add=True)
    expiry = models.DateTimeField(null=True, blank=True, editable=False)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]
        verbose_name = "API token"

    def __str__(self):
        return f"{self.token_key}… of {self.user}"

    @property
    def expired(self) -> bool:
        return self.expiry is not None and self.expiry <= timezone.now()

    def matches_password_of(self, user) -> bool:
        """Whether `user`'s password is still the one the token was issued under."""
        return constant_time_compare(self.password_fingerprint, self.fingerprint(user))

    @staticmethod
    def fingerprint(user) -> str:
        return salted_hmac("toolhub.ApiToken.password", user.password, algorithm="sha256").hexdigest()

    @staticmethod
    def is_well_formed(token: str) -> bool:
        return API_TOKEN_FORMAT.fullmatch(token) is not None

    @staticmethod
    def hash_token(token: str) -> str:
        # knox's hash: SHA-512 of the token text. 256 random bits: a fast hash is safe (no dictionary attack).
        return hashlib.sha512(token.encode()).hexdigest()

    @staticmethod
    def generate() -> str:
        return API_TOKEN_PREFIX + secrets.token_hex(32)
