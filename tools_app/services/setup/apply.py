"""Plan and apply a setup document: the changes, and the steps that make them through the services."""

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction

from tools_app.models import Binding, McpInstance, Prompt, Table, Tool
from tools_app.selectors import UsedBy, usage_of
from tools_app.services import table_log
from tools_app.services.guard import in_use_error
from tools_app.services.instances import (
    binding_create,
    binding_delete_many,
    binding_update,
    instance_create,
    instance_delete_many,
    instance_update,
)
from tools_app.services.locks import lock_rows_no_key
from tools_app.services.prompts import prompt_create, prompt_delete, prompt_update
from tools_app.services.setup.document import (
    binding_values,
    instance_values,
    prompt_values,
    read_document,
    rekeyed,
    table_values,
    tool_values,
)
from tools_app.services.tables import (
    table_create,
    table_delete_many,
    table_update,
    tool_create,
    tool_delete_many,
    tool_update,
)
from tools_app.tool_schemas import input_schema_breaks

__all__ = ["Change", "setup_apply", "setup_plan"]


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Change:
    """One change a plan makes: `action` create/update/delete of a `kind` named `name` (a binding "<slug>/<tool>",
    a prompt "<slug>/<prompt>"), the `fields` an update changes, and for a delete or a breaking update of
    something in use, `used_by` (selectors.UsedBy)."""

    action: str
    kind: str
    name: str
    fields: tuple[str, ...] = ()
    used_by: tuple[UsedBy, ...] = ()

    def __str__(self) -> str:
        text = f"{self.action} {self.kind} {self.name}"
        if self.fields:
            text += f" ({', '.join(self.fields)})"
        if self.used_by:
            text += " [in use: " + "; ".join(str(used) for used in self.used_by[:3]) + "]"
        return text

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"action": self.action, "kind": self.kind, "name": self.name}
        if self.fields:
            data["fields"] = list(self.fields)
        if self.used_by:
            data["used_by"] = [used.as_dict() for used in self.used_by]
        return data


def _changed(current: dict[str, Any], wanted: dict[str, Any]) -> tuple[str, ...]:
    return tuple(name for name, value in wanted.items() if _json(current.get(name)) != _json(value))


#
# Plan
#


@dataclass
class _Plan:
    changes: list[Change] = field(default_factory=list)
    # What apply runs, in order: each step a function of the objects written so far.
    steps: list[Callable[["_Written"], None]] = field(default_factory=list)


@dataclass
class _Written:
    """What apply wrote so far, by identity (the later steps refer to it), and whether it was confirmed."""

    force: bool = False
    tables: dict[str, Table] = field(default_factory=dict)
    tools: dict[str, Tool] = field(default_factory=dict)
    instances: dict[str, McpInstance] = field(default_factory=dict)


def _step(prefix: str, function: Callable[..., Any], **kwargs: Any) -> Any:
    try:
        return function(**kwargs)
    except ValidationError as exc:
        raise rekeyed(prefix, exc) from exc


def _owned_by_name(model: Any, owner, names: Iterable[str], field_name: str, desired: dict) -> dict[str, Any]:
    """The owner's rows of `model` named in the document, by name; two of them with one name is an error on the
    document's entry (it cannot say which one it means)."""
    found: dict[str, Any] = {}
    rows = model.objects.filter(owner=owner, **{f"{field_name}__in": list(names)}).order_by("pk")
    if model is Tool:
        rows = rows.select_related("table")  # a tool's table is compared by name
    for row in rows:
        key = getattr(row, field_name)
        if key in found:
            path = desired[key][0]
            raise ValidationError(
                {
                    f"{path}.{field_name}": ValidationError(
                        "Two of your %(kind)s are named %(name)r: rename one, so the document names one of them.",
                        code="duplicate",
                        params={"kind": model._meta.verbose_name_plural, "name": key},
                    )
                }
            )
        found[key] = row
    return found


def _check(prefix: str, obj: Any, exclude: list[str]) -> None:
    """The row's own validation (Model.full_clean, without what only the write can judge), named by path. A probe
    with a pk stands for that stored row (its unique checks leave the row itself out)."""
    if obj.pk is not None:
        obj._state.adding = False
    try:
        obj.full_clean(exclude=exclude, validate_constraints=False)
    except ValidationError as exc:
        raise rekeyed(prefix, exc) from exc


