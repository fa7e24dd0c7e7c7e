"""JMESPath over a record collection stored as rows, answered by the database engine (docs/tables-at-scale.md).

    query = compile_sql(parsed, dialect="postgresql")       # NotCompilable: evaluate in Python instead
    answer = run_sql(query, cursor, table=..., collection_id=..., layouts=...)
    if answer is None: ...                                   # the data needs the Python evaluator

`parsed` is jmespath's AST (`jmespath.parser.Parser().parse(expression).parsed`) of an expression applied to
the collection: the list of its records in order (root "array") or the object of its records by key (root
"object"). What compiles: filters `[?...]` with == != < <= > >=, &&, ||, !, contains, starts_with, ends_with
over fields and literals; projections `[*].a`, `[?...].a.b[0]`; multi-select hashes and lists of fields;
sort_by(list, &field); slices `[a:b:c]` (c > 0); indexes `[0]`, `[-1]`; length, sum, avg, min, max, max_by,
min_by of such lists, and `.field` of what max_by/min_by/an index picked; pipes between them. The rest is
NotCompilable.

The answer is exactly `jmespath.search(expression, records)`, Python types included (1 vs 1.0, big integers,
object key order), or None when the data meets a condition under which jmespath raises (a number compared
with a string, sort_by over mixed types, contains on a missing field, sum of a string...) or, on SQLite,
compares an integer beyond 64 bits: then the caller evaluates the expression over the records in Python,
which raises jmespath's own error or computes the value. The condition and the answer are read by one
statement, so from one snapshot.
"""

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from operator import itemgetter
from typing import Any, cast

from jmespath.parser import Parser

from tools_app.data_access import budget
from tools_app.data_access.sql.codec import Layout, layout_at, restore
from tools_app.data_access.sql.indexes import (
    compound_answers,
    covering_fields,
    index_catalog,
    less_selective_indexes,
    serving_compound,
)
from tools_app.data_access.sql.kinds import Known
from tools_app.data_access.sql.plan import (
    Collect,
    ElemPath,
    ElemSelect,
    ListPlan,
    Map,
    NotCompilable,
    Reverse,
    Scan,
    Sort,
    ValuePlan,
    build_plan,
    field_tests,
)
from tools_app.data_access.sql.render import Output, Rendered, dialect_for, render
from tools_app.kernel.limits import max_evaluated_bytes

__all__ = [
    "NotCompilable",
    "SqlAnswer",
    "SqlQuery",
    "compile_sql",
    "compile_sql_expression",
    "fetch",
    "run_sql",
    "statement_for",
    "windowed",
]

LayoutLoader = Callable[[Collection[int]], Mapping[int, Layout]]


@dataclass(frozen=True)
class SqlQuery:
    """A compiled expression: its plan, rendered per collection by statement()."""

    plan: ValuePlan
    dialect: str
    rendered: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    def statement(
        self,
        *,
        table: str,
        collection_id: int,
        known: Known | None = None,
        position_order: bool = False,
        unindexed: frozenset[str] = frozenset(),
        covered: frozenset[str] = frozenset(),
        window: bool = False,
    ) -> Rendered:
        """The statement (SQL text with %s parameters, and its parameters) over one collection whose field kinds
        are `known` (tools_app.data_access.sql.kinds; None: unknown); `position_order`, `unindexed`, `covered`,
        `window`: render's. Kept on the query (compile_sql_expression caches queries per expression), at most
        RENDERED per query."""
        key = (table, collection_id, known, position_order, unindexed, covered, window)
        rendered = self.rendered.get(key)
        if rendered is None:
            if len(self.rendered) >= RENDERED:
                self.rendered.clear()
            rendered = render(
                self.plan,
                dialect=self.dialect,
                table=table,
                collection_id=collection_id,
                known=known,
                position_order=position_order,
                unindexed=unindexed,
                covered=covered,
                window=window,
            )
            self.rendered[key] = rendered
        return rendered


# Statements kept per compiled query: by collection and its field kinds (which change rarely: they only grow).
# Keyed by the query object, not by its plan: equal plans may render differently (Lit(True) == Lit(1)).
RENDERED = 64


