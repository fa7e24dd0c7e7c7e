"""API views for tables and tools, the token endpoint, and OwnedViewSetMixin (shared with mcp_app.api).

Every queryset starts from the ownership rule (`for_user`): another user's object is a 404, never a
403 (SPEC §2, §6). Writes go through the serializers to the services; views hold no business rules.
"""

from typing import Any

from django.contrib.auth.signals import user_logged_in
from django.http import Http404
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
    inline_serializer,
)
from rest_framework import filters, mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from tools_app import services
from tools_app.api import streamed
from tools_app.api.filters import OrderingFilter
from tools_app.api.filtersets import ToolFilterSet
from tools_app.api.renderers import JSONRenderer
from tools_app.api.schema import ErrorSerializer
from tools_app.api.serializers import (
    ApiTokenSerializer,
    AuthTokenRequestSerializer,
    TableChangeSerializer,
    TableRestoreSerializer,
    TableSerializer,
    TableVersionSerializer,
    ToolCallResultSerializer,
    ToolCallSerializer,
    ToolSerializer,
)
from tools_app.api.throttles import TokenRateThrottle
from tools_app.execution.pipeline import Caller, run_tool_call, target_of_tool
from tools_app.models import ApiToken, Surface, Table, TableChange, TableStorage, Tool

__all__ = [
    "FORCE_PARAMETER",
    "ApiTokenViewSet",
    "AuthTokenView",
    "ChangeGuardMixin",
    "OwnedViewSetMixin",
    "TableViewSet",
    "ToolViewSet",
    "force_requested",
    "get_owned_or_404",
    "in_use_response",
    "parse_id",
]


def parse_id(value, model) -> int:
    """A path id as an int; a malformed or out-of-range one is a 404 like any id the caller cannot see."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = 0
    if not 0 < number < 2**63:
        raise Http404(f"No {model._meta.verbose_name} matches the given id.")
    return number


def get_owned_or_404(model, user, pk):
    """The caller's object `pk` of `model`, or Http404."""
    return get_object_or_404(model.objects.for_user(user), pk=parse_id(pk, model))


class OwnedViewSetMixin:
    """get_queryset() from Model.objects.for_user(request.user); superusers see every object."""

    select_related: tuple[str, ...] = ()
    # Any path segment reaches the view, so a malformed id ("0.5", "abc") is a JSON 404 like a missing one
    # instead of Django's HTML page for an unmatched URL.
    lookup_value_regex = "[^/]+"

    def get_queryset(self):
        queryset = self.queryset.model.objects.for_user(self.request.user)
        if self.select_related:
            queryset = queryset.select_related(*self.select_related)
        return queryset.order_by(*self.queryset.model._meta.ordering)

    def get_object(self):
        lookup = self.lookup_url_kwarg or self.lookup_field
        self.kwargs[lookup] = parse_id(self.kwargs.get(lookup), self.queryset.model)
        return super().get_object()


#
# The change guard (services.guard): ?force=true confirms a change of something in use
#

FORCE_PARAMETER = OpenApiParameter(
    "force",
    OpenApiTypes.BOOL,
    OpenApiParameter.QUERY,
    required=False,
    description="true: go on even though the object is in use (bound and enabled on an enabled instance, or called "
    "in the last TOOLHUB_IN_USE_DAYS days). Without it, such a change is refused with 409 IN_USE listing "
    "`details.used_by`, and nothing is changed.",
)


def in_use_response(change: str) -> OpenApiResponse:
    """The 409 IN_USE answer of an operation that `change`s something (e.g. "deletes the table")."""
    return OpenApiResponse(
        ErrorSerializer,
        description=f"IN_USE: the operation {change}, which is in use: `details.used_by` lists the instances, tool "
        "names and recent clients (`[{instance, tool, tool_id, bound, calls, last_called, clients}]`). Nothing was "
        "changed; send ?force=true to go on.",
    )


