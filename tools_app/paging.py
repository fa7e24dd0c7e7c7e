"""Result budgets and paging (docs/paging.md): what the call pipeline's classify step uses.

A read's result is measured while it is encoded, never after: `encode_within` stops as soon as the compact
JSON passes the budget, so a 67 MB result costs one budget's worth of encoding, not 67 MB. A list over the
budget is cut into pages, `{"items": [...], "total": N, "next_cursor": "<opaque>" | null}`, each within the
budget; the cursor is signed (django.core.signing) and names only the offset of the next page, the table
version and a digest of the tool and its arguments, so it cannot be forged into another tool's data, and
a write to the table expires it (CURSOR_EXPIRED).

Only the pipeline (tools_app.execution.pipeline) calls this module; nothing here reads the database or knows a surface.
"""

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from django.core import signing

from tools_app.kernel.errors import ErrorCode, ToolError
from tools_app.kernel.limits import MAX_CURSOR_LENGTH
from tools_app.validators import on_fresh_stack

__all__ = [
    "CURSOR",
    "Cut",
    "PAGED_OUTPUT_SCHEMA",
    "Page",
    "PageWindow",
    "cursor_argument_schema",
    "encode_within",
    "encoded_size",
    "list_within",
    "number_run",
    "page_of",
    "paged_input_schema",
    "paged_output_schema",
    "read_cursor",
    "sign_cursor",
    "tool_binding",
    "utf8_size",
]

CURSOR = "cursor"  # the argument a paged tool accepts on top of its own schema
MEASURE_FACTOR = 4  # a refused result is measured up to this many budgets, then reported as "more than"
_SALT = "toolhub.paging.cursor"
_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


#
# Measuring while encoding
#


def encode_within(value: Any, limit: int) -> str | None:
    """`value` as compact JSON (UTF-8 kept, the same text as json.dumps) when it is at most `limit` bytes in
    UTF-8; None as soon as the encoding passes `limit` (what is left is never encoded).

    A container whose text surely fits the room left, as counted without escapes (`_room_after`: a record, a
    page of records, a whole answer within its budget) is encoded at once by the C encoder; one that may not is
    walked in Python, its members taken the same way, and a string longer than the room left is refused by its
    length (bench/result_budget.py), never more than a few budgets of work."""
    encoder = _Bounded(limit)
    try:
        encoder.add_value(value)
    except _Over:
        return None
    except RecursionError:
        # Nested deeper than this walk's two frames per level allow: only a document stored before
        # TOOLHUB_MAX_TABLE_DEPTH existed is. Its text comes from the C encoder on a fresh stack, at most the
        # table's size of work (tools_app.validators.on_fresh_stack).
        text = on_fresh_stack(_dumps, value)
        return text if utf8_size(text) <= limit else None
    text = "".join(encoder.parts)
    return text if utf8_size(text) <= limit else None


def list_within(items: list, limit: int) -> tuple[str | None, tuple[str, int] | None]:
    """(text, start): a list's compact JSON as encode_within gives it (None when over `limit`), and, when it is
    over the budget at a number that does not fit, the run of numbers from its first item that fits `limit`
    ("[" and "]" aside) as (text, count), which page_of cuts its first page from instead of encoding those
    numbers again (the page's room is smaller). A list of numbers over its budget is encoded once, not twice."""
    run, count, full = number_run(items, 0, limit - 2)
    if count == len(items) and limit >= 2:  # numbers only (or none): what encode_within makes of them
        return "[" + run + "]", None
    if full:
        return None, (run, count)
    return encode_within(items, limit), None


class _Over(Exception):
    """The encoding passed its budget."""


_dumps = _encoder.encode  # the C one-shot encoder: the same text as json.dumps(..., separators=(",", ":"))


