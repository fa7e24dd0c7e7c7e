"""Admin for tables and tools (SPEC §7), and the OwnedAdmin base that admin/instances.py reuses.

Ownership (SPEC §2) comes from permissions.for_user/can_change: another user's object behaves as if
it did not exist. Every write goes through services; a ValidationError a service raises at save
time (e.g. a NAME_CONFLICT lost in a race) is shown as a form error, never a 500.

The try-it view runs the tool through the call pipeline (tools_app.execution.pipeline.run_tool_call, surface
"admin"). Other admin modules add blocks to the tool pages with register_tool_panel (admin/instances.py:
the instances a tool is bound to and its call statistics), so this module needs none of them.
"""

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.actions import delete_selected
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Count, IntegerField, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.http import Http404, HttpRequest, HttpResponse, QueryDict, StreamingHttpResponse
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.text import slugify

from tools_app import services
from tools_app.admin import table_history, table_records
from tools_app.admin.data_tools import bind_to_instance, generate_tools_action
from tools_app.admin.examples import example_arguments, mount_value
from tools_app.admin.tool_forms import (
    RAW_FIELD,
    OwnerAwareModelForm,
    TableAdminForm,
    ToolAdminForm,
    TryItForm,
    compact_json,
    editor_max_chars,
    pretty_json,
    type_help,
)
from tools_app.choices import WRITE_TYPES, ToolType
from tools_app.data_access.shape import describe
from tools_app.execution import records
from tools_app.execution.pipeline import Caller, run_tool_call, target_of_tool
from tools_app.kernel.errors import ToolhubError
from tools_app.kernel.limits import default_max_result_bytes, max_table_depth, show_all_max_bytes
from tools_app.kernel.streaming import streaming_response
from tools_app.models import Surface, Table, TableStorage, Tool
from tools_app.permissions import can_change
from tools_app.selectors import UsedBy, usage_of
from tools_app.tool_schemas import input_schema_breaks
from tools_app.toolsets import generation_state
from tools_app.validators import nesting_beyond, on_fresh_stack

logger = logging.getLogger(__name__)

admin.site.site_header = "toolhub admin"
admin.site.site_title = "toolhub"
admin.site.index_title = "Tables, tools and MCP endpoints"

# Results longer than this are cut on the try-it page (the full value is still computed and logged).
TRY_IT_MAX_CHARS = 200_000
REFUSAL_ATTR = "_toolhub_refusal"
# The change guard's checkbox on the delete confirmation pages: ticked, the admin deletes what is in use.
CONFIRM_IN_USE = "confirm_in_use"


class ServiceRefused(Exception):
    """A service refused a write that passed form validation (e.g. a concurrent rename)."""

    def __init__(self, error: ValidationError, prefix: str = ""):
        super().__init__(str(error))
        self.error = error
        self.prefix = prefix


def add_refusal_errors(form, refusal: ServiceRefused) -> None:
    """Put a service's ValidationError on the form: on the fields it names, the rest on top."""
    error = refusal.error
    if hasattr(error, "error_dict"):
        for field, errors in error.error_dict.items():
            if field in form.fields and not refusal.prefix:
                form.add_error(field, errors)
            else:
                for item in errors:
                    form.add_error(None, f"{refusal.prefix}{' '.join(item.messages)}")
    else:
        for message in error.messages:
            form.add_error(None, f"{refusal.prefix}{message}")


def adopt(target: Any, saved: Any) -> Any:
    """Make the object the admin holds the one a service saved (pk, defaults, counters)."""
    target.__dict__.update(saved.__dict__)
    return target


def has_for_user(model) -> bool:
    return hasattr(model._default_manager.all(), "for_user")


