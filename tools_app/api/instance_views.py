"""API views for MCP instances, their API keys and prompts (nested under the instance) and bindings (SPEC §6)."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.response import Response

from tools_app import services
from tools_app.api.instance_filtersets import BindingFilterSet, McpInstanceFilterSet
from tools_app.api.instance_serializers import (
    ApiKeyCreatedSerializer,
    ApiKeyCreateSerializer,
    ApiKeySerializer,
    BindingSerializer,
    McpInstanceSerializer,
    PromptSerializer,
)
from tools_app.api.schema import ErrorSerializer
from tools_app.api.views import (
    FORCE_PARAMETER,
    ChangeGuardMixin,
    OwnedViewSetMixin,
    get_owned_or_404,
    in_use_response,
)
from tools_app.models import ApiKey, Binding, McpInstance, Prompt

__all__ = ["ApiKeyViewSet", "BindingViewSet", "McpInstanceViewSet", "PromptViewSet"]


# SPEC §6 answers, stated on the operations that give them.
SLUG_TAKEN = {
    400: OpenApiResponse(
        ErrorSerializer,
        description="VALIDATION_ERROR naming the field; a `slug` already in use (by anyone) is a 400 naming `slug`.",
    )
}
NAME_CONFLICT = {
    400: OpenApiResponse(
        ErrorSerializer,
        description="VALIDATION_ERROR naming the field: an instance or tool that is not yours, or a tool already "
        "bound to the instance (naming `tool`).",
    ),
    409: OpenApiResponse(
        ErrorSerializer,
        description="NAME_CONFLICT: the effective name is taken on the instance (ignoring case); the message names "
        "the other tool and the instance.",
    ),
}

NAME_CONFLICT_OR_IN_USE = {
    400: NAME_CONFLICT[400],
    409: OpenApiResponse(
        ErrorSerializer,
        description="NAME_CONFLICT: the effective name is taken on the instance (ignoring case); the message names "
        "the other tool and the instance. Or IN_USE: the binding is in use and its name, tool or instance would "
        "change, without ?force=true (`details.used_by` lists the instances, tool names and recent clients).",
    ),
}


@extend_schema_view(
    list=extend_schema(summary="List your MCP instances"),
    create=extend_schema(summary="Create an MCP instance", responses={201: McpInstanceSerializer, **SLUG_TAKEN}),
    retrieve=extend_schema(summary="Get an MCP instance"),
    partial_update=extend_schema(
        summary="Change an MCP instance",
        description="A new `slug` moves the endpoint: for an instance in use (an enabled binding while it is "
        "enabled, or calls lately) that needs ?force=true, else 409 IN_USE and nothing changes.",
        parameters=[FORCE_PARAMETER],
        responses={
            200: McpInstanceSerializer,
            **SLUG_TAKEN,
            409: in_use_response("moves the endpoint (a new slug) of an instance"),
        },
    ),
    destroy=extend_schema(
        summary="Delete an MCP instance, its keys and bindings",
        parameters=[FORCE_PARAMETER],
        responses={204: None, 409: in_use_response("deletes an instance")},
    ),
)
class McpInstanceViewSet(ChangeGuardMixin, OwnedViewSetMixin, viewsets.ModelViewSet):
    """Your MCP instances: one MCP endpoint, /mcp/<slug>/, each."""

    # SPEC §6 lists GET, POST, PATCH, DELETE: no PUT.
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]
    queryset = McpInstance.objects.all()
    serializer_class = McpInstanceSerializer
    select_related = ("owner",)
    filterset_class = McpInstanceFilterSet
    ordering_fields = ["id", "name", "slug", "created_at", "updated_at"]

    def perform_destroy(self, instance: McpInstance):
        services.instance_delete(instance=instance, force=self.forced())


INSTANCE_PK = OpenApiParameter("instance_pk", OpenApiTypes.INT, OpenApiParameter.PATH, description="Instance id.")


class OfInstanceMixin(OwnedViewSetMixin):
    """A view set of what belongs to the instance in the URL (`instance_pk`): its keys, its prompts."""

    def get_instance(self) -> McpInstance:
        """The instance in the URL: the caller's own (any for a superuser), else 404."""
        if not hasattr(self, "_instance"):
            self._instance = get_owned_or_404(McpInstance, self.request.user, self.kwargs.get("instance_pk"))
        return self._instance

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return self.queryset.none()
        return super().get_queryset().filter(mcp_instance=self.get_instance())


