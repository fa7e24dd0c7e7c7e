"""From data to tools in one step: import a table from a file, generate its standard tools,
bind many tools at once. The views parse and answer; the work is the services' (imports, generate,
binding_create_many), shared with the admin.
"""

import json
import os
import uuid
from collections.abc import Iterator
from typing import IO

from django.core.validators import RegexValidator
from django.http import HttpResponse, QueryDict, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import parsers, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from tools_app import services
from tools_app.api.instance_serializers import BindingSerializer
from tools_app.api.parsers import JSONParser
from tools_app.api.renderers import JSONRenderer
from tools_app.api.schema import ErrorSerializer
from tools_app.api.serializers import OwnedPrimaryKeyRelatedField, StrictSerializer, TableSerializer, ToolSerializer
from tools_app.api.views import get_owned_or_404
from tools_app.kernel.limits import GENERATED_MAX_PREFIX_CHARS, MAX_BULK_TOOLS
from tools_app.kernel.streaming import streaming_response
from tools_app.models import McpInstance, Table, Tool
from tools_app.toolsets import generate_tools
from tools_app.validators import validate_json_pointer

__all__ = ["BulkBindingView", "GenerateToolsView", "TableImportView"]

IGNORED_FORM_FIELDS = {"csrfmiddlewaretoken"}


class StrictFormSerializer(StrictSerializer):
    """The data tools' bodies, JSON or multipart form: strict types and no unknown field
    (serializers.StrictSerializerMixin, which the schema states as `additionalProperties: false`); a multipart
    body's unknown fields are refused here too (the mixin checks JSON bodies only)."""

    refuse_unknown_fields = True
    unknown_field_message = "Unknown field. The fields are: {names}."

    def to_internal_value(self, data):
        if isinstance(data, QueryDict):
            unknown = sorted(str(key) for key in data if key not in self.fields and key not in IGNORED_FORM_FIELDS)
            if unknown:
                message = self.unknown_field_message.replace("{names}", ", ".join(sorted(self.fields)))
                raise serializers.ValidationError({key: [message] for key in unknown})
        return super().to_internal_value(data)


class TableImportSerializer(StrictFormSerializer):
    """A file to import as a new table (multipart/form-data)."""

    request_examples = {"csv": {"file": "sku,name,price\nKB-01,Keyboard,49.5\n", "name": "products", "format": "csv"}}

    file = serializers.FileField(
        help_text="The data: a JSON document, a CSV with a header line, or NDJSON (one JSON value per line), UTF-8."
    )
    name = serializers.CharField(max_length=200, help_text="The new table's name.")
    description = serializers.CharField(required=False, allow_blank=True, max_length=10_000, default="")
    format = serializers.ChoiceField(
        choices=services.IMPORT_FORMATS,
        required=False,
        help_text="json, csv or ndjson; default: from the file name (.json, .csv/.tsv, .ndjson/.jsonl).",
    )


@extend_schema(
    tags=["tables"],
    summary="Create a table from a JSON, CSV or NDJSON file",
    description=(
        "Multipart upload. A CSV's first line is its header; each row becomes an object keyed by it, with cells "
        "typed where the text is a value's canonical form (integers, numbers, true/false; empty = null). A bad "
        "file is a 400 VALIDATION_ERROR whose `fields.file` names the line (and row) and what is wrong; nothing "
        "is created. The table limits apply (TOOLHUB_MAX_TABLE_BYTES, TOOLHUB_MAX_TABLE_DEPTH; docs/input-limits.md)."
    ),
    request={"multipart/form-data": TableImportSerializer},
    responses={
        201: TableSerializer,
        429: OpenApiResponse(
            ErrorSerializer,
            description="RATE_LIMITED: too many imports at once (TOOLHUB_IMPORTS_PER_OWNER, "
            "TOOLHUB_IMPORTS_PER_WORKER); `Retry-After` says when to try again. Nothing was read or written.",
        ),
    },
)
class TableImportView(APIView):
    parser_classes = [parsers.MultiPartParser]

    def post(self, request, *args, **kwargs):
        body = TableImportSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        upload = body.validated_data["file"]
        fmt = services.import_format(upload.name, body.validated_data.get("format"))
        with services.table_import(
            owner=request.user,
            name=body.validated_data["name"],
            description=body.validated_data["description"],
            file=upload,
            fmt=fmt,
        ) as imported:
            return imported_table_response(request, imported)


# An answer up to this size is assembled in memory; a larger one (an import of millions of rows) is streamed.
STREAM_ANSWER_BYTES = 8 * 1024 * 1024
ANSWER_CHUNK = 1 << 20


