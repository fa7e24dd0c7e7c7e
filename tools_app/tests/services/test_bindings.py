"""Bindings (SPEC §2.4): one owner per binding, effective names unique per instance ignoring case."""

import pytest
from django.core.exceptions import ValidationError

from tools_app.kernel.errors import ErrorCode
from tools_app.models import Binding, McpInstance, Tool
from tools_app.services import binding_create, binding_update, instance_delete, tool_delete, tool_update

pytestmark = pytest.mark.django_db


def _conflict(name: str, other: str, instance: str, bound_as: str = "") -> str:
    other_text = f"{other!r}, bound as {bound_as!r}," if bound_as else repr(other)
    return (
        f"The name {name!r} is already used by the tool {other_text} on the instance {instance!r} "
        "(names are unique per instance, ignoring case)."
    )


def _only_error(exc: ValidationError) -> tuple[str, str, str]:
    [(field, [error])] = exc.error_dict.items()
    return field, error.code, error.messages[0]


def _bindings(instance) -> list[tuple[str, str]]:
    return sorted(Binding.objects.filter(mcp_instance=instance).values_list("tool__name", "name_key"))


@pytest.fixture
def two_tools(owner, table, make_tool):
    """Two tools of the owner: 'orders_query' and 'orders_all'."""
    return make_tool(owner, table, name="orders_query"), make_tool(owner, table, type="get_all_data", name="orders_all")


#
# Ownership
#


def test_bind_joins_tool_and_instance_of_one_owner(owner, instance, two_tools):
    """A tool and an instance of the same owner are bound; the name key is the lower-cased name."""
    # given
    tool = two_tools[0]
    # when
    binding = binding_create(mcp_instance=instance, tool=tool)
    # then
    stored = Binding.objects.get(pk=binding.pk)
    assert (stored.mcp_instance_id, stored.tool_id, stored.enabled, stored.name_key) == (
        instance.pk,
        tool.pk,
        True,
        "orders_query",
    )


def test_bind_refuses_another_owners_tool(other_user, instance, table, make_tool, make_table):
    """A binding never joins one owner's instance to another owner's tool."""
    # given
    foreign_tool = make_tool(other_user, make_table(other_user, name="theirs"), name="their_tool")
    # when
    with pytest.raises(ValidationError) as caught:
        binding_create(mcp_instance=instance, tool=foreign_tool)
    # then
    assert _only_error(caught.value) == (
        "tool",
        "invalid_choice",
        "Select a valid choice. That tool is not one of yours.",
    )
    assert Binding.objects.count() == 0


def test_bind_refuses_another_owners_instance(other_user, make_instance, two_tools):
    """The owner's tool cannot be bound to another owner's instance either."""
    # given
    foreign_instance = make_instance(other_user, slug="theirs")
    # when
    with pytest.raises(ValidationError) as caught:
        binding_create(mcp_instance=foreign_instance, tool=two_tools[0])
    # then
    assert _only_error(caught.value)[:2] == ("tool", "invalid_choice")
    assert Binding.objects.count() == 0


def test_rebinding_to_another_owners_tool_is_refused(other_user, instance, two_tools, make_tool, make_table, bind):
    """Moving a binding to another owner's tool is refused and the binding stays as it was."""
    # given
    binding = bind(instance, two_tools[0])
    foreign_tool = make_tool(other_user, make_table(other_user, name="theirs"), name="their_tool")
    # when
    with pytest.raises(ValidationError) as caught:
        binding_update(binding=Binding.objects.get(pk=binding.pk), tool=foreign_tool)
    # then
    assert _only_error(caught.value)[:2] == ("tool", "invalid_choice")
    assert Binding.objects.get(pk=binding.pk).tool_id == two_tools[0].pk


def _already_bound(tool: str, instance: str) -> tuple[str, str, str]:
    return "tool", "unique", f"The tool {tool!r} is already bound to the instance {instance!r}."


@pytest.mark.parametrize("override", ["", "again", "ORDERS_QUERY"])
def test_same_tool_twice_on_one_instance_is_already_bound(instance, two_tools, bind, override):
    """(instance, tool) is unique: binding the tool again, under its own name or an override, is refused as
    "already bound" (the API's answer too), never as a name conflict of the tool with itself."""
    # given
    bind(instance, two_tools[0])
    # when
    with pytest.raises(ValidationError) as caught:
        binding_create(mcp_instance=instance, tool=two_tools[0], name_override=override)
    # then
    assert _only_error(caught.value) == _already_bound("orders_query", "Shop")
    assert _bindings(instance) == [("orders_query", "orders_query")]


