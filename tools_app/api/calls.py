"""GET /api/calls/ and /api/calls/<id>/: the call log, as the client saw each call (SPEC §10, docs/call-log.md).

Owner-scoped like every list (another owner's call is a 404); newest first; filtered like the admin's list
(instance, tool, surface, status, and a time window). What is shown of the arguments and the result was
redacted and bounded when the call was recorded (tools_app.execution.call_details): nothing here redacts again.
"""

from django_filters import rest_framework as filters
from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_view
from rest_framework import serializers, viewsets

from tools_app.api.filters import StrictFilterSet, UtcDateTimeFilter
from tools_app.api.views import OwnedViewSetMixin
from tools_app.models import CallLog, CallStatus, Surface

__all__ = ["CallFilterSet", "CallSerializer", "CallViewSet"]

JSON_VALUE = {"description": "Any JSON value, or null when not recorded.", "nullable": True}


class CallSerializer(serializers.ModelSerializer):
    """One tool call: who called what, through which surface, how it ended and how long it took, with its
    arguments and an excerpt of its result (or its error) as the client got them, redacted and bounded."""

    tool = serializers.IntegerField(source="tool_id", allow_null=True, help_text="The tool's id; null if deleted.")
    instance = serializers.IntegerField(
        source="mcp_instance_id", allow_null=True, help_text="The MCP instance's id; null for API and admin calls."
    )
    instance_slug = serializers.SerializerMethodField(help_text="The MCP instance's slug, or null.")
    caller = serializers.SerializerMethodField(help_text="Who called (over MCP, the key's owner); null if deleted.")
    api_key = serializers.SerializerMethodField(help_text="The MCP API key's label and prefix, or null.")
    arguments = serializers.SerializerMethodField(
        help_text="The arguments the client sent, as JSON (redacted; cut inside its structure and marked when "
        "`arguments_truncated`); null when the instance records metadata only."
    )
    result_excerpt = serializers.SerializerMethodField(
        help_text="The result the client got, or for a failed call its error `{error, message, details}`, as JSON "
        "(redacted; cut and marked when `result_truncated`); null when not recorded."
    )
    notes = serializers.CharField(
        read_only=True,
        help_text="What the call's reads suggest (a table query slow on fields the table does not index: which to "
        "declare in its indexed_fields); empty when nothing.",
    )
    details_recorded = serializers.BooleanField(
        read_only=True,
        help_text="Whether arguments and result_excerpt were recorded (false: the instance records metadata only, "
        "or the owner's oldest details were dropped to keep within the storage bound).",
    )

    class Meta:
        model = CallLog
        fields = [
            "id",
            "created_at",
            "tool",
            "tool_name",
            "instance",
            "instance_slug",
            "surface",
            "status",
            "error_code",
            "error_message",
            "duration_ms",
            "caller",
            "api_key",
            "oauth_client",
            "details_recorded",
            "arguments",
            "arguments_truncated",
            "result_excerpt",
            "result_truncated",
            "notes",
        ]
        read_only_fields = fields

    def get_instance_slug(self, call: CallLog) -> str | None:
        return call.mcp_instance.slug if call.mcp_instance is not None else None

    def get_caller(self, call: CallLog) -> str | None:
        return call.user.username if call.user is not None else None

    def get_api_key(self, call: CallLog) -> str | None:
        return str(call.api_key) if call.api_key is not None else None

    @extend_schema_field(JSON_VALUE)
    def get_arguments(self, call: CallLog):
        return call.arguments_value

    @extend_schema_field(JSON_VALUE)
    def get_result_excerpt(self, call: CallLog):
        return call.result_value


def _by_id_or_name(queryset, field: str, value: str, *, name_field: str):
    """Calls whose `field` id is `value` (digits), or whose `name_field` is `value`."""
    if value.isascii() and value.isdigit():
        number = int(value)
        return queryset.filter(**{f"{field}_id": number}) if number < 2**63 else queryset.none()
    return queryset.filter(**{name_field: value})


class CallFilterSet(StrictFilterSet):
    """Filters of the call log, as the admin's list has them; `instance` and `tool` take an id or a name."""

    instance = filters.CharFilter(
        method="filter_instance", max_length=100, help_text="An MCP instance's id or slug: only calls made through it."
    )
    tool = filters.CharFilter(
        method="filter_tool", max_length=64, help_text="A tool's id, or the name calls used: only calls of that tool."
    )
    surface = filters.ChoiceFilter(choices=Surface.choices, help_text="Only calls through this surface.")
    status = filters.ChoiceFilter(choices=CallStatus.choices, help_text="Only calls that ended ok, or in error.")
    error_code = filters.CharFilter(max_length=40, help_text="Only failed calls with this error code.")
    created_after = UtcDateTimeFilter(
        field_name="created_at", lookup_expr="gte", help_text="Only calls made at or after this time (ISO 8601)."
    )
    created_before = UtcDateTimeFilter(
        field_name="created_at", lookup_expr="lt", help_text="Only calls made before this time (ISO 8601)."
    )

    class Meta:
        model = CallLog
        fields = ["instance", "tool", "surface", "status", "error_code", "created_after", "created_before"]

    def filter_instance(self, queryset, name, value):
        return _by_id_or_name(queryset, "mcp_instance", value, name_field="mcp_instance__slug")

    def filter_tool(self, queryset, name, value):
        return _by_id_or_name(queryset, "tool", value, name_field="tool_name")


@extend_schema_view(
    list=extend_schema(summary="List your tool calls, newest first (the call log)"),
    retrieve=extend_schema(summary="Get one tool call: its arguments and result excerpt as the client saw them"),
)
class CallViewSet(OwnedViewSetMixin, viewsets.ReadOnlyModelViewSet):
    """The call log: every tool call on every surface (MCP, the API, the admin's try-it) of your tools."""

    queryset = CallLog.objects.all()
    serializer_class = CallSerializer
    select_related = ("mcp_instance", "user", "api_key")
    filterset_class = CallFilterSet
    ordering_fields = ["id", "created_at", "duration_ms"]
