"""What a collection's records hold at their top level, kept at write time (docs/tables-at-scale.md, "Field
kinds"): for each field, the JSON kinds it has ever held, so that the compiled SQL can drop the type checks
that cannot matter (a `total > 500` needs no "is it a string?" error check when `total` never held a string).

The facts are a superset: they only grow (a delete or an update does not shrink them), so a kind listed may no
longer occur, but a kind not listed never does. Stored as JSON in `TableCollection.field_kinds`:

    {"rows": true, "open": false, "records": ["object"], "fields": {"total": ["number"], "note": ["null", "string"]}}

- `rows`: some record was ever written (with none, nothing is known to be absent).
- `records`: the kinds of the records themselves (an array may hold null or scalar records).
- `fields`: each top-level field ever seen, with its kinds: null, true, false, number, string, array, object,
  and `wide` for an integer beyond 64 bits (SQLite reads those inexactly). A record without the field, or that
  is no object, gives it `null` (JMESPath reads a missing field as null).
- A field not listed, when `rows` is true and `open` false, was never held by any record: its only kind is
  null. `open`: more than FIELD_KINDS_MAX_FIELDS (tools_app.kernel.limits) fields were seen, so an unlisted
  field is unknown.
- No facts (NULL: a collection written before they were kept) means nothing is known.

Nothing here touches the database or the settings.
"""

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tools_app.kernel.limits import FIELD_KINDS_MAX_FIELDS

__all__ = ["COLLECTIONS_TABLE", "Known", "Tally", "empty", "kind_names", "merge", "facts_text", "of_records"]

# The collections' table (tools_app.models.TableCollection; a test holds the two equal): its `field_kinds`
# column holds the facts. Every write of records keeps them (tools_app.data_access.sql.store), so no writer can
# leave them stale; a compiled statement that relied on them checks, in its own snapshot, that they are still
# the ones it was compiled with (else the evaluator answers).
COLLECTIONS_TABLE = "tools_app_tablecollection"
_INT64 = (-(2**63), 2**63)


def kind_names(value: Any) -> tuple[str, ...]:
    """The kinds one value counts as (an integer beyond 64 bits: number and wide)."""
    if value is None:
        return ("null",)
    if value is True:
        return ("true",)
    if value is False:
        return ("false",)
    if isinstance(value, int):
        return ("number",) if _INT64[0] <= value < _INT64[1] else ("number", "wide")
    if isinstance(value, float):
        return ("number",)
    if isinstance(value, str):
        return ("string",)
    return ("array",) if isinstance(value, list) else ("object",)


def facts_text(facts: Mapping) -> str:
    """The facts as stored (and as compared with the stored ones)."""
    return json.dumps(facts, separators=(",", ":"), ensure_ascii=False)


def empty() -> dict:
    return {"rows": False, "open": False, "records": [], "fields": {}}


def of_records(records: Iterable[Any]) -> dict:
    """The facts of a batch of records written into a collection that held none."""
    tally = Tally()
    for record in records:
        tally.add(record)
    return tally.facts()


# The kinds of a value by its exact type, where the type alone says them (an int's range and a bool's value
# do not: kind_names answers those).
_KINDS_BY_TYPE: dict[type, tuple[str, ...]] = {
    str: ("string",),
    float: ("number",),
    list: ("array",),
    dict: ("object",),
    type(None): ("null",),
}
_NUMBER = ("number",)


# The most record shapes (key tuple, value type tuple) a Tally remembers; a record of another shape is tallied
# field by field.
MAX_SHAPES = 1024


class _Shape:
    """Records with the same keys, in the same order, whose values have the same types: what the first of them
    gave the facts holds for all of them but for the values whose kinds the type alone does not say (an int's
    range, a bool's value): `checked` (field name, its kinds) re-reads those per record."""

    __slots__ = ("checked", "count", "keys")

    def __init__(self, keys: tuple[str, ...], checked: list[tuple[str, set[tuple[str, ...]]]]) -> None:
        self.keys = keys
        self.checked = checked
        self.count = 0  # records of this shape after the first (the first went through Tally._fields)


