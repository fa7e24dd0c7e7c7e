"""Project-level views: the API's root, and 404 answers that match the surface the client is talking to."""

from django.http import JsonResponse
from django.views import defaults
from drf_spectacular.utils import extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from tools_app.kernel import telemetry


@extend_schema(exclude=True)
class ApiRootView(APIView):
    """GET /api/: a link to each resource, the token endpoint and the docs (as DRF's DefaultRouter gives).

    Public, like the schema: it lists URLs, no data.
    """

    permission_classes = [AllowAny]
    links = {
        "tables": "api:table-list",
        "tools": "api:tool-list",
        "mcp-instances": "api:mcp-instance-list",
        "bindings": "api:binding-list",
        "calls": "api:call-list",
        "search": "api:search",
        "auth-token": "api:auth-token",
        "schema": "api:schema",
        "docs": "api:docs",
    }

    def get(self, request):
        return Response({name: reverse(url_name, request=request) for name, url_name in self.links.items()})


def page_not_found(request, exception=None):
    """A JSON error (SPEC §6 shape) under /api/, Django's page everywhere else."""
    if request.path.startswith("/api/"):
        body = {"error": "NOT_FOUND", "message": f"No API endpoint at {request.path}. See /api/docs/."}
        if (rid := telemetry.error_request_id()) is not None:
            body["request_id"] = rid  # The answer's X-Request-ID, to quote
        return JsonResponse(body, status=404)
    return defaults.page_not_found(request, exception)
