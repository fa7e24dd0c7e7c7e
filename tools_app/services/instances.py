"""Every write to instances, bindings and API keys goes through here (full_clean, locks, constraints)."""

from collections.abc import Callable
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from tools_app.models import API_KEY_PREFIX, ApiKey, Binding, McpInstance, Tool, name_conflict_error
from tools_app.selectors import usage_of
from tools_app.services.guard import named, refuse_if_in_use
from tools_app.services.history import ADDITION, CHANGE, history_record
from tools_app.services.locks import key_share, lock_rows

INSTANCE_FIELDS = (
    "name",
    "slug",
    "description",
    "instructions",
    "enabled",
    "discovery",
    "allow_registration",
    "read_only",
    "max_result_bytes",
    "query_cpu_ms",
    "query_max_elements",
    "query_max_bytes",
    "key_rate_limit",
    "log_level",
    "record_call_details",
)


def instance_create(*, owner, **fields: Any) -> McpInstance:
    instance = McpInstance(owner=owner, **fields)
    instance.full_clean()
    instance.save()
    return instance


def instance_update(*, instance: McpInstance, force: bool = False, **fields: Any) -> McpInstance:
    """Change an instance. A new slug moves its endpoint (/mcp/<slug>/): for an instance in use that is IN_USE,
    nothing written, unless `force` (the change guard, services.guard)."""
    for key, value in fields.items():
        if key not in INSTANCE_FIELDS:
            raise TypeError(f"instance_update got an unexpected field {key!r}")
        setattr(instance, key, value)
    instance.full_clean()
    with transaction.atomic():
        if not force and instance.pk is not None:
            stored = McpInstance.objects.select_for_update(no_key=True).filter(pk=instance.pk)
            old_slug = stored.values_list("slug", flat=True).first()
            if old_slug is not None and old_slug != instance.slug:
                refuse_if_in_use(
                    usage_of(instances=[instance.pk]),
                    what=f"The instance {old_slug!r}",
                    change=f"would move from /mcp/{old_slug}/ to /mcp/{instance.slug}/",
                    force=False,
                )
        # force_update: a row deleted by a concurrent request is not INSERTed again (the API answers 404).
        instance.save(force_update=True)
    return instance


def _already_bound(binding: Binding) -> ValidationError:
    """(instance, tool) is unique: the answer the API's serializer gives too (same message, on `tool`)."""
    return ValidationError(
        {
            "tool": ValidationError(
                "The tool %(tool)r is already bound to the instance %(instance)r.",
                code="unique",
                params={"tool": binding.tool.name, "instance": binding.mcp_instance.name},
            )
        }
    )


def _refusal(binding: Binding, field: str) -> ValidationError | None:
    """Why `binding` cannot be saved as it is, judged by the committed bindings of its instance; or None.

    "Already bound" comes first: another binding of the same tool usually holds the same name too, and a
    name conflict would name the tool itself as the one in the way.
    """
    others = Binding.objects.filter(mcp_instance_id=binding.mcp_instance_id).exclude(pk=binding.pk)
    if others.filter(tool_id=binding.tool_id).exists():
        return _already_bound(binding)
    clashes = Binding.objects.name_clashes(
        instance_ids=[binding.mcp_instance_id], name=binding.effective_name, exclude_binding=binding.pk
    )
    if clashes:
        return name_conflict_error(field, binding.effective_name, clashes[:1])
    if binding.resource_uri:
        # Exact under the instance's lock (Binding.clean only pre-checked it).
        clash = Binding.objects.resource_uri_clash(
            instance_id=binding.mcp_instance_id, uri=binding.resource_uri, exclude_binding=binding.pk
        )
        if clash is not None:
            return ValidationError({"resource_uri": ValidationError(clash, code="unique")})
    return None


def _gone(field: str, what: str) -> ValidationError:
    return ValidationError({field: ValidationError(f"That {what} was deleted meanwhile.", code="invalid_choice")})


