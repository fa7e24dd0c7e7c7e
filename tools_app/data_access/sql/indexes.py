"""Expression indexes on a collection's records, per declared field (docs/tables-at-scale.md, "Indexes").

For each record field `f` and each collection `c`, a partial index over the rows of `c` only, on exactly the
expression tools_app.data_access.sql.render writes for `f` (so the engine's planner matches it):

    SQLite       tr_<c>_<h>    ((data ->> '$."f"'))                                          WHERE collection_id = <c>
    PostgreSQL   tr_<c>_<h>_s  (((data ->> 'f') COLLATE "C"))                                WHERE collection_id = <c>
                 tr_<c>_<h>_n  ((CASE WHEN jsonb_typeof((data -> 'f')) = 'number'
                                 THEN (data ->> 'f')::numeric END))                           WHERE collection_id = <c>

`<h>` is the first 12 hex digits of the SHA-256 of the field name: names are deterministic, at most 39
characters (PostgreSQL cuts names at 63), and say nothing of the data.

A table that declares two or more fields also gets one compound index per collection on its first
COMPOUND_FIELDS declared fields, in their declared order (tr_<c>_<h>_c, `<h>` over the fields and their forms):
a filter that tests the leading fields with `==` and the next one with `==` or a range finds its records in that
one index, without reading the records that only one of its tests keeps (``status == 'shipped' && total > `500```
over 100,000 records: the 10,000 matches instead of the 20,000 shipped records). Each field takes the form its
values hold when the indexes are synced (PostgreSQL: `number` for a field of numbers, else `string`, the
renderer's forms for a comparison with a literal of that kind; SQLite's one `value` holds both).

Every index this module makes starts with `tr_<collection id>_`; the catalog is the record of what exists, so
sync_indexes() is idempotent and repairs what a failed or interrupted run left (PostgreSQL's invalid indexes
included).

PostgreSQL's planner takes no statistics from a partial index, so beside each field's pair of indexes it gets
extended statistics on the same two expressions (tr_<c>_<h>_x, over the whole records table): without them it
guesses a fixed share of the rows for any condition on a field and, for a filter on two indexed fields, reads
the wrong one's index (`status == 'shipped' && total > 998.5` read every shipped record where the `total` index
finds a few hundred). They are made and dropped with the field's indexes, before the ANALYZE that fills them.

On PostgreSQL the indexes are built and dropped CONCURRENTLY (writes to the records go on meanwhile), which
cannot run inside a transaction: sync_indexes() refuses to run in one (the caller defers it to after the
commit: tools_app.services.table_indexes). SQLite has no such form; its CREATE INDEX is one short write.

This module takes a DB-API cursor (Django's) and names the records table, so that the storage code below the
models can call it too.
"""

import functools
import hashlib
import logging
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from tools_app.data_access.sql.kinds import Known
from tools_app.data_access.sql.plan import FieldTest
from tools_app.data_access.sql.render import PostgresDialect, SQLiteDialect, _quote_name, dialect_for
from tools_app.data_access.sql.store import field_kinds

__all__ = [
    "IndexSync",
    "index_name_prefix",
    "indexed_collection_ids",
    "compound_answers",
    "compound_statement",
    "covering_fields",
    "index_catalog",
    "index_statements",
    "less_selective_indexes",
    "serving_compound",
    "sync_indexes",
    "wanted_indexes",
]

logger = logging.getLogger(__name__)

_NAME = re.compile(r"^tr_(\d+)_[0-9a-f]{12}(_[snc])?$")
# The declared fields (at most) that a collection's compound index covers, leading fields first.
COMPOUND_FIELDS = 4
_NUMBER_KINDS = frozenset({"number", "null"})  # a field of these kinds takes the number form in a compound index
_STATISTICS_NAME = re.compile(r"^tr_(\d+)_[0-9a-f]{12}_x$")
# SQLite's compound index carries, after its fields' values, the covering columns: spelled into its name, so an
# index made without them is built again at the next sync.
_COVERING = "position+json"


def index_name_prefix(collection_id: int) -> str:
    return f"tr_{int(collection_id)}_"


