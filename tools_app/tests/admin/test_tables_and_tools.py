"""The admin for tables and tools: ownership, JSON editing, services, try-it (SPEC §2, §7)."""

import json
import re
from html import unescape

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils.html import escape

from tests.api_helpers import response_bytes
from tools_app.execution.executors import execute
from tools_app.kernel.errors import ErrorCode, ToolhubError
from tools_app.models import CallLog, Table, Tool

ADMIN_INDEX = "/admin/"


def table_form(table_or_none=None, **overrides):
    data = {"name": "orders", "description": "", "data": "[]"}
    if table_or_none is not None:
        data.update(name=table_or_none.name, description=table_or_none.description, data=json.dumps(table_or_none.data))
    data.update(overrides)
    return data


def tool_form(tool, **overrides):
    data = {
        "name": tool.name,
        "alias": tool.alias,
        "type": tool.type,
        "description": tool.description,
        "table": tool.table_id or "",
        "json_path": tool.json_path,
        "input_schema": json.dumps(tool.input_schema),
        "output_schema": "",
        "metadata": json.dumps(tool.metadata),
    }
    data.update(overrides)
    return data


#
# Ownership (the admin's ownership matrix)
#


def test_table_list_shows_only_own_tables(client, owner, other_user, make_table):
    """A staff user who is not the owner does not see another user's tables in the list."""
    # given
    make_table(owner, name="mine")
    make_table(other_user, name="theirs")
    client.force_login(owner)
    # when
    response = client.get(reverse("admin:tools_app_table_changelist"))
    # then
    assert response.status_code == 200
    names = [table.name for table in response.context["cl"].result_list]
    assert names == ["mine"]


def test_tool_list_shows_only_own_tools(client, owner, other_user, make_table, make_tool):
    """Another user's tools are not listed."""
    # given
    make_tool(owner, make_table(owner), name="mine_q")
    make_tool(other_user, make_table(other_user), name="theirs_q")
    client.force_login(owner)
    # when
    response = client.get(reverse("admin:tools_app_tool_changelist"))
    # then
    assert [tool.name for tool in response.context["cl"].result_list] == ["mine_q"]


def test_other_user_cannot_open_table(other_client, table):
    """Opening another user's table behaves as if it did not exist (redirect to the index)."""
    # when
    response = other_client.get(reverse("admin:tools_app_table_change", args=[table.pk]))
    # then
    assert response.status_code == 302
    assert response["Location"] == ADMIN_INDEX


def test_other_user_cannot_change_table(other_client, table):
    """A POST to another user's table changes nothing."""
    # when
    response = other_client.post(
        reverse("admin:tools_app_table_change", args=[table.pk]), table_form(name="stolen", data='{"x": 1}')
    )
    # then
    assert response.status_code == 302
    table.refresh_from_db()
    assert table.name == "orders"
    assert table.version == 1
    assert table.data[0]["customer"] == "ada"


def test_other_user_cannot_delete_table(other_client, table):
    """Deleting another user's table is refused and the table stays."""
    # when
    response = other_client.post(reverse("admin:tools_app_table_delete", args=[table.pk]), {"post": "yes"})
    # then
    assert response.status_code == 302
    assert Table.objects.filter(pk=table.pk).exists()


def test_other_user_cannot_delete_table_through_bulk_action(other_client, table):
    """The changelist's delete action only reaches the caller's own rows."""
    # when
    other_client.post(
        reverse("admin:tools_app_table_changelist"),
        {"action": "delete_selected", "_selected_action": [table.pk], "post": "yes"},
    )
    # then
    assert Table.objects.filter(pk=table.pk).exists()


def test_other_user_cannot_open_change_or_delete_tool(other_client, owner, table, make_tool):
    """Another user's tool: not opened, not changed, not deleted."""
    # given
    tool = make_tool(owner, table)
    # when
    opened = other_client.get(reverse("admin:tools_app_tool_change", args=[tool.pk]))
    changed = other_client.post(reverse("admin:tools_app_tool_change", args=[tool.pk]), tool_form(tool, name="x"))
    deleted = other_client.post(reverse("admin:tools_app_tool_delete", args=[tool.pk]), {"post": "yes"})
    # then
    assert [opened.status_code, changed.status_code, deleted.status_code] == [302, 302, 302]
    tool.refresh_from_db()
    assert tool.name == "query_data_tool"


