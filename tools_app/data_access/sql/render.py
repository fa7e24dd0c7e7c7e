"""A plan (tools_app.data_access.sql.plan) written as one SQL statement for SQLite (JSON1) or PostgreSQL (JSONB).

The statement reads the records relation of one collection (`position`, `key`, `data`, `layout_id`; see
docs/tables-at-scale.md) and says, by a first row whose order column is NULL, that the data meets a condition
under which jmespath raises (or under which the engine's answer might not be exact); the runner then leaves the
query to the Python evaluator. The values it returns are JSON text, decoded in Python, so numbers keep their type
(3 vs 3.0) and values their exact digits.

Conditions are rendered as two parts: T, true when the record passes without error, and E, true when
evaluating the condition on it raises. SQL's NULL is "false" everywhere except under NOT, where strict()
turns it into FALSE first.

Both engines compare like Python where it matters: numbers exactly (SQLite compares INTEGER with REAL
exactly; PostgreSQL's numeric is exact), strings by code point (SQLite's BINARY collation on UTF-8;
PostgreSQL's "C" collation). SQLite reads integers beyond 64 bits as REAL: a comparison that meets one
counts as an error condition. Every inlined text (JSON paths, field names) is quoted here; values are
parameters. `%` in inlined text is doubled: statements always run with a parameter tuple.
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tools_app.data_access.sql.codec import record_text
from tools_app.data_access.sql.kinds import COLLECTIONS_TABLE, Known
from tools_app.data_access.sql.plan import (
    And,
    Collect,
    Compare,
    Const,
    Contains,
    Count,
    Elem,
    ElemPath,
    Fold,
    Keys,
    ListPlan,
    Lit,
    Map,
    Not,
    NotCompilable,
    Operand,
    Or,
    Path,
    PathRef,
    Pick,
    Pred,
    Prefix,
    Reverse,
    Scan,
    Slice,
    Sort,
    Truthy,
    ValuePlan,
    Where,
)

__all__ = ["Output", "Rendered", "Sql", "dialect_for", "render"]


class Sql:
    """A fragment of SQL text and its parameters, in order."""

    __slots__ = ("params", "text")

    def __init__(self, text: str, params: Sequence[Any] = ()) -> None:
        self.text = text
        self.params = tuple(params)

    def __repr__(self) -> str:
        return f"Sql({self.text!r}, {self.params!r})"


def fmt(template: str, *parts: "Sql | str") -> Sql:
    """`template` with each `{}` replaced by the next part, its parameters kept in order.

    A template is constant text: names and paths (which may hold braces) always come in as parts.
    """
    pieces = template.split("{}")
    if len(pieces) != len(parts) + 1:
        raise ValueError("parts do not match the template")
    text: list[str] = [pieces[0]]
    params: list[Any] = []
    for part, piece in zip(parts, pieces[1:], strict=True):
        if isinstance(part, Sql):
            text.append(part.text)
            params.extend(part.params)
        else:
            text.append(part)
        text.append(piece)
    return Sql("".join(text), params)


def param(value: Any) -> Sql:
    return Sql("%s", (value,))


def quote_text(text: str) -> str:
    """`text` as an SQL string literal inlined in a statement that runs with parameters."""
    if "\x00" in text:
        raise NotCompilable("a name with a NUL character")
    return "'" + text.replace("'", "''").replace("%", "%%") + "'"


#
# Conditions: constants folded, NULL tracked
#


@dataclass(frozen=True)
class Cond:
    sql: Sql | None = None
    const: bool | None = None
    nullable: bool = False  # may be NULL (meaning false) rather than FALSE


TRUE = Cond(const=True)
FALSE = Cond(const=False)


def cond(sql: Sql, *, nullable: bool = True) -> Cond:
    return Cond(sql=sql, nullable=nullable)


def c_and(left: Cond, right: Cond) -> Cond:
    if left.const is not None:
        return right if left.const else FALSE
    if right.const is not None:
        return left if right.const else FALSE
    assert left.sql is not None
    assert right.sql is not None
    return Cond(fmt("({} AND {})", left.sql, right.sql), nullable=left.nullable or right.nullable)


def c_or(left: Cond, right: Cond) -> Cond:
    if left.const is not None:
        return TRUE if left.const else right
    if right.const is not None:
        return TRUE if right.const else left
    assert left.sql is not None
    assert right.sql is not None
    return Cond(fmt("({} OR {})", left.sql, right.sql), nullable=left.nullable or right.nullable)


def c_not(inner: Cond) -> Cond:
    if inner.const is not None:
        return FALSE if inner.const else TRUE
    return Cond(fmt("(NOT {})", strict(inner)), nullable=False)


def strict(value: Cond) -> Sql:
    """The condition as SQL that is never NULL."""
    if value.const is not None:
        return Sql("TRUE" if value.const else "FALSE")
    assert value.sql is not None
    return fmt("COALESCE({}, FALSE)", value.sql) if value.nullable else value.sql


def as_sql(value: Cond) -> Sql:
    """The condition for a WHERE clause (NULL counts as false there)."""
    if value.const is not None:
        return Sql("TRUE" if value.const else "FALSE")
    assert value.sql is not None
    return value.sql


def kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


NUMBER_OR_STRING = frozenset({"number", "string"})
# What PostgreSQL's `->>` writes for a JSON number (numeric's text: never an exponent) or boolean.
_NON_STRING_TEXT = re.compile(r"-?[0-9]+(\.[0-9]+)?|true|false")


#
# Dialects: how one engine reads a path of the record (`data`)
#


class SQLiteDialect:
    """SQLite's JSON1 over the record's JSON text (`->` gives JSON text, `->>` an SQL value)."""

    name = "sqlite"
    _TYPES = {"number": ("integer", "real"), "string": ("text",)}

    def json_path(self, path: Path) -> str:
        parts = ["$"]
        for kind, step in path:
            if kind == "field":
                if any(char in step for char in '"\\') or any(ord(char) < 0x20 for char in step):
                    raise NotCompilable("a field name SQLite's JSON paths cannot spell")
                parts.append(f'."{step}"')
            elif step >= 0:
                parts.append(f"[{step}]")
            else:
                parts.append(f"[#{step}]")
        return quote_text("".join(parts))

    def type_name(self, path: Path) -> str:
        return f"json_type(data, {self.json_path(path)})"

    def is_kind(self, path: Path, kinds: frozenset[str] | set[str]) -> Cond:
        names = sorted({name for kind in kinds for name in self._TYPES.get(kind, (kind,))})
        listed = ", ".join(f"'{name}'" for name in names)
        if "null" in kinds:
            return cond(Sql(f"IFNULL({self.type_name(path)}, 'null') IN ({listed})"), nullable=False)
        return cond(Sql(f"{self.type_name(path)} IN ({listed})"))

    def value(self, path: Path) -> Sql:
        return Sql(f"(data ->> {self.json_path(path)})")

    number = value
    string = value

    def number_param(self, number: int | float) -> Sql:
        if isinstance(number, int) and not -(2**63) <= number < 2**63:
            raise NotCompilable("an integer literal beyond 64 bits")
        return param(number)

    def string_param(self, text: str) -> Sql:
        return param(text)

    def inexact(self, path: Path) -> Cond:
        # An integer beyond 64 bits reads as REAL: compared, it could match where Python's int does not.
        json_path = self.json_path(path)
        return cond(Sql(f"(json_type(data, {json_path}) = 'integer' AND typeof(data ->> {json_path}) = 'real')"))

    def string_equals(self, path: Path, text: str, value: Sql | None = None) -> Cond:
        # `->>` gives a string's text, and an array's or object's JSON text: only a literal that looks like
        # one of those needs the type checked. The bare comparison is what an expression index serves.
        # `value`: the value's SQL as the caller writes it (_Predicates.unindexed).
        equals = cond(fmt("{} = {}", self.value(path) if value is None else value, param(text)))
        if text[:1] in ("[", "{"):
            return c_and(equals, self.is_kind(path, {"string"}))
        return equals

    def container_equals(self, path: Path, literal: Any) -> Cond:
        if literal == [] or literal == {}:
            kind = "array" if isinstance(literal, list) else "object"
            size = (
                Sql(f"json_array_length(data, {self.json_path(path)}) = 0")
                if kind == "array"
                else Sql(f"(data -> {self.json_path(path)}) = '{{}}'")
            )
            return c_and(self.is_kind(path, {kind}), cond(size))
        raise NotCompilable("SQLite has no deep equality of JSON values")

    def truthy(self, path: Path) -> Cond:
        json_path = self.json_path(path)
        return cond(
            Sql(
                f"(CASE IFNULL(json_type(data, {json_path}), 'null')"
                " WHEN 'true' THEN TRUE WHEN 'integer' THEN TRUE WHEN 'real' THEN TRUE"
                f" WHEN 'text' THEN (data ->> {json_path}) <> ''"
                f" WHEN 'array' THEN json_array_length(data, {json_path}) > 0"
                f" WHEN 'object' THEN (data -> {json_path}) <> '{{}}' ELSE FALSE END)"
            ),
            nullable=False,
        )

    def substring(self, path: Path, text: str) -> Cond:
        return cond(fmt("instr({}, {}) > 0", self.value(path), param(text)))

    def array_any(self, path: Path, literal: Any) -> Cond:
        """Some element of the array at `path` == `literal` by Python's == (True == 1 here)."""
        kind = kind_of(literal)
        if kind == "null":
            match = Sql("e.type = 'null'")
        elif kind == "string":
            match = fmt("(e.type = 'text' AND e.value = {})", param(literal))
        elif kind in ("true", "false"):
            match = Sql(f"(e.type = '{kind}' OR (e.type IN ('integer', 'real') AND e.value = {int(literal)}))")
        else:
            extra = " OR e.type = 'true'" if literal == 1 else " OR e.type = 'false'" if literal == 0 else ""
            match = fmt("((e.type IN ('integer', 'real') AND e.value = {})" + extra + ")", self.number_param(literal))
        return cond(fmt("EXISTS (SELECT 1 FROM json_each(data, {}) AS e WHERE {})", self.json_path(path), match))

    def array_inexact(self, path: Path) -> Cond:
        return cond(
            Sql(
                f"EXISTS (SELECT 1 FROM json_each(data, {self.json_path(path)}) AS e"
                " WHERE e.type = 'integer' AND typeof(e.value) = 'real')"
            )
        )

    def affix(self, ends: bool, text: Sql, affix: Sql) -> Cond:
        if not ends:
            return cond(fmt("substr({}, 1, length({})) = {}", text, affix, affix))
        return cond(
            fmt(
                "(length({}) <= length({}) AND substr({}, length({}) - length({}) + 1) = {})",
                affix,
                text,
                text,
                text,
                affix,
                affix,
            )
        )

    def json(self, path: Path) -> Sql:
        return Sql("data") if not path else Sql(f"(data -> {self.json_path(path)})")

    def number_key(self, path: Path) -> Sql:
        json_path = self.json_path(path)
        return Sql(f"(CASE WHEN json_type(data, {json_path}) IN ('integer', 'real') THEN data ->> {json_path} END)")

    def string_key(self, path: Path) -> Sql:
        json_path = self.json_path(path)
        return Sql(f"(CASE WHEN json_type(data, {json_path}) = 'text' THEN data ->> {json_path} END)")

    def greatest(self, left: str, right: str) -> str:
        return f"MAX({left}, {right})"

    def least(self, left: str, right: str) -> str:
        return f"MIN({left}, {right})"


