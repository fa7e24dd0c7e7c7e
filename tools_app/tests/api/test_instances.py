"""JSON API: /api/mcp-instances/ (SPEC §6, §2.3)."""

import pytest
from rest_framework.validators import UniqueValidator

from tests.api_helpers import client_for, db_snapshot
from tools_app.models import Binding, McpInstance

pytestmark = pytest.mark.django_db


def test_create_returns_the_instance_with_its_endpoint_url(owner):
    """POST creates an instance owned by the caller; endpoint_url is the absolute /mcp/<slug>/ URL."""
    # when
    response = client_for(owner).post(
        "/api/mcp-instances/",
        {"name": "Shop", "slug": "shop", "instructions": "Use the order tools.", "discovery": "search"},
        format="json",
    )

    # then
    assert response.status_code == 201
    body = response.json()
    instance = McpInstance.objects.get()
    assert body["id"] == instance.pk
    assert body["endpoint_url"] == "http://testserver/mcp/shop/"
    assert (body["enabled"], body["discovery"], body["allow_registration"], body["max_result_bytes"]) == (
        True,
        "search",
        False,
        40_000,
    )
    assert instance.owner == owner
    assert instance.instructions == "Use the order tools."


def test_endpoint_url_uses_the_public_url_setting(owner, instance, settings):
    """TOOLHUB_PUBLIC_URL, when set, is the base of endpoint_url (behind a proxy)."""
    # given
    settings.TOOLHUB_PUBLIC_URL = "https://tools.example.com"

    # when
    response = client_for(owner).get(f"/api/mcp-instances/{instance.pk}/")

    # then
    assert response.json()["endpoint_url"] == "https://tools.example.com/mcp/shop/"


def test_endpoint_url_follows_the_request_host(owner, instance):
    """Without TOOLHUB_PUBLIC_URL the URL is built from the request."""
    # when
    response = client_for(owner).get(f"/api/mcp-instances/{instance.pk}/", HTTP_HOST="localhost:8123")

    # then
    assert response.json()["endpoint_url"] == "http://localhost:8123/mcp/shop/"


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"name": "Dup", "slug": "shop"}, "slug"),
        ({"name": "Bad", "slug": "not a slug"}, "slug"),
        ({"slug": "noname"}, "name"),
        ({"name": "Small", "slug": "small", "max_result_bytes": 10}, "max_result_bytes"),
        ({"name": "Disc", "slug": "disc", "discovery": "everything"}, "discovery"),
        ({"name": "Flag", "slug": "flag", "enabled": "maybe"}, "enabled"),
    ],
)
def test_create_with_bad_input_is_a_400_naming_the_field(owner, other_user, make_instance, payload, field):
    """Slugs are unique across all users; every bad field is named; nothing is written."""
    # given
    make_instance(other_user, slug="shop")
    before = db_snapshot()

    # when
    response = client_for(owner).post("/api/mcp-instances/", payload, format="json")

    # then
    assert response.status_code == 400
    assert response.json()["error"] == "VALIDATION_ERROR"
    assert field in response.json()["fields"]
    assert db_snapshot() == before


def test_list_shows_only_the_callers_instances(owner, other_user, make_instance):
    """The list holds the caller's instances only."""
    # given
    mine = make_instance(owner, slug="mine")
    make_instance(other_user, slug="theirs")

    # when
    body = client_for(owner).get("/api/mcp-instances/").json()

    # then
    assert body["count"] == 1
    assert [row["id"] for row in body["results"]] == [mine.pk]


def test_list_filters_by_enabled(owner, make_instance):
    """?enabled=false keeps the disabled instances."""
    # given
    make_instance(owner, slug="on")
    off = make_instance(owner, slug="off", enabled=False)

    # when
    body = client_for(owner).get("/api/mcp-instances/?enabled=false").json()

    # then
    assert [row["id"] for row in body["results"]] == [off.pk]


