"""Admin forms for tables and tools: readable JSON fields and the "try it" form.

Only presentation and input parsing live here; every write goes through tools_app.services, and
model rules stay in Model.clean() (reached through the ModelForm's full_clean()).
"""

import json
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.utils.html import conditional_escape

from tools_app import services
from tools_app.admin.docs_page import help_text as doc_help_text
from tools_app.kernel.errors import ToolhubError
from tools_app.kernel.limits import ADMIN_EDITOR_MAX_CHARS
from tools_app.models import Table, Tool
from tools_app.tool_types import TOOL_TYPES
from tools_app.tool_types.registry_family import REGISTRY_HELP
from tools_app.validators import JSONNumberError, json_loads, validate_redact_fields

# Above editor_max_chars() characters of JSON the table page shows a read-only summary instead of an editor
# (a 30 MB table must not freeze the page): TOOLHUB_ADMIN_EDITOR_MAX_CHARS.
editor_max_chars = ADMIN_EDITOR_MAX_CHARS.get


def pretty_json(value: Any) -> str:
    """JSON with an indent of 2 and non-ASCII kept readable."""
    return json.dumps(value, indent=2, ensure_ascii=False)


def compact_json(value: Any) -> str:
    """JSON on one line, non-ASCII kept readable: for placeholders and inline examples."""
    return json.dumps(value, ensure_ascii=False)


def parse_json(text: str, *, label: str = "JSON") -> Any:
    """json.loads() whose error names the line and column (refused with the position)."""
    try:
        return json_loads(text)
    except JSONNumberError as exc:
        raise ValidationError(
            "Invalid %(label)s: %(error)s", code="invalid_json", params={"label": label, "error": str(exc)}
        ) from exc
    except json.JSONDecodeError as exc:
        raise ValidationError(
            "Invalid %(label)s at line %(line)d, column %(column)d: %(error)s.",
            code="invalid_json",
            params={"label": label, "line": exc.lineno, "column": exc.colno, "error": exc.msg},
        ) from exc


class RawJSON(str):
    """Text as the user typed it (possibly invalid JSON), shown back unchanged."""


class JsonTextarea(forms.Textarea):
    """A monospace textarea sized to its content; admin.js adds a "Format" button and live checking."""

    def __init__(self, attrs: dict | None = None, max_rows: int = 30):
        self.max_rows = max_rows
        super().__init__({"class": "toolhub-json vLargeTextField", "spellcheck": "false", **(attrs or {})})

    def get_context(self, name, value, attrs):
        context = super().get_context(name, value, attrs)
        lines = (value or "").count("\n") + 2 if isinstance(value, str) else 4
        context["widget"]["attrs"]["rows"] = max(4, min(self.max_rows, lines))
        return context


class PrettyJSONField(forms.JSONField):
    """A JSON form field that shows values indented and reports parse errors with line and column."""

    widget = JsonTextarea

    def __init__(self, *args, label_for_errors: str = "JSON", **kwargs):
        self.label_for_errors = label_for_errors
        super().__init__(*args, **kwargs)

    def to_python(self, value):
        if self.disabled:
            return value
        if value in self.empty_values:
            return None
        if isinstance(value, list | dict | int | float) and not isinstance(value, bool):
            return value
        return parse_json(value, label=self.label_for_errors)

    def bound_data(self, data, initial):
        if self.disabled:
            return initial
        if data is None:
            return None
        # Keep what the user typed (even if invalid) so the error can be fixed in place.
        return RawJSON(data)

    def prepare_value(self, value):
        if isinstance(value, RawJSON):
            return value
        if value is None:
            return ""
        return pretty_json(value)

    def has_changed(self, initial, data):
        try:
            new = self.to_python(data)
        except ValidationError:
            return True
        return new != initial


class NameListField(forms.CharField):
    """Names typed comma-separated (a table's redact_fields, a tool's redact_arguments): cleaned to the list of
    the non-empty names, spaces around each dropped; the model's list is shown as the same text."""

    def __init__(self, **kwargs):
        kwargs.setdefault("required", False)
        kwargs.setdefault("widget", forms.TextInput(attrs={"size": 60}))
        super().__init__(**kwargs)

    def prepare_value(self, value):
        return ", ".join(value) if isinstance(value, list | tuple) else value

    def to_python(self, value):
        if isinstance(value, list):
            return value
        text = super().to_python(value) or ""
        return [name.strip() for name in text.split(",") if name.strip()]


