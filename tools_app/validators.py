"""Pure checks used as field validators and by Model.clean(): no database, no requests."""

import ast
import json
import math
import re
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from django.core.exceptions import ValidationError
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from tools_app.kernel.limits import (
    MAX_EXAMPLE_LINES,
    MAX_EXAMPLES,
    MAX_INDEXED_FIELD_LENGTH,
    MAX_PROMPT_ARGUMENT_DESCRIPTION,
    MAX_PROMPT_ARGUMENTS,
    MAX_REDACT_FIELD_LENGTH,
    MAX_REDACT_FIELDS,
    max_argument_depth,
    max_indexed_fields,
    max_table_bytes,
    max_table_depth,
)
from tools_app.kernel.rate_limits import parse_rate
from tools_app.safe_schema import schema_problems

TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
CATEGORY_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,49}$")
METADATA_KEYS = {
    "category": str,
    "tags": list,
    "preview_keys": list,
    "key_field": str,
    "examples": list,
    "return_format": str,
    "documentation_url": str,
    "mcp_server": str,
}


def validate_tool_name(value: str) -> None:
    """SPEC §2.2: 1–64 characters from A–Z a–z 0–9 _ . -"""
    if not isinstance(value, str) or not TOOL_NAME_RE.fullmatch(value):
        raise ValidationError(
            "Tool names are 1–64 characters of letters, digits, '_', '.' and '-' (got %(value)r).",
            code="invalid_name",
            params={"value": value},
        )


def validate_json_pointer(value: str) -> None:
    """RFC 6901: empty, or '/'-separated tokens where '~' is only followed by 0 or 1."""
    if value == "":
        return
    if not value.startswith("/"):
        raise ValidationError(
            "A JSON Pointer is empty (the whole document) or starts with '/' (got %(value)r).",
            code="invalid_pointer",
            params={"value": value},
        )
    if re.search(r"~(?![01])", value):
        raise ValidationError(
            "In a JSON Pointer '~' must be written '~0' and '/' inside a key '~1' (got %(value)r).",
            code="invalid_pointer",
            params={"value": value},
        )


def validate_json_schema(value: Any) -> None:
    """A JSON Schema object that Draft 2020-12 accepts and that cannot reach out (tools_app.safe_schema):
    references only inside it, patterns the linear-time engine runs."""
    if not isinstance(value, dict):
        raise ValidationError("A JSON Schema must be a JSON object.", code="invalid_schema")
    too_deep = nesting_beyond(value, max_argument_depth())
    if too_deep is not None:
        raise ValidationError(
            "A JSON Schema is nested at most %(max)d levels deep (deeper at %(where)s).",
            code="invalid_schema",
            params={"max": max_argument_depth(), "where": describe_path(too_deep) or "(root)"},
        )
    try:
        Draft202012Validator.check_schema(value)
    except SchemaError as exc:
        where = "/".join(str(part) for part in exc.path) or "(root)"
        raise ValidationError(
            "Not a valid JSON Schema (Draft 2020-12) at %(where)s: %(error)s",
            code="invalid_schema",
            params={"where": where, "error": exc.message},
        ) from exc
    # A remote, file or relative $ref would be fetched when the tool is called.
    problems = schema_problems(value)
    if problems:
        raise ValidationError([ValidationError(problem, code="unsafe_schema") for problem in problems])


#
# Size and shape limits (docs/input-limits.md): their settings and readers live in tools_app.kernel.limits.
#


