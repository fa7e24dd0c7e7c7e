"""OpenAPI details shared by every API view: the error shape, the statuses each operation can answer, and the
input constraints the server enforces (the schema says exactly what the server does).

REST_FRAMEWORK["DEFAULT_SCHEMA_CLASS"] points here (ToolhubAutoSchema) and SPECTACULAR_SETTINGS runs
postprocess_schema after generation. Nothing here is a hand-written document: every constraint is read from
the serializers, their validators, the paginator, the filters and the tool types' registry, so an endpoint
added later gets the same treatment by using the same bases (FullCleanModelSerializer / StrictSerializer,
StrictFilterSet, the API's pagination and ordering classes):

- request strings: `pattern`s for what DRF refuses (NUL; blank when not allow_blank) and for known field
  validators (tool names, JSON Pointers, rates), accounting for the whitespace DRF trims before validating;
- `additionalProperties: false` on serializers that refuse unknown fields (`refuse_unknown_fields`);
- JSON-valued fields as the JSON they accept (JsonDocument: no null; JSON Schema shapes; metadata keys);
- the tool body as a `oneOf` over the types with a `type` discriminator, each type's rules (table,
  JSON path, description, required arguments) taken from tools_app.tool_types;
- every error answer the operation can give, in the error shape; request-body examples; links.
"""

import copy
import sys
from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiExample
from rest_framework import serializers
from rest_framework.authentication import SessionAuthentication

from tools_app.resource_uris import validate_resource_uri
from tools_app.services.setup import SETUP_SCHEMA
from tools_app.tool_types import TOOL_TYPES
from tools_app.validators import validate_json_pointer, validate_prompt_name, validate_rate, validate_tool_name

__all__ = [
    "ErrorSerializer",
    "TokenAuthenticationScheme",
    "ToolhubAutoSchema",
    "non_blank_pattern",
    "postprocess_schema",
    "trimmed_pattern",
]


class TokenAuthenticationScheme(OpenApiAuthenticationExtension):
    """`Authorization: Token <token>` (tools_app.api.authentication) as the schema's security scheme."""

    target_class = "tools_app.api.authentication.TokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": 'A token from POST /api/auth/token/, sent as "Token <token>".',
        }


class ErrorSerializer(serializers.Serializer):
    """Every failure has this shape; `fields` is present for validation errors only."""

    # SPEC §6: {"error": CODE, "message": text, "fields": {field: [messages]}}.

    error = serializers.CharField(help_text="A stable UPPER_SNAKE code, e.g. VALIDATION_ERROR, NOT_FOUND.")
    message = serializers.CharField(help_text="What went wrong, for people and models.")
    fields = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        required=False,
        help_text="Validation errors only: {field: [messages]}.",
    )
    details = serializers.DictField(required=False, help_text="Extra data some codes carry (e.g. a tool error).")


#
# Strings as DRF reads them
#

# The characters Python's str.strip() removes (str.isspace()), which DRF's CharField trims before its
# validators run: a pattern must allow them around the value, or the schema would be stricter than the server.
_WHITESPACE = "".join(chr(code) for code in range(sys.maxunicode + 1) if chr(code).isspace())


def _char_class(chars: str) -> str:
    """`chars` as the inside of a regex character class (ECMA-262 and Python agree on this syntax)."""
    out = []
    for char in chars:
        code = ord(char)
        out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
    return "".join(out)


WS = f"[{_char_class(_WHITESPACE)}]"
# DRF's CharField refuses U+0000 anywhere (ProhibitNullCharactersValidator).
NO_NUL = "^[^\\x00]*$"


def non_blank_pattern() -> str:
    """A string with at least one character that is not whitespace, and no NUL."""
    return f"^[^\\x00]*[^\\x00{_char_class(_WHITESPACE)}][^\\x00]*$"


def trimmed_pattern(pattern: str) -> str:
    """`pattern` (anchored with ^...$) as a pattern for the untrimmed input: whitespace allowed around it."""
    inner = pattern.removeprefix("^").removesuffix("$").removesuffix("\\Z")
    return f"^{WS}*(?:{inner}){WS}*$"


