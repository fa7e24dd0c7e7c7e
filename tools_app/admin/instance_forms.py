"""Admin forms for instances, bindings, prompts and API keys, and the copy-paste client configurations.

The binding forms pre-check name collisions (SPEC §2.4) so they show as form errors; the services'
lock and the unique constraint remain the guarantee.
"""

import json
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator

from tools_app import services
from tools_app.admin.tool_forms import ModelMessagesForm, OwnerAwareModelForm, PrettyJSONField
from tools_app.execution.call_limits import default_limits
from tools_app.grants import attribute_problems
from tools_app.models import ApiKey, Binding, McpInstance, NameClash, Prompt, name_conflict_error, prompt_name_conflict
from tools_app.resource_uris import conflict

KEY_PLACEHOLDER = "<YOUR_API_KEY>"


class McpInstanceAdminForm(OwnerAwareModelForm):
    class Meta:
        model = McpInstance
        fields = list(services.INSTANCE_FIELDS)  # what the instance services write, and nothing else
        widgets = {
            "description": forms.Textarea(attrs={"rows": 2}),
            "instructions": forms.Textarea(attrs={"rows": 3}),
        }
        help_texts = {
            "max_result_bytes": "The largest tool result sent to a client, in bytes of JSON (40,000 is about "
            "10,000-16,000 tokens); a longer list is sent in pages, any other larger result is refused with a "
            "hint to narrow the call.",
            "key_rate_limit": "Requests each API key may send to this endpoint, as <count>/<period>: '120/minute', "
            "'10/second', '100/5 minutes'. Over it, the client gets HTTP 429 with Retry-After. Empty: the "
            "server's default (TOOLHUB_RATE_LIMIT_MCP_KEY).",
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Below the model's minimum, every value gets the one message the model gives for it (a negative
        # number would otherwise meet the form field's own "greater than or equal to 0" first).
        defaults = default_limits()
        for name, default in (
            ("query_cpu_ms", defaults.cpu_ms),
            ("query_max_elements", defaults.max_elements),
            ("query_max_bytes", defaults.max_bytes),
        ):
            budget_field = self.fields.get(name)
            if budget_field is not None:  # empty means the server default: shown where it is typed
                budget_field.widget.attrs["placeholder"] = f"{default} (server default)"
                wide = f"{budget_field.widget.attrs.get('class', '')} toolhub-budget-input".strip()
                budget_field.widget.attrs["class"] = wide  # the placeholder fully readable
        field = self.fields.get("max_result_bytes")
        if field is None:  # a read-only page (view permission only) has no form fields
            return
        minimum = max(
            validator.limit_value
            for validator in McpInstance._meta.get_field("max_result_bytes").validators
            if isinstance(validator, MinValueValidator)
        )
        field.min_value = minimum
        field.validators = [v for v in field.validators if not isinstance(v, MinValueValidator)]
        field.validators.append(MinValueValidator(minimum))
        field.widget.attrs["min"] = minimum


def effective_key(tool, name_override: str) -> tuple[str, str]:
    name = name_override or tool.name
    return name, name.lower()


class BindingAdminForm(ModelMessagesForm):
    """The standalone binding form: checks the effective name against the instance's other bindings."""

    class Meta:
        model = Binding
        fields = ["mcp_instance", "tool", *services.BINDING_FIELDS]
        widgets = {"description_override": forms.Textarea(attrs={"rows": 3})}

    pinned_arguments = PrettyJSONField(
        required=False,
        label_for_errors="JSON in the pinned arguments",
        help_text=Binding._meta.get_field("pinned_arguments").help_text
        + ' {"where": {"<record field>": <either pin>}} narrows the records a read tool sees instead.',
    )

    def clean_pinned_arguments(self):
        value = self.cleaned_data.get("pinned_arguments")
        return {} if value is None else value

    def _post_clean(self):
        super()._post_clean()
        instance = self.cleaned_data.get("mcp_instance")
        tool = self.cleaned_data.get("tool")
        if self.errors or instance is None or tool is None:
            return
        name, key = effective_key(tool, self.cleaned_data.get("name_override") or "")
        clashes = Binding.objects.name_clashes(instance_ids=[instance.pk], name=name, exclude_binding=self.instance.pk)
        if clashes:
            field = "name_override" if self.cleaned_data.get("name_override") else "tool"
            self.add_error(None, name_conflict_error(field, name, clashes[:1]))


class BindingInlineForm(ModelMessagesForm):
    pinned_arguments = PrettyJSONField(
        required=False,
        label_for_errors="JSON in the pinned arguments",
        help_text='e.g. {"keys": {"from": "key.attributes.customer"}}',
    )

    class Meta:
        model = Binding
        fields = ["tool", *services.BINDING_FIELDS]
        widgets = {
            "description_override": forms.Textarea(attrs={"rows": 2, "cols": 60}),
            "name_override": forms.TextInput(attrs={"size": 20}),
            "resource_uri": forms.TextInput(attrs={"size": 40}),
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        tool = self.fields.get("tool")
        if tool is not None and self.instance.pk is not None:
            # A bound row's tool is not editable in the row (one slip would rebind it; unbind and bind instead),
            # and a hidden input costs no <select> of every tool per row.
            tool.disabled = True
            tool.widget = forms.HiddenInput()

    def clean_pinned_arguments(self):
        value = self.cleaned_data.get("pinned_arguments")
        return {} if value is None else value


class PromptInlineForm(ModelMessagesForm):
    """One prompt of the instance: its arguments as readable JSON, its template kept as typed."""

    arguments = PrettyJSONField(
        required=False,
        label_for_errors="JSON in the arguments",
        help_text='A list of {"name": ..., "description": ..., "required": true|false}; empty: no arguments. '
        "Each {{name}} of the template must be one of them.",
    )
    template = forms.CharField(strip=False, widget=forms.Textarea(attrs={"rows": 6, "cols": 80}))

    class Meta:
        model = Prompt
        fields = list(services.PROMPT_FIELDS)
        widgets = {"description": forms.Textarea(attrs={"rows": 2, "cols": 80})}

    def clean_arguments(self):
        value = self.cleaned_data.get("arguments")
        return [] if value is None else value


class PromptInlineFormSet(forms.BaseInlineFormSet):
    """Prompt names are unique per instance ignoring case, judged on what the instance will hold after
    the submit: deleted rows free their names. The prompt services decide again under the instance's lock."""

    def clean(self):
        super().clean()
        if any(self.errors):
            return
        in_formset = [form.instance.pk for form in self.forms if form.instance.pk is not None]
        taken: set[str] = set()
        if self.instance.pk is not None:
            others = Prompt.objects.filter(mcp_instance=self.instance).exclude(pk__in=in_formset)
            taken = {name.lower() for name in others.values_list("name", flat=True)}
        for form in self.forms:
            name = (getattr(form, "cleaned_data", None) or {}).get("name")
            if not name or (self.can_delete and self._should_delete_form(form)):
                continue
            if name.lower() in taken:
                error = prompt_name_conflict(name, self.instance.name or "this instance")
                form.add_error("name", error.error_dict["name"])
            taken.add(name.lower())


class BindingInlineFormSet(forms.BaseInlineFormSet):
    """SPEC §2.4 across the rows of one submit: the effective names after the change must be unique.

    Compared with what the instance will hold afterwards (deleted rows free their names), plus any
    binding of the instance that is not in the formset.
    """

    def clean(self):
        super().clean()
        if any(self.errors):
            return
        instance = self.instance
        seen: dict[str, NameClash] = {}
        in_formset = []
        checks = []
        for form in self.forms:
            if form.instance.pk is not None:
                in_formset.append(form.instance.pk)
            if not hasattr(form, "cleaned_data") or not form.cleaned_data:
                continue
            if self.can_delete and self._should_delete_form(form):
                continue
            tool = form.cleaned_data.get("tool")
            if tool is None:
                continue
            checks.append((form, *effective_key(tool, form.cleaned_data.get("name_override") or "")))
        label = instance.name or "this instance"
        if instance.pk is not None:
            for binding in (
                Binding.objects.filter(mcp_instance=instance).exclude(pk__in=in_formset).select_related("tool")
            ):
                seen[binding.name_key] = NameClash(label, binding.tool.name, binding.effective_name)
        for form, name, key in checks:
            if key in seen:
                field = "name_override" if form.cleaned_data.get("name_override") else "tool"
                form.add_error(None, name_conflict_error(field, name, [seen[key]]))
            else:
                seen[key] = NameClash(label, form.cleaned_data["tool"].name, name)
        self._check_resource_uris([form for form, _, _ in checks], label)

    def _check_resource_uris(self, forms_kept: list, label: str) -> None:
        """The resource URI rules across the rows of one submit: their resource URIs may not clash with each other (each
        row was checked against the stored bindings by Binding.clean; the service re-checks under lock)."""
        earlier: list[tuple[str, str]] = []
        for form in forms_kept:
            uri = form.cleaned_data.get("resource_uri") or ""
            if not uri:
                continue
            name = form.cleaned_data.get("name_override") or form.cleaned_data["tool"].name
            for other, other_name in earlier:
                problem = conflict(uri, other)
                if problem is not None:
                    where = f"of the tool {other_name!r} on the instance {label!r}"
                    form.add_error("resource_uri", ValidationError(problem.replace("{where}", where), code="unique"))
                    break
            else:
                earlier.append((uri, name))


class ApiKeyAdminForm(ModelMessagesForm):
    attributes = PrettyJSONField(
        required=False,
        label_for_errors="JSON in the attributes",
        help_text=ApiKey._meta.get_field("attributes").help_text,
    )

    class Meta:
        model = ApiKey
        fields = ["mcp_instance", "label", "read_only", "attributes"]

    def clean_attributes(self):
        value = self.cleaned_data.get("attributes")
        return {} if value is None else value


class ApiKeyCreateForm(forms.Form):
    """The instance page's "create a key" form: what the key may use is fixed here (tools_app.grants)."""

    label = forms.CharField(max_length=200, required=False, help_text="Where the key is used, e.g. 'laptop'.")
    read_only = forms.BooleanField(required=False, help_text="Sees and calls only tools that change no data.")
    attributes = PrettyJSONField(
        required=False,
        label_for_errors="JSON in the attributes",
        help_text='Values pinned arguments can take from the key, e.g. {"customer": "acme"}.',
    )

    def clean_attributes(self):
        value = self.cleaned_data.get("attributes")
        problems = attribute_problems({} if value is None else value)
        if problems:
            raise ValidationError(problems)
        return {} if value is None else value


#
# Client configurations: URL and header filled in
#


def client_configs(*, server_name: str, url: str, key: str | None = None) -> list[dict[str, Any]]:
    """Copy-paste snippets for Claude Desktop, Cursor, VS Code and the MCP Inspector."""
    secret = key or KEY_PLACEHOLDER
    header = f"Bearer {secret}"
    claude = {
        "mcpServers": {
            server_name: {
                # Claude Desktop's config file starts local (stdio) servers; mcp-remote bridges to HTTP.
                "command": "npx",
                "args": ["-y", "mcp-remote", url, "--header", "Authorization:${TOOLHUB_AUTH}"],
                "env": {"TOOLHUB_AUTH": header},
            }
        }
    }
    cursor = {"mcpServers": {server_name: {"url": url, "headers": {"Authorization": header}}}}
    vscode = {"servers": {server_name: {"type": "http", "url": url, "headers": {"Authorization": header}}}}
    inspector = (
        f"npx -y @modelcontextprotocol/inspector@2.12.0 --cli {url} --transport http \\\n"
        f'  --header "Authorization: {header}" --method tools/list'
    )
    return [
        {
            "id": "claude",
            "title": "Claude Desktop",
            "where": "claude_desktop_config.json (Settings → Developer → Edit Config), then restart Claude.",
            "text": json.dumps(claude, indent=2),
        },
        {
            "id": "cursor",
            "title": "Cursor",
            "where": "~/.cursor/mcp.json (or .cursor/mcp.json in a project).",
            "text": json.dumps(cursor, indent=2),
        },
        {
            "id": "vscode",
            "title": "VS Code",
            "where": ".vscode/mcp.json in the workspace (or “MCP: Open User Configuration”).",
            "text": json.dumps(vscode, indent=2),
        },
        {
            "id": "inspector",
            "title": "MCP Inspector",
            "where": "A terminal with Node.js: lists the tools; use --method tools/call --tool-name NAME "
            "--tool-arg key=value to call one.",
            "text": inspector,
        },
    ]