class Tally:
    """The facts of records as they are written, one at a time (a batch may be a stream)."""

    def __init__(self) -> None:
        # Per field, the kind tuples its values gave (kind_names'), unioned in facts(). An import tallies millions
        # of records, mostly of a few shapes: a record of a shape seen before costs a dictionary lookup and the
        # values whose type does not say their kind; the first of each shape is tallied field by field.
        self.kinds: dict[str, set[tuple[str, ...]]] = {}
        self.present: Counter[str] = Counter()
        self.count = 0
        self.open = False
        self.records: set[str] = set()
        self._shapes: dict[tuple[tuple[str, ...], tuple[type, ...]], _Shape] = {}

    def add(self, record: Any) -> None:
        self.count += 1
        if record.__class__ is not dict:
            if isinstance(record, dict):
                self._fields(record)
            else:
                self.records.update(kind_names(record))
            return
        keys = tuple(record)
        types = tuple(map(type, record.values()))
        shape = self._shapes.get((keys, types))
        if shape is None:
            self._fields(record)
            if len(self._shapes) < MAX_SHAPES:
                known = self.kinds
                checked = [
                    (name, known[name])
                    for name, kind in zip(keys, types, strict=True)
                    if kind not in _KINDS_BY_TYPE and name in known
                ]
                self._shapes[(keys, types)] = _Shape(keys, checked)
            return
        shape.count += 1
        for name, kinds in shape.checked:
            value = record[name]
            if value.__class__ is int:
                kinds.add(_NUMBER if _INT64[0] <= value < _INT64[1] else ("number", "wide"))
            else:
                kinds.add(kind_names(value))

    def _fields(self, record: dict) -> None:
        known = self.kinds
        by_type = _KINDS_BY_TYPE
        for name, value in record.items():
            kinds = known.get(name)
            if kinds is None:
                if self.open or len(known) >= FIELD_KINDS_MAX_FIELDS:
                    self.open = True
                    continue
                kinds = known[name] = set()
            kind = value.__class__
            if kind is int:
                kinds.add(_NUMBER if _INT64[0] <= value < _INT64[1] else ("number", "wide"))
            else:
                kinds.add(by_type.get(kind) or kind_names(value))
        self.present.update(record.keys())
        self.records.add("object")

    def facts(self) -> dict:
        present = self.present.copy()
        for shape in self._shapes.values():
            if shape.count:
                for name in shape.keys:
                    present[name] += shape.count
        fields = {}
        for name, seen in sorted(self.kinds.items()):
            kinds = {kind for names in seen for kind in names}
            fields[name] = sorted(kinds | {"null"} if present[name] < self.count else kinds)
        return {"rows": self.count > 0, "open": self.open, "records": sorted(self.records), "fields": fields}


def merge(before: Mapping | None, added: Mapping) -> dict | None:
    """The facts after `added`'s records join a collection whose facts were `before` (None: unknown stays
    unknown)."""
    if before is None:
        return None
    fields: dict[str, set[str]] = {}
    is_open = bool(before["open"] or added["open"])
    for name, kinds in before["fields"].items():
        if name not in added["fields"] and added["open"]:
            continue  # the added records may hold it with any kind: unlisted in open facts is unknown
        fields[name] = set(kinds)
        if name not in added["fields"] and added["rows"]:
            fields[name].add("null")  # the added records lack it
    for name, kinds in added["fields"].items():
        if name in fields:
            fields[name].update(kinds)
        elif before["open"] or len(fields) >= FIELD_KINDS_MAX_FIELDS:
            is_open = True  # what earlier records held under this name is not known
        else:
            fields[name] = set(kinds) | ({"null"} if before["rows"] else set())
    return {
        "rows": bool(before["rows"] or added["rows"]),
        "open": is_open,
        "records": sorted(set(before["records"]) | set(added["records"])),
        "fields": {name: sorted(kinds) for name, kinds in sorted(fields.items())},
    }


@dataclass(frozen=True)
class Known:
    """The facts as the renderer asks them: the kinds a top-level field may hold (None: any)."""

    fields: tuple[tuple[str, frozenset[str]], ...]
    rows: bool
    open: bool
    records: frozenset[str]
    text: str  # as stored: what the statement compares with the stored facts

    @classmethod
    def of(cls, facts: Mapping | None) -> "Known | None":
        if not facts:
            return None
        fields = tuple((name, frozenset(kinds)) for name, kinds in sorted(facts["fields"].items()))
        return cls(fields, bool(facts["rows"]), bool(facts["open"]), frozenset(facts["records"]), facts_text(facts))

    def field(self, name: str) -> frozenset[str] | None:
        for listed, kinds in self.fields:
            if listed == name:
                return kinds
        if self.open:
            return None
        return frozenset({"null"}) if self.rows else frozenset()
