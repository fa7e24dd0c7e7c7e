"""Authorized clients in the admin: a user sees and revokes the clients it authorized; an instance's
owner sees every authorization of its instances (a superuser's included); a superuser sees all.

One row per live authorization (the newest refresh token of a rotation chain). Deleting a row revokes it:
its refresh token and its access token stop working on the next request, on every worker.
"""

from django.contrib import admin
from django.db.models import Q

from oauth_app.models import AuthorizedClient, ClientDocument
from tools_app.models import McpInstance


def _resource_slugs(resources) -> list[str]:
    slugs = []
    for resource in resources or []:
        path = resource.split("://", 1)[-1].partition("/")[2]
        parts = path.strip("/").split("/")
        if len(parts) == 2 and parts[0] == "mcp":
            slugs.append(parts[1])
    return slugs


class InstanceFilter(admin.SimpleListFilter):
    title = "MCP instance"
    parameter_name = "instance"

    def lookups(self, request, model_admin):
        instances = McpInstance.objects.for_user(request.user).order_by("name")
        return [(instance.slug, instance.name) for instance in instances]

    def queryset(self, request, queryset):
        if self.value():
            return queryset.filter(resource__icontains=f"/mcp/{self.value()}/")
        return queryset


@admin.register(AuthorizedClient)
class AuthorizedClientAdmin(admin.ModelAdmin):
    list_display = ["client", "client_host", "instances", "scopes", "user", "created"]
    list_filter = [InstanceFilter]
    actions = ["revoke_selected"]
    ordering = ["-created"]

    def get_queryset(self, request):
        rows = (
            super()
            .get_queryset(request)
            .filter(revoked__isnull=True)
            .select_related("application", "user", "access_token")
        )
        if request.user.is_superuser:
            return rows
        owned = Q()
        for slug in McpInstance.objects.filter(owner=request.user).values_list("slug", flat=True):
            owned |= Q(resource__icontains=f"/mcp/{slug}/")
        return rows.filter(Q(user=request.user) | owned) if owned else rows.filter(user=request.user)

    @admin.display(description="client")
    def client(self, obj):
        return obj.application.name or obj.application.client_id

    @admin.display(description="client host")
    def client_host(self, obj):
        client_id = obj.application.client_id
        if client_id.startswith("https://"):
            return client_id.split("/")[2]
        return (obj.application.redirect_uris or "").split("/")[2] if obj.application.redirect_uris else ""

    @admin.display(description="instance")
    def instances(self, obj):
        return ", ".join(_resource_slugs(obj.resource))

    @admin.display(description="scopes")
    def scopes(self, obj):
        return obj.access_token.scope if obj.access_token_id else ""

    @admin.action(description="Revoke the selected authorizations")
    def revoke_selected(self, request, queryset):
        for row in queryset:
            row.revoke()
        self.message_user(request, f"Revoked {len(queryset)} authorization(s).")

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def delete_model(self, request, obj):
        obj.revoke()

    def has_module_permission(self, request):
        return request.user.is_active and request.user.is_staff

    def has_view_permission(self, request, obj=None):
        return self.has_module_permission(request)

    def has_delete_permission(self, request, obj=None):
        return self.has_module_permission(request)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(ClientDocument)
class ClientDocumentAdmin(admin.ModelAdmin):
    list_display = ["client_id", "logo_uri", "updated_at"]
    readonly_fields = ["client_id", "logo_uri", "client_uri", "updated_at"]

    def has_module_permission(self, request):
        return request.user.is_superuser

    def has_add_permission(self, request):
        return False


__all__ = ["AuthorizedClientAdmin", "ClientDocumentAdmin"]