@extend_schema_view(
    list=extend_schema(summary="List an instance's API keys (never their secrets)", parameters=[INSTANCE_PK]),
    retrieve=extend_schema(summary="Get one API key (never its secret)", parameters=[INSTANCE_PK]),
    create=extend_schema(
        summary="Issue an API key: the plaintext is in this response only",
        parameters=[INSTANCE_PK],
        request=ApiKeyCreateSerializer,
        responses={201: ApiKeyCreatedSerializer},
    ),
    destroy=extend_schema(
        summary="Revoke an API key (it stops working at once; the row stays for the call log)",
        parameters=[INSTANCE_PK],
    ),
)
class ApiKeyViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    OfInstanceMixin,
    viewsets.GenericViewSet,
):
    """The API keys of one of your MCP instances. A key's secret is shown once, in the response that issues it."""

    queryset = ApiKey.objects.all()
    serializer_class = ApiKeySerializer
    filter_backends = []

    def get_serializer_class(self):
        return ApiKeyCreateSerializer if self.action == "create" else ApiKeySerializer

    def create(self, request, *args, **kwargs):
        instance = self.get_instance()
        body = ApiKeyCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        key, plaintext = services.api_key_issue(
            mcp_instance=instance,
            label=data.get("label", ""),
            read_only=data.get("read_only", False),
            attributes=data.get("attributes", {}),
            actor=request.user,
            via="API",
        )
        answer = {"id": key.pk, "label": key.label, "key": plaintext, "read_only": key.read_only}
        return Response({**answer, "attributes": key.attributes}, status=status.HTTP_201_CREATED)

    def perform_destroy(self, instance: ApiKey):
        # Revoke rather than delete (SPEC §2.3 "revocable"): the key stops authenticating at once, while
        # call-log rows keep pointing at the key that made them and the list shows when it was revoked.
        # DELETE on an already revoked key is a no-op 204 (idempotent).
        services.api_key_revoke(api_key=instance, actor=self.request.user, via="API")


@extend_schema_view(
    list=extend_schema(summary="List your bindings"),
    create=extend_schema(
        summary="Bind a tool to an instance (a name collision is 409 NAME_CONFLICT)",
        responses={201: BindingSerializer, **NAME_CONFLICT},
    ),
    retrieve=extend_schema(summary="Get a binding"),
    partial_update=extend_schema(
        summary="Change a binding (a name collision is 409 NAME_CONFLICT)",
        description="A binding in use (enabled on an enabled instance, or called lately) keeps its effective name, "
        "tool and instance unless ?force=true: otherwise 409 IN_USE and nothing changes.",
        parameters=[FORCE_PARAMETER],
        responses={200: BindingSerializer, **NAME_CONFLICT_OR_IN_USE},
    ),
    destroy=extend_schema(
        summary="Unbind a tool",
        parameters=[FORCE_PARAMETER],
        responses={204: None, 409: in_use_response("unbinds a tool")},
    ),
)
class BindingViewSet(ChangeGuardMixin, OwnedViewSetMixin, viewsets.ModelViewSet):
    """Your bindings: which tools an MCP instance exposes, under which names."""

    http_method_names = ["get", "post", "patch", "delete", "head", "options"]
    queryset = Binding.objects.all()
    serializer_class = BindingSerializer
    select_related = ("mcp_instance", "tool")
    filterset_class = BindingFilterSet
    ordering_fields = ["id", "name_key", "created_at", "updated_at"]

    def perform_destroy(self, instance: Binding):
        services.binding_delete(binding=instance, force=self.forced())


PROMPT_REFUSALS = {
    400: OpenApiResponse(
        ErrorSerializer,
        description="VALIDATION_ERROR naming the field: also a template placeholder that is not a declared argument "
        "(naming `template`), two arguments of one name (naming `arguments`), the name `usage_guide` in any case "
        "(naming `name`), or a new prompt on an instance that already has TOOLHUB_MAX_PROMPTS_PER_INSTANCE (100) "
        "(naming `mcp_instance`).",
    ),
    409: OpenApiResponse(
        ErrorSerializer,
        description="NAME_CONFLICT: a prompt of the instance already has that name (ignoring case); the message "
        "names the instance.",
    ),
}


@extend_schema_view(
    list=extend_schema(summary="List an instance's prompts", parameters=[INSTANCE_PK]),
    retrieve=extend_schema(summary="Get one prompt of an instance", parameters=[INSTANCE_PK]),
    create=extend_schema(
        summary="Add a prompt to an instance (served over MCP besides usage_guide)",
        parameters=[INSTANCE_PK],
        responses={201: PromptSerializer, **PROMPT_REFUSALS},
    ),
    update=extend_schema(
        summary="Replace a prompt of an instance",
        parameters=[INSTANCE_PK],
        responses={200: PromptSerializer, **PROMPT_REFUSALS},
    ),
    partial_update=extend_schema(
        summary="Change a prompt of an instance",
        parameters=[INSTANCE_PK],
        responses={200: PromptSerializer, **PROMPT_REFUSALS},
    ),
    destroy=extend_schema(summary="Delete a prompt of an instance", parameters=[INSTANCE_PK]),
)
class PromptViewSet(OfInstanceMixin, viewsets.ModelViewSet):
    """The prompts one of your MCP instances serves to MCP clients, besides the built-in usage_guide."""

    queryset = Prompt.objects.all()
    serializer_class = PromptSerializer
    filter_backends = []

    def perform_create(self, serializer):
        serializer.save(mcp_instance=self.get_instance())

    def perform_destroy(self, instance: Prompt):
        services.prompt_delete(prompt=instance)
