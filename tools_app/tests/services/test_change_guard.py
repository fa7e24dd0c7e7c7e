"""The change guard: deleting or renaming what agents use needs a confirmation (IN_USE, ?force=true)."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.api_helpers import client_for, db_snapshot
from tools_app import services
from tools_app.kernel.errors import ErrorCode, ToolhubError
from tools_app.models import Binding, CallLog, McpInstance, Table, Tool
from tools_app.selectors import UsedBy, usage_of
from tools_app.tests.services.test_concurrency import _in_threads
from tools_app.tool_schemas import input_schema_breaks

pytestmark = pytest.mark.django_db


@pytest.fixture
def bound_query(owner, table, make_tool, instance, bind):
    """orders_query bound (as `find_orders`) and enabled on the enabled instance 'shop'."""
    tool = make_tool(owner, table, name="orders_query")
    binding = bind(instance, tool, name_override="find_orders")
    return tool, binding


def log_call(instance, tool, *, name, key=None, days_ago=0, surface="mcp", user=None, oauth_client=""):
    return CallLog.objects.create(
        mcp_instance=instance,
        tool=tool,
        tool_name=name,
        api_key=key,
        owner=tool.owner,
        user=user,
        oauth_client=oauth_client,
        surface=surface,
        status="ok",
        duration_ms=1.0,
        created_at=timezone.now() - timedelta(days=days_ago),
    )


#
# The selector
#


def test_usage_names_instance_tool_and_recent_clients(bound_query, instance, make_api_key):
    """A bound tool is in use on its instance under its effective name, with the calls and clients of the last days."""
    # given
    tool, _ = bound_query
    key, _ = make_api_key(instance, label="billing-agent")
    log_call(instance, tool, name="find_orders", key=key)
    log_call(instance, tool, name="find_orders", key=key, days_ago=2)
    log_call(instance, tool, name="find_orders", key=key, days_ago=30)  # outside TOOLHUB_IN_USE_DAYS

    # when
    used_by = usage_of(tools=[tool])

    # then
    assert [(u.instance, u.tool, u.tool_id, u.bound, u.calls) for u in used_by] == [
        ("shop", "find_orders", tool.pk, True, 2)
    ]
    assert used_by[0].clients == (f"key 'billing-agent' ({key.prefix}…)",)


def test_disabled_binding_or_instance_is_not_in_use_unless_called(bound_query, instance, table):
    """Bound but disabled (binding or instance) is no use; a recent call through it still is."""
    # given
    tool, binding = bound_query
    services.binding_update(binding=binding, enabled=False)

    # then
    assert usage_of(tables=[table]) == []
    # when
    log_call(instance, tool, name="find_orders", days_ago=1)
    # then
    assert [(u.instance, u.tool, u.bound, u.calls) for u in usage_of(tables=[table])] == [
        ("shop", "find_orders", False, 1)
    ]


def test_api_calls_count_with_the_user_as_client(owner, table, make_tool):
    """A tool called through the API lately is in use, with instance None and the user as its client."""
    # given
    tool = make_tool(owner, table, name="orders_all", type="get_all_data")
    log_call(None, tool, name="orders_all", surface="api", user=owner)

    # when
    used_by = usage_of(tools=[tool.pk])

    # then
    assert used_by == [
        UsedBy(None, "orders_all", tool.pk, False, 1, used_by[0].last_called, (f"api user {owner.username}",))
    ]


def test_in_use_days_zero_counts_bindings_only(bound_query, instance, settings):
    tool, _ = bound_query
    settings.TOOLHUB_IN_USE_DAYS = 0
    log_call(instance, tool, name="find_orders")
    assert [(u.tool, u.calls) for u in usage_of(instances=[instance])] == [("find_orders", 0)]


#
# The services and the API
#


@pytest.mark.parametrize(
    ("kind", "path"),
    [
        ("table", "/api/tables/{table}/"),
        ("tool", "/api/tools/{tool}/"),
        ("binding", "/api/bindings/{binding}/"),
        ("instance", "/api/mcp-instances/{instance}/"),
    ],
)
def test_delete_in_use_is_409_naming_what_breaks_then_force_deletes(owner, table, instance, bound_query, kind, path):
    """DELETE of anything in use is 409 IN_USE with details.used_by, nothing deleted; ?force=true deletes it."""
    # given
    tool, binding = bound_query
    url = path.format(table=table.pk, tool=tool.pk, binding=binding.pk, instance=instance.pk)
    client = client_for(owner)
    before = db_snapshot()

    # when
    refused = client.delete(url)

    # then
    assert refused.status_code == 409
    body = refused.json()
    assert body["error"] == "IN_USE"
    assert body["details"]["used_by"] == [
        {
            "instance": "shop",
            "tool": "find_orders",
            "tool_id": tool.pk,
            "bound": True,
            "calls": 0,
            "last_called": None,
            "clients": [],
        }
    ]
    assert "'find_orders' on the instance 'shop' (bound)" in body["message"]
    assert db_snapshot() == before

    # when
    forced = client.delete(url + "?force=true")

    # then
    assert forced.status_code == 204
    model = {"table": Table, "tool": Tool, "binding": Binding, "instance": McpInstance}[kind]
    assert not model.objects.filter(
        pk={"table": table, "tool": tool, "binding": binding, "instance": instance}[kind].pk
    ).exists()


def test_delete_of_what_nothing_uses_needs_no_force(owner, table, make_tool):
    tool = make_tool(owner, table, name="unused")
    response = client_for(owner).delete(f"/api/tools/{tool.pk}/")
    assert response.status_code == 204
    assert not Tool.objects.filter(pk=tool.pk).exists()


def test_force_must_be_a_boolean(owner, bound_query):
    """?force=maybe is a 400 naming `force`; nothing is deleted."""
    tool, _ = bound_query
    response = client_for(owner).delete(f"/api/tools/{tool.pk}/?force=maybe")
    assert response.status_code == 400
    assert response.json()["fields"] == {"force": ["Must be true or false."]}
    assert Tool.objects.filter(pk=tool.pk).exists()


def test_rename_of_a_tool_clients_call_by_name_needs_force(owner, table, make_tool, instance, bind):
    """Renaming a tool bound under its own name changes what clients call: 409 IN_USE, then ?force=true renames."""
    # given
    tool = make_tool(owner, table, name="orders_query")
    bind(instance, tool)
    client = client_for(owner)

    # when
    refused = client.patch(f"/api/tools/{tool.pk}/", {"name": "orders_search"}, format="json")
    case_only = client.patch(f"/api/tools/{tool.pk}/", {"name": "Orders_Query"}, format="json")
    forced = client.patch(f"/api/tools/{tool.pk}/?force=true", {"name": "orders_search"}, format="json")

    # then
    assert refused.status_code == 409
    assert refused.json()["error"] == "IN_USE"
    assert "would be renamed to 'orders_search'" in refused.json()["message"]
    assert case_only.status_code == 200  # names compare ignoring case over MCP: nothing breaks
    assert forced.status_code == 200
    assert Tool.objects.get(pk=tool.pk).name == "orders_search"


def test_rename_of_a_tool_bound_under_an_override_breaks_nothing(owner, bound_query):
    tool, _ = bound_query
    response = client_for(owner).patch(f"/api/tools/{tool.pk}/", {"name": "renamed"}, format="json")
    assert response.status_code == 200


OPEN = {"type": "object", "properties": {"query": {"type": "string"}, "hint": {"type": ["string", "null"]}}}


@pytest.mark.parametrize(
    ("new_schema", "reason"),
    [
        ({**OPEN, "required": ["query", "hint"]}, "The argument 'hint' is now required."),
        ({**OPEN, "additionalProperties": False}, "Arguments the schema does not declare are no longer allowed."),
        ({**OPEN, "properties": {"query": {"type": "string"}}}, "The argument 'hint' was removed."),
        (
            {**OPEN, "properties": {"query": {"type": "string"}, "hint": {"type": "string"}}},
            "The argument 'hint' narrowed from null|string to string.",
        ),
    ],
)
def test_breaking_input_schema_change_needs_force(owner, bound_query, new_schema, reason):
    """A PATCH whose input schema refuses calls the current one accepts is 409 IN_USE naming why; force goes on."""
    # given
    tool, _ = bound_query
    services.tool_update(tool=tool, input_schema=OPEN, force=True)
    client = client_for(owner)

    # when
    refused = client.patch(f"/api/tools/{tool.pk}/", {"input_schema": new_schema}, format="json")

    # then
    assert refused.status_code == 409
    assert refused.json()["error"] == "IN_USE"
    assert reason in refused.json()["message"]
    assert Tool.objects.get(pk=tool.pk).input_schema == OPEN
    forced = client.patch(f"/api/tools/{tool.pk}/?force=true", {"input_schema": new_schema}, format="json")
    assert forced.status_code == 200
    assert Tool.objects.get(pk=tool.pk).input_schema == new_schema


def test_widening_input_schema_is_not_guarded(owner, bound_query):
    tool, _ = bound_query
    schema = dict(tool.input_schema)
    schema["properties"] = {**schema["properties"], "hint": {"type": "string"}}
    response = client_for(owner).patch(f"/api/tools/{tool.pk}/", {"input_schema": schema}, format="json")
    assert response.status_code == 200


def test_input_schema_breaks_names_each_reason():
    old = {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": ["string", "null"]}, "c": {}, "d": {"type": "string"}},
        "required": ["a"],
    }
    new = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "string"}},
        "required": ["a", "b"],
    }
    assert input_schema_breaks(old, new) == [
        "The argument 'b' is now required.",
        "The argument 'a' narrowed from number to integer.",
        "The argument 'b' narrowed from null|string to string.",
        "The argument 'c' narrowed from any type to string.",
        "The argument 'd' was removed.",
    ]
    assert input_schema_breaks(new, {**new, "properties": {**new["properties"], "e": {}}}) == []
    assert (
        input_schema_breaks(
            {"type": "object", "properties": {"n": {"type": "integer"}}},
            {"type": "object", "properties": {"n": {"type": "number"}}},
        )
        == []
    )


def test_slug_change_of_an_instance_in_use_needs_force(owner, instance, bound_query):
    client = client_for(owner)
    refused = client.patch(f"/api/mcp-instances/{instance.pk}/", {"slug": "store"}, format="json")
    renamed = client.patch(f"/api/mcp-instances/{instance.pk}/", {"name": "The shop"}, format="json")
    assert refused.status_code == 409
    assert refused.json()["error"] == "IN_USE"
    assert "would move from /mcp/shop/ to /mcp/store/" in refused.json()["message"]
    assert McpInstance.objects.get(pk=instance.pk).slug == "shop"
    assert renamed.status_code == 200  # the name is for people: nothing breaks
    forced = client.patch(f"/api/mcp-instances/{instance.pk}/?force=true", {"slug": "store"}, format="json")
    assert forced.status_code == 200
    assert McpInstance.objects.get(pk=instance.pk).slug == "store"


def test_binding_override_change_in_use_needs_force(owner, bound_query):
    _, binding = bound_query
    client = client_for(owner)
    refused = client.patch(f"/api/bindings/{binding.pk}/", {"name_override": "orders"}, format="json")
    disabled = client.patch(f"/api/bindings/{binding.pk}/", {"description_override": "Find orders."}, format="json")
    assert refused.status_code == 409
    assert refused.json()["details"]["used_by"][0]["tool"] == "find_orders"
    assert Binding.objects.get(pk=binding.pk).name_override == "find_orders"
    assert disabled.status_code == 200
    forced = client.patch(f"/api/bindings/{binding.pk}/?force=true", {"name_override": "orders"}, format="json")
    assert forced.status_code == 200
    assert Binding.objects.get(pk=binding.pk).name_override == "orders"


def test_services_refuse_unless_forced(bound_query, table):
    """The services themselves apply the guard (every surface): IN_USE, nothing deleted; force=True deletes."""
    with pytest.raises(ToolhubError) as refused:
        services.table_delete(table=table)
    assert refused.value.code == ErrorCode.IN_USE
    assert Table.objects.filter(pk=table.pk).exists()
    services.table_delete(table=table, force=True)
    assert not Table.objects.filter(pk=table.pk).exists()


def test_another_users_object_is_404_not_409(other_user, bound_query):
    tool, _ = bound_query
    response = client_for(other_user).delete(f"/api/tools/{tool.pk}/")
    assert response.status_code == 404
    assert Tool.objects.filter(pk=tool.pk).exists()


#
# The admin
#


def admin_url(obj, view: str) -> str:
    return reverse(f"admin:tools_app_{obj._meta.model_name}_{view}", args=[obj.pk])


@pytest.mark.parametrize("kind", ["table", "tool", "binding", "instance"])
def test_admin_delete_page_lists_what_breaks_and_needs_the_box(client, owner, table, instance, bound_query, kind):
    """The confirmation page shows the instance, tool name and clients; a POST without the box ticked deletes
    nothing and shows the page again; with it, the object goes."""
    # given
    tool, binding = bound_query
    obj = {"table": table, "tool": tool, "binding": binding, "instance": instance}[kind]
    client.force_login(owner)
    url = admin_url(obj, "delete")

    # when
    page = client.get(url)
    unticked = client.post(url, {"post": "yes"})

    # then
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="toolhub-in-use"' in html
    assert "<code>/mcp/shop/</code>" in html
    assert "<code>find_orders</code>" in html
    assert 'name="confirm_in_use"' in html
    assert unticked.status_code == 200
    assert "tick the box below to confirm" in unticked.content.decode()
    assert type(obj).objects.filter(pk=obj.pk).exists()

    # when
    ticked = client.post(url, {"post": "yes", "confirm_in_use": "1"})

    # then
    assert ticked.status_code == 302
    assert not type(obj).objects.filter(pk=obj.pk).exists()


def test_admin_delete_page_of_unused_object_asks_no_box(client, owner, table, make_tool):
    tool = make_tool(owner, table, name="unused")
    client.force_login(owner)
    page = client.get(admin_url(tool, "delete"))
    assert 'name="confirm_in_use"' not in page.content.decode()
    assert client.post(admin_url(tool, "delete"), {"post": "yes"}).status_code == 302
    assert not Tool.objects.filter(pk=tool.pk).exists()


def test_admin_bulk_delete_needs_the_box(client, owner, bound_query):
    tool, _ = bound_query
    client.force_login(owner)
    url = reverse("admin:tools_app_tool_changelist")
    action = {"action": "delete_selected", "_selected_action": [tool.pk]}
    unticked = client.post(url, {**action, "post": "yes"})
    assert unticked.status_code == 200
    assert [used.tool for used in unticked.context["used_by"]] == ["find_orders"]
    assert Tool.objects.filter(pk=tool.pk).exists()
    assert client.post(url, {**action, "post": "yes", "confirm_in_use": "1"}).status_code == 302
    assert not Tool.objects.filter(pk=tool.pk).exists()


def test_admin_unbind_action_asks_when_in_use(client, owner, bound_query):
    _, binding = bound_query
    client.force_login(owner)
    url = reverse("admin:tools_app_binding_changelist")
    action = {"action": "unbind", "_selected_action": [binding.pk]}
    asked = client.post(url, action)
    assert asked.status_code == 200
    assert "<code>find_orders</code>" in asked.content.decode()
    assert Binding.objects.filter(pk=binding.pk).exists()
    assert client.post(url, {**action, "confirm_in_use": "1"}).status_code == 302
    assert not Binding.objects.filter(pk=binding.pk).exists()


def test_admin_tool_rename_warns_what_it_may_break(client, owner, table, make_tool, instance, bind):
    """Saving the form confirms a rename; the next page warns which instance and name it may break."""
    tool = make_tool(owner, table, name="orders_query")
    bind(instance, tool)
    client.force_login(owner)
    form = client.get(admin_url(tool, "change")).context["adminform"].form
    data = {name: form[name].value() for name in form.fields if form[name].value() is not None}
    data["name"] = "orders_search"
    response = client.post(admin_url(tool, "change"), data, follow=True)
    assert response.status_code == 200
    warnings = [str(m) for m in response.context["messages"] if m.level_tag == "warning"]
    assert warnings == [
        "The tool 'orders_query' was renamed to 'orders_search' while in use: 'orders_query' on the instance 'shop' "
        "(bound). Clients that use it may break."
    ]
    assert Tool.objects.get(pk=tool.pk).name == "orders_search"


#
# Under concurrency (PostgreSQL)
#


@pytest.mark.postgres
@pytest.mark.parametrize("round_", range(3))
def test_an_unforced_delete_racing_a_bind_never_leaves_a_binding_to_a_deleted_tool(
    postgres_db,  # noqa: F811
    owner,
    table,
    make_tool,
    instance,
    round_,
):
    """A delete (unforced) and a bind of the same tool queue on the tool's row: either the bind wins and the delete
    sees it (IN_USE, the tool stays), or the delete wins and the bind finds the tool gone. Never both."""
    from django.core.exceptions import ValidationError

    # given
    tool = make_tool(owner, table, name="orders_query")

    def worker(index: int):
        if index == 0:
            return services.tool_delete(tool=Tool.objects.get(pk=tool.pk))
        return services.binding_create(mcp_instance=McpInstance.objects.get(pk=instance.pk), tool=tool).pk

    # when
    deleted, bound = _in_threads(2, worker)

    # then
    if isinstance(deleted, ToolhubError):
        assert deleted.code == ErrorCode.IN_USE
        assert Binding.objects.filter(pk=bound).exists()
        assert Tool.objects.filter(pk=tool.pk).exists()
    else:
        assert deleted is None
        assert isinstance(bound, ValidationError), bound
        assert not Tool.objects.filter(pk=tool.pk).exists()
        assert not Binding.objects.exists()
