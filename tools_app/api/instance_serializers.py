"""API serializers for MCP instances, their API keys and bindings (SPEC §6).

Validation goes through full_clean() (FullCleanModelSerializer); writes through mcp_app.services.
"""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from tools_app import services
from tools_app.api.schema import NO_NUL
from tools_app.api.serializers import FullCleanModelSerializer, OwnedPrimaryKeyRelatedField, StrictSerializerMixin
from tools_app.grants import ATTRIBUTE_NAME_RE, WHERE
from tools_app.kernel.limits import (
    MAX_ATTRIBUTE_VALUE,
    MAX_ATTRIBUTES,
    MAX_PINS,
    MAX_PROMPT_ARGUMENT_DESCRIPTION,
    MAX_PROMPT_ARGUMENTS,
)
from tools_app.models import ApiKey, Binding, LogLevel, McpInstance, Prompt, Tool
from tools_app.validators import PROMPT_ARGUMENT_NAME_RE

__all__ = [
    "ApiKeyCreatedSerializer",
    "ApiKeyCreateSerializer",
    "ApiKeySerializer",
    "BindingSerializer",
    "McpInstanceSerializer",
    "PromptSerializer",
]


class McpInstanceSerializer(FullCleanModelSerializer):
    """An MCP endpoint, `/mcp/<slug>/`, exposing the tools of its enabled bindings to MCP clients that send one
    of its API keys.
    """

    request_examples = {
        "shop": {
            "name": "Shop assistant",
            "slug": "shop-assistant",
            "description": "Orders and catalog tools.",
            "discovery": "list_all",
            "key_rate_limit": "120/minute",
        }
    }
    patch_examples = {"disable": {"enabled": False}}

    owner = serializers.CharField(source="owner.username", read_only=True)
    endpoint_url = serializers.SerializerMethodField(help_text="Absolute URL of the MCP endpoint /mcp/<slug>/.")
    log_level = serializers.ChoiceField(
        choices=LogLevel.choices,
        allow_blank=True,
        allow_null=True,
        required=False,
        help_text="Send MCP clients log messages (notifications/message) of every tool call at this level "
        "and above, on a streamed answer (debug: each step; info: the end; warning: failures). Empty or null: "
        "off, answered as an empty string. See docs/mcp-clients.md.",
    )

    class Meta:
        model = McpInstance
        fields = [
            "id",
            *services.INSTANCE_FIELDS,  # what the instance services write
            "endpoint_url",
            "owner",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["id", "endpoint_url", "owner", "created_at", "updated_at"]

    @extend_schema_field(serializers.URLField())
    def get_endpoint_url(self, instance) -> str:
        return instance.endpoint_url(self.context.get("request"))

    def validate_log_level(self, value: str | None) -> str:
        return value or ""  # null and "" both mean off

    def create(self, validated_data):
        return services.instance_create(owner=self.owner(), **validated_data)

    def update(self, instance, validated_data):
        return services.instance_update(instance=instance, force=self.context.get("force", False), **validated_data)


ATTRIBUTES_SCHEMA = {
    "type": "object",
    "maxProperties": MAX_ATTRIBUTES,
    "propertyNames": {"pattern": ATTRIBUTE_NAME_RE.pattern},
    "additionalProperties": {"type": "string", "maxLength": MAX_ATTRIBUTE_VALUE, "pattern": NO_NUL},
    "description": 'Values a binding\'s pinned arguments can take from this key ({"from": '
    '"key.attributes.<name>"}): a JSON object of strings, names of 1-64 characters of A-Z a-z 0-9 _ . - (another '
    "name is a 400 naming `attributes`). Fixed when the key is issued.",
}


@extend_schema_field(ATTRIBUTES_SCHEMA)
class KeyAttributesField(serializers.JSONField):
    """An API key's attributes; checked by the model (tools_app.grants.attribute_problems)."""


class ApiKeySerializer(serializers.ModelSerializer):
    """An API key of an MCP instance as listed: never its secret, only the prefix that identifies it."""

    revoked = serializers.BooleanField(read_only=True)
    attributes = KeyAttributesField(read_only=True)

    class Meta:
        model = ApiKey
        fields = [
            "id",
            "label",
            "prefix",
            "read_only",
            "attributes",
            "created_at",
            "last_used_at",
            "revoked_at",
            "revoked",
        ]
        read_only_fields = fields


class ApiKeyCreateSerializer(StrictSerializerMixin, serializers.ModelSerializer):
    """The key to issue: an optional label; `read_only` (the key sees and calls only tools that change no
    data) and `attributes` (values pinned arguments can take from it), both fixed for the key's life."""

    request_examples = {
        "labelled": {"label": "claude-desktop"},
        "read-only, one customer": {"label": "acme-agent", "read_only": True, "attributes": {"customer": "acme"}},
    }
    refuse_unknown_fields = True
    attributes = KeyAttributesField(required=False)

    class Meta:
        model = ApiKey
        fields = ["label", "read_only", "attributes"]
        extra_kwargs = {"label": {"required": False}, "read_only": {"required": False}}


class ApiKeyCreatedSerializer(serializers.Serializer):
    """The key just issued. The only response that ever holds the plaintext key: store it now."""

    # SPEC §6: on create only, {"id", "label", "key"}.

    id = serializers.IntegerField()
    label = serializers.CharField(allow_blank=True)
    key = serializers.CharField(help_text="The secret. Shown once: store it now; only its hash is kept.")
    read_only = serializers.BooleanField()
    attributes = KeyAttributesField()


# One pinned value: a constant, or a value of the caller (tools_app.grants).
PIN = {
    "oneOf": [
        {"type": "object", "properties": {"value": {}}, "required": ["value"], "additionalProperties": False},
        {
            "type": "object",
            "properties": {
                "from": {
                    "type": "string",
                    "pattern": "^(?:key\\.label|user\\.username|key\\.attributes\\.[A-Za-z0-9_.-]{1,64})$",
                }
            },
            "required": ["from"],
            "additionalProperties": False,
        },
    ]
}
PIN_SCHEMA = {
    "type": "object",
    "maxProperties": MAX_PINS,
    "description": "Arguments this binding fixes: hidden from the schema callers see, and refused when a caller "
    "sends them (INVALID_ARGUMENTS). Each names an argument the tool's input schema declares; a constant must "
    "pass that argument's schema, a value from the caller (a string) needs an argument taking a string or an "
    "array (then a one-item list). `where` is no argument: it narrows the records a read tool (query_data, "
    "select, get_all_data, preview, get_data_schema) sees to those whose fields equal its pinned values; a write "
    "or registry tool cannot take it. Otherwise a 400 naming `pinned_arguments`.",
    "properties": {
        WHERE: {
            "type": "object",
            "minProperties": 1,
            "maxProperties": MAX_PINS,
            "description": "Record field -> pinned value: the tool reads only the records whose fields equal "
            'them, e.g. {"customer": {"from": "key.attributes.customer"}}.',
            "additionalProperties": PIN,
        }
    },
    "additionalProperties": PIN,
}


@extend_schema_field(PIN_SCHEMA)
class PinnedArgumentsField(serializers.JSONField):
    """A binding's pinned arguments; checked against the tool's input schema by the model (Binding.clean)."""


class BindingSerializer(FullCleanModelSerializer):
    """One tool exposed on one MCP instance, optionally under another name or description. Effective names
    are unique within an instance, ignoring case: a collision is a 409 NAME_CONFLICT.
    """

    # Binding names are decided by binding_create/binding_update under the instance's lock, so the
    # collision is reported as NAME_CONFLICT (409) rather than as a generic unique-constraint error.
    full_clean_kwargs = {"validate_constraints": False}
    request_examples = {"bind": {"mcp_instance": 1, "tool": 1, "enabled": True, "name_override": "find_orders"}}
    patch_examples = {
        "rename": {"name_override": "orders_lookup"},
        "resource_uri": {"resource_uri": "orders://all"},
        "pin": {"pinned_arguments": {"field": {"value": "customer"}, "keys": {"from": "key.attributes.customer"}}},
    }

    pinned_arguments = PinnedArgumentsField(required=False)
    mcp_instance = OwnedPrimaryKeyRelatedField(McpInstance, help_text="Id of one of your MCP instances.")
    tool = OwnedPrimaryKeyRelatedField(Tool, help_text="Id of one of your tools.")
    effective_name = serializers.CharField(read_only=True, help_text="name_override, or the tool's name.")
    effective_description = serializers.CharField(read_only=True)

    class Meta:
        model = Binding
        fields = [
            "id",
            "mcp_instance",
            "tool",
            *services.BINDING_FIELDS,
            "effective_name",
            "effective_description",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["id", "effective_name", "effective_description", "created_at", "updated_at"]
        # The (instance, tool) pair is checked by binding_create with a clear message; DRF's generic
        # UniqueTogetherValidator would run first and only say "must make a unique set".
        validators = []

    def validate(self, attrs):
        attrs = super().validate(attrs)
        instance = attrs.get("mcp_instance", getattr(self.instance, "mcp_instance", None))
        tool = attrs.get("tool", getattr(self.instance, "tool", None))
        others = Binding.objects.filter(mcp_instance=instance, tool=tool)
        if self.instance is not None:
            others = others.exclude(pk=self.instance.pk)
        # Friendly pre-check (the service and the constraint are the guarantee): without it a second
        # binding of the same tool would read as a name conflict with itself.
        if others.exists():
            raise serializers.ValidationError(
                {"tool": [f"The tool {tool.name!r} is already bound to the instance {instance.name!r}."]}
            )
        return attrs

    def create(self, validated_data):
        return services.binding_create(**validated_data)

    def update(self, instance, validated_data):
        return services.binding_update(binding=instance, force=self.context.get("force", False), **validated_data)


@extend_schema_field(
    {
        "type": "array",
        "maxItems": MAX_PROMPT_ARGUMENTS,
        "description": "The prompt's arguments (at most 20, names distinct); each is a `{{name}}` of the template.",
        "items": {
            "type": "object",
            "additionalProperties": False,
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "pattern": PROMPT_ARGUMENT_NAME_RE.pattern},
                "description": {"type": "string", "maxLength": MAX_PROMPT_ARGUMENT_DESCRIPTION, "pattern": NO_NUL},
                "required": {"type": "boolean", "default": False},
            },
        },
    }
)
class PromptArgumentsField(serializers.JSONField):
    """A prompt's arguments as JSON; checked by the model (tools_app.validators.validate_prompt_arguments)."""


