"""Registry endpoints that can reach an MCP instance (SPEC §6): search, an instance's usage guide and export.

They live in mcp_app because they need InstanceScope (tools_app.registry.instance_scope) as well as tools_app's
UserScope, and dependencies point one way (STYLE: mcp_app builds on tools_app, never the reverse).
/api/search/ searches the caller's own tools, or one of the caller's instances with ?mcp_instance=.
Another user's instance is a 404 (SPEC §2); as a search parameter it reads "does not exist".
"""

import dataclasses

from django.urls import path
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from tools_app import registry
from tools_app.api.registry import (
    EXPORT_RESPONSE,
    FORMAT_PARAMETER,
    ExportFormatNegotiation,
    ExportQuerySerializer,
    query_params,
)
from tools_app.api.views import get_owned_or_404
from tools_app.grants import FULL_GRANT, Grant
from tools_app.kernel.limits import SEARCH_MAX_RESULTS, SEARCH_QUERY_MAX_CHARS
from tools_app.models import ApiKey, McpInstance
from tools_app.registry.instance_scope import InstanceScope
from tools_app.registry.scope import UserScope

__all__ = ["InstanceExportView", "InstanceGuideView", "SearchView", "urlpatterns"]


class CallerQuerySerializer(serializers.Serializer):
    """Whose view of an instance's tools (tools_app.grants): by default the owner's, every enabled binding."""

    key = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=2**63 - 1,
        help_text="The tools this API key of the instance sees over MCP (a read-only key: none that changes data; "
        "bindings whose pinned arguments need an attribute it lacks left out). Not one of the instance's keys: 400.",
    )
    read_only = serializers.BooleanField(
        required=False,
        default=False,
        help_text="The tools a read-only caller sees (a read-only key, an OAuth token without tools:all). On "
        "/api/search/, `key` and `read_only` need `mcp_instance` (else a 400 naming it).",
    )


def caller_scope(instance: McpInstance, params: dict) -> InstanceScope:
    """The instance's registry scope as the caller the query names (`key`, `read_only`) sees it."""
    grant = FULL_GRANT
    key_id = params.get("key")
    if key_id is not None:
        key = ApiKey.objects.filter(pk=key_id, mcp_instance=instance, revoked_at__isnull=True).first()
        if key is None:
            raise serializers.ValidationError({"key": [f"No active API key with id {key_id} on this instance."]})
        grant = Grant.of_key(
            read_only=key.read_only, label=key.label, attributes=key.attributes, username=instance.owner.username
        )
    if params.get("read_only") and grant.writes:
        grant = dataclasses.replace(grant, writes=False)
    return InstanceScope(instance, grant)


class SearchQuerySerializer(CallerQuerySerializer):
    q = serializers.CharField(
        max_length=SEARCH_QUERY_MAX_CHARS,
        trim_whitespace=True,
        help_text=f"What the tool should do, at most {SEARCH_QUERY_MAX_CHARS:,} characters (or a regex pattern).",
    )
    # Not a ChoiceField: an unknown method is INVALID_SEARCH_METHOD (SPEC §5, §6), decided by the registry.
    method = serializers.CharField(required=False, default="bm25", max_length=32)
    limit = serializers.IntegerField(required=False, default=5, min_value=1, max_value=SEARCH_MAX_RESULTS)
    mcp_instance = serializers.IntegerField(
        required=False, min_value=1, max_value=2**63 - 1, help_text="Search this instance's bindings (one of yours)."
    )

    def validate_mcp_instance(self, value):
        user = self.context["request"].user
        instance = McpInstance.objects.for_user(user).filter(pk=value).first()
        if instance is None:
            # A reference to an object the caller cannot see reads as "does not exist" (SPEC §6).
            raise serializers.ValidationError(f"No MCP instance with id {value}.")
        return instance


class GuideQuerySerializer(CallerQuerySerializer):
    tool_names = serializers.CharField(
        required=False, allow_blank=True, max_length=10000, help_text="Comma-separated tool names."
    )
    category = serializers.CharField(required=False, allow_blank=True, max_length=50)


