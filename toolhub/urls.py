"""URL routes: the admin and the JSON API. /mcp/<slug>/ is routed in toolhub.asgi, before Django."""

from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path, re_path
from django.views.generic import RedirectView

from toolhub import observability
from toolhub.as_client import as_client_page
from tools_app.admin.activity import activity_page
from tools_app.admin.docs_page import doc_page
from tools_app.admin.operator_page import operations_page

urlpatterns = [
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
    # Browsers ask for /favicon.ico on every page; without it each admin page logs a 404.
    path("favicon.ico", RedirectView.as_view(url=static("toolhub/favicon.svg"), permanent=False)),
    # MCP instances, bindings, keys and the call log were once mcp_app's models: old admin links still work.
    re_path(
        r"^admin/mcp_app/(?P<rest>.*)$",
        RedirectView.as_view(url="/admin/tools_app/%(rest)s", permanent=True, query_string=True),
    ),
    # (docs/operations.md) Liveness, readiness, Prometheus metrics, the operator's page.
    path("healthz", observability.healthz, name="healthz"),
    path("readyz", observability.readyz, name="readyz"),
    path("metrics", observability.metrics, name="metrics"),
    path("admin/operations/", admin.site.admin_view(operations_page), name="toolhub-operations"),
    # (docs/activity.md) Charts of the call log, for every owner.
    path("admin/activity/", admin.site.admin_view(activity_page), name="toolhub-activity"),
    # toolhub's docs/ pages, linked from help texts.
    path("admin/docs/<str:name>.md", admin.site.admin_view(doc_page), name="toolhub-doc"),
    # (docs/mcp-clients.md) An MCP instance as a client sees it, and a connection check.
    path(
        "admin/tools_app/mcpinstance/<int:instance_id>/as-client/",
        admin.site.admin_view(as_client_page),
        name="toolhub-as-client",
    ),
    path("admin/", admin.site.urls),
    path("api/", include("toolhub.api_urls")),
    # OAuth for MCP clients (docs/oauth.md): /.well-known/… and /oauth/….
    path("", include("oauth_app.urls")),
]

handler404 = "toolhub.views.page_not_found"