class PlainHelpTexts:
    """Help texts shown as written: the admin puts a field's help text into the page as HTML, and toolhub's are
    plain text ("as <count>/<period>", "toolhub://tables/<id>"), so each is escaped once here."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for field in self.fields.values():  # type: ignore[attr-defined]
            if field.help_text:
                # a help text built as HTML (docs_page.help_text: links to the docs) stays as built
                field.help_text = conditional_escape(field.help_text)


class ModelMessagesForm(PlainHelpTexts, forms.ModelForm):
    """A ModelForm that shows the model's own validation messages.

    Django replaces the message of an error raised by full_clean() with the form field's generic text when
    their codes match ("required", "invalid_choice", "invalid"), so "A query_data tool needs a table."
    would read "This field is required.". The model's message says what is wrong and why: keep it. (These
    forms set no Meta.error_messages, the only texts meant to win over the model's.)
    """

    def _update_errors(self, errors):
        error_dict = getattr(errors, "error_dict", {})
        kept = [(error, error.message) for items in error_dict.values() for error in items if hasattr(error, "message")]
        super()._update_errors(errors)
        for error, message in kept:
            error.message = message


class OwnerAwareModelForm(ModelMessagesForm):
    """Sets the owner on a new instance before validation, so Model.clean() can check ownership."""

    toolhub_owner: Any = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk is None and getattr(self.instance, "owner_id", None) is None and self.toolhub_owner:
            self.instance.owner = self.toolhub_owner


class TableAdminForm(OwnerAwareModelForm):
    data = PrettyJSONField(
        required=False,
        label_for_errors="JSON data",
        widget=JsonTextarea(max_rows=40),
        help_text="Any JSON value; usually an array of records or an object keyed by id. Saving a change "
        "to the data counts as a write (version +1).",
    )
    data_file = forms.FileField(
        required=False,
        label="Replace data from a file",
        help_text="Upload a .json file, a .csv with a header line (each row becomes a record) or an .ndjson file "
        "(one JSON value per line) to replace the whole document; the same import as POST /api/tables/import/.",
    )
    data_format = forms.ChoiceField(
        required=False,
        label="File format",
        choices=[("", "From the file name")] + [(fmt, fmt.upper()) for fmt in services.IMPORT_FORMATS],
    )

    redact_fields = NameListField(
        label="Redact fields",
        widget=forms.TextInput(attrs={"size": 60, "placeholder": "e.g. ssn, email"}),
        help_text=doc_help_text(
            "Record field names, comma-separated, whose values never appear in the call log: in a call's "
            'arguments and result excerpt they read "[redacted]". Credentials (passwords, tokens, API keys, ...) are '
            "always redacted (docs/call-log.md)."
        ),
    )

    # Set by the admin for tables above editor_max_chars().
    toolhub_large = False

    indexed_fields = PrettyJSONField(
        required=False,
        label="Indexed fields",
        label_for_errors="JSON in the indexed fields",
        widget=JsonTextarea(max_rows=4),
        help_text='A JSON list of record field names, e.g. ["status", "customer"]: the database keeps an index on '
        "each, so filters and sorts on them stay fast on large tables, and the table's tools say so.",
    )

    class Meta:
        model = Table
        fields = ["name", "description", "indexed_fields", "data"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.toolhub_large:
            # The editor would be too big to use; the page shows a summary and offers upload/download.
            del self.fields["data"]
        elif self.instance.pk is not None and "data" not in self.initial:
            # `data` is not a column (snapshot + change log); the current document is the initial value.
            self.initial["data"] = self.instance.data
        # Not a model field of the form (the services write it): its initial value is the table's.
        self.initial.setdefault("redact_fields", self.instance.redact_fields)

    def clean_redact_fields(self) -> list[str]:
        """The names, checked as the model checks them (a name twice, too many)."""
        names = self.cleaned_data.get("redact_fields") or []
        validate_redact_fields(names)
        return names

    def clean_indexed_fields(self):
        value = self.cleaned_data.get("indexed_fields")
        return [] if value is None else value

    def clean_data(self):
        data = self.cleaned_data.get("data")
        if data is None:
            if self.instance.pk is not None:
                raise ValidationError("The data cannot be empty; use [] or {} for an empty table.", code="required")
            return {}
        return data

    def clean(self):
        """An uploaded file is parsed by the import service: the API's formats, rules and messages."""
        cleaned = super().clean()
        upload = cleaned.get("data_file")
        if upload:
            owner_id = getattr(self.toolhub_owner, "pk", None) or self.instance.owner_id
            try:
                fmt = services.import_format(upload.name, cleaned.get("data_format") or None)
                with services.import_slots.held(owner_id):
                    cleaned["data_file"] = services.parse_table_file(upload.read(), fmt)
            except ToolhubError as exc:  # every import slot taken (RATE_LIMITED)
                cleaned["data_file"] = None
                self.add_error("data_file", exc.message)
            except ValidationError as exc:
                cleaned["data_file"] = None
                for field, errors in exc.error_dict.items():
                    self.add_error("data_format" if field == "format" else "data_file", errors)
        return cleaned

    def _post_clean(self):
        uploaded = self.cleaned_data.get("data_file") if hasattr(self, "cleaned_data") else None
        if uploaded is not None:
            self.cleaned_data["data"] = uploaded
        given = uploaded is not None or "data" in self.changed_data
        if given and "data" in getattr(self, "cleaned_data", {}):
            # construct_instance() copies model fields only, and `data` is not one: set it for the
            # model's checks (full_clean) when it was given.
            self.instance.data = self.cleaned_data["data"]
        super()._post_clean()


