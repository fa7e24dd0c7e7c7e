"""From a table to its standard tools in one step: the plan, derived from the data.

`generate_tools` reads the value at a mount of a table and plans the standard set of tools for it (schema,
get all, query, preview, select; create, update and delete only when `writes` is asked), named from the
table, with descriptions, examples and output schemas derived from the data: the record count, the fields
with their types and an example value, the key field, and example queries that were run on this very data
with the data-access layer's own query function (those that fail or find nothing are left out). The write,
all or nothing, is services.tool_set_create. The API and the admin both call this.

Generating again for the same mount updates the tools generated before (services.generate: never a tool whose
text its owner edited, unless asked) and says what changed. Each generated tool records the shape of the data it
was written for (metadata.generated.shape): `description_drift` tells when the data's shape has moved on.

Text from the data (field names, example values, keys, the table's name) is data, not instructions: it is
cleaned (control, format and bidi characters such as U+202E removed, length bounded) and quoted as JSON wherever
it appears in a description, and an example query is built only from values that need no cleaning.
"""

import hashlib
import json
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError

from tools_app import services
from tools_app.data_access import operations, pointer
from tools_app.data_access.shape import describe, json_type
from tools_app.kernel.errors import ToolError
from tools_app.kernel.limits import (
    CLOSED_SCHEMA_MAX_DEPTH,
    CLOSED_SCHEMA_MAX_FIELDS,
    CLOSED_SCHEMA_MAX_RECORDS,
    GENERATED_MAX_EXAMPLE_CHARS,
    GENERATED_MAX_PREFIX_CHARS,
    GENERATED_MAX_QUOTED_NAME_CHARS,
    GENERATED_PREVIEW_MAX_FIELDS,
    GENERATED_SHAPE_MAX_FIELDS,
)
from tools_app.models import Binding, McpInstance, Table, Tool
from tools_app.services.generate import ToolSetChange
from tools_app.services.generated_text import (
    fast_fields_sentence,
    field_ref,
    fit_description,
    generated_edited,
    generated_hash,
)
from tools_app.tool_schemas import default_input_schema
from tools_app.validators import validate_json_pointer

__all__ = [
    "GeneratedTools",
    "STANDARD_TOOLS",
    "clean_data_text",
    "default_prefix",
    "description_drift",
    "generate_tools",
    "generation_state",
    "tool_names_for",
]

STANDARD_TOOLS = (
    ("schema", "get_data_schema", False),
    ("all", "get_all_data", False),
    ("query", "query_data", False),
    ("preview", "preview", False),
    ("select", "select", False),
    ("create", "create", True),
    ("update", "update", True),
    ("delete", "delete", True),
)
# Unicode categories never copied from data into text a model reads: controls, format characters (the bidi
# overrides and isolates such as U+202E, zero-width characters), surrogates, private use, unassigned, and the
# line and paragraph separators.
UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


@dataclass
class GeneratedTools:
    tools: list[Tool]
    bindings: list[Binding]
    notes: list[str] = field(default_factory=list)
    changes: list[ToolSetChange] = field(default_factory=list)

    @property
    def created_any(self) -> bool:
        return any(change.action == "create" for change in self.changes)


def clean_data_text(text: str, limit: int) -> str:
    """`text` from the data, fit for a description: characters of UNSAFE_CATEGORIES removed (a tab or line break
    becomes a space), at most `limit` characters (cut with "…")."""
    cleaned = "".join(
        " " if char in "\t\n\r" else char
        for char in text
        if char in "\t\n\r" or unicodedata.category(char) not in UNSAFE_CATEGORIES
    )
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"


def _clean_value(value: Any, limit: int = GENERATED_MAX_EXAMPLE_CHARS) -> Any:
    """A JSON value from the data with every string (keys included) cleaned (clean_data_text)."""
    if isinstance(value, str):
        return clean_data_text(value, limit)
    if isinstance(value, list):
        return [_clean_value(item, limit) for item in value]
    if isinstance(value, dict):
        return {clean_data_text(str(key), limit): _clean_value(item, limit) for key, item in value.items()}
    return value


