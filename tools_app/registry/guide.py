"""The usage guide (SPEC §5, seed 000): one CommonMark document for a model, grouped by category.

Shape (seed 000):

    # <Scope> Tools Usage Guide

    Generated: 2025-10-04 | Tools: 11 | Category Filter: None

    ## Read Tools (3)

    ### tool_name
    **Purpose**: …            ([Description pending] when empty)
    **Parameters**: a ```json block
    **Example(s)**: ```python blocks (metadata.examples, or one call built from the schema)
    **Returns**: metadata.return_format, else the output schema, else what the type returns

Unknown names are warnings, not errors. The document is at most 50 KB: a larger one is cut at a tool
boundary and says so, in the content and in a warning.
"""

import json
import re
import time
from typing import Any

from django.utils import timezone

from tools_app.grants import pin_summary
from tools_app.registry.proxy import proxy_hint, through_proxy
from tools_app.registry.search import ToolDoc, get_index
from tools_app.tool_types import TOOL_TYPES

MAX_BYTES = 50 * 1024
PENDING = "[Description pending]"
MAX_LISTED_NAMES = 20

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
    shown = ", ".join(names[:MAX_LISTED_NAMES])
    return shown + (f", … ({len(names) - MAX_LISTED_NAMES} more)" if len(names) > MAX_LISTED_NAMES else "")


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

    # Render each tool once, then keep whole tools while they fit (cut at a tool boundary).
    rendered = {cat: [_rendered(index, doc) for doc in docs] for cat, docs in by_category.items()}
    title = f"# {_escape(_scope_title(scope))}\n\n"
    hint = proxy_hint(index) + "\n\n" if through_proxy(scope) else ""  # Search mode runs tools via call_tool
    budget = MAX_BYTES - len(title.encode()) - len(hint.encode()) - 200  # the Generated line, a truncation note
    kept: dict[str, list[str]] = {}
    used = 0
    truncated = False
    for cat, chunks in rendered.items():
        section_overhead = len(f"## {_category_title(cat)} Tools (0000)\n\n".encode())
        for chunk in chunks:
            size = len(chunk.encode()) + (section_overhead if cat not in kept else 0)
            if used + size > budget:
                truncated = True
                break
            kept.setdefault(cat, []).append(chunk)
            used += size
        if truncated:
            break
    included = sum(len(chunks) for chunks in kept.values())
    filter_label = code_span(category) if category is not None else "None"
    generated = f"Generated: {timezone.now():%Y-%m-%d} | Tools: {included} | Category Filter: {filter_label}"
    body = [title, generated + "\n\n", hint]
    if not selected:
        body.append("No tools match this request.\n")
    for cat, chunks in kept.items():
        body.append(f"## {_category_title(cat)} Tools ({len(chunks)})\n\n")
        body.extend(chunks)
    if truncated:
        note = (
            f"Guide cut at 50 KB: {included} of {len(selected)} tools included. "
            "Ask for fewer tools (tool_names) or one category."
        )
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
            "truncated": truncated,
            "size_bytes": len(content.encode()),
            "generation_time_ms": round((time.perf_counter() - started) * 1000, 3),
        },
    }
