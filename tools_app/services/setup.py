"""Declarative setup: an owner's tables, tools, instances, bindings and prompts as one document, and its apply.

`setup_export` writes the document; `setup_plan` says what applying one would change; `setup_apply` makes the
owner's setup what the document says, all or nothing, through the services (full_clean, locks, the change
guard), and answers the same changes as the plan. Applying a document twice changes nothing the second time.

The document (docs/setup.md), a JSON object (YAML is the same object):

    {"toolhub_setup": 1, "scope": "owner" | {"instance": "<slug>"},
     "tables": [{"name", "description", "data"?}],
     "tools": [{"name", "type", "table": "<table name>" | null, "json_path", "description", "alias",
                "input_schema", "output_schema"?, "metadata"}],
     "instances": [{"slug", "name", ..., "bindings": [{"tool": "<tool name>", "enabled", "name_override",
                    "description_override", "resource_uri"}], "prompts": [{"name", ...}]}]}

Identities are names, never database ids: a table and a tool by their name (unique within the document and among
the owner's tables and tools it names), an instance by its slug, a binding by its instance and tool, a prompt by
its instance and name (ignoring case). API keys are never part of it. A table without `data` keeps its data; with
it, the data is written (a data write, with its history entry) when it differs.

Scope: "owner" (a whole owner's setup) deletes what the document does not name: tables, tools, instances, and the
bindings and prompts of the instances it names. {"instance": slug} (one instance with what it uses) deletes only
that instance's bindings and prompts the document does not name; its tables and tools are created or updated,
never deleted.

A bad document is a ValidationError naming the field by its path (`tools.2.type`,
`instances.0.bindings.1.tool`); nothing is written. Deletes and breaking changes of what is in use are IN_USE
(services.guard) unless `force`.
"""

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import jsonschema
import yaml
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction

from tools_app.models import Binding, McpInstance, Prompt, Table, Tool
from tools_app.selectors import UsedBy, usage_of
from tools_app.services import table_log
from tools_app.services.guard import in_use_error
from tools_app.services.instances import (
    INSTANCE_FIELDS,
    binding_create,
    binding_delete_many,
    binding_update,
    instance_create,
    instance_delete_many,
    instance_update,
)
from tools_app.services.locks import lock_rows_no_key
from tools_app.services.prompts import PROMPT_FIELDS, prompt_create, prompt_delete, prompt_update
from tools_app.services.tables import (
    table_create,
    table_delete_many,
    table_update,
    tool_create,
    tool_delete_many,
    tool_update,
)
from tools_app.tool_schemas import default_input_schema, input_schema_breaks, is_other_types_default

__all__ = [
    "SETUP_SCHEMA",
    "SETUP_VERSION",
    "Change",
    "setup_apply",
    "setup_document_dump",
    "setup_document_load",
    "setup_export",
    "setup_plan",
    "setup_validate",
]

SETUP_VERSION = 1

# The fields of each kind, in the document's order (identities first).
TABLE_KEYS = ("name", "description")
TOOL_KEYS = ("name", "type", "table", "json_path", "description", "alias", "input_schema", "output_schema", "metadata")
INSTANCE_KEYS = ("slug", *(name for name in INSTANCE_FIELDS if name != "slug"))
BINDING_KEYS = ("tool", "enabled", "name_override", "description_override", "resource_uri")
PROMPT_KEYS = PROMPT_FIELDS
# Instance fields that may be absent (null in the model: the server's default).
OPTIONAL_INSTANCE_KEYS = ("query_cpu_ms", "query_max_elements", "query_max_bytes")

_STRING = {"type": "string"}
_BOOLEAN = {"type": "boolean"}
_OBJECT = {"type": "object"}


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