def _quoted(name: str) -> str:
    """A name from the data (a field, a key field) as it appears in a description: cleaned and JSON-quoted."""
    return json.dumps(clean_data_text(name, GENERATED_MAX_QUOTED_NAME_CHARS), ensure_ascii=False)


def _is_clean(text: str) -> bool:
    return clean_data_text(text, GENERATED_MAX_EXAMPLE_CHARS) == text


def _slug(text: str) -> str:
    return re.sub(r"_+", "_", re.sub(r"[^a-z0-9]", "_", text.lower())).strip("_")


def default_prefix(table: Table, json_path: str) -> str:
    """The table's name as a tool-name prefix (`Sales 2024` -> `sales_2024`), plus the mount's last segment."""
    prefix = _slug(table.name) or "table"
    tokens = pointer.parse(json_path)
    if tokens and _slug(tokens[-1]):
        prefix = f"{prefix}_{_slug(tokens[-1])}"
    return prefix[:GENERATED_MAX_PREFIX_CHARS].rstrip("_")


def tool_names_for(prefix: str, writes: bool) -> list[tuple[str, str]]:
    """(name, type) of the standard set for `prefix`."""
    return [(f"{prefix}_{suffix}", tool_type) for suffix, tool_type, write in STANDARD_TOOLS if writes or not write]


def _short(value: Any) -> str:
    """A value from the data as a quoted example: cleaned, as JSON, at most GENERATED_MAX_EXAMPLE_CHARS characters."""
    text = json.dumps(_clean_value(value), ensure_ascii=False)
    return text if len(text) <= GENERATED_MAX_EXAMPLE_CHARS else text[: GENERATED_MAX_EXAMPLE_CHARS - 1] + "…"


def _literal(value: Any) -> str:
    """`value` as a JMESPath literal inside a comparison."""
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return "`" + json.dumps(value) + "`"


class _Sample:
    """What the descriptions need from the value at the mount."""

    def __init__(
        self,
        mount_value: Any,
        json_path: str,
        count: int | None = None,
        unique: Callable[[list[str]], list[str]] | None = None,
    ):
        """`count`: the mount's true number of records when `mount_value` holds only the first of them (a table
        stored as rows: services.table_data_sampled); the fields are those of the records given, and the key field
        one of theirs that `unique` finds keying every record (services.table_unique_fields)."""
        self.unique = unique
        self.value = mount_value
        self.is_array = isinstance(mount_value, list)
        self.shape = describe(mount_value)
        self.count = len(mount_value) if count is None else count
        items = mount_value if self.is_array else list(mount_value.values())
        self.given = len(items)
        self.records = [item for item in items if isinstance(item, dict)]
        self.fields: dict[str, list[str]] = self.shape.get("fields", {}) if self.records else {}
        if not self.is_array and self.shape.get("layout") == "record":
            self.fields = {}  # an object that is one record, not entries keyed by id
        self.examples = {name: self._example(name) for name in self.fields}
        self.key_field = self._key_field() if self.is_array else None

    def _example(self, name: str) -> Any:
        for record in self.records[:1000]:
            if record.get(name) is not None:
                return record[name]
        return None

    def _key_field(self) -> str | None:
        """A field present in every record whose values are unique strings or integers: `id` first, then names
        ending in id/key/code, then the first such field by name."""
        if not self.records or len(self.records) != self.given:
            return None
        candidates = []
        for name, types in self.fields.items():
            if not set(types) <= {"string", "integer"} or name in self.shape.get("optional_fields", []):
                continue
            values = [str(record[name]) for record in self.records]
            if len(set(values)) == len(values):
                candidates.append(name)
        if candidates and self.count > self.given and self.unique is not None:
            candidates = self.unique(candidates)  # the records given are the first: the rest may repeat a value
        if not candidates:
            return None
        if "id" in candidates:
            return "id"
        named = [name for name in candidates if re.search(r"(id|key|code|sku)$", name.lower())]
        return sorted(named or candidates)[0]

    def field_summary(self, budget: int) -> str:
        """`id (integer, e.g. 1), name (string, e.g. "Ada")`, cut to `budget` characters with a count of the rest."""
        parts = []
        names = sorted(self.fields, key=lambda name: (name != self.key_field, name))
        for name in names:
            types = "|".join(self.fields[name])
            example = self.examples.get(name)
            shown = _quoted(name)
            parts.append(f"{shown} ({types}, e.g. {_short(example)})" if example is not None else f"{shown} ({types})")
        text = ", ".join(parts)
        while len(text) > budget and parts:
            parts.pop()
            text = ", ".join(parts) + f", and {len(names) - len(parts)} more (see the schema tool)"
        return text