def _lock_for_binding(binding: Binding) -> str:
    """Take the locks that serialise binding changes; return the tool's current name, read under its lock.

    Lock order (PostgreSQL), the same for every bind: the instance row, then the tool row.
    - The instance: FOR NO KEY UPDATE. Binds of one instance queue on it, so the checks in _refusal are
      exact. It is not FOR UPDATE, which would also block the foreign-key checks (FOR KEY SHARE) of rows
      that refer to the instance: the call recorder's batch takes those at commit while holding tool rows
      it has just updated, so a bind holding the instance FOR UPDATE and waiting for such a tool deadlocked.
    - The tool: FOR KEY SHARE. SPEC §2.4 under concurrency: a rename cannot see (so cannot re-key) a
      binding not yet committed, and the name key must come from the tool's current name. A rename
      (tools_app.services.tool_update) and a delete lock the tool FOR UPDATE, which conflicts with KEY
      SHARE, so a bind and a rename of one tool queue. The recorder's use-count updates (NO KEY UPDATE) do
      not conflict with it: recorded calls never wait for a bind, and a bind never waits for them, even when
      one transaction binds several tools in any order (admin bulk actions and inline forms).
    SQLite needs neither lock: its IMMEDIATE transactions (see settings) already run one at a time.
    """
    instances = McpInstance.objects.filter(pk=binding.mcp_instance_id)
    if instances.select_for_update(no_key=True).values_list("pk", flat=True).first() is None:
        raise _gone("mcp_instance", "instance")
    names = key_share(Tool.objects.filter(pk=binding.tool_id).order_by().values_list("name"))
    if not names:
        raise _gone("tool", "tool")
    return names[0][0]


def _save_binding(binding: Binding, field: str, guard: Callable[[Binding], None] | None = None) -> Binding:
    """full_clean() then save under the instance's and the tool's row locks (see _lock_for_binding).

    Refused, with nothing written: the tool already bound to the instance ("unique" on `tool`), or its
    effective name taken there (NAME_CONFLICT on `field`); then what `guard` refuses (the change guard's IN_USE).
    The unique constraints are the guarantee; the locks make the friendly checks exact.
    """
    binding.full_clean(validate_constraints=False)
    try:
        with transaction.atomic():
            binding.tool.name = _lock_for_binding(binding)
            binding.name_key = binding.effective_name.lower()
            refusal = _refusal(binding, field)
            if refusal is not None:
                raise refusal
            if guard is not None:
                guard(binding)
            binding.save(force_update=not binding._state.adding)
    except IntegrityError as exc:
        refusal = _refusal(binding, field)
        if refusal is None:
            refusal = ValidationError({field: ValidationError("This binding conflicts with another.", code="conflict")})
        raise refusal from exc
    return binding


# What a binding's owner sets on it (besides the tool and the instance): the admin's forms pass these through.
BINDING_FIELDS = ("enabled", "name_override", "description_override", "resource_uri", "read_only", "pinned_arguments")


def binding_create(
    *,
    mcp_instance: McpInstance,
    tool: Tool,
    enabled: bool = True,
    name_override: str = "",
    description_override: str = "",
    resource_uri: str = "",
    read_only: bool = False,
    pinned_arguments: dict[str, Any] | None = None,
) -> Binding:
    """Bind a tool to an instance. Refused (NAME_CONFLICT) when its effective name is taken there, on
    `resource_uri` when that URI does not suit the tool's type or clashes with another of the instance's, and on
    `pinned_arguments` when a pin does not fit the tool's input schema (tools_app.grants.pin_problems)."""
    binding = Binding(
        mcp_instance=mcp_instance,
        tool=tool,
        enabled=enabled,
        name_override=name_override or "",
        description_override=description_override or "",
        resource_uri=resource_uri or "",
        read_only=read_only,
        pinned_arguments={} if pinned_arguments is None else pinned_arguments,
    )
    return _save_binding(binding, "name_override" if name_override else "tool")