# The document's structure (JSON Schema, Draft 2020-12): what each field is. What each value may be (a tool
# name's characters, a slug, a type's rules) is the models' validation, run on every object before any write.
SETUP_SCHEMA: dict[str, Any] = _object(
    {
        "toolhub_setup": {"type": "integer", "enum": [SETUP_VERSION]},
        "scope": {
            "oneOf": [
                {"type": "string", "enum": ["owner"]},
                _object({"instance": _STRING}, ["instance"]),
            ]
        },
        "tables": {
            "type": "array",
            "items": _object({"name": _STRING, "description": _STRING, "data": {"not": {"type": "null"}}}, ["name"]),
        },
        "tools": {
            "type": "array",
            "items": _object(
                {
                    "name": _STRING,
                    "type": _STRING,
                    "table": {"type": ["string", "null"]},
                    "json_path": _STRING,
                    "description": _STRING,
                    "alias": _STRING,
                    "input_schema": _OBJECT,
                    "output_schema": {"type": ["object", "null"]},
                    "metadata": _OBJECT,
                },
                ["name", "type"],
            ),
        },
        "instances": {
            "type": "array",
            "items": _object(
                {
                    "slug": _STRING,
                    "name": _STRING,
                    "description": _STRING,
                    "instructions": _STRING,
                    "enabled": _BOOLEAN,
                    "discovery": _STRING,
                    "allow_registration": _BOOLEAN,
                    "max_result_bytes": {"type": "integer"},
                    "query_cpu_ms": {"type": ["integer", "null"]},
                    "query_max_elements": {"type": ["integer", "null"]},
                    "query_max_bytes": {"type": ["integer", "null"]},
                    "key_rate_limit": _STRING,
                    "log_level": _STRING,
                    "bindings": {
                        "type": "array",
                        "items": _object(
                            {
                                "tool": _STRING,
                                "enabled": _BOOLEAN,
                                "name_override": _STRING,
                                "description_override": _STRING,
                                "resource_uri": _STRING,
                            },
                            ["tool"],
                        ),
                    },
                    "prompts": {
                        "type": "array",
                        "items": _object(
                            {
                                "name": _STRING,
                                "title": _STRING,
                                "description": _STRING,
                                "arguments": {"type": "array"},
                                "template": _STRING,
                                "enabled": _BOOLEAN,
                            },
                            ["name", "template"],
                        ),
                    },
                },
                ["slug", "name"],
            ),
        },
    },
    ["toolhub_setup"],
)


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


#
# Export
#


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _unique_names(kind: str, field_name: str, rows: Iterable[tuple[int, str]]) -> None:
    """A document names each table (tool) once: two of the owner's with one name cannot be exported."""
    seen: dict[str, int] = {}
    for pk, name in rows:
        if name in seen:
            raise ValidationError(
                {
                    kind: ValidationError(
                        "Your %(kind)s %(first)d and %(second)d are both named %(name)r: a setup document names each "
                        "one once (by its %(field)s), so rename one first.",
                        code="duplicate",
                        params={"kind": kind, "first": seen[name], "second": pk, "name": name, "field": field_name},
                    )
                }
            )
        seen[name] = pk


def _table_entry(table: Table, with_data: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": table.name, "description": table.description}
    if with_data:
        entry["data"] = table_log.table_data(table.pk)[1]
    return entry


def _tool_entry(tool: Tool, table_names: dict[int, str]) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": tool.name,
        "type": tool.type,
        "table": table_names.get(tool.table_id) if tool.table_id is not None else None,
        "json_path": tool.json_path,
        "description": tool.description,
        "alias": tool.alias,
        "input_schema": tool.input_schema,
        "metadata": tool.metadata,
    }
    if tool.output_schema is not None:
        entry["output_schema"] = tool.output_schema
    return entry


def _instance_entry(instance: McpInstance, tool_names: dict[int, str]) -> dict[str, Any]:
    entry: dict[str, Any] = {key: getattr(instance, key) for key in INSTANCE_KEYS}
    for key in OPTIONAL_INSTANCE_KEYS:
        if entry[key] is None:
            del entry[key]
    bindings = instance.bindings.select_related("tool").order_by("name_key", "pk")
    entry["bindings"] = [
        {
            "tool": tool_names.get(binding.tool_id, binding.tool.name),
            **{k: getattr(binding, k) for k in BINDING_KEYS[1:]},
        }
        for binding in bindings
    ]
    prompts = instance.prompts.order_by("name", "pk")
    entry["prompts"] = [{key: getattr(prompt, key) for key in PROMPT_KEYS} for prompt in prompts]
    return entry


