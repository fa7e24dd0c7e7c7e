"""The setup document: its structure (SETUP_SCHEMA), reading one (checked, indexed by identity, each object's
values as its model stores them), and JSON/YAML text. No writes here."""

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import jsonschema
import yaml
from django.core.exceptions import ValidationError

from tools_app.models import McpInstance
from tools_app.services.instances import BINDING_FIELDS, INSTANCE_FIELDS
from tools_app.services.prompts import PROMPT_FIELDS
from tools_app.tool_schemas import default_input_schema, is_other_types_default

__all__ = [
    "BINDING_KEYS",
    "INSTANCE_KEYS",
    "OPTIONAL_INSTANCE_KEYS",
    "PROMPT_KEYS",
    "SETUP_SCHEMA",
    "SETUP_VERSION",
    "Desired",
    "binding_values",
    "instance_values",
    "prompt_values",
    "read_document",
    "rekeyed",
    "setup_document_dump",
    "setup_document_load",
    "setup_validate",
    "table_values",
    "tool_values",
]

SETUP_VERSION = 1

# The fields of each kind, in the document's order (identities first).
TABLE_KEYS = ("name", "description", "redact_fields")
TOOL_KEYS = (
    "name",
    "type",
    "table",
    "json_path",
    "description",
    "alias",
    "input_schema",
    "output_schema",
    "metadata",
    "redact_arguments",
)
INSTANCE_KEYS = ("slug", *(name for name in INSTANCE_FIELDS if name != "slug"))
BINDING_KEYS = ("tool", *BINDING_FIELDS)
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
            "items": _object(
                {
                    "name": _STRING,
                    "description": _STRING,
                    "redact_fields": {"type": "array", "items": _STRING},
                    "data": {"not": {"type": "null"}},
                },
                ["name"],
            ),
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
                    "redact_arguments": {"type": "array", "items": _STRING},
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
                    "read_only": _BOOLEAN,
                    "record_call_details": _BOOLEAN,
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
                                "read_only": _BOOLEAN,
                                "pinned_arguments": _OBJECT,
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


def rekeyed(prefix: str, exc: ValidationError) -> ValidationError:
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
class Desired:
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


def read_document(document: Any) -> Desired:
    """The document checked (structure, names unique, references resolved inside it) and indexed."""
    setup_validate(document)
    scope = document.get("scope", "owner")
    desired = Desired(scope_slug=scope["instance"] if isinstance(scope, dict) else None)
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


def table_values(entry: dict[str, Any]) -> dict[str, Any]:
    values = {
        "name": entry["name"],
        "description": entry.get("description", ""),
        "redact_fields": entry.get("redact_fields") or [],
    }
    if "data" in entry:
        values["data"] = entry["data"]
    return values


def tool_values(entry: dict[str, Any]) -> dict[str, Any]:
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
        "redact_arguments": entry.get("redact_arguments") or [],
    }


def instance_values(entry: dict[str, Any]) -> dict[str, Any]:
    defaults = {name: McpInstance._meta.get_field(name).get_default() for name in INSTANCE_FIELDS}  # type: ignore[union-attr]
    return {name: entry.get(name, defaults[name]) for name in INSTANCE_FIELDS}


def binding_values(entry: dict[str, Any]) -> dict[str, Any]:
    return {
        "enabled": entry.get("enabled", True),
        "name_override": entry.get("name_override", ""),
        "description_override": entry.get("description_override", ""),
        "resource_uri": entry.get("resource_uri", ""),
        "read_only": entry.get("read_only", False),
        "pinned_arguments": entry.get("pinned_arguments") or {},
    }


def prompt_values(entry: dict[str, Any]) -> dict[str, Any]:
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
