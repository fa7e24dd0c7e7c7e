"""Helpers for the API tests: clients for a user, and a snapshot of every row to prove nothing was written."""

from typing import Any

from django.apps import apps
from rest_framework.test import APIClient

# Every model an API request could write (auth tokens included: a denied request must not mint one).
WATCHED_MODELS = (
    "tools_app.Table",
    "tools_app.TableChange",
    "tools_app.Tool",
    "tools_app.McpInstance",
    "tools_app.ApiKey",
    "tools_app.Binding",
    "tools_app.Prompt",
    "tools_app.CallLog",
    "tools_app.ApiToken",
    "admin.LogEntry",
)


def client_for(user=None) -> APIClient:
    """An APIClient authenticated as `user` (anonymous when None)."""
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def db_snapshot() -> dict[str, list[dict[str, Any]]]:
    """Every row of the watched models, field by field, in a stable order."""
    snapshot = {}
    for label in WATCHED_MODELS:
        model = apps.get_model(label)
        snapshot[label] = list(model.objects.order_by("pk").values())
    return snapshot
