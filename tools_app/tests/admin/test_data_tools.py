"""Admin: a table from a CSV/NDJSON upload, the generate-tools action, the bind action."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from tests.api_helpers import db_snapshot
from tools_app.models import Binding, Table, Tool

pytestmark = pytest.mark.django_db

CSV = b"sku,name,price\nKB-01,Keyboard,120.5\nMS-02,Mouse,44\n"


def add_table(client, content: bytes, filename: str, **fields):
    upload = SimpleUploadedFile(filename, content)
    form = {"name": "products", "description": "", "data": "", "data_file": upload, "data_format": "", **fields}
    return client.post(reverse("admin:tools_app_table_add"), form)


def test_a_csv_upload_on_the_add_page_creates_the_table(owner_client, owner):
    # when
    response = add_table(owner_client, CSV, "products.csv")

    # then
    assert response.status_code == 302
    table = Table.objects.get()
    assert (table.name, table.owner, table.version) == ("products", owner, 1)
    assert table.data == [
        {"sku": "KB-01", "name": "Keyboard", "price": 120.5},
        {"sku": "MS-02", "name": "Mouse", "price": 44},
    ]


def test_the_format_field_overrides_the_file_name(owner_client):
    # when
    response = add_table(owner_client, b'{"a": 1}\n{"a": 2}\n', "export.txt", data_format="ndjson")

    # then
    assert response.status_code == 302
    assert Table.objects.get().data == [{"a": 1}, {"a": 2}]


@pytest.mark.parametrize(
    ("content", "filename", "field", "message"),
    [
        (b"sku,name\nKB-01\n", "p.csv", "data_file", "Row 1 (line 2) has 1 values; the header has 2 columns."),
        (
            b'{"a": 1}\nnope\n',
            "p.ndjson",
            "data_file",
            "Line 2 is not one JSON value (column 1: Expecting value): nope",
        ),
        (b"\xff\xfe", "p.csv", "data_file", None),
        (b"[1]", "p.xlsx", "data_format", None),
    ],
)
def test_a_bad_upload_is_a_form_error_and_writes_nothing(owner_client, content, filename, field, message):
    # given
    before = db_snapshot()

    # when
    response = add_table(owner_client, content, filename)

    # then
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert list(errors) == [field]
    if message is not None:
        assert errors[field] == [message]
    assert db_snapshot() == before


def action_post(client, url: str, action: str, ids: list[int], **fields):
    return client.post(url, {"action": action, "_selected_action": [str(pk) for pk in ids], **fields})


def test_generate_tools_action_shows_a_form_then_creates_and_binds(owner_client, owner, make_table, make_instance):
    # given
    table = make_table(owner, name="products", data=[{"sku": "KB-01", "price": 1}, {"sku": "MS-02", "price": 2}])
    instance = make_instance(owner)
    url = reverse("admin:tools_app_table_changelist")

    # when
    form_page = action_post(owner_client, url, "generate_tools_action", [table.pk])
    applied = action_post(
        owner_client, url, "generate_tools_action", [table.pk], apply="1", mcp_instance=str(instance.pk), json_path=""
    )

    # then
    assert form_page.status_code == 200
    assert "Bind to MCP instance" in form_page.content.decode()
    assert Tool.objects.count() == 5
    assert applied.status_code == 302
    assert sorted(Tool.objects.values_list("name", flat=True)) == [
        "products_all",
        "products_preview",
        "products_query",
        "products_schema",
        "products_select",
    ]
    assert Binding.objects.filter(mcp_instance=instance).count() == 5
    assert Tool.objects.get(name="products_select").metadata["key_field"] == "sku"


def test_generate_tools_action_with_a_conflict_shows_it_and_creates_nothing(owner_client, owner, make_table, make_tool):
    # given
    table = make_table(owner, name="products", data=[{"sku": "KB-01"}])
    make_tool(owner, table, name="products_query")
    before = db_snapshot()

    # when
    response = action_post(
        owner_client, reverse("admin:tools_app_table_changelist"), "generate_tools_action", [table.pk], apply="1"
    )

    # then
    assert response.status_code == 200
    assert response.context["form"].non_field_errors() == [
        f"name_prefix: The name 'products_query' is already used by your tool 'products_query' (id "
        f"{Tool.objects.get().pk}); pass another name_prefix, or delete that tool first."
    ]
    assert db_snapshot() == before


def test_bind_action_binds_every_selected_tool_or_none(owner_client, owner, table, make_tool, make_instance, bind):
    # given
    instance = make_instance(owner)
    tools = [make_tool(owner, table, name=name) for name in ("a", "b", "c")]
    url = reverse("admin:tools_app_tool_changelist")

    # when
    bound = action_post(
        owner_client, url, "bind_to_instance", [tools[0].pk, tools[1].pk], apply="1", mcp_instance=str(instance.pk)
    )
    before = db_snapshot()
    refused = action_post(
        owner_client,
        url,
        "bind_to_instance",
        [tools[2].pk, tools[1].pk],
        apply="1",
        mcp_instance=str(instance.pk),
        enabled="on",
    )

    # then
    assert bound.status_code == 302
    assert sorted(Binding.objects.values_list("tool__name", "enabled")) == [("a", False), ("b", False)]
    assert refused.status_code == 200
    assert refused.context["form"].non_field_errors() == [
        f"tools: Tool 'b' (id {tools[1].pk}): The tool 'b' is already bound to the instance 'Shop'."
    ]
    assert db_snapshot() == before


def test_another_users_instance_is_not_offered(owner_client, owner, other_user, table, make_tool, make_instance):
    # given
    theirs = make_instance(other_user, slug="theirs")
    tool = make_tool(owner, table, name="a")
    before = db_snapshot()

    # when
    response = action_post(
        owner_client,
        reverse("admin:tools_app_tool_changelist"),
        "bind_to_instance",
        [tool.pk],
        apply="1",
        mcp_instance=str(theirs.pk),
    )

    # then
    assert response.status_code == 200
    assert list(response.context["form"].errors) == ["mcp_instance"]
    assert db_snapshot() == before