# Tool names (SPEC §2.2, tools_app.validators.TOOL_NAME_RE) and JSON Pointers (RFC 6901, validate_json_pointer).
TOOL_NAME_PATTERN = "^[A-Za-z0-9_.-]{1,64}$"
JSON_POINTER_PATTERN = "^(?:/(?:[^~/\\x00]|~[01])*)*$"
_GRANULARITY = (
    "(?:"
    + "|".join(
        "".join(f"[{c.upper()}{c}]" for c in name) for name in ("second", "minute", "hour", "day", "month", "year")
    )
    + ")[Ss]?"
)
_COUNT = "0*[1-9][0-9]*"
# One limits-library rate, '<count>/<period>' or '<count> per <n> <period>' (tools_app.kernel.rate_limits.parse_rate).
RATE_PATTERN = f"^{WS}*{_COUNT}{WS}*(?:/|{WS}*[Pp][Ee][Rr]{WS}*){WS}*(?:{_COUNT})?{WS}*{_GRANULARITY}{WS}*$"


# A binding's resource_uri (tools_app.resource_uris.validate_resource_uri): a scheme, then no
# whitespace and no control character. What depends on the tool's type and the instance (a fixed URI or a
# template, the reserved toolhub: scheme, uniqueness) is documented on the field.
_CONTROLS = "".join(chr(code) for code in (*range(0x20), *range(0x7F, 0xA0)))
RESOURCE_URI_PATTERN = f"^[a-z][a-z0-9+.-]*:[^{_char_class(''.join(sorted(set(_WHITESPACE + _CONTROLS))))}]*$"


def _validator_patterns() -> dict[Any, tuple[str, str]]:
    """Field validators the schema states as a pattern: validator -> (pattern, format name)."""
    return {
        validate_tool_name: (TOOL_NAME_PATTERN, ""),
        # A prompt's name is a tool name that is not `usage_guide` (the schema's description says so).
        validate_prompt_name: (TOOL_NAME_PATTERN, ""),
        validate_json_pointer: (JSON_POINTER_PATTERN, "json-pointer"),
        validate_rate: (RATE_PATTERN, ""),
        validate_resource_uri: (RESOURCE_URI_PATTERN, ""),
    }


MAX_ID = 2**63 - 1


