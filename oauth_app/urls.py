"""OAuth routes, in django-oauth-toolkit's URL namespace so that its metadata view names them.

Included at the root by toolhub.urls: the well-known documents must be at the origin's root (RFC 8414, 9728).
"""

from django.urls import path, re_path

from oauth_app import views

app_name = "oauth2_provider"

urlpatterns = [
    path(".well-known/oauth-authorization-server", views.ServerMetadataView.as_view(), name="oauth-server-metadata"),
    re_path(
        r"^\.well-known/oauth-protected-resource/mcp/(?P<slug>[-a-zA-Z0-9_]+)/?$",
        views.InstanceResourceMetadataView.as_view(),
        name="oauth-resource-metadata-instance",
    ),
    path("oauth/authorize/", views.ConsentView.as_view(), name="authorize"),
    path("oauth/token/", views.TokenView.as_view(), name="token"),
    path("oauth/revoke/", views.RevokeTokenView.as_view(), name="revoke-token"),
    path("oauth/register/", views.RegistrationView.as_view(), name="dcr-register"),
    path(
        "oauth/register/<str:client_id>/",
        views.RegistrationManagementView.as_view(),
        name="dcr-register-management",
    ),
]