def test_tool_table_choices_exclude_other_users_tables(client, owner, other_user, make_table):
    """The table select on the tool form only offers the user's own tables."""
    # given
    mine = make_table(owner, name="mine")
    theirs = make_table(other_user, name="theirs")
    client.force_login(owner)
    # when
    response = client.get(reverse("admin:tools_app_tool_add"))
    # then
    choices = [value for value, _ in response.context["adminform"].form.fields["table"].choices if value]
    assert [choice.value for choice in choices] == [mine.pk]
    assert theirs.pk not in [choice.value for choice in choices]


def test_tool_on_other_users_table_is_refused(client, owner, other_user, make_table):
    """Posting another user's table id is a form error and no tool is created."""
    # given
    theirs = make_table(other_user, name="theirs")
    client.force_login(owner)
    # when
    response = client.post(
        reverse("admin:tools_app_tool_add"),
        {"name": "sneaky", "type": "get_all_data", "description": "d", "table": theirs.pk, "json_path": ""},
    )
    # then
    assert response.status_code == 200
    assert "Select a valid choice" in str(response.context["adminform"].form.errors["table"])
    assert Tool.objects.count() == 0


def test_superuser_sees_every_users_tables(client, superuser, owner, other_user, make_table):
    """A superuser lists and opens every user's objects."""
    # given
    make_table(owner, name="a")
    theirs = make_table(other_user, name="b")
    client.force_login(superuser)
    # when
    listed = client.get(reverse("admin:tools_app_table_changelist"))
    opened = client.get(reverse("admin:tools_app_table_change", args=[theirs.pk]))
    # then
    assert sorted(t.name for t in listed.context["cl"].result_list) == ["a", "b"]
    assert opened.status_code == 200


#
# Tables: JSON editing through the services
#


def test_table_data_is_shown_indented(owner_client, table):
    """The data editor shows the JSON pretty-printed with an indent of 2."""
    # given
    table.refresh_from_db()  # PostgreSQL's jsonb stores object keys in its own order
    # when
    response = owner_client.get(reverse("admin:tools_app_table_change", args=[table.pk]))
    # then
    form = response.context["adminform"].form
    assert form["data"].value() == json.dumps(table.data, indent=2)
    assert "  {\n    &quot;id&quot;: 1," in response.content.decode()


def test_invalid_json_is_refused_with_line_and_column(owner_client, table):
    """Invalid JSON is refused with the position of the error and nothing is saved."""
    # when
    response = owner_client.post(
        reverse("admin:tools_app_table_change", args=[table.pk]),
        table_form(table, name="renamed", data='[\n  {"id": 1,,}\n]'),
    )
    # then
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["data"] == [
        "Invalid JSON data at line 2, column 12: Expecting property name enclosed in double quotes."
    ]
    table.refresh_from_db()
    assert (table.name, table.version, len(table.data)) == ("orders", 1, 3)


def test_invalid_json_is_shown_back_as_typed(owner_client, table):
    """The refused text stays in the editor so it can be fixed in place."""
    # when
    response = owner_client.post(
        reverse("admin:tools_app_table_change", args=[table.pk]), table_form(table, data="[1, 2")
    )
    # then
    assert response.context["adminform"].form["data"].value() == "[1, 2"


def test_data_edit_bumps_version_and_name_edit_does_not(owner_client, table):
    """Saving changed data is a write (version +1); renaming alone leaves the version."""
    # when
    owner_client.post(reverse("admin:tools_app_table_change", args=[table.pk]), table_form(table, data='[{"id": 9}]'))
    table.refresh_from_db()
    after_data = (table.version, table.data)
    owner_client.post(reverse("admin:tools_app_table_change", args=[table.pk]), table_form(table, name="renamed"))
    table.refresh_from_db()
    # then
    assert after_data == (2, [{"id": 9}])
    assert (table.name, table.version) == ("renamed", 2)


