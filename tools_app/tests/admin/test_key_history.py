"""MCP keys created and revoked through the API, the admin or a command show up in the admin's
history of the key (django.contrib.admin's LogEntry), by whoever did it."""

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.core.management import call_command
from django.urls import reverse

from tests.api_helpers import client_for, db_snapshot
from tools_app.models import ApiKey

pytestmark = pytest.mark.django_db


def entries():
    return [
        (entry.user.username, entry.action_flag, entry.object_id, entry.change_message)
        for entry in LogEntry.objects.order_by("pk").select_related("user")
    ]


def test_api_create_and_revoke_are_in_the_keys_history(owner, instance):
    """POST then DELETE /api/mcp-instances/<id>/keys/: an addition and a change, by the owner, naming the API."""
    # when
    key_id = (
        client_for(owner).post(f"/api/mcp-instances/{instance.pk}/keys/", {"label": "ci"}, format="json").json()["id"]
    )
    client_for(owner).delete(f"/api/mcp-instances/{instance.pk}/keys/{key_id}/")
    # then
    key = ApiKey.objects.get()
    assert entries() == [
        ("owner", ADDITION, str(key_id), f"Created API key ci ({key.prefix}…) for MCP instance 'shop' (API)."),
        ("owner", CHANGE, str(key_id), f"Revoked API key ci ({key.prefix}…) (API)."),
    ]


def test_revoking_twice_is_recorded_once(owner, instance, make_api_key):
    """DELETE of an already revoked key is a no-op 204: no second history entry."""
    # given
    key, _ = make_api_key(instance)
    client_for(owner).delete(f"/api/mcp-instances/{instance.pk}/keys/{key.pk}/")
    before = db_snapshot()
    # when
    response = client_for(owner).delete(f"/api/mcp-instances/{instance.pk}/keys/{key.pk}/")
    # then
    assert response.status_code == 204
    assert db_snapshot() == before


def test_refused_create_writes_no_history(owner, other_user, instance):
    """Another user's instance: 404, no key, no history entry."""
    # given
    before = db_snapshot()
    # when
    response = client_for(other_user).post(f"/api/mcp-instances/{instance.pk}/keys/", {"label": "x"}, format="json")
    # then
    assert response.status_code == 404
    assert db_snapshot() == before


def test_admin_create_and_revoke_are_in_the_keys_history(client, superuser, owner, instance):
    """From the admin (here a superuser on the owner's instance): entries by the admin user, naming the admin,
    once each (the admin's own automatic entry is not doubled)."""
    # given
    client.force_login(superuser)
    # when
    client.post(reverse("admin:tools_app_mcpinstance_key_create", args=[instance.pk]), {"label": "cli"})
    first = ApiKey.objects.get()
    client.post(reverse("admin:tools_app_apikey_add"), {"mcp_instance": instance.pk, "label": "ci"})
    second = ApiKey.objects.exclude(pk=first.pk).get()
    client.post(reverse("admin:tools_app_mcpinstance_key_revoke", args=[instance.pk, first.pk]))
    client.post(reverse("admin:tools_app_apikey_changelist"), {"action": "revoke", "_selected_action": [second.pk]})
    history = client.get(reverse("admin:tools_app_apikey_history", args=[first.pk]))
    # then
    assert entries() == [
        ("root", ADDITION, str(first.pk), f"Created API key cli ({first.prefix}…) for MCP instance 'shop' (admin)."),
        ("root", ADDITION, str(second.pk), f"Created API key ci ({second.prefix}…) for MCP instance 'shop' (admin)."),
        ("root", CHANGE, str(first.pk), f"Revoked API key cli ({first.prefix}…) (admin)."),
        ("root", CHANGE, str(second.pk), f"Revoked API key ci ({second.prefix}…) (admin)."),
    ]
    assert history.status_code == 200
    assert f"Revoked API key cli ({first.prefix}…) (admin)." in history.content.decode()


def test_command_created_keys_are_in_the_history(settings, db):
    """seed_demo's keys: an addition each, by the instance's owner, naming the command."""
    # given
    settings.DEBUG = True
    # when
    call_command("seed_demo", stdout=None)
    # then
    keys = list(ApiKey.objects.select_related("mcp_instance__owner").order_by("pk"))
    assert keys
    assert entries() == [
        (
            key.mcp_instance.owner.username,
            ADDITION,
            str(key.pk),
            f"Created API key demo key ({key.prefix}…) for MCP instance {key.mcp_instance.slug!r} (seed_demo command).",
        )
        for key in keys
    ]
