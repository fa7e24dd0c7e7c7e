"""Write services: table versions (SPEC §2.1, §8) and tool renames under the name rule (SPEC §2.4)."""

import pytest
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models.signals import post_save

from tools_app import services
from tools_app.kernel.errors import ErrorCode
from tools_app.models import Binding, Table, TableChange, Tool
from tools_app.tests.history_helpers import write_elsewhere
from tools_app.tool_types import TOOL_TYPES

pytestmark = pytest.mark.django_db


def _stored(table: Table) -> Table:
    return Table.objects.get(pk=table.pk)


#
# Tables
#


def test_table_create_starts_at_version_1(owner):
    """A new table has version 1 and the given data."""
    # given / when
    table = services.table_create(owner=owner, name="t", data=[{"id": 1}])
    # then
    stored = _stored(table)
    assert (stored.version, stored.data, stored.owner_id) == (1, [{"id": 1}], owner.pk)


def test_table_create_without_data_is_an_empty_object(owner):
    """No data given: an empty object."""
    # given / when
    table = services.table_create(owner=owner, name="t")
    # then
    assert _stored(table).data == {}


def test_name_and_description_edits_do_not_bump_version(table):
    """SPEC §8: version counts data writes only."""
    # given
    assert table.version == 1
    # when
    services.table_update(table=table, name="renamed", description="New words.")
    # then
    stored = _stored(table)
    assert (stored.name, stored.description, stored.version) == ("renamed", "New words.", 1)
    assert table.version == 1


def test_rename_does_not_load_the_document(table):
    """A name/description edit neither reads nor rewrites the data column (a large table renames at once)."""
    # given
    deferred = Table.objects.get(pk=table.pk)
    statements = []

    def spy(execute, sql, params, many, context):
        statements.append(sql)
        return execute(sql, params, many, context)

    # when
    with connection.execute_wrapper(spy):
        services.table_update(table=deferred, name="renamed")
    # then
    data_column = connection.ops.quote_name("data")
    assert len(statements) >= 2  # the locked read and the update
    assert [sql for sql in statements if data_column in sql] == []  # the row holds no document at all
    stored = _stored(table)
    assert (stored.name, stored.data, stored.version) == ("renamed", table.data, 1)


def test_invalid_rename_writes_nothing(table):
    """A rename is still validated (here: a name over 200 characters) and nothing is written."""
    # given
    before = _stored(table)
    # when
    with pytest.raises(ValidationError) as caught:
        services.table_update(table=Table.objects.get(pk=table.pk), name="x" * 201)
    # then
    assert list(caught.value.error_dict) == ["name"]
    stored = _stored(table)
    assert (stored.name, stored.data, stored.version, stored.updated_at) == (
        before.name,
        before.data,
        1,
        before.updated_at,
    )


def test_data_edit_bumps_version_once(table):
    """Replacing the data is one data write: version +1, new data stored."""
    # given
    new_data = [{"id": 9}]
    # when
    services.table_update(table=table, data=new_data)
    # then
    stored = _stored(table)
    assert (stored.version, stored.data) == (2, [{"id": 9}])
    assert (table.version, table.data) == (2, [{"id": 9}])


def test_data_and_name_edit_together_bump_version_once(table):
    """A name change together with a data change is still one data write."""
    # given / when
    services.table_update(table=table, name="both", data={"a": 1})
    # then
    stored = _stored(table)
    assert (stored.name, stored.data, stored.version) == ("both", {"a": 1}, 2)


def test_unchanged_data_does_not_bump_version(table):
    """Saving the same data again is not a write."""
    # given
    same = _stored(table).data
    # when
    services.table_update(table=table, data=same, description="only this")
    # then
    stored = _stored(table)
    assert (stored.version, stored.description) == (1, "only this")


@pytest.mark.parametrize(("before", "after"), [({"a": 1}, {"a": True}), ([0], [False]), ({"n": 1}, {"n": 1.5})])
def test_data_edit_between_equal_python_values_is_a_write(make_table, owner, before, after):
    """1 and true are different JSON values: replacing one with the other is stored and bumps version."""
    # given
    table = make_table(owner, name="typed", data=before)
    # when
    services.table_update(table=table, data=after)
    # then
    stored = _stored(table)
    assert stored.data == after
    assert [type(value) for value in _values(stored.data)] == [type(value) for value in _values(after)]
    assert stored.version == 2


def _values(data):
    return list(data.values()) if isinstance(data, dict) else list(data)


