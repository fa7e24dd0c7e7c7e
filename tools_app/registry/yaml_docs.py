"""Tool descriptions and examples kept in YAML (SPEC §5, seed 000): import and export.

`tool_descriptions.yaml` maps a tool name to its description (a block scalar); `tool_examples.yaml`
maps a tool name to a list of Python call snippets:

    list_directory: |
      List the files and folders of a directory.
    ---
    list_directory:
      - |
        # newest first
        list_directory(path=".", sort_by="mtime")

Importing reports every problem (missing file, broken YAML, unknown name, invalid example, a
description the model refuses) and applies everything else; each tool is saved through
services.tool_update, so the model's own validation decides.
"""

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from django.core.exceptions import ValidationError

from tools_app import services
from tools_app.models import Tool
from tools_app.validators import validate_examples

DESCRIPTIONS_FILE = "tool_descriptions.yaml"
EXAMPLES_FILE = "tool_examples.yaml"


@dataclass
class ImportReport:
    descriptions_updated: int = 0
    examples_updated: int = 0
    problems: list[str] = field(default_factory=list)

    def problem(self, message: str) -> None:
        self.problems.append(message)


def _read_mapping(path: Path, report: ImportReport) -> dict[str, Any] | None:
    if not path.is_file():
        report.problem(f"{path.name}: file not found at {path}")
        return None
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        report.problem(f"{path.name}: broken YAML{line}: {getattr(exc, 'problem', None) or exc}")
        return None
    except (OSError, UnicodeDecodeError) as exc:
        report.problem(f"{path.name}: cannot be read: {exc}")
        return None
    if data is None:
        return {}
    if not isinstance(data, dict):
        report.problem(f"{path.name}: expected a mapping of tool names, got {type(data).__name__}")
        return None
    return {str(key): value for key, value in data.items()}


def _message(exc: ValidationError) -> str:
    if hasattr(exc, "error_dict"):
        return "; ".join(
            f"{name}: {' '.join(m for e in errors for m in e.messages)}" for name, errors in exc.error_dict.items()
        )
    return " ".join(exc.messages)


def import_docs(*, owner: Any, directory: Path, dry_run: bool = False) -> ImportReport:
    """Apply both files in `directory` to `owner`'s tools (all tools of that name: names are unique only
    per instance, SPEC §8). Problems are collected, never raised."""
    report = ImportReport()
    tools_by_name: dict[str, list[Tool]] = {}
    for tool in Tool.objects.for_user(owner).order_by("name", "id"):
        tools_by_name.setdefault(tool.name, []).append(tool)

    descriptions = _read_mapping(directory / DESCRIPTIONS_FILE, report) or {}
    examples = _read_mapping(directory / EXAMPLES_FILE, report) or {}

    for name, text in descriptions.items():
        tools = tools_by_name.get(name)
        if not tools:
            report.problem(f"{DESCRIPTIONS_FILE}: unknown tool {name!r}")
            continue
        if not isinstance(text, str) or not text.strip():
            report.problem(f"{DESCRIPTIONS_FILE}: {name!r}: the description must be non-empty text")
            continue
        for tool in tools:
            try:
                _save(tool, dry_run, description=text.strip())
                report.descriptions_updated += 1
            except ValidationError as exc:
                tool.refresh_from_db()
                report.problem(f"{DESCRIPTIONS_FILE}: {name!r}: {_message(exc)}")

    for name, snippets in examples.items():
        tools = tools_by_name.get(name)
        if not tools:
            report.problem(f"{EXAMPLES_FILE}: unknown tool {name!r}")
            continue
        if isinstance(snippets, str):
            snippets = [snippets]
        if not isinstance(snippets, list):
            report.problem(f"{EXAMPLES_FILE}: {name!r}: expected a list of code snippets")
            continue
        snippets = [s.strip("\n") if isinstance(s, str) else s for s in snippets]
        try:
            validate_examples(snippets)
        except ValidationError as exc:
            report.problem(f"{EXAMPLES_FILE}: {name!r}: {_message(exc)}")
            continue
        for tool in tools:
            metadata = {**(tool.metadata or {}), "examples": snippets}
            try:
                _save(tool, dry_run, metadata=metadata)
                report.examples_updated += 1
            except ValidationError as exc:
                tool.refresh_from_db()
                report.problem(f"{EXAMPLES_FILE}: {name!r}: {_message(exc)}")
    return report


def _save(tool: Tool, dry_run: bool, **changes: Any) -> None:
    """Through the service; a dry run validates a copy the same way and writes nothing."""
    if not dry_run:
        services.tool_update(tool=tool, **changes)
        return
    candidate = copy.copy(tool)
    for key, value in changes.items():
        setattr(candidate, key, value)
    candidate.full_clean()


class _BlockDumper(yaml.SafeDumper):
    pass


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    # Multi-line text as a `|` block, as in seed 000, so the files stay easy to edit by hand.
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str_representer)


def _dump(data: dict[str, Any]) -> str:
    if not data:
        return "{}\n"
    return yaml.dump(data, Dumper=_BlockDumper, allow_unicode=True, sort_keys=False, width=100)


def export_yaml(*, owner: Any) -> tuple[str, str]:
    """(tool_descriptions.yaml, tool_examples.yaml) text for `owner`'s tools; the first tool of a name wins."""
    descriptions: dict[str, str] = {}
    examples: dict[str, list[str]] = {}
    for tool in Tool.objects.for_user(owner).order_by("name", "id"):
        if tool.name in descriptions:
            continue
        descriptions[tool.name] = (tool.description or "").rstrip() + "\n"
        snippets = [s for s in (tool.metadata or {}).get("examples") or [] if isinstance(s, str)]
        if snippets:
            examples[tool.name] = [s.rstrip("\n") + "\n" for s in snippets]
    return _dump(descriptions), _dump(examples)