class _Bounded:
    """Compact JSON in parts, counting characters (each at least one UTF-8 byte) against a budget."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.parts: list[str] = []

    def add(self, text: str) -> None:
        self.used += len(text)
        if self.used > self.limit:
            raise _Over
        self.parts.append(text)

    def add_value(self, value: Any) -> None:
        room = self.limit - self.used
        if isinstance(value, str):
            if len(value) + 2 > room:  # its quotes and characters, before any escape
                raise _Over
            self.add(_dumps(value))
        elif isinstance(value, dict):
            self._add_object(value, room)
        elif isinstance(value, list | tuple):
            self._add_array(value, room)
        else:
            self.add(_dumps(value))

    def _add_object(self, value: dict, room: int) -> None:
        if len(value) * 4 > room + 1:  # "k":v, at least 4 characters each
            raise _Over
        if _room_after(value, room) >= 0:  # surely fits without escapes: the C encoder takes it at once
            self.add(_dumps(value))
            return
        if any(type(key) is not str for key in value):  # a key json.dumps converts (true, 1, null)
            self._add_pieces(value)
            return
        self.add("{")
        for index, (key, item) in enumerate(value.items()):
            self.add(("," if index else "") + _dumps(key) + ":")
            self.add_value(item)
        self.add("}")

    def _add_array(self, value: list | tuple, room: int) -> None:
        if len(value) * 2 > room + 1:  # v, at least 2 characters each
            raise _Over
        run, count, full = number_run(value, 0, room - 2)
        if full:  # numbers, the next of which does not fit: nor does the list
            raise _Over
        if count == len(value):  # numbers only (or none): their text is the list's
            self.add("[" + run + "]")
            return
        if _room_after(value, room) >= 0:
            self.add(_dumps(value))
            return
        self.add("[")
        index = 0
        while index < len(value):
            separator = "," if index else ""
            run, count = _scalar_run(value, index, self.limit - self.used - len(separator))
            if count:
                self.add(separator + run)
                index += count
                continue
            self.add(separator)
            self.add_value(value[index])
            index += 1
        self.add("]")

    def _add_pieces(self, value: Any) -> None:
        for chunk in _encoder.iterencode(value):
            self.add(chunk)


_NUMBERS = (int, float, bool)
# The types whose JSON text holds no comma, no escape and no character beyond ASCII (number_run).
_NUMBER_KINDS = frozenset({int, float, bool, type(None)})


# The items of number_run's first piece, from which it learns how long the numbers' text is.
NUMBER_PROBE = 256


def number_run(values: list | tuple, start: int, room: int) -> tuple[str, int, bool]:
    """(text, count, full): the longest run of `values` from `start` of numbers, booleans and nulls whose text,
    items joined by commas, fits `room` characters (each its UTF-8 byte); `full` when it ended at a number that
    does not fit (not at the end of `values` or at an item of another type). The same text as item by item,
    without a Python step per item: a piece of the run is encoded at once by the C encoder and cut at its last
    comma that fits (such a text holds no other comma). The first piece is of at most NUMBER_PROBE items, each
    next one of as many items as the room left holds at the characters per item encoded so far (one more), and
    none of more than a quarter of the room left in items, so what is encoded is about the room when the numbers
    are alike and at most 6 rooms (every number of the longest text, 24 characters); a piece that holds an item
    of another type ends the run at the piece before it."""
    texts: list[str] = []
    used, index, end = 0, start, len(values)
    while index < end and type(values[index]) in _NUMBER_KINDS:  # a list of records: not sliced at all
        separator = 1 if texts else 0
        left = room - used - separator
        size = max(left, 0) // 4 + 1
        if index == start:
            size = min(size, NUMBER_PROBE)
        else:  # the characters per item so far, each with its comma
            size = min(size, max(left, 0) * (index - start) // (used + 1) + 1)
        piece = values[index : index + size]
        if not _NUMBER_KINDS.issuperset(map(type, piece)):
            break
        text = _dumps(piece)[1:-1]
        if len(text) <= left:
            texts.append(text)
            used += separator + len(text)
            index += len(piece)
            continue
        cut = text.rfind(",", 0, left + 1) if left > 0 else -1
        if cut > 0:
            texts.append(text[:cut])
            index += text.count(",", 0, cut) + 1
        return ",".join(texts), index - start, True
    return ",".join(texts), index - start, False


def _cut_run(text: str, count: int, room: int) -> tuple[str, int, bool]:
    """number_run's answer for `room` from its answer (`text` of `count` numbers, full) for a room at least as
    large: the longest run of those numbers that fits, cut at its last comma that fits. Always full: the number
    after the run did not fit the larger room."""
    if len(text) <= room:
        return text, count, True
    cut = text.rfind(",", 0, room + 1)
    if cut <= 0:
        return "", 0, True
    return text[:cut], text.count(",", 0, cut) + 1, True


# The longest run of a list's items encoded at once (_scalar_run).
SCALAR_RUN = 256


def _scalar_run(values: Any, start: int, room: int) -> tuple[str, int]:
    """The text (without brackets) of the longest run of `values` from `start`, of at most SCALAR_RUN items
    halved until it fits, that are scalars surely fitting `room` characters (_flat): encoded at once by the C
    encoder, the same text as item by item. ("", 0) when not even two items are such a run: at once when either of
    the first two is a container (a list of records is not sliced and tested at every size, item after item)."""
    if len(values) - start < 2 or not (_scalar(values[start]) and _scalar(values[start + 1])):
        return "", 0
    size = SCALAR_RUN
    while size > 1:
        run = values[start : start + size]
        if len(run) > 1 and _flat(run, room):
            return _dumps(run)[1:-1], len(run)
        size //= 2
    return "", 0


def _scalar(value: Any) -> bool:
    """A value _flat counts as a scalar (what the C encoder takes at once without walking it)."""
    kind = type(value)
    return kind is str or kind in _NUMBERS or value is None


def _flat(values: Any, room: int) -> bool:
    """Whether `values` are scalars whose text surely fits `room` characters without escapes (their string
    lengths, 25 characters per number): the C encoder then takes them at once, at most a few budgets of work."""
    total = 0
    for value in values:
        kind = type(value)
        if kind is str:
            total += len(value) + 3
        elif kind in _NUMBERS or value is None:
            total += 25
        else:
            return False
        if total > room:
            return False
    return True


def _room_after(value: Any, room: int) -> int:
    """`room` characters less the text of `value` as counted without encoding it, at any depth: a string's length
    and quotes (escapes not counted), a number as NUMBER_CHARACTERS, true, false and null as 5, each key's quotes
    and separators; negative as soon as that passes `room` (the count stops there: at most a budget of work).
    When it is not negative the C encoder takes the value whole, and its text is measured as every part is: the
    count may be short (an escape is up to 6 characters for one, a number up to 24), so what that encodes is at
    most 6 budgets of work. A type the encoder converts (a key that is no string, a subclass) counts as over: the
    walk takes it."""
    kind = type(value)
    if kind is str:
        return room - len(value) - 2
    if kind is int or kind is float:
        return room - NUMBER_CHARACTERS
    if kind is bool or value is None:
        return room - 5
    room -= 2
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                return -1
            room = _room_after(item, room - len(key) - 4)
            if room < 0:
                return room
        return room
    if kind is list or kind is tuple:
        for item in value:
            room = _room_after(item, room - 1)
            if room < 0:
                return room
        return room
    return -1


# What _room_after counts a number as: a typical id, amount or count; the longest (a float's repr) is 24.
NUMBER_CHARACTERS = 8


def utf8_size(text: str) -> int:
    """The UTF-8 size of `text`; a lone surrogate (stored before input refused them, tools_app.validators)
    counts as the 3 bytes it would take, never an error. ASCII text (the common case; the test costs
    nothing, CPython keeps the flag) is not encoded: one character is one byte."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def encoded_size(value: Any, cap: int) -> tuple[int, bool]:
    """(bytes, complete): the size of `value`'s compact JSON, counted up to `cap` bytes without keeping the
    text; `complete` is False when counting stopped at the cap (the size is then a lower bound)."""
    size = 0
    try:
        for chunk in _encoder.iterencode(value):
            size += utf8_size(chunk)
            if size > cap:
                return size, False
    except RecursionError:  # a legacy document nested too deep for the Python encoder: see encode_within
        return utf8_size(on_fresh_stack(_dumps, value)), True
    return size, True