def _plan(owner, document: Any) -> _Plan:
    desired = read_document(document)
    plan = _Plan()
    tables = _owned_by_name(Table, owner, desired.tables, "name", desired.tables)
    tools = _owned_by_name(Tool, owner, desired.tools, "name", desired.tools)
    instances = {i.slug: i for i in McpInstance.objects.filter(owner=owner, slug__in=list(desired.instances))}

    # Deletes first, they free the names the rest may take; but a table goes only after the tools the document
    # keeps have moved off it (a table's delete takes its tools with it).
    for slug, instance in sorted(instances.items()):
        entry = desired.instances[slug][1]
        wanted_tools = {b["tool"] for b in entry.get("bindings", [])}
        for binding in instance.bindings.select_related("tool").order_by("name_key"):
            if binding.tool.name not in wanted_tools or binding.tool.name not in tools:
                doomed = Binding.objects.filter(pk=binding.pk)
                used_by = usage_of(bindings=[binding.pk])
                _delete(
                    plan,
                    "binding",
                    f"{slug}/{binding.tool.name}",
                    used_by,
                    _run(binding_delete_many, bindings=doomed, force=True),
                )
        wanted_prompts = {p["name"].lower() for p in entry.get("prompts", [])}
        for prompt in instance.prompts.order_by("name"):
            if prompt.name.lower() not in wanted_prompts:
                _delete(plan, "prompt", f"{slug}/{prompt.name}", [], _run(prompt_delete, prompt=prompt))
    whole_owner = desired.scope_slug is None  # a whole owner's setup: what the document does not name goes
    if whole_owner:
        gone_instances = McpInstance.objects.filter(owner=owner).exclude(slug__in=list(desired.instances))
        for instance in gone_instances.order_by("slug"):
            doomed_instances = McpInstance.objects.filter(pk=instance.pk)
            used_by = usage_of(instances=[instance.pk])
            _delete(
                plan,
                "instance",
                instance.slug,
                used_by,
                _run(instance_delete_many, instances=doomed_instances, force=True),
            )
        gone_tools = Tool.objects.filter(owner=owner).exclude(name__in=list(desired.tools))
        for tool in gone_tools.order_by("name", "pk"):
            doomed_tools = Tool.objects.filter(pk=tool.pk)
            _delete(
                plan,
                "tool",
                tool.name,
                usage_of(tools=[tool.pk]),
                _run(tool_delete_many, tools=doomed_tools, force=True),
            )

    for name, (path, entry) in desired.tables.items():
        _plan_table(plan, owner, path, table_values(entry), tables.get(name))
    for name, (path, entry) in desired.tools.items():
        _plan_tool(plan, owner, path, tool_values(entry), tools.get(name), tables)
    if whole_owner:
        gone_tables = Table.objects.filter(owner=owner).exclude(name__in=list(desired.tables))
        for table in gone_tables.order_by("name", "pk"):
            # Its tools the document keeps move to another table first; the others were deleted above (with
            # their own used_by).
            doomed_tables = Table.objects.filter(pk=table.pk)
            _delete(plan, "table", table.name, [], _run(table_delete_many, tables=doomed_tables, force=True))
    for slug, (path, entry) in desired.instances.items():
        _plan_instance(plan, owner, path, entry, instances.get(slug), tools)
    return plan


def _run(function: Callable[..., Any], **kwargs: Any) -> Callable[["_Written"], None]:
    """A step that calls `function(**kwargs)` (a delete: it needs nothing written before it)."""

    def step(written: _Written) -> None:
        function(**kwargs)

    return step


def _delete(plan: _Plan, kind: str, name: str, used_by: list[UsedBy], run: Callable[[_Written], None]) -> None:
    plan.changes.append(Change("delete", kind, name, used_by=tuple(used_by)))
    plan.steps.append(run)