class ToolhubAutoSchema(AutoSchema):
    """AutoSchema with the server's input rules and every error answer (see the module docstring)."""

    def error_statuses(self) -> dict[str, str]:
        """The error statuses this operation can answer, each with what it means here."""
        statuses = {"400": "VALIDATION_ERROR naming the field or parameter, or a domain error with its code."}
        authenticated = self.view.permission_classes and not getattr(self.view, "public_schema_operation", False)
        if authenticated:
            statuses["401"] = "NOT_AUTHENTICATED: no or an invalid token (or session)."
            if self.method not in ("GET", "HEAD", "OPTIONS") and any(
                issubclass(auth, SessionAuthentication) for auth in self.view.authentication_classes
            ):
                statuses["403"] = "PERMISSION_DENIED: a session-authenticated write without its CSRF token."
        # Detail paths, nested paths and pages past the end are all 404s.
        statuses["404"] = "NOT_FOUND: no such object among yours (another user's object reads the same)."
        if self.method in ("POST", "PUT", "PATCH"):
            statuses["409"] = "NAME_CONFLICT (a binding name taken on the instance) or CONFLICT (a concurrent write)."
            statuses["413"] = "REQUEST_TOO_LARGE: the body is over TOOLHUB_MAX_REQUEST_BYTES."
        if self.view.throttle_classes:
            statuses["429"] = "RATE_LIMITED, with Retry-After (docs/rate-limits.md)."
        return statuses

    def _get_filter_parameters(self):
        parameters = super()._get_filter_parameters()
        for parameter in parameters:
            # django-filter (and DRF's search and ordering) read an empty value as "no filter", as an HTML
            # form sends it; OpenAPI says so with allowEmptyValue.
            schema = parameter.get("schema", {})
            constrained = schema.get("type") != "string" or "format" in schema or "enum" in schema
            if parameter.get("in") == "query" and constrained:
                parameter["allowEmptyValue"] = True
        return parameters

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        if direction != "response":
            return responses
        for code, description in self.error_statuses().items():
            if code not in responses:
                responses[code] = self._get_response_for_code(ErrorSerializer, code, direction=direction)
            if not responses[code].get("description"):
                responses[code]["description"] = description
        return responses

    def _map_basic_serializer(self, serializer, direction):
        schema = super()._map_basic_serializer(serializer, direction)
        if direction != "request":
            return schema
        properties = schema.get("properties", {})
        for name, field in serializer.fields.items():
            prop = properties.get(name)
            if field.read_only or not isinstance(prop, dict) or "$ref" in prop:
                continue
            if isinstance(field, serializers.CharField):
                properties[name] = self._string_schema(field, prop)
            elif isinstance(field, serializers.PrimaryKeyRelatedField) and prop.get("type") == "integer":
                prop.setdefault("minimum", 1)
                prop.setdefault("maximum", MAX_ID)
        if getattr(serializer, "refuse_unknown_fields", False):
            schema["additionalProperties"] = False
        return schema

    @staticmethod
    def _string_schema(field: serializers.CharField, generated: dict[str, Any]) -> dict[str, Any]:
        """The schema of a request string as DRF reads it: trimmed (unless trim_whitespace is off), no NUL,
        not blank unless allow_blank, and matching the field's known validators."""
        variants = generated.get("oneOf") or [generated]
        schema = {key: value for key, value in variants[0].items() if key != "pattern"}
        for key in ("description", "nullable", "writeOnly", "default"):
            if key in generated:
                schema[key] = generated[key]
        pattern = ""
        known = _validator_patterns()
        for validator in field.validators:
            regex = getattr(validator, "regex", None)
            if regex is not None and not getattr(validator, "inverse_match", False):
                pattern = regex.pattern.replace("\\Z", "$").replace("\\A", "^")
            elif getattr(validator, "__hash__", None) and validator in known:
                pattern, string_format = known[validator]
                if string_format:
                    schema["format"] = string_format
        trim = field.trim_whitespace
        if pattern:
            pattern = trimmed_pattern(pattern) if trim else pattern
            if field.allow_blank:
                pattern = f"{pattern}|^{WS}*$" if trim else f"{pattern}|^$"
        elif field.allow_blank:
            pattern = NO_NUL
        else:
            pattern = non_blank_pattern() if trim else "^[^\\x00]+$"
        schema["pattern"] = pattern
        if not field.allow_blank:
            schema["minLength"] = max(1, schema.get("minLength", 1))
        return schema

    def _get_examples(self, serializer, direction, media_type, status_code=None, extras=None):
        examples = super()._get_examples(serializer, direction, media_type, status_code, extras)
        if examples or direction != "request":
            return examples
        # A serializer's request examples: `request_examples` {name: body}, `patch_examples` for PATCH.
        source = getattr(serializer, "request_examples", None) or {}
        if self.method == "PATCH":
            source = getattr(serializer, "patch_examples", None) or source
        built = [OpenApiExample(name, value=value, request_only=True) for name, value in source.items()]
        return super()._get_examples(serializer, direction, media_type, status_code, built) if built else examples


#
# JSON-valued fields
#

JSON_TYPES = ["string", "number", "integer", "boolean", "array", "object", "null"]