def test_successive_data_edits_count_each(table):
    """Each data write adds exactly one."""
    # given / when
    for index in range(3):
        services.table_update(table=table, data=[{"id": index}])
    # then
    assert _stored(table).version == 4


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("storage", ["document", "rows"])
def test_a_data_edit_answers_its_own_version_when_another_writer_commits_right_after_it(make_table, owner, storage):
    """table_update answers the version its write made, not one a writer committed between its commit and its
    return (an API client's ETag: a later one would let its next If-Match write over a change it never saw)."""
    # given: a writer elsewhere that commits the moment the edit commits
    table = make_table(owner, name="raced", data=[{"id": 1}], storage=storage)

    def write_after_the_commit(sender, instance, **kwargs):
        if instance.pk == table.pk:
            transaction.on_commit(lambda: write_elsewhere(table.pk, []))

    post_save.connect(write_after_the_commit, sender=Table)
    try:
        # when
        answered = services.table_update(table=table, data=[{"id": 2}]).version
    finally:
        post_save.disconnect(write_after_the_commit, sender=Table)
    # then
    assert (answered, table.version) == (2, 2)
    stored = _stored(table)
    assert (stored.version, stored.data) == (3, [{"id": 2}])
    entries = TableChange.objects.filter(table=table).order_by("version").values_list("version", "patch")
    assert [(version, patch == []) for version, patch in entries] == [(2, False), (3, True)]  # the edit's, the other


def test_invalid_table_update_writes_nothing(table):
    """null data is refused and neither data, name nor version change."""
    # given
    before = _stored(table)
    # when
    with pytest.raises(ValidationError) as caught:
        services.table_update(table=table, name="changed", data=None)
    # then
    assert "data" in caught.value.error_dict
    stored = _stored(table)
    assert (stored.name, stored.data, stored.version) == (before.name, before.data, 1)


def test_table_update_refuses_unknown_fields(table):
    """Only name, description and data can be changed (version is not settable)."""
    # given / when
    with pytest.raises(TypeError):
        services.table_update(table=table, version=10)
    # then
    assert _stored(table).version == 1


# table_write with a change of the whole document: the document storage's write (a rows table's go
# through records.write).
@pytest.mark.usefixtures("document_storage")
def test_table_write_applies_change_and_bumps_version(table):
    """table_write applies the change's patch, appends its entry and returns the new version and the outcome."""
    # given
    patch = [{"op": "add", "path": "/-", "value": {"id": 4}}]
    inverse = [{"op": "remove", "path": "/3"}]
    # when
    written = services.table_write(
        table_id=table.pk, change=lambda data, derived: (data + [{"id": 4}], "ok", patch, inverse, {})
    )
    # then
    assert (written.version, written.outcome, written.patch) == (2, "ok", patch)
    assert list(TableChange.objects.filter(table=table).values_list("version", "patch", "inverse")) == [
        (2, patch, inverse)
    ]
    stored = _stored(table)
    assert (stored.version, [row["id"] for row in stored.data]) == (2, [1, 2, 3, 4])


def test_table_write_failing_change_writes_nothing(table):
    """When change() raises, the data and version stay as they were."""
    # given
    before = _stored(table).data

    def change(data, derived):
        raise ValueError("refused")

    # when
    with pytest.raises(ValueError, match="refused"):
        services.table_write(table_id=table.pk, change=change)
    # then
    stored = _stored(table)
    assert (stored.data, stored.version) == (before, 1)
    assert not TableChange.objects.filter(table=table).exists()


# the other worker's entry is a patch of the document, which a document table's cache catches up with.
@pytest.mark.usefixtures("document_storage")
def test_table_data_sees_writes_made_elsewhere(table):
    """The per-process cache follows the version in the database (SPEC §1)."""
    # given
    assert services.table_data(table.pk)[0] == 1
    # when: another worker writes (an entry, version +1)
    write_elsewhere(table.pk, [{"op": "replace", "path": "", "value": [{"id": 42}]}])
    # then
    assert services.table_data(table.pk) == (2, [{"id": 42}])


#
# Tools: rename conflicts (SPEC §2.4)
#


def _conflict_message(name: str, other: str, instance: str, bound_as: str = "") -> str:
    other_text = f"{other!r}, bound as {bound_as!r}," if bound_as else repr(other)
    return (
        f"The name {name!r} is already used by the tool {other_text} on the instance {instance!r} "
        "(names are unique per instance, ignoring case)."
    )


def test_rename_into_a_bound_name_is_refused(owner, table, make_tool, instance, bind):
    """Renaming a bound tool into another bound tool's name (other case) is NAME_CONFLICT naming both."""
    # given
    first = make_tool(owner, table, name="orders_query")
    second = make_tool(owner, table, name="orders_all", type="get_all_data")
    bind(instance, first)
    bind(instance, second)
    # when
    with pytest.raises(ValidationError) as caught:
        services.tool_update(tool=second, name="ORDERS_QUERY")
    # then
    [error] = caught.value.error_dict["name"]
    assert error.code == ErrorCode.NAME_CONFLICT
    assert error.messages == [_conflict_message("ORDERS_QUERY", "orders_query", "Shop")]
    assert Tool.objects.get(pk=second.pk).name == "orders_all"
    assert sorted(Binding.objects.values_list("name_key", flat=True)) == ["orders_all", "orders_query"]