def test_patch_changes_the_instance(owner, instance):
    """PATCH changes what it sends; a new slug moves the endpoint."""
    # when
    response = client_for(owner).patch(
        f"/api/mcp-instances/{instance.pk}/", {"slug": "store", "enabled": False}, format="json"
    )

    # then
    assert response.status_code == 200
    assert response.json()["endpoint_url"] == "http://testserver/mcp/store/"
    instance.refresh_from_db()
    assert (instance.slug, instance.enabled) == ("store", False)


def test_put_is_not_offered(owner, instance):
    """SPEC §6 lists GET, PATCH, DELETE on an instance: PUT is 405 and changes nothing."""
    # given
    before = db_snapshot()

    # when
    response = client_for(owner).put(f"/api/mcp-instances/{instance.pk}/", {"name": "x", "slug": "x"}, format="json")

    # then
    assert response.status_code == 405
    assert response.json()["error"] == "METHOD_NOT_ALLOWED"
    assert db_snapshot() == before


def test_delete_removes_the_instance_with_its_keys_and_bindings(owner, instance, table, make_tool, bind, make_api_key):
    """DELETE removes the instance, its bindings and keys; the tools stay."""
    # given
    tool = make_tool(owner, table)
    bind(instance, tool)
    make_api_key(instance)

    # when
    response = client_for(owner).delete(f"/api/mcp-instances/{instance.pk}/?force=true")  # bound: in use

    # then
    assert response.status_code == 204
    assert McpInstance.objects.count() == 0
    assert instance.bindings.model.objects.count() == 0
    assert instance.api_keys.model.objects.count() == 0
    tool.refresh_from_db()


def test_another_users_instance_is_404_and_untouched(owner, other_user, make_instance):
    """Another user's instance behaves as if it did not exist."""
    # given
    theirs = make_instance(other_user, slug="theirs")
    before = db_snapshot()
    client = client_for(owner)

    # when
    responses = [
        client.get(f"/api/mcp-instances/{theirs.pk}/"),
        client.patch(f"/api/mcp-instances/{theirs.pk}/", {"enabled": False}, format="json"),
        client.delete(f"/api/mcp-instances/{theirs.pk}/"),
    ]

    # then
    assert [r.status_code for r in responses] == [404, 404, 404]
    assert db_snapshot() == before


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (2**31, "Ensure this value is less than or equal to 2147483647."),
        (10**30, "Ensure this value is less than or equal to 2147483647."),
        (999, "Ensure this value is greater than or equal to 1000."),
    ],
)
def test_max_result_bytes_out_of_the_column_range_is_a_400_naming_it(owner, instance, value, message):
    """max_result_bytes fits a 32-bit integer column (PostgreSQL): larger is a 400 naming it, on create and PATCH."""
    # given
    before = db_snapshot()
    client = client_for(owner)

    # when
    created = client.post(
        "/api/mcp-instances/", {"name": "Big", "slug": "big", "max_result_bytes": value}, format="json"
    )
    patched = client.patch(f"/api/mcp-instances/{instance.pk}/", {"max_result_bytes": value}, format="json")

    # then
    for response in (created, patched):
        assert response.status_code == 400
        assert response.json() == {
            "error": "VALIDATION_ERROR",
            "message": "Invalid input.",
            "fields": {"max_result_bytes": [message]},
        }
    assert db_snapshot() == before


def test_max_result_bytes_accepts_the_largest_column_value(owner, instance):
    """2147483647 is stored and read back (PostgreSQL's integer maximum)."""
    # when
    response = client_for(owner).patch(
        f"/api/mcp-instances/{instance.pk}/", {"max_result_bytes": 2147483647}, format="json"
    )

    # then
    assert response.status_code == 200
    assert response.json()["max_result_bytes"] == 2147483647
    instance.refresh_from_db()
    assert instance.max_result_bytes == 2147483647


def test_max_result_bytes_limit_is_a_model_rule(owner):
    """full_clean() refuses it too, so the admin and every service give the same answer."""
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError) as caught:
        McpInstance(owner=owner, name="Big", slug="big", max_result_bytes=2**31).full_clean()
    assert caught.value.message_dict == {"max_result_bytes": ["Ensure this value is less than or equal to 2147483647."]}