def setup_export(*, owner, instance_slug: str | None = None, with_data: bool = False) -> dict[str, Any]:
    """The owner's setup as a document (the module's format): every table, tool and instance of the owner, or one
    instance (`instance_slug`, McpInstance.DoesNotExist if it is not the owner's) with the tools it binds and their
    tables. Table data only `with_data`; API keys never. A ValidationError when two exported tables (tools) share
    a name."""
    instances = McpInstance.objects.filter(owner=owner).order_by("slug")
    if instance_slug is not None:
        instances = instances.filter(pk=McpInstance.objects.get(owner=owner, slug=instance_slug).pk)
        tools = Tool.objects.filter(owner=owner, bindings__mcp_instance__in=instances).distinct()
        tables = Table.objects.filter(owner=owner, tools__in=tools).distinct()
        scope: Any = {"instance": instance_slug}
    else:
        tools = Tool.objects.filter(owner=owner)
        tables = Table.objects.filter(owner=owner)
        scope = "owner"
    tables = tables.order_by("name", "pk")
    tools = tools.order_by("name", "pk")
    _unique_names("tables", "name", tables.values_list("pk", "name"))
    _unique_names("tools", "name", tools.values_list("pk", "name"))
    table_names = dict(Table.objects.filter(owner=owner).values_list("pk", "name"))
    tool_names = dict(tools.values_list("pk", "name"))
    return {
        "toolhub_setup": SETUP_VERSION,
        "scope": scope,
        "tables": [_table_entry(table, with_data) for table in tables],
        "tools": [_tool_entry(tool, table_names) for tool in tools],
        "instances": [_instance_entry(instance, tool_names) for instance in instances],
    }


def setup_document_dump(document: dict[str, Any], fmt: str = "json") -> str:
    """The document as JSON (indented) or YAML text."""
    if fmt == "yaml":
        return yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def setup_document_load(text: str) -> Any:
    """A document from JSON or YAML text; a ValidationError on `document` when it is neither."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValidationError(
            {
                "document": ValidationError(
                    "Neither JSON nor YAML: %(error)s", code="invalid", params={"error": str(exc)[:300]}
                )
            }
        ) from exc


#
# Reading a document
#


def _path(parts: Iterable[Any]) -> str:
    return ".".join(str(part) for part in parts) or "document"


def _rekeyed(prefix: str, exc: ValidationError) -> ValidationError:
    """`exc` with its fields under `prefix` (`tools.2` + `name` -> `tools.2.name`)."""
    if hasattr(exc, "error_dict"):
        return ValidationError(
            {f"{prefix}.{name}" if name != "__all__" else prefix: errors for name, errors in exc.error_dict.items()}
        )
    return ValidationError({prefix: exc.error_list})


def setup_validate(document: Any) -> None:
    """The document's structure (SETUP_SCHEMA): a ValidationError naming every field at fault by its path."""
    validator = jsonschema.Draft202012Validator(SETUP_SCHEMA)
    errors: dict[str, list[ValidationError]] = {}
    for error in sorted(validator.iter_errors(document), key=lambda e: [str(p) for p in e.absolute_path]):
        where = list(error.absolute_path)
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            allowed = error.schema.get("properties", {})
            for key in sorted(k for k in error.instance if k not in allowed):
                errors.setdefault(_path([*where, key]), []).append(
                    ValidationError(
                        "Unknown field. The fields here are: %(names)s.",
                        code="unknown",
                        params={"names": ", ".join(allowed)},
                    )
                )
        elif error.validator == "required" and isinstance(error.instance, dict):
            for key in error.validator_value:
                if key not in error.instance:
                    errors.setdefault(_path([*where, key]), []).append(
                        ValidationError("This field is required.", code="required")
                    )
        elif error.validator == "oneOf" and where == ["scope"]:
            errors.setdefault("scope", []).append(ValidationError('"owner" or {"instance": "<slug>"}.', code="invalid"))
        else:
            message = error.message if len(error.message) <= 200 else error.message[:199] + "…"
            errors.setdefault(_path(where), []).append(ValidationError(message, code="invalid"))
    if errors:
        raise ValidationError(errors)


@dataclass
class _Desired:
    """The document, read: each kind by its identity, with its path in the document for errors."""

    scope_slug: str | None
    tables: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    tools: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    instances: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)


def _duplicate(path: str, what: str, name: str) -> ValidationError:
    return ValidationError(
        {
            path: ValidationError(
                "%(what)s %(name)r is named twice in the document.",
                code="duplicate",
                params={"what": what, "name": name},
            )
        }
    )