@dataclass(frozen=True)
class SqlAnswer:
    value: Any


def compile_sql(parsed: dict, *, dialect: str, root: str = "array") -> SqlQuery:
    """The SQL form of `parsed` for `dialect` ("sqlite", "postgresql"); NotCompilable when there is none."""
    dialect_for(dialect)
    plan = build_plan(parsed, root=root)
    query = SqlQuery(plan, dialect)
    query.statement(table="records", collection_id=0)  # what only the dialect refuses, refused now
    return query


@lru_cache(maxsize=1024)
def compile_sql_expression(expression: str, dialect: str, root: str = "array") -> SqlQuery | None:
    """compile_sql of an expression's text, cached per process; None when it does not compile (or parse)."""
    try:
        parsed = Parser().parse(expression).parsed
        return compile_sql(dict(parsed), dialect=dialect, root=root)
    except (NotCompilable, ValueError):  # jmespath's parse errors are ValueErrors too
        return None


def run_sql(
    query: SqlQuery,
    cursor: Any,
    *,
    table: str,
    collection_id: int,
    layouts: LayoutLoader | None = None,
    known: Known | None = None,
    position_order: bool = False,
    rows: tuple[int, int] | None = None,
) -> SqlAnswer | None:
    """Run `query` over the collection through a DB-API cursor (Django's: %s parameters).

    None when the Python evaluator must answer (see the module docstring). `layouts` gives the key-order
    layouts (tools_app.data_access.sql.codec) by id; needed on PostgreSQL for values holding objects. `known`:
    the collection's field kinds (tools_app.data_access.sql.store.field_kinds), which must be current.
    `position_order`: no index of the query's filtered fields exists (render's; the answer is the same).
    `rows`: (offset, count) of a query whose answer `windowed` says is one item per record: only those items of
    the list, in its order (fewer past its end), from a statement that LIMITs its answer to them.

    Bounded as a gathered read is (fetch): at most TOOLHUB_MAX_EVALUATED_BYTES of the answer's JSON text is
    received, else QUERY_TOO_EXPENSIVE naming it; the call's time budget is checked between chunks of rows. What
    the process holds meanwhile is bounded too when the cursor receives rows as they are fetched: SQLite's always;
    on PostgreSQL a chunked one (records.engine_cursor(chunked=True), data_access.sql.chunked), where a plain
    cursor receives the whole result at execute.
    """
    rendered = statement_for(query, cursor, table=table, collection_id=collection_id, known=known,
                             position_order=position_order, window=rows is not None)  # fmt: skip
    params = rendered.params if rows is None else (*rendered.params, rows[1], rows[0])
    cursor.execute(rendered.sql, params)
    return finish(rendered.output, fetch(cursor, max_evaluated_bytes()), layouts)


# Rows taken from the cursor at a time: the answer's bytes are counted, and the call's time budget checked, per chunk.
FETCH_ROWS = 2_000


def fetch(cursor: Any, limit: int) -> list[Sequence[Any]]:
    """The executed statement's rows, FETCH_ROWS at a time, while the JSON texts among them (the strings: the
    output's columns; counted in characters, as a gathered read counts its records) are at most `limit` in all.
    Past it the cursor is closed, the rest of the answer unread (a chunked PostgreSQL cursor cancels the
    statement), and budget.over_evaluated_bytes is raised: a compiled `@` over a collection larger than the bound
    costs about the bound, whatever the collection's size.
    The active budget's time is checked after each chunk. A first row whose order (first column) is NULL is the
    statement's error flag (render's): the evaluator answers, so that row is all that is read."""
    current = budget.active()
    rows: list[Sequence[Any]] = []
    received = 0
    while chunk := cursor.fetchmany(FETCH_ROWS):
        if not rows and chunk[0][0] is None:
            cursor.close()
            return chunk[:1]
        received += _text_length(chunk)
        if received > limit:
            cursor.close()
            raise budget.over_evaluated_bytes(limit)
        rows.extend(chunk)
        if current is not None:
            current.check_time()
    return rows


