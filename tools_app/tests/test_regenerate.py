"""Descriptions that stay true: generating a table's tools again updates what it generated, shows the diff, never
overwrites an owner's edit unless asked; text from the data is cleaned and quoted."""

import unicodedata

import pytest
from django.urls import reverse

from tests.api_helpers import client_for, db_snapshot
from tools_app import services
from tools_app.models import Binding, Tool
from tools_app.toolsets import clean_data_text, description_drift, generate_tools

pytestmark = pytest.mark.django_db

ORDERS = [
    {"id": 1, "customer": "Ada", "status": "paid"},
    {"id": 2, "customer": "Grace", "status": "new"},
]


@pytest.fixture
def orders_table(owner):
    return services.table_create(owner=owner, name="orders", data=[dict(r) for r in ORDERS])


def generate(owner, table, **body):
    return client_for(owner).post(f"/api/tables/{table.pk}/generate-tools/", body, format="json")


def test_second_run_is_200_and_changes_nothing(owner, orders_table):
    """Generating again what is up to date: 200, every tool unchanged, nothing written."""
    # given
    first = generate(owner, orders_table)
    before = db_snapshot()

    # when
    second = generate(owner, orders_table)

    # then
    assert first.status_code == 201
    assert [c["action"] for c in first.json()["changes"]] == ["create"] * 5
    assert second.status_code == 200
    assert second.json()["changes"] == [
        {"name": name, "action": "unchanged", "diff": {}}
        for name in ("orders_schema", "orders_all", "orders_query", "orders_preview", "orders_select")
    ]
    assert [t["id"] for t in second.json()["tools"]] == [t["id"] for t in first.json()["tools"]]
    assert db_snapshot() == before


def test_shape_change_is_flagged_then_regeneration_updates_with_a_diff(owner, orders_table):
    """A new field makes the generated descriptions stale (description_drift says which); generating again
    rewrites them and answers each diff."""
    # given
    generate(owner, orders_table)
    services.table_update(table=orders_table, data=[{**r, "total": 10.5} for r in ORDERS])
    query = Tool.objects.get(name="orders_query")

    # when
    drift = description_drift(query)
    response = generate(owner, orders_table)

    # then
    assert drift == (
        'The data\'s shape changed since this description was generated (new fields "total"): generate the '
        "table's tools again."
    )
    assert response.status_code == 200
    changes = {c["name"]: c for c in response.json()["changes"]}
    assert changes["orders_query"]["action"] == "update"
    old, new = (
        changes["orders_query"]["diff"]["description"]["old"],
        changes["orders_query"]["diff"]["description"]["new"],
    )
    assert '"total"' not in old
    assert '"total" (number, e.g. 10.5)' in new
    query.refresh_from_db()
    assert query.description == new
    assert description_drift(query) is None


def test_hand_edited_description_is_kept_unless_overwrite_is_asked(owner, orders_table):
    # given
    generate(owner, orders_table)
    query = Tool.objects.get(name="orders_query")
    services.tool_update(tool=query, description="My own words.")
    services.table_update(table=orders_table, data=[{**r, "total": 1} for r in ORDERS])

    # when
    kept = generate(owner, orders_table)

    # then
    change = next(c for c in kept.json()["changes"] if c["name"] == "orders_query")
    assert change["action"] == "kept"
    assert change["diff"]["description"]["old"] == "My own words."
    assert Tool.objects.get(pk=query.pk).description == "My own words."
    assert next(c for c in kept.json()["changes"] if c["name"] == "orders_all")["action"] == "update"

    # when
    overwritten = generate(owner, orders_table, overwrite_edited=True)

    # then
    change = next(c for c in overwritten.json()["changes"] if c["name"] == "orders_query")
    assert change["action"] == "update"
    assert Tool.objects.get(pk=query.pk).description.startswith('Run a JMESPath expression over the table "orders"')


def test_a_tool_it_did_not_generate_is_still_a_name_conflict(owner, orders_table, make_tool):
    make_tool(owner, orders_table, name="orders_query")
    before = db_snapshot()
    response = generate(owner, orders_table)
    assert response.status_code == 409
    assert response.json()["error"] == "NAME_CONFLICT"
    assert db_snapshot() == before