class PostgresDialect:
    """PostgreSQL's JSONB (`->` gives jsonb, `->>` text); numbers as numeric, strings in the "C" collation."""

    name = "postgresql"
    _TYPES = {"null": "null", "number": "number", "string": "string", "array": "array", "object": "object"}

    def node(self, path: Path) -> str:
        return self._step(path, "->")

    def text(self, path: Path) -> str:
        return self._step(path, "->>") if path else "(data #>> '{}')"

    def _step(self, path: Path, operator: str) -> str:
        """The jsonb (`->`) or text (`->>`) at `path`. An index applies to arrays only: on a scalar, JSONB's
        `-> 0` gives the scalar itself, where JMESPath gives null."""
        if not path:
            return "data"
        parent = self.node(path[:-1])
        kind, step = path[-1]
        if kind == "field":
            return f"({parent} {operator} {quote_text(step)})"
        return f"(CASE WHEN jsonb_typeof({parent}) = 'array' THEN {parent} {operator} {int(step)} END)"

    def is_kind(self, path: Path, kinds: frozenset[str] | set[str]) -> Cond:
        node = self.node(path)
        parts = []
        named = sorted(self._TYPES[kind] for kind in kinds if kind in self._TYPES)
        if named:
            listed = ", ".join(f"'{name}'" for name in named)
            if "null" in kinds:
                parts.append(cond(Sql(f"COALESCE(jsonb_typeof({node}), 'null') IN ({listed})"), nullable=False))
            else:
                parts.append(cond(Sql(f"jsonb_typeof({node}) IN ({listed})")))
        for boolean in ("true", "false"):
            if boolean in kinds:
                parts.append(cond(Sql(f"{node} = '{boolean}'::jsonb")))
        result = FALSE
        for part in parts:
            result = c_or(result, part)
        return result

    def number(self, path: Path) -> Sql:
        node = self.node(path)
        return Sql(f"(CASE WHEN jsonb_typeof({node}) = 'number' THEN {self.text(path)}::numeric END)")

    def string(self, path: Path) -> Sql:
        return Sql(f'{self.text(path)} COLLATE "C"')

    def number_param(self, number: int | float) -> Sql:
        return Sql("%s::numeric", (record_text(number, dialect=self.name),))

    def string_param(self, text: str) -> Sql:
        return param(text)

    def inexact(self, path: Path) -> Cond:
        return FALSE

    def string_equals(self, path: Path, text: str, value: Sql | None = None) -> Cond:
        # The comparison first: it is the expression an index on the field serves. `->>` gives a string's text,
        # and a number's, a boolean's, an array's or an object's JSON text (a null is NULL): only a literal that
        # looks like one of those needs the type checked. `value`: as SQLiteDialect's.
        equals = cond(fmt("{} = {}", self.string(path) if value is None else value, param(text)))
        if _NON_STRING_TEXT.fullmatch(text) or text[:1] in ("[", "{"):
            return c_and(equals, self.is_kind(path, {"string"}))
        return equals

    def container_equals(self, path: Path, literal: Any) -> Cond:
        if _holds_bool_or_unit(literal, top=True):
            # Inside arrays and objects Python's == finds true == 1 and false == 0; JSONB's = does not.
            raise NotCompilable("deep equality with booleans, 0 or 1 inside")
        return cond(fmt("{} = {}::jsonb", self.node(path), param(record_text(literal, dialect=self.name))))

    def truthy(self, path: Path) -> Cond:
        node = self.node(path)
        return cond(
            Sql(
                f"COALESCE({node} NOT IN ('null'::jsonb, 'false'::jsonb, '\"\"'::jsonb, '[]'::jsonb, '{{}}'::jsonb),"
                " FALSE)"
            ),
            nullable=False,
        )

    def substring(self, path: Path, text: str) -> Cond:
        return cond(fmt("strpos({}, {}) > 0", self.text(path), param(text)))

    def array_any(self, path: Path, literal: Any) -> Cond:
        kind = kind_of(literal)
        if kind in ("true", "false"):
            match = Sql(f"(e.v = '{kind}'::jsonb OR e.v = '{int(literal)}'::jsonb)")
        else:
            match = fmt("e.v = {}::jsonb", param(record_text(literal, dialect=self.name)))
            if kind == "number" and literal in (0, 1):
                boolean = Sql("'true'::jsonb" if literal == 1 else "'false'::jsonb")
                match = fmt("({} OR e.v = {})", match, boolean)
        node = self.node(path)
        return cond(
            fmt(
                "EXISTS (SELECT 1 FROM jsonb_array_elements(CASE WHEN jsonb_typeof({}) = 'array' THEN {} END) AS e(v)"
                " WHERE {})",
                node,
                node,
                match,
            )
        )

    def array_inexact(self, path: Path) -> Cond:
        return FALSE

    def affix(self, ends: bool, text: Sql, affix: Sql) -> Cond:
        if not ends:
            return cond(fmt("starts_with({}, {})", text, affix))
        return cond(fmt("right({}, length({})) = {}", text, affix, affix))

    def json(self, path: Path) -> Sql:
        return Sql(f"{self.node(path)}::text")

    def number_key(self, path: Path) -> Sql:
        return self.number(path)

    def string_key(self, path: Path) -> Sql:
        return Sql(f"(CASE WHEN jsonb_typeof({self.node(path)}) = 'string' THEN {self.text(path)} END) COLLATE \"C\"")

    def greatest(self, left: str, right: str) -> str:
        return f"GREATEST({left}, {right})"

    def least(self, left: str, right: str) -> str:
        return f"LEAST({left}, {right})"


