"""Records as stored in the engines: the JSON text written for each engine, and how a value read back is made
identical to the one written (docs/tables-at-scale.md, "Storage").

- SQLite keeps the JSON text as written: numbers keep their text (1 vs 1.0, big integers), objects their key
  order. Keys are written unescaped (ensure_ascii=False) because SQLite's JSON paths match a key's raw text.
- PostgreSQL JSONB keeps numbers as `numeric` and reorders object keys (shorter first, then bytewise). So
  floats are written in positional notation with a fraction (1e+16 -> 10000000000000000.0, which reads back as
  a float; an exponent would read back as an int), and every record whose objects are not already in JSONB's
  order gets a *layout*: the key order of its objects, stored once per distinct layout and applied on reading.
  JSONB has no negative zero: -0.0 reads back as 0.0 (documented limit).

Nothing here imports Django: the writer and the reader (and the tests) share these functions.
"""

import functools
import json
import re
from decimal import Decimal
from typing import Any

__all__ = [
    "Layout",
    "LayoutKey",
    "jsonb_key_order",
    "layout_at",
    "layout_from_key",
    "layout_key",
    "layout_of",
    "record_text",
    "restore",
]

# A layout: None (nothing to reorder), {"k": [keys in written order], "c": [child layouts]} for an object, or
# {"e": [element layouts]} for an array. Children are None where nothing below needs reordering.
Layout = dict[str, Any] | None

# A JSON string, or a number written with an exponent (the only numbers json.dumps writes that JSONB would
# turn into integers: Python writes floats from 1e16 up and below 1e-4 this way).
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?[eE][+-]?\d+')
_EXPONENT = re.compile(r"\d[eE][+-]?\d")
# json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False), its encoder made once: dumps
# with arguments builds a new one per call, a cost an import pays per record.
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
_CONTAINERS = (dict, list)


def record_text(value: Any, *, dialect: str, compact: str | None = None) -> str:
    """The JSON text a record (or a literal compared with records) is stored as in `dialect`. `compact`: the
    value's compact text when the caller has it (validators.record_texts'), sparing a second encoding."""
    text = _ENCODE(value) if compact is None else compact
    if dialect == "postgresql" and _EXPONENT.search(text):
        text = _TOKENS.sub(_positional, text)
    return text


def _positional(match: "re.Match[str]") -> str:
    token = match.group(0)
    if token.startswith('"'):
        return token
    number = float(token)
    if abs(number) >= 2**53:
        # An integral float: its exact value, so that comparisons with integers in numeric are exact too.
        return f"{int(number)}.0"
    text = format(Decimal(repr(number)), "f")
    return text if "." in text else f"{text}.0"


def jsonb_key_order(keys: list[str]) -> list[str]:
    """The order JSONB keeps an object's keys in: shorter (in UTF-8 bytes) first, then bytewise."""
    return sorted(keys, key=lambda key: (len(key.encode()), key.encode()))


@functools.lru_cache(maxsize=4096)
def _in_jsonb_order(keys: tuple[str, ...]) -> bool:
    """Whether an object's keys are already in JSONB's order (records of one shape ask it again and again)."""
    listed = list(keys)
    return listed == jsonb_key_order(listed)


# A layout as nested tuples, hashable: ("k", keys, children or None) for an object, ("e", elements) for an array,
# None where nothing needs reordering. A writer of many records finds a layout's id by it: most records share a few
# layouts, and the key costs no JSON text per record.
LayoutKey = tuple | None


def layout_key(value: Any) -> LayoutKey:
    """`value`'s layout (layout_of's) as a LayoutKey."""
    if isinstance(value, dict):
        children = [layout_key(child) if isinstance(child, _CONTAINERS) else None for child in value.values()]
        nested = any(children)
        keys = tuple(value)
        if not nested and _in_jsonb_order(keys):
            return None
        return ("k", keys, tuple(children) if nested else None)
    if isinstance(value, list):
        elements = [layout_key(element) if isinstance(element, _CONTAINERS) else None for element in value]
        return ("e", tuple(elements)) if any(elements) else None
    return None


def layout_from_key(key: LayoutKey) -> Layout:
    """The layout a LayoutKey stands for."""
    if key is None:
        return None
    if key[0] == "k":
        layout: dict[str, Any] = {"k": list(key[1])}
        if key[2] is not None:
            layout["c"] = [layout_from_key(child) for child in key[2]]
        return layout
    return {"e": [layout_from_key(element) for element in key[1]]}


def layout_of(value: Any) -> Layout:
    """What restore() needs to give `value` its key order back after JSONB reordered it; None if nothing."""
    return layout_from_key(layout_key(value))


def restore(value: Any, layout: Layout) -> Any:
    """`value` (as read from JSONB) with the key order `layout` recorded."""
    if layout is None:
        return value
    if "k" in layout and isinstance(value, dict):
        children = layout.get("c")
        if not children:  # no member needs its order back: one pass over the keys (every record of flat fields)
            return {key: value[key] for key in layout["k"]}
        return {
            key: value[key] if child is None else restore(value[key], child)
            for key, child in zip(layout["k"], children, strict=True)
        }
    if "e" in layout and isinstance(value, list):
        return [
            element if child is None else restore(element, child)
            for element, child in zip(value, layout["e"], strict=True)
        ]
    return value


def layout_at(layout: Layout, path: tuple[tuple[str, Any], ...]) -> Layout:
    """The layout of the value at `path` (("field", name) / ("index", i) steps) inside a value of `layout`."""
    for kind, step in path:
        if layout is None:
            return None
        if kind == "field":
            keys = layout.get("k")
            if keys is None or step not in keys or "c" not in layout:
                return None
            layout = layout["c"][keys.index(step)]
        else:
            elements = layout.get("e")
            if elements is None or not -len(elements) <= step < len(elements):
                return None
            layout = elements[step]
    return layout
