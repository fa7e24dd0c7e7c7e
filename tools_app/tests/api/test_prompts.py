"""JSON API: /api/mcp-instances/<id>/prompts/: an instance's own prompts, owner-scoped."""

import pytest

from tests.api_helpers import client_for, db_snapshot
from tools_app.models import Prompt
from tools_app.services import prompt_create

pytestmark = pytest.mark.django_db

WEEKLY = {
    "name": "weekly_report",
    "title": "Weekly report",
    "description": "Draft the weekly report of one region.",
    "arguments": [{"name": "region", "description": "Region name.", "required": True}, {"name": "week"}],
    "template": "Write the weekly report for {{region}} (week {{week}}).\n",
}


def url(instance, prompt=None) -> str:
    base = f"/api/mcp-instances/{instance.pk}/prompts/"
    return base if prompt is None else f"{base}{prompt.pk}/"


@pytest.fixture
def weekly(instance):
    return prompt_create(mcp_instance=instance, **WEEKLY)


def test_create_answers_the_prompt_with_its_arguments_normalised(owner, instance):
    # when
    response = client_for(owner).post(url(instance), WEEKLY, format="json")
    # then
    assert response.status_code == 201
    body = response.json()
    prompt = Prompt.objects.get()
    assert {key: body[key] for key in body if key not in ("created_at", "updated_at")} == {
        "id": prompt.pk,
        "mcp_instance": instance.pk,
        "name": "weekly_report",
        "title": "Weekly report",
        "description": "Draft the weekly report of one region.",
        "arguments": [
            {"name": "region", "description": "Region name.", "required": True},
            {"name": "week", "description": "", "required": False},
        ],
        "template": "Write the weekly report for {{region}} (week {{week}}).\n",
        "enabled": True,
    }
    assert prompt.template == WEEKLY["template"]  # kept as sent, trailing newline included


def test_list_and_retrieve_show_only_this_instances_prompts(owner, instance, make_instance, weekly):
    # given
    prompt_create(mcp_instance=make_instance(owner, slug="other"), name="elsewhere", template="t")
    client = client_for(owner)
    # when
    listed = client.get(url(instance))
    got = client.get(url(instance, weekly))
    # then
    assert listed.status_code == 200
    assert (listed.json()["count"], [row["name"] for row in listed.json()["results"]]) == (1, ["weekly_report"])
    assert (got.status_code, got.json()["id"], got.json()["name"]) == (200, weekly.pk, "weekly_report")


def test_patch_and_put_change_the_prompt(owner, instance, weekly):
    # given
    client = client_for(owner)
    # when
    patched = client.patch(url(instance, weekly), {"enabled": False}, format="json")
    put = client.put(url(instance, weekly), {"name": "daily", "template": "Daily summary."}, format="json")
    # then
    assert (patched.status_code, patched.json()["enabled"]) == (200, False)
    assert put.status_code == 200
    weekly.refresh_from_db()
    assert (weekly.name, weekly.template, weekly.enabled) == ("daily", "Daily summary.", False)
    # PUT leaves fields it does not send as they were (DRF's update): the arguments stay.
    assert [item["name"] for item in weekly.arguments] == ["region", "week"]


def test_delete_removes_the_prompt(owner, instance, weekly):
    # when
    response = client_for(owner).delete(url(instance, weekly))
    # then
    assert response.status_code == 204
    assert Prompt.objects.count() == 0