class PromptSerializer(FullCleanModelSerializer):
    """A prompt template an MCP instance serves to MCP clients (prompts/list, prompts/get) besides the built-in
    `usage_guide`. `{{name}}` in the template is replaced by the value of the argument `name`; every placeholder
    must be a declared argument. Names are unique per instance ignoring case (a duplicate is a 409 NAME_CONFLICT)
    and cannot be `usage_guide`.
    """

    full_clean_kwargs = {"validate_constraints": False}
    refuse_unknown_fields = True
    request_examples = {
        "weekly report": {
            "name": "weekly_report",
            "title": "Weekly report",
            "description": "Draft the weekly sales report of one region.",
            "arguments": [{"name": "region", "description": "Region name, e.g. EMEA.", "required": True}],
            "template": "Write the weekly sales report for {{region}}, using the orders tools of this server.",
        }
    }
    patch_examples = {"disable": {"enabled": False}}

    arguments = PromptArgumentsField(required=False)

    class Meta:
        model = Prompt
        fields = [
            "id",
            "mcp_instance",
            "name",
            "title",
            "description",
            "arguments",
            "template",
            "enabled",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["id", "mcp_instance", "created_at", "updated_at"]
        extra_kwargs = {"template": {"trim_whitespace": False}}
        # Names are checked by Prompt.clean() and the service (NAME_CONFLICT, ignoring case).
        validators = []

    def create(self, validated_data):
        return services.prompt_create(**validated_data)

    def update(self, instance, validated_data):
        return services.prompt_update(prompt=instance, **validated_data)