def test_table_add_goes_through_the_service(owner_client, owner):
    """A table added in the admin belongs to the user and starts at version 1."""
    # when
    response = owner_client.post(
        reverse("admin:tools_app_table_add"), {"name": "catalog", "description": "", "data": '{"a": {"x": 1}}'}
    )
    # then
    assert response.status_code == 302
    table = Table.objects.get(name="catalog")
    assert (table.owner, table.version, table.data) == (owner, 1, {"a": {"x": 1}})


def test_empty_data_is_refused_on_change(owner_client, table):
    """Clearing the editor is refused: an empty table is [] or {}."""
    # when
    response = owner_client.post(reverse("admin:tools_app_table_change", args=[table.pk]), table_form(table, data=""))
    # then
    assert response.status_code == 200
    assert "use [] or {}" in str(response.context["adminform"].form.errors["data"])
    table.refresh_from_db()
    assert len(table.data) == 3


def test_large_table_shows_summary_instead_of_editor(owner_client, table, settings):
    """Above the editor limit the page shows a size note and an excerpt, not a textarea with the document."""
    # given
    settings.TOOLHUB_ADMIN_EDITOR_MAX_CHARS = 100
    # when
    response = owner_client.get(reverse("admin:tools_app_table_change", args=[table.pk]))
    # then
    html = response.content.decode()
    assert "data" not in response.context["adminform"].form.fields
    assert 'name="data"' not in html
    assert "Data (read-only summary)" in html
    assert response.context["table_large"] is True
    assert response.context["table_excerpt"].startswith('[\n  {\n    "id": 1,')


def test_large_table_rename_keeps_data_and_version(owner_client, table, settings):
    """Saving a large table's name does not touch its data."""
    # given
    settings.TOOLHUB_ADMIN_EDITOR_MAX_CHARS = 100
    # when
    response = owner_client.post(
        reverse("admin:tools_app_table_change", args=[table.pk]), {"name": "big", "description": "d"}
    )
    # then
    assert response.status_code == 302
    table.refresh_from_db()
    assert (table.name, table.version, len(table.data)) == ("big", 1, 3)


def test_upload_replaces_data(owner_client, table):
    """An uploaded .json file replaces the whole document (version +1)."""
    # given
    upload = SimpleUploadedFile("new.json", b'[{"id": 42}]', content_type="application/json")
    # when
    response = owner_client.post(
        reverse("admin:tools_app_table_change", args=[table.pk]), {**table_form(table), "data_file": upload}
    )
    # then
    assert response.status_code == 302
    table.refresh_from_db()
    assert (table.data, table.version) == ([{"id": 42}], 2)


def test_invalid_upload_is_refused_with_position(owner_client, table):
    """An uploaded file with invalid JSON is refused with its line and column; nothing is saved."""
    # given
    upload = SimpleUploadedFile("bad.json", b'{\n "a": tru\n}', content_type="application/json")
    # when
    response = owner_client.post(
        reverse("admin:tools_app_table_change", args=[table.pk]), {**table_form(table), "data_file": upload}
    )
    # then
    assert response.context["adminform"].form.errors["data_file"] == [
        "Invalid JSON at line 2, column 7: Expecting value."
    ]
    table.refresh_from_db()
    assert table.version == 1


def test_download_returns_the_document(owner_client, table):
    """The download link returns the data as a JSON file."""
    # when
    response = owner_client.get(reverse("admin:tools_app_table_download", args=[table.pk]))
    # then
    assert response["Content-Disposition"] == 'attachment; filename="orders.json"'
    assert json.loads(response_bytes(response)) == table.data


def test_download_of_other_users_table_is_404(other_client, table):
    """Another user's data cannot be downloaded."""
    # when
    response = other_client.get(reverse("admin:tools_app_table_download", args=[table.pk]))
    # then
    assert response.status_code == 404