def validate_indexed_fields(value: Any) -> None:
    """A table's `indexed_fields`: a list of distinct record field names (top-level keys of the records), each a
    non-empty string of at most MAX_INDEXED_FIELD_LENGTH characters without `"`, `\\` or control characters
    (which SQLite's JSON paths cannot spell, so no query on such a field is compiled), at most
    max_indexed_fields() of them. The code is "indexed_fields": the JSON field would replace a message of its own
    codes ("invalid", "unique") by its generic one."""
    if not isinstance(value, list):
        raise ValidationError("indexed_fields must be a list of record field names.", code="indexed_fields")
    limit = max_indexed_fields()
    if len(value) > limit:
        raise ValidationError(
            f"indexed_fields may list at most {limit} fields (TOOLHUB_MAX_INDEXED_FIELDS); {len(value)} were given.",
            code="indexed_fields",
        )
    seen: set[str] = set()
    for index, name in enumerate(value):
        if not isinstance(name, str) or not name:
            raise ValidationError(
                f"indexed_fields[{index}] must be a non-empty string (a record field name).", code="indexed_fields"
            )
        if len(name) > MAX_INDEXED_FIELD_LENGTH:
            raise ValidationError(
                f"indexed_fields[{index}] is {len(name)} characters long; at most {MAX_INDEXED_FIELD_LENGTH}.",
                code="indexed_fields",
            )
        if any(char in name for char in '"\\') or any(ord(char) < 0x20 for char in name):
            raise ValidationError(
                f'indexed_fields[{index}] ({name!r}) holds a quote ("), a backslash or a control character, '
                "which no index can be built on.",
                code="indexed_fields",
            )
        if any(0xD800 <= ord(char) <= 0xDFFF for char in name):
            raise ValidationError(f"indexed_fields[{index}] holds a lone surrogate.", code="indexed_fields")
        if name in seen:
            raise ValidationError(f"indexed_fields lists {name!r} twice.", code="indexed_fields")
        seen.add(name)


def nesting_beyond(value: Any, limit: int) -> list[str | int] | None:
    """The path to the first object or array nested deeper than `limit` levels in `value`, or None.

    Depth counts containers: `{}` and `[]` are 1 deep, `{"a": [1]}` 2, a scalar 0. Iterative, so it
    answers for any nesting json.loads produced, and stops at the first container too deep.
    """
    stack: list[tuple[list[str | int], Any, int]] = [([], value, 1)]
    while stack:
        path, item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.items()
        elif isinstance(item, list | tuple):
            children = enumerate(item)
        else:
            continue
        if depth > limit:
            return path
        stack.extend((path + [key], child, depth + 1) for key, child in children if isinstance(child, dict | list))
    return None


def validate_table_depth(value: Any) -> None:
    """A table document nests at most TOOLHUB_MAX_TABLE_DEPTH levels (checked before anything recursive)."""
    limit = max_table_depth()
    path = nesting_beyond(value, limit)
    if path is not None:
        raise ValidationError(
            "A table document nests at most %(max)d levels of objects and arrays (TOOLHUB_MAX_TABLE_DEPTH); "
            "this one goes deeper at %(where)s.",
            code="too_deep",
            params={"max": limit, "where": describe_path(path) or "(root)"},
        )


def table_too_large(size: int) -> ValidationError:
    """The error for a table document of `size` bytes over TOOLHUB_MAX_TABLE_BYTES."""
    return ValidationError(
        "A table document is at most %(max)d bytes of JSON (TOOLHUB_MAX_TABLE_BYTES); this one is %(size)d bytes.",
        code="too_large",
        params={"max": max_table_bytes(), "size": size},
    )


_T = TypeVar("_T")


