"""API serializers for tables and tools, and the FullCleanModelSerializer base shared with mcp_app.api.

Validation is the model's: the base builds the instance the write would produce and runs full_clean(),
so a 400 names the field before anything is written (DRF alone never calls Model.clean()). The write
itself goes through the services, which validate again under their locks.
"""

import copy
from collections.abc import Mapping
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, transaction
from django.http import QueryDict
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.authtoken.serializers import AuthTokenSerializer

from tools_app import services
from tools_app.kernel.limits import MAX_INDEXED_FIELD_LENGTH, MAX_REDACT_FIELD_LENGTH, MAX_REDACT_FIELDS
from tools_app.models import ApiToken, Table, TableChange, Tool
from tools_app.validators import max_indexed_fields

__all__ = [
    "ApiTokenSerializer",
    "StrictSerializer",
    "StrictSerializerMixin",
    "FullCleanModelSerializer",
    "OwnedPrimaryKeyRelatedField",
    "TableSerializer",
    "ToolCallResultSerializer",
    "ToolCallSerializer",
    "ToolSerializer",
]


#
# Strict input: the types and the unknown-field rule the schema states are the ones enforced
#


def _is_integer(value: Any) -> bool:
    # bool is an int in Python; a float with no fraction is an integer in JSON Schema (5.0 == 5).
    return (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, float) and value.is_integer())


# The JSON type each kind of field reads, checked before DRF's own parsing, which would coerce: 0 -> "0" for a
# CharField, "true" or 1 -> True for a BooleanField, "5" -> 5 for an IntegerField or a primary key. A refusal
# is worded with the field's own error message (the one DRF gives for a value it cannot read at all).
STRICT_TYPES: tuple[tuple[type[serializers.Field], Any, str], ...] = (
    (serializers.BooleanField, lambda value: isinstance(value, bool), "invalid"),
    (serializers.IntegerField, _is_integer, "invalid"),
    (serializers.PrimaryKeyRelatedField, _is_integer, "incorrect_type"),
    (
        serializers.FloatField,
        lambda value: isinstance(value, int | float) and not isinstance(value, bool),
        "invalid",
    ),
    (serializers.ChoiceField, lambda value: isinstance(value, str), "invalid_choice"),
    (serializers.CharField, lambda value: isinstance(value, str), "invalid"),
)


def strict_type_problem(field: serializers.Field, value: Any) -> str | None:
    """Why `value` is not of the JSON type `field` reads, or None (null is left to the field's allow_null)."""
    if value is None:
        return None
    for field_class, accepts, message in STRICT_TYPES:
        if isinstance(field, field_class):
            if accepts(value):
                return None
            return field.error_messages[message].format(input=value, data_type=type(value).__name__)
    return None


def untrimmed_length_problems(fields: Mapping[str, serializers.Field], data: Mapping) -> dict[str, list[str]]:
    """Strings longer than their field's max_length as sent, before DRF trims the whitespace around them: the
    schema's `maxLength` is of the value sent, so a run of whitespace (U+0085 included) cannot carry an
    over-long value past it."""
    errors: dict[str, list[str]] = {}
    for name, field in fields.items():
        limit = getattr(field, "max_length", None)
        if field.read_only or limit is None or not isinstance(field, serializers.CharField) or name not in data:
            continue
        value = data[name]
        if isinstance(value, str) and len(value) > limit:
            errors[name] = [field.error_messages["max_length"].format(max_length=limit)]
    return errors


UNKNOWN_FIELD = "Unknown field: the body's fields are {names}."