def test_bind_that_lost_a_race_to_the_same_tool_is_already_bound(instance, two_tools, monkeypatch):
    """A bind whose checks passed before another bind of the same tool committed is refused, after taking the
    instance's lock, as "already bound" (SPEC §2.4 names the conflicting tool: here there is none)."""
    # given
    original_full_clean = Binding.full_clean
    raced = []

    def full_clean_then_lose_the_race(self, *args, **kwargs):
        original_full_clean(self, *args, **kwargs)
        if not raced:
            raced.append(True)
            binding_create(mcp_instance=instance, tool=two_tools[0])  # the winner, committed first

    monkeypatch.setattr(Binding, "full_clean", full_clean_then_lose_the_race)
    # when
    with pytest.raises(ValidationError) as caught:
        binding_create(mcp_instance=instance, tool=two_tools[0])
    # then
    assert _only_error(caught.value) == _already_bound("orders_query", "Shop")
    assert _bindings(instance) == [("orders_query", "orders_query")]


def test_moving_a_binding_to_a_tool_already_bound_there_is_refused(instance, two_tools, bind):
    """binding_update onto a tool the instance already binds is "already bound"; the binding stays."""
    # given
    bind(instance, two_tools[0])
    second = bind(instance, two_tools[1])
    # when
    with pytest.raises(ValidationError) as caught:
        binding_update(binding=Binding.objects.get(pk=second.pk), tool=two_tools[0], name_override="other_name")
    # then
    assert _only_error(caught.value) == _already_bound("orders_query", "Shop")
    stored = Binding.objects.get(pk=second.pk)
    assert (stored.tool_id, stored.name_override, stored.name_key) == (two_tools[1].pk, "", "orders_all")


@pytest.mark.parametrize("deleted", ["tool", "mcp_instance"])
def test_bind_of_a_tool_or_instance_deleted_meanwhile_is_refused(instance, two_tools, deleted, monkeypatch):
    """A bind whose tool (or instance) is deleted after its checks passed, before it takes its locks, is a
    clear error on that field, not a 500 or a foreign-key failure at commit; nothing is written."""
    # given
    original_full_clean = Binding.full_clean

    def full_clean_then_delete(self, *args, **kwargs):
        original_full_clean(self, *args, **kwargs)
        if deleted == "tool":
            tool_delete(tool=Tool.objects.get(pk=two_tools[0].pk))
        else:
            instance_delete(instance=McpInstance.objects.get(pk=instance.pk))

    monkeypatch.setattr(Binding, "full_clean", full_clean_then_delete)
    # when
    with pytest.raises(ValidationError) as caught:
        binding_create(mcp_instance=instance, tool=two_tools[0])
    # then
    what = "tool" if deleted == "tool" else "instance"
    assert _only_error(caught.value) == (deleted, "invalid_choice", f"That {what} was deleted meanwhile.")
    assert Binding.objects.count() == 0


#
# NAME_CONFLICT
#


@pytest.mark.parametrize("name", ["orders_query", "ORDERS_QUERY", "Orders_Query"])
def test_bind_same_name_is_name_conflict(owner, table, make_tool, instance, two_tools, bind, name):
    """Binding a tool whose name equals (ignoring case) a bound name is refused, naming both."""
    # given
    bind(instance, two_tools[0])
    twin = make_tool(owner, table, type="select", name=name)
    # when
    with pytest.raises(ValidationError) as caught:
        binding_create(mcp_instance=instance, tool=twin)
    # then
    assert _only_error(caught.value) == ("tool", ErrorCode.NAME_CONFLICT, _conflict(name, "orders_query", "Shop"))
    assert _bindings(instance) == [("orders_query", "orders_query")]


def test_bind_with_override_into_a_bound_name_is_name_conflict(instance, two_tools, bind):
    """An override is checked like a name."""
    # given
    bind(instance, two_tools[0])
    # when
    with pytest.raises(ValidationError) as caught:
        binding_create(mcp_instance=instance, tool=two_tools[1], name_override="Orders_QUERY")
    # then
    assert _only_error(caught.value) == (
        "name_override",
        ErrorCode.NAME_CONFLICT,
        _conflict("Orders_QUERY", "orders_query", "Shop"),
    )
    assert _bindings(instance) == [("orders_query", "orders_query")]