Dialect = SQLiteDialect | PostgresDialect
_DIALECTS: dict[str, Dialect] = {"sqlite": SQLiteDialect(), "postgresql": PostgresDialect()}


def dialect_for(name: str) -> Dialect:
    try:
        return _DIALECTS[name]
    except KeyError:
        raise ValueError(f"no SQL dialect {name!r} (sqlite, postgresql)") from None


def _holds_bool_or_unit(value: Any, *, top: bool = False) -> bool:
    """Whether a boolean, or a number equal to 0 or 1, sits inside the array or object `value`."""
    if isinstance(value, list):
        return any(_holds_bool_or_unit(item) for item in value)
    if isinstance(value, dict):
        return any(_holds_bool_or_unit(item) for item in value.values())
    if top:
        return False
    return isinstance(value, bool) or (isinstance(value, int | float) and value in (0, 1))


#
# Predicates: (T, E)
#


class _Predicates:
    def __init__(self, dialect: Dialect, known: Known | None = None, unindexed: frozenset[str] = frozenset()) -> None:
        self.d = dialect
        self.known = known
        self.unindexed = unindexed

    def unindexed_form(self, path: Path, value: Sql) -> Sql:
        """A top-level field's value in a test, as written for the engine: for a field of `unindexed`, behind a
        unary plus, which keeps its value and the answer but no longer matches the field's expression index
        (SQLite's planner then cannot read that index for this test: tools_app.data_access.sql.indexes)."""
        if len(path) == 1 and path[0][0] == "field" and path[0][1] in self.unindexed:
            return fmt("+{}", value)
        return value

    def field_kinds(self, path: Path) -> frozenset[str] | None:
        """The kinds the value at `path` may have by the collection's facts (a top-level field); None: any."""
        if self.known is None:
            return None
        if not path:
            return self.known.records
        if len(path) != 1 or path[0][0] != "field":
            return None
        return self.known.field(path[0][1])

    def kind_test(self, path: Path, kinds: frozenset[str] | set[str]) -> Cond:
        """The value at `path` is of one of `kinds`: constant where the facts decide it."""
        held = self.field_kinds(path)
        if held is not None:
            held = held - {"wide"}
            if held <= kinds:
                return TRUE
            if not held & kinds:
                return FALSE
        return self.d.is_kind(path, kinds)

    def only(self, path: Path, kind: str) -> bool:
        """By the facts, the value at `path` is always of `kind` or null (a comparison's SQL is NULL on null)."""
        held = self.field_kinds(path)
        return held is not None and held - {"wide"} <= {kind, "null"}

    def guarded(self, left: PathRef, kind: str, test: Cond) -> Cond:
        """`test` (NULL where the value is null) where the value is of `kind`: the type check dropped when the
        facts say the value is never of another kind."""
        return test if self.only(left.path, kind) else c_and(self.is_(left, {kind}), test)

    def index_only(self, pred: Pred, fields: frozenset[str]) -> bool:
        """The filter is `&&`ed comparisons of `fields` that compare() renders as the bare indexed value against
        a parameter, with no error condition (no type check: the facts rule it out), so an index holding those
        fields' values answers it without reading a record (SQLite: tools_app.data_access.sql.indexes.
        covering_fields). Decided from compare()'s own rendering, so the two cannot disagree."""
        if isinstance(pred, And):
            return self.index_only(pred.left, fields) and self.index_only(pred.right, fields)
        if not isinstance(pred, Compare) or pred.op == "ne":
            return False
        op, left, right = pred.op, pred.left, pred.right
        if isinstance(left, Lit):
            op, left, right = self._FLIPPED[op], right, left
        if not isinstance(left, PathRef) or not isinstance(right, Lit):
            return False
        path = left.path
        if len(path) != 1 or path[0][0] != "field" or path[0][1] not in fields or path[0][1] in self.unindexed:
            return False
        held = self.field_kinds(path)
        if held is None or "wide" in held:  # the facts must rule out type checks (and integers past 64 bits)
            return False
        true, error = self.compare(pred)
        column = self.d.number(path) if kind_of(right.value) == "number" else self.d.string(path)
        bare = f"{column.text} {self._SQL_OPERATORS.get(op, '=')} %s"
        return error.const is False and true.sql is not None and true.sql.text == bare

    def render(self, pred: Pred) -> tuple[Cond, Cond]:
        if isinstance(pred, Const):
            return (TRUE if pred.value else FALSE), FALSE
        if isinstance(pred, Truthy):
            return self.d.truthy(pred.path), FALSE
        if isinstance(pred, And):
            left_true, left_error = self.render(pred.left)
            right_true, right_error = self.render(pred.right)
            return c_and(left_true, right_true), c_or(left_error, c_and(left_true, right_error))
        if isinstance(pred, Or):
            left_true, left_error = self.render(pred.left)
            right_true, right_error = self.render(pred.right)
            return c_or(left_true, right_true), c_or(left_error, c_and(c_not(left_true), right_error))
        if isinstance(pred, Not):
            inner_true, inner_error = self.render(pred.inner)
            return c_not(inner_true), inner_error
        if isinstance(pred, Compare):
            return self.compare(pred)
        if isinstance(pred, Contains):
            return self.contains(pred)
        return self.prefix(pred)

    def candidates(self, pred: Pred) -> Cond:
        """T OR E (the records that pass or raise), factored so that an indexable first conjunct stays first:
        C(a && b) = (T(a) AND C(b)) OR E(a); C(a || b) = C(a) OR C(b)."""
        if isinstance(pred, And):
            left_true, left_error = self.render(pred.left)
            return c_or(c_and(left_true, self.candidates(pred.right)), left_error)
        if isinstance(pred, Or):
            return c_or(self.candidates(pred.left), self.candidates(pred.right))
        true, error = self.render(pred)
        return c_or(true, error)

    # Operands

    def is_(self, operand: Operand, kinds: frozenset[str] | set[str]) -> Cond:
        if isinstance(operand, Lit):
            return TRUE if kind_of(operand.value) in kinds else FALSE
        return self.kind_test(operand.path, kinds)

    def number(self, operand: Operand) -> Sql:
        if isinstance(operand, Lit):
            return self.d.number_param(operand.value)
        return self.unindexed_form(operand.path, self.d.number(operand.path))

    def string(self, operand: Operand) -> Sql:
        if isinstance(operand, Lit):
            return self.d.string_param(operand.value)
        return self.unindexed_form(operand.path, self.d.string(operand.path))

    def inexact(self, operand: Operand) -> Cond:
        if isinstance(operand, Lit):
            return FALSE
        held = self.field_kinds(operand.path)
        return FALSE if held is not None and "wide" not in held else self.d.inexact(operand.path)

    # Comparisons

    _FLIPPED = {"eq": "eq", "ne": "ne", "lt": "gt", "gt": "lt", "lte": "gte", "gte": "lte"}
    _SQL_OPERATORS = {"lt": "<", "lte": "<=", "gt": ">", "gte": ">="}

    def compare(self, pred: Compare) -> tuple[Cond, Cond]:
        op, left, right = pred.op, pred.left, pred.right
        if isinstance(left, Lit):  # the path on the left (evaluating a path has no effect to keep in order)
            op, left, right = self._FLIPPED[op], right, left
        assert isinstance(left, PathRef)
        if op in ("eq", "ne"):
            equal, error = self.equals(left, right)
            return (equal if op == "eq" else c_not(equal)), error
        sql_op = self._SQL_OPERATORS[op]
        if isinstance(right, Lit):
            kind = kind_of(right.value)
            if kind == "number":
                test = cond(fmt("{} " + sql_op + " {}", self.number(left), self.number(right)))
                return self.guarded(left, "number", test), c_or(self.is_(left, {"string"}), self.inexact(left))
            if kind == "string":
                test = cond(fmt("{} " + sql_op + " {}", self.string(left), self.string(right)))
                return self.guarded(left, "string", test), self.is_(left, {"number"})
            return FALSE, FALSE
        numbers = c_and(self.is_(left, {"number"}), self.is_(right, {"number"}))
        strings = c_and(self.is_(left, {"string"}), self.is_(right, {"string"}))
        number_test = cond(fmt("{} " + sql_op + " {}", self.number(left), self.number(right)))
        string_test = cond(fmt("{} " + sql_op + " {}", self.string(left), self.string(right)))
        mixed = c_or(
            c_and(self.is_(left, {"number"}), self.is_(right, {"string"})),
            c_and(self.is_(left, {"string"}), self.is_(right, {"number"})),
        )
        return (
            c_or(c_and(numbers, number_test), c_and(strings, string_test)),
            c_or(mixed, c_or(self.inexact(left), self.inexact(right))),
        )

    def equals(self, left: PathRef, right: Operand) -> tuple[Cond, Cond]:
        """jmespath's _equals: Python's == except that 0/1 never equal false/true (at the top level)."""
        if isinstance(right, Lit):
            literal = right.value
            kind = kind_of(literal)
            if kind in ("null", "true", "false"):
                return self.is_(left, {kind}), FALSE
            if kind == "number":
                test = cond(fmt("{} = {}", self.number(left), self.number(right)))
                return self.guarded(left, "number", test), self.inexact(left)
            if kind == "string":
                if self.only(left.path, "string"):
                    return cond(fmt("{} = {}", self.string(left), self.string(right))), FALSE
                return self.d.string_equals(left.path, literal, self.string(left)), FALSE
            return self.d.container_equals(left.path, literal), FALSE
        same = FALSE
        for kind in ("null", "true", "false"):
            same = c_or(same, c_and(self.is_(left, {kind}), self.is_(right, {kind})))
        numbers = c_and(
            c_and(self.is_(left, {"number"}), self.is_(right, {"number"})),
            cond(fmt("{} = {}", self.number(left), self.number(right))),
        )
        strings = c_and(
            c_and(self.is_(left, {"string"}), self.is_(right, {"string"})),
            cond(fmt("{} = {}", self.string(left), self.string(right))),
        )
        containers = c_or(
            c_and(self.is_(left, {"array"}), self.is_(right, {"array"})),
            c_and(self.is_(left, {"object"}), self.is_(right, {"object"})),
        )
        # Two arrays or two objects: deep equality is the evaluator's (an error condition sends it there).
        return c_or(same, c_or(numbers, strings)), c_or(containers, c_or(self.inexact(left), self.inexact(right)))

    def contains(self, pred: Contains) -> tuple[Cond, Cond]:
        path, literal = pred.subject.path, pred.search.value
        is_array = self.kind_test(path, {"array"})
        in_array = c_and(is_array, self.d.array_any(path, literal))
        if isinstance(literal, str):
            in_string = c_and(self.kind_test(path, {"string"}), self.d.substring(path, literal))
            return c_or(in_string, in_array), c_not(self.kind_test(path, {"string", "array"}))
        # A string subject raises TypeError for a search that is no string, as anything else but an array.
        error = c_not(is_array)
        if kind_of(literal) == "number":
            error = c_or(error, self.d.array_inexact(path))
        return in_array, error

    def prefix(self, pred: Prefix) -> tuple[Cond, Cond]:
        text_ok, affix_ok = self.is_(pred.text, {"string"}), self.is_(pred.affix, {"string"})
        both = c_and(text_ok, affix_ok)
        if both.const is False:
            return FALSE, c_or(c_not(text_ok), c_not(affix_ok))
        test = self.d.affix(pred.ends, self.string(pred.text), self.string(pred.affix))
        return c_and(both, test), c_or(c_not(text_ok), c_not(affix_ok))