class StrictSerializerMixin:
    """Input read as the schema says: a JSON value of the wrong type is a 400 naming the field,
    never coerced; with `refuse_unknown_fields`, a key the serializer does not have is a 400 too, and the
    schema says `additionalProperties: false` (tools_app.api.schema).

    Only JSON bodies are checked (a QueryDict holds strings by nature: query parameters and forms).
    """

    refuse_unknown_fields = False
    unknown_field_message = UNKNOWN_FIELD  # "{names}" is replaced by the writable fields

    def to_internal_value(self, data):
        if isinstance(data, Mapping):
            too_long = untrimmed_length_problems(self.fields, data)  # type: ignore[attr-defined]
            if too_long:
                raise serializers.ValidationError(too_long)
        if isinstance(data, Mapping) and not isinstance(data, QueryDict):
            errors: dict[str, list[str]] = {}
            writable = {name: field for name, field in self.fields.items() if not field.read_only}  # type: ignore[attr-defined]
            for name, field in writable.items():
                if name in data:
                    problem = strict_type_problem(field, data[name])
                    if problem is not None:
                        errors[name] = [problem]
            if self.refuse_unknown_fields:
                message = self.unknown_field_message.replace("{names}", ", ".join(sorted(writable)))
                for key in sorted(str(key) for key in data if key not in self.fields):  # type: ignore[attr-defined]
                    errors[key] = [message]
            if errors:
                raise serializers.ValidationError(errors)
        return super().to_internal_value(data)  # type: ignore[misc]


class StrictSerializer(StrictSerializerMixin, serializers.Serializer):
    """A plain serializer with strict input (StrictSerializerMixin)."""


class OwnedPrimaryKeyRelatedField(serializers.PrimaryKeyRelatedField):
    """A foreign key whose choices are the caller's own objects (SPEC §6).

    Another user's id reads exactly like a missing one: 400 "Invalid pk ... object does not exist."
    """

    def __init__(self, model, **kwargs):
        self.model = model
        kwargs.setdefault("queryset", model.objects.none())
        super().__init__(**kwargs)

    def get_queryset(self):
        request = self.context.get("request")
        return self.model.objects.for_user(getattr(request, "user", None))

    def to_internal_value(self, data):
        # bool is an int in Python; True must not silently mean the object with id 1.
        if isinstance(data, bool) or isinstance(data, float | list | dict):
            self.fail("incorrect_type", data_type=type(data).__name__)
        return super().to_internal_value(data)


class FullCleanModelSerializer(StrictSerializerMixin, serializers.ModelSerializer):
    """A model serializer whose writes go through the services, which run Model.full_clean() (
    validation runs once per write, in the service; its ValidationError is the API's 400 naming the fields,
    through the exception handler).

    Subclasses write through services in create()/update(); `full_clean_kwargs` is what a model leaves to
    its service when the input is checked again after a lost race (see save()). Give every subclass its
    own docstring, written for API clients: it is the resource's description in /api/schema/.
    """

    full_clean_kwargs: dict[str, Any] = {}

    def owner(self):
        return self.context["request"].user

    def build_instance(self, attrs: dict[str, Any]):
        if self.instance is not None:
            # A copy (Model.__getstate__ copies the field cache too): a refused PATCH leaves the object as it was.
            instance = copy.copy(self.instance)
        else:
            model = self.Meta.model
            instance = model(owner=self.owner()) if _has_owner(model) else model()
        for key, value in attrs.items():
            setattr(instance, key, value)
        return instance

    def full_clean(self, attrs: dict[str, Any]) -> None:
        """The model's validation of the would-be instance, as a DRF ValidationError."""
        try:
            self.build_instance(attrs).full_clean(**self.full_clean_kwargs)
        except DjangoValidationError as exc:
            raise serializers.ValidationError(serializers.as_serializer_error(exc)) from exc

    def save(self, **kwargs):
        """Write through the service; a uniqueness race lost after validation is answered like the duplicate.

        Two requests can both pass the unique checks (e.g. an instance's slug) before either inserts. The
        loser's IntegrityError is rolled back to a savepoint and its input validated again by the model,
        which now sees the winner's row: the same 400 naming the field as a plain duplicate, not a 409.
        """
        try:
            with transaction.atomic():
                return super().save(**kwargs)
        except IntegrityError:
            if hasattr(self, "initial_data"):
                self.full_clean(self.run_validation(self.initial_data))
            raise


