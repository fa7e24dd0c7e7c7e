"""The admin's History of a table: who changed what and when, as a readable diff; any version kept can
be opened and restored (with a confirmation). The data comes from the change log (services.table_log); restoring
goes through services.table_restore with the admin user as the audit."""

import json
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from tools_app import services
from tools_app.models import Surface, TableChange

HISTORY_PAGE = 25
MAX_LINES = 40  # diff lines shown per entry
MAX_VALUE = 240  # characters of one value in a diff line
MAX_SHOWN_DOCUMENT = 200_000  # characters of a version's document shown on its page (the rest: download)


@dataclass
class DiffLine:
    kind: str  # "added", "removed", "changed"
    where: str
    before: str = ""
    after: str = ""


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 1] + "…"


def _where(path: str) -> str:
    """The path as the page shows it: a field inside a record after a dot ('/1/status' -> '/1 · status'), as
    the lines of a whole-record replacement show them."""
    if not path:
        return "(whole document)"
    tokens = path.split("/")[1:]
    inside = [number for number, token in enumerate(tokens[:-1]) if token.isdigit()]
    if not inside:
        return path
    record = inside[-1] + 1
    return "/" + "/".join(tokens[:record]) + " · " + "/".join(tokens[record:])


def readable_diff(patch: list, inverse: list) -> tuple[list[DiffLine], int]:
    """The entry's patch as lines a person reads: added / removed / changed, field by field for records. Each
    operation is paired with its inverse (the log writes the inverse in the reverse order of the patch), which
    holds the values a removal or a replacement took away. Returns the lines (at most MAX_LINES) and how many more."""
    paired = len(patch) == len(inverse)
    lines: list[DiffLine] = []
    for index, operation in enumerate(patch):
        kind = operation.get("op")
        path = operation.get("path", "")
        undo = inverse[len(inverse) - 1 - index] if paired else {}
        old = undo.get("value") if undo.get("op") in ("add", "replace") else None
        if kind == "add":
            lines.append(DiffLine("added", _where(path), after=_short(operation.get("value"))))
        elif kind == "remove":
            lines.append(DiffLine("removed", _where(path), before=_short(old) if undo else ""))
        elif kind == "replace":
            new = operation.get("value")
            if isinstance(old, dict) and isinstance(new, dict) and path:
                for field in sorted(set(old) | set(new), key=str):
                    if field not in new:
                        lines.append(DiffLine("removed", f"{path} · {field}", before=_short(old[field])))
                    elif field not in old:
                        lines.append(DiffLine("added", f"{path} · {field}", after=_short(new[field])))
                    elif json.dumps(old[field], sort_keys=True) != json.dumps(new[field], sort_keys=True):
                        lines.append(
                            DiffLine(
                                "changed", f"{path} · {field}", before=_short(old[field]), after=_short(new[field])
                            )
                        )
            else:
                lines.append(DiffLine("changed", _where(path), before=_short(old) if undo else "", after=_short(new)))
        else:
            lines.append(DiffLine("changed", f"{kind} {_where(path)}", after=_short(operation)))
    return lines[:MAX_LINES], max(0, len(lines) - MAX_LINES)


def _who(entry: TableChange) -> str:
    user = entry.user.get_username() if entry.user is not None else "(deleted user)" if entry.user_id else "—"
    return user


def restored_version(entry: TableChange) -> int | None:
    """The version a restore wrote again, None for any other write: a restore is the one write with no tool whose
    arguments are `{"version": v}` (the API's body and the admin's, docs/history.md)."""
    arguments = entry.arguments
    if entry.tool_name or not isinstance(arguments, dict) or set(arguments) != {"version"}:
        return None
    version = arguments["version"]
    return version if isinstance(version, int) and not isinstance(version, bool) else None


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
    for entry in page:
        lines, more = readable_diff(entry.patch, entry.inverse)
        rows.append(
            {
                "entry": entry,
                "who": _who(entry),
                "how": _how(entry),
                "lines": lines,
                "more": more,
                # a restore says so in "how"; its arguments would only repeat the version
                "arguments": _short(entry.arguments)
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
        document=text[:MAX_SHOWN_DOCUMENT],
        cut=len(text) > MAX_SHOWN_DOCUMENT,
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