class DeletedWithParentMixin:
    """Deleting an object is not blocked by related rows whose admin sets `deleted_with_parent = True`.

    Such rows (mcp_app's call log) cannot be deleted on their own admin pages, so Django's confirmation
    would count them as "objects you lack permission to delete" and refuse to delete their instance or
    user. They belong to their parent: the models cascade (or set null) them, exactly as the API's deletes
    do, so a user who may delete the parent may delete them with it.
    """

    def get_deleted_objects(self, objs, request):
        to_delete, model_count, perms_needed, protected = super().get_deleted_objects(objs, request)
        exempt = {
            model._meta.verbose_name
            for model, model_admin in self.admin_site._registry.items()
            if getattr(model_admin, "deleted_with_parent", False)
        }
        return to_delete, model_count, perms_needed - exempt, protected


def warn_in_use(request, used_by: list[UsedBy], what: str, change: str) -> None:
    """After a confirmed change of something in use (a rename, a breaking schema): say what it may break."""
    if used_by:
        shown = "; ".join(str(used) for used in used_by[:5]) + ("; …" if len(used_by) > 5 else "")
        messages.warning(request, f"{what} {change} while in use: {shown}. Clients that use it may break.")


def guarded_delete_selected(modeladmin, request, queryset):
    """Django's delete_selected with the change guard: the confirmation page lists what the objects serve
    (selectors.usage_of) and, when anything uses them, deletes only with its checkbox ticked."""
    used_by = modeladmin.used_by(list(queryset))
    unconfirmed = bool(used_by and request.POST.get("post") and not request.POST.get(CONFIRM_IN_USE))
    if unconfirmed:
        request.POST = request.POST.copy()
        request.POST.pop("post")
    response = delete_selected(modeladmin, request, queryset)
    if isinstance(response, TemplateResponse) and response.context_data is not None:
        response.context_data.update(used_by=used_by, in_use_unconfirmed=unconfirmed, confirm_in_use=CONFIRM_IN_USE)
    return response


guarded_delete_selected.allowed_permissions = ("delete",)  # type: ignore[attr-defined]
guarded_delete_selected.short_description = delete_selected.short_description  # type: ignore[attr-defined]


