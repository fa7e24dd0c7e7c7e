"""What the call log keeps of a call's arguments and result: JSON text, redacted, bounded (docs/call-log.md).

`recorded(value, max_bytes=, fields=)` is the one way in: the pipeline records every call's arguments and its
result (or its error, as the client got it) through it, before anything reaches the database.

Redaction, always, before the value is measured or cut:
- credentials: the value of an object key named like one (`is_credential_name`: the words password, passwd,
  passphrase, pwd, secret, token, authorization, auth, credential(s), cookie, session, signature, and api key
  or private key, in any case and separator: `access_token`, `clientSecret`, `X-Api-Key`), and inside every
  string the credentials this server issues (`CREDENTIAL_VALUE`: API keys `thk_…`, API tokens `tht_…`, OAuth
  tokens `tho_…` / `thr_…`);
- the owner's names: the value of an object key listed in `fields` (the table's redact_fields; in a call's
  arguments, the tool's redact_arguments too), at any depth;
  and in a string that names such a field (a query like `[?ssn=='123-45-6789']`), every quoted literal
  ('…' and `…`: what such a query compares the field with);
- repeats: a string of 3 characters or more (or a number of 4 digits or more) that a redacted key held is
  also replaced wherever else it appears in the kept value (a query that names it, an error that quotes it),
  and in `scrub()`ed text.
Each redacted value reads "[redacted]", whatever its type.

Bounds: the compact JSON text is at most `max_bytes` UTF-8 bytes. A longer value is cut inside its structure,
so the text stays JSON: a list keeps its first items and ends with "[cut: N more items]", an object its first
keys and a "[cut]" key saying how many more, a string its start and "…[cut]"; nesting beyond
CALL_LOG_MAX_KEPT_DEPTH is "[cut: nested deeper]". `Recorded.truncated` says the value was cut.

Cost: the common call (nothing to redact, within the bound) is one bounded encode of the arguments and a
substring test or two over the texts; a value too long is cut, and its cut's text tested the same way; the
redaction walk runs only when a redaction may apply.
"""

import json
import re
from dataclasses import dataclass
from typing import Any

from jmespath.exceptions import JMESPathError
from jmespath.parser import Parser

from tools_app.kernel.limits import (
    CALL_ARGUMENTS_BYTES,
    CALL_LOG_MAX_KEPT_DEPTH,
    CALL_RESULT_BYTES,
    REDACTED_MIN_REPEATED_CHARS,
)
from tools_app.paging import encode_within, number_run, utf8_size

__all__ = [
    "CREDENTIAL_VALUE",
    "REDACTED",
    "query_exposes",
    "withheld",
    "Recorded",
    "arguments_max_bytes",
    "is_credential_name",
    "recorded",
    "recorded_success",
    "result_max_bytes",
    "scrub",
]

REDACTED = "[redacted]"
CUT = "…[cut]"
# Credentials issued by this server, inside any string (tools_app.models.api_key, api_token; tools_app.oauth).
CREDENTIAL_VALUE = re.compile(r"th[ktor]_[A-Za-z0-9_-]{8,}")
# A key holds a credential when one of its words is one of these, or two adjacent words are one of the pairs.
CREDENTIAL_WORDS = frozenset(
    {
        "password",
        "passwd",
        "passphrase",
        "pwd",
        "secret",
        "token",
        "authorization",
        "auth",
        "credential",
        "credentials",
        "cookie",
        "session",
        "sessionid",
        "signature",
        "apikey",
        "privatekey",
        "secretkey",
        "accesskey",
    }
)
CREDENTIAL_PAIRS = frozenset({("api", "key"), ("private", "key"), ("secret", "key"), ("access", "key")})
# What every credential key holds (lowercased), tested on the JSON text before any walk: none of them, and no
# issued credential (CREDENTIAL_VALUE), means nothing to redact. Substring tests: a case-insensitive regular
# expression of the same words costs ten times more on every call.
CREDENTIAL_HINTS = ("pass", "pwd", "secret", "token", "auth", "credential", "cookie", "session", "signature")
KEY_HINTS = ("api", "private", "access")  # with "key"
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def _maybe_credential(text: str) -> bool:
    """Whether `text` may hold a credential key or value (a superset of what _redact redacts)."""
    if CREDENTIAL_VALUE.search(text):
        return True
    lowered = text.lower()
    for hint in CREDENTIAL_HINTS:
        if hint in lowered:
            return True
    return "key" in lowered and any(hint in lowered for hint in KEY_HINTS)