def force_requested(request) -> bool:
    """The `force` query parameter: true or false (1 or 0), absent = false; anything else is a 400 naming it."""
    value = request.query_params.get("force")
    if value is None:
        return False
    if value.strip().lower() in ("true", "1"):
        return True
    if value.strip().lower() in ("false", "0"):
        return False
    raise serializers.ValidationError({"force": ["Must be true or false."]})


class ChangeGuardMixin:
    """?force=true reaches the services: the serializers' updates (context["force"]) and perform_destroy."""

    def get_serializer_context(self):
        context = super().get_serializer_context()  # type: ignore[misc]
        if getattr(self, "action", None) in ("update", "partial_update"):
            context["force"] = force_requested(self.request)  # type: ignore[attr-defined]
        return context

    def forced(self) -> bool:
        return force_requested(self.request)  # type: ignore[attr-defined]


#
# Auth
#


@extend_schema(
    tags=["auth"],
    summary="Exchange a username and password for an API token",
    request=AuthTokenRequestSerializer,
    responses={
        200: inline_serializer("AuthTokenResponse", {"token": serializers.CharField()}),
        429: OpenApiResponse(
            ErrorSerializer,
            description="RATE_LIMITED: too many failed logins for this username from this address; "
            "`Retry-After` says when to try again (django-axes).",
        ),
    },
)
class AuthTokenView(APIView):
    """Send a username and password; then send the token as `Authorization: Token <token>` on every request.

    Only the username and password count here: an `Authorization` header on this request is ignored. Each
    login issues a new token (stored hashed, expiring after TOOLHUB_API_TOKEN_TTL_HOURS); list and revoke
    yours at /api/auth/tokens/.
    """

    # SPEC §6. No authentication runs, so a stale or revoked token header left on the client does not
    # turn the request into a 401 before the password is checked.
    authentication_classes = []
    permission_classes = []
    # One bucket per client IP, whatever the credentials (tools_app/api/throttles.py).
    throttle_classes = [TokenRateThrottle]
    renderer_classes = [JSONRenderer]
    public_schema_operation = True

    def post(self, request, *args, **kwargs):
        # The Django request, so that django-axes counts the failure and locks out (settings, AXES_*).
        body = AuthTokenRequestSerializer(data=request.data, context={"request": request._request})
        body.is_valid(raise_exception=True)
        user = body.validated_data["user"]
        _token, plaintext = services.api_token_issue(user=user, via="API login")
        # As knox's LoginView: the login is a login (last_login; django-axes forgets the earlier failures).
        user_logged_in.send(sender=user.__class__, request=request._request, user=user)
        return Response({"token": plaintext})


@extend_schema_view(
    list=extend_schema(summary="List your API tokens (never their secrets)"),
    destroy=extend_schema(summary="Revoke one of your API tokens (it stops working at once)"),
    revoke_all=extend_schema(
        summary="Log out everywhere: revoke every API token and OAuth grant you issued",
        request=None,
        responses={200: inline_serializer("RevokeAllResponse", {"revoked": serializers.IntegerField()})},
    ),
)
@extend_schema(tags=["auth"])
class ApiTokenViewSet(mixins.ListModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet):
    """Your API tokens: when each was issued and when it expires. Only their owner lists and revokes them
    (superusers included); another user's token is a 404."""

    queryset = ApiToken.objects.all()
    serializer_class = ApiTokenSerializer
    filter_backends = []
    lookup_value_regex = "[^/]+"

    def get_queryset(self):
        return ApiToken.objects.of_user(self.request.user)

    def get_object(self):
        self.kwargs["pk"] = parse_id(self.kwargs.get("pk"), ApiToken)
        return super().get_object()

    def perform_destroy(self, instance: ApiToken):
        services.api_token_revoke(api_token=instance, actor=self.request.user, via="API")

    @action(detail=False, methods=["post"], url_path="revoke-all")
    def revoke_all(self, request, *args, **kwargs):
        """Every API token of yours (this request's included) and every OAuth grant you authorized stop working
        at once; the MCP instances' API keys stay (they are the instances', docs/auth.md). `revoked` counts the
        API tokens."""
        revoked = services.user_sign_out_everywhere(user=request.user, actor=request.user, via="API")
        return Response({"revoked": revoked})


