"""Every write to instances, bindings and API keys goes through here (full_clean, locks, constraints)."""

from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from tools_app.errors import ErrorCode
from tools_app.models import Tool, name_conflict_error
from tools_app.services import lock_rows

from .models import ApiKey, Binding, McpInstance

INSTANCE_FIELDS = (
    "name",
    "slug",
    "description",
    "instructions",
    "enabled",
    "discovery",
    "allow_registration",
    "max_result_bytes",
)


def instance_create(*, owner, **fields: Any) -> McpInstance:
    instance = McpInstance(owner=owner, **fields)
    instance.full_clean()
    instance.save()
    return instance


def instance_update(*, instance: McpInstance, **fields: Any) -> McpInstance:
    for key, value in fields.items():
        if key not in INSTANCE_FIELDS:
            raise TypeError(f"instance_update got an unexpected field {key!r}")
        setattr(instance, key, value)
    instance.full_clean()
    instance.save()
    return instance


def _conflict(binding: Binding, field: str) -> ValidationError:
    clash = (
        Binding.objects.filter(mcp_instance_id=binding.mcp_instance_id, name_key=binding.name_key)
        .exclude(pk=binding.pk)
        .select_related("tool", "mcp_instance")
        .first()
    )
    if clash is None:
        return ValidationError({field: ValidationError("This binding conflicts with another.", code="conflict")})
    return name_conflict_error(field, binding.effective_name, [(clash.mcp_instance.name, clash.effective_name)])


def _save_binding(binding: Binding, field: str) -> Binding:
    """full_clean() then save under the instance's and the tool's row locks.

    The unique name constraint is the guarantee; the locks make the friendly check exact.
    """
    binding.full_clean(validate_constraints=False)
    try:
        with transaction.atomic():
            # Serialize binding changes per instance (PostgreSQL), so the friendly check below is exact.
            McpInstance.objects.select_for_update().filter(pk=binding.mcp_instance_id).values_list("pk").first()
            # SPEC §2.4 under concurrency: the tool may have been renamed since it was read, and a rename
            # cannot see (so cannot re-key) a binding that is not committed yet. Locking the tool row makes a
            # rename and a bind of the same tool queue, and the name key is taken from the current name.
            current_name = Tool.objects.select_for_update().filter(pk=binding.tool_id).values_list("name", flat=True)
            binding.tool.name = current_name.get()
            binding.name_key = binding.effective_name.lower()
            if (
                Binding.objects.filter(mcp_instance_id=binding.mcp_instance_id, name_key=binding.name_key)
                .exclude(pk=binding.pk)
                .exists()
            ):
                raise _conflict(binding, field)
            if (
                binding.pk is None
                and Binding.objects.filter(mcp_instance_id=binding.mcp_instance_id, tool_id=binding.tool_id).exists()
            ):
                raise ValidationError(
                    {"tool": ValidationError("This tool is already bound to this instance.", code="unique")}
                )
            binding.save()
    except IntegrityError as exc:
        raise _conflict(binding, field) from exc
    return binding


def binding_create(
    *,
    mcp_instance: McpInstance,
    tool: Tool,
    enabled: bool = True,
    name_override: str = "",
    description_override: str = "",
) -> Binding:
    """Bind a tool to an instance. Refused (NAME_CONFLICT) when its effective name is taken there."""
    binding = Binding(
        mcp_instance=mcp_instance,
        tool=tool,
        enabled=enabled,
        name_override=name_override or "",
        description_override=description_override or "",
    )
    return _save_binding(binding, "name_override" if name_override else "tool")


def binding_update(*, binding: Binding, **fields: Any) -> Binding:
    """Change enabled/overrides (or the tool); an override into a collision is refused (NAME_CONFLICT)."""
    allowed = {"enabled", "name_override", "description_override", "tool", "mcp_instance"}
    for key, value in fields.items():
        if key not in allowed:
            raise TypeError(f"binding_update got an unexpected field {key!r}")
        setattr(binding, key, "" if value is None and key.endswith("_override") else value)
    return _save_binding(binding, "name_override" if binding.name_override else "tool")


def api_key_issue(*, mcp_instance: McpInstance, label: str = "") -> tuple[ApiKey, str]:
    """Create a key; return it with its plaintext, which is never stored and cannot be shown again."""
    plaintext = ApiKey.generate()
    key = ApiKey(
        mcp_instance=mcp_instance,
        label=label,
        prefix=plaintext[: len("thk_") + 6],
        key_hash=ApiKey.hash_key(plaintext),
    )
    key.full_clean()
    key.save()
    return key, plaintext


def api_key_revoke(*, api_key: ApiKey) -> ApiKey:
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at"])
    return api_key


#
# Deletes. A call-log batch (mcp_app.recording) updates tools' use counts and keys' last use, then at
# commit checks its rows' foreign keys, which reaches the instances: the deletes lock keys before
# instances, each kind in id order, so a batch and a delete wait for each other and never deadlock.
# Without the locks, a row written between the collector's SET NULL / CASCADE and its DELETE makes the
# delete fail on the foreign key; with them the batch waits, finds the row gone, and writes its rows as
# the foreign keys' on_delete says.
#


def instance_delete(*, instance: McpInstance) -> None:
    """Delete an instance with its keys, bindings and call log; see instance_delete_many."""
    instance_delete_many(instances=McpInstance.objects.filter(pk=instance.pk))


def instance_delete_many(*, instances: QuerySet[McpInstance]) -> None:
    """Delete the instances with their keys, bindings and call-log rows. Locks their keys, then them."""
    with transaction.atomic():
        lock_rows(ApiKey.objects.filter(mcp_instance__in=instances.values("pk")))
        lock_rows(McpInstance.objects.filter(pk__in=instances.values("pk")))
        instances.delete()


def api_key_delete(*, api_key: ApiKey) -> None:
    """Delete a key (the API revokes instead); see api_key_delete_many."""
    api_key_delete_many(api_keys=ApiKey.objects.filter(pk=api_key.pk))


def api_key_delete_many(*, api_keys: QuerySet[ApiKey]) -> None:
    """Delete the keys; their call-log rows stay, without the key (SET_NULL). Locks the keys first."""
    with transaction.atomic():
        lock_rows(ApiKey.objects.filter(pk__in=api_keys.values("pk")))
        api_keys.delete()


__all__ = [
    "ErrorCode",
    "api_key_delete",
    "api_key_delete_many",
    "api_key_issue",
    "api_key_revoke",
    "binding_create",
    "binding_update",
    "instance_create",
    "instance_delete",
    "instance_delete_many",
    "instance_update",
]