def is_credential_name(name: str) -> bool:
    """Whether an object key names a credential (the module docstring's words, in any case or separator)."""
    words = [word.lower() for word in _WORDS.findall(name)]
    if any(word in CREDENTIAL_WORDS for word in words):
        return True
    return any(pair in CREDENTIAL_PAIRS for pair in zip(words, words[1:], strict=False))


@dataclass(frozen=True, slots=True)
class Recorded:
    """A value as the call log keeps it: its compact JSON `text`, whether it was `truncated`, and the strings
    that were redacted in it (`secrets`: for scrub() of free text recorded with it)."""

    text: str
    truncated: bool
    secrets: tuple[str, ...] = ()

    @property
    def size(self) -> int:
        return utf8_size(self.text)


def recorded(value: Any, *, max_bytes: int, fields: frozenset[str] = frozenset(), text: str | None = None,
             secrets: tuple[str, ...] = (), small: bool = False) -> Recorded:  # fmt: skip
    """`value` redacted and bounded (the module docstring). `text`, when given, is its compact JSON already made
    (the result the client got); `secrets` are strings redacted elsewhere in the same call, replaced here too.

    Work is bounded by `max_bytes`, not by the value: a longer value is cut before it is walked. `small`: the
    value is known to be small (a call's arguments, bounded by the request's size): encoded at once."""
    if text is None:
        text = _small(value, max_bytes) if small else _encoded(value, max_bytes)
    elif utf8_size(text) > max_bytes:
        text = None
    if text is not None and _clean(text, fields, secrets) and _storable(text):
        return Recorded(text, False)
    truncated = text is None
    if truncated:
        value, _size_estimate = _cut(value, max_bytes, 0)
        text = _dumps(value)
        if utf8_size(text) <= max_bytes and _clean(text, fields, secrets):
            return Recorded(text, True)  # what the steps below return for a cut with nothing to redact
    found: list[str] = []
    value = _redact(value, fields, found, 0)
    known = tuple(sorted({*found, *secrets}, key=len, reverse=True))
    if known:
        value = _replace(value, known, 0)
    text = _dumps(value)
    room = max_bytes
    for _ in range(4):  # "[redacted]" may be longer than what it replaced, and a cut's size is an estimate
        if utf8_size(text) <= max_bytes:
            return Recorded(text, truncated, known)
        room = room * 3 // 4
        value, _size_estimate = _cut(value, room, 0)
        text = _dumps(value)
        truncated = True
    return Recorded(text if utf8_size(text) <= max_bytes else _dumps(CUT), True, known)


def recorded_success(
    arguments: Any,
    value: Any,
    *,
    fields: frozenset[str] = frozenset(),
    sent_fields: frozenset[str] | None = None,
    text: str | None = None,
) -> tuple[Recorded, Recorded]:
    """A successful call's arguments and result as the call log keeps them, each as `recorded` makes it: the
    result first (`text`, when given, is the one the client got, usually made already), then the arguments with
    what the result redacted, and the result again only when the arguments redacted more. `fields` are redacted
    in both; `sent_fields`, in the arguments: `fields` and the tool's argument names (default: `fields`).

    The common call (no names to redact, its result's text at hand, nothing credential-like in either text, both
    within their bounds) is one encode of the arguments and one look at both texts: what the steps below would
    return for it, without running them."""
    result_bytes, arguments_bytes = result_max_bytes(), arguments_max_bytes()
    if sent_fields is None:
        sent_fields = fields
    if not sent_fields and text is not None:  # `sent_fields` holds `fields`: one test for both
        try:
            sent_text = _compact(arguments)
        except (TypeError, ValueError, RecursionError):
            pass  # not JSON as it is: the steps below cut and walk it
        else:
            # Both texts looked at once, joined: each test over the join holds when it holds for either text (a
            # false alarm only takes the steps below). ASCII, the usual case, is storable and its length its size.
            both = sent_text + text
            if both.isascii():
                fits = len(sent_text) <= arguments_bytes and len(text) <= result_bytes
            else:
                fits = utf8_size(sent_text) <= arguments_bytes and utf8_size(text) <= result_bytes and _storable(both)
            if fits and not _maybe_credential(both):
                return Recorded(sent_text, False), Recorded(text, False)
    result = recorded(value, max_bytes=result_bytes, fields=fields, text=text)
    sent = recorded(arguments, max_bytes=arguments_bytes, fields=sent_fields, secrets=result.secrets, small=True)
    if sent.secrets and set(sent.secrets) - set(result.secrets):
        result = recorded(value, max_bytes=result_bytes, fields=fields, secrets=sent.secrets)
    return sent, result