class OwnedAdmin(DeletedWithParentMixin, admin.ModelAdmin):
    """SPEC §2 in the admin: querysets, object permissions and foreign-key choices follow for_user.

    Subclasses write through services in save_model(); wrap service calls in self.service(...) so a
    refusal at save time becomes a form error (the whole request is rolled back, then re-rendered).

    The change guard: a subclass whose objects serve tools names its keyword of selectors.usage_of in
    `in_use_kind`; its delete confirmation pages then list what would break and need the CONFIRM_IN_USE checkbox
    when anything does (its deletes pass force=True to the services: the page confirmed them).
    """

    in_use_kind: str | None = None

    def used_by(self, objs) -> list[UsedBy]:
        if self.in_use_kind is None or not objs:
            return []
        return usage_of(**{self.in_use_kind: [obj.pk for obj in objs]})

    def delete_view(self, request, object_id, extra_context=None):
        extra_context = dict(extra_context or {})
        obj = self.get_object(request, unquote(object_id)) if self.in_use_kind else None
        if obj is not None and self.has_view_permission(request, obj):
            used_by = self.used_by([obj])
            extra_context.update(used_by=used_by, confirm_in_use=CONFIRM_IN_USE)
            if used_by and request.method == "POST" and not request.POST.get(CONFIRM_IN_USE):
                # Django deletes on any POST to this page: without the box ticked, show the page again.
                extra_context["in_use_unconfirmed"] = True
                request.POST = QueryDict()
        return super().delete_view(request, object_id, extra_context)

    def get_actions(self, request):
        actions = super().get_actions(request)
        if self.in_use_kind and "delete_selected" in actions:
            _, name, description = actions["delete_selected"]
            actions["delete_selected"] = (guarded_delete_selected, name, description)
        return actions

    def get_queryset(self, request):
        return super().get_queryset(request).for_user(request.user)

    def has_view_permission(self, request, obj=None):
        return super().has_view_permission(request, obj) and (obj is None or can_change(request.user, obj))

    def has_change_permission(self, request, obj=None):
        return super().has_change_permission(request, obj) and (obj is None or can_change(request.user, obj))

    def has_delete_permission(self, request, obj=None):
        return super().has_delete_permission(request, obj) and (obj is None or can_change(request.user, obj))

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        related = db_field.related_model
        if has_for_user(related):
            choices = related._default_manager.for_user(request.user)
            # A choice shows a table's name only: loading every document would parse them all for a <select>
            # (and a deeply nested one made the page a RecursionError 500).
            kwargs["queryset"] = choices
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def get_list_display(self, request):
        columns = list(super().get_list_display(request))
        if request.user.is_superuser and "owner" not in columns and hasattr(self.model, "owner"):
            columns.append("owner")
        return columns

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        attrs: dict[str, Any] = {}
        if issubclass(form, OwnerAwareModelForm):
            attrs["toolhub_owner"] = obj.owner if obj is not None and hasattr(obj, "owner") else request.user
        refusal = getattr(request, REFUSAL_ATTR, None)
        if refusal is not None:

            def clean(self):
                cleaned = super(form_class, self).clean()
                add_refusal_errors(self, refusal)
                return cleaned

            attrs["clean"] = clean
        if not attrs:
            return form
        form_class = type(form.__name__, (form,), attrs)
        return form_class

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except ServiceRefused as refusal:
            # The failed attempt was rolled back (changeform_view runs in a transaction); render the
            # same POST again with the refusal as a form error, so nothing is half-applied.
            setattr(request, REFUSAL_ATTR, refusal)
            return super().changeform_view(request, object_id, form_url, extra_context)

    @staticmethod
    def service(function, prefix: str = "", **kwargs):
        try:
            return function(**kwargs)
        except ValidationError as exc:
            raise ServiceRefused(exc, prefix) from exc
        except ToolhubError as exc:  # a typed refusal (e.g. QUOTA_EXCEEDED): its message, on the form
            raise ServiceRefused(ValidationError(f"{exc.code}: {exc.message}", code=str(exc.code)), prefix) from exc

    def get_object_or_404(self, request, object_id):
        """The object if the user may see it; otherwise 404, exactly as for a missing one (SPEC §2)."""
        obj = self.get_object(request, unquote(object_id))
        if obj is None or not self.has_view_permission(request, obj):
            raise Http404(f"{self.model._meta.verbose_name} {object_id!r} does not exist.")
        return obj

    def admin_context(self, request, **context):
        return {**self.admin_site.each_context(request), "opts": self.model._meta, **context}


#
# Tables
#


