"""API tokens in the admin: read-only; deleting one revokes it through the service, which records
the revocation in the token's history. A superuser sees every user's tokens, anyone else only their own."""

from django.contrib import admin, messages
from django.http import HttpResponseNotAllowed, HttpResponseRedirect
from django.urls import path, reverse
from django.utils import timezone

from tools_app import services
from tools_app.models import ApiToken

__all__ = ["ApiTokenAdmin"]


class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["__str__", "user", "created", "expiry", "status"]
    list_filter = ["created", "expiry"]
    search_fields = ["token_key", "user__username"]
    list_select_related = ["user"]
    fields = readonly_fields = ["user", "token_key", "created", "expiry"]
    change_list_template = "admin/tools_app/apitoken/change_list.html"

    def get_urls(self):
        own = [
            path(
                "log-out-everywhere/",
                self.admin_site.admin_view(self.log_out_everywhere),
                name="tools_app_apitoken_log_out_everywhere",
            )
        ]
        return own + super().get_urls()

    def log_out_everywhere(self, request):
        """POST: every API token and OAuth grant of the signed-in user ends (services.user_sign_out_everywhere);
        the admin session itself stays."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        revoked = services.user_sign_out_everywhere(user=request.user, actor=request.user, via="admin")
        self.message_user(
            request,
            f"Logged out everywhere: {revoked} API token(s) revoked, and every OAuth grant you authorized ended.",
            messages.SUCCESS,
        )
        return HttpResponseRedirect(reverse("admin:tools_app_apitoken_changelist"))

    def get_queryset(self, request):
        queryset = super().get_queryset(request)
        return queryset if request.user.is_superuser else queryset.filter(user=request.user)

    def has_add_permission(self, request):
        return False  # a token is issued at login (POST /api/auth/token/): its secret is shown there only

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return super().has_delete_permission(request, obj) and (
            obj is None or request.user.is_superuser or obj.user_id == request.user.pk
        )

    @admin.display(description="status")
    def status(self, obj: ApiToken) -> str:
        if obj.expiry is not None and obj.expiry <= timezone.now():
            return "expired"
        return "active"

    def delete_model(self, request, obj):
        services.api_token_revoke(api_token=obj, actor=request.user, via="admin")

    def delete_queryset(self, request, queryset):
        for token in queryset.select_related("user"):
            services.api_token_revoke(api_token=token, actor=request.user, via="admin")

    def log_deletion(self, request, obj, object_repr):
        """Recorded by services.api_token_revoke (with the surface), not a second time here."""

    def log_deletions(self, request, queryset):
        """Recorded by services.api_token_revoke (with the surface), not a second time here."""


admin.site.register(ApiToken, ApiTokenAdmin)
