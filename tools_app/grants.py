"""What one caller of an MCP instance may use: its tool set, and the values of a binding's pinned arguments.

A caller is what opened the request: an API key or an OAuth access token (docs/mcp-clients.md, "Per-caller
tool sets"). Its Grant says

- whether it may call tools that change data (`writes`): not with a read-only key, nor with a token
  without the `tools:all` scope (tools_app.oauth), nor on a read-only instance, nor through a read-only
  binding;
- what a binding's pinned arguments take from it: `key.label`, `key.attributes.<name>` (an API key's
  label and attributes, fixed when the key is issued) and `user.username` (who authorized the token; for a
  key, the instance's owner). A binding whose pins name a value the caller does not have is not in its set.

A binding's `pinned_arguments` fix arguments of its tool: `{"<argument>": {"value": <json>}}` (a constant)
or `{"<argument>": {"from": "<source>"}}` (a value of the caller, a string; for an argument whose schema takes
an array, a one-item list). Pinned arguments are not in the schema the caller is shown
(`listed_input_schema`), and a call that names one is refused (INVALID_ARGUMENTS naming it): the caller
cannot widen what the binding gives it. They are checked against the tool's input schema when the binding
is saved (`pin_problems`).

One key of `pinned_arguments` is not an argument: `where` (WHERE) narrows the records a data tool reads,
`{"where": {"<record field>": {"value": <json>} | {"from": "<source>"}, ...}}`. The tool then runs over only
the records of its mount whose fields equal those values (a value from the caller is a string):
tools_app.data_access.narrowing. The caller's own arguments (a JMESPath query included) run over the narrowed
records and cannot reach the others. Only the reads of a table (the types of kind READ) take it; a binding narrowing
a write, a registry tool or a tool whose schema declares an argument `where` is refused when saved. The call's
effective arguments carry the resolved narrowing under `where`, so the call log, the result cache and a page's
cursor are per narrowing.

tools/list, resources, prompts, the registry (search, definitions, guide, export) and tools/call all ask
`Grant.may_use` and `Grant.pinned_values`: one rule for every surface. Domain module: no models, no DRF,
no MCP SDK.
"""

import copy
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tools_app.kernel.errors import ErrorCode, ToolError
from tools_app.kernel.limits import MAX_ATTRIBUTE_VALUE, MAX_ATTRIBUTES, MAX_PINS, MAX_WHERE_FIELD
from tools_app.safe_schema import UnsafeSchema, validator_for
from tools_app.tool_types import READ, TOOL_TYPES, is_read, types_of_kind

__all__ = [
    "ATTRIBUTE_NAME_RE",
    "FULL_GRANT",
    "MAX_ATTRIBUTES",
    "MAX_ATTRIBUTE_VALUE",
    "MAX_PINS",
    "WHERE",
    "SOURCES",
    "Grant",
    "apply_pins",
    "attribute_problems",
    "changes_data",
    "listed_input_schema",
    "pin_problems",
    "pin_summary",
]

ATTRIBUTE_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
KEY_LABEL = "key.label"
USERNAME = "user.username"
ATTRIBUTE_PREFIX = "key.attributes."
SOURCES = (KEY_LABEL, f"{ATTRIBUTE_PREFIX}<name>", USERNAME)
READ_ONLY_KEY = "this API key is read-only"
# Arguments the pipeline reads itself (a page's cursor): never pinned.
UNPINNABLE = frozenset({"cursor"})
# The key of pinned_arguments that narrows the records a read sees (module docstring), and the types it fits.
WHERE = "where"


def _pins_of(pins: Mapping[str, Any] | None) -> list[Any]:
    """Every pin of a binding's pinned_arguments, the narrowing's fields included."""
    found: list[Any] = []
    for argument, pin in (pins or {}).items():
        if argument == WHERE and isinstance(pin, dict):
            found.extend(pin.values())
        else:
            found.append(pin)
    return found


def changes_data(tool_type: str | None) -> bool:
    spec = TOOL_TYPES.get(tool_type or "")
    return spec is not None and spec.changes_data