def on_fresh_stack(function: Callable[..., _T], *args: Any) -> _T:
    """`function(*args)` run on a new thread, whose stack is empty: for JSON nested almost as deep as Python's
    recursion limit (a document stored before TOOLHUB_MAX_TABLE_DEPTH existed), which json's C code can
    parse or write from a shallow stack but not from deep inside a view or a template."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = function(*args)
        except BaseException as exc:  # handed to the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=run, name="toolhub-deep-json")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


class TableDocumentDecoder(json.JSONDecoder):
    """Table.data's decoder: a document nested deeper than the caller's remaining stack is parsed on a fresh one."""

    def decode(self, s: str, *args: Any, **kwargs: Any) -> Any:
        parse = super().decode
        try:
            return parse(s, *args, **kwargs)
        except RecursionError:
            return on_fresh_stack(parse, s)


class EncodedJSON:
    """A table document given as its JSON text (str, or ASCII bytes), already checked against the table rules
    (depth, JSON values, size) and written as TableDocumentEncoder writes it: the encoder hands the text to the
    database as it is, so that a large import is never held as Python values, nor copied (services.imports)."""

    __slots__ = ("text",)

    def __init__(self, text: str | bytes) -> None:
        self.text = text


class TableDocumentEncoder(json.JSONEncoder):
    """Table.data's encoder: the JSON text Django writes to the database, refused over TOOLHUB_MAX_TABLE_BYTES.

    The size is measured on the serialization every write does anyway (Table.full_clean through
    JSONField.validate, and the UPDATE of services.table_write), so a write to a large table costs no extra
    pass over its document. A document nested beyond Python's recursion limit is refused the same way.
    """

    def encode(self, o: Any) -> str:
        if isinstance(o, EncodedJSON):
            if len(o.text) > max_table_bytes():
                raise table_too_large(len(o.text))
            return o.text  # type: ignore[return-value]  # bytes go to psycopg as they are
        try:
            text = super().encode(o)
        except RecursionError as exc:
            raise ValidationError(
                "A table document nests at most %(max)d levels of objects and arrays (TOOLHUB_MAX_TABLE_DEPTH).",
                code="too_deep",
                params={"max": max_table_depth()},
            ) from exc
        if len(text) > max_table_bytes():  # ensure_ascii: one character is one byte
            raise table_too_large(len(text))
        return text


# A table document's JSON text, records and all (json.JSONEncoder()'s defaults: ASCII, `, ` and `: `, NaN written).
_ENCODE_DOCUMENT = json.JSONEncoder().encode
# The compact text of a record (ensure_ascii=False, separators `,` and `:`: what the data access stores, before an
# engine's own rewrite, codec.record_text) with a NUL after each separator. The encoder writes every control
# character inside a string (key or value) escaped, so the NULs are exactly the separators' ends: dropped, they give
# the compact text; turned into spaces, the document's (when the text is printable ASCII: the rest escape apart).
_ENCODE_MARKED = json.JSONEncoder(ensure_ascii=False, separators=(",\x00", ":\x00")).encode


def record_texts(value: Any) -> tuple[str, str | None]:
    """A record's two texts from one encoding: (its text in a table document, json.JSONEncoder()'s; its compact
    text, json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)'s, for codec.record_text,
    or None when the text shows NaN or Infinity, which that refuses: record_text then decides).

    An import writes both for every record (the answer's document, the stored row): one encoding and two
    replacements of a character cost ~0.6x two encodings. A text with a character beyond printable ASCII (which
    the document escapes as \\uXXXX) is encoded as the document's a second time."""
    marked = _ENCODE_MARKED(value)
    if marked.isascii() and "\x7f" not in marked:
        document = marked.replace("\x00", " ")
    else:
        document = _ENCODE_DOCUMENT(value)
    if "NaN" in marked or "Infinity" in marked:
        return document, None
    return document, marked.replace("\x00", "")


#
# Parsing JSON a client sent: one function for every surface (API bodies, table files, admin forms, MCP)
#

# A float literal that may overflow to infinity: a 3-digit exponent, or 300 digits in a row. A match inside a
# string only costs the slower parse below, never a wrong answer. Two expressions, each opening with a character
# class the engine scans for: one alternation of both tried at every position and cost three times as much on
# every MCP request body (bench/mcp_throughput.py).
_HUGE_EXPONENT = re.compile(r"[eE][+-]?[0-9]{3}")
_HUGE_EXPONENT_BYTES = re.compile(_HUGE_EXPONENT.pattern.encode())
_LONG_DIGITS = 300
_LONG_NUMBER = re.compile(rf"[0-9]{{{_LONG_DIGITS}}}")
_LONG_NUMBER_BYTES = re.compile(_LONG_NUMBER.pattern.encode())


def _maybe_huge_float(text: str | bytes) -> bool:
    """Whether `text` may hold a float literal that overflows (a superset: then the checked parse runs)."""
    if isinstance(text, str):
        if _HUGE_EXPONENT.search(text) is not None:
            return True
        return len(text) >= _LONG_DIGITS and _LONG_NUMBER.search(text) is not None
    if _HUGE_EXPONENT_BYTES.search(text) is not None:
        return True
    return len(text) >= _LONG_DIGITS and _LONG_NUMBER_BYTES.search(text) is not None


_QUOTED_NUMBER_CHARS = 30  # digits of a refused number quoted in the message


class JSONNumberError(ValueError):
    """A JSON number Python cannot hold: an integer longer than sys.get_int_max_str_digits() digits (Python
    refuses to convert it), or a number beyond a 64-bit float (1e400 would become Infinity). The message
    names the number (`shown`: its first digits and its length when long) and where it is (`line`, `column`
    count from 1, as json.JSONDecodeError's); `problem` is what is wrong with it."""

    def __init__(self, *, shown: str, problem: str, line: int, column: int) -> None:
        super().__init__(f"The number {shown} at line {line}, column {column} is {problem}")
        self.shown, self.problem, self.line, self.column = shown, problem, line, column


def _number_error(text: str | bytes, literal: str, problem: str) -> JSONNumberError:
    decoded = text.decode("utf-8", "replace") if isinstance(text, bytes | bytearray) else text
    found = re.search(rf"(?<![0-9.eE+-]){re.escape(literal)}(?![0-9])", decoded)
    offset = found.start() if found else 0
    line = decoded.count("\n", 0, offset) + 1
    column = offset - decoded.rfind("\n", 0, offset)
    digits = sum(char.isdigit() for char in literal)
    shown = literal if len(literal) <= _QUOTED_NUMBER_CHARS else f"{literal[:_QUOTED_NUMBER_CHARS]}… ({digits} digits)"
    return JSONNumberError(shown=shown, problem=problem, line=line, column=column)


def json_loads(text: str | bytes, *, floats_checked: bool = True, **kwargs: Any) -> Any:
    """json.loads() for JSON a client sent: the same values and errors (ValueError, json.JSONDecodeError,
    RecursionError), and a number Python cannot hold is JSONNumberError naming it, never a bare ValueError
    from deep inside the parser (a 500 where nobody catches it) nor a silent Infinity.

    The usual document costs one plain parse: the checks run only when that parse fails on a number, or the
    text holds something that may be an overflowing float. `floats_checked=False` spares that scan of the text: a
    float beyond a 64-bit float then reads as an infinity, for a caller that finds it afterwards (json.JSONEncoder
    writes it `Infinity`) and parses again with the check to refuse it.
    """
    if floats_checked and _maybe_huge_float(text):
        return _json_loads_checked(text, **kwargs)
    try:
        return json.loads(text, **kwargs)
    except json.JSONDecodeError:
        raise
    except ValueError:
        # Python's integer-string conversion limit, raised from inside the scanner without a position.
        return _json_loads_checked(text, **kwargs)


def _json_loads_checked(text: str | bytes, **kwargs: Any) -> Any:
    """json.loads() with each number checked (json_loads' slow path: its hooks are made only when it runs)."""
    limit = sys.get_int_max_str_digits()

    def checked_int(literal: str) -> int:
        if limit and len(literal.lstrip("-")) > limit:
            raise _number_error(text, literal, f"too long: integers have at most {limit} digits.")
        return int(literal)

    def checked_float(literal: str) -> float:
        value = float(literal)
        if not math.isfinite(value):
            raise _number_error(text, literal, "too large: numbers are at most about 1.8e308 (a 64-bit float).")
        return value

    return json.loads(text, parse_int=checked_int, parse_float=checked_float, **kwargs)


# An escaped NUL in json.dumps output: "\u0000" preceded by an even number of backslashes (an odd number
# means the text "\u0000" itself was written, not the character).
_NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def json_text_has_nul(text: str) -> bool:
    """Whether json.dumps output holds the character U+0000 (in a string or a key)."""
    return "\\u0000" in text and _NUL_ESCAPE.search(text) is not None


# U+D800–U+DFFF: halves of UTF-16 surrogate pairs. JSON text may write one alone (`"\ud800"`) and Python's
# json then gives a str holding it, but it is not a character: UTF-8 cannot encode it and PostgreSQL's jsonb
# refuses it. (A correct pair, `"\ud83d\ude00"`, is parsed into the one character it stands for.)
_SURROGATE = re.compile("[\ud800-\udfff]")


def json_dumps_checked(value: Any) -> str:
    """`value` as JSON text with non-ASCII kept (so a surrogate stays visible to `find_surrogate`).

    Raises ValueError for NaN and Infinity (not JSON numbers), TypeError for a value that is not JSON.
    """
    return json.dumps(value, allow_nan=False, ensure_ascii=False)


def find_surrogate(value: Any, *, text: str | None = None) -> tuple[list[str | int], bool, str] | None:
    """The first string of a JSON value holding a surrogate code point: (path, in_key, code point), or None.

    `path` leads to the string, or to the object whose key holds it when `in_key`. Iterative, so it
    follows any nesting json.loads produced. `text`, the value's json_dumps_checked() output when the
    caller has it, skips the walk when it holds no surrogate (the usual case, checked at C speed).
    """
    if text is not None and not _SURROGATE.search(text):
        return None
    stack: list[tuple[list[str | int], Any]] = [([], value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            found = _SURROGATE.search(item)
            if found:
                return path, False, found.group()
        elif isinstance(item, dict):
            for key in item:
                found = _SURROGATE.search(key) if isinstance(key, str) else None
                if found:
                    return path, True, found.group()
            stack.extend((path + [key], child) for key, child in reversed(item.items()))
        elif isinstance(item, list | tuple):
            stack.extend((path + [index], child) for index, child in reversed(list(enumerate(item))))
    return None


def describe_path(path: list[str | int]) -> str:
    """A path inside a JSON value as `a[0].b` ("" for the value itself)."""
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path).lstrip(".")


def surrogate_problem(char: str) -> str:
    """The end of a message about a lone surrogate; the caller says where it is."""
    return f"holds a lone UTF-16 surrogate (U+{ord(char):04X}); strings must be Unicode text."


def validate_json_value(value: Any) -> None:
    """A value that is JSON (RFC 8259): Python's json also writes NaN and Infinity, which PostgreSQL refuses.

    The character U+0000 is valid JSON but PostgreSQL's jsonb cannot store it, and a lone UTF-16
    surrogate is not text at all: both are refused on every backend (same data, same answer on SQLite
    and PostgreSQL).
    """
    try:
        text = json_dumps_checked(value)
    except ValueError as exc:
        raise ValidationError("NaN and Infinity are not JSON numbers.", code="invalid_json") from exc
    except TypeError as exc:
        raise ValidationError("Not a JSON value: %(error)s.", code="invalid_json", params={"error": exc}) from exc
    if json_text_has_nul(text):
        raise ValidationError("Strings must not contain the character U+0000 (NUL).", code="invalid_json")
    found = find_surrogate(value, text=text)
    if found is not None:
        path, in_key, char = found
        where = describe_path(path) or "(root)"
        place = f"A key in the object at {where}" if in_key else f"The string at {where}"
        raise ValidationError(f"{place} {surrogate_problem(char)}", code="invalid_json")


def validate_input_schema(value: Any) -> None:
    """An input schema is a valid JSON Schema describing an object (MCP requires `type: object`)."""
    validate_json_schema(value)
    if value.get("type") != "object":
        raise ValidationError('An input schema must have "type": "object".', code="invalid_schema")


def validate_examples(value: Any) -> None:
    """At most 5 examples, each a string of valid Python of at most 10 lines."""
    if not isinstance(value, list):
        raise ValidationError("metadata.examples must be a list of strings.", code="invalid_examples")
    if len(value) > MAX_EXAMPLES:
        raise ValidationError(
            "metadata.examples holds at most %(max)d examples (got %(count)d).",
            code="invalid_examples",
            params={"max": MAX_EXAMPLES, "count": len(value)},
        )
    for index, example in enumerate(value):
        if not isinstance(example, str) or not example.strip():
            raise ValidationError(
                "metadata.examples[%(index)d] must be a non-empty string.",
                code="invalid_examples",
                params={"index": index},
            )
        lines = example.strip("\n").count("\n") + 1
        if lines > MAX_EXAMPLE_LINES:
            raise ValidationError(
                "metadata.examples[%(index)d] has %(lines)d lines; at most %(max)d are allowed.",
                code="invalid_examples",
                params={"index": index, "lines": lines, "max": MAX_EXAMPLE_LINES},
            )
        try:
            ast.parse(example)
        except SyntaxError as exc:
            raise ValidationError(
                "metadata.examples[%(index)d] is not valid Python (line %(line)s: %(error)s).",
                code="invalid_examples",
                params={"index": index, "line": exc.lineno, "error": exc.msg},
            ) from exc
        except (MemoryError, RecursionError) as exc:
            # CPython's parser gives up on very deep nesting (e.g. "-" * 100_000 + "1") this way.
            raise ValidationError(
                "metadata.examples[%(index)d] is not valid Python (it is nested too deeply).",
                code="invalid_examples",
                params={"index": index},
            ) from exc


def validate_metadata(value: Any) -> None:
    """SPEC §2.2 metadata: an object whose known keys have the right types."""
    if not isinstance(value, dict):
        raise ValidationError("metadata must be a JSON object.", code="invalid_metadata")
    errors = []
    for key, expected in METADATA_KEYS.items():
        if key in value and value[key] is not None and not isinstance(value[key], expected):
            errors.append(
                ValidationError(
                    "metadata.%(key)s must be a %(type)s.",
                    code="invalid_metadata",
                    params={"key": key, "type": "list" if expected is list else "string"},
                )
            )
    if errors:
        raise ValidationError(errors)
    category = value.get("category")
    if category and not CATEGORY_RE.fullmatch(category):
        raise ValidationError(
            "metadata.category must be a slug: lowercase letters, digits, '-' and '_' (got %(value)r).",
            code="invalid_metadata",
            params={"value": category},
        )
    for key in ("tags", "preview_keys"):
        items = value.get(key) or []
        if not all(isinstance(item, str) and item for item in items):
            raise ValidationError(
                "metadata.%(key)s must be a list of non-empty strings.", code="invalid_metadata", params={"key": key}
            )
    if value.get("key_field") == "":
        raise ValidationError("metadata.key_field must not be empty.", code="invalid_metadata")
    if "examples" in value and value["examples"] is not None:
        validate_examples(value["examples"])


def validate_rate(value: str) -> None:
    """A rate limit field (McpInstance.key_rate_limit): empty means the default; else one
    `<count>/<period>` rate (tools_app.kernel.rate_limits.parse_rate says what is wrong)."""
    if not value:
        return
    try:
        parse_rate(value)
    except ValueError as exc:
        raise ValidationError(str(exc), code="invalid_rate") from None


#
# Call details: what the call log keeps of a call (docs/call-log.md)
#


def validate_redact_fields(value: Any) -> None:
    """Table.redact_fields: a list of at most MAX_REDACT_FIELDS distinct, non-empty record field names (strings
    of at most MAX_REDACT_FIELD_LENGTH characters) whose values the call log never keeps."""
    _validate_redacted_names(value, "redact_fields", one="a field", many="fields", kind="record field names")


def validate_redact_arguments(value: Any) -> None:
    """Tool.redact_arguments: argument names the call log never keeps the values of, under the same bounds as a
    table's redact_fields (the names are applied the same way, to the call's arguments)."""
    _validate_redacted_names(value, "redact_arguments", one="an argument", many="arguments", kind="argument names")


def _validate_redacted_names(value: Any, field: str, *, one: str, many: str, kind: str) -> None:
    code = f"invalid_{field}"
    if not isinstance(value, list):
        raise ValidationError(f"{field} must be a list of {kind}.", code=code)
    if len(value) > MAX_REDACT_FIELDS:
        raise ValidationError(f"{field} names at most %(max)d {many}.", code=code, params={"max": MAX_REDACT_FIELDS})
    for name in value:
        if not isinstance(name, str) or not name or len(name) > MAX_REDACT_FIELD_LENGTH:
            raise ValidationError(
                f"Each name in {field} is a non-empty string of at most %(max)d characters.",
                code=code,
                params={"max": MAX_REDACT_FIELD_LENGTH},
            )
    if len(set(value)) != len(value):
        raise ValidationError(f"{field} names {one} twice.", code=code)


#
# Prompts: owner-defined prompt templates of an MCP instance
#

# The built-in prompt every instance serves (mcp_app.features): no owner-defined prompt may take its name.
BUILTIN_PROMPT_NAME = "usage_guide"
PROMPT_ARGUMENT_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
# `{{name}}`, spaces allowed inside the braces; anything else between braces is text.
PROMPT_PLACEHOLDER_RE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]{0,63})\s*\}\}")
PROMPT_ARGUMENT_KEYS = ("name", "description", "required")