def _example_queries(sample: _Sample, json_path: str) -> list[tuple[str, Any]]:
    """JMESPath examples run on the data at the mount: (expression, result) of those that succeed and find
    something, at most three."""
    candidates = ["length(@)"] if sample.is_array else ["keys(@)[:3]"]
    fields = sorted(sample.fields, key=lambda name: (name != sample.key_field, name))
    key = sample.key_field
    # The text field with the fewest distinct values (a status, a category) makes the most telling filter. Only
    # names and values that need no cleaning are written into an expression (it is shown as it runs).
    fields = [name for name in fields if _is_clean(name)]
    if key is not None and not _is_clean(key):
        key = None
    texts = [
        name
        for name in fields
        if name != key and isinstance(sample.examples.get(name), str) and _is_clean(sample.examples[name])
    ]
    text_field = min(
        texts, key=lambda name: (len({str(r.get(name)) for r in sample.records[:1000]}), name), default=None
    )
    number_field = next(
        (
            name
            for name in fields
            if name != key
            and set(sample.fields[name]) <= {"integer", "number"}
            and sample.examples.get(name) is not None
        ),
        None,
    )
    if sample.is_array:
        if text_field:
            value = sample.examples[text_field]
            candidates.append(f"[?{field_ref(text_field)}=={_literal(value)}] | length(@)")
        if number_field and key:
            candidates.append(f"max_by(@, &{field_ref(number_field)}).{field_ref(key)}")
        elif key and text_field:
            candidates.append(
                f"[:3].{{{field_ref(key)}: {field_ref(key)}, {field_ref(text_field)}: {field_ref(text_field)}}}"
            )
    elif text_field:
        candidates.append(f"values(@)[?{field_ref(text_field)}=={_literal(sample.examples[text_field])}] | length(@)")
    mount = operations.Mount("", key or "id")
    verified = []
    for expression in candidates:
        try:
            result = operations.query_data(sample.value, mount, {"query": expression})
        except ToolError:
            continue  # e.g. max_by over a field that is not a number in every record
        if result in (None, [], {}):
            continue
        verified.append((expression, result))
    return verified[:3]


def _record_schema(sample: _Sample, only: list[str] | None = None) -> dict[str, Any]:
    properties = {}
    for name, types in sample.fields.items():
        if only is None or name in only:
            properties[name] = {"type": types[0] if len(types) == 1 else types}
            if sample.examples.get(name) is not None and not isinstance(sample.examples[name], list | dict):
                properties[name]["examples"] = [_clean_value(sample.examples[name])]
    return {"type": "object", "properties": properties}


