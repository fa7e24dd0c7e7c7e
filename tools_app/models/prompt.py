"""Prompt: an owner-defined prompt template served by an MCP instance (docs/mcp-clients.md).

Beside the built-in `usage_guide`, an instance serves its enabled prompts over MCP (prompts/list,
prompts/get). A prompt's `template` holds `{{name}}` placeholders, each one a declared argument; getting
the prompt substitutes the caller's values literally (Prompt.render).
"""

from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MaxLengthValidator
from django.db import models
from django.db.models.functions import Lower

from tools_app.kernel.errors import ErrorCode
from tools_app.kernel.limits import MAX_DESCRIPTION, MAX_PROMPT_ARGUMENT, MAX_PROMPT_RENDERED, MAX_PROMPT_TEMPLATE
from tools_app.models.instance import McpInstance, OwnedThroughInstanceQuerySet
from tools_app.validators import (
    PROMPT_PLACEHOLDER_RE,
    prompt_placeholders,
    validate_prompt_arguments,
    validate_prompt_name,
)

__all__ = ["Prompt", "PromptArgumentsError", "PromptQuerySet", "prompt_name_conflict"]


class PromptArgumentsError(ValueError):
    """The arguments of a prompts/get cannot render the prompt; the message names the arguments at fault."""


class PromptQuerySet(OwnedThroughInstanceQuerySet):
    def enabled_for(self, instance: McpInstance) -> "PromptQuerySet":
        """The enabled prompts of an instance: what it serves besides `usage_guide`."""
        return self.filter(mcp_instance=instance, enabled=True)


def prompt_name_conflict(name: str, instance_name: str) -> ValidationError:
    """A prompt name already used on the instance (ignoring case): NAME_CONFLICT on `name`."""
    return ValidationError(
        {
            "name": ValidationError(
                "The name %(name)r is already used by a prompt on the instance %(instance)r "
                "(prompt names are unique per instance, ignoring case).",
                code=ErrorCode.NAME_CONFLICT,
                params={"name": name, "instance": instance_name},
            )
        }
    )