#
# Cursors
#


def tool_binding(*, tool_id: int | None, tool_changed: str, arguments: Any) -> str:
    """What a cursor is bound to besides the table version: the tool (and its last edit) and the arguments
    without `cursor`, as a digest (the cursor stays short whatever the arguments)."""
    canonical = json.dumps([tool_id, tool_changed, arguments], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def sign_cursor(*, binding: str, version: int, offset: int) -> str:
    """An opaque, signed cursor for the page starting at `offset` of this tool call on table `version`."""
    return signing.dumps({"b": binding, "v": version, "o": offset}, salt=_SALT)


def read_cursor(cursor: Any, *, binding: str, version: int | None) -> int:
    """The offset a cursor names, after checking it was issued here, for this tool and arguments, on this
    table version.

    Raises ToolError INVALID_ARGUMENTS for anything that is not a cursor this server signed (a garbled or
    altered one), CURSOR_EXPIRED for a genuine cursor of another tool or other arguments, or of an older
    version of the table.
    """
    if not isinstance(cursor, str) or not cursor or len(cursor) > MAX_CURSOR_LENGTH:
        raise _bad_cursor("it must be the non-empty string a previous page gave as next_cursor")
    try:
        payload = signing.loads(cursor, salt=_SALT)
        offset, issued_version, issued_binding = payload["o"], payload["v"], payload["b"]
    except (signing.BadSignature, KeyError, TypeError, ValueError):
        raise _bad_cursor("it is not a cursor this server issued (garbled or altered)") from None
    if issued_binding != binding:
        raise ToolError(
            ErrorCode.CURSOR_EXPIRED,
            "This cursor was issued for another tool or other arguments: call the tool with exactly the"
            " arguments of the call that returned it, plus the cursor (or call again without a cursor).",
        )
    if issued_version != version:
        raise ToolError(
            ErrorCode.CURSOR_EXPIRED,
            f"The table changed since this cursor was issued (version {issued_version}, now {version}):"
            " call again without a cursor to start over on the current data.",
            {"cursor_version": issued_version, "table_version": version},
        )
    return int(offset)


def _bad_cursor(why: str) -> ToolError:
    return ToolError(
        ErrorCode.INVALID_ARGUMENTS,
        f"Invalid arguments: argument 'cursor': {why}.",
        {"argument": CURSOR},
    )


#
# Pages
#


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a list result: its value (the paged shape), that value's JSON text, and where it is."""

    value: dict[str, Any]
    text: str
    offset: int  # index of the first item shown
    shown: int
    total: int
    next_cursor: str | None
    estimated_bytes: int  # the whole list's JSON size, estimated from this page (the result cache's weight)

    @property
    def note(self) -> str:
        """What the model reads above the page: which items are shown and how to get the rest."""
        if self.shown == 0:
            return f"No items here: the list has {self.total}."
        head = f"Showing items {self.offset + 1}-{self.offset + self.shown} of {self.total}"
        if self.next_cursor is None:
            return f"{head}: the last page."
        return (
            f"{head} (the result is paged to fit the result budget). To get the next items, call this tool"
            f' again with the same arguments plus "cursor": "{self.next_cursor}".'
        )


def page_of(
    items: list, *, offset: int, limit: int, cursor_at: Callable[[int], str], start: tuple[str, int] | None = None
) -> Page | None:
    """The page of `items` starting at `offset` whose JSON fits `limit` bytes, items encoded one by one (runs of
    scalars at once: _scalar_run) until the next one does not fit; None when the item at `offset` alone does
    not fit (nothing can be shown). The same page as PageWindow.cut gives a reader that reads its items where they
    are stored (tests/test_paging.py compares the two over every cursor).

    `cursor_at(offset)` signs the cursor of the page starting there. `start`: the run of numbers from `offset` that
    ended at a number not fitting a room of at least this page's (list_within's, against the whole list's
    budget): the page's numbers are cut from its text, not encoded again.
    """
    total = len(items)
    # The envelope with the longest cursor this list can have (its offset has the most digits).
    envelope = utf8_size(_envelope("", total, cursor_at(total)))
    budget = limit - envelope
    # A list of numbers (ids, amounts) is cut at once (number_run); what follows a run of them, item by item.
    if start is not None and start[1] and budget > 0:
        run, count, full = _cut_run(*start, budget)
    else:
        run, count, full = number_run(items, offset, budget)
    texts: list[str] = [run] if count else []
    used = len(run)
    index = offset + count
    while index < total and not full:
        separator = 1 if texts else 0
        # A run of scalars that surely fits what is left: encoded at once (the same text as item by item).
        run, count = _scalar_run(items, index, budget - used - separator)
        size = utf8_size(run)
        if count and used + separator + size <= budget:  # escapes and UTF-8 bytes are not in _flat's estimate
            texts.append(run)
            used += size + separator
            index += count
            continue
        text = encode_within(items[index], budget - used - separator)
        if text is None:
            break
        texts.append(text)
        used += utf8_size(text) + separator
        index += 1
    if index == offset and index < total:
        return None
    next_cursor = cursor_at(index) if index < total else None
    text = _envelope(",".join(texts), total, next_cursor)
    value = {"items": items[offset:index], "total": total, "next_cursor": next_cursor}
    estimated = (used // (index - offset)) * total if index > offset else 0
    return Page(value, text, offset, index - offset, total, next_cursor, estimated)


@dataclass(frozen=True, slots=True)
class Cut:
    """What a windowed read answers (PageWindow.cut): the whole list with its JSON text when no cursor came and it
    fits the budget; else the page at the window's offset (`page`; None when the item there alone is over the
    budget, which no page can hold). `over`: an object result's size, at least, when it is over the budget (a
    lower bound, as `encoded_size` reports it): what RESULT_TOO_LARGE names."""

    whole: list | None = None
    text: str | None = None
    page: Page | None = None
    offset: int = 0
    over: int | None = None


@dataclass(frozen=True, slots=True)
class PageWindow:
    """A pageable call's request for its list, handed to a reader that can read items where they are stored (a
    rows table's collection) instead of building the whole list: the cursor's `offset` (None: no cursor, the whole
    list when it fits), the result budget `limit` in bytes, and `cursor_at(offset)`, the signed cursor of the page
    starting there. `cut` gives exactly what the pipeline gives for the whole list (page_of), reading only the
    items the page needs and one more."""

    offset: int | None
    limit: int
    cursor_at: Callable[[int], str]

    def cut(self, items: Iterator[Any], total: int) -> Cut:
        """The answer for a list of `total` items of which `items` yields those from the window's offset on, in
        order, consumed only as far as the page (or the whole list) and one item beyond.

        Raises ToolError CURSOR_EXPIRED when the offset is past the list (it is shorter than when the cursor was
        issued: only a change of the data does that)."""
        offset = self.offset or 0
        if offset > total:
            raise ToolError(ErrorCode.CURSOR_EXPIRED, "The result this cursor pages is shorter now.")
        whole = self.offset is None
        # The envelope with the longest cursor this list can have (its offset has the most digits).
        envelope = utf8_size(_envelope("", total, self.cursor_at(total)))
        budget = self.limit - envelope
        # Without a cursor the items are encoded against the whole list's room ("[" and "]" aside), which holds the
        # page's: a text within it is the text within any smaller room that it fits.
        room = self.limit - 2 if whole else budget
        kept: list = []
        texts: list[str] = []
        used = 0
        exhausted = True
        for item in items:
            separator = 1 if texts else 0
            text = encode_within(item, room - used - separator)
            if text is None:
                exhausted = False
                break
            kept.append(item)
            texts.append(text)
            used += utf8_size(text) + separator
        if whole and exhausted:
            return Cut(whole=kept, text=f"[{','.join(texts)}]")
        shown, used = 0, 0
        for text in texts:
            size = utf8_size(text) + (1 if shown else 0)
            if used + size > budget:
                break
            used += size
            shown += 1
        if not shown and offset < total:
            return Cut(offset=offset)
        index = offset + shown
        next_cursor = self.cursor_at(index) if index < total else None
        text = _envelope(",".join(texts[:shown]), total, next_cursor)
        value = {"items": kept[:shown], "total": total, "next_cursor": next_cursor}
        estimated = (used // shown) * total if shown else 0
        return Cut(page=Page(value, text, offset, shown, total, next_cursor, estimated), offset=offset)


def _envelope(items_text: str, total: int, next_cursor: str | None) -> str:
    cursor = "null" if next_cursor is None else json.dumps(next_cursor)
    return f'{{"items":[{items_text}],"total":{total},"next_cursor":{cursor}}}'


#
# Schemas: what tools/list, the export and the definitions say about paging
#

PAGED_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": (
        "A list result over the result budget comes in pages: pass next_cursor back as `cursor`, with the"
        " same arguments, for the next page; the last page has next_cursor null."
    ),
    "properties": {
        "items": {"type": "array", "description": "The items of this page, in the list's order."},
        "total": {"type": "integer", "minimum": 0, "description": "How many items the whole list has."},
        # anyOf, not a type array: strict function-calling hosts refuse those.
        "next_cursor": {
            "anyOf": [{"type": "string"}, {"type": "null"}],
            "description": "The cursor of the next page; null on the last.",
        },
    },
    "required": ["items", "total", "next_cursor"],
}


def cursor_argument_schema() -> dict[str, Any]:
    return {
        "type": "string",
        "description": (
            "Only to continue a paged result: the next_cursor of the previous page. Pass it with the same"
            " other arguments; it expires when the table changes."
        ),
    }


def paged_input_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A pageable tool's input schema as clients see it: its own, plus the optional `cursor` argument (the
    pipeline takes `cursor` out before validating, so the tool's own schema need not declare it)."""
    listed: dict[str, Any] = dict(schema) if schema else {"type": "object"}
    properties: dict[str, Any] = dict(listed.get("properties") or {})
    properties.setdefault(CURSOR, cursor_argument_schema())
    listed["properties"] = properties
    return listed


def paged_output_schema(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """A pageable tool's declared output schema widened to allow a page, `{"anyOf": [schema, page]}`; None when
    it declares none. A page's items follow the declared list's `items` schema when it has one (a list
    schema, or one wrapped as {"result": [...]}, SPEC §4.4)."""
    if not schema:
        return None
    paged = json.loads(json.dumps(PAGED_OUTPUT_SCHEMA))
    listed: Any = schema
    if schema.get("type") == "object" and schema.get("required") == ["result"]:
        listed = (schema.get("properties") or {}).get("result")
    if isinstance(listed, dict) and isinstance(listed.get("items"), dict):
        paged["properties"]["items"]["items"] = listed["items"]
    return {"anyOf": [schema, paged]}
