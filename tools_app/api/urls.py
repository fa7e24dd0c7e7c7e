"""/api/ routes of the resources: tables, tools (with by-table and call), MCP instances, their keys and
prompts (nested) and bindings, the call log, the token endpoint, and the declarative setup (export, plan,
apply)."""

from django.urls import path, re_path
from rest_framework.routers import SimpleRouter

from tools_app.api.calls import CallViewSet
from tools_app.api.data_tools import BulkBindingView, GenerateToolsView, TableImportView
from tools_app.api.instance_views import ApiKeyViewSet, BindingViewSet, McpInstanceViewSet, PromptViewSet
from tools_app.api.setup_views import SetupApplyView, SetupExportView, SetupPlanView
from tools_app.api.views import ApiTokenViewSet, AuthTokenView, TableViewSet, ToolViewSet

router = SimpleRouter()
router.register("tables", TableViewSet, basename="table")
router.register("tools", ToolViewSet, basename="tool")
router.register("mcp-instances", McpInstanceViewSet, basename="mcp-instance")
router.register("bindings", BindingViewSet, basename="binding")
router.register("auth/tokens", ApiTokenViewSet, basename="auth-token-item")
router.register("calls", CallViewSet, basename="call")

# Ids are matched loosely and checked in the view, so a malformed id is a JSON 404 like a missing one.
urlpatterns = [
    path("auth/token/", AuthTokenView.as_view(), name="auth-token"),
    path("setup/export/", SetupExportView.as_view(), name="setup-export"),
    path("setup/plan/", SetupPlanView.as_view(), name="setup-plan"),
    path("setup/apply/", SetupApplyView.as_view(), name="setup-apply"),
    # Before the router, whose tables/<pk>/ would take "import" for an id.
    path("tables/import/", TableImportView.as_view(), name="table-import"),
    re_path(r"^tables/(?P<pk>[^/]+)/generate-tools/$", GenerateToolsView.as_view(), name="table-generate-tools"),
    re_path(r"^mcp-instances/(?P<pk>[^/]+)/bindings/bulk/$", BulkBindingView.as_view(), name="mcp-instance-bulk-bind"),
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
    # The owner's prompts of an instance.
    re_path(
        r"^mcp-instances/(?P<instance_pk>[^/]+)/prompts/$",
        PromptViewSet.as_view({"get": "list", "post": "create"}),
        name="mcp-instance-prompt-list",
    ),
    re_path(
        r"^mcp-instances/(?P<instance_pk>[^/]+)/prompts/(?P<pk>[^/]+)/$",
        PromptViewSet.as_view({"get": "retrieve", "put": "update", "patch": "partial_update", "delete": "destroy"}),
        name="mcp-instance-prompt-detail",
    ),
]

__all__ = ["urlpatterns"]
