"""Every /api/ route: the resources and the registry endpoints (tools_app.api)."""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from toolhub.views import ApiRootView

app_name = "api"

urlpatterns = [
    path("", ApiRootView.as_view(), name="root"),
    # Registry routes first: /mcp-instances/<id>/guide/ and /tools/<id>/export/ must not reach the routers.
    path("", include("tools_app.api.registry")),
    path("", include("tools_app.api.instance_registry")),
    path("", include("tools_app.api.urls")),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves the page's script as a file of its own (?script): no inline script under the CSP.
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api:schema"), name="docs"),
]

__all__ = ["include", "path", "urlpatterns"]