def _has_owner(model) -> bool:
    return any(field.name == "owner" for field in model._meta.get_fields())


#
# Tables
#


class _FieldName(serializers.CharField):
    """A record field name: a JSON string (DRF's CharField would also take 0 as "0")."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


@extend_schema_field(
    {
        "type": "array",
        "items": {"type": "string", "minLength": 1, "maxLength": MAX_REDACT_FIELD_LENGTH, "pattern": "^[^\\x00]+$"},
        "maxItems": MAX_REDACT_FIELDS,
        "uniqueItems": True,
    }
)
class FieldNamesField(serializers.ListField):
    """A list of distinct record field names, kept exactly as given (strings only, no trimming)."""

    def __init__(self, **kwargs):
        kwargs.setdefault("child", _FieldName(trim_whitespace=False, max_length=MAX_REDACT_FIELD_LENGTH))
        kwargs.setdefault("max_length", MAX_REDACT_FIELDS)
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        names = super().to_internal_value(data)
        if len(set(names)) != len(names):
            raise serializers.ValidationError("A field is named twice.")
        return names


INDEXED_FIELDS_SCHEMA = {
    "type": "array",
    "items": {
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_INDEXED_FIELD_LENGTH,
        "pattern": '^[^"\\\\\\x00-\\x1f]+$',
    },
    "uniqueItems": True,
    # The deployment's limit, as the model checks it (validators.validate_indexed_fields).
    "maxItems": max_indexed_fields(),
    "description": "Record field names (top-level keys of the table's records) the database keeps expression indexes "
    "on: filters and sorts on them are fast, and the table's tools say so. Distinct, at most "
    "TOOLHUB_MAX_INDEXED_FIELDS (default 16); no quote, backslash or control character. Default [].",
}


@extend_schema_field(INDEXED_FIELDS_SCHEMA)
class IndexedFieldsField(serializers.JSONField):
    """A table's indexed_fields; checked by the model (tools_app.validators.validate_indexed_fields)."""


class TableDataField(serializers.JSONField):
    """A table's `data`. With `data_placeholder` in the context, the answer holds that string instead, and the
    table's document is not read: the streamed answer writes the document's text in its place
    (tools_app.api.streamed)."""

    def get_attribute(self, instance):
        placeholder = self.context.get("data_placeholder")
        return placeholder if placeholder is not None else super().get_attribute(instance)