def _json_components() -> dict[str, dict[str, Any]]:
    """JsonDocument (any JSON value but null), and the JSON Schema shapes of a tool's input and output schemas.

    Nested values are left free-form (`{}`): a recursive JSON-value schema is what code generators handle
    worst, and the one rule it would add, no U+0000 in strings, cannot be stated for object keys in OpenAPI
    3.0 anyway; the descriptions say it.
    """
    ref: dict[str, Any] = {}
    scalars = [
        {"type": "string", "pattern": NO_NUL},
        {"type": "number"},
        {"type": "boolean"},
    ]
    containers = [
        {"type": "object", "additionalProperties": ref},
        {"type": "array", "items": ref},
    ]
    property_schema = {
        "type": "object",
        "description": "The JSON Schema of one argument.",
        "properties": {
            "type": {"type": "string", "enum": JSON_TYPES},
            "description": {"type": "string", "pattern": NO_NUL},
        },
        "additionalProperties": ref,
    }
    schema_object = {
        "type": "object",
        "description": "A JSON Schema (Draft 2020-12) describing an object. Its `$ref`s stay inside it and its "
        "`pattern`s must be RE2 expressions.",
        "required": ["type"],
        "properties": {
            "type": {"type": "string", "enum": ["object"]},
            "properties": {"type": "object", "additionalProperties": {"$ref": "#/components/schemas/ArgumentSchema"}},
            "required": {"type": "array", "items": {"type": "string", "pattern": NO_NUL}, "uniqueItems": True},
            "additionalProperties": {"type": "boolean"},
            "description": {"type": "string", "pattern": NO_NUL},
        },
        "additionalProperties": ref,
    }
    return {
        "JsonDocument": {
            "description": "Any JSON value but null. Strings (and keys) hold no U+0000.",
            "anyOf": [*scalars, *containers],
        },
        "ArgumentSchema": property_schema,
        "InputSchema": {
            "description": "The tool's input schema: `{}` for its type's default, else a JSON Schema (Draft 2020-12) "
            'with `"type": "object"`.',
            "oneOf": [{"type": "object", "maxProperties": 0}, {"$ref": "#/components/schemas/ObjectJsonSchema"}],
        },
        "ObjectJsonSchema": schema_object,
        "OutputSchema": {
            "description": "An optional JSON Schema (Draft 2020-12) of the result; null or `{}` for none.",
            "nullable": True,
            "type": "object",
            "properties": {
                "type": {"type": "string", "enum": JSON_TYPES},
                "description": {"type": "string", "pattern": NO_NUL},
            },
            "additionalProperties": ref,
        },
        "ToolMetadata": {
            "type": "object",
            "description": "Free-form metadata; the keys below are checked when present (null means unset).",
            "properties": {
                "category": {
                    "type": "string",
                    "nullable": True,
                    "pattern": "^(?:[a-z0-9][a-z0-9_-]{0,49})?$",
                    "description": "A slug; empty or null: the type's default category.",
                },
                "tags": {
                    "type": "array",
                    "nullable": True,
                    "items": {"type": "string", "minLength": 1, "pattern": NO_NUL},
                },
                "preview_keys": {
                    "type": "array",
                    "nullable": True,
                    "items": {"type": "string", "minLength": 1, "pattern": NO_NUL},
                },
                "key_field": {"type": "string", "nullable": True, "minLength": 1, "pattern": NO_NUL},
                "examples": {
                    "type": "array",
                    "nullable": True,
                    "maxItems": 5,
                    "items": {
                        "type": "string",
                        "format": "python",
                        "minLength": 1,
                        "pattern": non_blank_pattern(),
                        "description": "A non-blank snippet of valid Python, at most 10 lines.",
                    },
                },
                "return_format": {"type": "string", "nullable": True, "pattern": NO_NUL},
                "documentation_url": {"type": "string", "nullable": True, "pattern": NO_NUL},
                "mcp_server": {"type": "string", "nullable": True, "pattern": NO_NUL},
            },
            "additionalProperties": ref,
        },
    }


# Request fields whose JSON value has a component: (component, property) -> schema.
JSON_FIELDS = {
    ("TableRequest", "data"): "JsonDocument",
    ("ToolRequest", "input_schema"): "InputSchema",
    ("ToolRequest", "output_schema"): "OutputSchema",
    ("ToolRequest", "metadata"): "ToolMetadata",
}


def _tool_variants(components: dict[str, Any]) -> None:
    """ToolRequest as a oneOf over the tool types, discriminated by `type`; each type's rules from its spec."""
    base = components["ToolRequest"]
    mapping = {}
    variants = []
    for value, spec in sorted(TOOL_TYPES.items()):
        name = "".join(part.capitalize() for part in value.split("_")) + "ToolRequest"
        properties: dict[str, Any] = {"type": {"type": "string", "enum": [value]}}
        required = ["name", "type"]
        if spec.needs_table:
            properties["table"] = {"type": "integer", "minimum": 1, "maximum": MAX_ID}
            required.append("table")
        else:
            properties["table"] = {"type": "integer", "nullable": True, "enum": [None]}
            properties["json_path"] = {"type": "string", "pattern": f"^{WS}*$"}
        if spec.requires_description:
            properties["description"] = {"type": "string", "maxLength": 1024, "pattern": non_blank_pattern()}
            required.append("description")
        arguments = spec.required_arguments
        if arguments:
            properties["input_schema"] = {
                "oneOf": [
                    {"type": "object", "maxProperties": 0},
                    {
                        "allOf": [
                            {"$ref": "#/components/schemas/ObjectJsonSchema"},
                            {
                                "type": "object",
                                "required": ["properties"],
                                "properties": {"properties": {"type": "object", "required": arguments}},
                            },
                        ]
                    },
                ],
                "description": f"`{{}}` for the default, or a schema whose properties include {', '.join(arguments)}.",
            }
        # A whole copy of ToolRequest with this type's rules (not an allOf over it): code generators cannot
        # merge a narrowed property (`table`: integer) into the base's (`table`: integer or null).
        variant = copy.deepcopy(base)
        variant["description"] = f"A {value} tool ({spec.label})."
        variant["properties"].update(properties)
        variant["required"] = required
        components[name] = variant
        mapping[value] = f"#/components/schemas/{name}"
        variants.append({"$ref": mapping[value]})
    components["ToolCreateRequest"] = {
        "description": base.get("description", "")
        + "\n\nThe rules depend on `type`: data types need a `table` (one of yours) and a `description`; registry "
        "and external types have no table and no JSON path; every type but external needs a description; a "
        "custom input schema keeps the arguments the type needs.",
        "oneOf": variants,
        "discriminator": {"propertyName": "type", "mapping": mapping},
    }