def test_bind_into_an_existing_override_is_name_conflict(owner, table, make_tool, instance, two_tools, bind):
    """A name equal to another binding's override collides; the error names the other tool, then the
    override it is bound under (SPEC §2.4: the conflicting tool and the instance)."""
    # given
    bind(instance, two_tools[0], name_override="find")
    other = make_tool(owner, table, type="select", name="Find")
    # when
    with pytest.raises(ValidationError) as caught:
        binding_create(mcp_instance=instance, tool=other)
    # then
    assert _only_error(caught.value) == (
        "tool",
        ErrorCode.NAME_CONFLICT,
        _conflict("Find", "orders_query", "Shop", bound_as="find"),
    )
    assert Binding.objects.count() == 1


def test_override_into_another_override_names_the_other_tool(instance, two_tools, bind):
    """An override colliding with another binding's override names that binding's tool and its override."""
    # given
    bind(instance, two_tools[0], name_override="lookup")
    second = bind(instance, two_tools[1])
    # when
    with pytest.raises(ValidationError) as caught:
        binding_update(binding=Binding.objects.get(pk=second.pk), name_override="LookUp")
    # then
    assert _only_error(caught.value) == (
        "name_override",
        ErrorCode.NAME_CONFLICT,
        _conflict("LookUp", "orders_query", "Shop", bound_as="lookup"),
    )
    assert Binding.objects.get(pk=second.pk).name_key == "orders_all"


def test_tool_rename_into_an_override_names_the_other_tool(instance, two_tools, bind):
    """A rename colliding with an override names the tool bound under it, and the override."""
    # given
    bind(instance, two_tools[0], name_override="everything")
    bind(instance, two_tools[1])
    # when
    with pytest.raises(ValidationError) as caught:
        tool_update(tool=Tool.objects.get(pk=two_tools[1].pk), name="Everything")
    # then
    assert _only_error(caught.value) == (
        "name",
        ErrorCode.NAME_CONFLICT,
        _conflict("Everything", "orders_query", "Shop", bound_as="everything"),
    )
    assert Tool.objects.get(pk=two_tools[1].pk).name == "orders_all"


def test_override_avoids_a_conflict(owner, table, make_tool, instance, two_tools, bind):
    """A same-named tool can be bound under another name."""
    # given
    bind(instance, two_tools[0])
    twin = make_tool(owner, table, type="select", name="orders_query")
    # when
    binding = binding_create(mcp_instance=instance, tool=twin, name_override="orders_by_id")
    # then
    assert Binding.objects.get(pk=binding.pk).effective_name == "orders_by_id"
    assert _bindings(instance) == [("orders_query", "orders_by_id"), ("orders_query", "orders_query")]


def test_override_update_into_a_collision_is_refused(instance, two_tools, bind):
    """Setting an override that collides is NAME_CONFLICT; the stored binding keeps its name."""
    # given
    bind(instance, two_tools[0])
    second = bind(instance, two_tools[1])
    # when
    with pytest.raises(ValidationError) as caught:
        binding_update(binding=Binding.objects.get(pk=second.pk), name_override="ORDERS_query")
    # then
    assert _only_error(caught.value) == (
        "name_override",
        ErrorCode.NAME_CONFLICT,
        _conflict("ORDERS_query", "orders_query", "Shop"),
    )
    stored = Binding.objects.get(pk=second.pk)
    assert (stored.name_override, stored.name_key) == ("", "orders_all")


def test_clearing_an_override_into_a_collision_is_refused(owner, table, make_tool, instance, two_tools, bind):
    """Removing an override makes the tool's own name effective, which may collide too."""
    # given
    bind(instance, two_tools[0])
    twin = make_tool(owner, table, type="select", name="orders_query")
    binding = bind(instance, twin, name_override="by_id")
    # when
    with pytest.raises(ValidationError) as caught:
        binding_update(binding=Binding.objects.get(pk=binding.pk), name_override="")
    # then
    assert _only_error(caught.value)[1] == ErrorCode.NAME_CONFLICT
    assert Binding.objects.get(pk=binding.pk).name_key == "by_id"


