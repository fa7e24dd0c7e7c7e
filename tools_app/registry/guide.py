"""The usage guide (SPEC §5, seed 000): one CommonMark document for a model, grouped by category.

Shape (seed 000):

    # <Scope> Tools Usage Guide

    Generated: 2025-10-04 | Tools: 11 | Category Filter: all

    ## Read Tools (3)

    ### tool_name
    **Purpose**: …            ([Description pending] when empty)
    **Parameters**: a ```json block
    **Example(s)**: ```python blocks (metadata.examples, or one call built from the schema)
    **Returns**: metadata.return_format, else the output schema, else what the type returns

Unknown names are warnings, not errors. The whole answer fits the result budget of the scope's calls (at most
50 KB): named tools get their complete entries, cut at a tool boundary when they do not all fit; without names,
the complete entries when they fit, else the compact form (parameter sets several tools share and what each
type returns written once, a short entry per tool), paged by category. Every cut says so, in the content and
in a warning.
"""

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone

from tools_app.grants import pin_summary
from tools_app.kernel.limits import (
    GUIDE_MAX_BYTES,
    GUIDE_MAX_COMPACT_DESCRIPTION_CHARS,
    GUIDE_MAX_LISTED_NAMES,
    default_max_result_bytes,
)
from tools_app.registry.proxy import proxy_hint, through_proxy
from tools_app.registry.search import ToolDoc, get_index
from tools_app.tool_types import TOOL_TYPES

PENDING = "[Description pending]"

# What each built-in type returns (SPEC §3.2, §8), for tools without a return_format: from the types' specs.
TYPE_RETURNS = {value: spec.returns for value, spec in TOOL_TYPES.items()}
PAGING = (
    'a list over the result budget comes in pages, `{"items": [...], "total": N, "next_cursor": "..."}`.'
    ' For the next page call the tool again with the same arguments plus `"cursor": <next_cursor>`; the last'
    " page has `next_cursor` null. A cursor expires when the table changes (CURSOR_EXPIRED): start again"
    " without it."
)


def _escape(text: str) -> str:
    """Prose that must not turn into Markup (a title, a label). Never used on what a model copies: names go in
    code spans (code_span), where every character reads as itself (`weather\\_x` is no tool)."""
    return "".join("\\" + ch if ch in "\\`*_[]<>#|!" else ch for ch in text)


def code_span(text: str) -> str:
    """`text` as a CommonMark code span (§6.1): shown exactly, with no backslash escapes, whatever it holds.
    The delimiter is one backtick longer than the longest run inside; a space pads text that starts or ends
    with a backtick or a space (CommonMark strips one such space from each side). Line ends become spaces."""
    text = " ".join(str(text).splitlines())
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    if text[:1] in ("`", " ") or text[-1:] in ("`", " "):
        text = f" {text} "
    return f"{fence}{text}{fence}"


def _fence(body: str, language: str) -> str:
    """A fenced block whose fence is longer than any backtick run inside (CommonMark §4.5)."""
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{body.rstrip()}\n{fence}"


def _safe_paragraph(text: str) -> str:
    """Free text kept as a paragraph: lines that would open a block (fence, heading, rule, HTML,
    list, quote, table) get their first character escaped so the guide's structure holds."""
    lines = []
    for line in text.strip().splitlines():
        stripped = line.lstrip()
        if stripped and (stripped[0] in "#>`~<|=+*-_" or re.match(r"\d+[.)](\s|$)", stripped)):
            line = "\\" + stripped if not stripped[0].isdigit() else re.sub(r"^(\d+)([.)])", r"\1\\\2", stripped)
        else:
            line = stripped
        lines.append(line)
    return "\n".join(line for line in lines if line) or PENDING