SEARCH_RESPONSE = inline_serializer(
    "SearchResponse",
    {
        "query": serializers.CharField(),
        "method": serializers.CharField(),
        "count": serializers.IntegerField(),
        "results": inline_serializer(
            "SearchResult",
            {
                "tool_name": serializers.CharField(),
                "tool_id": serializers.IntegerField(),
                "description": serializers.CharField(),
                "score": serializers.FloatField(),
                "match_reason": serializers.CharField(),
            },
            many=True,
        ),
    },
)
GUIDE_RESPONSE = inline_serializer(
    "UsageGuideResponse",
    {
        "content": serializers.CharField(
            help_text="Markdown (CommonMark). The whole answer fits the instance's max_result_bytes (at most 50 KB): "
            "named tools get complete entries; otherwise the complete entries when they fit, else the compact form, "
            "paged by category (`metadata.categories_not_included`)."
        ),
        "warnings": serializers.ListField(child=serializers.CharField()),
        "metadata": inline_serializer(
            "UsageGuideMetadata",
            {
                "total_tools": serializers.IntegerField(),
                "filtered_count": serializers.IntegerField(),
                "included_count": serializers.IntegerField(),
                "invalid_names": serializers.ListField(child=serializers.CharField()),
                "truncated": serializers.BooleanField(),
                "form": serializers.ChoiceField(choices=["full", "compact"]),
                "categories_not_included": serializers.ListField(
                    child=serializers.CharField(), help_text="Categories left out: ask for each with `category`."
                ),
                "generation_time_ms": serializers.FloatField(),
            },
        ),
    },
)


class SearchView(APIView):
    @extend_schema(
        operation_id="registry_search",
        summary="Search your tools, or the tools of one of your MCP instances",
        description="With `method=regex`, `q` is an RE2 regular expression: one that does not compile is a 400 "
        "INVALID_QUERY. An `mcp_instance` that is not one of yours is a 400 naming it.",
        parameters=[
            SearchQuerySerializer,
            # Not an enum in the serializer (an unknown method is INVALID_SEARCH_METHOD), but one in the schema.
            OpenApiParameter("method", OpenApiTypes.STR, enum=list(registry.METHODS), default="bm25"),
        ],
        responses={200: SEARCH_RESPONSE},
    )
    def get(self, request):
        params = query_params(SearchQuerySerializer, request)
        instance = params.get("mcp_instance")
        if instance is None and (params.get("key") is not None or params.get("read_only")):
            raise serializers.ValidationError({"mcp_instance": ["`key` and `read_only` need an mcp_instance."]})
        scope = caller_scope(instance, params) if instance is not None else UserScope(request.user)
        result = registry.search_tools(scope=scope, query=params["q"], method=params["method"], limit=params["limit"])
        result.pop("markdown", None)
        return Response(result)


class InstanceGuideView(APIView):
    @extend_schema(
        operation_id="mcp_instance_guide",
        summary="The usage guide (Markdown) of an MCP instance's enabled tools",
        description="A `category` that none of the instance's tools has is a 400 INVALID_CATEGORY listing those "
        "that exist; unknown `tool_names` are reported in `metadata.invalid_names`.",
        parameters=[GuideQuerySerializer],
        responses={200: GUIDE_RESPONSE},
    )
    def get(self, request, pk):
        instance = get_owned_or_404(McpInstance, request.user, pk)
        params = query_params(GuideQuerySerializer, request)
        result = registry.usage_guide(
            scope=caller_scope(instance, params),
            tool_names=params.get("tool_names") or None,
            category=params.get("category"),
        )
        return Response(result)


class InstanceExportQuerySerializer(ExportQuerySerializer, CallerQuerySerializer):
    pass


class InstanceExportView(APIView):
    content_negotiation_class = ExportFormatNegotiation

    @extend_schema(
        operation_id="mcp_instance_export",
        summary="An MCP instance's enabled tools as function-calling schemas: mcp, openai or anthropic",
        parameters=[FORMAT_PARAMETER, CallerQuerySerializer],
        responses={200: EXPORT_RESPONSE},
    )
    def get(self, request, pk):
        instance = get_owned_or_404(McpInstance, request.user, pk)
        params = query_params(InstanceExportQuerySerializer, request)
        return Response(registry.export_tools(scope=caller_scope(instance, params), format=params["format"]))


# Included by toolhub/api_urls.py BEFORE the routers, so the router's mcp-instances/<pk>/ does not see these.
urlpatterns = [
    path("search/", SearchView.as_view(), name="search"),
    path("mcp-instances/<str:pk>/guide/", InstanceGuideView.as_view(), name="mcp-instance-guide"),
    path("mcp-instances/<str:pk>/export/", InstanceExportView.as_view(), name="mcp-instance-export"),
]
