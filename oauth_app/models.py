"""What toolhub keeps beside django-oauth-toolkit's tables (issue 16)."""

from django.db import models
from oauth2_provider.models import RefreshToken


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
