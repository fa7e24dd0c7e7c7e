"""Declarative setup over the API: export an owner's setup as one document, plan and apply one
(tools_app.services.setup; docs/setup.md). The views parse and answer; the work is the service's."""

from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from tools_app import services
from tools_app.api import streamed
from tools_app.api.parsers import JSONParser
from tools_app.api.schema import ErrorSerializer
from tools_app.api.views import FORCE_PARAMETER, force_requested, in_use_response
from tools_app.models import McpInstance, Table, TableStorage
from tools_app.services import setup

__all__ = ["SetupApplyView", "SetupExportView", "SetupPlanView"]

EXAMPLE_DOCUMENT = {
    "toolhub_setup": 1,
    "scope": {"instance": "shop"},
    "tables": [{"name": "orders", "description": "The shop's orders."}],
    "tools": [
        {
            "name": "orders_query",
            "type": "query_data",
            "table": "orders",
            "json_path": "",
            "description": "Run a JMESPath expression over the orders.",
        }
    ],
    "instances": [
        {
            "slug": "shop",
            "name": "Shop",
            "bindings": [{"tool": "orders_query", "enabled": True}],
            "prompts": [],
        }
    ],
}
DOCUMENT_RULES = (
    "The document is the one GET /api/setup/export/ answers: tables, tools and instances (with their bindings and "
    "prompts) named by their names and slugs, never by ids. Each object must pass the same rules as on its own "
    "endpoint (a tool's type rules, a free slug, ...): a bad document is a 400 naming the field by its path "
    '(`tools.2.type`), and nothing is written. Scope "owner" (the default) also deletes your tables, tools and '
    'instances the document does not name; {"instance": slug} only that instance\'s bindings and prompts it does '
    "not name."
)
SETUP_REFUSALS = {
    400: OpenApiResponse(
        ErrorSerializer,
        description="VALIDATION_ERROR naming the field by its path in the document (`tools.2.type`, "
        "`instances.0.bindings.1.tool`): a bad structure, a name given twice, a reference to a table or tool the "
        "document does not hold, a value its object's own rules refuse, a slug another user has.",
    ),
}


def _truthy(request, name: str) -> bool:
    """A boolean query parameter (true/false, 1/0; absent = false); anything else is a 400 naming it."""
    value = request.query_params.get(name)
    if value is None or value.strip().lower() in ("false", "0"):
        return False
    if value.strip().lower() in ("true", "1"):
        return True
    raise serializers.ValidationError({name: ["Must be true or false."]})


class SetupChangeSerializer(serializers.Serializer):
    """One change: what is created, updated or deleted."""

    action = serializers.ChoiceField(choices=["create", "update", "delete"])
    kind = serializers.ChoiceField(choices=["table", "tool", "instance", "binding", "prompt"])
    name = serializers.CharField(
        help_text="The table's or tool's name, the instance's slug, `<slug>/<tool>` for a "
        "binding, `<slug>/<prompt>` for a prompt."
    )
    fields = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="An update: the fields it changes."
    )
    used_by = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        help_text="A delete or breaking change of something in use: who uses it "
        "(`[{instance, tool, tool_id, bound, calls, last_called, clients}]`); applying it needs ?force=true.",
    )


class SetupPlanSerializer(serializers.Serializer):
    """What applying the document would change; empty when your setup already is what it says."""

    changes = SetupChangeSerializer(many=True)


class SetupApplySerializer(serializers.Serializer):
    """The changes made, all in one transaction."""

    changes = SetupChangeSerializer(many=True)
    applied = serializers.BooleanField()


@extend_schema(
    tags=["setup"],
    summary="Export your setup (or one instance's) as one document",
    description="Tables (their data with ?data=true), tools, instances with their bindings and prompts, named by "
    "names and slugs. API keys are never exported. Plan or apply the document (edited or not) with "
    "POST /api/setup/plan/ and /api/setup/apply/; two of your tables (or tools) with one name cannot be exported "
    "(a 400 naming them: rename one).",
    parameters=[
        OpenApiParameter(
            "instance",
            OpenApiTypes.STR,
            OpenApiParameter.QUERY,
            required=False,
            description="The slug of one of your instances: only it, the tools it binds and their tables.",
        ),
        OpenApiParameter(
            "data",
            OpenApiTypes.BOOL,
            OpenApiParameter.QUERY,
            required=False,
            description="true: each table's data too (default false: metadata only).",
        ),
    ],
    responses={200: OpenApiTypes.OBJECT},
)
class SetupExportView(APIView):
    def get(self, request, *args, **kwargs):
        slug = request.query_params.get("instance")
        with_data = _truthy(request, "data")
        encoding = streamed.json_encoding(request) if with_data else None
        parts: dict = {}

        def data_of(table: Table):
            # A rows table's data streams in its place (tools_app.api.streamed), each table in its own snapshot.
            if table.storage != TableStorage.ROWS or encoding is None:
                return services.table_data(table.pk)[1]
            marker = streamed.placeholder(len(parts))
            parts[marker] = streamed.deferred_document_text(table.pk, None, encoding)
            return marker

        try:
            document = setup.setup_export(owner=request.user, instance_slug=slug, with_data=with_data, data_of=data_of)
        except McpInstance.DoesNotExist as exc:
            raise Http404(f"No instance of yours has the slug {slug!r}.") from exc
        if parts and encoding is not None:
            return streamed.spliced_response(request, document, parts, encoding)
        return Response(document)


@extend_schema(
    tags=["setup"],
    summary="Plan a setup document: what applying it would change",
    description=DOCUMENT_RULES + " Nothing is written. A change of something in use carries `used_by`.",
    request={"application/json": OpenApiTypes.OBJECT},
    examples=[OpenApiExample("one instance", value=EXAMPLE_DOCUMENT, request_only=True)],
    responses={200: SetupPlanSerializer, **SETUP_REFUSALS},
)
class SetupPlanView(APIView):
    parser_classes = [JSONParser]

    def post(self, request, *args, **kwargs):
        changes = setup.setup_plan(owner=request.user, document=request.data)
        return Response({"changes": [change.as_dict() for change in changes]})


@extend_schema(
    tags=["setup"],
    summary="Apply a setup document, all or nothing",
    description=DOCUMENT_RULES + " All the changes are made in one transaction, or none; applying the same "
    "document again changes nothing. A delete or a breaking change (a rename, an input schema that refuses calls) "
    "of something in use needs ?force=true.",
    request={"application/json": OpenApiTypes.OBJECT},
    examples=[OpenApiExample("one instance", value=EXAMPLE_DOCUMENT, request_only=True)],
    parameters=[FORCE_PARAMETER],
    responses={
        200: SetupApplySerializer,
        **SETUP_REFUSALS,
        409: in_use_response("deletes or breaks something"),
    },
)
class SetupApplyView(APIView):
    parser_classes = [JSONParser]

    def post(self, request, *args, **kwargs):
        force = force_requested(request)
        changes = setup.setup_apply(owner=request.user, document=request.data, force=force)
        return Response({"changes": [change.as_dict() for change in changes], "applied": True})
