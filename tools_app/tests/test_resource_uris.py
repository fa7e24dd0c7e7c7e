"""Binding.resource_uri (owner-chosen resource URIs) and McpInstance.log_level, on every write
surface: the services (model validation), the API and the admin. Every refusal writes nothing."""

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from tests.api_helpers import client_for, db_snapshot
from tools_app.models import Binding, McpInstance
from tools_app.resource_uris import Template, conflict, ordered, parse_template
from tools_app.services import binding_create, binding_update, instance_update

pytestmark = pytest.mark.django_db


@pytest.fixture
def reader_tools(owner, table, make_tool):
    """A reader (get_all_data), a second reader (query_data), a select and a schema tool on the orders."""
    return {
        "reader": make_tool(owner, table, type="get_all_data", name="orders_all"),
        "query": make_tool(owner, table, type="query_data", name="orders_query"),
        "select": make_tool(owner, table, type="select", name="orders_by_id"),
        "select2": make_tool(owner, table, type="select", name="orders_by_id_2"),
        "schema": make_tool(owner, table, type="get_data_schema", name="orders_schema"),
    }


#
# The syntax (tools_app.resource_uris)
#


def test_a_template_matches_one_segment_and_decodes_it():
    """`{id}` matches unreserved characters and percent-encoded octets, never '/', and is decoded."""
    # given
    template = parse_template("test://template/{id}/data")
    # then
    assert template == Template("test://template/{id}/data", "test://template/", "id", "/data")
    assert template.match("test://template/123/data") == "123"
    assert template.match("test://template/a%20b%C3%A9/data") == "a bé"
    assert template.match("test://template/1/2/data") is None
    assert template.match("test://template//data") is None
    assert template.match("test://template/%FF/data") is None
    assert template.expand("a b/c") == "test://template/a%20b%2Fc/data"


def test_templates_with_more_literal_characters_are_tried_first():
    # given
    short, long = parse_template("a://x/{id}"), parse_template("a://x/{id}.json")
    # then
    assert ordered([short, long]) == [long, short]
    assert short.match("a://x/1.json") == "1.json"
    assert long.match("a://x/1.json") == "1"


@pytest.mark.parametrize(
    ("uri", "other", "clash"),
    [
        ("a://x", "a://x", True),
        ("a://x/{id}", "a://x/{key}", True),
        ("a://x/{id}", "a://x/7", True),
        ("a://x/7", "a://x/{id}", True),
        ("a://x/{id}", "a://x/{id}/orders", False),
        ("a://x/{id}", "a://x/7/orders", False),
        ("a://x", "b://x", False),
    ],
)
def test_conflicts_between_two_uris_of_one_instance(uri, other, clash):
    assert (conflict(uri, other) is not None) is clash


#
# Services and model validation
#


def test_a_reader_and_a_select_take_a_uri_and_a_template(instance, reader_tools):
    # when
    reader = binding_create(mcp_instance=instance, tool=reader_tools["reader"], resource_uri="orders://all")
    select = binding_create(mcp_instance=instance, tool=reader_tools["select"], resource_uri="orders://order/{id}")
    # then
    assert list(Binding.objects.order_by("pk").values_list("resource_uri", flat=True)) == [
        "orders://all",
        "orders://order/{id}",
    ]
    assert (reader.resource_uri, select.resource_uri) == ("orders://all", "orders://order/{id}")


@pytest.mark.parametrize(
    ("tool", "uri", "words"),
    [
        ("reader", "orders", "starts with a scheme"),
        ("reader", "Orders://all", "starts with a scheme"),
        ("reader", "orders://a b", "no whitespace or control characters (found U+0020)"),
        ("reader", "orders://a\x07b", "(found U+0007)"),
        ("reader", "orders://" + "x" * 1992, "at most 2000 characters"),
        ("reader", "toolhub://tables/1", "The toolhub: scheme is reserved"),
        ("reader", "orders://order/{id}", "A reader binding's resource URI is a fixed URI"),
        ("select", "orders://all", "A select binding's resource URI is a record template"),
        ("select", "orders://{a}/{b}", "exactly one expression"),
        ("select", "orders://order/{id", "exactly one expression"),
        ("select", "orders://order/{id}}", "no brace outside"),
        ("select", "orders://order/{i d}", "no whitespace"),
        ("schema", "orders://schema", "a get_data_schema tool has no resource URI"),
    ],
)
def test_a_bad_resource_uri_is_refused_and_nothing_is_bound(instance, reader_tools, tool, uri, words):
    # when
    with pytest.raises(ValidationError) as refused:
        binding_create(mcp_instance=instance, tool=reader_tools[tool], resource_uri=uri)
    # then
    assert list(refused.value.message_dict) == ["resource_uri"]
    assert words in refused.value.message_dict["resource_uri"][0]
    assert Binding.objects.count() == 0


