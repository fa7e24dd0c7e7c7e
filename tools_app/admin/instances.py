"""Admin for MCP instances (with their bindings and prompts inline), bindings, API keys and the call log
(SPEC §7).

Built on tools_app.admin.OwnedAdmin (SPEC §2 ownership). Writes go through mcp_app.services; the
API key's plaintext is rendered once in the response to its creation and stored nowhere. The tool
pages get their bound-instances and call-statistics panel from here (tools_app.admin.register_tool_panel).
"""

import json
import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.utils import unquote
from django.contrib.auth import admin as auth_admin  # noqa: F401  (registers the user admin re-registered below)
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Count, Q
from django.http import Http404, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from tools_app import services
from tools_app.admin import setup as admin_setup
from tools_app.admin.call_detail import call_detail_view
from tools_app.admin.docs_page import help_text as doc_help_text
from tools_app.admin.instance_forms import (
    ApiKeyAdminForm,
    ApiKeyCreateForm,
    BindingAdminForm,
    BindingInlineForm,
    BindingInlineFormSet,
    McpInstanceAdminForm,
    PromptInlineForm,
    PromptInlineFormSet,
    client_configs,
)
from tools_app.admin.stats import call_stats
from tools_app.admin.tools import (
    CONFIRM_IN_USE,
    DeletedWithParentMixin,
    OwnedAdmin,
    ToolPanel,
    register_tool_panel,
    warn_in_use,
)
from tools_app.choices import REGISTRY_TYPES, ToolType
from tools_app.grants import pin_summary
from tools_app.models import ApiKey, Binding, CallLog, Discovery, McpInstance, Prompt, Tool
from tools_app.registry import usage_guide
from tools_app.registry.export import tool_entry
from tools_app.registry.instance_scope import InstanceScope
from tools_app.registry.rendering import markdown_to_safe_html
from tools_app.selectors import usage_of

logger = logging.getLogger(__name__)

CHARS_PER_TOKEN = 4
# The instance page shows its bindings this many at a time (a filter by name, then pages).
BINDINGS_PAGE = 50
BINDINGS_WINDOW_ATTR = "_toolhub_bindings_window"
# Above this estimate the instance page suggests discovery = search (SPEC §4.5).
LARGE_TOOL_LIST_TOKENS = 8_000