def test_rename_into_an_override_is_refused(owner, table, make_tool, instance, bind):
    """An override is an effective name: renaming into it collides too, and the error names the tool bound
    under it (not the override as if it were a tool's name), then the override."""
    # given
    first = make_tool(owner, table, name="orders_query")
    second = make_tool(owner, table, name="orders_all", type="get_all_data")
    bind(instance, first, name_override="find_orders")
    bind(instance, second)
    # when
    with pytest.raises(ValidationError) as caught:
        services.tool_update(tool=second, name="Find_Orders")
    # then
    [error] = caught.value.error_dict["name"]
    assert error.code == ErrorCode.NAME_CONFLICT
    assert error.messages == [_conflict_message("Find_Orders", "orders_query", "Shop", bound_as="find_orders")]
    assert Tool.objects.get(pk=second.pk).name == "orders_all"


def test_rename_of_a_tool_bound_with_an_override_is_free(owner, table, make_tool, instance, bind):
    """Where the tool is bound under an override, its own name does not count."""
    # given
    first = make_tool(owner, table, name="orders_query")
    second = make_tool(owner, table, name="orders_all", type="get_all_data")
    bind(instance, first)
    binding = bind(instance, second, name_override="everything")
    # when
    services.tool_update(tool=second, name="orders_query")
    # then
    assert Tool.objects.get(pk=second.pk).name == "orders_query"
    assert Binding.objects.get(pk=binding.pk).name_key == "everything"


def test_rename_into_a_name_used_on_another_instance_is_allowed(owner, table, make_tool, make_instance, bind):
    """Names are unique per instance only (SPEC §8)."""
    # given
    first = make_tool(owner, table, name="orders_query")
    second = make_tool(owner, table, name="orders_all", type="get_all_data")
    bind(make_instance(owner, slug="one"), first)
    bind(make_instance(owner, slug="two"), second)
    # when
    services.tool_update(force=True, tool=second, name="orders_query")
    # then
    assert Tool.objects.get(pk=second.pk).name == "orders_query"


def test_unbound_tools_may_share_a_name(owner, table, make_tool):
    """Tool names need not be unique across an owner's tools (SPEC §8)."""
    # given
    make_tool(owner, table, name="orders_query")
    second = make_tool(owner, table, name="other")
    # when
    services.tool_update(tool=second, name="orders_query")
    # then
    assert list(Tool.objects.filter(name="orders_query").values_list("pk", flat=True).order_by("pk")) == [
        Tool.objects.order_by("pk").first().pk,
        second.pk,
    ]


def test_rename_moves_the_binding_name_key(owner, table, make_tool, make_instance, bind):
    """The stored name keys of bindings without override follow the rename."""
    # given
    tool = make_tool(owner, table, name="orders_query")
    plain = bind(make_instance(owner, slug="one"), tool)
    overridden = bind(make_instance(owner, slug="two"), tool, name_override="q")
    # when
    services.tool_update(force=True, tool=tool, name="Find_Orders")
    # then
    assert Binding.objects.get(pk=plain.pk).name_key == "find_orders"
    assert Binding.objects.get(pk=overridden.pk).name_key == "q"


def test_rename_changing_only_case_is_allowed(owner, table, make_tool, instance, bind):
    """A tool never conflicts with itself."""
    # given
    tool = make_tool(owner, table, name="orders_query")
    binding = bind(instance, tool)
    # when
    services.tool_update(tool=tool, name="Orders_Query")
    # then
    assert Tool.objects.get(pk=tool.pk).name == "Orders_Query"
    assert Binding.objects.get(pk=binding.pk).name_key == "orders_query"


def test_invalid_tool_update_writes_nothing(owner, table, make_tool):
    """A refused update leaves the stored tool untouched."""
    # given
    tool = make_tool(owner, table, name="orders_query", description="Before.")
    # when
    with pytest.raises(ValidationError) as caught:
        services.tool_update(tool=tool, description="After.", input_schema={"type": "array"})
    # then
    assert set(caught.value.error_dict) == {"input_schema"}
    stored = Tool.objects.get(pk=tool.pk)
    assert (stored.description, stored.input_schema["required"]) == ("Before.", ["query"])


def test_tool_update_refuses_unknown_fields(owner, table, make_tool):
    """owner, use_count and other fields cannot be set through tool_update."""
    # given
    tool = make_tool(owner, table)
    # when
    with pytest.raises(TypeError):
        services.tool_update(tool=tool, use_count=5)
    # then
    assert Tool.objects.get(pk=tool.pk).use_count == 0


