"""An instance's prompts, edited inline on its admin page, owner-scoped, through the services."""

import json

import pytest

from tools_app.kernel.errors import ErrorCode
from tools_app.models import Prompt
from tools_app.services import prompt_create
from tools_app.tests.admin.test_instances import change_url, instance_form

pytestmark = pytest.mark.django_db

REGION = [{"name": "region", "description": "Region name.", "required": True}]


@pytest.fixture
def region_prompt(instance):
    return prompt_create(
        mcp_instance=instance, name="weekly_report", arguments=REGION, template="Report on {{region}}."
    )


def prompt_errors(response):
    """The errors of the prompt inline's rows, as {row: {field: [messages]}}."""
    formset = next(f.formset for f in response.context["inline_admin_formsets"] if f.formset.model is Prompt)
    return {index: form.errors for index, form in enumerate(formset.forms) if form.errors}


def test_the_instance_page_shows_the_prompt_inline_to_a_toolhub_user(owner_client, instance, region_prompt):
    """A staff user of the group `toolhub users` (migration 0014 gave it the prompt permissions) edits prompts."""
    # when
    response = owner_client.get(change_url(instance))
    # then
    assert response.status_code == 200
    inline = next(f for f in response.context["inline_admin_formsets"] if f.formset.model is Prompt)
    assert (inline.has_add_permission, inline.has_change_permission, inline.has_delete_permission) == (True, True, True)
    assert [form.instance.name for form in inline.formset.forms] == ["weekly_report"]


def test_a_new_row_creates_the_prompt_through_the_service(owner_client, instance):
    # given
    row = {
        "name": "weekly_report",
        "title": "Weekly",
        "description": "",
        "arguments": json.dumps([{"name": "region", "required": True}]),
        "template": "Report on {{region}}.\n",
    }
    # when
    response = owner_client.post(change_url(instance), instance_form(instance, prompt_rows=[row]))
    # then
    assert response.status_code == 302
    prompt = Prompt.objects.get()
    assert (prompt.mcp_instance, prompt.name, prompt.title, prompt.template) == (
        instance,
        "weekly_report",
        "Weekly",
        "Report on {{region}}.\n",
    )
    assert prompt.arguments == [{"name": "region", "description": "", "required": True}]


def test_an_empty_arguments_box_means_no_arguments(owner_client, instance):
    # when
    row = {"name": "hello", "arguments": "", "template": "Say hello."}
    response = owner_client.post(change_url(instance), instance_form(instance, prompt_rows=[row]))
    # then
    assert response.status_code == 302
    assert list(Prompt.objects.values_list("name", "arguments")) == [("hello", [])]


@pytest.mark.parametrize(
    ("row", "field", "message"),
    [
        (
            {"name": "p", "arguments": "[]", "template": "Hi {{who}}"},
            "template",
            "The template uses {{who}}, which is not declared in arguments: declare it or remove the placeholder.",
        ),
        (
            {"name": "usage_guide", "arguments": "[]", "template": "t"},
            "name",
            "'usage_guide' is the name of the built-in prompt every instance serves; choose another name.",
        ),
        (
            {"name": "p", "arguments": '[{"name": "a"}, {"name": "a"}]', "template": "t"},
            "arguments",
            "Argument names must be distinct: 'a' repeated.",
        ),
        (
            {"name": "Weekly_Report", "arguments": "[]", "template": "t"},
            "name",
            "The name 'Weekly_Report' is already used by a prompt on the instance 'Shop' (prompt names are unique per "
            "instance, ignoring case).",
        ),
    ],
)
def test_a_refused_row_is_a_form_error_and_nothing_is_written(
    owner_client, instance, region_prompt, row, field, message
):
    # given
    before = list(Prompt.objects.values())
    # when
    response = owner_client.post(
        change_url(instance), instance_form(instance, prompts=[region_prompt], prompt_rows=[row])
    )
    # then
    assert response.status_code == 200
    assert prompt_errors(response) == {1: {field: [message]}}
    assert list(Prompt.objects.values()) == before


def test_invalid_json_in_the_arguments_is_a_form_error(owner_client, instance):
    # when
    row = {"name": "p", "arguments": "[{", "template": "t"}
    response = owner_client.post(change_url(instance), instance_form(instance, prompt_rows=[row]))
    # then
    assert response.status_code == 200
    assert list(prompt_errors(response)[0]) == ["arguments"]
    assert Prompt.objects.count() == 0