@pytest.mark.parametrize(
    ("payload", "field", "message"),
    [
        (
            {**WEEKLY, "name": "usage_guide"},
            "name",
            "'usage_guide' is the name of the built-in prompt every instance serves; choose another name.",
        ),
        (
            {**WEEKLY, "name": "bad name"},
            "name",
            "Tool names are 1–64 characters of letters, digits, '_', '.' and '-' (got 'bad name').",
        ),
        (
            {**WEEKLY, "arguments": []},
            "template",
            "The template uses {{region}}, {{week}}, which are not declared in "
            "arguments: declare them or remove the placeholder.",
        ),
        (
            {**WEEKLY, "arguments": [{"name": "region"}, {"name": "region"}]},
            "arguments",
            "Argument names must be distinct: 'region' repeated.",
        ),
        (
            {**WEEKLY, "arguments": [{"name": "2x"}]},
            "arguments",
            "arguments[0].name must be an identifier: 1-64 "
            "letters, digits and '_', not starting with a digit (got '2x').",
        ),
        ({**WEEKLY, "template": 5}, "template", "Not a valid string."),
        ({**WEEKLY, "enabled": "true"}, "enabled", "Must be a valid boolean."),
        ({**WEEKLY, "template": "x" * 20_001}, "template", "Ensure this field has no more than 20000 characters."),
        (
            {**WEEKLY, "extra": 1},
            "extra",
            "Unknown field: the body's fields are arguments, description, enabled, name, template, title.",
        ),
        ({"name": "n"}, "template", "This field is required."),
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_writes_nothing(owner, instance, payload, field, message):
    # given
    before = db_snapshot()
    # when
    response = client_for(owner).post(url(instance), payload, format="json")
    # then
    assert response.status_code == 400
    assert response.json()["error"] == "VALIDATION_ERROR"
    assert response.json()["fields"][field] == [message]
    assert db_snapshot() == before


def test_a_duplicate_name_is_a_409_name_conflict_and_writes_nothing(owner, instance, weekly):
    # given
    before = db_snapshot()
    # when
    created = client_for(owner).post(url(instance), {**WEEKLY, "name": "WEEKLY_REPORT"}, format="json")
    renamed = client_for(owner).post(url(instance), {"name": "other", "template": "t"}, format="json")
    renamed_into = client_for(owner).patch(
        url(instance, Prompt.objects.get(name="other")), {"name": "Weekly_Report"}, format="json"
    )
    # then
    message = (
        "The name {!r} is already used by a prompt on the instance 'Shop' (prompt names are unique per instance, "
        "ignoring case)."
    )
    assert (created.status_code, created.json()["error"]) == (409, "NAME_CONFLICT")
    assert created.json()["fields"] == {"name": [message.format("WEEKLY_REPORT")]}
    assert (renamed_into.status_code, renamed_into.json()["fields"]) == (
        409,
        {"name": [message.format("Weekly_Report")]},
    )
    assert renamed.status_code == 201
    assert sorted(Prompt.objects.values_list("name", flat=True)) == ["other", "weekly_report"]
    assert db_snapshot()["tools_app.Prompt"][0] == before["tools_app.Prompt"][0]


def test_another_owners_instance_and_prompts_are_404_and_untouched(owner, other_user, instance, weekly):
    # given
    client = client_for(other_user)
    before = db_snapshot()
    # when
    answers = [
        client.get(url(instance)),
        client.post(url(instance), {**WEEKLY, "name": "mine"}, format="json"),
        client.get(url(instance, weekly)),
        client.patch(url(instance, weekly), {"enabled": False}, format="json"),
        client.put(url(instance, weekly), {"name": "x", "template": "t"}, format="json"),
        client.delete(url(instance, weekly)),
    ]
    # then
    assert [(answer.status_code, answer.json()["error"]) for answer in answers] == [(404, "NOT_FOUND")] * 6
    assert db_snapshot() == before


def test_a_prompt_reached_through_another_instance_is_404(owner, instance, make_instance, weekly):
    """A prompt id is looked up under the instance in the path only."""
    # given
    other = make_instance(owner, slug="other")
    before = db_snapshot()
    # when
    got = client_for(owner).get(url(other, weekly))
    deleted = client_for(owner).delete(url(other, weekly))
    # then
    assert (got.status_code, deleted.status_code) == (404, 404)
    assert db_snapshot() == before


def test_anonymous_is_401_and_superuser_reaches_every_prompt(instance, superuser, weekly):
    # given
    before = db_snapshot()
    # when
    anonymous = client_for().post(url(instance), {**WEEKLY, "name": "anon"}, format="json")
    after_anonymous = db_snapshot()
    listed = client_for(superuser).get(url(instance))
    # then
    assert (anonymous.status_code, anonymous.json()["error"]) == (401, "NOT_AUTHENTICATED")
    assert after_anonymous == before
    assert [row["name"] for row in listed.json()["results"]] == ["weekly_report"]


@pytest.mark.parametrize("path", ["abc", "0", "99999"])
def test_malformed_or_missing_ids_are_json_404s(owner, instance, path):
    response = client_for(owner).get(f"/api/mcp-instances/{instance.pk}/prompts/{path}/")
    missing_instance = client_for(owner).get(f"/api/mcp-instances/{path}/prompts/")
    assert (response.status_code, response.json()["error"]) == (404, "NOT_FOUND")
    assert (missing_instance.status_code, missing_instance.json()["error"]) == (404, "NOT_FOUND")


def test_a_prompt_past_the_instances_quota_is_refused_and_nothing_is_written(owner, instance, weekly, settings):
    # given
    settings.TOOLHUB_MAX_PROMPTS_PER_INSTANCE = 1
    before = db_snapshot()
    # when
    response = client_for(owner).post(url(instance), {**WEEKLY, "name": "monthly_report"}, format="json")
    # then
    assert response.status_code == 400
    assert response.json()["error"] == "VALIDATION_ERROR"
    assert response.json()["fields"] == {
        "mcp_instance": [
            "The instance already has 1 prompts, the most one instance serves (TOOLHUB_MAX_PROMPTS_PER_INSTANCE = "
            "1): delete one first."
        ]
    }
    assert db_snapshot() == before