class TableAdmin(OwnedAdmin):
    form = TableAdminForm
    list_display = ["name", "short_description", "size", "version", "tools_link", "updated_at"]
    search_fields = ["name", "description"]
    list_filter = ["updated_at"]
    readonly_fields = ["version", "created_at", "updated_at"]
    change_form_template = "admin/tools_app/table/change_form.html"
    actions = [generate_tools_action]
    in_use_kind = "tables"

    class Media:
        css = {"all": ["toolhub/admin.css"]}
        js = ["toolhub/admin.js"]

    def get_queryset(self, request):
        tool_counts = (
            Tool.objects.filter(table=OuterRef("pk")).order_by().values("table").annotate(n=Count("id")).values("n")
        )
        # The document is loaded only where it is shown (Table.data reads it on first use): the list shows its
        # size as the table row keeps it (data_bytes).
        return (
            super()
            .get_queryset(request)
            .annotate(tool_count=Coalesce(Subquery(tool_counts, output_field=IntegerField()), 0))
        )

    def is_large(self, obj) -> bool:
        """Shown as a read-only summary: over the editor's size, or nested deeper than the table limit (a
        document stored before TOOLHUB_MAX_TABLE_DEPTH existed: the editor could not render it)."""
        if obj is None:
            return False
        # A rows table within the editor's size is edited whole like a document (its records spliced in; a save
        # writes only the changed records, docs/tables-at-scale.md "Whole-data writes of a rows table").
        if (obj.data_bytes or 0) > editor_max_chars():
            return True
        if not hasattr(obj, "_toolhub_too_deep"):
            obj._toolhub_too_deep = nesting_beyond(obj.data, max_table_depth()) is not None
        return obj._toolhub_too_deep

    def get_fieldsets(self, request, obj=None):
        data_fields = ["data_file", "data_format"] if self.is_large(obj) else ["data", "data_file", "data_format"]
        fieldsets = [
            (None, {"fields": ["name", "description", "indexed_fields"]}),
            ("Data", {"fields": data_fields}),
            ("Call log", {"fields": ["redact_fields"]}),
        ]
        if obj is not None:
            fieldsets.append(("Versions", {"fields": ["version", "created_at", "updated_at"]}))
        return fieldsets

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        if self.is_large(obj):
            form = type(form.__name__, (form,), {"toolhub_large": True})
        return form

    @admin.display(description="description")
    def short_description(self, obj):
        text = obj.description or ""
        return text if len(text) <= 80 else text[:79] + "…"

    @admin.display(description="size", ordering="data_bytes")
    def size(self, obj):
        return human_size(obj.data_bytes or 0)

    @admin.display(description="tools", ordering="tool_count")
    def tools_link(self, obj):
        url = reverse("admin:tools_app_tool_changelist") + f"?table__id__exact={obj.pk}"
        return format_html('<a href="{}">{}</a>', url, obj.tool_count)

    def save_model(self, request, obj, form, change):
        fields = {"name": obj.name, "description": obj.description, "indexed_fields": obj.indexed_fields}
        if "redact_fields" in form.cleaned_data:
            fields["redact_fields"] = form.cleaned_data["redact_fields"]
        uploaded = form.cleaned_data.get("data_file")
        if "data" in form.fields or uploaded is not None:
            fields["data"] = uploaded if uploaded is not None else form.cleaned_data.get("data")
            if fields["data"] is None:
                fields["data"] = {}
        if change:
            with services.write_audit(services.WriteAudit(surface=str(Surface.ADMIN), user_id=request.user.pk)):
                self.service(services.table_update, table=obj, **fields)
        else:
            adopt(obj, self.service(services.table_create, owner=request.user, **fields))

    def delete_model(self, request, obj):
        services.table_delete(table=obj, force=True)  # confirmed on the page (OwnedAdmin.delete_view)

    def delete_queryset(self, request, queryset):
        services.table_delete_many(tables=queryset, force=True)

    def get_urls(self):
        view = self.admin_site.admin_view
        return [
            path("<path:object_id>/data.json", view(self.download_view), name="tools_app_table_download"),
            path("<path:object_id>/records/", view(self.records_view), name="tools_app_table_records"),
            path("<path:object_id>/records/record/", view(self.record_view), name="tools_app_table_record"),
            path(
                "<path:object_id>/history/<int:version>/",
                view(self.version_view),
                name="tools_app_table_version",
            ),
            path(
                "<path:object_id>/history/<int:version>/restore/",
                view(self.restore_view),
                name="tools_app_table_restore",
            ),
            *super().get_urls(),
        ]

    def history_view(self, request, object_id, extra_context=None):
        """The table's data history, in place of the admin's log of edits made here."""
        return table_history.history_view(self, request, object_id)

    def version_view(self, request, object_id, version):
        return table_history.version_view(self, request, object_id, version)

    def restore_view(self, request, object_id, version):
        return table_history.restore_view(self, request, object_id, version)

    def records_view(self, request, object_id):
        return table_records.records_view(self, request, object_id)

    def record_view(self, request, object_id):
        return table_records.record_view(self, request, object_id)

    def download_view(self, request, object_id):
        table = self.get_object_or_404(request, object_id)
        response: HttpResponse | StreamingHttpResponse
        if table.storage == TableStorage.ROWS:
            # Streamed: the records are read and written CHUNK rows at a time, never held whole.
            response = streaming_response(
                request, records.document_chunks(table.pk, compact_json), content_type="application/json"
            )
        else:
            _, data = services.table_data(table.pk)
            response = HttpResponse(on_fresh_stack(compact_json, data), content_type="application/json")
        response["Content-Disposition"] = f'attachment; filename="{slugify(table.name) or "table"}.json"'
        return response

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra_context = dict(extra_context or {})
        table = self.get_object(request, unquote(object_id))
        if table is not None and self.has_view_permission(request, table):
            extra_context.update(self.table_panels(request, table))
        return super().change_view(request, object_id, form_url, extra_context)

    def table_panels(self, request, table) -> dict[str, Any]:
        # A rows table's collections: their first records (the shape and excerpt of a table of millions of records
        # gather none of the rest); a document table's whole document.
        version, data, _counts = services.table_data_sampled(table.pk)
        shape = services.table_derived(table.pk, version, ("shape", ""), lambda: describe(data))
        context: dict[str, Any] = {
            "table_shape": pretty_json(shape),
            "table_size": human_size(table.data_bytes or 0),
            "table_large": self.is_large(table),
            "table_download_url": reverse("admin:tools_app_table_download", args=[table.pk]),
            "table_tools": list(table.tools.for_user(request.user).order_by("name")),
            "table_records_url": reverse("admin:tools_app_table_records", args=[table.pk]),
            "table_rows": table.storage == TableStorage.ROWS,
        }
        for tool in context["table_tools"]:
            tool.generation = generation_state(tool)  # the list's description column (toolsets.description_drift)
        if context["table_large"]:
            context["table_excerpt"] = excerpt(data)
            context["editor_limit"] = human_size(editor_max_chars())
            context["table_too_deep"] = getattr(table, "_toolhub_too_deep", False)
            context["table_depth_limit"] = max_table_depth()
        return context