def test_tool_update_keeps_use_counts_made_since_the_tool_was_read(owner, table, make_tool):
    """SPEC §2.2: calls counted after the edited object was read are not overwritten by the edit, and the
    returned tool shows the counters as they are now."""
    # given
    tool = make_tool(owner, table, name="orders_query", description="Before.")
    stale = Tool.objects.get(pk=tool.pk)
    services.tool_use_record(tool_id=tool.pk)
    services.tool_use_record(tool_id=tool.pk)
    last_used = Tool.objects.get(pk=tool.pk).last_used
    # when
    updated = services.tool_update(tool=stale, description="After.")
    # then
    stored = Tool.objects.get(pk=tool.pk)
    assert (stored.description, stored.use_count, stored.last_used) == ("After.", 2, last_used)
    assert (updated.use_count, updated.last_used) == (2, last_used)


def test_tool_update_of_a_deleted_tool_does_not_bring_it_back(owner, table, make_tool):
    """An edit that lost the race to a delete raises Tool.DoesNotExist and writes nothing."""
    # given
    tool = make_tool(owner, table, name="orders_query")
    stale = Tool.objects.get(pk=tool.pk)
    Tool.objects.filter(pk=tool.pk).delete()
    # when
    with pytest.raises(Tool.DoesNotExist):
        services.tool_update(tool=stale, description="After.")
    # then
    assert Tool.objects.count() == 0


def test_tool_delete_removes_the_tool_and_its_bindings(owner, table, make_tool, instance, bind):
    """tool_delete deletes the tool and its bindings; other tools and the table stay."""
    # given
    doomed = make_tool(owner, table, name="doomed")
    kept = make_tool(owner, table, type="select", name="kept")
    bind(instance, doomed)
    kept_binding = bind(instance, kept)
    # when
    services.tool_delete(force=True, tool=doomed)
    # then
    assert list(Tool.objects.values_list("name", flat=True)) == ["kept"]
    assert list(Binding.objects.values_list("pk", flat=True)) == [kept_binding.pk]
    assert list(Table.objects.values_list("pk", flat=True)) == [table.pk]


def test_table_delete_removes_the_table_and_the_tools_on_it(owner, make_table, make_tool, instance, bind):
    """table_delete deletes the table, its tools and their bindings; another table and its tool stay."""
    # given
    doomed, kept = make_table(owner, name="doomed"), make_table(owner, name="kept")
    bind(instance, make_tool(owner, doomed, name="on_doomed"))
    kept_tool = make_tool(owner, kept, name="on_kept")
    # when
    services.table_delete(force=True, table=doomed)
    # then
    assert list(Table.objects.values_list("name", flat=True)) == ["kept"]
    assert list(Tool.objects.values_list("pk", flat=True)) == [kept_tool.pk]
    assert Binding.objects.count() == 0


def test_tool_create_fills_defaults(owner, table):
    """tool_create runs full_clean(): the default input schema is stored."""
    # given / when
    tool = services.tool_create(owner=owner, name="q", type="query_data", table=table, description="Query.")
    # then
    assert Tool.objects.get(pk=tool.pk).input_schema["required"] == ["query"]


def test_tool_use_record_bumps_counters(owner, table, make_tool):
    """use_count +1 and last_used set on each call."""
    # given
    tool = make_tool(owner, table)
    # when
    services.tool_use_record(tool_id=tool.pk)
    services.tool_use_record(tool_id=tool.pk)
    # then
    stored = Tool.objects.get(pk=tool.pk)
    assert stored.use_count == 2
    assert stored.last_used is not None


@pytest.mark.parametrize(("old", "new"), [("query_data", "select"), ("select", "get_all_data"), ("create", "update")])
def test_type_change_replaces_the_old_types_default_schema(owner, table, make_tool, old, new):
    """A schema that is still the old type's default follows the new type (it was never customised)."""
    # given
    tool = make_tool(owner, table, type=old)
    # when
    services.tool_update(tool=tool, type=new)
    # then
    stored = Tool.objects.get(pk=tool.pk)
    assert (stored.type, stored.input_schema) == (new, TOOL_TYPES[new].input_schema)


def test_type_change_keeps_a_custom_schema_and_checks_it(owner, table, make_tool):
    """A customised schema is kept on a type change, so it must suit the new type."""
    # given
    custom = {"type": "object", "properties": {"query": {"type": "string", "maxLength": 50}}, "required": ["query"]}
    tool = make_tool(owner, table, type="query_data", input_schema=custom)
    # when
    with pytest.raises(ValidationError) as caught:
        services.tool_update(tool=tool, type="select")
    # then
    assert [error.code for error in caught.value.error_dict["input_schema"]] == ["missing_arguments"]
    stored = Tool.objects.get(pk=tool.pk)
    assert (stored.type, stored.input_schema) == ("query_data", custom)
