"""JSON API: /api/bindings/ (SPEC §6, §2.4): one owner per binding, names unique per instance."""

import pytest

from tests.api_helpers import client_for, db_snapshot
from tools_app.models import Binding

pytestmark = pytest.mark.django_db


@pytest.fixture
def tool(owner, table, make_tool):
    return make_tool(owner, table, name="orders")


def test_create_binds_the_tool(owner, instance, tool):
    """POST binds a tool; effective name and description follow the tool."""
    # when
    response = client_for(owner).post("/api/bindings/", {"mcp_instance": instance.pk, "tool": tool.pk}, format="json")

    # then
    assert response.status_code == 201
    body = response.json()
    binding = Binding.objects.get()
    assert body["id"] == binding.pk
    assert (body["mcp_instance"], body["tool"], body["enabled"]) == (instance.pk, tool.pk, True)
    assert (body["name_override"], body["description_override"]) == ("", "")
    assert body["effective_name"] == "orders"
    assert body["effective_description"] == tool.description


def test_create_with_overrides(owner, instance, tool):
    """name_override / description_override change what the instance shows."""
    # when
    response = client_for(owner).post(
        "/api/bindings/",
        {
            "mcp_instance": instance.pk,
            "tool": tool.pk,
            "name_override": "shop.orders",
            "description_override": "Orders.",
            "enabled": False,
        },
        format="json",
    )

    # then
    assert response.status_code == 201
    assert response.json()["effective_name"] == "shop.orders"
    assert response.json()["effective_description"] == "Orders."
    assert Binding.objects.get().enabled is False


def test_name_collision_is_a_409_naming_the_other_tool_and_the_instance(owner, instance, table, tool, make_tool, bind):
    """SPEC §2.4: binding a tool whose name collides (ignoring case) is 409 NAME_CONFLICT; nothing is written."""
    # given
    bind(instance, tool)
    twin = make_tool(owner, table, type="get_all_data", name="ORDERS")
    before = db_snapshot()

    # when
    response = client_for(owner).post("/api/bindings/", {"mcp_instance": instance.pk, "tool": twin.pk}, format="json")

    # then
    assert response.status_code == 409
    body = response.json()
    assert body["error"] == "NAME_CONFLICT"
    assert "'orders'" in body["message"]
    assert "'Shop'" in body["message"]
    assert body["fields"] == {"tool": [body["message"]]}
    assert db_snapshot() == before


def test_override_into_a_collision_is_a_409_and_changes_nothing(owner, instance, table, tool, make_tool, bind):
    """Setting an override into a taken name is refused with 409 NAME_CONFLICT."""
    # given
    bind(instance, tool)
    other = bind(instance, make_tool(owner, table, type="get_all_data", name="everything"))
    before = db_snapshot()

    # when
    response = client_for(owner).patch(f"/api/bindings/{other.pk}/", {"name_override": "Orders"}, format="json")

    # then
    assert response.status_code == 409
    assert response.json()["error"] == "NAME_CONFLICT"
    assert list(response.json()["fields"]) == ["name_override"]
    assert db_snapshot() == before


def test_binding_the_same_tool_twice_is_a_400_naming_tool(owner, instance, tool, bind):
    """One binding per (instance, tool): the second is a 400 on `tool`."""
    # given
    bind(instance, tool)
    before = db_snapshot()

    # when
    response = client_for(owner).post("/api/bindings/", {"mcp_instance": instance.pk, "tool": tool.pk}, format="json")

    # then
    assert response.status_code == 400
    assert response.json()["fields"] == {"tool": ["The tool 'orders' is already bound to the instance 'Shop'."]}
    assert db_snapshot() == before


@pytest.mark.parametrize("field", ["tool", "mcp_instance"])
def test_another_users_tool_or_instance_is_a_400_naming_the_field(
    owner, other_user, instance, tool, make_table, make_tool, make_instance, field
):
    """SPEC §6: referring to another user's object is a 400 naming the field."""
    # given
    theirs = (
        make_tool(other_user, make_table(other_user, name="theirs"))
        if field == "tool"
        else make_instance(other_user, slug="theirs")
    )
    payload = {"mcp_instance": instance.pk, "tool": tool.pk, field: theirs.pk}
    before = db_snapshot()

    # when
    response = client_for(owner).post("/api/bindings/", payload, format="json")

    # then
    assert response.status_code == 400
    assert list(response.json()["fields"]) == [field]
    assert db_snapshot() == before