def _nested_schema(values: list[dict[str, Any]], depth: int) -> dict[str, Any] | None:
    """The objects a field holds (`values`, as sampled) as a closed object schema: every field any of them has,
    typed as they have it, taking null too where some object lacks it (a strict host sends every property, null
    for what it has no value for); objects inside closed the same way. None when the data does not allow it:
    an object nested deeper than CLOSED_SCHEMA_MAX_DEPTH, with more than CLOSED_SCHEMA_MAX_FIELDS fields, with
    none, or a field holding objects and other values (besides null)."""
    if depth > CLOSED_SCHEMA_MAX_DEPTH:
        return None
    names: dict[str, None] = {}
    for value in values:
        names.update(dict.fromkeys(value))
    if not names or len(names) > CLOSED_SCHEMA_MAX_FIELDS:
        return None
    properties: dict[str, Any] = {}
    for name in names:
        present = [value[name] for value in values if name in value]
        kinds = list(dict.fromkeys(json_type(item) for item in present))
        if len(present) < len(values) and "null" not in kinds:
            kinds.append("null")
        subschema = _field_schema(kinds, [item for item in present if isinstance(item, dict)], depth + 1)
        if subschema is None:
            return None
        properties[name] = subschema
    return {"type": "object", "properties": properties, "additionalProperties": False}


def _field_schema(kinds: list[str], objects: list[dict[str, Any]], depth: int) -> dict[str, Any] | None:
    """A field of `kinds` (JSON types; `objects`, the objects it holds) as a strict host can take it."""
    if "object" not in kinds:
        return {"type": kinds[0] if len(kinds) == 1 else kinds}
    if set(kinds) - {"object", "null"}:
        return None
    closed = _nested_schema(objects, depth)
    if closed is None or "null" not in kinds:
        return closed
    return {"anyOf": [closed, {"type": "null"}]}


def _closed_record(sample: _Sample, *, nullable: bool) -> dict[str, Any] | None:
    """The records' shape as a closed object schema (`additionalProperties: false`), each field typed as the data
    has it, objects inside records closed too (_nested_schema); None when the data does not allow one: no
    records, or objects it cannot close. `nullable`: fields missing from some records also take null (a strict
    host sends null for what it has no value for)."""
    if not sample.fields:
        return None
    optional = set(sample.shape.get("optional_fields", []))
    properties: dict[str, Any] = {}
    records = sample.records[:CLOSED_SCHEMA_MAX_RECORDS]
    for name, types in sample.fields.items():
        kinds = list(types)
        if nullable and name in optional and "null" not in kinds:
            kinds.append("null")
        objects = [record[name] for record in records if isinstance(record.get(name), dict)]
        subschema = _field_schema(kinds, objects, 1)
        if subschema is None:
            return None
        properties[name] = subschema
    record: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if sample.key_field:
        record["required"] = [sample.key_field]
    return record


def _input_schema(tool_type: str, sample: _Sample) -> dict[str, Any] | None:
    """A write tool's input schema derived from the data, closed, so strict function-calling hosts (OpenAI's
    strict mode, the Agents SDK's strict conversion) accept it: `elements` are records of the fields the data
    has (array mount), or {key, content} pairs whose content is such a record (object mount). None (the type's
    default) when the data does not allow it (_closed_record)."""
    if tool_type not in ("create", "update"):
        return None
    record = _closed_record(sample, nullable=tool_type == "create")
    if record is None or (sample.is_array and not sample.key_field):
        return _open_elements(tool_type)
    if not sample.is_array:
        content = {key: value for key, value in record.items() if key != "required"}
        record = {
            "type": "object",
            "properties": {"key": {"type": "string", "minLength": 1}, "content": content},
            "required": ["key", "content"],
            "additionalProperties": False,
        }
    schema = default_input_schema(tool_type)
    schema["properties"]["elements"]["items"] = record
    return schema


def _open_elements(tool_type: str) -> dict[str, Any] | None:
    """The type's schema where the data allows no closed record, with `elements` of any items (as `create`'s
    already is): an item typed only `object` permits undeclared properties, which strict hosts refuse; the
    operation still checks each element (a record holding its key, or a {key, content} pair)."""
    schema = default_input_schema(tool_type)
    items = schema["properties"]["elements"].get("items")
    if items is None or items.get("type") != "object" or items.get("additionalProperties") is False:
        return None
    del schema["properties"]["elements"]["items"]
    return schema