def test_table_page_shows_shape_and_tools(owner_client, owner, table, make_tool):
    """The table page shows the data's shape (as get_data_schema sees it) and the tools on the table."""
    # given
    make_tool(owner, table, name="orders_q")
    # when
    response = owner_client.get(reverse("admin:tools_app_table_change", args=[table.pk]))
    # then
    shape = json.loads(response.context["table_shape"])
    assert (shape["root_type"], shape["item_count"]) == ("array", 3)
    assert shape["fields"]["status"] == ["string"]
    assert [tool.name for tool in response.context["table_tools"]] == ["orders_q"]


#
# Tools: JSON fields, services, NAME_CONFLICT as a form error
#


def test_tool_metadata_invalid_json_names_position(owner_client, owner, table, make_tool):
    """Invalid JSON in a tool's metadata is refused with line and column; the tool is unchanged."""
    # given
    tool = make_tool(owner, table)
    # when
    response = owner_client.post(
        reverse("admin:tools_app_tool_change", args=[tool.pk]), tool_form(tool, metadata='{"tags": ["a",]}')
    )
    # then
    assert response.context["adminform"].form.errors["metadata"] == [
        "Invalid JSON in the metadata at line 1, column 15: Expecting value."
    ]
    tool.refresh_from_db()
    assert tool.metadata == {}


def test_tool_schema_that_is_not_a_schema_is_refused(owner_client, owner, table, make_tool):
    """Valid JSON that is not a valid input schema is a form error from the model's validation."""
    # given
    tool = make_tool(owner, table)
    # when
    response = owner_client.post(
        reverse("admin:tools_app_tool_change", args=[tool.pk]), tool_form(tool, input_schema='{"type": "array"}')
    )
    # then
    assert response.context["adminform"].form.errors["input_schema"] == ['An input schema must have "type": "object".']
    tool.refresh_from_db()
    assert tool.input_schema["required"] == ["query"]


def test_tool_add_fills_default_schema(owner_client, owner, table):
    """A tool added with an empty input schema gets its type's default, through the service."""
    # when
    response = owner_client.post(
        reverse("admin:tools_app_tool_add"),
        {"name": "q", "type": "query_data", "description": "Query.", "table": table.pk, "json_path": ""},
    )
    # then
    assert response.status_code == 302
    tool = Tool.objects.get(name="q")
    assert (tool.owner, tool.input_schema["required"], tool.metadata) == (owner, ["query"], {})


def test_rename_into_bound_name_is_a_form_error(owner_client, owner, table, make_tool, instance, bind):
    """Renaming a bound tool into another bound name (any case) is a NAME_CONFLICT form error, not a 500."""
    # given
    first = make_tool(owner, table, name="orders_query")
    second = make_tool(owner, table, name="orders_all", type="get_all_data")
    bind(instance, first)
    bind(instance, second)
    # when
    response = owner_client.post(
        reverse("admin:tools_app_tool_change", args=[second.pk]), tool_form(second, name="ORDERS_QUERY")
    )
    # then
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors.as_data()["name"]
    assert errors[0].code == ErrorCode.NAME_CONFLICT
    assert "'orders_query' on the instance 'Shop'" in errors[0].messages[0]
    second.refresh_from_db()
    assert second.name == "orders_all"


def test_service_refusal_at_save_time_is_a_form_error(owner_client, owner, table, make_tool, monkeypatch):
    """A conflict the service finds at save time (e.g. a concurrent bind) is shown on the form; nothing saved."""
    # given
    tool = make_tool(owner, table)
    from tools_app import services

    def refuse(**kwargs):
        raise ValidationError(
            {"name": ValidationError("The name 'x' is already used by the tool 'x'.", code=ErrorCode.NAME_CONFLICT)}
        )

    monkeypatch.setattr(services, "tool_update", refuse)
    # when
    response = owner_client.post(
        reverse("admin:tools_app_tool_change", args=[tool.pk]), tool_form(tool, name="x", description="new")
    )
    # then
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["name"] == ["The name 'x' is already used by the tool 'x'."]
    tool.refresh_from_db()
    assert (tool.name, tool.description) == ("query_data_tool", "A query_data tool for tests.")