def _field_hash(name: str) -> str:
    return hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def index_statements(*, dialect: str, records_table: str, collection_id: int, field_name: str) -> dict[str, str]:
    """{index name: CREATE INDEX statement} for `field_name` over collection `collection_id`: the expressions
    are the renderer's own (SQLiteDialect.value, PostgresDialect.string and .number of the field's path).

    The statements run with a parameter tuple (the renderer doubles `%` in inlined text), and on PostgreSQL
    without `CONCURRENTLY` (sync_indexes adds it). NotCompilable for a name no JSON path can spell."""
    d = dialect_for(dialect)
    path = (("field", field_name),)
    prefix = f"{index_name_prefix(collection_id)}{_field_hash(field_name)}"
    where = f"WHERE collection_id = {int(collection_id)}"
    table = _quote_name(records_table)
    if isinstance(d, SQLiteDialect):
        return {prefix: f'CREATE INDEX IF NOT EXISTS "{prefix}" ON {table} ({d.value(path).text}) {where}'}
    assert isinstance(d, PostgresDialect)
    return {
        f"{prefix}_s": f'CREATE INDEX IF NOT EXISTS "{prefix}_s" ON {table} (({d.string(path).text})) {where}',
        f"{prefix}_n": f'CREATE INDEX IF NOT EXISTS "{prefix}_n" ON {table} ({d.number(path).text}) {where}',
    }


def compound_statement(
    *, dialect: str, records_table: str, collection_id: int, fields: Sequence[str], known: Known | None = None
) -> dict[str, str]:
    """{index name: CREATE INDEX statement} of the collection's compound index on its first COMPOUND_FIELDS
    `fields` ({} for fewer than two). On PostgreSQL each field takes the form of the kinds `known` says its
    values hold (numbers: `number`; anything else, or unknown: `string`); the name follows the forms, so a sync
    after the kinds changed builds the index again. On SQLite the fields' values are followed by the covering
    columns `position` and each field's JSON text (the renderer's projection of the field), so that a filter it
    serves, projected to these fields, is answered from the index alone (compound_answers). Run as
    index_statements' are."""
    names = list(fields)[:COMPOUND_FIELDS]
    if len(names) < 2:
        return {}
    d = dialect_for(dialect)
    columns, forms = [], []
    for name in names:
        path = (("field", name),)
        if isinstance(d, SQLiteDialect):
            columns.append(d.value(path).text)
            forms.append("v")
        else:
            assert isinstance(d, PostgresDialect)
            kinds = None if known is None else known.field(name)
            numbers = kinds is not None and "number" in kinds and kinds <= _NUMBER_KINDS
            columns.append(d.number(path).text if numbers else f"({d.string(path).text})")
            forms.append("n" if numbers else "s")
    spelled = "\0".join(form + name for form, name in zip(forms, names, strict=True))
    if isinstance(d, SQLiteDialect):  # the covering columns (compound_answers): position, each field's JSON text
        columns += ["position", *(d.json((("field", name),)).text for name in names)]
        spelled += "\0" + _COVERING
    index = f"{index_name_prefix(collection_id)}{_field_hash(spelled)}_c"
    return {
        index: f'CREATE INDEX IF NOT EXISTS "{index}" ON {_quote_name(records_table)} ({", ".join(columns)})'
        f" WHERE collection_id = {int(collection_id)}"
    }


def wanted_indexes(
    *,
    dialect: str,
    records_table: str,
    collection_ids: Iterable[int],
    fields: Iterable[str],
    known: Mapping[int, Known | None] | None = None,
) -> dict[str, str]:
    """Every index (name → statement) the collections need for `fields`; `known`: each collection's field kinds
    (compound_statement's forms)."""
    names = list(fields)
    wanted: dict[str, str] = {}
    for collection_id in collection_ids:
        for name in names:
            wanted.update(index_statements(dialect=dialect, records_table=records_table, collection_id=collection_id,
                                           field_name=name))  # fmt: skip
        wanted.update(compound_statement(dialect=dialect, records_table=records_table, collection_id=collection_id,
                                         fields=names, known=(known or {}).get(collection_id)))  # fmt: skip
    return wanted