@dataclass(frozen=True, slots=True)
class Grant:
    """What a caller may use. `key_label` None: no API key opened the request (an OAuth token)."""

    writes: bool = True
    key_label: str | None = None
    key_attributes: tuple[tuple[str, str], ...] = ()
    username: str | None = None
    # Why writes are off, for the refusal's message ("this key is read-only", ...).
    read_only_reason: str = ""
    # The owner's view (FULL_GRANT): every binding, whatever its pins take from a caller.
    every_source: bool = False
    attributes: dict[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "attributes", dict(self.key_attributes))

    @classmethod
    def of_key(cls, *, read_only: bool, label: str, attributes: Mapping[str, Any] | None, username: str) -> "Grant":
        """An API key's grant: its read-only flag, label and attributes; `username`, the instance owner's."""
        pairs = tuple(sorted((str(name), str(value)) for name, value in (attributes or {}).items()))
        return cls(
            writes=not read_only,
            key_label=label,
            key_attributes=pairs,
            username=username or None,
            read_only_reason=READ_ONLY_KEY,
        )

    @property
    def identity(self) -> tuple:
        """What decides this caller's set (not the pinned values): part of a registry index's key."""
        return (
            self.writes,
            self.every_source,
            self.key_label is not None,
            self.username is not None,
            tuple(sorted(self.attributes)),
        )

    def source_value(self, source: str) -> str | None:
        """The caller's value for a pin's `from`, or None when it has none."""
        if source == KEY_LABEL:
            return self.key_label
        if source == USERNAME:
            return self.username
        if source.startswith(ATTRIBUTE_PREFIX) and self.key_label is not None:
            return self.attributes.get(source[len(ATTRIBUTE_PREFIX) :])
        return None

    def missing_sources(self, pins: Mapping[str, Any] | None) -> list[str]:
        """The `from` sources of `pins` this caller has no value for."""
        if self.every_source:
            return []
        missing = []
        for pin in _pins_of(pins):
            source = pin.get("from") if isinstance(pin, dict) else None
            if source is not None and self.source_value(source) is None:
                missing.append(source)
        return missing

    def may_use(self, tool_type: str | None, *, read_only: bool = False, pins: Mapping[str, Any] | None = None) -> bool:
        """Whether a binding of a `tool_type` tool (on a read-only instance or binding: `read_only`) is in this
        caller's set."""
        if changes_data(tool_type) and (read_only or not self.writes):
            return False
        return not self.missing_sources(pins)

    def refusal(self, name: str, tool_type: str | None, *, read_only: bool, pins: Mapping[str, Any] | None) -> str:
        """Why a binding is not in this caller's set (the TOOL_NOT_FOUND message), or "" when it is (every
        tools/call asks: the message is only made for a refusal)."""
        writes_refused = (read_only or not self.writes) and changes_data(tool_type)
        missing = self.missing_sources(pins) if pins and not writes_refused else []
        if not writes_refused and not missing:
            return ""
        shown = repr(name) if len(name) <= 80 else repr(name[:80]) + "…"
        if writes_refused:
            why = "this instance or binding is read-only" if read_only else (self.read_only_reason or "read-only")
            return f"Unknown tool {shown} for this caller: it changes data, and {why}."
        return (
            f"Unknown tool {shown} for this caller: its binding takes arguments from "
            f"{', '.join(sorted(set(missing)))}, which this caller does not have."
        )

    def pinned_values(self, pins: Mapping[str, Any] | None, input_schema: Any) -> dict[str, Any]:
        """The arguments `pins` fix for this caller (may_use has said it has every source)."""
        values: dict[str, Any] = {}
        properties = input_schema.get("properties", {}) if isinstance(input_schema, dict) else {}
        for argument, pin in (pins or {}).items():
            if argument == WHERE:
                values[WHERE] = {name: self._pin_value(field_pin) for name, field_pin in pin.items()}
                continue
            if "value" in pin:
                values[argument] = copy.deepcopy(pin["value"])
                continue
            value = self.source_value(pin["from"])
            if _takes_array(properties.get(argument)):
                values[argument] = [value]
            else:
                values[argument] = value
        return values

    def _pin_value(self, pin: Mapping[str, Any]) -> Any:
        return copy.deepcopy(pin["value"]) if "value" in pin else self.source_value(pin["from"])


FULL_GRANT = Grant(every_source=True)  # the owner's view: every enabled binding (the API's and the admin's)


def _types(schema: Any) -> set[str] | None:
    """The JSON types a (sub)schema names with `type`; None when it names none (any type)."""
    if not isinstance(schema, dict) or "type" not in schema:
        return None
    kinds = schema["type"]
    return {kinds} if isinstance(kinds, str) else {str(kind) for kind in kinds} if isinstance(kinds, list) else None


