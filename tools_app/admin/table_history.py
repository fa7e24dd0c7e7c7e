"""The admin's History of a table: who changed what and when, as a readable diff; any version kept can
be opened and restored (with a confirmation). The data comes from the change log (services.table_log); restoring
goes through services.table_restore with the admin user as the audit. The lines of each entry, naming records by
key, are execution.history_lines'."""

import json
from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from tools_app import services
from tools_app.execution.history_lines import entry_lines, restored_version, short
from tools_app.kernel.errors import ToolhubError
from tools_app.kernel.limits import ADMIN_MAX_SHOWN_DOCUMENT_CHARS
from tools_app.models import Surface, TableChange

HISTORY_PAGE = 25


def _who(entry: TableChange) -> str:
    user = entry.user.get_username() if entry.user is not None else "(deleted user)" if entry.user_id else "—"
    return user


def _how(entry: TableChange) -> str:
    surfaces = {str(Surface.MCP): "MCP", str(Surface.API): "API", str(Surface.ADMIN): "Admin"}
    parts = [surfaces.get(entry.surface, entry.surface or "server")]
    restored = restored_version(entry)
    if restored is not None:
        parts.append(f"restore of version {restored}")
    if entry.tool_name:
        parts.append(f"tool {entry.tool_name}")
    if entry.binding_name:
        parts.append(f"as {entry.binding_name}")
    if entry.api_key is not None:
        parts.append(f"key {entry.api_key.label}")
    elif entry.api_token_id:
        parts.append(f"API token #{entry.api_token_id}")
    elif entry.oauth_client:
        parts.append(f"OAuth client {entry.oauth_client}")
    return ", ".join(parts)


def history_view(model_admin: Any, request, object_id: str):
    table = model_admin.get_object_or_404(request, object_id)
    entries = TableChange.objects.filter(table=table).select_related("user", "api_key").order_by("-version")
    page = Paginator(entries, HISTORY_PAGE).get_page(request.GET.get("page"))
    rows = []
    shown = entry_lines(table, list(page))
    for entry in page:
        lines, more = shown[entry.version]
        rows.append(
            {
                "entry": entry,
                "who": _who(entry),
                "how": _how(entry),
                "lines": lines,
                "more": more,
                # a restore says so in "how"; its arguments would only repeat the version
                "arguments": short(entry.arguments)
                if entry.arguments is not None and restored_version(entry) is None
                else "",
            }
        )
    oldest = services.oldest_version(table.pk, table.version)
    context = model_admin.admin_context(
        request,
        title=f"History of {table.name}",
        original=table,
        table=table,
        rows=rows,
        page=page,
        oldest=oldest,
        can_restore=model_admin.has_change_permission(request, table),
        has_view_permission=True,
    )
    return TemplateResponse(request, "admin/tools_app/table/history.html", context)


def version_view(model_admin: Any, request, object_id: str, version: int):
    table = model_admin.get_object_or_404(request, object_id)
    try:
        data = services.table_version_data(table.pk, version)
    except TableChange.DoesNotExist as exc:
        raise Http404(f"Version {version} of this table is not kept.") from exc
    text = json.dumps(data, indent=2, ensure_ascii=False)
    context = model_admin.admin_context(
        request,
        title=f"{table.name} at version {version}",
        original=table,
        table=table,
        version=version,
        document=text[:ADMIN_MAX_SHOWN_DOCUMENT_CHARS],
        cut=len(text) > ADMIN_MAX_SHOWN_DOCUMENT_CHARS,
        current=version == table.version,
        can_restore=model_admin.has_change_permission(request, table),
        has_view_permission=True,
    )
    return TemplateResponse(request, "admin/tools_app/table/version.html", context)


def restore_view(model_admin: Any, request, object_id: str, version: int):
    """GET: the confirmation page; POST: restore (a new version whose entry names the admin user)."""
    table = model_admin.get_object_or_404(request, object_id)
    if not model_admin.has_change_permission(request, table):
        raise PermissionDenied
    history_url = reverse("admin:tools_app_table_history", args=[table.pk])
    if request.method == "POST":
        audit = services.WriteAudit(surface=str(Surface.ADMIN), user_id=request.user.pk, arguments={"version": version})
        try:
            with services.write_audit(audit):
                new_version = services.table_restore(table_id=table.pk, version=version)
        except TableChange.DoesNotExist as exc:
            raise Http404(f"Version {version} of this table is not kept.") from exc
        except ToolhubError as exc:  # a typed refusal (QUOTA_EXCEEDED, VALIDATION_ERROR): nothing was written
            messages.error(request, f"Version {version} was not restored: {exc.code}: {exc.message}")
            return HttpResponseRedirect(history_url)
        messages.success(request, f"Restored version {version} of {table.name} as version {new_version}.")
        return HttpResponseRedirect(history_url)
    if version < services.oldest_version(table.pk, table.version) or version > table.version:
        raise Http404(f"Version {version} of this table is not kept.")
    context = model_admin.admin_context(
        request,
        title=f"Restore version {version} of {table.name}?",
        original=table,
        table=table,
        version=version,
        history_url=history_url,
        has_view_permission=True,
    )
    return TemplateResponse(request, "admin/tools_app/table/restore_confirm.html", context)