def test_superuser_cannot_join_objects_of_two_owners(superuser, owner, other_user, make_table, make_tool, instance):
    """SPEC §2.4: a binding joins objects of the same owner only, even for a superuser."""
    # given
    theirs = make_tool(other_user, make_table(other_user, name="theirs"))
    before = db_snapshot()

    # when
    response = client_for(superuser).post(
        "/api/bindings/", {"mcp_instance": instance.pk, "tool": theirs.pk}, format="json"
    )

    # then
    assert response.status_code == 400
    assert list(response.json()["fields"]) == ["tool"]
    assert db_snapshot() == before


def test_patch_disables_a_binding(owner, instance, tool, bind):
    """PATCH {"enabled": false} disables the binding."""
    # given
    binding = bind(instance, tool)

    # when
    response = client_for(owner).patch(f"/api/bindings/{binding.pk}/", {"enabled": False}, format="json")

    # then
    assert response.status_code == 200
    binding.refresh_from_db()
    assert binding.enabled is False


def test_delete_unbinds(owner, instance, tool, bind):
    """DELETE removes the binding, not the tool."""
    # given
    binding = bind(instance, tool)

    # when
    response = client_for(owner).delete(f"/api/bindings/{binding.pk}/?force=true")  # enabled: in use

    # then
    assert response.status_code == 204
    assert Binding.objects.count() == 0
    tool.refresh_from_db()


def test_list_filters_by_instance_and_hides_other_users(
    owner, other_user, instance, tool, make_instance, make_table, make_tool, bind
):
    """The list holds the caller's bindings; ?mcp_instance= narrows it; another's instance id is a 400."""
    # given
    mine = bind(instance, tool)
    bind(make_instance(owner, slug="second"), tool)
    theirs_instance = make_instance(other_user, slug="theirs")
    bind(theirs_instance, make_tool(other_user, make_table(other_user, name="t")))
    client = client_for(owner)

    # when
    everything = client.get("/api/bindings/").json()
    narrowed = client.get(f"/api/bindings/?mcp_instance={instance.pk}").json()
    refused = client.get(f"/api/bindings/?mcp_instance={theirs_instance.pk}")

    # then
    assert everything["count"] == 2
    assert [row["id"] for row in narrowed["results"]] == [mine.pk]
    assert refused.status_code == 400
    assert list(refused.json()["fields"]) == ["mcp_instance"]


def test_put_is_not_offered(owner, instance, tool, bind):
    """SPEC §6 lists GET, PATCH, DELETE on a binding: PUT is 405."""
    # given
    binding = bind(instance, tool)

    # when
    response = client_for(owner).put(
        f"/api/bindings/{binding.pk}/", {"mcp_instance": instance.pk, "tool": tool.pk}, format="json"
    )

    # then
    assert response.status_code == 405


@pytest.mark.parametrize(
    ("value", "expected"), [("true", ["on"]), ("False", ["off"]), ("1", ["on"]), ("", ["on", "off"])]
)
def test_list_filters_by_enabled(owner, instance, table, make_tool, bind, value, expected):
    """?enabled= takes true/false (or 1/0, any case); empty means no filter."""
    # given
    bindings = {
        "on": bind(instance, make_tool(owner, table, name="on")),
        "off": bind(instance, make_tool(owner, table, name="off"), enabled=False),
    }

    # when
    response = client_for(owner).get(f"/api/bindings/?enabled={value}")

    # then
    assert response.status_code == 200
    assert sorted(row["id"] for row in response.json()["results"]) == sorted(bindings[name].pk for name in expected)


@pytest.mark.parametrize("value", ["bogus", "yes", "2", "truth"])
def test_list_with_a_bad_boolean_filter_is_a_400_naming_it(owner, instance, tool, bind, value):
    """A value that is neither true nor false is refused, not silently ignored."""
    # given
    bind(instance, tool)

    # when
    response = client_for(owner).get(f"/api/bindings/?enabled={value}")

    # then
    assert response.status_code == 400
    assert response.json() == {
        "error": "VALIDATION_ERROR",
        "message": "Invalid input.",
        "fields": {"enabled": [f"Enter true or false (got {value!r})."]},
    }