def _takes_array(schema: Any) -> bool:
    kinds = _types(schema)
    return kinds is not None and "array" in kinds and "string" not in kinds


def apply_pins(arguments: Any, pinned: Mapping[str, Any]) -> Any:
    """The effective arguments: the caller's with the pinned ones added. Raises ToolError(INVALID_ARGUMENTS)
    naming the pinned arguments the caller sent (nothing runs)."""
    if not pinned:
        return arguments
    if not isinstance(arguments, dict):
        return arguments  # the tool's own validation says what is wrong with them
    sent = sorted(name for name in pinned if name in arguments)
    if sent:
        names = ", ".join(repr(name) for name in sent)
        raise ToolError(
            ErrorCode.INVALID_ARGUMENTS,
            f"Invalid arguments: {names} {'is' if len(sent) == 1 else 'are'} fixed by this server for this tool "
            "and cannot be sent; call it without "
            f"{'it' if len(sent) == 1 else 'them'}.",
            {"argument": sent[0], "pinned": sent},
        )
    return {**arguments, **pinned}


def listed_input_schema(schema: Any, pins: Mapping[str, Any] | None) -> Any:
    """The input schema a caller is shown: the pinned arguments taken out of `properties` and `required`.
    Returns `schema` itself when nothing is pinned (shared: do not change it)."""
    if not pins or not isinstance(schema, dict):
        return schema
    listed = dict(schema)
    properties = schema.get("properties")
    if isinstance(properties, dict):
        listed["properties"] = {name: value for name, value in properties.items() if name not in pins}
    required = schema.get("required")
    if isinstance(required, list):
        listed["required"] = [name for name in required if name not in pins]
        if not listed["required"]:
            del listed["required"]
    return listed


def pin_summary(pins: Mapping[str, Any] | None) -> list[str]:
    """One line per pinned argument, for people and models: `customer` = key.attributes.customer."""
    lines = []
    for argument, pin in sorted((pins or {}).items()):
        if argument == WHERE and isinstance(pin, dict):
            for name, field_pin in sorted(pin.items()):
                value = _json(field_pin["value"]) if "value" in field_pin else f"the caller's {field_pin['from']}"
                lines.append(f"only records whose {name} = {value}")
            continue
        if "value" in pin:
            lines.append(f"{argument} = {_json(pin['value'])}")
        else:
            lines.append(f"{argument} = the caller's {pin['from']}")
    return lines


