"""URL routes: the admin and the JSON API. /mcp/<slug>/ is routed in toolhub.asgi, before Django."""

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
    path("admin/", admin.site.urls),
    path("api/", include("toolhub.api_urls")),
]

handler404 = "toolhub.views.page_not_found"