def test_tool_page_shows_type_help_bound_instances_and_stats(owner_client, owner, table, make_tool, instance, bind):
    """The tool page explains json_path/preview_keys/key_field, lists its instances and its call stats."""
    # given
    tool = make_tool(owner, table, type="preview", name="orders_preview")
    bind(instance, tool, enabled=False)
    for duration, status in ((10.0, "ok"), (30.0, "error")):
        CallLog.objects.create(
            owner=owner, tool=tool, tool_name=tool.name, status=status, duration_ms=duration, mcp_instance=instance
        )
    # when
    response = owner_client.get(reverse("admin:tools_app_tool_change", args=[tool.pk]))
    # then
    html = response.content.decode()
    assert "preview_keys (metadata) lists the fields a preview keeps" in html
    assert "json_path is the mount point inside the table" in html
    assert [(b["instance"].name, b["enabled"]) for b in response.context["tool_bindings"]] == [("Shop", False)]
    stats = response.context["tool_stats"]
    assert (stats["count"], stats["errors"], stats["error_rate"], stats["p50_ms"], stats["p95_ms"]) == (
        2,
        1,
        50.0,
        10.0,
        30.0,
    )


#
# Try it
#


def test_try_it_form_has_a_field_per_schema_property(owner_client, owner, table, make_tool):
    """The try-it form is built from the input schema: one field per property plus raw JSON."""
    # given
    tool = make_tool(owner, table, type="select", name="orders_select")
    # when
    response = owner_client.get(reverse("admin:tools_app_tool_try", args=[tool.pk]))
    # then
    form = response.context["form"]
    assert list(form.fields) == ["keys", "field", "__raw_arguments"]
    assert form.fields["keys"].label == "keys *"


def test_try_it_runs_the_tool_and_records_the_call(owner_client, owner, table, make_tool):
    """Running a query shows the JSON result, bumps use_count and writes a call-log row (surface admin)."""
    # given
    tool = make_tool(owner, table, name="orders_query")
    # when
    response = owner_client.post(reverse("admin:tools_app_tool_try", args=[tool.pk]), {"query": "[?status=='paid'].id"})
    # then
    outcome = response.context["outcome"]
    assert (outcome["ok"], json.loads(outcome["result"])) == (True, [1])
    tool.refresh_from_db()
    assert tool.use_count == 1
    log = CallLog.objects.get()
    assert (log.tool_id, log.tool_name, log.surface, log.status, log.owner_id) == (
        tool.pk,
        "orders_query",
        "admin",
        "ok",
        owner.pk,
    )


def test_try_it_shows_error_code_and_message(owner_client, owner, table, make_tool):
    """A tool error shows its code and message and is logged as an error."""
    # given
    tool = make_tool(owner, table, name="orders_query")
    # when
    response = owner_client.post(reverse("admin:tools_app_tool_try", args=[tool.pk]), {"query": "[?"})
    # then
    outcome = response.context["outcome"]
    assert (outcome["ok"], outcome["code"]) == (False, "INVALID_QUERY")
    assert 'toolhub-error-code">INVALID_QUERY</strong>' in response.content.decode()
    log = CallLog.objects.get()
    assert (log.status, log.error_code) == ("error", "INVALID_QUERY")


def test_try_it_raw_json_arguments_replace_fields(owner_client, owner, table, make_tool):
    """Raw JSON arguments, when given, are what the tool receives."""
    # given
    tool = make_tool(owner, table, type="select", name="orders_select")
    # when
    response = owner_client.post(
        reverse("admin:tools_app_tool_try", args=[tool.pk]), {"keys": "[1]", "__raw_arguments": '{"keys": [2, 7]}'}
    )
    # then
    result = json.loads(response.context["outcome"]["result"])
    assert [item["id"] for item in result["items"]] == [2]
    assert result["not_found"] == [7]