#
# Tables
#


PRECONDITION_RESPONSE = OpenApiResponse(
    ErrorSerializer, description="PRECONDITION_FAILED: If-Match names another version."
)
IF_MATCH = OpenApiParameter(
    "If-Match",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    description='The table\'s ETag ("<version>") as you read it: the write is refused with 412 PRECONDITION_FAILED, '
    "writing nothing, when the table is at another version.",
)


@extend_schema_view(
    list=extend_schema(summary="List your tables"),
    create=extend_schema(summary="Create a table"),
    retrieve=extend_schema(summary="Get a table with its data (ETag: its version)"),
    update=extend_schema(
        summary="Replace a table (a data change adds 1 to its version)",
        parameters=[IF_MATCH],
        responses={200: TableSerializer, 412: PRECONDITION_RESPONSE},
    ),
    partial_update=extend_schema(
        summary="Change a table (a data change adds 1 to its version)",
        parameters=[IF_MATCH],
        responses={200: TableSerializer, 412: PRECONDITION_RESPONSE},
    ),
    destroy=extend_schema(
        summary="Delete a table and the tools on it",
        parameters=[FORCE_PARAMETER],
        responses={204: None, 409: in_use_response("deletes a table whose tools")},
    ),
)
class TableViewSet(ChangeGuardMixin, OwnedViewSetMixin, viewsets.ModelViewSet):
    """Your tables: JSON documents that tools read and write, with their history (docs/history.md)."""

    queryset = Table.objects.all()
    serializer_class = TableSerializer
    select_related = ("owner",)
    filter_backends = [filters.SearchFilter, OrderingFilter]
    search_fields = ["name", "description"]
    ordering_fields = ["id", "name", "created_at", "updated_at", "version"]

    def perform_destroy(self, instance: Table):
        services.table_delete(table=instance, force=self.forced())

    def retrieve(self, request, *args, **kwargs):
        """A table stored as rows streams its data (tools_app.api.streamed); its ETag is the version read here, and
        the data sent is that version's."""
        table = self.get_object()
        encoding = streamed.json_encoding(request)
        if table.storage != TableStorage.ROWS or encoding is None:
            return Response(self.get_serializer(table).data)
        marker = streamed.placeholder(0)
        head = TableSerializer(table, context={**self.get_serializer_context(), "data_placeholder": marker}).data
        response = streamed.spliced_response(
            request, head, {marker: streamed.deferred_document_text(table.pk, table.version, encoding)}, encoding
        )
        response["ETag"] = f'"{table.version}"'
        return response

    def get_serializer_context(self):
        context = super().get_serializer_context()
        if self.action in ("update", "partial_update"):
            context["expected_version"] = _if_match(self.request)
        return context

    def perform_update(self, serializer):
        with services.write_audit(_api_audit(self.request)):
            super().perform_update(serializer)

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        data = getattr(response, "data", None)
        if (
            self.detail
            and 200 <= response.status_code < 300
            and isinstance(data, dict)
            and isinstance(data.get("version"), int)
            and "id" in data
        ):
            response["ETag"] = f'"{data["version"]}"'
        return response

    @extend_schema(
        summary="The table's history, newest first",
        description="One entry per data write: who, when, through what, with which arguments, and its JSON Patch.",
        responses=TableChangeSerializer(many=True),
    )
    @action(detail=True, methods=["get"], filter_backends=[], serializer_class=TableChangeSerializer)
    def history(self, request, pk=None):
        table = self.get_object()
        entries = TableChange.objects.filter(table=table).select_related("user", "api_key", "tool").order_by("-version")
        page = self.paginate_queryset(entries)
        return self.get_paginated_response(TableChangeSerializer(page, many=True).data)

    @extend_schema(
        summary="The table's document as it was at a version",
        parameters=[OpenApiParameter("version", OpenApiTypes.INT, OpenApiParameter.PATH)],
        responses={200: TableVersionSerializer},
    )
    @action(
        detail=True,
        methods=["get"],
        url_path=r"versions/(?P<version>[^/]+)",
        filter_backends=[],
        serializer_class=TableVersionSerializer,
    )
    def versions(self, request, pk=None, version=None):
        table = self.get_object()
        number = parse_id(version, TableChange)
        encoding = streamed.json_encoding(request)
        if number == table.version and table.storage == TableStorage.ROWS and encoding is not None:
            # The current version streams; an older one is rebuilt from the rows and the log (gathered, bounded).
            marker = streamed.placeholder(0)
            return streamed.spliced_response(
                request,
                {"version": number, "data": marker},
                {marker: streamed.deferred_document_text(table.pk, number, encoding)},
                encoding,
            )
        try:
            data = services.table_version_data(table.pk, number)
        except TableChange.DoesNotExist as exc:
            raise Http404(
                f"Version {version} of this table is not kept (outside retention, or never written)."
            ) from exc
        return Response({"version": number, "data": data})

    @extend_schema(
        summary="Restore a version (written as a new version)",
        request=TableRestoreSerializer,
        responses={200: TableSerializer},
    )
    @action(detail=True, methods=["post"], filter_backends=[], serializer_class=TableRestoreSerializer)
    def restore(self, request, pk=None):
        table = self.get_object()
        body = TableRestoreSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            with services.write_audit(_api_audit(request, arguments=body.validated_data)):
                made = services.table_restore(table_id=table.pk, version=body.validated_data["version"])
        except TableChange.DoesNotExist as exc:
            raise Http404(
                f"Version {body.validated_data['version']} of this table is not kept (outside retention, or never"
                " written)."
            ) from exc
        restored = Table.objects.get(pk=table.pk)
        if restored.version != made:
            # A write committed since the restore's commit: the answer (and its ETag) is still the restore's own
            # version and document, rebuilt through the log, unless the history bounds pruned it meanwhile (then
            # the table as it is now, whose version and data agree).
            try:
                restored.data = services.table_version_data(table.pk, made)
                restored.version = made
            except TableChange.DoesNotExist:
                pass
        return Response(TableSerializer(restored, context=self.get_serializer_context()).data)