def _text_length(chunk: Sequence[Sequence[Any]]) -> int:
    """The characters of the chunk's JSON texts: the columns whose values are strings (a column holds one type, or
    NULL; its first value that is not NULL, 0 or empty tells which), summed column by column, each column read out
    of the rows by itemgetter (no Python step per value, no tuple per column)."""
    total = 0
    for at in range(len(chunk[0])):
        column = itemgetter(at)
        if next(filter(None, map(column, chunk)), None).__class__ is str:
            total += sum(map(len, filter(None, map(column, chunk))))
    return total


def statement_for(
    query: SqlQuery,
    cursor: Any,
    *,
    table: str,
    collection_id: int,
    known: Known | None = None,
    position_order: bool = False,
    window: bool = False,
) -> Rendered:
    """The statement run_sql runs. On SQLite, a filter ANDing tests of two or more indexed fields reads the index
    that finds the fewest records, which SQLite's planner cannot tell (indexes.less_selective_indexes counts
    them); PostgreSQL's planner has the statistics to choose (its extended statistics per indexed field). And on
    SQLite, a filter that one index answers alone has its matches read in rowid order (indexes.covering_fields,
    render's `covered`), unless the compound index serves it and holds everything else the statement reads of a
    record (indexes.compound_answers): then the plain form, which SQLite answers from that index alone."""
    unindexed: frozenset[str] = frozenset()
    covered: frozenset[str] = frozenset()
    if query.dialect == "sqlite" and not position_order:
        tests = field_tests(query.plan)
        if tests:
            catalog = index_catalog(cursor, records_table=table, collection_id=collection_id)
            if len({test.field for test in tests}) > 1:
                unindexed = less_selective_indexes(cursor, records_table=table, collection_id=collection_id,
                                                   tests=tests, catalog=catalog)  # fmt: skip
            if not unindexed:
                covered = covering_fields(cursor, records_table=table, collection_id=collection_id, tests=tests,
                                          catalog=catalog)  # fmt: skip
            compound = serving_compound(catalog, table, tests) if covered else None
            if compound is not None:  # read in the compound index's order when it holds all the statement reads
                plain = query.statement(table=table, collection_id=collection_id, known=known, window=window)
                if compound_answers(compound, table, plain.sql):
                    return plain
    return query.statement(table=table, collection_id=collection_id, known=known, position_order=position_order,
                           unindexed=unindexed, covered=covered, window=window)  # fmt: skip


def windowed(query: SqlQuery) -> bool:
    """The query's answer is a list of one item per record of the collection (the records, `reverse`d, sorted by
    `sort_by`, or each `map`ped), in an order its statement gives: run_sql's `rows` reads a window of it, and the
    list's length is the collection's record count. A filter, a slice or a projection (which drops nulls) makes
    the length unknown before the whole answer is read: those are not."""
    if not isinstance(query.plan, Collect):
        return False
    source: ListPlan = query.plan.source
    while isinstance(source, Reverse | Sort) or (isinstance(source, Map) and source.keep_nulls):
        source = source.source
    return isinstance(source, Scan)


def finish(output: Output, rows: Sequence[Sequence[Any]], layouts: LayoutLoader | None = None) -> SqlAnswer | None:
    """The answer from the statement's rows: (order, then the output's columns), after a first row of NULLs where
    the error flag is set (render's)."""
    if rows and rows[0][0] is None:
        return None
    if not rows:
        return SqlAnswer(_empty(output))
    kind = output.kind
    if kind in ("list", "one") and not output.filtered and isinstance(output.elem, ElemPath):
        # One value per row, read column by column (_path_values): no tuple per row.
        return _listed(output, _path_values(output, rows, 1, layouts))
    rows = [row[1:] for row in rows]
    if kind == "count":
        if output.filtered:
            errors, count = rows[0]
            return None if errors else SqlAnswer(int(count or 0))
        return SqlAnswer(int(rows[0][0]))
    if kind == "keys":
        return SqlAnswer([row[0] for row in rows])
    if kind in ("sum", "avg"):
        if not all(row[0] for row in rows):
            return None  # a value that is no number: the library raises
        numbers = [json.loads(row[1]) for row in rows]
        if kind == "sum":
            return SqlAnswer(sum(numbers))
        return SqlAnswer(sum(numbers) / len(numbers) if numbers else None)
    if output.filtered:
        if any(row[0] for row in rows):
            return None
        rows = [row[2:] for row in rows if row[1]]
    assert output.elem is not None
    if isinstance(output.elem, ElemPath):
        values = _path_values(output, rows, 0, layouts)
    elif not output.layout:
        values = [_element(output.elem, items, None) for items in _decode(rows)]
    else:
        decoded = _decode([row[:-1] for row in rows])
        # Layouts matter only where an object came back (a scalar has no key order): loaded for those rows only.
        wanted = {row[-1] for row, items in zip(rows, decoded, strict=True) if row[-1] is not None and _nested(items)}
        if wanted and layouts is None:
            raise ValueError("rows have key-order layouts, but no layout loader was given")
        loaded = layouts(wanted) if wanted and layouts is not None else {}
        values = [_element(output.elem, items, loaded.get(row[-1])) for row, items in zip(rows, decoded, strict=True)]
    return _listed(output, values)


