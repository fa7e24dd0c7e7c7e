"""The admin's history (django.contrib.admin's LogEntry) for writes made outside the admin.

Keys and tokens created and revoked through the API, the MCP endpoint or a command show up in the object's
history page and the admin's "Recent actions" like changes made in the admin. The model is reached through
the app registry, so the domain does not import the admin (and records nothing when it is not installed).
"""

from typing import Any

from django.apps import apps
from django.db import models

__all__ = ["ADDITION", "CHANGE", "DELETION", "history_record"]

# django.contrib.admin.models' action flags.
ADDITION = 1
CHANGE = 2
DELETION = 3


def history_record(*, actor: Any, obj: models.Model, action: int, message: str) -> None:
    """Add one entry to `obj`'s admin history, by `actor` (a user), with `message` as its text."""
    if not apps.is_installed("django.contrib.admin"):
        return
    log_entry = apps.get_model("admin", "LogEntry")
    log_entry.objects.log_actions(
        user_id=actor.pk, queryset=[obj], action_flag=action, change_message=message, single_object=True
    )