def _if_match(request) -> int | None:
    """The version an If-Match header names ("5", W/"5"); None without one or for "*"; -1 when it names none."""
    header = request.headers.get("If-Match")
    if header is None or header.strip() == "*":
        return None
    text = header.strip().removeprefix("W/").strip('"')
    return int(text) if text.isdigit() and len(text) < 19 else -1


def _api_audit(request, arguments: Any = None) -> services.WriteAudit:
    token = request.auth if isinstance(request.auth, ApiToken) else None
    return services.WriteAudit(
        surface=str(Surface.API),
        user_id=request.user.pk,
        api_token_id=token.pk if token is not None else None,
        arguments=arguments,
    )


#
# Tools
#


# What a schema cannot say about a change, said on the operations.
TOOL_CHANGE_RULES = (
    "Fields left out keep their current values. The tool that results must follow its type's rules, as "
    "ToolCreateRequest states them per `type` (a table for data types, none and no JSON path for the others, a "
    "description unless external, the arguments the type needs): otherwise a 400 naming the field."
)
TOOL_GUARD = (
    " A tool in use (bound and enabled on an enabled instance, or called lately) is not renamed, nor given an input "
    "schema that refuses calls the current one accepts (an argument now required, a property removed, a type "
    "narrowed, undeclared arguments no longer allowed), without ?force=true: 409 IN_USE, nothing changed."
)
TOOL_CHANGE_CONFLICTS = OpenApiResponse(
    ErrorSerializer,
    description="NAME_CONFLICT: the new name is taken on an instance the tool is bound to; or IN_USE: a rename or a "
    "breaking input-schema change of a tool in use, without ?force=true (`details.used_by` lists the instances, "
    "tool names and recent clients); or CONFLICT: a concurrent write.",
)