@pytest.mark.parametrize("param", ["enabled", "allow_registration"])
def test_list_with_a_bad_boolean_filter_is_a_400_naming_it(owner, instance, param):
    """?enabled=bogus (or allow_registration) is a 400 naming the filter, like other invalid filter values."""
    # when
    response = client_for(owner).get(f"/api/mcp-instances/?{param}=bogus")

    # then
    assert response.status_code == 400
    assert response.json() == {
        "error": "VALIDATION_ERROR",
        "message": "Invalid input.",
        "fields": {param: ["Enter true or false (got 'bogus')."]},
    }


def test_list_filters_by_allow_registration_and_discovery(owner, make_instance):
    """?allow_registration= and ?discovery= filter; an unknown discovery is a 400 naming it."""
    # given
    make_instance(owner, slug="plain")
    open_one = make_instance(owner, slug="open", allow_registration=True, discovery="search")
    client = client_for(owner)

    # when
    registering = client.get("/api/mcp-instances/?allow_registration=TRUE")
    searching = client.get("/api/mcp-instances/?discovery=search")
    unknown = client.get("/api/mcp-instances/?discovery=everything")

    # then
    assert [row["id"] for row in registering.json()["results"]] == [open_one.pk]
    assert [row["id"] for row in searching.json()["results"]] == [open_one.pk]
    assert unknown.status_code == 400
    assert list(unknown.json()["fields"]) == ["discovery"]


def test_a_slug_taken_meanwhile_is_the_same_400_as_a_plain_duplicate(owner, other_user, make_instance, monkeypatch):
    """A slug another request takes between the check and the insert is answered like a plain duplicate."""
    # given
    from tools_app import services

    make_instance(other_user, slug="shop")
    plain = client_for(owner).post("/api/mcp-instances/", {"name": "Shop", "slug": "shop"}, format="json")
    # The other request's "race" row is committed after this request's uniqueness checks ran: they did not
    # see it. The insert does.
    make_instance(other_user, slug="race")
    inserted = []
    model_check, field_check = McpInstance.validate_unique, UniqueValidator.__call__

    def blind_until_inserted(check):
        return lambda *args, **kwargs: check(*args, **kwargs) if inserted else None

    monkeypatch.setattr(McpInstance, "validate_unique", blind_until_inserted(model_check))
    monkeypatch.setattr(UniqueValidator, "__call__", blind_until_inserted(field_check))
    create = services.instance_create

    def insert(**kwargs):
        try:
            return create(**kwargs)
        finally:
            inserted.append(True)

    monkeypatch.setattr(services, "instance_create", insert)
    before = db_snapshot()

    # when
    raced = client_for(owner).post("/api/mcp-instances/", {"name": "Race", "slug": "race"}, format="json")

    # then
    assert plain.status_code == raced.status_code == 400
    assert plain.json() == {
        "error": "VALIDATION_ERROR",
        "message": "Invalid input.",
        "fields": {"slug": ["MCP instance with this slug already exists."]},
    }
    assert raced.json() == plain.json()
    assert inserted == [True]
    assert db_snapshot() == before


@pytest.mark.parametrize(
    ("path", "field", "limit"),
    [
        ("/api/mcp-instances/", "name", 200),
        ("/api/mcp-instances/", "slug", 100),
        ("/api/bindings/", "name_override", 64),
    ],
)
def test_a_string_over_its_max_length_is_refused_even_when_trimming_would_shorten_it(
    owner, instance, table, make_tool, path, field, limit
):
    """The schema's maxLength is of the value sent: a run of whitespace (U+0085) cannot carry it past."""
    # given
    tool = make_tool(owner, table, name="free")
    body = {"name": "Shop 2", "slug": "shop-2", "mcp_instance": instance.pk, "tool": tool.pk}
    body[field] = "\u0085" * limit + "0"
    before = (McpInstance.objects.count(), Binding.objects.count())

    # when
    response = client_for(owner).post(path, body, format="json")

    # then
    assert response.status_code == 400
    assert response.json()["fields"] == {field: [f"Ensure this field has no more than {limit} characters."]}
    assert (McpInstance.objects.count(), Binding.objects.count()) == before