class Prompt(models.Model):
    """A prompt template of an MCP instance; `{{name}}` placeholders take the values of its arguments."""

    mcp_instance = models.ForeignKey(
        McpInstance,
        on_delete=models.CASCADE,
        related_name="prompts",
        verbose_name="MCP instance",
        error_messages={"invalid": "%(model)s with %(field)s %(value)r does not exist."},
    )
    name = models.CharField(
        max_length=64,
        validators=[validate_prompt_name],
        help_text="What MCP clients ask for: 1-64 letters, digits, '_', '.' and '-'; unique on the instance "
        "(ignoring case); not usage_guide, the built-in prompt.",
    )
    title = models.CharField(max_length=200, blank=True, help_text="A short name shown to people (optional).")
    description = models.TextField(
        blank=True, max_length=MAX_DESCRIPTION, validators=[MaxLengthValidator(MAX_DESCRIPTION)]
    )
    # Checked in clean(): as a field validator, `{}` (an "empty" value to Django) would skip it.
    arguments = models.JSONField(
        default=list,
        blank=True,
        help_text='A list of {"name", "description", "required"} objects: names are identifiers, distinct, at most '
        "20 arguments.",
    )
    # TextField's max_length is a form hint only: the validator enforces it on every write.
    template = models.TextField(
        max_length=MAX_PROMPT_TEMPLATE,
        validators=[MaxLengthValidator(MAX_PROMPT_TEMPLATE)],
        help_text="The prompt's text. {{name}} is replaced by the value of the argument `name` (empty when an "
        "optional argument is not given); every placeholder must be a declared argument.",
    )
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = PromptQuerySet.as_manager()

    class Meta:
        ordering = ["mcp_instance_id", "name", "id"]
        constraints = [
            # Names compare ignoring case, as tool names do on an instance (SPEC §2.4). The services report a
            # duplicate as NAME_CONFLICT; this index is the guarantee under concurrency.
            models.UniqueConstraint(
                Lower("name"),
                "mcp_instance",
                name="prompt_unique_name_per_instance",
                violation_error_message="Prompt names are unique per instance, ignoring case.",
            ),
        ]

    def __str__(self):
        return f"{self.name} on {self.mcp_instance}"

    @property
    def owner_id(self):
        return self.mcp_instance.owner_id

    def clean(self):
        errors: dict[str, list[ValidationError]] = {}
        try:
            validate_prompt_arguments(self.arguments)
        except ValidationError as exc:
            arguments_valid = False
            errors["arguments"] = exc.error_list
        else:
            arguments_valid = True
            self.arguments = [
                {
                    "name": item["name"],
                    "description": item.get("description", ""),
                    "required": item.get("required", False),
                }
                for item in self.arguments
            ]
        if arguments_valid and isinstance(self.template, str):
            declared = {item["name"] for item in self.arguments}
            undeclared = [name for name in prompt_placeholders(self.template) if name not in declared]
            if undeclared:
                errors["template"] = [
                    ValidationError(
                        "The template uses %(placeholders)s, which %(verb)s not declared in arguments: declare "
                        "%(them)s or remove the placeholder.",
                        code="undeclared_placeholder",
                        params={
                            "placeholders": ", ".join("{{" + name + "}}" for name in undeclared[:5]),
                            "verb": "is" if len(undeclared) == 1 else "are",
                            "them": "it" if len(undeclared) == 1 else "them",
                        },
                    )
                ]
        # A name taken on the instance is decided by the services under the instance's lock (other rows may
        # change meanwhile, and an admin submit may free a name by deleting a row): NAME_CONFLICT there.
        if errors:
            raise ValidationError(errors)

    def render(self, arguments: Mapping[str, Any] | None) -> str:
        """The template with each `{{name}}` replaced by the argument's value, in one pass (a value is never
        read as a template); an optional argument not given is empty.

        Raises PromptArgumentsError naming unknown arguments, missing required ones, values that are not
        strings or are over MAX_PROMPT_ARGUMENT characters, and a result over MAX_PROMPT_RENDERED characters.
        """
        arguments = dict(arguments or {})
        declared = [item["name"] for item in self.arguments]
        unknown = sorted(str(name) for name in arguments if name not in declared)
        if unknown:
            shown = ", ".join(repr(name[:80]) for name in unknown[:5]) + (", ..." if len(unknown) > 5 else "")
            takes = ", ".join(repr(name) for name in declared) if declared else "no arguments"
            raise PromptArgumentsError(f"Unknown arguments for the prompt {self.name!r}: {shown}. It takes {takes}.")
        missing = [item["name"] for item in self.arguments if item.get("required") and item["name"] not in arguments]
        if missing:
            raise PromptArgumentsError(
                f"The prompt {self.name!r} needs the argument{'s' if len(missing) > 1 else ''} "
                + ", ".join(repr(name) for name in missing)
                + "."
            )
        for name, value in arguments.items():
            if not isinstance(value, str):
                raise PromptArgumentsError(f"The argument {name!r} must be a string.")
            if len(value) > MAX_PROMPT_ARGUMENT:
                raise PromptArgumentsError(f"The argument {name!r} is over {MAX_PROMPT_ARGUMENT} characters.")
        values = {name: arguments.get(name, "") for name in declared}
        matches = list(PROMPT_PLACEHOLDER_RE.finditer(self.template))
        size = len(self.template) + sum(
            len(values[m.group(1)]) - len(m.group(0)) for m in matches if m.group(1) in values
        )
        if size > MAX_PROMPT_RENDERED:
            raise PromptArgumentsError(
                f"The prompt {self.name!r} would render to {size} characters, over {MAX_PROMPT_RENDERED}: "
                "send shorter values."
            )
        # A placeholder that is not a declared argument (only in rows saved without validation) stays as text.
        return PROMPT_PLACEHOLDER_RE.sub(lambda m: values.get(m.group(1), m.group(0)), self.template)