def _wanted_statistics(*, records_table: str, collection_ids: Iterable[int], fields: Iterable[str]) -> dict[str, str]:
    """PostgreSQL: {statistics name: CREATE STATISTICS statement} on the expressions of the fields' indexes."""
    d = dialect_for("postgresql")
    assert isinstance(d, PostgresDialect)
    table = _quote_name(records_table)
    names = list(fields)
    wanted = {}
    for collection_id in collection_ids:
        for name in names:
            path = (("field", name),)
            statistics = f"{index_name_prefix(collection_id)}{_field_hash(name)}_x"
            wanted[statistics] = (
                f'CREATE STATISTICS IF NOT EXISTS "{statistics}" ON ({d.number(path).text}), ({d.string(path).text})'
                f" FROM {table}"
            )
    return wanted


def _sync_statistics(
    cursor, *, records_table: str, collection_ids: Collection[int], fields: Iterable[str], mine: set[int]
) -> bool:
    """PostgreSQL: make the extended statistics of `mine` collections exactly those of `fields` over
    `collection_ids`; whether any was created (their ANALYZE is then due). A failure is logged, never raised:
    statistics only guide the planner."""
    wanted = _wanted_statistics(records_table=records_table, collection_ids=collection_ids, fields=fields)
    cursor.execute(
        "SELECT stxname FROM pg_statistic_ext WHERE stxrelid = %s::regclass AND stxname LIKE 'tr\\_%%'",
        (records_table,),
    )
    existing = {str(row[0]) for row in cursor.fetchall() if _STATISTICS_NAME.match(str(row[0]))}
    ignored = IndexSync()
    for name in sorted(existing - set(wanted)):
        if int(_STATISTICS_NAME.match(name).group(1)) in mine:  # type: ignore[union-attr]
            _run(cursor, f'DROP STATISTICS IF EXISTS "{name}"', name, ignored)
    created = False
    for name, statement in sorted(wanted.items()):
        if name not in existing:
            created = _run(cursor, statement, name, ignored) or created
    return created


@dataclass
class IndexSync:
    """What sync_indexes did: indexes created, dropped, and those that failed (name → the engine's message)."""

    created: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


def _existing(cursor, dialect: str, records_table: str) -> dict[str, bool]:
    """The module's indexes on the records table: name → valid (PostgreSQL: not left invalid by a failed
    concurrent build)."""
    if dialect == "postgresql":
        cursor.execute(
            "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
            " WHERE i.indrelid = %s::regclass AND c.relname LIKE 'tr\\_%%'",
            (records_table,),
        )
    else:
        cursor.execute(
            "SELECT name, 1 FROM sqlite_master WHERE type = 'index' AND tbl_name = %s"
            " AND name LIKE 'tr\\_%%' ESCAPE '\\'",
            (records_table,),
        )
    return {str(name): bool(valid) for name, valid in cursor.fetchall() if _NAME.match(str(name))}


def indexed_collection_ids(cursor, *, dialect: str, records_table: str) -> set[int]:
    """The collections that have at least one of this module's indexes (a sync drops those of deleted ones)."""
    return {int(_NAME.match(name).group(1)) for name in _existing(cursor, dialect, records_table)}  # type: ignore[union-attr]