#
# Lists and values
#


@dataclass(frozen=True)
class Output:
    """How the runner turns the statement's rows into the answer."""

    kind: str  # list, count, sum, avg, one, keys
    elem: Elem | None = None
    filtered: bool = False  # rows carry their own error flag and keep flag (the single-scan form)
    drop_nulls: bool = False  # a projection's null values are dropped from the decoded list (not by the SQL)
    layout: bool = False  # each row's last column is its record's layout id (_Lists.layout)

    @property
    def columns(self) -> int:
        """The columns of each row of the answer: the order first, then this output's."""
        if self.kind == "count":
            return 3 if self.filtered else 2
        if self.kind == "keys":
            return 2
        if self.kind in ("sum", "avg"):
            return 3
        assert self.elem is not None
        values = 1 if isinstance(self.elem, ElemPath) else len(self.elem.paths)
        return 1 + (2 if self.filtered else 0) + values + self.layout


@dataclass(frozen=True)
class Rendered:
    sql: str
    params: tuple
    output: Output


_COLUMNS = "k, data, lay, rkey"
# The kinds whose `->>` text on PostgreSQL is their JSON text (_Lists.json): a string's is unquoted, a null's NULL.
_SCALAR_TEXT_KINDS = frozenset({"number", "wide", "true", "false"})