def test_regeneration_binds_only_what_is_not_bound(owner, orders_table, make_instance):
    instance = make_instance(owner)
    generate(owner, orders_table, mcp_instance=instance.pk)
    Binding.objects.filter(tool__name="orders_all").delete()
    response = generate(owner, orders_table, mcp_instance=instance.pk)
    assert response.status_code == 200
    assert [b["tool"] for b in response.json()["bindings"]] == [Tool.objects.get(name="orders_all").pk]
    assert Binding.objects.filter(mcp_instance=instance).count() == 5


UNSAFE = "\u202eevil\u202c\x07\u200b\u2028"


def test_text_from_the_data_is_cleaned_quoted_and_bounded(owner):
    """Bidi overrides, controls, zero-width and separator characters never reach a description; names and values
    are quoted; a long value is cut; no example query is built from a dirty value."""
    # given
    data = [
        {"id": 1, "na\u202eme": "x" * 500, "status": "ok" + UNSAFE},
        {"id": 2, "na\u202eme": "y", "status": "ok" + UNSAFE},
    ]
    table = services.table_create(owner=owner, name="Ord\u202eers\n", data=data)

    # when
    generated = generate_tools(owner=owner, table=table)

    # then
    texts = [tool.description for tool in generated.tools] + [
        example for tool in generated.tools for example in tool.metadata.get("examples", [])
    ]
    for text in texts:
        assert not [c for c in text if unicodedata.category(c) in {"Cc", "Cf", "Zl", "Zp"}], text
    schema = next(t for t in generated.tools if t.type == "get_data_schema").description
    assert 'the table "Orders "' in schema
    assert '"name" (string, e.g. "' + "x" * 38 + "…)" in schema  # an example is at most 40 characters
    assert '"status" (string, e.g. "okevil")' in schema
    query = next(t for t in generated.tools if t.type == "query_data")
    assert "status==" not in query.description  # its value needed cleaning: no example filters on it
    all_data = next(t for t in generated.tools if t.type == "get_all_data")
    assert all_data.output_schema["items"]["properties"]["status"]["examples"] == ["okevil"]


def test_clean_data_text():
    assert clean_data_text("a\tb\nc\u202ed\u2066e", 100) == "a b cde"
    assert clean_data_text("abcdef", 4) == "abc…"


def test_admin_flags_a_stale_generated_description(client, owner, orders_table):
    # given
    client.force_login(owner)
    owner_client = client
    generate(owner, orders_table)
    services.table_update(table=orders_table, data=[{"sku": "A", "price": 1}])
    query = Tool.objects.get(name="orders_query")

    # when
    tool_page = owner_client.get(reverse("admin:tools_app_tool_change", args=[query.pk]))
    table_page = owner_client.get(reverse("admin:tools_app_table_change", args=[orders_table.pk]))

    # then
    assert "The data&#x27;s shape changed since this description was generated" in tool_page.content.decode()
    assert 'new fields "price", "sku"; fields gone "customer", "id", "status"' in tool_page.content.decode().replace(
        "&quot;", '"'
    )
    assert table_page.content.decode().count("toolhub-drift") == 5


def test_admin_generate_again_shows_the_diff(client, owner, orders_table):
    """The admin's Generate tools action on a table generated before shows each change as a diff."""
    # given
    client.force_login(owner)
    generate(owner, orders_table)
    services.table_update(table=orders_table, data=[{**r, "total": 3} for r in ORDERS])
    url = reverse("admin:tools_app_table_changelist")

    # when
    response = client.post(
        url,
        {"action": "generate_tools_action", "_selected_action": [str(orders_table.pk)], "apply": "1", "json_path": ""},
    )

    # then
    assert response.status_code == 200
    html = response.content.decode()
    assert "orders: orders_query (updated)" in html
    assert "+&quot;total&quot;" in html
    assert [str(m) for m in response.context["messages"]] == [
        "orders: updated 5 tools (orders_schema, orders_all, orders_query, orders_preview, orders_select)."
    ]