def sync_indexes(
    cursor,
    *,
    dialect: str,
    records_table: str,
    collection_ids: Collection[int],
    fields: Iterable[str],
    in_transaction: bool,
    drop_collections: Collection[int] = (),
) -> IndexSync:
    """Make the indexes of `collection_ids` exactly those of `fields`: create the missing ones, drop the others
    of these collections and every index of `drop_collections` (collections deleted). Idempotent.

    On PostgreSQL, CONCURRENTLY: `in_transaction` must be False (ValueError otherwise). A statement that fails
    does not stop the others: it is logged and listed in `failed`, and an index its failure left invalid is
    dropped, so the next run builds it again."""
    concurrent = dialect == "postgresql"
    if concurrent and in_transaction:
        raise ValueError("PostgreSQL builds the record indexes CONCURRENTLY, which cannot run inside a transaction")
    wanted_fields = list(fields)
    known = {c: field_kinds(cursor, c) for c in collection_ids} if concurrent and len(wanted_fields) > 1 else None
    wanted = wanted_indexes(dialect=dialect, records_table=records_table, collection_ids=collection_ids,
                            fields=wanted_fields, known=known)  # fmt: skip
    mine = {int(c) for c in collection_ids} | {int(c) for c in drop_collections}
    existing = _existing(cursor, dialect, records_table)
    result = IndexSync()
    drops = [
        name
        for name, valid in existing.items()
        if int(_NAME.match(name).group(1)) in mine and (name not in wanted or not valid)  # type: ignore[union-attr]
    ]
    for name in sorted(drops):
        if _run(cursor, _drop(name, concurrent), name, result):
            result.dropped.append(name)
    for name, statement in sorted(wanted.items()):
        if existing.get(name):
            continue
        if concurrent:
            statement = statement.replace("CREATE INDEX IF NOT EXISTS", "CREATE INDEX CONCURRENTLY IF NOT EXISTS", 1)
        if _run(cursor, statement, name, result):
            result.created.append(name)
        elif concurrent:
            _run(cursor, _drop(name, concurrent), name, IndexSync())  # an invalid leftover: built again next run
    statistics = concurrent and _sync_statistics(
        cursor, records_table=records_table, collection_ids=collection_ids, fields=wanted_fields, mine=mine
    )
    if result.created or statistics:
        _analyze(cursor, records_table, dialect, result.created)
    return result


def _analyze(cursor, records_table: str, dialect: str = "postgresql", created: Collection[str] = ()) -> None:
    """The planners' statistics of the records table, its new expression indexes included. Without them SQLite
    takes the plain `collection_id` index for a statement over one collection (it guesses ~10 rows per key) and
    reads the whole collection for a `max_by` or a sorted slice that the key's index serves; PostgreSQL has no
    statistics of the index's expression until its next autoanalyze. PostgreSQL reads a sample; SQLite, the
    new indexes only once the table's plain indexes have statistics (the whole table the first time), then
    _collection_statistics. A failure is logged; queries answer the same without."""
    try:
        if dialect == "sqlite" and created and _plain_statistics(cursor, records_table)[1]:
            for name in sorted(created):
                cursor.execute(f'ANALYZE "{name}"', ())
        else:
            cursor.execute(f'ANALYZE "{records_table}"', ())
        if dialect == "sqlite":
            _collection_statistics(cursor, records_table)
    except Exception as exc:  # statistics are an optimisation: never fail the sync for them
        logger.warning("ANALYZE of %s after building record indexes failed: %s", records_table, exc)


def _plain_statistics(cursor, records_table: str) -> tuple[list[str], dict[str, str]]:
    """SQLite: the records table's indexes that lead with `collection_id` and are not partial (the plain
    ones: the collection's, its (collection, position) and (collection, key) ones), and the sqlite_stat1 rows
    of those that have one."""
    cursor.execute(f"PRAGMA index_list({_quote_name(records_table)})", ())
    plain = []
    for row in cursor.fetchall():
        name, partial = str(row[1]), int(row[4])
        if partial:
            continue
        cursor.execute(f"PRAGMA index_info({_quote_name(name)})", ())
        columns = [str(info[2]) for info in cursor.fetchall()]
        if columns[:1] == ["collection_id"]:
            plain.append(name)
    cursor.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sqlite_stat1'", ())
    if not plain or not cursor.fetchall():  # no ANALYZE ever ran
        return plain, {}
    marks = ", ".join(["%s"] * len(plain))
    cursor.execute(f"SELECT idx, stat FROM sqlite_stat1 WHERE tbl = %s AND idx IN ({marks})", (records_table, *plain))
    return plain, {str(name): str(stat) for name, stat in cursor.fetchall()}