def _plan_table(plan: _Plan, owner, path: str, values: dict[str, Any], table: Table | None) -> None:
    name = values["name"]
    if table is None:
        probe = Table(owner=owner, name=name, description=values["description"], redact_fields=values["redact_fields"])
        _check(path, probe, exclude=["owner"])
        plan.changes.append(Change("create", "table", name))

        def create(written: _Written) -> None:
            written.tables[name] = _step(path, table_create, owner=owner, **values)

        plan.steps.append(create)
        return
    current = {"name": table.name, "description": table.description, "redact_fields": table.redact_fields}
    if "data" in values:
        current["data"] = table_log.table_data(table.pk)[1]
    changed = _changed(current, values)
    if changed:
        probe = Table(
            pk=table.pk,
            owner=owner,
            name=name,
            description=values["description"],
            redact_fields=values["redact_fields"],
        )
        if "data" in changed:
            probe.data = values["data"]
        _check(path, probe, exclude=["owner"])
        plan.changes.append(Change("update", "table", name, changed))
    update_values = {key: values[key] for key in changed}

    def update(written: _Written) -> None:
        if update_values:
            _step(path, table_update, table=table, **update_values)
        written.tables[name] = table

    plan.steps.append(update)


def _plan_tool(
    plan: _Plan, owner, path: str, values: dict[str, Any], tool: Tool | None, tables: dict[str, Table]
) -> None:
    name = values["name"]
    table_name = values["table"]
    existing_table = tables.get(table_name) if table_name is not None else None
    probe = Tool(owner=owner, **{**values, "table": None})
    # A table the plan creates has no id yet: any id passes the row's rules (its owner is the document's owner).
    probe.table_id = existing_table.pk if existing_table is not None else (0 if table_name is not None else None)
    if tool is None:
        _check(path, probe, exclude=["owner", "table"])
        plan.changes.append(Change("create", "tool", name))
    else:
        current = {key: getattr(tool, key) for key in values if key != "table"}
        current["table"] = tool.table.name if tool.table is not None else None
        changed = _changed(current, values)
        if table_name is not None and existing_table is not None and tool.table_id != existing_table.pk:
            changed = tuple(sorted({*changed, "table"}))
        if changed:
            probe.pk = tool.pk
            _check(path, probe, exclude=["owner", "table"])
            breaks = input_schema_breaks(tool.input_schema, values["input_schema"]) if "input_schema" in changed else []
            used_by = tuple(usage_of(tools=[tool.pk])) if breaks else ()
            plan.changes.append(Change("update", "tool", name, changed, used_by))

    def write(written: _Written) -> None:
        fields = {**values, "table": written.tables.get(table_name) if table_name is not None else None}
        if tool is None:
            written.tools[name] = _step(path, tool_create, owner=owner, **fields)
            return
        current_fields = {key: getattr(tool, key) for key in fields}
        if any(_json_or_pk(current_fields[key]) != _json_or_pk(fields[key]) for key in fields):
            _step(path, tool_update, tool=tool, force=_forced(written), **fields)
        written.tools[name] = tool

    plan.steps.append(write)


def _json_or_pk(value: Any) -> str:
    if isinstance(value, Table):
        return f"table:{value.pk}"
    return _json(value)


def _plan_instance(
    plan: _Plan, owner, path: str, entry: dict[str, Any], instance: McpInstance | None, tools: dict[str, Tool]
) -> None:
    slug = entry["slug"]
    values = instance_values(entry)
    probe = McpInstance(owner=owner, **values)
    if instance is None:
        _check(path, probe, exclude=["owner"])
        plan.changes.append(Change("create", "instance", slug))
    else:
        changed = _changed({key: getattr(instance, key) for key in values}, values)
        if changed:
            probe.pk = instance.pk
            _check(path, probe, exclude=["owner"])
            plan.changes.append(Change("update", "instance", slug, changed))

    def write(written: _Written) -> None:
        if instance is None:
            written.instances[slug] = _step(path, instance_create, owner=owner, **values)
            return
        if _changed({key: getattr(instance, key) for key in values}, values):
            _step(path, instance_update, instance=instance, force=_forced(written), **values)
        written.instances[slug] = instance

    plan.steps.append(write)
    bound = {b.tool.name: b for b in instance.bindings.select_related("tool")} if instance is not None else {}
    for index, binding_entry in enumerate(entry.get("bindings", [])):
        _plan_binding(plan, f"{path}.bindings.{index}", slug, binding_entry, bound, tools)
    prompts = {p.name.lower(): p for p in instance.prompts.all()} if instance is not None else {}
    for index, prompt_entry in enumerate(entry.get("prompts", [])):
        _plan_prompt(plan, f"{path}.prompts.{index}", slug, prompt_values(prompt_entry), prompts)


