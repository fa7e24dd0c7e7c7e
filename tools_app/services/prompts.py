"""Every write to an instance's prompts goes through here: full_clean, the instance's lock, the
name constraint.

Callers pass an instance (or a prompt) they already reached through the ownership rule (the API's
get_owned_or_404, the admin's scoped instance page), as for bindings.
"""

from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from tools_app.kernel.limits import MAX_PROMPTS_PER_INSTANCE
from tools_app.models import McpInstance, Prompt, prompt_name_conflict

__all__ = ["PROMPT_FIELDS", "prompt_create", "prompt_delete", "prompt_update"]

PROMPT_FIELDS = ("name", "title", "description", "arguments", "template", "enabled")


def _copied(arguments: Any) -> Any:
    """The arguments as given, with their objects copied (the model normalises its own copy); None is none."""
    if arguments is None:
        return []
    if isinstance(arguments, list):
        return [dict(item) if isinstance(item, dict) else item for item in arguments]
    return arguments


def _name_taken(prompt: Prompt) -> bool:
    """Whether another prompt of the instance has the prompt's name, ignoring case (names are ASCII)."""
    others = Prompt.objects.filter(mcp_instance_id=prompt.mcp_instance_id, name__iexact=prompt.name)
    return others.exclude(pk=prompt.pk).exists() if prompt.pk is not None else others.exists()


def _check_quota(prompt: Prompt) -> None:
    """A new prompt may not take its instance past TOOLHUB_MAX_PROMPTS_PER_INSTANCE (the caller holds the lock)."""
    quota = MAX_PROMPTS_PER_INSTANCE.get()
    count = Prompt.objects.filter(mcp_instance_id=prompt.mcp_instance_id).count()
    if count >= quota:
        raise ValidationError(
            {
                "mcp_instance": ValidationError(
                    "The instance already has %(count)d prompts, the most one instance serves "
                    "(TOOLHUB_MAX_PROMPTS_PER_INSTANCE = %(quota)d): delete one first.",
                    code="quota",
                    params={"count": count, "quota": quota},
                )
            }
        )


def _save_prompt(prompt: Prompt) -> Prompt:
    """full_clean() then save under the instance's row lock (FOR NO KEY UPDATE, as a bind takes it).

    Refused with nothing written: any invalid field (ValidationError naming it), a name already used by a
    prompt of the instance, ignoring case (NAME_CONFLICT on `name`), a new prompt on an instance that has
    TOOLHUB_MAX_PROMPTS_PER_INSTANCE already (on `mcp_instance`), an instance deleted meanwhile. The lock makes
    the name and quota checks exact; the unique index is the guarantee for names.
    """
    try:
        with transaction.atomic():
            instances = McpInstance.objects.filter(pk=prompt.mcp_instance_id)
            if instances.select_for_update(no_key=True).values_list("pk", flat=True).first() is None:
                raise ValidationError(
                    {"mcp_instance": ValidationError("That instance was deleted meanwhile.", code="invalid_choice")}
                )
            prompt.full_clean(validate_constraints=False)
            if _name_taken(prompt):
                raise prompt_name_conflict(prompt.name, prompt.mcp_instance.name)
            if prompt.pk is None:
                _check_quota(prompt)
            prompt.save(force_update=not prompt._state.adding)
    except IntegrityError as exc:
        raise prompt_name_conflict(prompt.name, prompt.mcp_instance.name) from exc
    return prompt


def prompt_create(
    *,
    mcp_instance: McpInstance,
    name: str,
    template: str,
    title: str = "",
    description: str = "",
    arguments: list[dict[str, Any]] | None = None,
    enabled: bool = True,
) -> Prompt:
    """Add a prompt to an instance. Refused (NAME_CONFLICT) when a prompt there has that name (ignoring case)."""
    prompt = Prompt(
        mcp_instance=mcp_instance,
        name=name,
        title=title or "",
        description=description or "",
        arguments=_copied(arguments),
        template=template,
        enabled=enabled,
    )
    return _save_prompt(prompt)


def prompt_update(*, prompt: Prompt, **fields: Any) -> Prompt:
    """Change any of PROMPT_FIELDS; the whole prompt is validated again (placeholders against arguments)."""
    for key, value in fields.items():
        if key not in PROMPT_FIELDS:
            raise TypeError(f"prompt_update got an unexpected field {key!r}")
        if key == "arguments":
            value = _copied(value)
        setattr(prompt, key, value)
    return _save_prompt(prompt)


def prompt_delete(*, prompt: Prompt) -> None:
    """Delete one prompt (MCP clients stop seeing it at their next prompts/list)."""
    Prompt.objects.filter(pk=prompt.pk).delete()