def _read(document: Any) -> _Desired:
    """The document checked (structure, names unique, references resolved inside it) and indexed."""
    setup_validate(document)
    scope = document.get("scope", "owner")
    desired = _Desired(scope_slug=scope["instance"] if isinstance(scope, dict) else None)
    for index, table in enumerate(document.get("tables", [])):
        if table["name"] in desired.tables:
            raise _duplicate(f"tables.{index}.name", "The table", table["name"])
        desired.tables[table["name"]] = (f"tables.{index}", table)
    for index, tool in enumerate(document.get("tools", [])):
        path = f"tools.{index}"
        if tool["name"] in desired.tools:
            raise _duplicate(f"{path}.name", "The tool", tool["name"])
        if tool.get("table") is not None and tool["table"] not in desired.tables:
            raise ValidationError(
                {
                    f"{path}.table": ValidationError(
                        "No table %(name)r in the document's tables.",
                        code="invalid_choice",
                        params={"name": tool["table"]},
                    )
                }
            )
        desired.tools[tool["name"]] = (path, tool)
    for index, instance in enumerate(document.get("instances", [])):
        path = f"instances.{index}"
        if instance["slug"] in desired.instances:
            raise _duplicate(f"{path}.slug", "The instance", instance["slug"])
        if desired.scope_slug is not None and instance["slug"] != desired.scope_slug:
            raise ValidationError(
                {
                    f"{path}.slug": ValidationError(
                        "A document scoped to the instance %(scope)r holds only that instance.",
                        code="invalid",
                        params={"scope": desired.scope_slug},
                    )
                }
            )
        names: set[str] = set()
        for b_index, binding in enumerate(instance.get("bindings", [])):
            if binding["tool"] not in desired.tools:
                raise ValidationError(
                    {
                        f"{path}.bindings.{b_index}.tool": ValidationError(
                            "No tool %(name)r in the document's tools.",
                            code="invalid_choice",
                            params={"name": binding["tool"]},
                        )
                    }
                )
            if binding["tool"] in names:
                raise _duplicate(f"{path}.bindings.{b_index}.tool", "The bound tool", binding["tool"])
            names.add(binding["tool"])
        prompt_names: set[str] = set()
        for p_index, prompt in enumerate(instance.get("prompts", [])):
            if prompt["name"].lower() in prompt_names:
                raise _duplicate(f"{path}.prompts.{p_index}.name", "The prompt", prompt["name"])
            prompt_names.add(prompt["name"].lower())
        desired.instances[instance["slug"]] = (path, instance)
    if desired.scope_slug is not None and desired.scope_slug not in desired.instances:
        raise ValidationError(
            {
                "instances": ValidationError(
                    "A document scoped to the instance %(scope)r must hold it.",
                    code="required",
                    params={"scope": desired.scope_slug},
                )
            }
        )
    return desired


#
# The desired values, as the models store them
#


def _table_values(entry: dict[str, Any]) -> dict[str, Any]:
    values = {"name": entry["name"], "description": entry.get("description", "")}
    if "data" in entry:
        values["data"] = entry["data"]
    return values


def _tool_values(entry: dict[str, Any]) -> dict[str, Any]:
    """The tool's fields as Tool._fill_defaults stores them (the type's default schema for `{}`, no `{}` output)."""
    input_schema = entry.get("input_schema") or {}
    if input_schema == {} or is_other_types_default(input_schema, entry["type"]):
        input_schema = default_input_schema(entry["type"])
    output_schema = entry.get("output_schema")
    return {
        "name": entry["name"],
        "type": entry["type"],
        "table": entry.get("table"),  # a table name: resolved when written
        "json_path": entry.get("json_path", ""),
        "description": entry.get("description", ""),
        "alias": entry.get("alias", ""),
        "input_schema": input_schema,
        "output_schema": output_schema if output_schema != {} else None,
        "metadata": entry.get("metadata") or {},
    }


def _instance_values(entry: dict[str, Any]) -> dict[str, Any]:
    defaults = {name: McpInstance._meta.get_field(name).get_default() for name in INSTANCE_FIELDS}  # type: ignore[union-attr]
    return {name: entry.get(name, defaults[name]) for name in INSTANCE_FIELDS}


def _binding_values(entry: dict[str, Any]) -> dict[str, Any]:
    return {
        "enabled": entry.get("enabled", True),
        "name_override": entry.get("name_override", ""),
        "description_override": entry.get("description_override", ""),
        "resource_uri": entry.get("resource_uri", ""),
    }


