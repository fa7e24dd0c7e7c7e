"""The admin's records view of a table: its records a page at a time, searched by key or by a JMESPath filter,
each one opened, edited or deleted. Reads are tools_app.execution.record_pages.record_page (the one paged read,
the same on a document and a rows table, never the whole collection of a rows table); writes are its
record_update / record_delete, which go through the data tools' write path (services.table_write: the row lock,
expected_version, quotas, the history entry naming the admin user)."""

import json
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from tools_app import services
from tools_app.execution import record_pages
from tools_app.kernel.errors import ErrorCode, ToolError
from tools_app.kernel.limits import ADMIN_MAX_EDITED_RECORD_CHARS, ADMIN_MAX_SHOWN_RECORD_CHARS
from tools_app.models import Surface, Table


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= ADMIN_MAX_SHOWN_RECORD_CHARS else text[: ADMIN_MAX_SHOWN_RECORD_CHARS - 1] + "…"


def _number(text: str | None, default: int) -> int:
    try:
        return int(text) if text not in (None, "") else default
    except ValueError:
        return -1  # refused by record_page with a message naming the parameter


def records_view(model_admin: Any, request, object_id: str):
    """GET ?collection=&key=&filter=&page=: a page of PAGE_SIZE records."""
    table = model_admin.get_object_or_404(request, object_id)
    try:
        version, storage, collections = record_pages.record_collections(table.pk)
    except Table.DoesNotExist as exc:
        raise Http404("This table no longer exists.") from exc
    mounts = [collection.mount for collection in collections]
    mount = request.GET.get("collection", mounts[0] if mounts else "")
    key = request.GET.get("key") or None
    query = request.GET.get("filter", "").strip()
    number = _number(request.GET.get("page"), 1)
    page = error = None
    if mounts:
        try:
            page = record_pages.record_page(
                table_id=table.pk,
                mount=mount,
                offset=(number - 1) * record_pages.PAGE_SIZE if number >= 1 else -1,
                key=key,
                filter_text=query,
            )
        except ToolError as exc:
            error = f"{exc.code}: {exc.message}"
    rows = []
    if page is not None:
        for item in page.items:
            link = None
            if item.key is not None:
                link = (
                    reverse("admin:tools_app_table_record", args=[table.pk])
                    + "?"
                    + urlencode({"collection": mount, "key": item.key})
                )
            rows.append({"key": item.key, "text": _short(item.value), "link": link})

    def page_url(to: int) -> str:
        params = {"collection": mount, "page": to}
        if key is not None:
            params["key"] = key
        if query:
            params["filter"] = query
        return "?" + urlencode(params)

    pages = None
    if page is not None and page.total is not None:
        pages = max(1, -(-page.total // record_pages.PAGE_SIZE))
    context = model_admin.admin_context(
        request,
        title=f"Records of {table.name}",
        original=table,
        table=table,
        version=version,
        storage=storage,
        collections=collections,
        mount=mount,
        key=key or "",
        query=query,
        page=page,
        rows=rows,
        error=error,
        number=number,
        pages=pages,
        first_shown=(page.offset + 1) if page is not None and page.items else 0,
        last_shown=(page.offset + len(page.items)) if page is not None else 0,
        previous_url=page_url(number - 1) if page is not None and number > 1 else None,
        next_url=page_url(number + 1) if page is not None and page.has_more else None,
        can_change=model_admin.has_change_permission(request, table),
        has_view_permission=True,
    )
    return TemplateResponse(request, "admin/tools_app/table/records.html", context)


def record_view(model_admin: Any, request, object_id: str):
    """GET ?collection=&key=: one record, in an editor when the user may change the table. POST: save it
    (`expected_version` from the page: VERSION_CONFLICT if the table moved meanwhile) or delete it."""
    table = model_admin.get_object_or_404(request, object_id)
    source = request.POST if request.method == "POST" else request.GET
    mount = source.get("collection", "")
    key = source.get("key")
    if key is None:
        raise Http404("No record key given.")
    list_url = reverse("admin:tools_app_table_records", args=[table.pk]) + "?" + urlencode({"collection": mount})
    can_change = model_admin.has_change_permission(request, table)
    text = None
    error = None
    if request.method == "POST":
        if not can_change:
            raise PermissionDenied
        text = request.POST.get("value", "")
        expected = _number(request.POST.get("expected_version"), 0)
        audit = services.WriteAudit(surface=str(Surface.ADMIN), user_id=request.user.pk)
        try:
            with services.write_audit(audit):
                if "delete" in request.POST:
                    answer = record_pages.record_delete(
                        table_id=table.pk, mount=mount, key=key, expected_version=expected
                    )
                    done = f"Deleted the record {key!r}; the table is at version {answer['version']}."
                    messages.success(request, done)
                    return HttpResponseRedirect(list_url)
                if len(text) > ADMIN_MAX_EDITED_RECORD_CHARS:
                    too_long = f"The record is over {ADMIN_MAX_EDITED_RECORD_CHARS:,} characters of JSON."
                    raise ToolError(ErrorCode.VALIDATION_ERROR, too_long)
                try:
                    value = json.loads(text)
                except ValueError as exc:
                    raise ToolError(ErrorCode.VALIDATION_ERROR, f"The record is not valid JSON: {exc}.") from exc
                answer = record_pages.record_update(
                    table_id=table.pk, mount=mount, key=key, value=value, expected_version=expected
                )
        except ToolError as exc:
            error = f"{exc.code}: {exc.message}"
        else:
            if answer["updated"]:
                messages.success(request, f"Saved the record {key!r}; the table is at version {answer['version']}.")
            else:
                messages.info(request, f"The record {key!r} is unchanged; nothing was written.")
            return HttpResponseRedirect(request.path + "?" + urlencode({"collection": mount, "key": key}))
    try:
        item = record_pages.record_get(table_id=table.pk, mount=mount, key=key)
    except ToolError as exc:
        raise Http404(exc.message) from exc
    if item is None:
        raise Http404(f"No record with key {key!r} in this collection.")
    table.refresh_from_db(fields=["version"])
    context = model_admin.admin_context(
        request,
        title=f"Record {key} of {table.name}",
        original=table,
        table=table,
        mount=mount,
        key=key,
        text=text if text is not None else json.dumps(item.value, indent=2, ensure_ascii=False),
        expected_version=_number(request.POST.get("expected_version"), table.version) if error else table.version,
        error=error,
        list_url=list_url,
        can_change=can_change,
        has_view_permission=True,
    )
    return TemplateResponse(request, "admin/tools_app/table/record.html", context)
