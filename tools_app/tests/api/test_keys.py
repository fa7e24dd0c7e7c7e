"""JSON API: /api/mcp-instances/<id>/keys/ (SPEC §6, §2.3): shown once, stored hashed, revocable."""

import pytest

from tests.api_helpers import client_for, db_snapshot
from tools_app.models import ApiKey

pytestmark = pytest.mark.django_db


def test_create_returns_id_label_and_the_plaintext_key_once(owner, instance):
    """POST answers exactly {"id", "label", "key"} and what the key may use (read_only, attributes); only the
    key's SHA-256 is stored."""
    # when
    response = client_for(owner).post(f"/api/mcp-instances/{instance.pk}/keys/", {"label": "laptop"}, format="json")

    # then
    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"id", "label", "key", "read_only", "attributes"}
    assert (body["read_only"], body["attributes"]) == (False, {})
    key = ApiKey.objects.get()
    assert body["id"] == key.pk
    assert body["label"] == "laptop"
    assert body["key"].startswith("thk_")
    assert key.key_hash == ApiKey.hash_key(body["key"])
    assert key.mcp_instance == instance
    assert body["key"] not in str(ApiKey.objects.values().get())


def test_create_without_label(owner, instance):
    """The label is optional."""
    response = client_for(owner).post(f"/api/mcp-instances/{instance.pk}/keys/", {}, format="json")
    assert response.status_code == 201
    assert response.json()["label"] == ""


def test_label_too_long_is_a_400_naming_label(owner, instance):
    """A label over 200 characters is refused; no key is made."""
    # given
    before = db_snapshot()

    # when
    response = client_for(owner).post(f"/api/mcp-instances/{instance.pk}/keys/", {"label": "x" * 201}, format="json")

    # then
    assert response.status_code == 400
    assert list(response.json()["fields"]) == ["label"]
    assert db_snapshot() == before


def test_list_shows_the_instances_keys_without_secrets(owner, instance, make_instance, make_api_key):
    """The list holds this instance's keys: prefix, times, revocation; never the key or its hash."""
    # given
    _, plaintext = make_api_key(instance, label="one")
    make_api_key(make_instance(owner, slug="other"), label="elsewhere")

    # when
    response = client_for(owner).get(f"/api/mcp-instances/{instance.pk}/keys/")

    # then
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 1
    row = body["results"][0]
    assert set(row) == {
        "id",
        "label",
        "prefix",
        "read_only",
        "attributes",
        "created_at",
        "last_used_at",
        "revoked_at",
        "revoked",
    }
    assert row["label"] == "one"
    assert row["prefix"] == plaintext[:10]
    assert row["revoked"] is False
    assert plaintext not in response.content.decode()


def test_delete_revokes_the_key_and_keeps_the_row(owner, instance, make_api_key):
    """DELETE revokes: 204, revoked_at is set, the row stays for the call log; a second DELETE is also 204."""
    # given
    key, _ = make_api_key(instance)
    client = client_for(owner)

    # when
    first = client.delete(f"/api/mcp-instances/{instance.pk}/keys/{key.pk}/")
    key.refresh_from_db()
    revoked_at = key.revoked_at
    second = client.delete(f"/api/mcp-instances/{instance.pk}/keys/{key.pk}/")

    # then
    assert (first.status_code, second.status_code) == (204, 204)
    assert revoked_at is not None
    key.refresh_from_db()
    assert key.revoked_at == revoked_at
    listed = client.get(f"/api/mcp-instances/{instance.pk}/keys/").json()["results"][0]
    assert listed["revoked"] is True


def test_a_key_of_another_instance_is_404_under_this_one(owner, instance, make_instance, make_api_key):
    """Keys are nested: a key id under the wrong instance is 404 and stays unrevoked."""
    # given
    key, _ = make_api_key(make_instance(owner, slug="other"))
    before = db_snapshot()

    # when
    response = client_for(owner).delete(f"/api/mcp-instances/{instance.pk}/keys/{key.pk}/")

    # then
    assert response.status_code == 404
    assert db_snapshot() == before


def test_another_users_instance_keys_are_404(owner, other_user, make_instance, make_api_key):
    """Another user's instance has no keys endpoint for the caller; nothing is created or revoked."""
    # given
    theirs = make_instance(other_user, slug="theirs")
    key, _ = make_api_key(theirs)
    before = db_snapshot()
    client = client_for(owner)

    # when
    responses = [
        client.get(f"/api/mcp-instances/{theirs.pk}/keys/"),
        client.post(f"/api/mcp-instances/{theirs.pk}/keys/", {"label": "mine"}, format="json"),
        client.delete(f"/api/mcp-instances/{theirs.pk}/keys/{key.pk}/"),
    ]

    # then
    assert [r.status_code for r in responses] == [404, 404, 404]
    assert all(r.json()["error"] == "NOT_FOUND" for r in responses)
    assert db_snapshot() == before


@pytest.mark.parametrize("instance_id", ["abc", "0", "99999999999999999999999"])
def test_malformed_instance_id_is_a_json_404(owner, instance_id):
    """A malformed or out-of-range id is a 404 in the error shape, not a 500."""
    response = client_for(owner).get(f"/api/mcp-instances/{instance_id}/keys/")
    assert response.status_code == 404
    assert response.json()["error"] == "NOT_FOUND"