def _collection_statistics(cursor, records_table: str) -> None:
    """SQLite: the plain indexes' statistics say one collection may hold as many records as the largest index
    of the table covers (sqlite_stat1's second number: rows per `collection_id`). ANALYZE writes the average
    over all collections there, so with many small collections beside a large one its planner reads the large
    one's every record through the `collection_id` index (it expects a few thousand) instead of a field's
    index that finds a few hundred. Overstating a small collection costs little: all its records are few.
    The statistics load at this connection's next statement (`ANALYZE sqlite_schema`) and at the others'
    next schema load (the index build changed the schema)."""
    plain, stats = _plain_statistics(cursor, records_table)
    cursor.execute("SELECT stat FROM sqlite_stat1 WHERE tbl = %s", (records_table,))
    largest = max((int(str(row[0]).split()[0]) for row in cursor.fetchall() if str(row[0])[:1].isdigit()), default=0)
    changed = False
    for name in plain:
        numbers = stats.get(name, "").split()
        if len(numbers) < 2 or not numbers[1].isdigit():
            continue
        wanted = " ".join([str(largest), str(largest), *numbers[2:]])
        if wanted != stats[name]:
            cursor.execute(
                "UPDATE sqlite_stat1 SET stat = %s WHERE tbl = %s AND idx = %s", (wanted, records_table, name)
            )
            changed = True
    if changed:
        cursor.execute("ANALYZE sqlite_schema", ())


def _drop(name: str, concurrent: bool) -> str:
    return f'DROP INDEX {"CONCURRENTLY " if concurrent else ""}IF EXISTS "{name}"'


def _run(cursor, statement: str, name: str, result: IndexSync) -> bool:
    try:
        cursor.execute(statement, ())
    except Exception as exc:  # one index's failure (lock timeout, cancelled build) must not stop the others
        logger.warning("Record index %s: %s failed: %s", name, statement.split(" ON ")[0], exc)
        result.failed[name] = str(exc)
        return False
    return True


# SQLite: a filter's index is chosen by counting records through each candidate index, at most this many, then
# ten times more while none is under the limit.
PROBE_LIMITS = (1_000, 10_000, 100_000)

_SQL_OPERATORS = {"eq": "=", "lt": "<", "lte": "<=", "gt": ">", "gte": ">="}


# Catalogs read (index_catalog), by database file, records table and collection, each with the schema version it was
# read at. SQLite bumps a database's schema_version at every schema change, by any connection of any process, so a
# kept catalog is used only while its version is current. In-memory databases (no file) are not kept. At most
# CATALOGS_KEPT entries: past it the oldest go.
CATALOGS_KEPT = 1024
_catalogs: dict[tuple[str, str, int], tuple[int, dict[str, str]]] = {}


def index_catalog(cursor, *, records_table: str, collection_id: int) -> dict[str, str]:
    """SQLite: {name: CREATE INDEX statement} of the collection's indexes (the catalog's text, as written), read
    once for less_selective_indexes and covering_fields. The catalog's rows are found by a scan of sqlite_master
    (~0.3 ms with 3,000 indexes), so a database file's catalog is kept per collection while its schema version
    stands: then each statement reads only the version (one pragma). A failure is logged and reads none (both then
    choose nothing)."""
    try:
        cursor.execute(
            "SELECT s.schema_version, d.file FROM pragma_schema_version AS s, pragma_database_list AS d"
            " WHERE d.name = 'main'"
        )
        version, file = cursor.fetchone()
        key = (str(file or ""), records_table, int(collection_id))
        kept = _catalogs.get(key) if file else None
        if kept is not None and kept[0] == version:
            return kept[1]
        cursor.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = %s AND name LIKE %s ESCAPE '\\'",
            (records_table, f"tr\\_{int(collection_id)}\\_%"),
        )
        catalog = {str(name): str(sql) for name, sql in cursor.fetchall()}
    except Exception as exc:  # an optimisation: the statement answers the same without it
        logger.warning("Reading the indexes of collection %s failed: %s", collection_id, exc)
        return {}
    if file:
        while len(_catalogs) >= CATALOGS_KEPT:
            _catalogs.pop(next(iter(_catalogs)), None)
        _catalogs[key] = (version, catalog)
    return catalog