@pytest.mark.parametrize(
    ("first", "second", "words"),
    [
        (("reader", "orders://all"), ("query", "orders://all"), "'orders://all' is already the resource URI"),
        (
            ("select", "orders://order/{id}"),
            ("select2", "orders://order/{key}"),
            "is the same template as 'orders://order/{id}'",
        ),
        (("reader", "orders://order/7"), ("select", "orders://order/{id}"), "would also match 'orders://order/7'"),
        (("select", "orders://order/{id}"), ("reader", "orders://order/7"), "matches 'orders://order/{id}'"),
    ],
)
def test_a_clashing_resource_uri_is_refused_naming_the_other_binding(instance, reader_tools, first, second, words):
    # given
    binding_create(mcp_instance=instance, tool=reader_tools[first[0]], resource_uri=first[1])
    before = db_snapshot()
    # when
    with pytest.raises(ValidationError) as refused:
        binding_create(mcp_instance=instance, tool=reader_tools[second[0]], resource_uri=second[1])
    # then
    message = refused.value.message_dict["resource_uri"][0]
    assert words in message
    assert f"of the tool {reader_tools[first[0]].name!r} on the instance 'Shop'" in message
    assert db_snapshot() == before


def test_the_same_uri_on_two_instances_is_accepted(owner, make_instance, instance, reader_tools):
    # given
    other = make_instance(owner, name="Other", slug="other")
    binding_create(mcp_instance=other, tool=reader_tools["reader"], resource_uri="orders://all")
    # when
    binding_create(mcp_instance=instance, tool=reader_tools["reader"], resource_uri="orders://all")
    # then
    assert sorted(Binding.objects.filter(resource_uri="orders://all").values_list("mcp_instance__slug", flat=True)) == [
        "other",
        "shop",
    ]


def test_an_update_into_a_clash_is_refused_and_the_binding_keeps_its_uri(instance, reader_tools):
    # given
    binding_create(mcp_instance=instance, tool=reader_tools["reader"], resource_uri="orders://all")
    query = binding_create(mcp_instance=instance, tool=reader_tools["query"], resource_uri="orders://query")
    # when
    with pytest.raises(ValidationError) as refused:
        binding_update(binding=query, resource_uri="orders://all")
    # then
    assert "already the resource URI of the tool 'orders_all'" in refused.value.message_dict["resource_uri"][0]
    assert Binding.objects.get(pk=query.pk).resource_uri == "orders://query"


def test_an_update_may_keep_its_own_uri_and_none_clears_it(instance, reader_tools):
    # given
    binding = binding_create(mcp_instance=instance, tool=reader_tools["reader"], resource_uri="orders://all")
    # when
    binding_update(binding=binding, enabled=False, resource_uri="orders://all")
    kept = Binding.objects.get(pk=binding.pk).resource_uri
    binding_update(binding=binding, resource_uri=None)
    # then
    assert kept == "orders://all"
    assert Binding.objects.get(pk=binding.pk).resource_uri == ""


def test_log_level_is_one_of_the_mcp_levels(instance):
    # when
    instance_update(instance=instance, log_level="debug")
    with pytest.raises(ValidationError) as refused:
        instance_update(instance=McpInstance.objects.get(pk=instance.pk), log_level="loud")
    # then
    assert "log_level" in refused.value.message_dict
    assert McpInstance.objects.get(pk=instance.pk).log_level == "debug"


#
# API
#


def test_api_binds_with_a_resource_uri_and_shows_it(owner, instance, reader_tools):
    # when
    response = client_for(owner).post(
        "/api/bindings/",
        {"mcp_instance": instance.pk, "tool": reader_tools["select"].pk, "resource_uri": "test://template/{id}/data"},
        format="json",
    )
    # then
    assert response.status_code == 201
    assert response.json()["resource_uri"] == "test://template/{id}/data"
    assert Binding.objects.get().resource_uri == "test://template/{id}/data"


def test_api_clash_is_a_400_naming_resource_uri_and_writes_nothing(owner, instance, reader_tools):
    # given
    binding_create(mcp_instance=instance, tool=reader_tools["reader"], resource_uri="orders://all")
    before = db_snapshot()
    # when
    response = client_for(owner).post(
        "/api/bindings/",
        {"mcp_instance": instance.pk, "tool": reader_tools["query"].pk, "resource_uri": "orders://all"},
        format="json",
    )
    # then
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "VALIDATION_ERROR"
    assert list(body["fields"]) == ["resource_uri"]
    assert body["fields"]["resource_uri"][0].startswith("'orders://all' is already the resource URI of the tool")
    assert db_snapshot() == before