def _output_schema(tool_type: str, sample: _Sample, preview_keys: list[str]) -> dict[str, Any] | None:
    record = _record_schema(sample) if sample.fields else {}
    if tool_type == "get_data_schema":
        return {
            "type": "object",
            "properties": {"root_type": {"type": "string"}, "fields": {"type": "object"}},
            "required": ["root_type"],
        }
    if tool_type == "get_all_data":
        if sample.is_array:
            return {"type": "array", "items": record}
        return {"type": "object", "additionalProperties": record}
    if tool_type in ("preview", "select"):
        item = record
        if tool_type == "preview":
            item = _record_schema(sample, preview_keys) if sample.fields else {}
        if not sample.is_array:
            item = {"type": "object", "properties": {"key": {"type": "string"}, "content": item}}
        extra = "total_count" if tool_type == "preview" else "not_found"
        extra_schema = {"type": "integer"} if tool_type == "preview" else {"type": "array"}
        return {
            "type": "object",
            "properties": {"items": {"type": "array", "items": item}, extra: extra_schema},
            "required": ["items", extra],
        }
    if tool_type in ("create", "update", "delete"):
        verb = {"create": "created", "update": "updated", "delete": "deleted"}[tool_type]
        return {
            "type": "object",
            "properties": {verb: {"type": "integer"}, "version": {"type": "integer"}},
            "required": [verb, "version"],
        }
    return None  # query_data: any JSON value


def _descriptions(
    prefix: str, table: Table, json_path: str, sample: _Sample, preview_keys: list[str], queries: list
) -> dict[str, tuple[str, list[str]]]:
    """type -> (description, examples) for the standard set."""
    where = f"the table {_quoted(table.name)}" + (f" at {_quoted(json_path)}" if json_path else "")
    if sample.is_array:
        noun = "record" if sample.records else "item"
        what = f"{sample.count} {noun}{'' if sample.count == 1 else 's'}"
    else:
        what = f"{sample.count} entr{'y' if sample.count == 1 else 'ies'} keyed by name"
    key = sample.key_field
    key_shown = _quoted(key) if key else ""
    ident = f"their {key_shown} field" if key else "their key"
    summary = sample.field_summary(420)
    fields_text = f" Fields (names and example values quoted from the data): {summary}." if summary else ""
    fast_text = fast_fields_sentence(table.indexed_fields)  # kept current by table_update (services.generated_text)
    example_lines = "; ".join(f"`{expression}` -> {_short(result)}" for expression, result in queries)
    key_examples = (
        [sample.records[i].get(key) for i in range(min(2, len(sample.records)))]
        if key
        else (sorted(sample.value)[:2] if not sample.is_array else [])
    )
    key_list = json.dumps(_clean_value(key_examples), ensure_ascii=False) if key_examples else "[1]"
    texts = {
        "get_data_schema": (
            f"Describe the shape of {where}: {what}, each field with its types, and one record template. Call it "
            f"first to learn the fields before writing a query.{fast_text}{fields_text}",
            [f"{prefix}_schema()"],
        ),
        "get_all_data": (
            f"Return all {what} of {where} (a long list comes in pages: pass the returned cursor for the next)."
            f"{fields_text} For questions, prefer {prefix}_query; to browse, {prefix}_preview.",
            [f"{prefix}_all()"],
        ),
        "query_data": (
            f"Run a JMESPath expression over {where} ({what}, an {'array' if sample.is_array else 'object'}) and "
            f"return its value.{fast_text}{fields_text}"
            + (f" Examples run on this data: {example_lines}." if example_lines else ""),
            [f"{prefix}_query(query={json.dumps(expression)})" for expression, _ in queries],
        ),
        "preview": (
            f"Preview {where} with only {', '.join(map(_quoted, preview_keys)) or 'every field'} of each of the "
            f"{what}; `limit` and `offset` page through them, and total_count says how many there are.",
            [f"{prefix}_preview(limit=5, offset=0)"],
        ),
        "select": (
            f"Fetch full records of {where} by {ident}, e.g. keys={key_list}; keys that are not found are listed "
            "in not_found." + fields_text,
            [f"{prefix}_select(keys={key_list})"],
        ),
        "create": (
            f"Add records to {where}; each needs a new, unique {key_shown}." if key else f"Add entries to {where}.",
            [],
        ),
        "update": (
            f"Change records of {where}: give {key_shown} and the fields to change (JSON Merge Patch; null removes a "
            "field)."
            if key
            else f"Change entries of {where}: {{key, content}} with the fields to change (JSON Merge Patch).",
            [],
        ),
        "delete": (f"Delete records of {where} by {ident}, e.g. keys={key_list}; reports how many.", []),
    }
    return {tool_type: (fit_description(text), examples) for tool_type, (text, examples) in texts.items()}