def less_selective_indexes(
    cursor,
    *,
    records_table: str,
    collection_id: int,
    tests: Iterable[FieldTest],
    catalog: Mapping[str, str] | None = None,
) -> frozenset[str]:
    """SQLite: of the fields whose tests (plan.field_tests) a filter ANDs, those whose index the statement should
    not read (render's `unindexed`), so that SQLite reads the one that finds the fewest records.

    Its planner cannot tell: SQLite is built here without STAT4, so sqlite_stat1 gives it only the average
    number of records per value of an index, and a range (`total > 998.5`) it takes to keep a quarter of the
    collection whatever its bounds: it reads the index of an equality that keeps a fifth (`status ==
    'shipped'`, 200,000 of 1,000,000 records, each one's JSON parsed) rather than the range's few hundred.
    So each field that has an index is counted through it, up to a limit (PROBE_LIMITS, raised tenfold while no
    field is under it); the fewest wins. When every field reaches the last limit nothing is chosen (the
    planner's choice stands; any index then reads at least that many records). A count reads index entries
    only (~0.15 µs each), a small share of the statement that then reads at least as many records' JSON
    (~5-15 µs each). Only the plan changes, never the answer. The counts read a snapshot of their own; a
    failure is logged and chooses nothing. `catalog`: index_catalog's, when the caller read it."""
    by_field = _by_field(tests)
    if len(by_field) < 2:
        return frozenset()
    names = {name: f"{index_name_prefix(collection_id)}{_field_hash(name)}" for name in by_field}
    if catalog is None:
        catalog = index_catalog(cursor, records_table=records_table, collection_id=collection_id)
    try:
        if _compound_serves(catalog, records_table, by_field) is not None:
            return frozenset()  # its planner reads the compound index, which finds fewer than any field's
        indexed = [name for name in by_field if names[name] in catalog]
        if len(indexed) < 2:
            return frozenset()
        d = SQLiteDialect()
        table = _quote_name(records_table)
        for limit in PROBE_LIMITS:
            counts: dict[str, int] = {}
            for name in indexed:
                value = d.value((("field", name),)).text
                for test in by_field[name]:
                    cursor.execute(
                        f'SELECT count(*) FROM (SELECT 1 FROM {table} INDEXED BY "{names[name]}"'
                        f" WHERE collection_id = {int(collection_id)} AND {value} {_SQL_OPERATORS[test.op]} %s"
                        f" LIMIT {limit})",
                        (test.value,),
                    )
                    counts[name] = min(counts.get(name, limit), int(cursor.fetchone()[0]))
            best = min(indexed, key=lambda name: counts[name])
            if counts[best] < limit:
                return frozenset(indexed) - {best}
    except Exception as exc:  # the choice is an optimisation: the statement answers the same without it
        logger.warning("Counting records through the indexes of collection %s failed: %s", collection_id, exc)
    return frozenset()


def covering_fields(
    cursor,
    *,
    records_table: str,
    collection_id: int,
    tests: Iterable[FieldTest],
    catalog: Mapping[str, str] | None = None,
) -> frozenset[str]:
    """SQLite: the fields of a filter's tests (plan.field_tests) when one index of the collection holds them all
    as its leading columns, each tested with `==` but the last (the index the engine reads for the filter, which
    then finds the filter's ids without reading a record: render's `covered`); else none. One field's own index
    qualifies, as does the compound index (_compound_serves). `catalog`: index_catalog's, when the caller read
    it."""
    by_field = _by_field(tests)
    if not by_field:
        return frozenset()
    if catalog is None:
        catalog = index_catalog(cursor, records_table=records_table, collection_id=collection_id)
    for sql in catalog.values():
        leading = _leading_fields(sql, records_table, tuple(by_field))[: len(by_field)]
        if set(leading) == set(by_field) and all(test.op == "eq" for name in leading[:-1] for test in by_field[name]):
            return frozenset(by_field)
    return frozenset()


