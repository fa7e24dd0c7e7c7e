"""Registry endpoints over the caller's own tools (SPEC §6): one tool's export, and the pieces the
instance-scoped registry endpoints in tools_app.api.instance_registry reuse.

Thin views over tools_app.registry: query parameters are checked by small serializers (a bad one is
a 400 VALIDATION_ERROR naming it), registry failures are ToolErrors turned into `{"error", "message"}`
by the API's exception handler. /api/search/ and the instance guide and export (over an instance's
bindings, tools_app.registry.instance_scope) are in tools_app.api.instance_registry.
"""

from django.urls import path
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.response import Response
from rest_framework.views import APIView

from tools_app import registry
from tools_app.api.views import get_owned_or_404
from tools_app.models import Tool

__all__ = [
    "EXPORT_RESPONSE",
    "FORMAT_PARAMETER",
    "ExportFormatNegotiation",
    "ExportQuerySerializer",
    "ToolExportView",
    "query_params",
    "urlpatterns",
]


class ExportQuerySerializer(serializers.Serializer):
    format = serializers.ChoiceField(choices=registry.FORMATS, required=False, default="mcp")


EXPORT_RESPONSE = inline_serializer(
    "ExportResponse",
    {
        "format": serializers.CharField(),
        "count": serializers.IntegerField(),
        "tools": serializers.ListField(child=serializers.DictField()),
        "name_map": serializers.DictField(child=serializers.CharField(), help_text="exported name -> toolhub name"),
        "notes": serializers.ListField(child=serializers.CharField()),
    },
)
FORMAT_PARAMETER = OpenApiParameter("format", OpenApiTypes.STR, enum=list(registry.FORMATS), default="mcp")


class _NoFormatOverride:
    URL_FORMAT_OVERRIDE = None


class ExportFormatNegotiation(DefaultContentNegotiation):
    """`?format=` is the export format here (SPEC §6), not DRF's renderer override."""

    settings = _NoFormatOverride()


def query_params(serializer_class, request):
    """The validated query parameters, or a 400 VALIDATION_ERROR naming the bad ones."""
    serializer = serializer_class(data=request.query_params, context={"request": request})
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


class ToolExportView(APIView):
    content_negotiation_class = ExportFormatNegotiation

    @extend_schema(
        operation_id="tool_export",
        summary="One tool as a function-calling schema: mcp, openai or anthropic",
        parameters=[FORMAT_PARAMETER],
        responses={200: EXPORT_RESPONSE},
    )
    def get(self, request, pk):
        tool = get_owned_or_404(Tool, request.user, pk)
        params = query_params(ExportQuerySerializer, request)
        return Response(registry.export_tool(tool=tool, format=params["format"]))


# Included by toolhub/api_urls.py BEFORE the routers, so /tools/<id>/export/ is not shadowed.
urlpatterns = [
    path("tools/<str:pk>/export/", ToolExportView.as_view(), name="tool-export"),
]