def binding_create_many(*, mcp_instance: McpInstance, tools: list[Tool], enabled: bool = True) -> list[Binding]:
    """Bind several tools to an instance at once: all or nothing.

    Each bind is binding_create's (locks, the name rule); the first refusal (a tool already bound there, a
    name taken there or by another tool of the same request) rolls every bind of the request back and is
    raised on `tools`, naming the tool.
    """
    bindings = []
    with transaction.atomic():
        for tool in tools:
            try:
                bindings.append(binding_create(mcp_instance=mcp_instance, tool=tool, enabled=enabled))
            except ValidationError as exc:
                refusals = [e for es in exc.error_dict.values() for e in es] if hasattr(exc, "error_dict") else []
                errors = [
                    ValidationError(f"Tool {tool.name!r} (id {tool.pk}): {message}", code=refusal.code)
                    for refusal in refusals or exc.error_list
                    for message in refusal.messages
                ]
                raise ValidationError({"tools": errors}) from exc
    return bindings


def binding_update(*, binding: Binding, force: bool = False, **fields: Any) -> Binding:
    """Change enabled/overrides/resource URI (or the tool); an override into a collision is refused
    (NAME_CONFLICT), a resource URI that clashes on `resource_uri`. A binding in use whose effective name, tool or
    instance changes is IN_USE, nothing written, unless `force` (the change guard, services.guard)."""
    allowed = {*BINDING_FIELDS, "tool", "mcp_instance"}
    for key, value in fields.items():
        if key not in allowed:
            raise TypeError(f"binding_update got an unexpected field {key!r}")
        blank_if_none = key.endswith("_override") or key == "resource_uri"
        if key == "pinned_arguments" and value is None:
            value = {}
        setattr(binding, key, "" if value is None and blank_if_none else value)
    field = "name_override" if binding.name_override else "tool"
    if force or binding.pk is None:
        return _save_binding(binding, field)
    return _save_binding(binding, field, guard=_binding_guard)


def _binding_guard(binding: Binding) -> None:
    """IN_USE when a binding in use would change its effective name, its tool or its instance (the committed row
    against `binding`; called under the locks, after the binding's own checks)."""
    stored = Binding.objects.filter(pk=binding.pk).select_related("tool").first()
    if stored is None:
        return
    moved = (stored.tool_id, stored.mcp_instance_id) != (binding.tool_id, binding.mcp_instance_id)
    renamed = stored.effective_name.lower() != binding.effective_name.lower()
    if moved or renamed:
        change = f"would be renamed to {binding.effective_name!r}" if renamed else "would serve another tool"
        refuse_if_in_use(
            usage_of(bindings=[binding.pk]), what=f"The binding {stored.effective_name!r}", change=change, force=False
        )


def binding_delete(*, binding: Binding, force: bool = False) -> None:
    """Unbind one tool; see binding_delete_many."""
    binding_delete_many(bindings=Binding.objects.filter(pk=binding.pk), force=force)


def binding_delete_many(*, bindings: QuerySet[Binding], force: bool = False) -> int:
    """Delete the bindings (the tools stay); return how many were deleted.

    Locks the instances they belong to first (FOR NO KEY UPDATE, as a bind does), so an unbind and a bind
    of the same instance queue instead of judging names on a state the other is changing. A binding in use
    (selectors.usage_of) is IN_USE, nothing deleted, unless `force`.
    """
    with transaction.atomic():
        instances = McpInstance.objects.filter(pk__in=bindings.values("mcp_instance_id")).order_by("pk")
        list(instances.select_for_update(no_key=True).values_list("pk", flat=True))
        doomed = Binding.objects.filter(pk__in=bindings.values("pk"))
        if not force:
            ids = list(doomed.values_list("pk", flat=True))
            what = named("binding", ids, [binding.effective_name for binding in doomed.select_related("tool")[:3]])
            refuse_if_in_use(usage_of(bindings=ids), what=what, change="would be deleted", force=False)
        count, _ = doomed.delete()
    return count