def _unique_in(table_id: int, json_path: str) -> Callable[[list[str]], list[str]]:
    """The check over every record of a rows table's collection at the mount of the fields that could key it."""
    return lambda names: services.table_unique_fields(table_id, json_path, names)


def _mount_value(table: Table, json_path: str) -> tuple[Any, int | None]:
    """The value at the mount (a rows table's collection: its first records) and its true record count when only
    the first are given (None: the value is whole)."""
    try:
        validate_json_pointer(json_path)
    except ValidationError as exc:
        raise ValidationError({"json_path": exc.error_list}) from exc
    _, data, counts = services.table_data_sampled(table.pk)
    try:
        value = pointer.resolve(data, pointer.parse(json_path), json_path)
    except ToolError as exc:
        raise ValidationError({"json_path": ValidationError(exc.message, code="invalid")}) from exc
    if not isinstance(value, list | dict):
        raise ValidationError(
            {
                "json_path": ValidationError(
                    "The value at %(path)s is a %(type)s: tools are generated for an array of records or an "
                    "object of entries.",
                    code="invalid",
                    params={"path": json_path or "(root)", "type": json_type(value)},
                )
            }
        )
    return value, counts.get(json_path)


def generate_tools(
    *,
    owner,
    table: Table,
    json_path: str = "",
    writes: bool = False,
    preview_keys: list[str] | None = None,
    mcp_instance: McpInstance | None = None,
    name_prefix: str | None = None,
    overwrite_edited: bool = False,
) -> GeneratedTools:
    """Create (and bind to `mcp_instance`) the standard tools of the mount, or update those generated before;
    all or nothing (see the module). `overwrite_edited`: also rewrite generated tools their owner edited."""
    value, count = _mount_value(table, json_path)
    sample = _Sample(value, json_path, count, _unique_in(table.pk, json_path))
    notes: list[str] = []
    if preview_keys:
        unknown = [key for key in preview_keys if key not in sample.fields]
        if unknown:
            raise ValidationError(
                {
                    "preview_keys": ValidationError(
                        "No field %(names)s in the records at %(path)s; the fields are: %(fields)s.",
                        code="invalid",
                        params={
                            "names": ", ".join(map(repr, unknown)),
                            "path": json_path or "(root)",
                            "fields": ", ".join(sorted(sample.fields)) or "(none)",
                        },
                    )
                }
            )
    else:
        ordered = sorted(sample.fields, key=lambda name: (name != sample.key_field, name))
        preview_keys = ordered[:GENERATED_PREVIEW_MAX_FIELDS]
    prefix = name_prefix or default_prefix(table, json_path)
    planned = tool_names_for(prefix, writes)
    if sample.is_array and sample.key_field is None:
        skipped = {"select", "update", "delete"}
        planned = [(name, tool_type) for name, tool_type in planned if tool_type not in skipped]
        why = (
            "The mount holds no records yet, so no key field could be chosen"
            if not sample.records
            else "No field is present in every record with unique values"
        )
        notes.append(f"{why}: select, update and delete (which find records by key) were not generated.")
    queries = _example_queries(sample, json_path)
    texts = _descriptions(prefix, table, json_path, sample, preview_keys, queries)
    shape = _shape(sample)
    specs = []
    for name, tool_type in planned:
        description, examples = texts[tool_type]
        metadata: dict[str, Any] = {"tags": [_slug(table.name) or "table", "generated"]}
        if sample.key_field:
            metadata["key_field"] = sample.key_field
        if tool_type == "preview" and preview_keys:
            metadata["preview_keys"] = list(preview_keys)
        if examples and name.isidentifier():  # examples are Python calls: `0_query(...)` would not parse
            metadata["examples"] = examples
        output_schema = _output_schema(tool_type, sample, preview_keys)
        metadata["generated"] = {
            "hash": generated_hash(description, output_schema, metadata),
            "prefix": prefix,
            **shape,
        }
        specs.append(
            {
                "name": name,
                "type": tool_type,
                "table": table,
                "json_path": json_path,
                "description": description,
                "output_schema": output_schema,
                "metadata": metadata,
            }
        )
        derived = _input_schema(tool_type, sample)
        if derived is not None:
            specs[-1]["input_schema"] = derived
    tools, bindings, changes = services.tool_set_create(
        owner=owner, tools=specs, mcp_instance=mcp_instance, overwrite_edited=overwrite_edited
    )
    return GeneratedTools(tools=tools, bindings=bindings, notes=notes, changes=changes)