@extend_schema_view(
    list=extend_schema(summary="List your tools"),
    create=extend_schema(summary="Create a tool"),
    retrieve=extend_schema(summary="Get a tool"),
    update=extend_schema(
        summary="Replace a tool",
        description=TOOL_CHANGE_RULES + TOOL_GUARD,
        parameters=[FORCE_PARAMETER],
        responses={200: ToolSerializer, 409: TOOL_CHANGE_CONFLICTS},
    ),
    partial_update=extend_schema(
        summary="Change a tool",
        description=TOOL_CHANGE_RULES + TOOL_GUARD,
        parameters=[FORCE_PARAMETER],
        responses={200: ToolSerializer, 409: TOOL_CHANGE_CONFLICTS},
    ),
    destroy=extend_schema(
        summary="Delete a tool (and its bindings)",
        parameters=[FORCE_PARAMETER],
        responses={204: None, 409: in_use_response("deletes a tool")},
    ),
)
class ToolViewSet(ChangeGuardMixin, OwnedViewSetMixin, viewsets.ModelViewSet):
    """Your tools: typed operations on a mount point of a table, registry tools and external tools."""

    queryset = Tool.objects.all()
    serializer_class = ToolSerializer
    select_related = ("owner",)
    filterset_class = ToolFilterSet
    ordering_fields = ["id", "name", "type", "use_count", "last_used", "created_at", "updated_at"]

    def perform_destroy(self, instance: Tool):
        services.tool_delete(tool=instance, force=self.forced())

    @extend_schema(
        summary="List your tools on one table",
        parameters=[OpenApiParameter("table_id", OpenApiTypes.INT, OpenApiParameter.PATH)],
        responses=ToolSerializer(many=True),
    )
    @action(detail=False, methods=["get"], url_path=r"by-table/(?P<table_id>[^/]+)")
    def by_table(self, request, table_id=None):
        """Your tools on that table (every tool on it for a superuser); 404 if the table is missing or not yours."""
        table = get_owned_or_404(Table, request.user, table_id)
        queryset = self.filter_queryset(self.get_queryset().filter(table=table))
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @extend_schema(
        summary="Run a tool",
        description=(
            "Runs the tool through the same call pipeline as MCP. A tool error is a 400 with its code. A result"
            " over the result budget (TOOLHUB_MAX_RESULT_BYTES) is, for a list, its first page"
            ' `{"items", "total", "next_cursor"}` (pass `"cursor"` in the arguments for the next), otherwise'
            " RESULT_TOO_LARGE."
        ),
        request=ToolCallSerializer,
        responses={200: ToolCallResultSerializer},
    )
    @action(detail=True, methods=["post"], serializer_class=ToolCallSerializer, filter_backends=[])
    def call(self, request, pk=None):
        tool = self.get_object()
        body = ToolCallSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        result = _run_tool(tool, body.validated_data["arguments"], request.user, token=request.auth)
        return Response({"result": result}, status=status.HTTP_200_OK)


def _run_tool(tool: Tool, arguments: dict, user, token: Any = None) -> Any:
    """Run the tool through the call pipeline (surface "api"); a failure is raised as its ToolError."""
    token_id = token.pk if isinstance(token, ApiToken) else None
    caller = Caller(surface=Surface.API, user_id=user.pk, user=user, api_token_id=token_id)
    outcome = run_tool_call(caller=caller, target=target_of_tool(tool), name=tool.name, arguments=arguments)
    if outcome.error is not None:
        raise outcome.error
    return outcome.value