def _json(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 200 else text[:199] + "…"


def pin_problems(pins: Any, input_schema: Any, tool_type: str | None = None) -> list[str]:
    """Why `pins` cannot be a binding's pinned_arguments for a tool with `input_schema` (of `tool_type`); []
    when they can.

    `where` narrows the records (module docstring): an object of 1 to MAX_PINS record fields, each pinned as an
    argument is, for a read tool whose schema declares no argument `where`. Each pinned argument
    must be declared in the schema's `properties` (not `cursor`); a pin is exactly {"value": <json>} or
    {"from": <source>}; a constant must pass the argument's schema; a value from the caller (a string) needs an
    argument that takes a string, or an array (it is sent as a one-item list).
    """
    if pins is None or pins == {}:
        return []
    if not isinstance(pins, dict):
        return ['pinned_arguments must be an object: {"<argument>": {"value": <json>} or {"from": "<source>"}}.']
    if len(pins) > MAX_PINS:
        return [f"pinned_arguments holds at most {MAX_PINS} arguments (got {len(pins)})."]
    properties = input_schema.get("properties") if isinstance(input_schema, dict) else None
    properties = properties if isinstance(properties, dict) else {}
    problems = []
    for argument, pin in pins.items():
        where = f"pinned_arguments[{argument!r}]"
        if argument == WHERE:
            problems += _narrowing_problems(pin, properties, tool_type)
            continue
        if argument in UNPINNABLE or argument not in properties:
            declared = ", ".join(sorted(name for name in properties if name not in UNPINNABLE)) or "none"
            problems.append(
                f"{where}: the tool's input schema declares no argument {argument!r} (it declares: {declared})."
            )
            continue
        if not isinstance(pin, dict) or len(pin) != 1 or not ({"value", "from"} & set(pin)):
            problems.append(f'{where} must be {{"value": <json>}} or {{"from": "<source>"}}.')
            continue
        if "value" in pin:
            problems += [f"{where}: {message}" for message in _constant_problems(argument, pin["value"], input_schema)]
            continue
        source = pin["from"]
        if not _valid_source(source):
            problems.append(
                f"{where}: unknown source {str(source)[:100]!r}; use key.label, key.attributes.<name> or user.username."
            )
            continue
        kinds = _types(properties[argument])
        if kinds is not None and "string" not in kinds and "array" not in kinds:
            problems.append(
                f"{where}: {source} is a string, and the argument {argument!r} takes {', '.join(sorted(kinds))}."
            )
    return problems


def _narrowing_problems(narrowing: Any, properties: dict[str, Any], tool_type: str | None) -> list[str]:
    where = f"pinned_arguments[{WHERE!r}]"
    if WHERE in properties:
        return [f"{where}: the tool declares an argument {WHERE!r}, so its records cannot be narrowed by a binding."]
    if not is_read(tool_type):
        kinds = ", ".join(sorted(types_of_kind(READ)))
        return [
            f"{where} narrows the records a read sees, and this tool is a {tool_type or 'typeless'} tool "
            f"(it fits {kinds}); writes through a narrowed binding are not offered."
        ]
    if not isinstance(narrowing, dict) or not narrowing or len(narrowing) > MAX_PINS:
        return [
            f'{where} must be an object of 1 to {MAX_PINS} record fields, each {{"value": <json>}} or '
            '{"from": "<source>"}: {"customer_id": {"from": "key.attributes.customer"}}.'
        ]
    problems = []
    for name, pin in narrowing.items():
        at = f"{where}[{name[:80]!r}]"
        if not name or len(name) > MAX_WHERE_FIELD or not name.isprintable():
            problems.append(f"{at}: a record field name is 1 to {MAX_WHERE_FIELD} printable characters.")
        elif not isinstance(pin, dict) or len(pin) != 1 or not ({"value", "from"} & set(pin)):
            problems.append(f'{at} must be {{"value": <json>}} or {{"from": "<source>"}}.')
        elif "from" in pin and not _valid_source(pin["from"]):
            problems.append(
                f"{at}: unknown source {str(pin['from'])[:100]!r}; use key.label, key.attributes.<name> or "
                "user.username."
            )
        elif "value" in pin and len(json.dumps(pin["value"])) > MAX_ATTRIBUTE_VALUE:
            problems.append(f"{at}: a constant is at most {MAX_ATTRIBUTE_VALUE} characters of JSON.")
    return problems


def _valid_source(source: Any) -> bool:
    if source in (KEY_LABEL, USERNAME):
        return True
    return (
        isinstance(source, str)
        and source.startswith(ATTRIBUTE_PREFIX)
        and ATTRIBUTE_NAME_RE.fullmatch(source[len(ATTRIBUTE_PREFIX) :]) is not None
    )


def _constant_problems(argument: str, value: Any, input_schema: dict[str, Any]) -> list[str]:
    """The input schema's complaints about `value` as `argument` (the other arguments left out)."""
    partial = {key: item for key, item in input_schema.items() if key not in ("required", "dependentRequired")}
    try:
        validator = validator_for(partial)
    except UnsafeSchema as exc:
        return [f"the tool's input schema cannot be applied: {exc}"]
    errors = [error for error in validator.iter_errors({argument: value}) if list(error.path)[:1] == [argument]]
    return [f"the value fails the tool's input schema: {error.message}" for error in errors[:3]]


def attribute_problems(attributes: Any) -> list[str]:
    """Why `attributes` cannot be an API key's attributes: a JSON object of at most MAX_ATTRIBUTES strings."""
    if attributes is None or attributes == {}:
        return []
    if not isinstance(attributes, dict):
        return ['attributes must be a JSON object of strings, e.g. {"customer": "acme"}.']
    if len(attributes) > MAX_ATTRIBUTES:
        return [f"attributes holds at most {MAX_ATTRIBUTES} names (got {len(attributes)})."]
    problems = []
    for name, value in attributes.items():
        if ATTRIBUTE_NAME_RE.fullmatch(name) is None:
            problems.append(f"attributes: the name {name[:80]!r} is not 1-64 characters of A-Z a-z 0-9 _ . -.")
        elif not isinstance(value, str):
            problems.append(f"attributes[{name!r}] must be a string (got {type(value).__name__}).")
        elif len(value) > MAX_ATTRIBUTE_VALUE or "\x00" in value:
            problems.append(f"attributes[{name!r}] must be at most {MAX_ATTRIBUTE_VALUE} characters, without NUL.")
    return problems