def _shape(sample: _Sample) -> dict[str, Any]:
    """What a generated description assumed of the data: its layout, key field and fields with their types (as
    a hash, and the first GENERATED_SHAPE_MAX_FIELDS names for the message saying what changed)."""
    layout = {"array": sample.is_array, "key_field": sample.key_field, "fields": sample.fields}
    digest = hashlib.sha256(json.dumps(layout, sort_keys=True).encode("utf-8")).hexdigest()[:32]
    names = sorted(clean_data_text(name, GENERATED_MAX_QUOTED_NAME_CHARS) for name in sample.fields)
    return {"shape": digest, "fields": names[:GENERATED_SHAPE_MAX_FIELDS]}


def description_drift(tool: Tool) -> str | None:
    """Why a generated tool's description no longer matches its data (the mount is gone, or its shape changed:
    fields added or removed, a type or the key field changed), or None: it matches, or the tool was not generated.
    The shape is computed once per table version (services.table_derived)."""
    marker = (tool.metadata or {}).get("generated")
    if not isinstance(marker, dict) or "shape" not in marker or tool.table_id is None:
        return None
    version, data, counts = services.table_data_sampled(tool.table_id)
    try:
        value = pointer.resolve(data, pointer.parse(tool.json_path), tool.json_path)
    except ToolError:
        where = tool.json_path or "(root)"
        return f"The mount {where} is no longer in the table: the description describes data that is gone."
    if not isinstance(value, list | dict):
        return f"The mount now holds a {json_type(value)}, not the records the description describes."
    unique = _unique_in(tool.table_id, tool.json_path)
    now = services.table_derived(
        tool.table_id,
        version,
        ("generated-shape", tool.json_path),
        lambda: _shape(_Sample(value, tool.json_path, counts.get(tool.json_path), unique)),
    )
    if now["shape"] == marker["shape"]:
        return None
    before, after = set(marker.get("fields") or []), set(now["fields"])
    parts = []
    if after - before:
        parts.append("new fields " + ", ".join(map(_quoted, sorted(after - before)[:5])))
    if before - after:
        parts.append("fields gone " + ", ".join(map(_quoted, sorted(before - after)[:5])))
    what = "; ".join(parts) or "a field's type or the key field changed"
    return f"The data's shape changed since this description was generated ({what}): generate the table's tools again."


def generation_state(tool: Tool) -> dict[str, Any] | None:
    """For the admin: whether the tool was generated, edited by hand since, and how its data drifted."""
    if not isinstance((tool.metadata or {}).get("generated"), dict):
        return None
    return {"edited": generated_edited(tool), "drift": description_drift(tool)}