def human_size(chars: int) -> str:
    if chars < 1000:
        return f"{chars} B"
    if chars < 1_000_000:
        return f"{chars / 1000:.1f} kB"
    return f"{chars / 1_000_000:.1f} MB"


def clipped(value: Any, depth: int = 20) -> Any:
    """`value` with what is nested deeper than `depth` levels shown as "…" (a deep document's excerpt)."""
    if isinstance(value, dict | list) and depth <= 0:
        return "…"
    if isinstance(value, dict):
        return {key: clipped(item, depth - 1) for key, item in value.items()}
    if isinstance(value, list):
        return [clipped(item, depth - 1) for item in value]
    return value


def excerpt(data: Any, items: int = 5) -> str:
    """The first few elements of a large (or deep) document, for a read-only look without rendering all of it."""
    if isinstance(data, list):
        head = data[:items]
        note = f"\n… {len(data) - items} more items" if len(data) > items else ""
    elif isinstance(data, dict):
        keys = list(data)[:items]
        head = {key: data[key] for key in keys}
        note = f"\n… {len(data) - items} more keys" if len(data) > items else ""
    else:
        head, note = data, ""
    text = pretty_json(clipped(head))
    if len(text) > 20_000:
        text = text[:20_000] + "\n…"
    return text + note


#
# Tools
#