@pytest.mark.parametrize(
    ("value", "words"), [("noscheme", "starts with a scheme"), (5, "Not a valid string."), ("x:" + "y" * 2000, "2000")]
)
def test_api_patch_with_a_bad_resource_uri_is_a_400_and_changes_nothing(owner, instance, reader_tools, value, words):
    # given
    binding = binding_create(mcp_instance=instance, tool=reader_tools["reader"], resource_uri="orders://all")
    # when
    response = client_for(owner).patch(f"/api/bindings/{binding.pk}/", {"resource_uri": value}, format="json")
    # then
    assert response.status_code == 400
    assert words in response.json()["fields"]["resource_uri"][0]
    assert Binding.objects.get(pk=binding.pk).resource_uri == "orders://all"


@pytest.mark.parametrize(("value", "stored"), [("debug", "debug"), ("", ""), (None, "")])
def test_api_sets_and_clears_the_log_level(owner, instance, value, stored):
    # given
    instance_update(instance=instance, log_level="warning")
    # when
    response = client_for(owner).patch(f"/api/mcp-instances/{instance.pk}/", {"log_level": value}, format="json")
    # then
    assert response.status_code == 200
    assert response.json()["log_level"] == stored
    assert McpInstance.objects.get(pk=instance.pk).log_level == stored


@pytest.mark.parametrize(("value", "words"), [("loud", "is not a valid choice"), (1, "is not a valid choice")])
def test_api_refuses_an_unknown_log_level(owner, instance, value, words):
    # when
    response = client_for(owner).patch(f"/api/mcp-instances/{instance.pk}/", {"log_level": value}, format="json")
    # then
    assert response.status_code == 400
    assert words in response.json()["fields"]["log_level"][0]
    assert McpInstance.objects.get(pk=instance.pk).log_level == ""


def test_openapi_states_the_fields():
    """resource_uri has the scheme pattern and the length limit; log_level is one of the levels, or off."""
    from rest_framework.test import APIClient

    from tools_app.tests.api.test_openapi import matches

    # when
    schema = APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    # then
    prop = schema["components"]["schemas"]["BindingRequest"]["properties"]["resource_uri"]
    assert prop["maxLength"] == 2000
    assert [matches(prop["pattern"], value) for value in ("test://x", "", " test://x ", "x", "test://a b")] == [
        True,
        True,
        True,
        False,
        False,
    ]
    levels = schema["components"]["schemas"]["LogLevelEnum"]["enum"]
    assert levels == ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


#
# Admin
#


def test_admin_binding_form_shows_a_clash_on_resource_uri(owner_client, instance, reader_tools):
    # given
    binding_create(mcp_instance=instance, tool=reader_tools["reader"], resource_uri="orders://all")
    # when
    response = owner_client.post(
        reverse("admin:tools_app_binding_add"),
        {
            "mcp_instance": instance.pk,
            "tool": reader_tools["query"].pk,
            "enabled": "on",
            "resource_uri": "orders://all",
        },
    )
    # then
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors.as_data()["resource_uri"]
    assert errors[0].code == "unique"
    assert Binding.objects.count() == 1


def test_admin_binding_form_saves_a_template(owner_client, instance, reader_tools):
    # when
    response = owner_client.post(
        reverse("admin:tools_app_binding_add"),
        {
            "mcp_instance": instance.pk,
            "tool": reader_tools["select"].pk,
            "enabled": "on",
            "resource_uri": "orders://order/{id}",
        },
    )
    # then
    assert response.status_code == 302
    assert Binding.objects.get().resource_uri == "orders://order/{id}"


def test_admin_inline_rows_of_one_submit_may_not_share_a_uri(owner_client, instance, reader_tools):
    # given
    from tools_app.tests.admin.test_instances import change_url, instance_form

    rows = [
        {"tool": reader_tools["reader"].pk, "resource_uri": "orders://all"},
        {"tool": reader_tools["query"].pk, "resource_uri": "orders://all"},
    ]
    # when
    response = owner_client.post(change_url(instance), instance_form(instance, extra_rows=rows))
    # then
    assert response.status_code == 200
    formset = response.context["inline_admin_formsets"][0].formset
    assert formset.forms[1].errors.as_data()["resource_uri"][0].messages[0] == (
        "'orders://all' is already the resource URI of the tool 'orders_all' on the instance 'Shop'."
    )
    assert Binding.objects.count() == 0


def test_admin_instance_form_sets_the_log_level(owner_client, instance):
    # given
    from tools_app.tests.admin.test_instances import change_url, instance_form

    # when
    response = owner_client.post(change_url(instance), instance_form(instance, log_level="info"))
    refused = owner_client.post(change_url(instance), instance_form(instance, log_level="loud"))
    # then
    assert response.status_code == 302
    assert refused.status_code == 200
    assert "log_level" in refused.context["adminform"].form.errors
    assert McpInstance.objects.get(pk=instance.pk).log_level == "info"