def query_exposes(query: Any, fields: frozenset[str]) -> bool:
    """Whether a JMESPath expression may show a redacted field's values without their key, where redaction by
    key cannot see them: it reads such a field into its result (`[].ssn`, `[].{s: ssn}`, `map(&ssn, @)`), or
    takes an object's values whatever their keys (`[0].*`, `values(@)`). Reading one only to filter or sort
    (`[?ssn=='…']`, `sort_by(@, &ssn)`) keeps the records, under their own keys. Unparsable: True."""
    if not fields:
        return False
    try:
        tree = _jmespath_parser.parse(query).parsed if isinstance(query, str) else None
    except (JMESPathError, RecursionError):
        return True
    return tree is None or _exposes(tree, fields)


def _exposes(node: Any, fields: frozenset[str]) -> bool:
    kind = node.get("type")
    children = node.get("children", [])
    if kind == "field":
        return node.get("value") in fields
    if kind == "value_projection" or (kind == "function_expression" and node.get("value") == "values"):
        return True
    if kind == "filter_projection":
        children = children[:2]  # its condition selects records, it is not in the result
    elif kind == "function_expression" and node.get("value") != "map":
        # An expression reference orders or picks records (sort_by, max_by, min_by); map's is the result.
        children = [child for child in children if child.get("type") != "expref"]
    return any(_exposes(child, fields) for child in children if isinstance(child, dict))


def withheld(value: Any) -> Recorded:
    """What is kept of a result that may hold a redacted value under another name: its shape only."""
    if isinstance(value, list):
        shape = f"a list of {len(value)} items"
    elif isinstance(value, dict):
        shape = f"an object of {len(value)} keys"
    else:
        shape = "a " + {str: "string", bool: "boolean", int: "number", float: "number"}.get(type(value), "null")
    return Recorded(_dumps(f"[withheld: {shape}; the table has redact_fields and a query can rename them]"), False)


# TOOLHUB_CALL_ARGUMENTS_BYTES: the most a call's recorded arguments take (default 4 KiB); and
# TOOLHUB_CALL_RESULT_BYTES: the most a call's recorded result excerpt takes (default 4 KiB). The limits' own
# readers, not functions around them: every call's record reads both.
arguments_max_bytes = CALL_ARGUMENTS_BYTES.get
result_max_bytes = CALL_RESULT_BYTES.get


def _small(value: Any, limit: int) -> str | None:
    """`value`'s compact JSON by the C encoder when it is at most `limit` bytes, else None (as _encoded)."""
    try:
        text = _compact(value)
    except (TypeError, ValueError, RecursionError):
        return None
    return text if len(text) <= limit and utf8_size(text) <= limit else None


_compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _encoded(value: Any, limit: int) -> str | None:
    """`value`'s compact JSON when it is at most `limit` bytes, else None; None too for what JSON cannot encode
    here (nesting beyond the interpreter's stack, a value that is no JSON: cut and walked instead)."""
    try:
        return encode_within(value, limit)
    except (TypeError, ValueError, RecursionError):
        return None