def tool_list_estimate(instance: McpInstance) -> dict[str, Any]:
    """Tokens a client spends on this instance's tools/list (SPEC §4.3), estimated at ~4 characters/token."""
    bindings = [b for b in Binding.objects.enabled_for(instance) if not b.tool.is_external]
    listed_all = [tool_entry(b) for b in bindings]
    listed_search = [tool_entry(b) for b in bindings if b.tool.type in REGISTRY_TYPES]
    all_chars = len(json.dumps(listed_all)) if listed_all else 0
    search_chars = len(json.dumps(listed_search)) if listed_search else 0
    tokens = -(-all_chars // CHARS_PER_TOKEN)
    return {
        "tools": len(listed_all),
        "tokens": tokens,
        "search_tools": len(listed_search),
        "search_tokens": -(-search_chars // CHARS_PER_TOKEN),
        "large": tokens > LARGE_TOOL_LIST_TOKENS,
        "discovery": instance.discovery,
        "is_search": instance.discovery == Discovery.SEARCH,
    }


def render_usage_guide(instance: McpInstance) -> dict[str, Any]:
    """The instance's usage guide (SPEC §5) as HTML, or why it is not available."""
    try:
        guide = usage_guide(scope=InstanceScope(instance))
    except Exception:
        logger.exception("usage guide of instance %s failed", instance.pk)
        return {"error": "The usage guide could not be generated; see the server log."}
    content = guide.get("content", "") if isinstance(guide, dict) else str(guide)
    warnings = guide.get("warnings", []) if isinstance(guide, dict) else []
    # Descriptions are untrusted: no raw HTML, no images, links rel="noopener noreferrer nofollow".
    html = markdown_to_safe_html(content)
    # What clients call it by on this instance (a binding's name, e.g. `tool_guide`), not the tool type's name.
    bindings = instance.bindings.filter(tool__type=ToolType.GET_TOOL_USAGE_GUIDE, enabled=True).select_related("tool")
    tool_names = sorted(binding.effective_name for binding in bindings)
    return {"html": mark_safe(html), "warnings": warnings, "markdown": content, "tool_names": tool_names}


@dataclass(frozen=True)
class BindingsWindow:
    """The bindings the instance page lists: `ids` of page `page` of `pages`, of the `matching` bindings (of
    `total`) whose name, tool or type holds `query`."""

    ids: list[int]
    total: int
    matching: int
    page: int
    pages: int
    query: str

    def url(self, page: int) -> str:
        params = {"bp": page, **({"bq": self.query} if self.query else {})}
        return "?" + urlencode(params)

    @property
    def previous_url(self) -> str | None:
        return self.url(self.page - 1) if self.page > 1 else None

    @property
    def next_url(self) -> str | None:
        return self.url(self.page + 1) if self.page < self.pages else None

    @property
    def first(self) -> int:
        return (self.page - 1) * BINDINGS_PAGE + 1 if self.ids else 0

    @property
    def last(self) -> int:
        return (self.page - 1) * BINDINGS_PAGE + len(self.ids)


def bindings_window(instance: McpInstance, request) -> BindingsWindow:
    """The window of the instance's bindings that its page lists (?bq= filter, ?bp= page), in name order."""
    query = request.GET.get("bq", "").strip()[:100]
    bindings = Binding.objects.filter(mcp_instance=instance)
    total = bindings.count()
    if query:
        bindings = bindings.filter(
            Q(name_key__contains=query.lower()) | Q(tool__name__icontains=query) | Q(tool__type__icontains=query)
        )
    ordered = bindings.order_by("name_key", "id").values_list("pk", flat=True)
    matching = ordered.count() if query else total
    pages = max(1, -(-matching // BINDINGS_PAGE))
    try:
        page = min(max(1, int(request.GET.get("bp", "1"))), pages)
    except ValueError:
        page = 1
    ids = list(ordered[(page - 1) * BINDINGS_PAGE : page * BINDINGS_PAGE])
    return BindingsWindow(ids=ids, total=total, matching=matching, page=page, pages=pages, query=query)


class InstanceColumn:
    """The `mcp_instance` list column as a link to the instance."""

    @admin.display(description=McpInstance._meta.verbose_name, ordering="mcp_instance__name")
    def instance(self, obj):
        if obj.mcp_instance_id is None:
            return "-"
        url = reverse("admin:tools_app_mcpinstance_change", args=[obj.mcp_instance_id])
        return format_html('<a href="{}">{}</a>', url, obj.mcp_instance)


class BindingInline(admin.TabularInline):
    model = Binding
    form = BindingInlineForm
    formset = BindingInlineFormSet
    fields = ["tool", "tool_type", *services.BINDING_FIELDS]
    readonly_fields = ["tool_type"]
    extra = 1
    verbose_name = "bound tool"
    verbose_name_plural = "Bound tools"
    template = "admin/tools_app/mcpinstance/binding_inline.html"

    def get_queryset(self, request):
        """The instance page's window of bindings (bindings_window): a filter by name and pages of
        BINDINGS_PAGE; the rows outside it are not in the formset (its name checks still count them)."""
        queryset = super().get_queryset(request).select_related("tool")
        window = getattr(request, BINDINGS_WINDOW_ATTR, None)
        return queryset if window is None else queryset.filter(pk__in=window.ids)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "tool":
            kwargs["queryset"] = db_field.related_model.objects.for_user(request.user).order_by("name")
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        field = super().formfield_for_dbfield(db_field, request, **kwargs)
        if db_field.name == "tool" and field is not None:
            # One compact row per binding: no add/change/view icons beside the tool select.
            for flag in ("can_add_related", "can_change_related", "can_view_related", "can_delete_related"):
                setattr(field.widget, flag, False)
        return field

    @admin.display(description="type")
    def tool_type(self, obj):
        return obj.tool.get_type_display() if obj.pk else ""


class PromptInline(admin.StackedInline):
    """The instance's own prompts, served over MCP besides usage_guide. The instance page is the
    owner's (OwnedAdmin), so its prompts are too; writes go through the prompt services."""

    model = Prompt
    form = PromptInlineForm
    formset = PromptInlineFormSet
    fields = list(services.PROMPT_FIELDS)
    extra = 0
    verbose_name = "prompt"
    verbose_name_plural = "Prompts (served to MCP clients besides usage_guide; {{argument}} placeholders)"


class McpInstanceAdmin(OwnedAdmin):
    form = McpInstanceAdminForm
    inlines = [BindingInline, PromptInline]
    list_display = ["name", "slug", "endpoint", "enabled", "discovery", "binding_count", "key_count"]
    list_filter = ["enabled", "discovery"]
    search_fields = ["name", "slug", "description"]
    prepopulated_fields = {"slug": ["name"]}
    readonly_fields = ["created_at", "updated_at"]
    change_form_template = "admin/tools_app/mcpinstance/change_form.html"
    in_use_kind = "instances"
    fieldsets = [
        (None, {"fields": ["name", "slug", "description", "enabled"]}),
        (
            "For MCP clients",
            {"fields": ["instructions", "discovery", "allow_registration", "read_only", "max_result_bytes"]},
        ),
        (
            "Call budgets",
            {
                "fields": ["query_cpu_ms", "query_max_elements", "query_max_bytes"],
                "description": doc_help_text(
                    "What one tool call may spend while it evaluates; over it, the call stops with "
                    "QUERY_TOO_EXPENSIVE. Leave empty for the server's defaults (docs/budgets.md)."
                ),
            },
        ),
        ("Limits", {"fields": ["key_rate_limit"], "classes": ["collapse"]}),
        (
            "Logging",
            {
                "fields": ["log_level", "record_call_details"],
                "classes": ["collapse"],
                "description": doc_help_text(
                    "Log messages of every tool call, for MCP clients that cannot keep a level between "
                    "requests (docs/mcp-clients.md, Progress and logs); and what the call log keeps of each call "
                    "(docs/call-log.md)."
                ),
            },
        ),
    ]

    class Media:
        css = {"all": ["toolhub/admin.css"]}
        js = ["toolhub/admin.js"]

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(
                binding_total=Count("bindings", distinct=True),
                key_total=Count("api_keys", filter=Q(api_keys__revoked_at__isnull=True), distinct=True),
            )
        )

    @admin.display(description="endpoint")
    def endpoint(self, obj):
        return obj.endpoint_path

    @admin.display(description="bindings", ordering="binding_total")
    def binding_count(self, obj):
        url = reverse("admin:tools_app_binding_changelist") + f"?mcp_instance__id__exact={obj.pk}"
        return format_html('<a href="{}">{}</a>', url, obj.binding_total)

    @admin.display(description="active keys", ordering="key_total")
    def key_count(self, obj):
        return obj.key_total

    def save_model(self, request, obj, form, change):
        fields = {name: getattr(obj, name) for name in services.INSTANCE_FIELDS}
        if change:
            # Saving the form confirms a new slug; the page says what it may break.
            old_slug = McpInstance.objects.filter(pk=obj.pk).values_list("slug", flat=True).first()
            used_by = usage_of(instances=[obj.pk]) if old_slug not in (None, obj.slug) else []
            self.service(services.instance_update, instance=obj, force=True, **fields)
            warn_in_use(request, used_by, f"The instance {old_slug!r}", f"moved to /mcp/{obj.slug}/")
        else:
            created = self.service(services.instance_create, owner=request.user, **fields)
            obj.__dict__.update(created.__dict__)

    def delete_model(self, request, obj):
        services.instance_delete(instance=obj, force=True)  # confirmed on the page (OwnedAdmin.delete_view)

    def delete_queryset(self, request, queryset):
        services.instance_delete_many(instances=queryset, force=True)

    def save_formset(self, request, form, formset, change):
        if formset.model is Prompt:
            return self.save_prompts(form, formset)
        if formset.model is not Binding:
            return super().save_formset(request, form, formset, change)
        saved = formset.save(commit=False)
        # Deleted rows first, so their names are free for the others (SPEC §2.4). Ticking a row's delete box and
        # saving confirms it; the page then says what the unbind may break.
        for binding in formset.deleted_objects:
            used_by = usage_of(bindings=[binding.pk])
            services.binding_delete(binding=binding, force=True)
            warn_in_use(request, used_by, f"The bound tool {binding.effective_name!r}", "was unbound")
        for binding in saved:
            fields = {name: getattr(binding, name) for name in services.BINDING_FIELDS}
            if binding.pk is None:
                self.service(
                    services.binding_create,
                    prefix=f"Bound tool {binding.tool.name!r}: ",
                    mcp_instance=form.instance,
                    tool=binding.tool,
                    **fields,
                )
            else:
                save_binding_warning_in_use(self, request, binding, fields)
        return None

    def save_prompts(self, form, formset) -> None:
        """The prompt rows through the services; deleted rows first, so their names are free for the others."""
        saved = formset.save(commit=False)
        for prompt in formset.deleted_objects:
            services.prompt_delete(prompt=prompt)
        for prompt in saved:
            fields = {name: getattr(prompt, name) for name in services.PROMPT_FIELDS}
            prefix = f"Prompt {prompt.name!r}: "
            if prompt.pk is None:
                self.service(services.prompt_create, prefix=prefix, mcp_instance=form.instance, **fields)
            else:
                self.service(services.prompt_update, prefix=prefix, prompt=prompt, **fields)

    def get_urls(self):
        view = self.admin_site.admin_view
        return [
            path("setup/", view(self.setup_view), name="tools_app_mcpinstance_setup"),
            path("<path:object_id>/keys/new/", view(self.key_create_view), name="tools_app_mcpinstance_key_create"),
            path("<path:object_id>/guide/", view(self.guide_view), name="tools_app_mcpinstance_guide"),
            path(
                "<path:object_id>/keys/<int:key_id>/revoke/",
                view(self.key_revoke_view),
                name="tools_app_mcpinstance_key_revoke",
            ),
            path(
                "<path:object_id>/bindings/<str:action>/",
                view(self.bindings_bulk_view),
                name="tools_app_mcpinstance_bindings_bulk",
            ),
            *super().get_urls(),
        ]

    def setup_view(self, request):
        """The setup page (tools_app.admin.setup): export, plan and apply the user's setup."""
        return admin_setup.setup_view(self, request)

    def connect_context(self, request, instance: McpInstance, key: str | None = None) -> dict[str, Any]:
        url = instance.endpoint_url(request)
        return {
            "endpoint_url": url,
            "client_configs": client_configs(server_name=f"toolhub-{instance.slug}", url=url, key=key),
            "api_keys": list(instance.api_keys.all()),
            "key_form": ApiKeyCreateForm(),
        }

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra_context = dict(extra_context or {})
        instance = self.get_object(request, unquote(object_id))
        if instance is not None and self.has_view_permission(request, instance):
            window = bindings_window(instance, request)
            setattr(request, BINDINGS_WINDOW_ATTR, window)  # BindingInline.get_queryset lists these
            extra_context["bindings_window"] = window
            extra_context.update(self.connect_context(request, instance))
            extra_context["tool_list_estimate"] = tool_list_estimate(instance)
            extra_context["bindings_url"] = (
                reverse("admin:tools_app_binding_changelist") + f"?mcp_instance__id__exact={instance.pk}"
            )
            extra_context["calls_url"] = (
                reverse("admin:tools_app_calllog_changelist") + f"?mcp_instance__id__exact={instance.pk}"
            )
            extra_context["can_change_instance"] = self.has_change_permission(request, instance)
        return super().change_view(request, object_id, form_url, extra_context)

    def guide_view(self, request, object_id):
        """The instance's usage guide (SPEC §5) on its own page: on the instance page it was most of its height
        and of its time."""
        instance = self.get_object_or_404(request, object_id)
        context = self.admin_context(
            request,
            title=f"Usage guide of {instance.name}",
            original=instance,
            instance=instance,
            usage_guide=render_usage_guide(instance),
            has_view_permission=True,
        )
        return TemplateResponse(request, "admin/tools_app/mcpinstance/guide.html", context)

    def key_create_view(self, request, object_id):
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        instance = self._checked_instance(request, object_id)
        form = ApiKeyCreateForm(request.POST)
        if not form.is_valid():
            problems = [message for messages_ in form.errors.values() for message in messages_]
            messages.error(request, "The key was not created: " + "; ".join(problems))
            return HttpResponseRedirect(reverse("admin:tools_app_mcpinstance_change", args=[instance.pk]))
        # The key's own history records the creation (services.api_key_issue).
        key, plaintext = services.api_key_issue(
            mcp_instance=instance,
            label=form.cleaned_data["label"],
            read_only=form.cleaned_data["read_only"],
            attributes=form.cleaned_data["attributes"],
            actor=request.user,
            via="admin",
        )
        return self.key_created_response(request, instance, key, plaintext)

    def key_created_response(self, request, instance, key, plaintext):
        """The one page that shows the key (SPEC §2.3); it is never stored nor shown again."""
        context = self.admin_context(
            request,
            title=f"API key created for {instance.name}",
            original=instance,
            instance=instance,
            api_key=key,
            plaintext=plaintext,
            has_view_permission=True,
            media=self.media,
            **{k: v for k, v in self.connect_context(request, instance, key=plaintext).items() if k != "api_keys"},
        )
        response = TemplateResponse(request, "admin/tools_app/mcpinstance/key_created.html", context)
        response["Cache-Control"] = "no-store"
        return response

    def key_revoke_view(self, request, object_id, key_id):
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        instance = self._checked_instance(request, object_id)
        key = instance.api_keys.filter(pk=key_id).first()
        if key is None:
            raise Http404(f"API key {key_id} does not exist on this instance.")
        services.api_key_revoke(api_key=key, actor=request.user, via="admin")
        messages.success(request, f"The key {key} is revoked: clients using it now get 401.")
        return HttpResponseRedirect(reverse("admin:tools_app_mcpinstance_change", args=[instance.pk]))

    def bindings_bulk_view(self, request, object_id, action):
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        instance = self._checked_instance(request, object_id)
        if action not in ("enable", "disable"):
            raise Http404(f"Unknown bulk action {action!r}.")
        count = set_enabled(instance.bindings.select_related("tool"), action == "enable")
        self.log_change(request, instance, f"{action.title()}d {count} binding(s).")
        messages.success(request, f"{action.title()}d {count} binding(s) of {instance.name}.")
        return HttpResponseRedirect(reverse("admin:tools_app_mcpinstance_change", args=[instance.pk]))

    def _checked_instance(self, request, object_id) -> McpInstance:
        instance = self.get_object_or_404(request, object_id)
        if not self.has_change_permission(request, instance):
            raise PermissionDenied
        return instance


def save_binding_warning_in_use(model_admin: OwnedAdmin, request, binding: Binding, fields: dict[str, Any]) -> None:
    """Save an edited binding (the form's submit confirms it); a new effective name or tool of a binding in use is
    said on the page, with what it may break."""
    stored = Binding.objects.filter(pk=binding.pk).select_related("tool").first()
    changed = stored is not None and (
        stored.effective_name.lower() != binding.effective_name.lower() or stored.tool_id != binding.tool_id
    )
    used_by = usage_of(bindings=[binding.pk]) if changed else []
    model_admin.service(
        services.binding_update,
        prefix=f"Bound tool {binding.tool.name!r}: ",
        binding=binding,
        tool=binding.tool,
        force=True,
        **fields,
    )
    if stored is not None:
        warn_in_use(request, used_by, f"The bound tool {stored.effective_name!r}", f"now is {binding.effective_name!r}")


def set_enabled(bindings, enabled: bool) -> int:
    """Enable or disable bindings through the service; returns how many changed."""
    count = 0
    with transaction.atomic():
        for binding in bindings:
            if binding.enabled != enabled:
                services.binding_update(binding=binding, enabled=enabled)
                count += 1
    return count


class BindingAdmin(InstanceColumn, OwnedAdmin):
    form = BindingAdminForm
    list_display = ["effective_name", "instance", "tool", "tool_type", "enabled", "name_override", "pins"]
    list_display_links = ["effective_name"]
    list_editable = ["enabled"]
    list_filter = [("mcp_instance", admin.RelatedOnlyFieldListFilter), "enabled", "tool__type"]
    search_fields = ["tool__name", "name_override", "mcp_instance__name"]
    list_select_related = ["tool", "mcp_instance"]
    actions = ["enable_bindings", "disable_bindings", "unbind"]
    in_use_kind = "bindings"

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("tool", "mcp_instance")

    def get_actions(self, request):
        actions = super().get_actions(request)
        # "Unbind" replaces the generic delete action with a clearer name.
        actions.pop("delete_selected", None)
        return actions

    @admin.display(description="name", ordering="name_key")
    def effective_name(self, obj):
        return obj.effective_name

    @admin.display(description="type", ordering="tool__type")
    def tool_type(self, obj):
        return obj.tool.type

    @admin.display(description="pinned arguments")
    def pins(self, obj):
        shown = "; ".join(pin_summary(obj.pinned_arguments)) or "-"
        return f"{shown} (read-only)" if obj.read_only else shown

    def save_model(self, request, obj, form, change):
        fields = {name: getattr(obj, name) for name in services.BINDING_FIELDS}
        if change:
            save_binding_warning_in_use(self, request, obj, {**fields, "mcp_instance": obj.mcp_instance})
        else:
            created = self.service(services.binding_create, mcp_instance=obj.mcp_instance, tool=obj.tool, **fields)
            obj.__dict__.update(created.__dict__)

    @admin.action(description="Enable selected bindings", permissions=["change"])
    def enable_bindings(self, request, queryset):
        count = set_enabled(queryset, True)
        self.message_user(request, f"Enabled {count} binding(s).", messages.SUCCESS)

    @admin.action(description="Disable selected bindings", permissions=["change"])
    def disable_bindings(self, request, queryset):
        count = set_enabled(queryset, False)
        self.message_user(request, f"Disabled {count} binding(s).", messages.SUCCESS)

    def delete_model(self, request, obj):
        services.binding_delete(binding=obj, force=True)  # confirmed on the page (OwnedAdmin.delete_view)

    @admin.action(description="Unbind selected tools (remove the bindings)", permissions=["delete"])
    def unbind(self, request, queryset):
        """Unbind at once; bindings in use first get a page listing what breaks, with a box to tick."""
        used_by = self.used_by(list(queryset))
        if used_by and not request.POST.get(CONFIRM_IN_USE):
            context = {
                **self.admin_site.each_context(request),
                "opts": self.model._meta,
                "title": "Unbind tools in use",
                "objects": list(queryset),
                "action": "unbind",
                "used_by": used_by,
                "confirm_in_use": CONFIRM_IN_USE,
                "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            }
            return TemplateResponse(request, "admin/tools_app/binding/unbind_confirmation.html", context)
        names = [f"{b.effective_name} on {b.mcp_instance.name}" for b in queryset]
        with transaction.atomic():
            self.log_deletions(request, queryset)
            count = services.binding_delete_many(bindings=queryset, force=True)
        self.message_user(request, f"Unbound {len(names)} tool(s): {', '.join(names)}.", messages.SUCCESS)
        return count


class KeyStatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request, model_admin):
        return [("active", "active"), ("revoked", "revoked")]

    def queryset(self, request, queryset):
        if self.value() == "active":
            return queryset.filter(revoked_at__isnull=True)
        if self.value() == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        return queryset


class ApiKeyAdmin(InstanceColumn, OwnedAdmin):
    form = ApiKeyAdminForm
    list_display = ["__str__", "instance", "prefix", "read_only", "created_at", "last_used_at", "status"]
    list_filter = [("mcp_instance", admin.RelatedOnlyFieldListFilter), KeyStatusFilter]
    search_fields = ["label", "prefix", "mcp_instance__name"]
    list_select_related = ["mcp_instance"]
    actions = ["revoke"]
    readonly_fields = ["prefix", "created_at", "last_used_at", "revoked_at"]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("mcp_instance")

    def get_fields(self, request, obj=None):
        if obj is None:
            return ["mcp_instance", "label", "read_only", "attributes"]
        return [
            "mcp_instance",
            "label",
            "read_only",
            "attributes",
            "prefix",
            "created_at",
            "last_used_at",
            "revoked_at",
        ]

    def has_change_permission(self, request, obj=None):
        # A key is immutable once issued (revoke it instead); its page is read-only.
        return obj is None and super().has_change_permission(request, obj)

    @admin.display(description="status")
    def status(self, obj):
        return f"revoked {obj.revoked_at:%Y-%m-%d %H:%M}" if obj.revoked else "active"

    def save_model(self, request, obj, form, change):
        key, plaintext = self.service(
            services.api_key_issue,
            mcp_instance=obj.mcp_instance,
            label=obj.label,
            read_only=obj.read_only,
            attributes=obj.attributes,
            actor=request.user,
            via="admin",
        )
        obj.__dict__.update(key.__dict__)
        request._toolhub_plaintext = plaintext

    def log_addition(self, request, obj, message):
        """Recorded by services.api_key_issue (with the surface), not a second time here."""

    def delete_model(self, request, obj):
        services.api_key_delete(api_key=obj)

    def delete_queryset(self, request, queryset):
        services.api_key_delete_many(api_keys=queryset)

    def response_add(self, request, obj, post_url_continue=None):
        plaintext = getattr(request, "_toolhub_plaintext", None)
        if plaintext is None:
            return super().response_add(request, obj, post_url_continue)
        instance_admin = self.admin_site._registry[McpInstance]
        return instance_admin.key_created_response(request, obj.mcp_instance, obj, plaintext)

    @admin.action(description="Revoke selected keys", permissions=["delete"])
    def revoke(self, request, queryset):
        count = 0
        for key in queryset.filter(revoked_at__isnull=True):
            services.api_key_revoke(api_key=key, actor=request.user, via="admin")
            count += 1
        self.message_user(request, f"Revoked {count} key(s).", messages.SUCCESS)


class CallLogAdmin(InstanceColumn, OwnedAdmin):
    # Read-only here, but removed with (or unlinked from) its instance, tool, key or user when they are
    # deleted: it never blocks their deletion (tools_app.admin.DeletedWithParentMixin).
    deleted_with_parent = True
    list_display = ["created_at", "tool_name", "instance", "surface", "status", "error_code", "duration"]
    list_filter = [
        ("mcp_instance", admin.RelatedOnlyFieldListFilter),
        ("tool", admin.RelatedOnlyFieldListFilter),
        "status",
        "surface",
        "created_at",
    ]
    search_fields = ["tool_name", "error_code", "error_message"]
    list_select_related = ["mcp_instance"]
    list_display_links = ["created_at", "tool_name"]
    change_list_template = "admin/tools_app/calllog/change_list.html"

    class Media:
        css = {"all": ["toolhub/admin.css"]}

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("mcp_instance")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.display(description="duration", ordering="duration_ms")
    def duration(self, obj):
        return f"{obj.duration_ms:.1f} ms"

    def changelist_view(self, request, extra_context=None):
        response = super().changelist_view(request, extra_context)
        context = getattr(response, "context_data", None)
        if context and "cl" in context:
            context["call_stats"] = call_stats(context["cl"].queryset)
        return response

    def change_view(self, request, object_id, form_url="", extra_context=None):
        """The call as its client saw it (tools_app.admin.call_detail), in place of a read-only form; the call
        log is never changed here (403)."""
        if request.method not in ("GET", "HEAD"):
            raise PermissionDenied
        return call_detail_view(self, request, object_id)


def tool_mcp_panel(request, tool: Tool) -> ToolPanel:
    """On a tool's change and try-it pages: the instances it is bound to and its call statistics,
    with a link to its calls in the call log (registered with tools_app.admin.register_tool_panel below)."""
    bindings = [
        {
            "instance": binding.mcp_instance,
            "name": binding.effective_name,
            "enabled": binding.enabled,
            "url": reverse("admin:tools_app_mcpinstance_change", args=[binding.mcp_instance_id]),
        }
        for binding in tool.bindings.select_related("mcp_instance").order_by("mcp_instance__name")
    ]
    stats = call_stats(CallLog.objects.for_user(request.user).filter(tool=tool))
    return ToolPanel(
        template="admin/tools_app/_tool_panels.html",
        context={
            "tool_bindings": bindings,
            "tool_stats": stats["total"],
            "tool_stats_window": stats["window"],
            "tool_calls_url": reverse("admin:tools_app_calllog_changelist") + f"?tool__id__exact={tool.pk}",
        },
    )


def user_admin_deleting_call_logs(site: admin.AdminSite) -> None:
    """Re-register the user admin so that a user's call log rows do not block deleting the user."""
    user_model = get_user_model()
    if not site.is_registered(user_model):
        return
    base = type(site.get_model_admin(user_model))
    if issubclass(base, DeletedWithParentMixin):
        return
    site.unregister(user_model)
    site.register(user_model, type(base.__name__, (DeletedWithParentMixin, base), {}))


admin.site.register(McpInstance, McpInstanceAdmin)
admin.site.register(Binding, BindingAdmin)
admin.site.register(ApiKey, ApiKeyAdmin)
admin.site.register(CallLog, CallLogAdmin)
register_tool_panel(tool_mcp_panel)
user_admin_deleting_call_logs(admin.site)

__all__ = ["ApiKeyAdmin", "BindingAdmin", "CallLogAdmin", "McpInstanceAdmin"]