def validate_prompt_name(value: str) -> None:
    """A prompt's name: a tool name's rules (SPEC §2.2), and not the built-in prompt's (ignoring case)."""
    validate_tool_name(value)
    if value.lower() == BUILTIN_PROMPT_NAME:
        raise ValidationError(
            "%(value)r is the name of the built-in prompt every instance serves; choose another name.",
            code="reserved_name",
            params={"value": value},
        )


def _argument_problem(index: int, argument: Any) -> str | None:
    """Why arguments[index] is not a `{"name", "description", "required"}` object, or None."""
    where = f"arguments[{index}]"
    if not isinstance(argument, dict):
        return f'{where} must be an object {{"name", "description", "required"}}.'
    unknown = sorted(str(key) for key in argument if key not in PROMPT_ARGUMENT_KEYS)
    if unknown:
        return f"{where} has unknown keys {unknown}: an argument has name, description and required."
    name = argument.get("name")
    if not isinstance(name, str) or not PROMPT_ARGUMENT_NAME_RE.fullmatch(name):
        return (
            f"{where}.name must be an identifier: 1-64 letters, digits and '_', not starting with a digit "
            f"(got {name!r})."
        )
    description = argument.get("description", "")
    if not isinstance(description, str):
        return f"{where}.description ({name!r}) must be a string."
    if len(description) > MAX_PROMPT_ARGUMENT_DESCRIPTION:
        return f"{where}.description ({name!r}) is at most {MAX_PROMPT_ARGUMENT_DESCRIPTION} characters."
    if "\x00" in description:
        return f"{where}.description ({name!r}) must not contain U+0000."
    if not isinstance(argument.get("required", False), bool):
        return f"{where}.required ({name!r}) must be true or false."
    return None