class ToolAdminForm(OwnerAwareModelForm):
    input_schema = PrettyJSONField(
        required=False,
        label_for_errors="JSON in the input schema",
        help_text='JSON Schema (Draft 2020-12) of the arguments, "type": "object". Leave empty for the '
        "type's default; a custom schema must still accept the arguments the type needs.",
    )
    output_schema = PrettyJSONField(
        required=False,
        label_for_errors="JSON in the output schema",
        help_text="Optional JSON Schema of the result.",
    )
    redact_arguments = NameListField(
        label="Redact arguments",
        widget=forms.TextInput(attrs={"size": 60, "placeholder": "e.g. ssn, card_number"}),
        help_text=doc_help_text(
            "Argument names, comma-separated, whose values never appear in the call log: in a call's arguments "
            '(at any depth) and wherever its result or error repeats them they read "[redacted]". Credentials '
            "(passwords, tokens, API keys, ...) are always redacted (docs/call-log.md)."
        ),
    )
    metadata = PrettyJSONField(
        required=False,
        label_for_errors="JSON in the metadata",
        help_text='An object: category, tags, preview_keys, key_field (default "id"), examples (≤ 5 Python '
        "snippets, ≤ 10 lines each), return_format, documentation_url, mcp_server.",
    )

    class Meta:
        model = Tool
        fields = [
            "name",
            "alias",
            "type",
            "description",
            "table",
            "json_path",
            "input_schema",
            "output_schema",
            "metadata",
            "redact_arguments",
        ]
        widgets = {"description": forms.Textarea(attrs={"rows": 4, "maxlength": 1024})}

    def clean_json_path(self):
        value = self.cleaned_data.get("json_path") or ""
        # The API writes the whole document as "" (a JSON string); typed here, those two quote characters
        # mean the same. No JSON Pointer starts with a quote, so nothing else is lost.
        return "" if value in ('""', "''") else value

    def clean_metadata(self):
        value = self.cleaned_data.get("metadata")
        return {} if value is None else value


#
# "Try it": a form built from the tool's input schema
#

RAW_FIELD = "__raw_arguments"
# What a try-it placeholder starts with: an example, not a value.
EXAMPLE_PREFIX = "e.g. "