def test_try_it_invalid_json_field_runs_nothing(owner_client, owner, table, make_tool):
    """Invalid JSON in an argument field is a form error with its position; the tool does not run."""
    # given
    tool = make_tool(owner, table, type="select", name="orders_select")
    # when
    response = owner_client.post(reverse("admin:tools_app_tool_try", args=[tool.pk]), {"keys": "[1,"})
    # then
    assert response.context["form"].errors["keys"] == ["Invalid JSON in keys at line 1, column 4: Expecting value."]
    assert response.context["outcome"] is None
    assert CallLog.objects.count() == 0
    tool.refresh_from_db()
    assert tool.use_count == 0


def test_try_it_write_tool_changes_the_table(owner_client, owner, table, make_tool):
    """A write tool run from try-it writes through the data-access layer (version +1)."""
    # given
    tool = make_tool(owner, table, type="create", name="orders_create")
    # when
    response = owner_client.post(
        reverse("admin:tools_app_tool_try", args=[tool.pk]), {"elements": '[{"id": 4, "status": "new"}]'}
    )
    # then
    assert json.loads(response.context["outcome"]["result"]) == {"created": 1, "version": 2}
    table.refresh_from_db()
    assert (table.version, table.data[-1]) == (2, {"id": 4, "status": "new"})


def test_try_it_on_other_users_tool_is_404_and_runs_nothing(other_client, owner, table, make_tool):
    """Another user's tool cannot be tried: 404, no call recorded, data untouched."""
    # given
    tool = make_tool(owner, table, type="delete", name="orders_delete")
    # when
    shown = other_client.get(reverse("admin:tools_app_tool_try", args=[tool.pk]))
    ran = other_client.post(reverse("admin:tools_app_tool_try", args=[tool.pk]), {"keys": "[1]"})
    # then
    assert (shown.status_code, ran.status_code) == (404, 404)
    assert CallLog.objects.count() == 0
    table.refresh_from_db()
    assert (table.version, len(table.data)) == (1, 3)


def test_admin_index_shows_dashboard(owner_client, owner, table, make_tool, instance):
    """The admin index shows the user's counts, its endpoints and what to do next."""
    # given
    make_tool(owner, table, name="orders_query")
    # when
    response = owner_client.get(reverse("admin:index"))
    # then
    html = response.content.decode()
    assert "Your toolhub" in html
    assert "<code>/mcp/shop/</code>" in html
    assert "Try the tool orders_query" in html


def test_login_page_shows_demo_login_in_development(client, make_user, settings):
    """First run: in development the login page says how to log in as the demo user."""
    # given
    settings.TOOLHUB_DEV = True
    make_user("demo", password="demo-password")
    # when
    response = client.get(reverse("admin:login"))
    # then
    assert "log in as <code>demo</code> / <code>demo-password</code>" in response.content.decode()


@pytest.mark.parametrize(("dev", "password"), [(False, "demo-password"), (True, "changed-it-123")])
def test_login_page_hides_demo_login(client, make_user, settings, dev, password):
    """No hint outside development, nor once the demo user's password was changed."""
    # given
    settings.TOOLHUB_DEV = dev
    settings.DEBUG = False
    make_user("demo", password=password)
    # when
    response = client.get(reverse("admin:login"))
    # then
    assert response.status_code == 200
    assert "toolhub-demo-login" not in response.content.decode()


def test_login_page_shows_without_the_hint_while_every_hashing_slot_is_busy(client, make_user, settings, monkeypatch):
    """The hint costs a password hash: while every slot is busy the login page still answers 200, without the
    hint (not a 429), and the next page once a slot is free shows it."""
    settings.TOOLHUB_DEV = True
    user = make_user("demo", password="demo-password")
    check_password = type(user).check_password

    def busy(self, raw_password):
        raise ToolhubError(ErrorCode.RATE_LIMITED, "Too many password checks at once on this server.")

    monkeypatch.setattr(type(user), "check_password", busy)
    # when
    during = client.get(reverse("admin:login"))
    monkeypatch.setattr(type(user), "check_password", check_password)
    after = client.get(reverse("admin:login"))
    # then
    assert during.status_code == 200
    assert "toolhub-demo-login" not in during.content.decode()
    assert "log in as <code>demo</code> / <code>demo-password</code>" in after.content.decode()