def api_key_issue(
    *,
    mcp_instance: McpInstance,
    label: str = "",
    read_only: bool = False,
    attributes: dict[str, str] | None = None,
    actor: Any = None,
    via: str = "API",
) -> tuple[ApiKey, str]:
    """Create a key; return it with its plaintext, which is never stored and cannot be shown again. What it may
    use (tools_app.grants: `read_only`, the `attributes` pinned arguments can take) is fixed here.

    Recorded in the key's admin history as added by `actor` (default: the instance's owner), `via` naming
    the surface.
    """
    plaintext = ApiKey.generate()
    key = ApiKey(
        mcp_instance=mcp_instance,
        label=label,
        prefix=plaintext[: len(API_KEY_PREFIX) + 6],
        key_hash=ApiKey.hash_key(plaintext),
        read_only=read_only,
        attributes={} if attributes is None else attributes,
    )
    key.full_clean()
    with transaction.atomic():
        key.save()
        history_record(
            actor=actor or mcp_instance.owner,
            obj=key,
            action=ADDITION,
            message=f"Created {'read-only ' if read_only else ''}API key {key} for MCP instance "
            f"{mcp_instance.slug!r} ({via}).",
        )
    return key, plaintext


def api_key_revoke(*, api_key: ApiKey, actor: Any = None, via: str = "API") -> ApiKey:
    """Revoke a key (idempotent): it stops working on every worker's next request. A revocation is recorded
    in the key's admin history as a change by `actor` (default: the instance's owner)."""
    if api_key.revoked_at is None:
        with transaction.atomic():
            api_key.revoked_at = timezone.now()
            api_key.save(update_fields=["revoked_at"])
            history_record(
                actor=actor or api_key.mcp_instance.owner,
                obj=api_key,
                action=CHANGE,
                message=f"Revoked API key {api_key} ({via}).",
            )
    return api_key


#
# Deletes. Recording a call (tools_app.execution.pipeline) updates the tool's use count and the key's last use and
# inserts a call-log row whose foreign keys reach the instance, the key and the tool: the deletes lock
# keys before instances, each kind in id order, so a recording and a delete wait for each other and never
# deadlock. Without the locks, a row written between the collector's SET NULL / CASCADE and its DELETE
# makes the delete fail on the foreign key; with them the recording waits, finds the row gone, and writes
# its row as the foreign keys' on_delete says.
#


def instance_delete(*, instance: McpInstance, force: bool = False) -> None:
    """Delete an instance with its keys, bindings and call log; see instance_delete_many."""
    instance_delete_many(instances=McpInstance.objects.filter(pk=instance.pk), force=force)


def instance_delete_many(*, instances: QuerySet[McpInstance], force: bool = False) -> None:
    """Delete the instances with their keys, bindings and call-log rows. Locks their keys, then them. An
    instance in use (selectors.usage_of) is IN_USE, nothing deleted, unless `force`."""
    with transaction.atomic():
        lock_rows(ApiKey.objects.filter(mcp_instance__in=instances.values("pk")))
        ids = lock_rows(McpInstance.objects.filter(pk__in=instances.values("pk")))
        if not force:
            what = named("instance", ids, McpInstance.objects.filter(pk__in=ids).values_list("slug", flat=True))
            refuse_if_in_use(usage_of(instances=ids), what=what, change="would be deleted", force=False)
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
    "api_key_delete",
    "api_key_delete_many",
    "api_key_issue",
    "api_key_revoke",
    "binding_create",
    "binding_create_many",
    "binding_delete",
    "binding_delete_many",
    "binding_update",
    "instance_create",
    "instance_delete",
    "instance_delete_many",
    "instance_update",
]