def _listed(output: Output, values: list[Any]) -> SqlAnswer:
    """The answer of a list of values, one per record: nulls dropped by a projection, or the one value picked."""
    if output.drop_nulls and None in values:
        values = [value for value in values if value is not None]
    if output.kind == "one":
        return SqlAnswer(values[0] if values else None)
    return SqlAnswer(values)


def _path_values(output: Output, rows: Sequence[Sequence[Any]], at: int, layouts: LayoutLoader | None) -> list[Any]:
    """The values of one path per row (output.elem, an ElemPath): each row's JSON text at column `at`, its layout id
    last where the rows carry one (output.layout). Taken column by column: the texts read out of the rows at once
    and decoded by one parse; the rows are visited one by one only where a value is an object or an array and a row
    has a layout (PostgreSQL's key order restored), so a projection of scalars (ids, amounts) costs no Python step
    per row."""
    values = _decode_column(list(map(itemgetter(at), rows)))
    if not output.layout:
        return values
    kinds = set(map(type, values))
    if dict not in kinds and list not in kinds:
        return values
    # Most rows of a PostgreSQL table have a layout (JSONB reorders keys): restored where a container came.
    wanted = {
        row[-1]
        for row, value in zip(rows, values, strict=True)
        if isinstance(value, dict | list) and row[-1] is not None
    }
    if not wanted:
        return values
    if layouts is None:
        raise ValueError("rows have key-order layouts, but no layout loader was given")
    loaded = layouts(wanted)
    elem = cast("ElemPath", output.elem)
    return [
        _element(elem, [value], loaded.get(row[-1])) if row[-1] in wanted else value
        for row, value in zip(rows, values, strict=True)
    ]


def _decode_column(texts: list[str | None]) -> list[Any]:
    """JSON texts (None = null) decoded by one parse of them joined as an array: the same values as one json.loads
    per text, at a fraction of the calls and without a list per text."""
    if None in texts:
        return json.loads("[" + ",".join("null" if text is None else text for text in texts) + "]")
    return json.loads("[" + ",".join(cast("list[str]", texts)) + "]")


def _decode(rows: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """Each row's JSON texts (NULL = null) decoded, by one parse of the whole answer."""
    if not rows:
        return []
    text = ",".join("[" + ",".join("null" if item is None else item for item in row) + "]" for row in rows)
    return json.loads("[" + text + "]")


def _empty(output: Output) -> Any:
    return 0 if output.kind in ("count", "sum") else [] if output.kind in ("list", "keys") else None


def _nested(values: list[Any]) -> bool:
    return any(isinstance(value, dict | list) for value in values)


def _element(elem: ElemPath | ElemSelect, values: list[Any], layout: Layout) -> Any:
    if isinstance(elem, ElemPath):
        return _restored(values[0], layout_at(layout, elem.path) if layout else None)
    items = [
        _restored(value, layout_at(layout, elem.base + path) if layout else None)
        for value, path in zip(values, elem.paths, strict=True)
    ]
    return items if elem.keys is None else dict(zip(elem.keys, items, strict=True))


def _restored(value: Any, layout: Layout) -> Any:
    return restore(value, layout) if layout and isinstance(value, dict | list) else value
