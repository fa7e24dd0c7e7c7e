"""An instance's own prompts — the model's rules, the services' writes, and rendering."""

import pytest
from django.core.exceptions import ValidationError

from tools_app import services
from tools_app.kernel.errors import ErrorCode
from tools_app.models import Prompt, PromptArgumentsError

pytestmark = pytest.mark.django_db

REGION = {"name": "region", "description": "Region name.", "required": True}


@pytest.fixture
def make_prompt(instance):
    def make(name="weekly_report", template="Report for {{region}}.", arguments=None, **fields):
        return services.prompt_create(
            mcp_instance=fields.pop("mcp_instance", instance),
            name=name,
            template=template,
            arguments=[REGION] if arguments is None else arguments,
            **fields,
        )

    return make


def refusal(make, **fields) -> dict[str, list[str]]:
    """The {field: [messages]} of a refused prompt_create, asserting that nothing was written."""
    before = list(Prompt.objects.values())
    with pytest.raises(ValidationError) as caught:
        make(**fields)
    assert list(Prompt.objects.values()) == before
    return caught.value.message_dict


#
# The model's rules, through the service
#


def test_create_stores_normalised_arguments(make_prompt, instance):
    # when
    prompt = make_prompt(arguments=[{"name": "region", "required": True}, {"name": "week"}], title="Weekly")
    # then
    prompt.refresh_from_db()
    assert (prompt.mcp_instance, prompt.name, prompt.title, prompt.enabled) == (
        instance,
        "weekly_report",
        "Weekly",
        True,
    )
    assert prompt.arguments == [
        {"name": "region", "description": "", "required": True},
        {"name": "week", "description": "", "required": False},
    ]


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        (
            {"name": "bad name"},
            "name",
            "Tool names are 1–64 characters of letters, digits, '_', '.' and '-' (got 'bad name').",
        ),
        ({"name": ""}, "name", "This field cannot be blank."),
        (
            {"name": "usage_guide"},
            "name",
            "'usage_guide' is the name of the built-in prompt every instance serves; choose another name.",
        ),
        (
            {"name": "Usage_Guide"},
            "name",
            "'Usage_Guide' is the name of the built-in prompt every instance serves; choose another name.",
        ),
        ({"template": ""}, "template", "This field cannot be blank."),
        (
            {"template": "x" * 20_001},
            "template",
            "Ensure this value has at most 20000 characters (it has 20001).",
        ),
        (
            {"template": "Report for {{region}} in {{ year }} and {{month}}."},
            "template",
            "The template uses {{year}}, {{month}}, which are not declared in arguments: declare them or remove "
            "the placeholder.",
        ),
        (
            {"arguments": [], "template": "Hi {{who}}"},
            "template",
            "The template uses {{who}}, which is not declared in arguments: declare it or remove the placeholder.",
        ),
        (
            {"arguments": {}},
            "arguments",
            'The arguments are a list of {"name", "description", "required"} objects.',
        ),
        (
            {"arguments": {"name": "region"}},
            "arguments",
            'The arguments are a list of {"name", "description", "required"} objects.',
        ),
        (
            {"arguments": [{"name": "1st"}]},
            "arguments",
            "arguments[0].name must be an identifier: 1-64 letters, digits and '_', not starting with a digit "
            "(got '1st').",
        ),
        (
            {"arguments": [REGION, {"name": "a-b"}]},
            "arguments",
            "arguments[1].name must be an identifier: 1-64 letters, digits and '_', not starting with a digit "
            "(got 'a-b').",
        ),
        (
            {"arguments": [REGION, {"name": "region"}]},
            "arguments",
            "Argument names must be distinct: 'region' repeated.",
        ),
        (
            {"arguments": [{"name": f"a{n}"} for n in range(21)], "template": "t"},
            "arguments",
            "A prompt has at most 20 arguments (got 21).",
        ),
        (
            {"arguments": [{"name": "region", "required": "yes"}]},
            "arguments",
            "arguments[0].required ('region') must be true or false.",
        ),
        (
            {"arguments": [{"name": "region", "description": "d" * 1025}]},
            "arguments",
            "arguments[0].description ('region') is at most 1024 characters.",
        ),
        (
            {"arguments": [{"name": "region", "description": 5}]},
            "arguments",
            "arguments[0].description ('region') must be a string.",
        ),
        (
            {"arguments": [{"name": "region", "default": "EMEA"}]},
            "arguments",
            "arguments[0] has unknown keys ['default']: an argument has name, description and required.",
        ),
        ({"arguments": ["region"]}, "arguments", 'arguments[0] must be an object {"name", "description", "required"}.'),
        ({"description": "d" * 1025}, "description", "Ensure this value has at most 1024 characters (it has 1025)."),
    ],
)
def test_bad_input_is_refused_naming_the_field_and_nothing_is_written(make_prompt, fields, field, message):
    """Each refusal names its field with a message saying what is wrong."""
    # when
    errors = refusal(make_prompt, **fields)
    # then
    assert errors[field] == [message]


def test_a_name_taken_on_the_instance_ignoring_case_is_a_name_conflict(make_prompt, make_instance, owner):
    # given
    make_prompt()
    # when
    with pytest.raises(ValidationError) as caught:
        make_prompt(name="Weekly_Report")
    elsewhere = make_prompt(mcp_instance=make_instance(owner, slug="other"), name="Weekly_Report")
    # then
    error = caught.value.error_dict["name"][0]
    assert error.code == ErrorCode.NAME_CONFLICT
    assert caught.value.message_dict["name"] == [
        "The name 'Weekly_Report' is already used by a prompt on the instance 'Shop' (prompt names are unique "
        "per instance, ignoring case)."
    ]
    assert list(Prompt.objects.order_by("mcp_instance__slug").values_list("pk", "name", "mcp_instance__slug"))[0] == (
        elsewhere.pk,
        "Weekly_Report",
        "other",
    )
    assert Prompt.objects.count() == 2