#
# The model's own validation messages reach the page
#


def test_tool_form_shows_the_models_messages_not_generic_ones(owner_client):
    """full_clean's messages for a missing table and description are shown as the model words them."""
    # when
    response = owner_client.post(
        reverse("admin:tools_app_tool_add"),
        {"name": "q", "type": "query_data", "description": "", "table": "", "json_path": ""},
    )
    # then
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert errors["table"] == ["A query_data tool needs a table."]
    assert errors["description"] == ["A description is required: it tells the model what the tool does."]
    html = response.content.decode()
    assert "A query_data tool needs a table." in html
    assert "This field is required." not in html
    assert Tool.objects.count() == 0


def test_tool_on_another_users_table_shows_the_models_message(client, superuser, other_user, make_table):
    """A superuser's tool on another user's table: the model's "not one of yours", not Django's choice text."""
    # given
    theirs = make_table(other_user, name="theirs")
    client.force_login(superuser)
    # when
    response = client.post(
        reverse("admin:tools_app_tool_add"),
        {"name": "q", "type": "query_data", "description": "Query.", "table": theirs.pk, "json_path": ""},
    )
    # then
    assert response.context["adminform"].form.errors["table"] == [
        "Select a valid choice. That table is not one of yours."
    ]
    assert "That table is not one of yours." in response.content.decode()
    assert Tool.objects.count() == 0


#
# json_path: empty is the whole document
#


@pytest.mark.parametrize("typed", ["", '""', " '' "])
def test_json_path_empty_or_quoted_empty_is_the_whole_document(owner_client, table, typed):
    """An empty json_path (or the two quote characters the docs once suggested) mounts the whole document."""
    # when
    response = owner_client.post(
        reverse("admin:tools_app_tool_add"),
        {"name": "q", "type": "query_data", "description": "Query.", "table": table.pk, "json_path": typed},
    )
    # then
    assert response.status_code == 302
    assert Tool.objects.get(name="q").json_path == ""


def test_json_path_help_says_leave_empty(owner_client):
    """The tool form and its type help say to leave json_path empty, never to type ""."""
    # when
    response = owner_client.get(reverse("admin:tools_app_tool_add"))
    # then
    html = response.content.decode()
    assert (
        response.context["adminform"]
        .form.fields["json_path"]
        .help_text.startswith(
            "Mount point inside the table as a JSON Pointer (RFC 6901). Leave empty for the whole document;"
        )
    )
    assert "Leave json_path empty for the whole document" in html
    assert '"" is the whole document' not in html
    assert "&quot;&quot; is the whole document" not in html


def test_tool_list_shows_whole_document_mounts(owner_client, owner, table, make_tool):
    """The list says "(whole document)" for an empty mount of a data tool; a registry tool has none ("-")."""
    # given
    make_tool(owner, table, name="everything", json_path="")
    make_tool(owner, table, name="nested", json_path="/0")
    make_tool(owner, type="search_tools", name="finder")
    # when
    response = owner_client.get(reverse("admin:tools_app_tool_changelist"))
    # then
    html = response.content.decode()
    cells = dict(
        re.findall(
            r'<th class="field-name"><a href="[^"]+">([^<]+)</a></th>.*?<td class="field-mount">(.*?)</td>', html, re.S
        )
    )
    assert cells == {"everything": "(whole document)", "finder": "-", "nested": "<code>/0</code>"}


#
# Try-it examples fit the tool
#

CATALOG = {"products": {"KB-01": {"name": "Keyboard", "price": 120.5, "tags": ["usb"]}, "MS-02": {"name": "Mouse"}}}


def raw_placeholder(html: str) -> dict:
    match = re.search(r'<textarea name="__raw_arguments"[^>]*placeholder="e.g. ([^"]*)"', html)
    return json.loads(unescape(match.group(1)))