def _prompt_values(entry: dict[str, Any]) -> dict[str, Any]:
    arguments = entry.get("arguments") or []
    if all(isinstance(item, dict) for item in arguments):
        # As Prompt.clean stores them.
        arguments = [
            {
                "name": item.get("name"),
                "description": item.get("description", ""),
                "required": item.get("required", False),
            }
            for item in arguments
        ]
    return {
        "name": entry["name"],
        "title": entry.get("title", ""),
        "description": entry.get("description", ""),
        "arguments": arguments,
        "template": entry["template"],
        "enabled": entry.get("enabled", True),
    }


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
        raise _rekeyed(prefix, exc) from exc


def _owned_by_name(model: Any, owner, names: Iterable[str], field_name: str, desired: dict) -> dict[str, Any]:
    """The owner's rows of `model` named in the document, by name; two of them with one name is an error on the
    document's entry (it cannot say which one it means)."""
    found: dict[str, Any] = {}
    for row in model.objects.filter(owner=owner, **{f"{field_name}__in": list(names)}).order_by("pk"):
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
        raise _rekeyed(prefix, exc) from exc


def _plan(owner, document: Any) -> _Plan:
    desired = _read(document)
    plan = _Plan()
    tables = _owned_by_name(Table, owner, desired.tables, "name", desired.tables)
    tools = _owned_by_name(Tool, owner, desired.tools, "name", desired.tools)
    instances = {i.slug: i for i in McpInstance.objects.filter(owner=owner, slug__in=list(desired.instances))}

    # Deletes first: they free the names the rest may take.
    for slug, instance in sorted(instances.items()):
        entry = desired.instances[slug][1]
        wanted_tools = {b["tool"] for b in entry.get("bindings", [])}
        for binding in instance.bindings.select_related("tool").order_by("name_key"):
            if binding.tool.name not in wanted_tools or binding.tool.name not in tools:
                doomed = Binding.objects.filter(pk=binding.pk)
                _delete(
                    plan,
                    "binding",
                    f"{slug}/{binding.tool.name}",
                    usage_of(bindings=[binding.pk]),
                    _run(binding_delete_many, bindings=doomed, force=True),
                )
        wanted_prompts = {p["name"].lower() for p in entry.get("prompts", [])}
        for prompt in instance.prompts.order_by("name"):
            if prompt.name.lower() not in wanted_prompts:
                _delete(plan, "prompt", f"{slug}/{prompt.name}", [], _run(prompt_delete, prompt=prompt))
    if desired.scope_slug is None:
        # A whole owner's setup: what the document does not name goes.
        gone_instances = McpInstance.objects.filter(owner=owner).exclude(slug__in=list(desired.instances))
        for instance in gone_instances.order_by("slug"):
            doomed_instances = McpInstance.objects.filter(pk=instance.pk)
            _delete(
                plan,
                "instance",
                instance.slug,
                usage_of(instances=[instance.pk]),
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
        gone_tables = Table.objects.filter(owner=owner).exclude(name__in=list(desired.tables))
        for table in gone_tables.order_by("name", "pk"):
            doomed_tables = Table.objects.filter(pk=table.pk)
            _delete(
                plan,
                "table",
                table.name,
                usage_of(tables=[table.pk]),
                _run(table_delete_many, tables=doomed_tables, force=True),
            )

    for name, (path, entry) in desired.tables.items():
        _plan_table(plan, owner, path, _table_values(entry), tables.get(name))
    for name, (path, entry) in desired.tools.items():
        _plan_tool(plan, owner, path, _tool_values(entry), tools.get(name), tables)
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
        _check(path, Table(owner=owner, name=name, description=values["description"]), exclude=["owner"])
        plan.changes.append(Change("create", "table", name))

        def create(written: _Written) -> None:
            written.tables[name] = _step(path, table_create, owner=owner, **values)

        plan.steps.append(create)
        return
    current = {"name": table.name, "description": table.description}
    if "data" in values:
        current["data"] = table_log.table_data(table.pk)[1]
    changed = _changed(current, values)
    if changed:
        probe = Table(pk=table.pk, owner=owner, name=name, description=values["description"])
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
    values = _instance_values(entry)
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
        _plan_prompt(plan, f"{path}.prompts.{index}", slug, _prompt_values(prompt_entry), prompts)


def _plan_binding(
    plan: _Plan, path: str, slug: str, entry: dict[str, Any], bound: dict[str, Binding], tools: dict[str, Tool]
) -> None:
    tool_name = entry["tool"]
    values = _binding_values(entry)
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