def serving_compound(catalog: Mapping[str, str], records_table: str, tests: Iterable[FieldTest]) -> str | None:
    """SQLite: the CREATE INDEX text of the collection's compound index when it serves two or more of a filter's
    tests (plan.field_tests; _compound_serves), else None."""
    return _compound_serves(catalog, records_table, _by_field(tests))


# The renderer's pass-through column lists (render._Lists): a relation naming the record's columns there reads
# nothing of them; what a statement reads is what its other terms compute from them.
_PASSTHROUGH = re.compile(r'\bdata, (?:layout_id AS lay, "key" AS rkey|lay, rkey)\b')
_RECORD_COLUMN = re.compile(r'\b(?:data|lay|rkey|layout_id)\b|"key"')
_FIELD_EXPRESSION = re.compile(r"\(data ->>? '(?:[^']|'')*'\)")


@functools.lru_cache(maxsize=512)  # a statement's text recurs for every call of its query shape
def compound_answers(index_sql: str, records_table: str, sql: str) -> bool:
    """SQLite: the statement `sql` reads nothing of a record but columns of the compound index `index_sql` (its
    CREATE INDEX text): every term over the record's data is a field's value or JSON text that the index holds,
    and the layout and key columns are not read. The engine then answers it from the index alone (SQLite reads
    an indexed expression from a covering index, 3.40 included) in the index's order, rather than reading each
    match's record: ``[?status=='shipped' && total > `500`].id`` over 100,000 records with `status, total, id`
    declared, 9,971 matches: the statement ~12 ms against ~63 ms (docs/tables-at-scale.md). A wrong answer here
    costs time, never a wrong result: both forms answer the same."""
    head = f"ON {_quote_name(records_table)} ("
    start, end = index_sql.find(head), index_sql.rfind(") WHERE collection_id")
    if start < 0 or end < 0:
        return False
    columns = f", {index_sql[start + len(head) : end]}, "
    if ", position, " not in columns:
        return False
    text = _PASSTHROUGH.sub("", sql)
    for match in _RECORD_COLUMN.finditer(text):
        if match.group() != "data":
            return False
        at = match.start() - 1
        term = _FIELD_EXPRESSION.match(text, at)
        if term is None or f", {term.group()}, " not in columns:
            return False
    return True


def _by_field(tests: Iterable[FieldTest]) -> dict[str, list[FieldTest]]:
    """A filter's tests (plan.field_tests) grouped by their field, in the order the fields first come."""
    by_field: dict[str, list[FieldTest]] = {}
    for test in tests:
        by_field.setdefault(test.field, []).append(test)
    return by_field


def _compound_serves(
    catalog: Mapping[str, str], records_table: str, by_field: dict[str, list[FieldTest]]
) -> str | None:
    """SQLite: the CREATE INDEX text of the collection's compound index when it answers two or more of the filter's
    tests by its leading fields (each tested with `==`, the last with any comparison), so it finds fewer records
    than any one field's index; else None. Its columns are read from the statement SQLite keeps
    (compound_statement's text, as written)."""
    for name, sql in catalog.items():
        if not name.endswith("_c"):
            continue
        served = 0
        for field_name in _leading_fields(sql, records_table, tuple(by_field)):
            served += 1
            if any(test.op != "eq" for test in by_field[field_name]):
                break
        if served >= 2:
            return sql
    return None


@functools.lru_cache(maxsize=1024)  # read for every statement that tests fields: the same index, the same fields
def _leading_fields(sql: str, records_table: str, fields: tuple[str, ...]) -> tuple[str, ...]:
    """The index's leading columns (its CREATE INDEX text) that are values of `fields`, in order, up to the first
    column that is none of them."""
    d = SQLiteDialect()
    texts = {d.value((("field", name),)).text: name for name in fields}
    head = f"ON {_quote_name(records_table)} ("
    at = sql.find(head)
    if at < 0:
        return ()
    at += len(head)
    leading: list[str] = []
    while (name := next((texts[text] for text in texts if sql.startswith(text, at)), None)) is not None:
        leading.append(name)
        at += len(d.value((("field", name),)).text) + 2  # the column and ", "
    return tuple(leading)