class _Lists:
    def __init__(
        self,
        dialect: Dialect,
        table: str,
        collection_id: int,
        known: Known | None = None,
        position_order: bool = False,
        unindexed: frozenset[str] = frozenset(),
        covered: frozenset[str] = frozenset(),
    ) -> None:
        self.d = dialect
        self.position_order = position_order
        self.predicates = _Predicates(dialect, known, unindexed)
        self.table = _quote_name(table)
        self.collection_id = int(collection_id)
        self.covered = covered if dialect.name == "sqlite" and not position_order else frozenset()
        self.rows_read = True  # the statement reads the matches' records (not a count of them): by_rowid()
        # The collection's id inlined (an int): a per-collection partial index (WHERE collection_id = <id>) is
        # used only for a statement that names the same literal (SQLite always; PostgreSQL's generic plans).
        self.base = Sql(
            f'SELECT position AS k, data, layout_id AS lay, "key" AS rkey FROM {_quote_name(table)}'
            f" WHERE collection_id = {int(collection_id)}"
        )
        self.checks: list[Sql] = []
        self.filtered = False  # a filter narrows the rows: see order()

    def select(self, plan: ListPlan) -> Sql:
        """A SELECT of the list's elements (columns k, data, lay, rkey; in order of k)."""
        if isinstance(plan, Scan):
            return self.base
        if isinstance(plan, Where):
            self.filtered = True
            source = self.select(plan.source)
            true, error = self.predicates.render(plan.pred)
            if error.const is not False:
                self.checks.append(fmt("EXISTS (SELECT 1 FROM ({}) AS s WHERE {})", source, strict(error)))
            if source is self.base and true.sql is not None and self.by_rowid_serves(plan.pred, error):
                return self.by_rowid(true)
            return self.narrow(source, true)
        if isinstance(plan, Map):
            source = self.select(plan.source)
            return source if plan.keep_nulls else self.narrow(source, self.present(plan.elem))
        if isinstance(plan, Reverse):
            # Negated, the order column reverses the list and stays unique: what follows orders by it as by any k.
            return fmt("SELECT -k AS k, data, lay, rkey FROM ({}) AS s", self.select(plan.source))
        if isinstance(plan, Sort):
            source = self.select(plan.source)
            self.check_keys(source, plan.key)
            keys = self.order_keys(plan.key, "")
            return fmt("SELECT ROW_NUMBER() OVER (ORDER BY {}, k) AS k, data, lay, rkey FROM ({}) AS s", keys, source)
        return self.slice(plan)

    def by_rowid_serves(self, pred: Pred, error: Cond) -> bool:
        return (
            self.rows_read
            and bool(self.covered)
            and error.const is False
            and self.predicates.index_only(pred, self.covered)
        )

    def by_rowid(self, true: Cond) -> Sql:
        """SQLite: the records a filter keeps, its matches found in an index that answers the whole filter
        (`covered`: the ids only, no record read), then read in rowid order. Read in the index's order instead,
        each match costs a random page read through the page cache; in rowid order the pages come in file order
        ([?status=='shipped' && total > `500`] over 100,000 records, 9,971 matches: ~34 against ~43 ms). A
        filter the index cannot answer alone (or a count, which reads no record) keeps the plain form: there
        the ids' subquery would read every candidate's record once more."""
        return fmt(
            f'SELECT position AS k, data, layout_id AS lay, "key" AS rkey FROM {self.table} WHERE id IN'
            f" (SELECT id FROM {self.table} WHERE collection_id = {self.collection_id} AND {{}})",
            as_sql(true),
        )

    def order(self, column: str) -> str:
        """`column` in an ORDER BY. After a filter on SQLite, `+column`: its planner would rather read the whole
        collection in position order (to skip a sort) than use an index of the filter, as it does not count
        the JSON parsing per row; the unary plus keeps the position index from serving the ORDER BY. With
        `position_order` (no index of the filter's fields exists: every plan reads the records, and a LIMIT in
        position order stops after its page) the position index serves it."""
        return f"+{column}" if self.filtered and self.d.name == "sqlite" and not self.position_order else column

    def narrow(self, source: Sql, keep: Cond) -> Sql:
        if keep.const is True:
            return source
        if source.text.startswith("SELECT position AS k"):  # the base relation: one more conjunct of its WHERE
            return fmt("{} AND {}", source, as_sql(keep))
        return fmt(f"SELECT {_COLUMNS} FROM ({{}}) AS s WHERE {{}}", source, as_sql(keep))

    def present(self, elem: Elem) -> Cond:
        """The element is not null (a projection drops null values; a multi-select of null is null)."""
        path = elem.path if isinstance(elem, ElemPath) else elem.base
        return c_not(self.predicates.kind_test(path, {"null"}))

    def order_keys(self, key: Path, direction: str) -> Sql:
        """The ORDER BY terms of a sort key: numbers (in number order), then strings (by code point); where the
        facts say the key is never a string, the numbers alone, and on SQLite, where they say it is a number or
        null, its bare value (the expression an index on the field serves)."""
        held = self.predicates.field_kinds(key)
        # SQLite's number() is the bare value: right only where the key is never another kind than a number.
        number = self.d.number(key) if self.predicates.only(key, "number") else self.d.number_key(key)
        if held is not None and "string" not in held:
            return fmt("{}" + direction, number)
        return fmt("{}" + direction + ", {}" + direction, number, self.d.string_key(key))

    def check_keys(self, source: Sql, key: Path) -> None:
        """sort_by, min_by, max_by, min, max: every key a number or every key a string (else jmespath raises)."""
        bad = c_or(c_not(self.predicates.kind_test(key, NUMBER_OR_STRING)), self.predicates.inexact(PathRef(key)))
        if bad.const is not False:
            self.checks.append(fmt("EXISTS (SELECT 1 FROM ({}) AS s WHERE {})", source, strict(bad)))
        numbers = self.predicates.kind_test(key, {"number"})
        strings = self.predicates.kind_test(key, {"string"})
        if numbers.const is not False and strings.const is not False:
            self.checks.append(
                fmt(
                    "(EXISTS (SELECT 1 FROM ({}) AS s WHERE {}) AND EXISTS (SELECT 1 FROM ({}) AS s WHERE {}))",
                    source,
                    as_sql(numbers),
                    source,
                    as_sql(strings),
                )
            )

    def slice(self, plan: Slice) -> Sql:
        start, stop, step = plan.start, plan.stop, plan.step
        if isinstance(plan.source, Sort) and step == 1:
            window = self.sorted_window(plan.source, start, stop)
            if window is not None:
                return window
        source = self.select(plan.source)
        if step == 1 and (start is None or start >= 0) and (stop is None or stop >= 0):
            offset = start or 0
            limit = "ALL" if stop is None else str(max(stop - offset, 0))
            if limit == "ALL" and self.d.name == "sqlite":
                limit = "-1"
            return fmt(
                f"SELECT {_COLUMNS} FROM ({{}}) AS s ORDER BY {self.order('k')} LIMIT {limit} OFFSET {offset}", source
            )
        # Python's slice bounds on a list of cnt elements (step > 0).
        lower = self._bound(start, "0")
        upper = self._bound(stop, "cnt")
        window = fmt(
            "SELECT s.*, ROW_NUMBER() OVER (ORDER BY k) - 1 AS rn, COUNT(*) OVER () AS cnt FROM ({}) AS s", source
        )
        stepped = "" if step == 1 else f" AND (rn - {lower}) - {step} * ((rn - {lower}) / {step}) = 0"
        return fmt(f"SELECT {_COLUMNS} FROM ({{}}) AS w WHERE rn >= {lower} AND rn < {upper}{stepped}", window)

    def sorted_window(self, plan: Sort, start: int | None, stop: int | None) -> Sql | None:
        """A contiguous slice of a sorted list (`sort_by(...)[a:b]`) as ORDER BY ... LIMIT over the unsorted
        rows: a slice from the start in the key's order, one from the end (negative bounds) in the exact
        reverse order (each term DESC, then position DESC: NULLs flip with it on both engines). Only the
        window's rows are numbered, so an index on the key serves it and no row of the rest carries its JSON
        through a sort. None for bounds of mixed signs (the numbered form in slice() takes those)."""
        if start is not None and start < 0 and (stop is None or stop < 0):
            last = -start
            skip = 0 if stop is None else -stop
            limit, offset, direction, ties = max(last - skip, 0), skip, " DESC", "k DESC"
        elif (start is None or start >= 0) and stop is not None and stop >= 0:
            offset = start or 0
            limit, direction, ties = max(stop - offset, 0), "", "k"
        else:
            return None
        source = self.select(plan.source)
        self.check_keys(source, plan.key)
        window = fmt(
            f"SELECT {_COLUMNS} FROM ({{}}) AS s ORDER BY {{}}, {ties} LIMIT {limit} OFFSET {offset}",
            source,
            self.order_keys(plan.key, direction),
        )
        return fmt(
            "SELECT ROW_NUMBER() OVER (ORDER BY {}, k) AS k, data, lay, rkey FROM ({}) AS s",
            self.order_keys(plan.key, ""),
            window,
        )

    def _bound(self, value: int | None, default: str) -> str:
        if value is None:
            return default
        if value < 0:
            return self.d.greatest(f"cnt - {-value}", "0")
        return self.d.least(str(value), "cnt")

    # Values

    def outputs(self, elem: Elem) -> Sql:
        """The element's value columns (v0, v1, ...: JSON text), then its layout id where it may be needed
        (layout())."""
        lay = ", lay" if self.layout(elem) else ""
        if isinstance(elem, ElemPath):
            return fmt("{} AS v0" + lay, self.json(elem.path))
        columns = ", ".join(f"{{}} AS v{index}" for index in range(len(elem.paths)))
        return fmt(columns + lay, *(self.json(elem.base + path) for path in elem.paths))

    def json(self, path: Path) -> Sql:
        """The JSON text of the value at `path`. On PostgreSQL, where the facts say it is always a number or a
        boolean (never a string, null or container), its `->>` text: the same text as the jsonb's (numeric's
        and the booleans' own), without a jsonb built and printed per row: about a fifth of the server's time of
        a filter's 9,971 ids (docs/tables-at-scale.md, "Field kinds")."""
        if isinstance(self.d, PostgresDialect):
            held = self.predicates.field_kinds(path)
            if held and held <= _SCALAR_TEXT_KINDS:
                return Sql(self.d.text(path))
        return self.d.json(path)

    def layout(self, elem: Elem) -> bool:
        """Whether the element's rows carry their layout id: only PostgreSQL's records have layouts (JSONB's key
        order restored: tools_app.data_access.sql.codec), and a layout matters only to a value that is an object
        or an array. Where the facts say no projected value can be one, the column is not read: each row's
        integer costs the fetch and the decode at every match (~2 ms of 15 at 10,000 rows)."""
        if self.d.name != "postgresql":
            return False
        paths = [elem.path] if isinstance(elem, ElemPath) else [elem.base + path for path in elem.paths]
        for path in paths:
            held = self.predicates.field_kinds(path)
            if held is None or held & {"array", "object"}:
                return True
        return False

    def output(self, kind: str, elem: Elem, **flags: bool) -> Output:
        return Output(kind, elem, layout=self.layout(elem), **flags)

    def value(self, plan: ValuePlan) -> tuple[Sql, Output]:
        if isinstance(plan, Collect | Count):
            single = self.single_scan(plan)
            if single is not None:
                return single
        if isinstance(plan, Collect):
            elem = plan.source.elem
            if isinstance(plan.source, Map) and isinstance(elem, ElemPath):
                # A projection's last step: its nulls are dropped from the decoded values, not tested per row.
                source = self.select(plan.source.source)
                sql = fmt("SELECT k AS o, {} FROM ({}) AS s", self.outputs(elem), source)
                return sql, self.output("list", elem, drop_nulls=not plan.source.keep_nulls)
            source = self.select(plan.source)
            return fmt("SELECT k AS o, {} FROM ({}) AS s", self.outputs(elem), source), self.output("list", elem)
        if isinstance(plan, Count):
            self.rows_read = False
            return fmt("SELECT 0 AS o, COUNT(*) AS n FROM ({}) AS s", self.select(plan.source)), Output("count")
        if isinstance(plan, Keys):
            return fmt("SELECT k AS o, rkey FROM ({}) AS s", self.select(plan.source)), Output("keys")
        if isinstance(plan, Fold):
            return self.fold(plan)
        return self.pick(plan)

    def single_scan(self, plan: Collect | Count) -> tuple[Sql, Output] | None:
        """A filter straight over the records, then at most a projection: one pass over the rows, each row
        with its own error flag (the filter's E), so no second scan looks for errors."""
        source = plan.source
        mapped = source if isinstance(source, Map) else None
        where = mapped.source if mapped is not None else source
        if not isinstance(where, Where) or not isinstance(where.source, Scan):
            return None
        true, error = self.predicates.render(where.pred)
        if error.const is False:
            return None
        self.filtered = True
        elem = source.elem
        # A projection of one path keeps its non-null values: dropped from the decoded values instead. A map keeps
        # them all.
        projected = mapped is not None and not mapped.keep_nulls
        drop_nulls = isinstance(plan, Collect) and projected and isinstance(elem, ElemPath)
        keep = self.present(elem) if projected and not drop_nulls else TRUE
        candidates = fmt("{} AND {}", self.base, as_sql(self.predicates.candidates(where.pred)))
        if isinstance(plan, Count):
            sql = fmt(
                "SELECT 0 AS o, SUM(CASE WHEN {} THEN 1 ELSE 0 END) AS errors, SUM(CASE WHEN {} THEN 1 ELSE 0 END) AS n"
                " FROM ({}) AS s",
                strict(error),
                strict(keep),
                candidates,
            )
            return sql, Output("count", filtered=True)
        sql = fmt(
            "SELECT k AS o, {} AS err, {} AS keep, {} FROM ({}) AS s",
            strict(error),
            strict(keep),
            self.outputs(elem),
            candidates,
        )
        return sql, self.output("list", elem, filtered=True, drop_nulls=drop_nulls)

    def fold(self, plan: Fold) -> tuple[Sql, Output]:
        assert isinstance(plan.source.elem, ElemPath)
        path = plan.source.elem.path
        source = self.select(plan.source)
        if plan.function in ("sum", "avg"):
            # Summed in Python, in order: float addition is not associative, and Python's sum is the reference.
            is_number = strict(self.predicates.kind_test(path, {"number"}))
            sql = fmt("SELECT k AS o, {} AS ok, {} AS v0 FROM ({}) AS s", is_number, self.json(path), source)
            return sql, Output(plan.function)
        self.check_keys(source, path)
        return self.first_by(source, path, descending=plan.function == "max", elem=plan.source.elem)

    def first_by(self, source: Sql, key: Path, *, descending: bool, elem: Elem) -> tuple[Sql, Output]:
        """The first element (in list order) with the greatest/least key: what Python's max/min return."""
        direction = " DESC" if descending else ""
        if self.d.name == "sqlite" and self.predicates.only(key, "number"):
            # The key is one number term (the facts): its greatest/least value first, from the key's index
            # alone, then the first row holding it in list order. SQLite's index cannot serve `ORDER BY key
            # DESC, k` (the ties' order), so the ORDER BY form would read every row. A null key never gets here
            # with an answer: check_keys flags it.
            number = self.d.number(key)
            best = "MAX" if descending else "MIN"
            sql = fmt(
                "SELECT 0 AS o, {} FROM ({}) AS s WHERE {} = (SELECT "
                + best
                + "({}) FROM ({}) AS b) ORDER BY k LIMIT 1",
                self.outputs(elem),
                source,
                number,
                number,
                source,
            )
            return sql, self.output("one", elem)
        order = fmt("{}, k", self.order_keys(key, direction))
        sql = fmt("SELECT 0 AS o, {} FROM ({}) AS s ORDER BY {} LIMIT 1", self.outputs(elem), source, order)
        return sql, self.output("one", elem)

    def pick(self, plan: Pick) -> tuple[Sql, Output]:
        elem = plan.elem or plan.source.elem
        if plan.how == "index" and isinstance(plan.source, Sort):
            # The element at an index of a sorted list: the one-row window of that index (sorted_window).
            stop = plan.index + 1 if plan.index != -1 else None
            window = self.sorted_window(plan.source, plan.index, stop)
            assert window is not None  # an index's bounds have one sign
            sql = fmt("SELECT 0 AS o, {} FROM ({}) AS s ORDER BY k LIMIT 1", self.outputs(elem), window)
            return sql, self.output("one", elem)
        source = self.select(plan.source)
        if plan.how == "index":
            direction, offset = ("", plan.index) if plan.index >= 0 else (" DESC", -plan.index - 1)
            sql = fmt(
                f"SELECT 0 AS o, {{}} FROM ({{}}) AS s ORDER BY k{direction} LIMIT 1 OFFSET {offset}",
                self.outputs(elem),
                source,
            )
            return sql, self.output("one", elem)
        self.check_keys(source, plan.key)
        return self.first_by(source, plan.key, descending=plan.how == "max_by", elem=elem)


