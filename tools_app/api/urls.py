"""/api/ routes of tools_app: tables, tools (with by-table and call) and the token endpoint."""

from django.urls import path
from rest_framework.routers import SimpleRouter

from .views import AuthTokenView, TableViewSet, ToolViewSet

router = SimpleRouter()
router.register("tables", TableViewSet, basename="table")
router.register("tools", ToolViewSet, basename="tool")

urlpatterns = [
    path("auth/token/", AuthTokenView.as_view(), name="auth-token"),
    *router.urls,
]

__all__ = ["urlpatterns"]
