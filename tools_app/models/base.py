"""OwnedModel: the owner and timestamps every owned object has (SPEC §2)."""

from django.conf import settings
from django.db import models

from tools_app.permissions import OwnedQuerySet


class OwnedModel(models.Model):
    """An object with an owner and timestamps; see permissions.OwnedQuerySet for who sees it."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = OwnedQuerySet.as_manager()

    class Meta:
        abstract = True