def _plan_binding(
    plan: _Plan, path: str, slug: str, entry: dict[str, Any], bound: dict[str, Binding], tools: dict[str, Tool]
) -> None:
    tool_name = entry["tool"]
    values = binding_values(entry)
    binding = bound.get(tool_name) if tool_name in tools and bound.get(tool_name) is not None else None
    if binding is not None and binding.tool_id != tools[tool_name].pk:
        binding = None
    name = f"{slug}/{tool_name}"
    probe = Binding(**values)
    if binding is None:
        _check(path, probe, exclude=["mcp_instance", "tool", "name_key"])
        plan.changes.append(Change("create", "binding", name))
    else:
        changed = _changed({key: getattr(binding, key) for key in values}, values)
        if changed:
            probe.pk = binding.pk
            _check(path, probe, exclude=["mcp_instance", "tool", "name_key"])
            renamed = "name_override" in changed and (
                (values["name_override"] or tool_name).lower() != binding.effective_name.lower()
            )
            used_by = tuple(usage_of(bindings=[binding.pk])) if renamed else ()
            plan.changes.append(Change("update", "binding", name, changed, used_by))

    def write(written: _Written) -> None:
        if binding is None:
            _step(path, binding_create, mcp_instance=written.instances[slug], tool=written.tools[tool_name], **values)
        elif _changed({key: getattr(binding, key) for key in values}, values):
            _step(path, binding_update, binding=binding, force=_forced(written), **values)

    plan.steps.append(write)


def _plan_prompt(plan: _Plan, path: str, slug: str, values: dict[str, Any], prompts: dict[str, Prompt]) -> None:
    prompt = prompts.get(values["name"].lower())
    name = f"{slug}/{values['name']}"
    probe = Prompt(**values)
    if prompt is None:
        _check(path, probe, exclude=["mcp_instance"])
        plan.changes.append(Change("create", "prompt", name))
    else:
        changed = _changed({key: getattr(prompt, key) for key in values}, values)
        if changed:
            probe.pk = prompt.pk
            _check(path, probe, exclude=["mcp_instance"])
            plan.changes.append(Change("update", "prompt", name, changed))

    def write(written: _Written) -> None:
        if prompt is None:
            _step(path, prompt_create, mcp_instance=written.instances[slug], **values)
        elif _changed({key: getattr(prompt, key) for key in values}, values):
            _step(path, prompt_update, prompt=prompt, **values)

    plan.steps.append(write)


def _forced(written: _Written) -> bool:
    """apply's `force`, for the steps that update (a delete step always forces: apply refuses an unconfirmed delete
    of something in use before any step runs, from the plan's used_by; an update's own guard judges the rest)."""
    return written.force


def setup_plan(*, owner, document: Any) -> list[Change]:
    """What applying `document` for `owner` would change (nothing is written). A ValidationError naming the
    field when the document is bad."""
    return _plan(owner, document).changes


def setup_apply(*, owner, document: Any, force: bool = False) -> list[Change]:
    """Make `owner`'s setup what `document` says, all or nothing, in one transaction (the owner's applies run one
    at a time); return the changes made (setup_plan's). A ValidationError naming the field for a bad document or
    a refused write (a name taken, a slug another owner has); IN_USE, without `force`, when a delete or a breaking
    change (a rename, an input schema that refuses calls) hits something in use. Nothing is written then."""
    with transaction.atomic():
        lock_rows_no_key(get_user_model().objects.filter(pk=owner.pk))
        plan = _plan(owner, document)
        in_use = [used for change in plan.changes for used in change.used_by]
        if in_use and not force:
            hit = [f"{change.action} the {change.kind} {change.name!r}" for change in plan.changes if change.used_by]
            raise in_use_error("What this document changes", "applying it would " + ", ".join(hit[:5]), in_use)
        written = _Written(force=force)
        for step in plan.steps:
            step(written)
    return plan.changes