def _example_value(spec: Any) -> Any:
    if not isinstance(spec, dict):
        return "..."
    if "default" in spec:
        return spec["default"]
    if isinstance(spec.get("enum"), list) and spec["enum"]:
        return spec["enum"][0]
    kind = spec.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    examples: dict[Any, Any] = {"integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}
    return examples.get(kind, "...")


def _generated_example(doc: ToolDoc) -> str:
    properties = doc.input_schema.get("properties") or {}
    required = [name for name in doc.input_schema.get("required") or [] if name in properties]
    arguments = []
    for name in required:
        value = _example_value(properties[name])
        if name.isidentifier():
            arguments.append(f"{name}={value!r}")
    if len(arguments) < len(required):
        return f"{_python_callee(doc.name)}(**{ {n: _example_value(properties[n]) for n in required}!r})"
    return f"{_python_callee(doc.name)}({', '.join(arguments)})"


def _python_callee(name: str) -> str:
    # Dotted names read as attribute calls; '-' is not Python, so such names are called through a dict.
    return name if all(part.isidentifier() for part in name.split(".")) else f"tools[{name!r}]"


def _returns(doc: ToolDoc) -> str:
    if doc.return_format:
        return _safe_paragraph(doc.return_format)
    if doc.output_schema:
        return "JSON matching this schema:\n\n" + _fence(json.dumps(doc.output_schema, indent=2), "json")
    return TYPE_RETURNS.get(doc.type, "Not documented.")


def render_tool(doc: ToolDoc) -> str:
    parts = [f"### {code_span(doc.name)}", ""]
    if doc.alias:
        parts += [f"Alias: {code_span(doc.alias)}", ""]
    purpose = _safe_paragraph(doc.description) if doc.description.strip() else PENDING
    parts += [f"**Purpose**: {purpose}", ""]
    if doc.mcp_server:
        parts += [f"**Served by**: {code_span(doc.mcp_server)} (external: call it there)", ""]
    parts += ["**Parameters**:", "", _fence(json.dumps(doc.input_schema, indent=2, ensure_ascii=False), "json"), ""]
    if doc.pinned:
        # Pinned by the binding (tools_app.grants): set by the server, never sent by the caller.
        fixed = "; ".join(code_span(line) for line in pin_summary(doc.pinned))
        parts += [f"**Set by the server** (do not send them): {fixed}", ""]
    examples = doc.examples
    if examples:
        parts += ["**Examples**:" if len(examples) > 1 else "**Example**:", ""]
        for example in examples:
            parts += [_fence(example, "python"), ""]
    else:
        parts += ["**Example** (built from the schema):", "", _fence(_generated_example(doc), "python"), ""]
    parts += [f"**Returns**: {_returns(doc)}", ""]
    spec = TOOL_TYPES.get(doc.type)
    if spec is not None and spec.pageable:
        parts += [f"**Paging**: {PAGING}", ""]
    parts += ["---", "", ""]
    return "\n".join(parts)


def _rendered(index: Any, doc: ToolDoc) -> str:
    # A snapshot's tools never change, so each is rendered once per index (per scope version).
    chunk = index.rendered.get(doc.position)
    if chunk is None:
        chunk = index.rendered[doc.position] = render_tool(doc)
    return chunk


def _category_title(category: str) -> str:
    return _escape(" ".join(word.capitalize() for word in re.split(r"[-_]+", category) if word))


def _names_list(names: list[str]) -> str:
    shown = ", ".join(names[:GUIDE_MAX_LISTED_NAMES])
    return shown + (f", … ({len(names) - GUIDE_MAX_LISTED_NAMES} more)" if len(names) > GUIDE_MAX_LISTED_NAMES else "")


def _scope_title(scope: Any) -> str:
    instance = getattr(scope, "instance", None)
    return f"{instance.name} MCP Tools Usage Guide" if instance is not None else "toolhub Tools Usage Guide"


def _normalise_names(tool_names: Any) -> list[str] | None:
    if tool_names is None:
        return None
    if isinstance(tool_names, str):
        tool_names = tool_names.split(",")
    names = [str(name).strip() for name in tool_names if str(name).strip()]
    return list(dict.fromkeys(names)) or None


def usage_guide(*, scope: Any, tool_names: Any = None, category: str | None = None) -> dict[str, Any]:
    """{content, warnings, metadata: {total_tools, filtered_count, invalid_names, generation_time_ms, …}}.

    `tool_names` is a list (or a comma-separated string); `category` filters further. Never raises for
    unknown names or categories: they become warnings.

    The whole answer, encoded as JSON, fits the scope's result budget (`result_budget`): named tools get their
    complete entries, cut at a tool boundary; otherwise the complete entries when they all fit, else the compact
    form (shared parameter sets and what each type returns once, one short entry per tool), whole categories
    while they fit, the others listed to be asked for one at a time (`category`).
    """
    started = time.perf_counter()
    index = get_index(scope)
    warnings: list[str] = []
    names = _normalise_names(tool_names)
    category = (category or "").strip().lower() or None
    if category == "all":
        category = None
    invalid: list[str] = []
    if names is None:
        selected = list(index.docs)
    else:
        selected, seen = [], set()
        for name in names:
            doc = index.find(name)
            if doc is None:
                invalid.append(name)
            elif doc.position not in seen:
                seen.add(doc.position)
                selected.append(doc)
        if invalid:
            available = _names_list(sorted(doc.name for doc in index.docs)) or "(none)"
            for name in invalid:
                warnings.append(f"Tool {name!r} not found. Available: {available}")
    if category is not None:
        if category not in index.categories:
            warnings.append(
                f"Category {category!r} not found. Available: {', '.join(sorted(index.categories)) or '(none)'}"
            )
        selected = [doc for doc in selected if doc.category == category]

    by_category: dict[str, list[ToolDoc]] = {}
    for doc in sorted(selected, key=lambda d: (d.category, d.name.lower(), d.position)):
        by_category.setdefault(doc.category, []).append(doc)

    title = f"# {_escape(_scope_title(scope))}\n\n"
    hint = proxy_hint(index) + "\n\n" if through_proxy(scope) else ""  # Search mode runs tools via call_tool
    limit = result_budget(scope)
    # What the answer holds besides the content: the warnings, the metadata (names it lists included), one
    # note of a cut, and the Generated line.
    categories = sum(_json_size(cat) + 16 for cat in by_category)  # listed in the metadata and the cut's note
    reserve = _json_size(json.dumps([warnings, invalid], ensure_ascii=False)) + 900 + 3 * categories
    room = limit - reserve - _json_size(title + hint)

    full = {cat: [_rendered(index, doc) for doc in docs] for cat, docs in by_category.items()}
    form = "full"
    layout = _fill(full, room, whole_categories=False)
    if names is None and layout.truncated:
        form = "compact"
        layout = _compact(by_category, room)
    included = layout.included
    # "all" when no category was asked for (as list_tools_by_category names every category), not Python's "None"
    filter_label = code_span(category) if category is not None else "all"
    generated = f"Generated: {timezone.now():%Y-%m-%d} | Tools: {included} | Category Filter: {filter_label}"
    body = [title, generated + "\n\n", hint, *layout.preamble]
    if not selected:
        body.append("No tools match this request.\n")
    for cat, chunks in layout.kept.items():
        body.append(f"## {_category_title(cat)} Tools ({len(chunks)})\n\n")
        body.extend(chunks)
    if layout.truncated:
        note = _cut_note(form, included, len(selected), limit, layout, by_category)
        warnings.append(note)
        body.append(f"*{note}*\n")
    content = "".join(body)
    return {
        "content": content,
        "warnings": warnings,
        "metadata": {
            "total_tools": len(index.docs),
            "filtered_count": len(selected),
            "included_count": included,
            "invalid_names": invalid,
            "category_filter": category,
            "form": form,
            "categories_not_included": layout.left_out,
            "truncated": layout.truncated,
            "size_bytes": len(content.encode()),
            "generation_time_ms": round((time.perf_counter() - started) * 1000, 3),
        },
    }


def result_budget(scope: Any) -> int:
    """The bytes the guide's whole answer (as JSON) may take: the result budget of the scope's calls (the
    instance's max_result_bytes, else TOOLHUB_MAX_RESULT_BYTES), and never over GUIDE_MAX_BYTES."""
    instance = getattr(scope, "instance", None)
    limit = getattr(instance, "max_result_bytes", None) or default_max_result_bytes()
    return min(GUIDE_MAX_BYTES, int(limit))


def _json_size(text: str) -> int:
    """The UTF-8 bytes `text` takes inside a JSON string (escapes counted), as the result budget measures it."""
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass")) - 2


@dataclass
class _Layout:
    """What goes into the guide: sections per category, text before them, what was left out."""

    kept: dict[str, list[str]] = field(default_factory=dict)
    preamble: list[str] = field(default_factory=list)
    truncated: bool = False
    left_out: list[str] = field(default_factory=list)  # whole categories not included

    @property
    def included(self) -> int:
        return sum(len(chunks) for chunks in self.kept.values())


def _fill(sections: dict[str, list[str]], room: int, *, whole_categories: bool, used: int = 0) -> _Layout:
    """Keep sections while they fit in `room` bytes: whole tools (or, `whole_categories`, whole categories;
    when not even the first fits, its first tools) in order; what did not fit is left out."""
    layout = _Layout()
    for cat, chunks in sections.items():
        heading = _json_size(f"## {_category_title(cat)} Tools (0000)\n\n")
        sizes = [_json_size(chunk) for chunk in chunks]
        if whole_categories and layout.kept:
            if used + heading + sum(sizes) <= room:
                layout.kept[cat] = list(chunks)
                used += heading + sum(sizes)
            else:
                layout.truncated = True
                layout.left_out.append(cat)
            continue
        if layout.truncated:
            layout.left_out.append(cat)
            continue
        for chunk, size in zip(chunks, sizes, strict=True):
            if used + size + (heading if cat not in layout.kept else 0) > room:
                layout.truncated = True
                break
            if cat not in layout.kept:
                used += heading
            layout.kept.setdefault(cat, []).append(chunk)
            used += size
    return layout


def _cut_note(form: str, included: int, selected: int, limit: int, layout: _Layout, by_category: dict) -> str:
    if form == "full":
        return (
            f"Guide cut at {limit:,} bytes: {included} of {selected} tools included. "
            "Ask for fewer tools (tool_names) or one category."
        )
    parts = [f"Guide in its compact form, cut at {limit:,} bytes: {included} of {selected} tools included."]
    if layout.left_out:
        listed = ", ".join(f"{code_span(cat)} ({len(by_category[cat])})" for cat in layout.left_out)
        parts.append(f"Ask for the other categories one at a time (category): {listed}.")
    else:
        parts.append("Ask for the rest by name (tool_names).")
    return " ".join(parts)


#
# The compact form: what many tools share is written once
#

COMPACT_INTRO = (
    "Compact form: each tool with its purpose and parameters (`name*` is required, `= value` a default); a"
    " parameter set several tools share is written once under Shared parameters, and what each kind of tool"
    " returns under Returns. A tool's complete entry (JSON Schema, examples, return shape): ask for it by name"
    " (tool_names)."
)


def _compact(by_category: dict[str, list[ToolDoc]], room: int) -> _Layout:
    """The compact form of the selection (the module docstring), paged by category."""
    docs = [doc for docs in by_category.values() for doc in docs]
    schemas: dict[str, list[ToolDoc]] = {}
    for doc in docs:
        schemas.setdefault(_schema_key(doc.input_schema), []).append(doc)
    shared = {key: f"P{number}" for number, key in enumerate((k for k, v in schemas.items() if len(v) > 1), 1)}
    types = sorted({doc.type for doc in docs if not doc.return_format and not doc.output_schema})
    pageable = any(TOOL_TYPES.get(doc.type) is not None and TOOL_TYPES[doc.type].pageable for doc in docs)

    preamble = [COMPACT_INTRO + "\n\n"]
    if pageable:
        preamble.append(f"**Paging** (tools marked *paged*): {PAGING}\n\n")
    if shared:
        preamble.append("## Shared parameters\n\n")
        for key, label in shared.items():
            users = schemas[key]
            preamble.append(f"- **{label}** ({len(users)} tools): {_compact_parameters(users[0].input_schema)}\n")
        preamble.append("\n")
    if types:
        preamble.append("## Returns\n\n")
        for value in types:
            preamble.append(f"- {code_span(value)}: {TYPE_RETURNS.get(value) or 'Not documented.'}\n")
        preamble.append("\n")

    sections = {
        cat: [_compact_tool(doc, shared.get(_schema_key(doc.input_schema))) for doc in cat_docs]
        for cat, cat_docs in by_category.items()
    }
    used = sum(_json_size(part) for part in preamble)
    layout = _fill(sections, room, whole_categories=True, used=used)
    layout.preamble = preamble
    return layout


def _schema_key(schema: Any) -> str:
    return json.dumps(schema, sort_keys=True, ensure_ascii=False)


def _compact_tool(doc: ToolDoc, shared_label: str | None) -> str:
    purpose = _safe_paragraph(doc.description) if doc.description.strip() else PENDING
    lines = [f"### {code_span(doc.name)}", "", purpose.replace("\n", " "), ""]
    facts = [f"Type: {code_span(doc.type)}"]
    spec = TOOL_TYPES.get(doc.type)
    if spec is not None and spec.pageable:
        facts.append("*paged*")
    if doc.alias:
        facts.append(f"alias {code_span(doc.alias)}")
    if doc.mcp_server:
        facts.append(f"served by {code_span(doc.mcp_server)} (external: call it there)")
    parameters = f"**{shared_label}**" if shared_label else _compact_parameters(doc.input_schema)
    facts.append(f"Parameters: {parameters}")
    lines += [" · ".join(facts), ""]
    if doc.return_format:
        lines += [f"Returns: {_safe_paragraph(doc.return_format).replace(chr(10), ' ')}", ""]
    elif doc.output_schema:
        lines += [f"Returns: JSON matching {code_span(json.dumps(doc.output_schema, ensure_ascii=False))}", ""]
    lines.append("")
    return "\n".join(lines)


def _compact_parameters(schema: Any) -> str:
    """A schema's top-level properties on one line: `name*: type = default (enum) — description`."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict) or not properties:
        return "none" if isinstance(schema, dict) and schema.get("additionalProperties") is False else "any object"
    required = set(schema.get("required") or [])
    parts = []
    for name, spec in properties.items():
        spec = spec if isinstance(spec, dict) else {}
        text = code_span(f"{name}*" if name in required else name) + f": {_type_label(spec)}"
        if "default" in spec:
            text += f" = {code_span(json.dumps(spec['default'], ensure_ascii=False))}"
        if isinstance(spec.get("enum"), list):
            text += " (one of " + ", ".join(code_span(json.dumps(v, ensure_ascii=False)) for v in spec["enum"][:10])
            text += ", …)" if len(spec["enum"]) > 10 else ")"
        description = " ".join(str(spec.get("description") or "").split())
        if description:
            if len(description) > GUIDE_MAX_COMPACT_DESCRIPTION_CHARS:
                description = description[: GUIDE_MAX_COMPACT_DESCRIPTION_CHARS - 1] + "…"
            text += " — " + _escape(description)
        parts.append(text)
    return "; ".join(parts)


def _type_label(spec: dict) -> str:
    kind = spec.get("type")
    if isinstance(kind, list):
        label = " or ".join(str(k) for k in kind)
    else:
        label = str(kind) if kind else "any"
    if kind == "array" and isinstance(spec.get("items"), dict) and spec["items"].get("type"):
        label = f"array of {_type_label(spec['items'])}"
    return label