def validate_prompt_arguments(value: Any) -> None:
    """A prompt's arguments: a list of at most MAX_PROMPT_ARGUMENTS `{"name", "description", "required"}`
    objects whose names are distinct identifiers; description (a string) and required (a boolean) are optional."""
    if not isinstance(value, list):
        raise ValidationError(
            'The arguments are a list of {"name", "description", "required"} objects.', code="invalid_arguments"
        )
    if len(value) > MAX_PROMPT_ARGUMENTS:
        raise ValidationError(
            "A prompt has at most %(max)d arguments (got %(count)d).",
            code="invalid_arguments",
            params={"max": MAX_PROMPT_ARGUMENTS, "count": len(value)},
        )
    problems = [problem for index, item in enumerate(value) if (problem := _argument_problem(index, item))]
    if problems:
        raise ValidationError([ValidationError(problem, code="invalid_arguments") for problem in problems])
    names = [item["name"] for item in value]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValidationError(
            "Argument names must be distinct: %(names)s repeated.",
            code="invalid_arguments",
            params={"names": ", ".join(repr(name) for name in repeated)},
        )


def prompt_placeholders(template: str) -> list[str]:
    """The argument names a template's `{{name}}` placeholders use, in order of first use."""
    return list(dict.fromkeys(PROMPT_PLACEHOLDER_RE.findall(template)))
