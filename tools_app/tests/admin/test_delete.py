"""Deleting from the admin what has call-log rows: the call log never blocks its parent's deletion.

The call log stays read-only on its own pages; a row goes (or loses its link) with its instance, tool, key
or user exactly as the models say (CASCADE / SET_NULL), as the API's deletes do.
"""

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from tools_app.models import ApiKey, Binding, CallLog, McpInstance, Table, Tool


@pytest.fixture
def logged(owner, table, make_tool, instance, bind, make_api_key):
    """The owner's instance 'shop' with a bound tool, a key, and one call log row linking all three."""
    tool = make_tool(owner, table, name="orders_query")
    binding = bind(instance, tool)
    api_key, _ = make_api_key(instance)
    log = CallLog.objects.create(
        owner=owner,
        mcp_instance=instance,
        tool=tool,
        tool_name=tool.name,
        api_key=api_key,
        status="ok",
        duration_ms=1.0,
    )
    return {"instance": instance, "tool": tool, "binding": binding, "api_key": api_key, "log": log, "table": table}


def delete_url(obj) -> str:
    opts = obj._meta
    return reverse(f"admin:{opts.app_label}_{opts.model_name}_delete", args=[obj.pk])


@pytest.mark.parametrize("name", ["instance", "tool", "table", "api_key"])
def test_delete_confirmation_does_not_ask_for_call_log_permission(client, owner, logged, name):
    """The confirmation page of an object with call logs lists nothing the owner lacks permission for."""
    # given
    client.force_login(owner)
    # when
    response = client.get(delete_url(logged[name]))
    # then
    assert response.status_code == 200
    assert response.context["perms_lacking"] == set()
    assert "would require deleting the following protected" not in response.content.decode()
    assert "doesn't have permission to delete" not in response.content.decode()


def test_owner_deletes_instance_with_call_logs(client, owner, logged):
    """The instance goes with its bindings, keys and call log rows (CASCADE), as over the API."""
    # given
    client.force_login(owner)
    # when
    response = client.post(delete_url(logged["instance"]), {"post": "yes", "confirm_in_use": "1"})
    # then
    assert response.status_code == 302
    assert response.url == reverse("admin:tools_app_mcpinstance_changelist")
    assert (McpInstance.objects.count(), Binding.objects.count(), ApiKey.objects.count()) == (0, 0, 0)
    assert CallLog.objects.count() == 0
    assert Tool.objects.filter(pk=logged["tool"].pk).exists()


def test_owner_deletes_tool_with_call_logs(client, owner, logged):
    """The tool goes with its bindings; its call log rows stay, keeping the tool's name (SET_NULL)."""
    # given
    client.force_login(owner)
    # when
    response = client.post(delete_url(logged["tool"]), {"post": "yes", "confirm_in_use": "1"})
    # then
    assert response.status_code == 302
    assert (Tool.objects.count(), Binding.objects.count()) == (0, 0)
    log = CallLog.objects.get()
    assert (log.tool_id, log.tool_name, log.mcp_instance_id) == (None, "orders_query", logged["instance"].pk)


def test_owner_deletes_table_with_tools_that_have_call_logs(client, owner, logged):
    """The table goes with its tools; their call log rows stay, unlinked from the tool."""
    # given
    client.force_login(owner)
    # when
    response = client.post(delete_url(logged["table"]), {"post": "yes", "confirm_in_use": "1"})
    # then
    assert response.status_code == 302
    assert (Table.objects.count(), Tool.objects.count()) == (0, 0)
    assert list(CallLog.objects.values_list("tool_id", "tool_name")) == [(None, "orders_query")]


def test_owner_deletes_api_key_with_call_logs(client, owner, logged):
    """The key goes; its call log rows stay, unlinked from the key."""
    # given
    client.force_login(owner)
    # when
    response = client.post(delete_url(logged["api_key"]), {"post": "yes"})
    # then
    assert response.status_code == 302
    assert ApiKey.objects.count() == 0
    assert list(CallLog.objects.values_list("api_key_id", "tool_id")) == [(None, logged["tool"].pk)]


def test_owner_bulk_deletes_instances_with_call_logs(client, owner, logged):
    """The changelist's delete action works on instances with call logs too."""
    # given
    client.force_login(owner)
    url = reverse("admin:tools_app_mcpinstance_changelist")
    action = {"action": "delete_selected", "_selected_action": [logged["instance"].pk]}
    # when
    confirmation = client.post(url, action)
    response = client.post(url, {**action, "post": "yes", "confirm_in_use": "1"})
    # then
    assert confirmation.status_code == 200
    assert confirmation.context["perms_lacking"] == set()
    assert [used.tool for used in confirmation.context["used_by"]] == ["orders_query"]
    assert response.status_code == 302
    assert (McpInstance.objects.count(), CallLog.objects.count()) == (0, 0)


def test_superuser_deletes_user_with_call_logs(client, superuser, owner, logged):
    """A user with call logs (and tables, tools, instances) can be deleted; everything it owned goes."""
    # given
    client.force_login(superuser)
    url = reverse("admin:auth_user_delete", args=[owner.pk])
    # when
    confirmation = client.get(url)
    response = client.post(url, {"post": "yes"})
    # then
    assert confirmation.status_code == 200
    assert confirmation.context["perms_lacking"] == set()
    assert response.status_code == 302
    assert not get_user_model().objects.filter(pk=owner.pk).exists()
    counts = [model.objects.count() for model in (Table, Tool, McpInstance, Binding, ApiKey, CallLog)]
    assert counts == [0, 0, 0, 0, 0, 0]


def test_other_user_still_cannot_delete_instance_with_call_logs(client, other_user, logged):
    """The call log exemption does not let another user delete the instance."""
    # given
    client.force_login(other_user)
    # when
    shown = client.get(delete_url(logged["instance"]))
    response = client.post(delete_url(logged["instance"]), {"post": "yes", "confirm_in_use": "1"})
    # then
    assert (shown.status_code, response.status_code) == (302, 302)
    assert (McpInstance.objects.count(), CallLog.objects.count()) == (1, 1)


def test_call_log_row_itself_cannot_be_deleted(client, owner, logged):
    """A call log row has no delete page, no delete action and keeps its row when posted to."""
    # given
    client.force_login(owner)
    log = logged["log"]
    # when
    shown = client.get(delete_url(log))
    posted = client.post(delete_url(log), {"post": "yes"})
    listed = client.get(reverse("admin:tools_app_calllog_changelist"))
    # then
    assert (shown.status_code, posted.status_code) == (403, 403)
    assert listed.context["action_form"] is None
    assert CallLog.objects.filter(pk=log.pk).exists()
