"""A read narrowed to some records: what a binding's `where` (tools_app.grants) does to the data a tool reads.

`where` is `{"<record field>": <JSON value>, ...}`, the binding's narrowing resolved for one caller. A record
is kept when it is an object holding every one of those fields with a value equal to it, equality being
JMESPath's (`==`: 1 equals 1.0, true is not 1): the condition is one JMESPath expression, `predicate(where)`,
so the Python evaluator and the SQL compiler (tools_app.data_access.sql_query, over a rows table) read it
alike. The records are those of the tool's mount: an array keeps its matching items in order, an object its
matching entries; a mount holding anything else is MOUNT_TYPE_MISMATCH, as for `select`.

The tool's own operation then runs over the narrowed records at the root, so nothing the caller sends can
reach another record: JMESPath has no reference to a parent or a root above the value it is given, and the
narrowed value is all it is given. Over rows, `composed(where, query)` is `[?<predicate>] | (<query>)`: a
pipe's right side sees only its left side's value (and `query` is checked to parse alone first, so no text of
it can move the pipe).
"""

import json
from collections.abc import Callable
from typing import Any

from tools_app.data_access.budget import charge
from tools_app.data_access.operations import Mount
from tools_app.data_access.query import compile_expression

__all__ = ["composed", "composes", "keeps", "narrow", "predicate", "read_narrowed"]


def _literal(value: Any) -> str:
    return "`" + json.dumps(value, ensure_ascii=False, separators=(",", ":")).replace("`", "\\`") + "`"


def predicate(where: dict[str, Any]) -> str:
    """The JMESPath condition a kept record meets: `"customer" == `"acme"` && ...` (fields in sorted order)."""
    return " && ".join(
        f"{json.dumps(name, ensure_ascii=False)} == {_literal(value)}" for name, value in sorted(where.items())
    )


def keeps(where: dict[str, Any]) -> Callable[[Any], bool]:
    """Whether one record is within `where`."""
    condition = compile_expression(predicate(where))
    return lambda record: isinstance(record, dict) and condition.search(record) is True


def narrow(records: list | dict, where: dict[str, Any]) -> list | dict:
    """The records within `where`: an array's items in order, an object's entries in order. One pass over them,
    charged to the call's budget (as `select`'s pass is)."""
    charge(len(records))
    keep = keeps(where)
    if isinstance(records, list):
        return [record for record in records if keep(record)]
    return {key: record for key, record in records.items() if keep(record)}


def composed(where: dict[str, Any], query: str) -> str:
    """`query` over the array records within `where`, as one expression (for the SQL compiler)."""
    return f"[?{predicate(where)}] | ({query})"


def composes(where: dict[str, Any]) -> bool:
    """Whether `composed(where, ...)`'s filter keeps exactly the records `keeps` keeps. A record that is no object
    has every field null, so it is outside `where` when some value is not null; when every value is null,
    JMESPath's `[?field == null]` keeps a string or a number too, which `keeps` does not: then the records are
    filtered in Python."""
    return any(value is not None for value in where.values())


def read_narrowed(data: Any, mount: Mount, arguments: dict, operation: Callable[..., Any], where: dict, *extra: Any):
    """`operation(records, root mount, arguments, *extra)` over the mount's records within `where`. A top-level
    function of (data, mount, arguments, *extra) like the operations, so a heavy worker runs it the same way."""
    return operation(narrow(mount.collection(data), where), Mount("", mount.key_field), arguments, *extra)