def test_the_index_refuses_a_duplicate_that_skips_validation(make_prompt, instance):
    """The unique index (not only clean()) holds the rule: a save that bypasses the service is refused."""
    from django.db import IntegrityError, transaction

    # given
    make_prompt()
    # when / then
    with pytest.raises(IntegrityError), transaction.atomic():
        Prompt(mcp_instance=instance, name="WEEKLY_REPORT", template="t").save()
    assert Prompt.objects.count() == 1


def test_an_instance_serves_at_most_the_quota_of_prompts(make_prompt, make_instance, owner, settings):
    """TOOLHUB_MAX_PROMPTS_PER_INSTANCE bounds what prompts/list reads: the next one is refused, nothing written;
    an edit of an existing prompt and a prompt on another instance still go through."""
    # given
    settings.TOOLHUB_MAX_PROMPTS_PER_INSTANCE = 2
    first = make_prompt(name="one")
    make_prompt(name="two")
    # when
    refused = refusal(make_prompt, name="three")
    # then
    assert refused == {
        "mcp_instance": [
            "The instance already has 2 prompts, the most one instance serves (TOOLHUB_MAX_PROMPTS_PER_INSTANCE = "
            "2): delete one first."
        ]
    }
    services.prompt_update(prompt=first, description="still editable")
    assert Prompt.objects.get(pk=first.pk).description == "still editable"
    assert make_prompt(name="three", mcp_instance=make_instance(owner, slug="other")).name == "three"


def test_update_revalidates_placeholders_and_keeps_the_row_on_refusal(make_prompt):
    # given
    prompt = make_prompt()
    # when
    with pytest.raises(ValidationError) as caught:
        services.prompt_update(prompt=Prompt.objects.get(pk=prompt.pk), arguments=[])
    # then
    assert caught.value.message_dict == {
        "template": [
            "The template uses {{region}}, which is not declared in arguments: declare it or remove the placeholder."
        ]
    }
    assert Prompt.objects.get(pk=prompt.pk).arguments == [REGION]


def test_update_renames_and_unknown_fields_are_a_type_error(make_prompt):
    # given
    prompt = make_prompt()
    # when
    services.prompt_update(prompt=prompt, name="monthly_report", enabled=False)
    # then
    assert list(Prompt.objects.values_list("name", "enabled")) == [("monthly_report", False)]
    with pytest.raises(TypeError):
        services.prompt_update(prompt=prompt, mcp_instance=None)


def test_delete_and_instance_delete_remove_prompts(make_prompt, instance):
    # given
    first = make_prompt()
    make_prompt(name="second")
    # when
    services.prompt_delete(prompt=first)
    left = list(Prompt.objects.values_list("name", flat=True))
    services.instance_delete(instance=instance)
    # then
    assert left == ["second"]
    assert Prompt.objects.count() == 0


def test_for_user_scopes_prompts_through_their_instance(make_prompt, make_instance, owner, other_user, superuser):
    # given
    mine = make_prompt()
    theirs = make_prompt(mcp_instance=make_instance(other_user, slug="theirs"))
    # then
    assert list(Prompt.objects.for_user(owner)) == [mine]
    assert list(Prompt.objects.for_user(other_user)) == [theirs]
    assert set(Prompt.objects.for_user(superuser)) == {mine, theirs}
    assert list(Prompt.objects.for_user(None)) == []


#
# Rendering
#


def test_render_substitutes_values_literally_once(make_prompt):
    # given
    prompt = make_prompt(
        arguments=[REGION, {"name": "week"}],
        template="{{region}} / {{ week }} / {{region}} / {{unknown_text} / {0} %s {{}}",
    )
    # when
    text = prompt.render({"region": "{{week}} {0} %(x)s"})
    # then
    assert text == "{{week}} {0} %(x)s /  / {{week}} {0} %(x)s / {{unknown_text} / {0} %s {{}}"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "The prompt 'weekly_report' needs the argument 'region'."),
        ({"week": "1"}, "The prompt 'weekly_report' needs the argument 'region'."),
        (
            {"region": "EMEA", "year": "2026", "colour": "red"},
            "Unknown arguments for the prompt 'weekly_report': 'colour', 'year'. It takes 'region', 'week'.",
        ),
        ({"region": "x" * 10_001}, "The argument 'region' is over 10000 characters."),
        ({"region": 5}, "The argument 'region' must be a string."),
    ],
)
def test_render_refuses_arguments_naming_them(make_prompt, arguments, message):
    # given
    prompt = make_prompt(arguments=[REGION, {"name": "week"}])
    # when
    with pytest.raises(PromptArgumentsError) as caught:
        prompt.render(arguments)
    # then
    assert str(caught.value) == message


def test_render_bounds_the_result(make_prompt):
    # given
    prompt = make_prompt(template="{{region}}" * 25)
    # when
    with pytest.raises(PromptArgumentsError) as caught:
        prompt.render({"region": "x" * 10_000})
    # then
    assert str(caught.value) == (
        "The prompt 'weekly_report' would render to 250000 characters, over 200000: send shorter values."
    )