class ToolAdmin(OwnedAdmin):
    form = ToolAdminForm
    list_display = ["name", "type", "category_label", "table", "mount", "use_count", "last_used", "try_it_link"]
    list_filter = ["type", ("table", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["name", "alias", "description"]
    readonly_fields = ["use_count", "last_used", "created_at", "updated_at"]
    list_select_related = ["table"]
    change_form_template = "admin/tools_app/tool/change_form.html"
    actions = [bind_to_instance]
    in_use_kind = "tools"
    # Blocks other apps add to the tool pages (register_tool_panel), in order.
    panel_providers: list["ToolPanelProvider"] = []
    fieldsets = [
        (None, {"fields": ["name", "alias", "type", "description"]}),
        ("Context (data tools)", {"fields": ["table", "json_path"]}),
        ("Schemas and metadata", {"fields": ["input_schema", "output_schema", "metadata"]}),
        ("Call log", {"fields": ["redact_arguments"]}),
        ("Usage", {"fields": ["use_count", "last_used", "created_at", "updated_at"]}),
    ]

    class Media:
        css = {"all": ["toolhub/admin.css"]}
        js = ["toolhub/admin.js"]

    def get_queryset(self, request):
        # A tool page never loads its table's document (it is not on the table's row at all).
        return super().get_queryset(request).select_related("table")

    @admin.display(description="category")
    def category_label(self, obj):
        return obj.category

    @admin.display(description="JSON path", ordering="json_path")
    def mount(self, obj):
        if obj.json_path:
            return format_html("<code>{}</code>", obj.json_path)
        # An empty pointer is the whole document (SPEC §2.2), not a missing value.
        return "(whole document)" if obj.is_data_tool else None

    @admin.display(description="")
    def try_it_link(self, obj):
        if obj.is_external:
            return ""
        return format_html('<a href="{}">Try it</a>', reverse("admin:tools_app_tool_try", args=[obj.pk]))

    def save_model(self, request, obj, form, change):
        fields = {name: getattr(obj, name) for name in services.TOOL_FIELDS}
        if change:
            # Saving the form confirms a rename or a breaking schema change; the page says what it may break.
            old_name, old_schema = Tool.objects.filter(pk=obj.pk).values_list("name", "input_schema").get()
            breaks = input_schema_breaks(old_schema, obj.input_schema)
            renamed = old_name.lower() != obj.name.lower()
            used_by = usage_of(tools=[obj.pk]) if renamed or breaks else []
            self.service(services.tool_update, tool=obj, force=True, **fields)
            change = (
                f"was renamed to {obj.name!r}" if renamed else "changed its input schema (" + " ".join(breaks) + ")"
            )
            warn_in_use(request, used_by, f"The tool {old_name!r}", change)
        else:
            adopt(obj, self.service(services.tool_create, owner=request.user, **fields))

    def delete_model(self, request, obj):
        services.tool_delete(tool=obj, force=True)  # confirmed on the page (OwnedAdmin.delete_view)

    def delete_queryset(self, request, queryset):
        services.tool_delete_many(tools=queryset, force=True)

    def get_urls(self):
        view = self.admin_site.admin_view
        return [path("<path:object_id>/try/", view(self.try_it_view), name="tools_app_tool_try"), *super().get_urls()]

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        extra_context = dict(extra_context or {})
        extra_context["type_helps"] = [
            {"type": value, "label": label, **type_help(value)} for value, label in ToolType.choices
        ]
        if object_id is not None:
            tool = self.get_object(request, unquote(object_id))
            if tool is not None and self.has_view_permission(request, tool):
                extra_context.update(tool_panels(request, tool))
        return super().changeform_view(request, object_id, form_url, extra_context)

    def try_it_view(self, request, object_id):
        tool = self.get_object_or_404(request, object_id)
        outcome = None
        if request.method == "POST":
            if not self.has_change_permission(request, tool):
                raise PermissionDenied
            form = TryItForm(request.POST, tool=tool)
            if form.is_valid():
                outcome = run_tool(request, tool, form.cleaned_data["arguments"], show_all="_show_all" in request.POST)
        else:
            form = TryItForm(tool=tool, initial=_prefilled(request))
        # After the run: a write's example must not name a key the write just took.
        example = example_arguments(tool, mount_value(tool))
        form.show_example(example)
        context = self.admin_context(
            request,
            title=f"Try {tool.name}",
            original=tool,
            tool=tool,
            form=form,
            outcome=outcome,
            help={**type_help(tool.type), "example": compact_json(example) if not tool.is_external else ""},
            writes=tool.type in WRITE_TYPES,
            schema=pretty_json(tool.input_schema),
            media=self.media + form.media,
            has_view_permission=True,
            **tool_panels(request, tool),
        )
        return TemplateResponse(request, "admin/tools_app/tool/try_it.html", context)


def _prefilled(request) -> dict[str, Any]:
    """The raw JSON arguments of `?arguments=<a JSON object>` (the call log's "Open in try-it"); nothing for
    anything else."""
    raw = request.GET.get("arguments")
    if not raw or len(raw) > 1_000_000:
        return {}
    try:
        arguments = json.loads(raw)
    except ValueError:
        return {}
    return {RAW_FIELD: arguments} if isinstance(arguments, dict) else {}


@dataclass(frozen=True)
class ToolPanel:
    """A block on the tool's change and try-it pages: a template included after the form, and its context.

    The context is merged into the page's context (so prefix its keys, e.g. "tool_..."); the template also
    sees the page's own keys: `original`/`tool`, `tool_help` and `try_it_url`.
    """

    template: str
    context: dict[str, Any] = field(default_factory=dict)


ToolPanelProvider = Callable[[HttpRequest, Tool], ToolPanel | None]


def register_tool_panel(provider: ToolPanelProvider) -> None:
    """Add a block to every tool page, after those registered before it (admin/instances.py adds the bound
    instances and the call statistics, and imports this module for OwnedAdmin: the hook keeps the two
    modules from importing each other)."""
    if provider not in ToolAdmin.panel_providers:
        ToolAdmin.panel_providers.append(provider)


def tool_panels(request, tool) -> dict[str, Any]:
    """The tool page's extra blocks: its type help and try-it link, then each registered panel."""
    context: dict[str, Any] = {
        "tool_help": type_help(tool.type),
        "try_it_url": None if tool.is_external else reverse("admin:tools_app_tool_try", args=[tool.pk]),
    }
    templates = []
    for provider in ToolAdmin.panel_providers:
        panel = provider(request, tool)
        if panel is not None:
            context.update(panel.context)
            templates.append(panel.template)
    context["tool_panel_templates"] = templates
    return context


def run_tool(request, tool: Tool, arguments: Any, *, show_all: bool = False) -> dict[str, Any]:
    """Run a tool as the admin user through the call pipeline (surface "admin"), return what to show.

    Its result budget is the API's (TOOLHUB_MAX_RESULT_BYTES): a longer list shows its first page, and
    `show_all` runs the call again with the hard cap TOOLHUB_TRY_IT_SHOW_ALL_BYTES (docs/paging.md)."""
    caller = Caller(surface=Surface.ADMIN, user_id=request.user.pk, user=request.user)
    budget = show_all_max_bytes() if show_all else default_max_result_bytes()
    target = target_of_tool(tool, max_result_bytes=budget)
    result = run_tool_call(caller=caller, target=target, name=tool.name, arguments=arguments)
    outcome: dict[str, Any] = {
        "arguments": pretty_json(arguments),
        "duration_ms": round(result.duration_ms, 2),
        "budget": human_size(budget),
        "show_all": show_all,
        "show_all_budget": human_size(show_all_max_bytes()),
    }
    if result.error is not None:
        outcome.update(ok=False, code=str(result.error.code), message=result.error.message)
        return outcome
    # A document stored before TOOLHUB_MAX_TABLE_DEPTH may nest too deep to write from inside a view.
    text = on_fresh_stack(pretty_json, result.value)
    shown = len(text) if show_all else TRY_IT_MAX_CHARS  # "show all" is bounded by its budget already
    outcome.update(ok=True, result=text[:shown], truncated=len(text) > shown)
    outcome["page_note"] = result.page.note if result.page is not None else ""
    outcome["paged"] = result.page is not None and result.page.next_cursor is not None
    outcome["result_size"] = human_size(len(text))
    messages.success(request, f"{tool.name} ran in {outcome['duration_ms']} ms.")
    return outcome


def generation_panel(request, tool: Tool) -> ToolPanel | None:
    """On a generated tool's pages: whether its description still matches its data (toolsets.description_drift)
    and whether its owner edited it since (then generating again keeps it)."""
    state = generation_state(tool)
    if state is None:
        return None
    return ToolPanel(template="admin/tools_app/_tool_generation.html", context={"tool_generation": state})


admin.site.register(Table, TableAdmin)
admin.site.register(Tool, ToolAdmin)
register_tool_panel(generation_panel)
