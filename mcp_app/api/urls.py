"""/api/ routes of mcp_app: instances, their keys (nested) and bindings."""

from django.urls import re_path
from rest_framework.routers import SimpleRouter

from .views import ApiKeyViewSet, BindingViewSet, McpInstanceViewSet

router = SimpleRouter()
router.register("mcp-instances", McpInstanceViewSet, basename="mcp-instance")
router.register("bindings", BindingViewSet, basename="binding")

# Ids are matched loosely and checked in the view, so a malformed id is a JSON 404 like a missing one.
urlpatterns = [
    *router.urls,
    re_path(
        r"^mcp-instances/(?P<instance_pk>[^/]+)/keys/$",
        ApiKeyViewSet.as_view({"get": "list", "post": "create"}),
        name="mcp-instance-key-list",
    ),
    re_path(
        r"^mcp-instances/(?P<instance_pk>[^/]+)/keys/(?P<pk>[^/]+)/$",
        ApiKeyViewSet.as_view({"get": "retrieve", "delete": "destroy"}),
        name="mcp-instance-key-detail",
    ),
]

__all__ = ["urlpatterns"]
