"""The admin's setup page: download your setup as a document, upload one, see its plan, apply it
(tools_app.services.setup; the API's /api/setup/ and `manage.py toolhub_setup` do the same).

Reached from the MCP instances' list (/admin/tools_app/mcpinstance/setup/). The owner is the signed-in user;
planning and applying need the permissions to add, change and delete every kind a document holds.
"""

from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from tools_app.admin.tool_forms import PlainHelpTexts
from tools_app.kernel.errors import ToolhubError
from tools_app.kernel.limits import ADMIN_SETUP_MAX_DOCUMENT_CHARS
from tools_app.services import setup

__all__ = ["SetupForm", "setup_view"]

KINDS = ("table", "tool", "mcpinstance", "binding", "prompt")


class SetupForm(PlainHelpTexts, forms.Form):
    file = forms.FileField(required=False, help_text="A setup document, JSON or YAML (as exported here).")
    document = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 12, "class": "vLargeTextField toolhub-mono"}),
        max_length=ADMIN_SETUP_MAX_DOCUMENT_CHARS,
        help_text="Or paste it here.",
        strip=False,
    )
    force = forms.BooleanField(
        required=False,
        label="Apply even what breaks clients",
        help_text="Deletes and breaking changes of what is in use (listed in the plan) need this.",
    )

    def text(self) -> str:
        upload = self.cleaned_data.get("file")
        if upload is not None:
            if upload.size > ADMIN_SETUP_MAX_DOCUMENT_CHARS:
                raise ValidationError({"file": f"At most {ADMIN_SETUP_MAX_DOCUMENT_CHARS:,} bytes."})
            try:
                return upload.read().decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ValidationError({"file": "The file is not UTF-8 text."}) from exc
        if not self.cleaned_data.get("document", "").strip():
            raise ValidationError({"document": "Upload a file or paste a document."})
        return self.cleaned_data["document"]


def _can(request, actions: tuple[str, ...]) -> bool:
    return request.user.has_perms([f"tools_app.{action}_{kind}" for kind in KINDS for action in actions])


def _problems(exc: ValidationError) -> list[str]:
    if hasattr(exc, "error_dict"):
        return [f"{field}: {' '.join(messages_)}" for field, messages_ in exc.message_dict.items()]
    return list(exc.messages)


def setup_view(model_admin, request) -> HttpResponse:
    """GET: the page (export links, the upload form); ?export=json|yaml (&data=1): the download.
    POST plan: the changes the document makes; POST apply: make them, all or nothing."""
    if not _can(request, ("view",)):
        raise PermissionDenied
    fmt = request.GET.get("export")
    if fmt in ("json", "yaml"):
        try:
            document = setup.setup_export(owner=request.user, with_data=request.GET.get("data") == "1")
        except ValidationError as exc:
            messages.error(request, "Cannot export: " + "; ".join(_problems(exc)))
            return HttpResponseRedirect(reverse("admin:tools_app_mcpinstance_setup"))
        response = HttpResponse(setup.setup_document_dump(document, fmt), content_type=f"application/{fmt}")
        response["Content-Disposition"] = f'attachment; filename="toolhub-setup.{fmt}"'
        return response
    context: dict[str, Any] = {}
    form = SetupForm()
    if request.method == "POST":
        if not _can(request, ("add", "change", "delete")):
            raise PermissionDenied
        form = SetupForm(request.POST, request.FILES)
        applying = "apply" in request.POST
        if form.is_valid():
            try:
                text = form.text()
                document = setup.setup_document_load(text)
                if applying:
                    changes = setup.setup_apply(owner=request.user, document=document, force=form.cleaned_data["force"])
                    count = len(changes)
                    messages.success(
                        request,
                        f"Applied {count} change{'s' if count != 1 else ''}." if count else "Nothing to change.",
                    )
                    return HttpResponseRedirect(reverse("admin:tools_app_mcpinstance_changelist"))
                changes = setup.setup_plan(owner=request.user, document=document)
            except ValidationError as exc:
                context["problems"] = _problems(exc)
            except ToolhubError as exc:
                context["problems"] = [exc.message]
                context["used_by"] = [used for used in _used_by(exc)]
            else:
                context.update(
                    changes=changes,
                    in_use=any(change.used_by for change in changes),
                    apply_form=SetupForm(initial={"document": text}),
                )
    context.update(
        title="Setup: export, plan and apply",
        form=form,
        can_write=_can(request, ("add", "change", "delete")),
        media=model_admin.media + form.media,
    )
    return TemplateResponse(request, "admin/tools_app/setup.html", model_admin.admin_context(request, **context))


def _used_by(exc: ToolhubError) -> list[dict[str, Any]]:
    return list(exc.details.get("used_by", []))
