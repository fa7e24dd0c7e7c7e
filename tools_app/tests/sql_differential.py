"""Differential checking of tools_app.data_access.sql_query against jmespath itself, shared by
test_sql_query.py and bench/sql_fuzz.py: generated collections, generated queries, and the comparison of
outcomes (result with its exact types and key order, or exception class and message).
"""

import json
import random
from dataclasses import dataclass, field
from typing import Any
from unittest.mock import patch

import jmespath
from django.db import connection
from jmespath import visitor

from tools_app import services
from tools_app.data_access import sql_query
from tools_app.data_access.sql.store import field_kinds, iter_records, layouts_by_id, write_records
from tools_app.data_access.sql_query import NotCompilable, SqlQuery, compile_sql, compile_sql_expression, run_sql
from tools_app.execution import records
from tools_app.models import CollectionKind, Table, TableCollection, TableRecord, TableRecordLayout

RECORDS = TableRecord._meta.db_table
LAYOUTS = TableRecordLayout._meta.db_table

# Rows of an answer received at a time (sql_query.FETCH_ROWS): most answers cross a chunk's end (on PostgreSQL,
# where each chunk is a result of its own received through the tools' chunked cursor).
CHUNK_ROWS = 3


def canonical(value: Any) -> Any:
    """A comparable form that keeps JSON types apart (True, 1, 1.0, -0.0) and object key order."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return ("float", repr(value))
    if isinstance(value, list):
        return ("list", [canonical(item) for item in value])
    if isinstance(value, dict):
        return ("dict", [(key, canonical(item)) for key, item in value.items()])
    return (type(value).__name__, value)


def reference(expression: str | dict, data: Any) -> tuple:
    """What jmespath answers for an expression (or its parsed tree): ("ok", canonical result) or ("error",
    exception class, message)."""
    try:
        if isinstance(expression, dict):
            return ("ok", canonical(visitor.TreeInterpreter().visit(expression, data)))  # what search() runs
        return ("ok", canonical(jmespath.search(expression, data)))
    except Exception as exc:  # every outcome is compared, errors included
        return ("error", type(exc).__name__, str(exc))


def record_indexes() -> set[str]:
    """The record indexes the engine has (tools_app.data_access.sql.indexes' names: tr_<collection>_...)."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename = %s", (RECORDS,))
        else:
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = %s", (RECORDS,))
        return {row[0] for row in cursor.fetchall() if row[0].startswith("tr_")}


def dialect() -> str:
    return "postgresql" if connection.vendor == "postgresql" else "sqlite"


@dataclass
class Stored:
    """A collection written as rows, and what reading the rows back gives."""

    collection_id: int
    root: str
    value: Any

    def read_back(self) -> Any:
        with connection.cursor() as cursor:
            pairs = list(
                iter_records(
                    cursor,
                    dialect=dialect(),
                    records_table=RECORDS,
                    layouts_table=LAYOUTS,
                    collection_id=self.collection_id,
                )
            )
        if self.root == "object":
            return {key: record for key, record in pairs}
        return [record for _key, record in pairs]


def store(table: Table, mount: str, value: list | dict) -> Stored:
    root = "object" if isinstance(value, dict) else "array"
    collection = TableCollection.objects.create(
        table=table, mount=mount, kind=CollectionKind.OBJECT if root == "object" else CollectionKind.ARRAY
    )
    with connection.cursor() as cursor:
        count = write_records(
            cursor,
            dialect=dialect(),
            records_table=RECORDS,
            layouts_table=LAYOUTS,
            collection_id=collection.pk,
            value=value,
        )
    TableCollection.objects.filter(pk=collection.pk).update(record_count=count)
    return Stored(collection.pk, root, value)


def two_indexed_tables(owner: Any, make_table: Any, size: int) -> tuple[Table, Stored, Table, Stored]:
    """`orders` declaring `status, total` and `other` declaring `total`, each holding `size` records at /orders
    as rows (their indexes built): each table and its stored collection."""
    records = [{"id": index, "status": f"s-{index % 3}", "total": index} for index in range(size)]
    orders = make_table(owner, name="orders", data=[], storage="document")
    first = store(orders, "/orders", records)
    other = make_table(owner, name="other", data=[], storage="document")
    second = store(other, "/orders", records)
    services.table_update(table=orders, indexed_fields=["status", "total"])
    services.table_update(table=other, indexed_fields=["total"])
    return orders, first, other, second


def sql_outcome(expression: str | dict, stored: Stored, *, facts: bool = True) -> tuple[str, tuple | None]:
    """("not compiled", None), ("sql", outcome) or ("evaluator", outcome): how the query (text or parsed tree)
    was answered and what it answered; "evaluator" when the data sent it to jmespath over the records read
    back from the rows. `facts`: compiled with the collection's field kinds, as the tools run it (else as for
    a collection whose kinds are not known). Run through the tools' cursor (records.engine_cursor, chunked)."""
    if isinstance(expression, dict):
        try:
            query: SqlQuery | None = compile_sql(expression, dialect=dialect(), root=stored.root)
        except NotCompilable:
            query = None
    else:
        query = compile_sql_expression(expression, dialect(), stored.root)
    if query is None:
        return "not compiled", None
    with patch.object(sql_query, "FETCH_ROWS", CHUNK_ROWS), records.engine_cursor(chunked=True) as cursor:

        def layouts(ids: Any) -> Any:
            return layouts_by_id(cursor, LAYOUTS, ids)

        known = field_kinds(cursor, stored.collection_id) if facts else None
        answer = run_sql(query, cursor, table=RECORDS, collection_id=stored.collection_id, layouts=layouts, known=known)
    if answer is None:
        return "evaluator", reference(expression, stored.read_back())
    return "sql", ("ok", canonical(answer.value))


@dataclass
class Tally:
    pairs: int = 0
    sql: int = 0
    evaluator: int = 0
    not_compiled: int = 0
    differences: list = field(default_factory=list)

    def add(self, expression: str | dict, stored: Stored) -> None:
        self.pairs += 1
        # Every other pair without the collection's field kinds: both ways of compiling are checked.
        how, got = sql_outcome(expression, stored, facts=self.pairs % 2 == 1)
        if how == "not compiled":
            self.not_compiled += 1
            return
        if how == "sql":
            self.sql += 1
        else:
            self.evaluator += 1
        expected = reference(expression, stored.value)
        if got != expected:
            self.differences.append((expression, stored.value, expected, got))

    def line(self) -> str:
        return (
            f"{self.pairs:,} pairs: {self.sql:,} answered in SQL, {self.evaluator:,} sent to the evaluator by their "
            f"data, {self.not_compiled:,} not compiled; {len(self.differences)} differences"
        )


#
# Generated collections
#

FIELDS = ["a", "b", "c", "é", "x y", "10"]
SCALARS: list[Any] = [
    None, True, False, 0, 1, -1, 2, 3, 7, 0.0, 1.0, 2.5, -1.5, 3.0, 0.1, 1e16, 1.5e-07, 1e23, 10**20, -(10**19),
    2**63, 2**63 - 1, 9007199254740993, "", "a", "b", "ab", "abc", "bc", "A", "é", "😀", "a😀", "1", "true",
    "[1]", "{}", " ", "b a", "it's", 'say "x"', "%s", "{}x",
]  # fmt: skip
CONTAINERS: list[Any] = [
    [], {}, [1], [1, 2], ["a"], [True], [0], [None], [1.0], [[1]], ["a", 1], ["ab", "b"], [2, 3, "a"],
    {"a": 1}, {"b": 1, "a": 2}, {"a": [1, "x"]}, {"a": {"b": 1}}, {"bb": True, "a": None},
]  # fmt: skip


def random_value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if roll < 0.72 or depth > 1:
        return rng.choice(SCALARS)
    if roll < 0.9:
        return rng.choice(CONTAINERS)
    keys = rng.sample(["b", "a", "c", "aa"], rng.randint(1, 3))
    return {key: random_value(rng, depth + 1) for key in keys}


def random_record(rng: random.Random) -> Any:
    if rng.random() < 0.05:
        return rng.choice([None, 1, "a", [1], True])
    names = [name for name in FIELDS if rng.random() < 0.6]
    rng.shuffle(names)
    return {name: random_value(rng) for name in names}


NUMBERS: list[Any] = [0, 1, -1, 2, 3, 7, 0.0, 1.0, 2.5, -1.5, 3.0, 0.1, 1e16, 1.5e-07, 1e23, 9007199254740993]
STRINGS = ["", "a", "b", "ab", "abc", "bc", "A", "é", "😀", "a😀", "1", "b a", "it's"]


def tidy_record(rng: random.Random) -> dict:
    """A record as real tables hold them: each field of one type (or missing, or null)."""
    record = {
        "a": rng.choice(NUMBERS + [10**20] * (rng.random() < 0.05)),
        "b": rng.choice(STRINGS),
        "c": rng.choice([True, False, None]),
        "x y": {key: rng.choice(NUMBERS) for key in rng.sample(["b", "a", "aa"], 2)},
        "é": [rng.choice(STRINGS) for _ in range(rng.randint(0, 3))],
    }
    for name in list(record):
        if rng.random() < 0.1:
            del record[name]
    return record


def random_collection(rng: random.Random) -> list | dict:
    make = tidy_record if rng.random() < 0.5 else random_record
    records = [make(rng) for _ in range(rng.choice([0, 1, 2, 3, 5, 8, 12, 12, 20]))]
    if rng.random() < 0.15:
        keys = [f"k{index}" for index in range(len(records))]
        rng.shuffle(keys)
        return dict(zip(keys, records, strict=True))
    return records


#
# Generated queries
#

AFTER_LIST = ["", "[0]", "[-1]", "[1:-1]", "[::-1]", " | [:3]", " | length(@)", " | [?@]"]

PATHS = ["a", "b", "c", "a.b", "a.a", "a[0]", "b[-1]", "b[0][-1]", '"x y"', '"é"', '"10"', "c.a.b"]
RAW_STRINGS = ["a", "ab", "b", "", "é", "😀", "A", "1", "[1]", "it\\'s", "%s"]


def literal(rng: random.Random) -> str:
    if rng.random() < 0.25:
        return f"'{rng.choice(RAW_STRINGS)}'"
    value = rng.choice(SCALARS) if rng.random() < 0.8 else rng.choice(CONTAINERS)
    return "`" + json.dumps(value, ensure_ascii=False).replace("`", "\\`") + "`"


def path(rng: random.Random, *, current: bool = True) -> str:
    if current and rng.random() < 0.06:
        return "@"
    return rng.choice(PATHS)


def condition(rng: random.Random, depth: int = 0) -> str:
    roll = rng.random()
    if depth < 2 and roll < 0.22:
        return f"{condition(rng, depth + 1)} {rng.choice(['&&', '||'])} {condition(rng, depth + 1)}"
    if depth < 2 and roll < 0.3:
        return f"!({condition(rng, depth + 1)})"
    if roll < 0.36:
        return path(rng)
    if roll < 0.46:
        function = rng.choice(["contains", "starts_with", "ends_with"])
        return f"{function}({path(rng)}, {literal(rng)})"
    if roll < 0.49:
        return literal(rng)
    operator = rng.choice(["==", "!=", "<", "<=", ">", ">="])
    shape = rng.random()
    if shape < 0.12:
        return f"{path(rng)} {operator} {path(rng)}"
    if shape < 0.2:
        return f"{literal(rng)} {operator} {path(rng)}"
    return f"{path(rng)} {operator} {literal(rng)}"


SLICES = [":2", "1:", "-2:", ":-1", "::2", "1:5:2", "-3:-1", "5:1", "0:0", "-1:", "2:3", "::3"]


def record_list(rng: random.Random, root: str, depth: int = 0) -> str:
    """An expression giving a list of records."""
    base = "values(@)" if root == "object" else rng.choice(["@", "[*]"])
    if depth > 1:
        return base
    roll = rng.random()
    if roll < 0.35:
        return f"{base}[?{condition(rng)}]" if base != "@" else f"[?{condition(rng)}]"
    if roll < 0.55:
        return f"sort_by({record_list(rng, root, depth + 1)}, &{path(rng, current=False)})"
    if roll < 0.7:
        return f"{record_list(rng, root, depth + 1)} | [{rng.choice(SLICES)}]"
    if roll < 0.8:
        return f"{record_list(rng, root, depth + 1)} | [?{condition(rng)}]"
    if roll < 0.86:
        return f"reverse({record_list(rng, root, depth + 1)})"
    return base


def projection(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.6:
        return path(rng, current=False)
    if roll < 0.85:
        return "{" + ", ".join(f"k{index}: {path(rng, current=False)}" for index in range(rng.randint(1, 3))) + "}"
    return "[" + ", ".join(path(rng, current=False) for _ in range(rng.randint(1, 3))) + "]"


def query(rng: random.Random, root: str) -> str:
    records = record_list(rng, root)
    if rng.random() < 0.15:
        return list_function(rng, records)
    roll = rng.random()
    if roll < 0.2:
        return records
    if roll < 0.3 and root == "array":
        return f"[?{condition(rng)}].{projection(rng)}"
    if roll < 0.45:
        return f"{records} | [*].{projection(rng)}"
    if roll < 0.55:
        return f"length({records})"
    if roll < 0.7:
        function = rng.choice(["sum", "avg", "min", "max"])
        return f"{function}({records} | [*].{path(rng, current=False)})"
    if roll < 0.8:
        function = rng.choice(["max_by", "min_by"])
        tail = f".{path(rng, current=False)}" if rng.random() < 0.5 else ""
        return f"{function}({records}, &{path(rng, current=False)}){tail}"
    if roll < 0.88:
        return f"sort_by({records}, &{path(rng, current=False)})[{rng.choice(SLICES)}].{projection(rng)}"
    if roll < 0.95:
        index = rng.choice([0, 1, -1, 5])
        tail = f".{path(rng, current=False)}" if rng.random() < 0.5 else ""
        return f"{records} | [{index}]{tail}"
    if root == "object":
        return rng.choice(["keys(@)", "length(@)", "*.a", "length(values(@))"])
    return f"length([?{condition(rng)}])"


def list_function(rng: random.Random, records: str) -> str:
    """map (nulls kept), sort and reverse of a list of records or of their values, then something after."""
    field = path(rng, current=False)
    shape = rng.choice(
        [
            f"map(&{field}, {records})",
            f"map(&{field}, {records} | [*].{path(rng, current=False)})",
            f"sort({records} | [*].{field})",
            f"sort(map(&{field}, {records}))",
            f"sort({records})",
            f"reverse({records} | [*].{field})",
            f"reverse(map(&{field}, {records}))",
            f"sort_by(reverse({records}), &{field})",
            f"max_by(reverse({records}), &{field})",
        ]
    )
    return shape + rng.choice(AFTER_LIST)