def _quote_name(name: str) -> str:
    if not name.replace("_", "").isalnum() or not name.isascii():
        raise ValueError(f"unexpected table name {name!r}")
    return f'"{name}"'


def render(
    plan: ValuePlan,
    *,
    dialect: str,
    table: str,
    collection_id: int,
    known: Known | None = None,
    position_order: bool = False,
    unindexed: frozenset[str] = frozenset(),
    covered: frozenset[str] = frozenset(),
    window: bool = False,
) -> Rendered:
    """The one statement answering `plan` over collection `collection_id` of the records table `table`;
    `known`: the collection's field kinds (tools_app.data_access.sql.kinds), whose type checks it drops;
    `position_order`: the filter's fields have no index, so a filtered list is read in position order (_Lists.order);
    `unindexed`: record fields whose tests the engine must not answer from their index (_Predicates.unindexed_form);
    `covered`: SQLite, record fields one index holds, which the engine reads for the filter (_Lists.by_rowid).
    The answer is the same either way; only the engine's plan differs.

    `window`: a list answer (no filter: its checks and its flag still look at every item) read from an offset, at
    most a count of items: the statement's last two parameters, (count, offset), are not in `Rendered.params` but
    given by whoever runs it (sql_query.run_sql's `rows`).

    Each row's first column is its order; a first row whose order is NULL (its other columns too) says the error
    flag is set (see the module docstring).
    """
    if unindexed and dialect != "sqlite":
        raise ValueError("only SQLite's statements keep a field's tests from its index")
    lists = _Lists(dialect_for(dialect), table, collection_id, known, position_order, unindexed, covered)
    main, output = lists.value(plan)
    if window:
        if output.kind != "list" or output.filtered or output.drop_nulls:
            raise ValueError("only a list answer without a filter or dropped nulls is read by windows")
        main = fmt(f"{{}} ORDER BY {lists.order('o')} LIMIT %s OFFSET %s", main)
    checks = list(lists.checks)
    if known is not None:
        # The facts the statement relies on are still the collection's (read in the statement's own snapshot):
        # else a record written since may hold a kind they lacked, and the evaluator answers.
        cast = "::jsonb" if dialect == "postgresql" else ""
        checks.insert(
            0,
            fmt(
                f'(NOT COALESCE((SELECT field_kinds FROM "{COLLECTIONS_TABLE}" WHERE id = {int(collection_id)})'
                f" = {{}}{cast}, FALSE))",
                param(known.text),
            ),
        )
    # One statement, so the checks and the answer read the same snapshot; the checks run once. The error flag is
    # not a column of every row: where it is set, one more row, all NULL, sorts first (no row of the answer has
    # a NULL order); the answer's rows follow. (In the single-scan form each row carries its own error flag
    # besides.) Its arm comes first, so that a window's (count, offset) stay the statement's last parameters.
    flag = fmt(" OR ".join(["{}"] * len(checks)), *checks) if checks else Sql("FALSE")
    nulls = ", NULL" * (output.columns - 1)
    first = " NULLS FIRST" if dialect == "postgresql" else ""  # SQLite's NULLs sort first already
    statement = fmt(
        f"SELECT u.* FROM (SELECT NULL AS o{nulls} WHERE {{}} UNION ALL SELECT m.* FROM ({{}}) AS m) AS u"
        f" ORDER BY {lists.order('u.o')}{first}",
        flag,
        main,
    )
    return Rendered(statement.text, statement.params, output)
