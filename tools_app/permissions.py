"""THE ownership rule (SPEC §2): a user sees and changes only what it owns; superusers see all.

Every surface starts from here: the admin (`OwnedAdmin`), the API (`OwnedViewSetMixin`) and the MCP
endpoint (through the instance's owner). Nothing in this module knows about DRF or the admin.
"""

from typing import Any

from django.db import models


def is_active_user(user: Any) -> bool:
    return user is not None and getattr(user, "is_authenticated", False) and getattr(user, "is_active", False)


class OwnedQuerySet(models.QuerySet):
    def for_user(self, user: Any) -> "OwnedQuerySet":
        """Rows `user` may see and change: its own; all of them for a superuser; none for anonymous."""
        if not is_active_user(user):
            return self.none()
        if user.is_superuser:
            return self.all()
        return self.filter(**{self.owner_lookup: user})

    # Models that are owned through a relation (e.g. a Binding through its instance) override this.
    owner_lookup = "owner"


def can_change(user: Any, obj: Any) -> bool:
    """Whether `user` may see and change `obj` (an owned model instance)."""
    if not is_active_user(user):
        return False
    if user.is_superuser:
        return True
    return obj.owner_id == user.pk