@pytest.mark.parametrize(
    ("tool_type", "json_path", "expected"),
    [
        ("get_all_data", "", {}),
        ("query_data", "", {"query": "[].id"}),
        ("preview", "", {"limit": 5, "offset": 0}),
        ("select", "", {"keys": [1, 2]}),
        ("create", "", {"elements": [{"id": 4, "customer": "ada", "status": "paid", "total": 10.5}]}),
        ("update", "", {"elements": [{"id": 1, "customer": "ada"}]}),
        ("delete", "", {"keys": [1, 2]}),
        ("query_data", "/products", {"query": "keys(@)"}),
        ("select", "/products", {"keys": ["KB-01", "MS-02"]}),
        ("create", "/products", {"elements": [{"key": "new-1", "content": {"name": "Keyboard", "price": 120.5}}]}),
        ("update", "/products", {"elements": [{"key": "KB-01", "content": {"name": "Keyboard"}}]}),
    ],
)
def test_try_it_example_fits_the_tool_and_runs(
    owner_client, owner, table, make_table, make_tool, tool_type, json_path, expected
):
    """The raw JSON placeholder and the example line are built for the tool's type and data, and they run."""
    # given
    target = make_table(owner, name="catalog", data=CATALOG) if json_path else table
    tool = make_tool(owner, target, type=tool_type, json_path=json_path)
    # when
    html = owner_client.get(reverse("admin:tools_app_tool_try", args=[tool.pk])).content.decode()
    # then
    assert raw_placeholder(html) == expected
    assert f"Example arguments: <code>{escape(json.dumps(expected))}</code>" in html
    execute(tool=tool, arguments=expected)  # raises ToolError if the example does not fit


def test_try_it_example_follows_a_custom_schema(owner_client, owner, table, make_tool):
    """A custom schema that needs more than the type's arguments gets them, and keeps the type's query."""
    # given
    schema = {
        "type": "object",
        "properties": {"query": {"type": "string"}, "reason": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["query", "reason"],
        "additionalProperties": False,
    }
    tool = make_tool(owner, table, input_schema=schema)
    # when
    html = owner_client.get(reverse("admin:tools_app_tool_try", args=[tool.pk])).content.decode()
    # then
    assert raw_placeholder(html) == {"query": "[].id", "reason": "<reason>"}
    assert re.search(r'<input type="text" name="query"[^>]*placeholder="e.g. \[\]\.id"', html)


def test_try_it_example_of_a_registry_tool(owner_client, owner, make_tool):
    """A registry tool's example names real arguments, e.g. the tool's own name for get_tool_definition."""
    # given
    tool = make_tool(owner, type="get_tool_definition", name="define")
    # when
    html = owner_client.get(reverse("admin:tools_app_tool_try", args=[tool.pk])).content.decode()
    # then
    assert raw_placeholder(html) == {"tool_name": "define"}


def test_try_it_example_after_a_create_names_a_free_key(owner_client, owner, table, make_tool):
    """After running a create, the example on the result page proposes the next free key."""
    # given
    tool = make_tool(owner, table, type="create")
    # when
    response = owner_client.post(
        reverse("admin:tools_app_tool_try", args=[tool.pk]), {"__raw_arguments": '{"elements": [{"id": 4}]}'}
    )
    # then
    assert response.context["outcome"]["ok"] is True
    assert raw_placeholder(response.content.decode())["elements"][0]["id"] == 5


def test_type_help_shows_the_object_mount_form_of_create_and_update(owner_client):
    """The tool page's help for create and update gives the {"key", "content"} form of object mounts."""
    # when
    response = owner_client.get(reverse("admin:tools_app_tool_add"))
    # then
    helps = {item["type"]: item for item in response.context["type_helps"]}
    assert (
        '{"elements": [{"key": "HB-04", "content": {"name": "USB hub", "price": 25}}]}' in helps["create"]["topics"][0]
    )
    assert '{"elements": [{"key": "KB-01", "content": {"price": 99}}]}' in helps["update"]["topics"][0]
