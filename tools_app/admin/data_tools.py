"""Admin actions from data to tools: generate a table's standard tools, bind many tools.

Each action shows a small form first (Django's intermediate-page pattern) and then does what the API does,
through the same code: tools_app.toolsets.generate_tools and services.binding_create_many, all or nothing.
"""

import difflib
import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import ValidationError
from django.db import transaction
from django.template.response import TemplateResponse

from tools_app import services
from tools_app.admin.tool_forms import PlainHelpTexts
from tools_app.kernel.limits import GENERATED_MAX_PREFIX_CHARS
from tools_app.models import McpInstance
from tools_app.toolsets import generate_tools

__all__ = ["bind_to_instance", "generate_tools_action"]


class InstanceChoiceForm(PlainHelpTexts, forms.Form):
    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["mcp_instance"].queryset = McpInstance.objects.for_user(user).order_by("name")


class GenerateToolsForm(InstanceChoiceForm):
    """Binds to the user's newest enabled instance unless another choice is made: generated tools are meant to
    be served, and "(do not bind)" as the default left them on no instance."""

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, user=user, **kwargs)
        if not self.is_bound:
            newest = self.fields["mcp_instance"].queryset.filter(enabled=True).order_by("-created_at", "-pk").first()
            self.fields["mcp_instance"].initial = newest.pk if newest is not None else None

    mcp_instance = forms.ModelChoiceField(
        queryset=McpInstance.objects.none(),
        required=False,
        empty_label="(do not bind)",
        label="Bind to MCP instance",
    )
    json_path = forms.CharField(
        required=False, max_length=500, label="JSON path", help_text="JSON Pointer of the mount; empty = the root."
    )
    writes = forms.BooleanField(required=False, label="Also create, update and delete tools")
    preview_keys = forms.CharField(
        required=False,
        max_length=2000,
        help_text="Comma-separated fields the preview keeps; empty = the key field and the first fields by name.",
    )
    name_prefix = forms.CharField(
        required=False,
        max_length=GENERATED_MAX_PREFIX_CHARS,
        help_text="Tool names are <prefix>_query, ...; empty = the table's name.",
    )
    overwrite_edited = forms.BooleanField(
        required=False,
        label="Overwrite edited descriptions",
        help_text="Generating again updates the tools generated before; those whose text you edited are kept unless "
        "this is ticked.",
    )


class BindForm(InstanceChoiceForm):
    mcp_instance = forms.ModelChoiceField(queryset=McpInstance.objects.none(), label="MCP instance")
    enabled = forms.BooleanField(required=False, initial=True)


def _intermediate(modeladmin, request, queryset, form, *, action: str, title: str, button: str) -> TemplateResponse:
    context: dict[str, Any] = {
        **modeladmin.admin_site.each_context(request),
        "opts": modeladmin.model._meta,
        "title": title,
        "form": form,
        "objects": list(queryset),
        "action": action,
        "button": button,
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
    }
    return TemplateResponse(request, "admin/tools_app/data_tools_action.html", context)


def _messages_of(exc: ValidationError) -> list[str]:
    if hasattr(exc, "error_dict"):
        return [
            f"{field}: {message}" for field, errors in exc.error_dict.items() for message in ValidationError(errors)
        ]
    return list(exc.messages)


@admin.action(description="Generate tools for selected tables", permissions=["change"])
def generate_tools_action(modeladmin, request, queryset):
    """For each table: the standard tools (and bindings), as POST /api/tables/<id>/generate-tools/."""
    form = GenerateToolsForm(request.POST if "apply" in request.POST else None, user=request.user)
    if "apply" in request.POST and form.is_valid():
        data = form.cleaned_data
        preview_keys = [key.strip() for key in data["preview_keys"].split(",") if key.strip()] or None
        created = []
        try:
            with transaction.atomic():
                for table in queryset:
                    generated = generate_tools(
                        owner=table.owner,
                        table=table,
                        json_path=data["json_path"],
                        writes=data["writes"],
                        preview_keys=preview_keys,
                        mcp_instance=data["mcp_instance"],
                        name_prefix=data["name_prefix"] or None,
                        overwrite_edited=data["overwrite_edited"],
                    )
                    created.append((table, generated))
        except ValidationError as exc:
            for message in _messages_of(exc):
                form.add_error(None, message)
        else:
            for table, generated in created:
                for action in ("create", "update", "unchanged", "kept"):
                    names = [change.name for change in generated.changes if change.action == action]
                    if names:
                        verb = {
                            "create": "created",
                            "update": "updated",
                            "unchanged": "left unchanged",
                            "kept": "kept (edited by hand)",
                        }[action]
                        modeladmin.message_user(
                            request, f"{table.name}: {verb} {len(names)} tools ({', '.join(names)}).", messages.SUCCESS
                        )
                if generated.bindings and data["mcp_instance"]:
                    modeladmin.message_user(
                        request,
                        f"{table.name}: bound {len(generated.bindings)} to {data['mcp_instance'].name}.",
                        messages.SUCCESS,
                    )
                for note in generated.notes:
                    modeladmin.message_user(request, f"{table.name}: {note}", messages.WARNING)
            diffs = [
                (table, change, _diff_lines(change))
                for table, generated in created
                for change in generated.changes
                if change.diff
            ]
            if diffs:
                context = {
                    **modeladmin.admin_site.each_context(request),
                    "opts": modeladmin.model._meta,
                    "title": "Generated tools: what changed",
                    "diffs": diffs,
                }
                return TemplateResponse(request, "admin/tools_app/generate_result.html", context)
            return None
    return _intermediate(
        modeladmin,
        request,
        queryset,
        form,
        action="generate_tools_action",
        title="Generate tools",
        button="Generate tools",
    )


def _diff_lines(change) -> list[tuple[str, str]]:
    """A change's diff as (field, unified diff text) for the result page."""
    out = []
    for field_name, (old, new) in change.diff.items():
        before = old if isinstance(old, str) else json.dumps(old, indent=2, ensure_ascii=False)
        after = new if isinstance(new, str) else json.dumps(new, indent=2, ensure_ascii=False)
        if isinstance(old, str) and isinstance(new, str):
            # Descriptions are one long line: a word per line shows what changed.
            before, after = before.replace(" ", "\n"), after.replace(" ", "\n")
        lines = difflib.unified_diff(before.splitlines(), after.splitlines(), "current", "generated", lineterm="", n=2)
        out.append((field_name, "\n".join(lines)))
    return out


@admin.action(description="Bind selected tools to an MCP instance", permissions=["change"])
def bind_to_instance(modeladmin, request, queryset):
    """Bind every selected tool, all or nothing, as POST /api/mcp-instances/<id>/bindings/bulk/."""
    form = BindForm(request.POST if "apply" in request.POST else None, user=request.user)
    if "apply" in request.POST and form.is_valid():
        instance = form.cleaned_data["mcp_instance"]
        try:
            bindings = services.binding_create_many(
                mcp_instance=instance, tools=list(queryset.order_by("pk")), enabled=form.cleaned_data["enabled"]
            )
        except ValidationError as exc:
            for message in _messages_of(exc):
                form.add_error(None, message)
        else:
            modeladmin.message_user(request, f"Bound {len(bindings)} tool(s) to {instance.name}.", messages.SUCCESS)
            return None
    return _intermediate(
        modeladmin, request, queryset, form, action="bind_to_instance", title="Bind tools", button="Bind"
    )