def scrub(text: str, secrets: tuple[str, ...]) -> str:
    """Free text (an error message) with the call's redacted strings and credentials replaced by "[redacted]"."""
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    return CREDENTIAL_VALUE.sub(REDACTED, text)


def _clean(text: str, fields: frozenset[str], secrets: tuple[str, ...]) -> bool:
    """Whether the JSON `text` certainly needs no redaction: no credential-like word, no redacted field as a key,
    no secret of the call."""
    if _maybe_credential(text):
        return False
    if secrets and any(secret in text for secret in secrets):
        return False
    return not fields or not any(name in text for name in fields)


def _storable(text: str) -> bool:
    """Whether `text` can be stored as it is: a lone surrogate (valid in a Python string, refused by both
    databases' encoders) must be escaped first, which the walk's encoder does."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _dumps(value: Any) -> str:
    # Non-ASCII kept (the size is the client's), lone surrogates escaped so that the text can be stored; what
    # JSON has no form for (only a tool's own bug puts it in a result) as its repr, never an error: recording
    # must not fail the call.
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=repr)
    return text if _storable(text) else json.dumps(value, separators=(",", ":"), default=repr)


def _redact(value: Any, fields: frozenset[str], found: list[str], depth: int) -> Any:
    """`value` with credentials and `fields` redacted; the redacted strings (and long numbers) go to `found`."""
    if depth > CALL_LOG_MAX_KEPT_DEPTH:
        return "[cut: nested deeper]"
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            key = str(key)
            if key in fields or is_credential_name(key):
                _collect(item, found, depth)
                out[key] = REDACTED
            else:
                out[key] = _redact(item, fields, found, depth + 1)
        return out
    if isinstance(value, list | tuple):
        return [_redact(item, fields, found, depth + 1) for item in value]
    if isinstance(value, str):
        if "_" in value:
            value = CREDENTIAL_VALUE.sub(REDACTED, value)
        if fields and any(_names(value, name) for name in fields):
            value = _LITERAL.sub(lambda match: _redacted_literal(match, found), value)
    return value


_jmespath_parser = Parser()

# JMESPath's raw string literals ('…') and JSON literals (`…`), with their escapes.
_LITERAL = re.compile(r"'(?:[^'\\]|\\.)*'|`(?:[^`\\]|\\.)*`")


def _names(text: str, name: str) -> bool:
    """Whether `text` names the field `name` as an identifier (not as a part of a longer word)."""
    start = text.find(name)
    while start != -1:
        end = start + len(name)
        before = text[start - 1] if start else ""
        after = text[end] if end < len(text) else ""
        if not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_"):
            return True
        start = text.find(name, start + 1)
    return False


def _redacted_literal(match: re.Match, found: list[str]) -> str:
    """A literal of a string that names a redacted field, redacted; what it held goes to `found` (a result that
    shows it under another name is scrubbed of it too)."""
    literal = match.group(0)
    inner = literal[1:-1].strip().strip('"')
    if len(inner) >= REDACTED_MIN_REPEATED_CHARS:
        found.append(inner)
    return "'[redacted]'" if literal.startswith("'") else '`"[redacted]"`'


def _collect(value: Any, found: list[str], depth: int) -> None:
    """The strings (and numbers of 4 digits or more) inside a redacted value, to replace them elsewhere too."""
    if depth > CALL_LOG_MAX_KEPT_DEPTH:
        return
    if isinstance(value, str):
        if len(value) >= REDACTED_MIN_REPEATED_CHARS and value != REDACTED:
            found.append(value)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        number = json.dumps(value)
        if len(number) >= 4:
            found.append(number)
    elif isinstance(value, dict):
        for item in value.values():
            _collect(item, found, depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            _collect(item, found, depth + 1)


def _replace(value: Any, secrets: tuple[str, ...], depth: int) -> Any:
    """`value` with every secret replaced inside its strings and keys; a number equal to one becomes
    "[redacted]"."""
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, dict):
        return {_replace(key, secrets, depth): _replace(item, secrets, depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        return [_replace(item, secrets, depth + 1) for item in value]
    if isinstance(value, int | float) and not isinstance(value, bool) and json.dumps(value) in secrets:
        return REDACTED
    return value


def _size(value: Any) -> int:
    return utf8_size(_dumps(value))


MARK_ROOM = 40  # what a "[cut: …]" entry takes, kept free while a container is filled


def _cut(value: Any, room: int, depth: int) -> tuple[Any, int]:
    """(a shortened `value`, about its JSON size): at most about `room` bytes, cut as the module docstring says.
    Each kept part is encoded once; the first part that does not fit is cut in turn and ends its container."""
    if isinstance(value, str):
        if len(value) <= room:  # more characters than room are more bytes than room
            size = _size(value)
            if size <= room:
                return value, size
        text = value[: max(0, room - _size(CUT) - 2)]
        while text and _size(text + CUT) > room:
            text = text[: len(text) * 3 // 4]
        return text + CUT, _size(text + CUT)
    if isinstance(value, dict | list) and depth >= CALL_LOG_MAX_KEPT_DEPTH:
        return "[cut: nested deeper]", 22
    if isinstance(value, dict):
        return _cut_container(list(value.items()), room, depth, is_object=True)
    if isinstance(value, list | tuple):
        numbers = _cut_numbers(value, room)
        if numbers is not None:
            return numbers
        return _cut_container(list(enumerate(value)), room, depth, is_object=False)
    size = _size(value) if isinstance(value, bool | int | float) or value is None else room + 1
    return (value, size) if size <= room else (CUT, _size(CUT))


def _cut_container(entries: list[tuple[Any, Any]], room: int, depth: int, *, is_object: bool) -> tuple[Any, int]:
    kept: list[tuple[Any, Any]] = []
    used = 2
    for key, item in entries:
        key_size = _size(str(key)) + 1 if is_object else 0
        left = room - used - key_size - MARK_ROOM - 1
        if left <= 8:
            break
        text = _encoded(item, left)
        if text is not None:
            kept.append((key, item))
            used += key_size + utf8_size(text) + 1
            continue
        part, size = _cut(item, left, depth + 1)  # the first that does not fit, cut: the last one kept
        if not _only_marks(part):
            kept.append((key, part))
            used += key_size + size + 1
        break
    more = len(entries) - len(kept)
    if is_object:
        out: Any = {str(key): item for key, item in kept}
        if more:
            out["[cut]"] = f"{more} more keys"
    else:
        out = [item for _key, item in kept]
        if more:
            out.append(f"[cut: {more} more items]")
    return out, used + (MARK_ROOM if more else 0)


def _cut_numbers(values: list | tuple, room: int) -> tuple[Any, int] | None:
    """What _cut_container keeps of a list of numbers, booleans and nulls (paging.number_run: its text at once,
    without a step per item); None when the items it would look at are not all such. _cut_container keeps item i
    while the room left before it is over 8 characters and its text fits that room: with `space` the room for the
    items' text (the brackets, a mark's room and a separator aside) and s_i the offset of item i in the items' text
    joined by commas, while s_i < space - 8 and s_i + its length <= space."""
    space = room - 3 - MARK_ROOM
    text, count, full = number_run(values, 0, space)
    if count < len(values) and not full:
        return None  # an item of another type: cut item by item
    if count and space > 8:
        # Item i > 0 starts after the comma at s_i - 1: kept when that comma is before space - 9.
        starts = text.count(",", 0, space - 9)
        if starts + 1 < count:
            count = starts + 1
            text = text[: text.index(",", max(space - 9, 0))]
    else:
        count, text = 0, ""
    used = 2 + (len(text) + 1 if count else 0)
    if count == len(values):
        return list(values), used
    return [*values[:count], f"[cut: {len(values) - count} more items]"], used + MARK_ROOM


def _only_marks(value: Any) -> bool:
    """Whether a cut part kept nothing but its "[cut]" mark (then it is left out and counted as more)."""
    if isinstance(value, dict):
        return list(value) == ["[cut]"]
    if isinstance(value, list):
        return len(value) == 1 and isinstance(value[0], str) and value[0].startswith("[cut")
    return value == CUT