def test_a_row_edits_and_deletes_prompts(owner_client, instance, region_prompt):
    # given
    other = prompt_create(mcp_instance=instance, name="other", template="Other.")
    region_prompt.enabled = False
    region_prompt.template = "New report on {{region}}."
    data = instance_form(instance, prompts=[other, region_prompt])
    data["prompts-0-DELETE"] = "on"
    # when
    response = owner_client.post(change_url(instance), data)
    # then
    assert response.status_code == 302
    assert list(Prompt.objects.values_list("name", "enabled", "template")) == [
        ("weekly_report", False, "New report on {{region}}.")
    ]


def test_a_deleted_row_frees_its_name_in_the_same_submit(owner_client, instance, region_prompt):
    # given
    data = instance_form(instance, prompts=[region_prompt], prompt_rows=[{"name": "WEEKLY_REPORT", "template": "New."}])
    data["prompts-0-DELETE"] = "on"
    # when
    response = owner_client.post(change_url(instance), data)
    # then
    assert response.status_code == 302
    assert list(Prompt.objects.values_list("name", "template")) == [("WEEKLY_REPORT", "New.")]


def test_another_user_cannot_reach_the_prompts_of_an_instance(client, other_user, instance, region_prompt):
    # given
    client.force_login(other_user)
    before = list(Prompt.objects.values())
    data = instance_form(instance, prompts=[region_prompt], prompt_rows=[{"name": "mine", "template": "t"}])
    data["prompts-0-DELETE"] = "on"
    # when
    opened = client.get(change_url(instance))
    changed = client.post(change_url(instance), data)
    # then
    assert (opened.status_code, changed.status_code) == (302, 302)
    assert list(Prompt.objects.values()) == before


def test_a_refusal_at_save_time_rolls_back_the_whole_page(owner_client, instance, region_prompt, monkeypatch):
    """A conflict the prompt service finds at save time is shown on the page and nothing is saved."""
    # given
    from django.core.exceptions import ValidationError

    from tools_app import services

    def refuse(**kwargs):
        raise ValidationError({"name": ValidationError("Taken meanwhile.", code=ErrorCode.NAME_CONFLICT)})

    monkeypatch.setattr(services, "prompt_update", refuse)
    region_prompt.enabled = False
    # when
    response = owner_client.post(
        change_url(instance), instance_form(instance, prompts=[region_prompt], description="x")
    )
    # then
    assert response.status_code == 200
    assert response.context["adminform"].form.non_field_errors() == ["Prompt 'weekly_report': Taken meanwhile."]
    instance.refresh_from_db()
    region_prompt.refresh_from_db()
    assert (instance.description, region_prompt.enabled) == ("", True)


def test_two_new_rows_with_one_name_ignoring_case_are_refused(owner_client, instance):
    # given
    rows = [{"name": "report", "template": "One."}, {"name": "REPORT", "template": "Two."}]
    # when
    response = owner_client.post(change_url(instance), instance_form(instance, prompt_rows=rows))
    # then
    assert response.status_code == 200
    assert prompt_errors(response) == {
        1: {
            "name": [
                "The name 'REPORT' is already used by a prompt on the instance 'Shop' (prompt names are unique per "
                "instance, ignoring case)."
            ]
        }
    }
    assert Prompt.objects.count() == 0


def test_prompts_added_with_a_new_instance_belong_to_it(owner_client, owner):
    # given
    from django.urls import reverse

    from tools_app.models import McpInstance

    new = McpInstance(name="CRM", slug="crm", max_result_bytes=5000)
    data = instance_form(new, prompt_rows=[{"name": "hello", "arguments": "[]", "template": "Say hello."}])
    data["prompts-0-mcp_instance"] = ""  # the browser sends the new instance's (empty) id
    # when
    response = owner_client.post(reverse("admin:tools_app_mcpinstance_add"), data)
    # then
    assert response.status_code == 302
    instance = McpInstance.objects.get(slug="crm")
    assert instance.owner == owner
    assert list(Prompt.objects.values_list("mcp_instance", "name")) == [(instance.pk, "hello")]