def imported_table_response(request, imported: services.ImportedTable) -> HttpResponse | StreamingHttpResponse:
    """201 with the table as TableSerializer shows it, its `data` copied from the import's JSON text: a large
    document is not parsed back into Python values only to be written out again. Up to STREAM_ANSWER_BYTES the
    answer is read once into memory; above it the answer streams, the document's text read from the import's own
    file (its descriptor duplicated, so that it outlives the import's block) between the body's head and tail:
    the table's text is never held whole, nor copied."""
    serializer = TableSerializer(imported.table, context={"request": request})
    serializer.fields.pop("data")
    shown = serializer.data
    marker = f"data-{uuid.uuid4().hex}"
    body = {name: marker if name == "data" else shown[name] for name in TableSerializer.Meta.fields}
    before, after = JSONRenderer().render(body).split(json.dumps(marker).encode(), 1)
    document = imported.document.buffer  # type: ignore[attr-defined]
    document.seek(0)
    length = len(before) + os.fstat(document.fileno()).st_size + len(after)
    if length <= STREAM_ANSWER_BYTES:
        return HttpResponse(
            before + document.read() + after, status=status.HTTP_201_CREATED, content_type="application/json"
        )
    text = os.fdopen(os.dup(document.fileno()), "rb")
    text.seek(0)
    response = streaming_response(
        request, _answer_chunks(before, text, after), status=status.HTTP_201_CREATED, content_type="application/json"
    )
    response["Content-Length"] = str(length)
    return response


def _answer_chunks(before: bytes, document: IO[bytes], after: bytes) -> Iterator[bytes]:
    """The answer in pieces of at most ANSWER_CHUNK bytes: `before`, the document's text, `after`; the document's
    file is closed at the end (or when the answer is abandoned)."""
    try:
        for start in range(0, len(before), ANSWER_CHUNK):
            yield before[start : start + ANSWER_CHUNK]
        while chunk := document.read(ANSWER_CHUNK):
            yield chunk
        for start in range(0, len(after), ANSWER_CHUNK):
            yield after[start : start + ANSWER_CHUNK]
    finally:
        document.close()


class GenerateToolsSerializer(StrictFormSerializer):
    """Which tools to generate for a mount of the table, and where to bind them."""

    request_examples = {"read tools, bound": {"mcp_instance": 1, "json_path": "", "writes": False}}

    mcp_instance = OwnedPrimaryKeyRelatedField(
        McpInstance,
        required=False,
        allow_null=True,
        help_text="Id of one of your MCP instances: each tool is bound there too. Omitted or null: no bindings.",
    )
    json_path = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=500,
        validators=[validate_json_pointer],
        help_text="JSON Pointer; default the root.",
    )
    writes = serializers.BooleanField(
        required=False, default=False, help_text="Also generate create, update and delete (default false)."
    )
    preview_keys = serializers.ListField(
        child=serializers.CharField(max_length=200),
        required=False,
        allow_empty=False,
        max_length=50,
        help_text="The fields the preview tool keeps; default the key field and the first fields by name.",
    )
    name_prefix = serializers.CharField(
        required=False,
        max_length=GENERATED_MAX_PREFIX_CHARS,
        validators=[
            RegexValidator(
                r"^[A-Za-z0-9_.-]+\Z", "Letters, digits, '_', '.' and '-' only (tool names allow no others)."
            )
        ],
        help_text="Tool names are <prefix>_schema, <prefix>_query, ...; default from the table's name.",
    )
    overwrite_edited = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Generating again updates the tools generated before; one whose text you edited since is kept "
        "(its change is `kept`, with the diff) unless this is true.",
    )


class FieldDiffSerializer(serializers.Serializer):
    """A generated field's current value and the value generation wrote (or would write, when kept)."""

    old = serializers.JSONField(allow_null=True)
    new = serializers.JSONField(allow_null=True)


class ToolSetChangeSerializer(serializers.Serializer):
    """What generation did to one tool."""

    name = serializers.CharField()
    action = serializers.ChoiceField(
        choices=["create", "update", "unchanged", "kept"],
        help_text="create: a new tool; update: a tool generated before, brought up to date; unchanged: already "
        "up to date; kept: edited by you since it was generated, left as it is (overwrite_edited=true rewrites it).",
    )
    diff = serializers.DictField(
        child=FieldDiffSerializer(),
        help_text="For update and kept: each of description, output_schema and examples that differs.",
    )


class GeneratedToolsSerializer(serializers.Serializer):
    """The tools of the set (created or generated before), the bindings made when an instance was given, and
    what happened to each tool."""

    tools = ToolSerializer(many=True)
    bindings = BindingSerializer(many=True)
    notes = serializers.ListField(child=serializers.CharField(), help_text="What was not generated, and why.")
    changes = ToolSetChangeSerializer(many=True)