_LINKS = {
    # operationId of a create -> {link name: (operationId, {parameter: expression})}
    "tables_create": {
        "GetTable": ("tables_retrieve", {"id": "$response.body#/id"}),
        "ToolsOnTable": ("tools_by_table_list", {"table_id": "$response.body#/id"}),
        "UpdateTable": ("tables_partial_update", {"id": "$response.body#/id"}),
        "DeleteTable": ("tables_destroy", {"id": "$response.body#/id"}),
    },
    "tools_create": {
        "GetTool": ("tools_retrieve", {"id": "$response.body#/id"}),
        "CallTool": ("tools_call_create", {"id": "$response.body#/id"}),
        "UpdateTool": ("tools_partial_update", {"id": "$response.body#/id"}),
        "ExportTool": ("tool_export", {"pk": "$response.body#/id"}),
        "DeleteTool": ("tools_destroy", {"id": "$response.body#/id"}),
    },
    "mcp_instances_create": {
        "GetInstance": ("mcp_instances_retrieve", {"id": "$response.body#/id"}),
        "ListKeys": ("mcp_instances_keys_list", {"instance_pk": "$response.body#/id"}),
        "IssueKey": ("mcp_instances_keys_create", {"instance_pk": "$response.body#/id"}),
        "InstanceGuide": ("mcp_instance_guide", {"pk": "$response.body#/id"}),
        "InstanceExport": ("mcp_instance_export", {"pk": "$response.body#/id"}),
        "UpdateInstance": ("mcp_instances_partial_update", {"id": "$response.body#/id"}),
        "AddPrompt": ("mcp_instances_prompts_create", {"instance_pk": "$response.body#/id"}),
    },
    "bindings_create": {
        "GetBinding": ("bindings_retrieve", {"id": "$response.body#/id"}),
        "UpdateBinding": ("bindings_partial_update", {"id": "$response.body#/id"}),
        "GetInstance": ("mcp_instances_retrieve", {"id": "$response.body#/mcp_instance"}),
        "GetTool": ("tools_retrieve", {"id": "$response.body#/tool"}),
        "DeleteBinding": ("bindings_destroy", {"id": "$response.body#/id"}),
    },
    "mcp_instances_prompts_create": {
        "GetPrompt": (
            "mcp_instances_prompts_retrieve",
            {"instance_pk": "$request.path.instance_pk", "id": "$response.body#/id"},
        ),
        "UpdatePrompt": (
            "mcp_instances_prompts_partial_update",
            {"instance_pk": "$request.path.instance_pk", "id": "$response.body#/id"},
        ),
        "DeletePrompt": (
            "mcp_instances_prompts_destroy",
            {"instance_pk": "$request.path.instance_pk", "id": "$response.body#/id"},
        ),
    },
    "mcp_instances_keys_create": {
        "GetKey": (
            "mcp_instances_keys_retrieve",
            {"instance_pk": "$request.path.instance_pk", "id": "$response.body#/id"},
        ),
        "RevokeKey": (
            "mcp_instances_keys_destroy",
            {"instance_pk": "$request.path.instance_pk", "id": "$response.body#/id"},
        ),
    },
}


