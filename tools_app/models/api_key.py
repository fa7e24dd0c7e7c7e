"""ApiKey: a bearer key of one MCP instance, stored hashed (SPEC §2.3, §4.2)."""

import hashlib
import re
import secrets

from django.core.exceptions import ValidationError
from django.db import models

from tools_app.grants import attribute_problems
from tools_app.models.instance import McpInstance, OwnedThroughInstanceQuerySet

API_KEY_PREFIX = "thk_"
# What generate() makes: the prefix and 32 random bytes in URL-safe base64 (43 characters). Anything else
# is refused without a database lookup.
API_KEY_FORMAT = re.compile(r"thk_[A-Za-z0-9_-]{43}")


class ApiKey(models.Model):
    """A bearer key for one instance. Only a SHA-256 of the secret is stored; the plaintext is shown once."""

    mcp_instance = models.ForeignKey(
        McpInstance,
        on_delete=models.CASCADE,
        related_name="api_keys",
        verbose_name="MCP instance",
        error_messages={"invalid": "%(model)s with %(field)s %(value)r does not exist."},
    )
    label = models.CharField(max_length=200, blank=True)
    prefix = models.CharField(max_length=16, editable=False)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # What the key may use (tools_app.grants), fixed when it is issued: to change it, issue another key.
    read_only = models.BooleanField(
        default=False, db_default=False, help_text="A read-only key sees and calls only tools that change no data."
    )
    attributes = models.JSONField(
        default=dict,
        db_default={},
        blank=True,
        help_text="Values a binding's pinned arguments can take from the key: a JSON object of strings, e.g. "
        '{"customer": "acme"} (pinned as {"from": "key.attributes.customer"}).',
    )

    objects = OwnedThroughInstanceQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "id"]
        db_table = "mcp_app_apikey"  # created by mcp_app (see models/__init__.py)
        verbose_name = "API key"

    def __str__(self):
        return f"{self.label or 'key'} ({self.prefix}…)"

    @property
    def owner_id(self):
        return self.mcp_instance.owner_id

    def clean(self):
        problems = attribute_problems(self.attributes)
        if problems:
            raise ValidationError({"attributes": [ValidationError(p, code="invalid") for p in problems]})

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    @staticmethod
    def hash_key(plaintext: str) -> str:
        # The secret has 256 bits of entropy, so a fast hash is safe here (no dictionary attack).
        return hashlib.sha256(plaintext.encode()).hexdigest()

    @staticmethod
    def is_well_formed(plaintext: str) -> bool:
        """Whether `plaintext` has the shape of a key made by generate() (a cheap check before any lookup)."""
        return API_KEY_FORMAT.fullmatch(plaintext) is not None

    @staticmethod
    def generate() -> str:
        return API_KEY_PREFIX + secrets.token_urlsafe(32)