@extend_schema(
    tags=["tables"],
    summary="Generate the standard tools of a table mount (and bind them)",
    description=(
        "Creates schema, all, query, preview and select tools (create, update and delete with writes=true), named "
        "<prefix>_<kind> from the table's name, with descriptions and output schemas derived from the data: "
        "record count, fields with types and example values, the key field, and example queries that were run "
        "on this data. `json_path` must lead to an array or object in the table and `preview_keys` must name "
        "fields of its records (else a 400 naming the field). Text from the data is quoted and cleaned (no control "
        "or bidi characters, bounded length). Generating again for the same mount updates the tools generated "
        "before (200; `changes` gives each tool's diff), never one you edited since unless overwrite_edited=true. "
        "All or nothing: a name used by another of your tools or on the instance is a 409 NAME_CONFLICT, and "
        "nothing is written."
    ),
    parameters=[OpenApiParameter("id", OpenApiTypes.INT, OpenApiParameter.PATH, description="Table id.")],
    request=GenerateToolsSerializer,
    responses={
        201: OpenApiResponse(GeneratedToolsSerializer, description="At least one tool was created."),
        200: OpenApiResponse(
            GeneratedToolsSerializer, description="Every tool was generated before: updated, unchanged or kept."
        ),
    },
)
class GenerateToolsView(APIView):
    parser_classes = [JSONParser]

    def post(self, request, pk=None, *args, **kwargs):
        table = get_owned_or_404(Table, request.user, pk)
        body = GenerateToolsSerializer(data=request.data, context={"request": request})
        body.is_valid(raise_exception=True)
        generated = generate_tools(owner=table.owner, table=table, **body.validated_data)
        context = {"request": request}
        return Response(
            {
                "tools": ToolSerializer(generated.tools, many=True, context=context).data,
                "bindings": BindingSerializer(generated.bindings, many=True, context=context).data,
                "notes": generated.notes,
                "changes": [change.as_dict() for change in generated.changes],
            },
            status=status.HTTP_201_CREATED if generated.created_any else status.HTTP_200_OK,
        )


@extend_schema_field(
    {
        "type": "array",
        "items": {"type": "integer", "minimum": 1, "maximum": 2**63 - 1},
        "minItems": 1,
        "maxItems": MAX_BULK_TOOLS,
        "uniqueItems": True,
    }
)
class ToolIdsField(serializers.ListField):
    """Ids of the caller's tools; the schema states what validate_tools refuses (empty, too many, repeated)."""


class BulkBindingSerializer(StrictFormSerializer):
    """The tools to bind to the instance, all or none."""

    request_examples = {"bind two": {"tools": [1, 2], "enabled": True}}

    tools = ToolIdsField(child=OwnedPrimaryKeyRelatedField(Tool), help_text="Ids of your tools (at most 1,000).")
    enabled = serializers.BooleanField(required=False, default=True)

    def validate_tools(self, tools):
        if not tools:
            raise serializers.ValidationError("List at least one tool.")
        if len(tools) > MAX_BULK_TOOLS:
            raise serializers.ValidationError(f"At most {MAX_BULK_TOOLS} tools per request.")
        seen = set()
        for tool in tools:
            if tool.pk in seen:
                raise serializers.ValidationError(f"The tool {tool.pk} is listed twice.")
            seen.add(tool.pk)
        return tools


@extend_schema(
    tags=["mcp-instances"],
    summary="Bind several tools to an instance at once (all or nothing)",
    description=(
        "Each tool is bound as POST /api/bindings/ would bind it. The first refusal (a tool already bound, a "
        "name taken on the instance, or two tools of one name) rolls back the whole request: 409 NAME_CONFLICT "
        "or 400 naming the tool in `fields.tools`."
    ),
    parameters=[OpenApiParameter("id", OpenApiTypes.INT, OpenApiParameter.PATH, description="Instance id.")],
    request=BulkBindingSerializer,
    responses={201: inline_serializer("BulkBindingResult", {"bindings": BindingSerializer(many=True)})},
)
class BulkBindingView(APIView):
    parser_classes = [JSONParser]

    def post(self, request, pk=None, *args, **kwargs):
        instance = get_owned_or_404(McpInstance, request.user, pk)
        body = BulkBindingSerializer(data=request.data, context={"request": request})
        body.is_valid(raise_exception=True)
        bindings = services.binding_create_many(
            mcp_instance=instance, tools=body.validated_data["tools"], enabled=body.validated_data["enabled"]
        )
        data = BindingSerializer(bindings, many=True, context={"request": request}).data
        return Response({"bindings": data}, status=status.HTTP_201_CREATED)