def test_override_of_own_name_in_another_case_is_allowed(instance, two_tools, bind):
    """A binding never conflicts with itself."""
    # given
    binding = bind(instance, two_tools[0])
    # when
    binding_update(binding=Binding.objects.get(pk=binding.pk), name_override="Orders_Query")
    # then
    stored = Binding.objects.get(pk=binding.pk)
    assert (stored.effective_name, stored.name_key) == ("Orders_Query", "orders_query")


def test_tool_rename_into_a_collision_is_refused(instance, two_tools, bind):
    """Renaming a bound tool into a bound name of the instance is NAME_CONFLICT; nothing changes."""
    # given
    bind(instance, two_tools[0])
    bind(instance, two_tools[1])
    # when
    with pytest.raises(ValidationError) as caught:
        tool_update(tool=Tool.objects.get(pk=two_tools[1].pk), name="Orders_Query")
    # then
    assert _only_error(caught.value) == (
        "name",
        ErrorCode.NAME_CONFLICT,
        _conflict("Orders_Query", "orders_query", "Shop"),
    )
    assert Tool.objects.get(pk=two_tools[1].pk).name == "orders_all"
    assert _bindings(instance) == [("orders_all", "orders_all"), ("orders_query", "orders_query")]


def test_same_name_on_different_instances_is_allowed(owner, table, make_tool, make_instance, two_tools, bind):
    """Names are unique per instance, not across instances."""
    # given
    first, second = make_instance(owner, slug="one"), make_instance(owner, slug="two")
    twin = make_tool(owner, table, type="select", name="orders_query")
    bind(first, two_tools[0])
    # when
    bind(second, twin)
    # then
    assert _bindings(first) == [("orders_query", "orders_query")]
    assert _bindings(second) == [("orders_query", "orders_query")]


def test_disabled_binding_still_holds_its_name(owner, table, make_tool, instance, two_tools, bind):
    """A disabled binding keeps its name, so enabling it later can never collide."""
    # given
    bind(instance, two_tools[0], enabled=False)
    twin = make_tool(owner, table, type="select", name="orders_query")
    # when
    with pytest.raises(ValidationError) as caught:
        binding_create(mcp_instance=instance, tool=twin)
    # then
    assert _only_error(caught.value)[1] == ErrorCode.NAME_CONFLICT
    assert Binding.objects.count() == 1


def test_unbinding_frees_the_name(owner, table, make_tool, instance, two_tools, bind):
    """Deleting a binding lets another tool take its name."""
    # given
    first = bind(instance, two_tools[0])
    twin = make_tool(owner, table, type="select", name="ORDERS_QUERY")
    first.delete()
    # when
    binding = binding_create(mcp_instance=instance, tool=twin)
    # then
    assert _bindings(instance) == [("ORDERS_QUERY", "orders_query")]
    assert Binding.objects.get(pk=binding.pk).effective_name == "ORDERS_QUERY"


def test_changing_an_override_frees_the_old_name(owner, table, make_tool, instance, two_tools, bind):
    """After an override changes, the old effective name is free."""
    # given
    binding = bind(instance, two_tools[0], name_override="find")
    binding_update(force=True, binding=Binding.objects.get(pk=binding.pk), name_override="lookup")
    other = make_tool(owner, table, type="select", name="find")
    # when
    bind(instance, other)
    # then
    assert _bindings(instance) == [("find", "find"), ("orders_query", "lookup")]


def test_renaming_a_bound_tool_frees_its_old_name(owner, table, make_tool, instance, two_tools, bind):
    """After a rename the old name can be bound by another tool."""
    # given
    bind(instance, two_tools[0])
    tool_update(force=True, tool=Tool.objects.get(pk=two_tools[0].pk), name="orders_jmespath")
    twin = make_tool(owner, table, type="select", name="orders_query")
    # when
    bind(instance, twin)
    # then
    assert _bindings(instance) == [("orders_jmespath", "orders_jmespath"), ("orders_query", "orders_query")]


def test_database_refuses_duplicate_name_keys(instance, two_tools, bind):
    """The unique constraint on (instance, name key) holds even when the service is bypassed."""
    # given
    from django.db import IntegrityError, transaction

    bind(instance, two_tools[0])
    # when
    with pytest.raises(IntegrityError), transaction.atomic():
        Binding.objects.create(mcp_instance=instance, tool=two_tools[1], name_key="orders_query")
    # then
    assert Binding.objects.count() == 1
