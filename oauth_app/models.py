"""What toolhub keeps beside django-oauth-toolkit's tables."""

from django.conf import settings
from django.contrib.auth.hashers import identify_hasher
from django.core.exceptions import ValidationError
from django.db import models
from oauth2_provider.models import AbstractApplication, RefreshToken

from oauth_app.client_secrets import CLIENT_SECRET_PREFIX, hashing_client_secrets, is_generated_secret

# The schemes a client's redirect URIs may use; oauth_app.validators allows http only to a loopback address.
REDIRECT_SCHEMES = ("https", "http")


class Client(AbstractApplication):
    """django-oauth-toolkit's application, swapped in (OAUTH2_PROVIDER_APPLICATION_MODEL) for one rule:
    a redirect URI may be `http` as well as `https`, and oauth_app.validators allows `http` only to a loopback
    address (RFC 8252: a native client's own callback, as VS Code, Claude Code and the SDK use). Everything else
    keeps the setting ALLOWED_REDIRECT_URI_SCHEMES = ["https"]."""

    # When an owner first approved the client (its first authorization code). A client registered by dynamic
    # registration or a metadata document that nobody approved within TOOLHUB_OAUTH_UNUSED_CLIENT_HOURS is
    # deleted (oauth_app.registration), and at most TOOLHUB_OAUTH_DCR_MAX_UNUSED_CLIENTS of them may wait.
    used_at = models.DateTimeField(null=True, blank=True, editable=False)
    # When the client first authenticated with a secret not of the generated shape that is checked fast (stored
    # with the fast client-secret hasher, rehashed then if it was not): the mark every worker's login gate
    # reads, so that the client's requests take no hashing slot (oauth_app.client_secrets.FastSecretClients).
    # Set by oauth_app.validators; only clients registered before client secrets had their own hasher get one.
    old_secret_fast_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta(AbstractApplication.Meta):
        swappable = "OAUTH2_PROVIDER_APPLICATION_MODEL"
        verbose_name = "OAuth client"
        indexes = [
            models.Index(fields=["registration_source", "used_at", "created"], name="oauth_client_unused"),
            # The marked clients alone, read by every worker at most once a second.
            models.Index(
                fields=["client_id"],
                name="oauth_client_old_secret_fast",
                condition=models.Q(old_secret_fast_at__isnull=False),
            ),
        ]

    def get_allowed_schemes(self):
        return list(REDIRECT_SCHEMES)

    def clean(self):
        super().clean()
        # A secret to be hashed is stored with the fast client-secret hasher (oauth_app.client_secrets), which is
        # safe only for a secret nothing can guess: one this server generated, never one a person typed.
        secret = self.client_secret or ""
        if self.hash_client_secret and secret and not is_generated_secret(secret):
            try:
                identify_hasher(secret)  # stored already (an existing client's): nothing new to hash
            except ValueError:
                raise ValidationError(
                    {
                        "client_secret": f"A client secret must be one this server generates ({CLIENT_SECRET_PREFIX} "
                        "and 43 random letters or digits): keep the value the form was given."
                    }
                ) from None

    def full_clean(self, *args, **kwargs):
        super().full_clean(*args, **kwargs)
        if self._state.adding and self.registration_source == self.RegistrationSource.CIMD:
            # A metadata-document client is public (the library makes it so on every fetch) and never sends a
            # secret: it gets none. An empty secret authenticates nothing a public client_id does not.
            self.client_secret, self.hash_client_secret = "", False

    def save(self, *args, **kwargs):
        # django-oauth-toolkit hashes a new secret as the row is saved, with CLIENT_SECRET_HASHER: the fast
        # client-secret hasher, which hashes only inside this block.
        with hashing_client_secrets():
            super().save(*args, **kwargs)


class ClientDocument(models.Model):
    """The display fields of a client's metadata document (CIMD), as last fetched: shown on the consent page.
    Only documents fetched from the client's own https client_id URL are kept here; a dynamically registered
    client has no row, so it never shows a logo."""

    client_id = models.CharField(max_length=255, unique=True)
    logo_uri = models.URLField(max_length=2000, blank=True)
    client_uri = models.URLField(max_length=2000, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self):
        return self.client_id


class AuthorizedClient(RefreshToken):
    """An authorization a user gave a client for one instance: a live refresh token (the newest of its
    rotation chain). Revoking it revokes its access token too."""

    class Meta:
        proxy = True
        verbose_name = "authorized client"
        verbose_name_plural = "authorized clients"


class RedeemedCode(models.Model):
    """An authorization code already exchanged for tokens: its SHA-256 and the refresh-token family the exchange
    started. When the code is presented again (a replay: someone else holds it, RFC 6749 §4.1.2), every token of
    that family is revoked (oauth_app.validators). Kept as long as a refresh token of the family may live."""

    code_checksum = models.CharField(max_length=64, db_index=True)
    application = models.ForeignKey(settings.OAUTH2_PROVIDER_APPLICATION_MODEL, on_delete=models.CASCADE)
    token_family = models.UUIDField()
    expires = models.DateTimeField(db_index=True)

    class Meta:
        verbose_name = "redeemed authorization code"

    def __str__(self):
        return f"code {self.code_checksum[:12]}… (family {self.token_family})"