class TableSerializer(FullCleanModelSerializer):
    """A JSON document (any JSON value, usually an object or an array) that tools read and write.

    `version` starts at 1 and grows by one on every data write; renaming a table leaves it.
    """

    request_examples = {
        "orders": {
            "name": "orders",
            "description": "Open orders, one object per order.",
            "data": [{"id": 1, "customer": "ada", "status": "paid", "total": 10.5}],
        }
    }
    patch_examples = {"rename": {"name": "orders-2026"}, "replace data": {"data": {"orders": []}}}

    owner = serializers.CharField(source="owner.username", read_only=True)
    data = TableDataField(
        required=False, help_text="Any JSON value (usually an object or an array); not null. Default {}."
    )
    redact_fields = FieldNamesField(
        required=False,
        help_text="Record field names whose values never appear in the call log: anywhere in a call's `arguments` "
        'or `result_excerpt`, at any depth, such a field\'s value reads "[redacted]". Credentials (passwords, '
        "tokens, API keys, ...) are always redacted. Default [].",
    )

    indexed_fields = IndexedFieldsField(required=False)

    class Meta:
        model = Table
        fields = [
            "id",
            "name",
            "description",
            "data",
            "redact_fields",
            "indexed_fields",
            "version",
            "owner",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["id", "version", "owner", "created_at", "updated_at"]

    def create(self, validated_data):
        return services.table_create(owner=self.owner(), **validated_data)

    def update(self, instance, validated_data):
        return services.table_update(
            table=instance, expected_version=self.context.get("expected_version"), **validated_data
        )


class TableChangeSerializer(serializers.ModelSerializer):
    """One entry of a table's history: the write that made `version` from `version_before`."""

    version_before = serializers.IntegerField(read_only=True)
    user = serializers.SerializerMethodField(help_text="Who wrote (over MCP, the key's owner); null if deleted.")
    api_key = serializers.SerializerMethodField(help_text="The MCP API key's label, or null.")
    api_token = serializers.SerializerMethodField(help_text="The API token's id, or null.")
    oauth_client = serializers.SerializerMethodField(help_text="Over MCP with an OAuth token: its client id, or null.")
    tool = serializers.SerializerMethodField(help_text='{"id", "name"} of the tool (id null if deleted), or null.')
    binding = serializers.SerializerMethodField(help_text='Over MCP: {"mcp_instance", "name"}, else null.')
    arguments = serializers.JSONField(read_only=True, help_text="The call's arguments (null for other writes).")
    patch = serializers.JSONField(read_only=True, help_text="RFC 6902 JSON Patch from version_before to version.")

    class Meta:
        model = TableChange
        fields = [
            "version",
            "version_before",
            "at",
            "user",
            "api_key",
            "api_token",
            "oauth_client",
            "surface",
            "tool",
            "binding",
            "arguments",
            "patch",
        ]
        read_only_fields = fields

    def get_user(self, entry: TableChange) -> str | None:
        return entry.user.get_username() if entry.user is not None else None

    def get_api_key(self, entry: TableChange) -> str | None:
        return entry.api_key.label if entry.api_key is not None else None

    def get_api_token(self, entry: TableChange) -> int | None:
        return entry.api_token_id

    def get_oauth_client(self, entry: TableChange) -> str | None:
        return entry.oauth_client or None

    def get_tool(self, entry: TableChange) -> dict | None:
        if entry.tool_id is None and not entry.tool_name:
            return None
        return {"id": entry.tool_id, "name": entry.tool.name if entry.tool is not None else entry.tool_name}

    def get_binding(self, entry: TableChange) -> dict | None:
        if not entry.binding_name:
            return None
        return {"mcp_instance": entry.mcp_instance_id, "name": entry.binding_name}


class TableVersionSerializer(serializers.Serializer):
    version = serializers.IntegerField(help_text="The version asked for.")
    data = serializers.JSONField(help_text="The table's document as it was at that version.")


class TableRestoreSerializer(StrictSerializer):
    """POST /api/tables/<id>/restore/: the version to write again as a new version (strict: no "1" for 1, no
    other field)."""

    refuse_unknown_fields = True
    unknown_field_message = 'Unknown field. The body is {"version": v}.'
    request_examples = {"restore": {"version": 1}}

    version = serializers.IntegerField(min_value=1, max_value=2**63 - 1, help_text="A version inside retention.")


#
# Tools
#


class ToolSerializer(FullCleanModelSerializer):
    """A tool an LLM agent can call: a typed operation on a mount point (`json_path`) of one of your tables,
    a registry tool, or an external tool served elsewhere. Tools are exposed over MCP through bindings.
    """

    request_examples = {
        "query_data": {
            "name": "orders_query",
            "type": "query_data",
            "table": 1,
            "json_path": "",
            "description": "Query the orders with a JMESPath expression.",
            "metadata": {"category": "orders", "tags": ["orders"], "examples": ["orders_query(query='[0]')"]},
        },
        "search_tools": {"name": "find_tools", "type": "search_tools", "table": None, "description": "Find tools."},
        "external": {
            "name": "weather",
            "type": "external",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
    patch_examples = {"describe": {"description": "Query the open orders with JMESPath."}}

    owner = serializers.CharField(source="owner.username", read_only=True)
    table = OwnedPrimaryKeyRelatedField(
        Table, allow_null=True, required=False, help_text="Id of one of your tables; null for non-data tools."
    )
    input_schema = serializers.JSONField(
        required=False, help_text="JSON Schema (Draft 2020-12) with type object; empty = the type's default."
    )
    output_schema = serializers.JSONField(required=False, allow_null=True, help_text="Optional JSON Schema.")
    metadata = serializers.JSONField(
        required=False, help_text="category, tags, preview_keys, key_field, examples, return_format, ..."
    )
    category = serializers.CharField(read_only=True, help_text="metadata.category, or the type's default.")
    tags = serializers.ListField(child=serializers.CharField(), read_only=True)
    redact_arguments = FieldNamesField(
        required=False,
        help_text="Argument names whose values never appear in the call log: the value of such an argument, or of "
        'a key so named inside one at any depth, reads "[redacted]" in a call\'s `arguments`, and so does that '
        "value where the call's `result_excerpt` or error repeats it. Credentials are always redacted. Default [].",
    )

    class Meta:
        model = Tool
        fields = [
            "id",
            "name",
            "alias",
            "type",
            "table",
            "json_path",
            "description",
            "input_schema",
            "output_schema",
            "metadata",
            "category",
            "tags",
            "redact_arguments",
            "use_count",
            "last_used",
            "owner",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["id", "use_count", "last_used", "owner", "created_at", "updated_at"]

    def create(self, validated_data):
        return services.tool_create(owner=self.owner(), **validated_data)

    def update(self, instance, validated_data):
        return services.tool_update(tool=instance, force=self.context.get("force", False), **validated_data)


class ToolCallSerializer(StrictSerializer):
    """The arguments of a tool call, checked against the tool's input_schema."""

    # SPEC §6: the body is {"arguments": {...}}. DRF ignores other keys, so {"args": {...}} would run the
    # tool with no arguments (a write with the wrong ones); a key that is not `arguments` is refused.
    refuse_unknown_fields = True
    unknown_field_message = 'Unknown field. The body is {"arguments": {...}}.'
    request_examples = {"arguments": {"arguments": {}}}

    arguments = extend_schema_field({"type": "object", "additionalProperties": True})(
        serializers.DictField(
            required=False, default=dict, help_text="The tool's arguments, checked against its input_schema."
        )
    )


class ToolCallResultSerializer(serializers.Serializer):
    """The result of a successful tool call."""

    result = serializers.JSONField(help_text="The tool's JSON result (SPEC §8 shapes).")


class AuthTokenRequestSerializer(StrictSerializerMixin, AuthTokenSerializer):
    """POST /api/auth/token/: DRF's username-and-password check, with the username no longer than a username
    can be (a longer one cannot log in, and would overflow the lockout's record of the attempt)."""

    username = serializers.CharField(
        label="Username",
        write_only=True,
        max_length=get_user_model()._meta.get_field(get_user_model().USERNAME_FIELD).max_length,
    )
    token = None  # DRF's read-only echo: the answer is {"token"} (AuthTokenView)
    request_examples = {"login": {"username": "alice", "password": "correct horse battery staple"}}


class ApiTokenSerializer(serializers.ModelSerializer):
    """An API token as its owner sees it: never the secret nor its digest."""

    prefix = serializers.CharField(source="token_key", read_only=True, help_text="The token's first characters.")
    expiry = serializers.DateTimeField(read_only=True, allow_null=True, help_text="null: the token never expires.")
    current = serializers.SerializerMethodField(help_text="Whether this request is authenticated with this token.")

    class Meta:
        model = ApiToken
        fields = ["id", "prefix", "created", "expiry", "current"]
        read_only_fields = fields

    def get_current(self, obj: ApiToken) -> bool:
        request = self.context.get("request")
        auth = getattr(request, "auth", None)
        return isinstance(auth, ApiToken) and auth.pk == obj.pk