def _add_links(paths: dict[str, Any]) -> None:
    """OpenAPI links of the main flows: table -> tools -> instance -> binding -> key."""
    operations = {
        operation.get("operationId"): (path, method)
        for path, item in paths.items()
        for method, operation in item.items()
        if isinstance(operation, dict)
    }
    for source, links in _LINKS.items():
        if source not in operations:
            continue
        path, method = operations[source]
        response = paths[path][method]["responses"].get("201")
        if response is None:
            continue
        built = {}
        for name, (target, parameters) in links.items():
            if target not in operations:
                continue
            target_path, _ = operations[target]
            # Path parameters must be the ones the target's path has.
            kept = {key: value for key, value in parameters.items() if "{" + key + "}" in target_path}
            if kept:
                built[name] = {"operationId": target, "parameters": kept}
        if built:
            response["links"] = built


def _integer_query_ids(paths: dict[str, Any]) -> None:
    """Ids in query parameters (filters naming an object) are positive 64-bit integers."""
    for item in paths.values():
        for operation in item.values():
            if not isinstance(operation, dict):
                continue
            for parameter in operation.get("parameters", []):
                schema = parameter.get("schema", {})
                if parameter.get("in") == "path" and schema.get("type") == "integer":
                    schema.setdefault("minimum", 1)
                    schema.setdefault("maximum", MAX_ID)
                if parameter.get("in") == "query" and schema.get("type") == "integer" and "minimum" not in schema:
                    schema["minimum"] = 1
                    schema.setdefault("maximum", MAX_ID)


def _openapi_30(schema: Any) -> Any:
    """A JSON Schema (Draft 2020-12) as OpenAPI 3.0 says it: a type list with "null" is the type and `nullable`."""
    if isinstance(schema, list):
        return [_openapi_30(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    converted = {key: _openapi_30(value) for key, value in schema.items()}
    types = converted.get("type")
    if isinstance(types, list):
        others = [kind for kind in types if kind != "null"]
        converted["type"] = others[0]
        if "null" in types:
            converted["nullable"] = True
    return converted


# The setup document (tools_app.services.setup): its structure is the service's own schema.
SETUP_PATHS = {
    ("/api/setup/plan/", "post"): "request",
    ("/api/setup/apply/", "post"): "request",
    ("/api/setup/export/", "get"): "response",
}


def _setup_document(components: dict[str, Any], paths: dict[str, Any]) -> None:
    document = _openapi_30(SETUP_SCHEMA)
    document["description"] = (
        "A whole setup (or one instance's) as GET /api/setup/export/ writes it: tables, tools and instances with "
        "their bindings and prompts, named by names and slugs, never ids; API keys never. Each object is checked "
        "by its resource's own rules when planned or applied."
    )
    components["SetupDocument"] = document
    ref = {"$ref": "#/components/schemas/SetupDocument"}
    for (path, method), where in SETUP_PATHS.items():
        operation = paths.get(path, {}).get(method)
        if operation is None:
            continue
        if where == "request":
            operation["requestBody"]["content"]["application/json"]["schema"] = ref
            operation["requestBody"]["required"] = True
        else:
            operation["responses"]["200"]["content"]["application/json"]["schema"] = ref


def postprocess_schema(result: dict[str, Any], generator, request, public) -> dict[str, Any]:
    """SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"]: JSON-valued fields, tool types, setup documents, links, id
    bounds."""
    components = result.setdefault("components", {}).setdefault("schemas", {})
    components.update(_json_components())
    _setup_document(components, result.get("paths", {}))
    for (component, field), target in JSON_FIELDS.items():
        for name in (component, "Patched" + component):
            prop = components.get(name, {}).get("properties", {}).get(field)
            if prop is not None:
                description = prop.get("description")
                replacement: dict[str, Any] = {"allOf": [{"$ref": f"#/components/schemas/{target}"}]}
                if target in ("OutputSchema",):
                    replacement["nullable"] = True
                if description:
                    replacement["description"] = description
                components[name]["properties"][field] = replacement
    if "ToolRequest" in components:
        _tool_variants(components)
        for item in result.get("paths", {}).values():
            operation = item.get("post")
            body = (operation or {}).get("requestBody", {}).get("content", {}).get("application/json", {})
            if body.get("schema") == {"$ref": "#/components/schemas/ToolRequest"} and operation["operationId"] == (
                "tools_create"
            ):
                body["schema"] = {"$ref": "#/components/schemas/ToolCreateRequest"}
    _add_links(result.get("paths", {}))
    _integer_query_ids(result.get("paths", {}))
    return copy.deepcopy(result)