def _schema_type(prop: dict) -> str:
    kind = prop.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        if len(kinds) == 1:
            return kinds[0]
        return "json"
    return kind or "json"


class TryItForm(forms.Form):
    """One field per schema property (strings, numbers, booleans, enums; JSON for the rest), plus raw JSON.

    The raw JSON arguments, when given, replace the per-field values.
    """

    def __init__(self, *args, tool: Tool, **kwargs):
        super().__init__(*args, **kwargs)
        self.tool = tool
        schema = tool.input_schema or {}
        self.required_names = set(schema.get("required") or [])
        self.property_kinds: dict[str, str] = {}
        for name, prop in (schema.get("properties") or {}).items():
            prop = prop if isinstance(prop, dict) else {}
            kind = _schema_type(prop)
            self.property_kinds[name] = kind
            help_text = prop.get("description", "")
            label = f"{name} *" if name in self.required_names else name
            common = {"required": False, "label": label, "help_text": help_text}
            if "enum" in prop and all(isinstance(v, str) for v in prop["enum"]):
                choices = [("", "—")] + [(v, v) for v in prop["enum"]]
                field: forms.Field = forms.ChoiceField(choices=choices, **common)
            elif kind == "string":
                field = forms.CharField(strip=False, widget=forms.TextInput(attrs={"size": 60}), **common)
            elif kind == "integer":
                field = forms.IntegerField(**common)
            elif kind == "number":
                field = forms.FloatField(**common)
            elif kind == "boolean":
                field = forms.NullBooleanField(**common)
            else:
                field = PrettyJSONField(
                    label_for_errors=f"JSON in {name}",
                    widget=JsonTextarea(attrs={"placeholder": "[]" if kind == "array" else "{}"}, max_rows=12),
                    **common,
                )
            if "default" in prop:
                field.help_text = f"{help_text} (default: {json.dumps(prop['default'])})".strip()
            self.fields[name] = field
        self.fields[RAW_FIELD] = PrettyJSONField(
            required=False,
            label="Raw JSON arguments",
            label_for_errors="JSON in the raw arguments",
            widget=JsonTextarea(max_rows=16),
            help_text="Optional: the whole arguments object as JSON. When filled, it replaces the fields above.",
        )

    def show_example(self, example: dict[str, Any]) -> None:
        """Placeholders from `example` (admin_examples.example_arguments): the raw JSON, and each text, number
        or JSON field it names; each starts with EXAMPLE_PREFIX, so that an empty field never reads as a filled
        one (`[].id` alone looked like a value that would be sent)."""
        for name, value in example.items():
            field = self.fields.get(name)
            if field is None or name == RAW_FIELD or not isinstance(field.widget, forms.widgets.Input | forms.Textarea):
                continue
            text_field = isinstance(value, str) and not isinstance(field, PrettyJSONField)
            field.widget.attrs["placeholder"] = EXAMPLE_PREFIX + (value if text_field else compact_json(value))
        self.fields[RAW_FIELD].widget.attrs["placeholder"] = EXAMPLE_PREFIX + compact_json(example)

    def clean(self):
        cleaned = super().clean()
        raw = cleaned.get(RAW_FIELD)
        if raw is not None:
            if not isinstance(raw, dict):
                self.add_error(RAW_FIELD, "The arguments must be a JSON object.")
                return cleaned
            cleaned["arguments"] = raw
            return cleaned
        arguments = {}
        for name in self.property_kinds:
            value = cleaned.get(name)
            if value is None or value == "":
                continue
            arguments[name] = value
        cleaned["arguments"] = arguments
        return cleaned


#
# Per-type help: what json_path, preview_keys and key_field mean, with an example; each type's
# lives in its spec (tools_app.tool_types)
#


def type_help(tool_type: str) -> dict[str, Any]:
    spec = TOOL_TYPES.get(tool_type)
    return spec.help if spec is not None else REGISTRY_HELP


__all__ = [
    "RAW_FIELD",
    "ModelMessagesForm",
    "PrettyJSONField",
    "TableAdminForm",
    "ToolAdminForm",
    "TryItForm",
    "editor_max_chars",
    "parse_json",
    "pretty_json",
    "type_help",
]
