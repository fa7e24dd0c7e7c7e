"""Every /api/ route: resources (tools_app.api, mcp_app.api) and the registry endpoints."""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from .views import ApiRootView

app_name = "api"

urlpatterns = [
    path("", ApiRootView.as_view(), name="root"),
    # Registry routes first: /mcp-instances/<id>/guide/ and /tools/<id>/export/ must not reach the routers.
    path("", include("tools_app.api.registry")),
    path("", include("mcp_app.api.registry")),  # search and instance views: they need mcp_app's InstanceScope
    path("", include("tools_app.api.urls")),
    path("", include("mcp_app.api.urls")),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api:schema"), name="docs"),
]

__all__ = ["include", "path", "urlpatterns"]
