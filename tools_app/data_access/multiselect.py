"""A multi-select over a whole collection answered branch by branch (docs/tables-at-scale.md).

`{n: length(@), first: [0]}`, `[length(@), sum([*].total)]` and a pipe into one
(`[?p] | {n: length(@), ids: [:3].id}`) evaluate every branch over the same value: the collection, or the value
of what is piped in. Each branch is then an expression of its own over the collection (`length(@)`, `[0]`;
`[?p] | length(@)`, `[?p] | [:3].id`), which the caller answers by whichever path that expression takes alone
(compiled to SQL, streamed, gathered), and the answer is assembled in the multi-select's order. It is jmespath's:

- jmespath evaluates the branches in order and the first failing branch's error is raised; so is it here: the
  branches are evaluated in order and the first failure (an INVALID_QUERY, or a refusal of the budget) ends the
  read. A branch's INVALID_QUERY names the whole expression, as the evaluator's does.
- a multi-select over `null` is `null`, without evaluating a branch: a split is made only when the value the
  branches run over cannot be `null` (the collection, or what is piped in when its type is known from the
  expression alone: a projection or filter over an array, `sort_by`, `values`, ...), else the caller keeps the
  expression whole.
- over a pipe, what is piped in is evaluated before any branch; each branch `L | X` evaluates `L` first too, so
  when `L` fails, the first branch raises `L`'s error, as the whole expression does.

Each branch is the text of its syntax tree (`text`), and a split is made only when every branch's text parses
back to exactly that tree: the branch the caller evaluates is the one jmespath evaluates.
"""

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import jmespath

from tools_app.data_access import budget
from tools_app.data_access.query import checked_result, compile_expression
from tools_app.kernel.errors import ErrorCode, ToolError

__all__ = ["Split", "answer", "split", "expression_text"]


@dataclass(frozen=True)
class Split:
    """A multi-select's branches as expressions over the collection: `keys` for a hash (None for a list),
    `branches` in the multi-select's order."""

    keys: tuple[str, ...] | None
    branches: tuple[str, ...]


def split(expression: str, kind: str) -> Split | None:
    """The branches of `expression` over a collection of `kind` ("array" or "object") when it is a multi-select
    over the collection or piped into one from a value that is never null (module docstring), else None."""
    found = _split(expression, kind)
    if found is None:
        return None
    current = budget.active()
    if current is not None and any(len(branch) > current.limits.max_query_length for branch in found.branches):
        return None  # a branch's text written out longer than the call allows: the expression stays whole
    return found


@lru_cache(maxsize=1024)
def _split(expression: str, kind: str) -> Split | None:
    parsed = compile_expression(expression).parsed
    piped: dict | None = None
    node = parsed
    if node["type"] == "pipe" and node["children"][1]["type"] in _MULTI_SELECTS:
        piped, node = node["children"]
        if _type_of(piped, kind) is None:
            return None  # what is piped in may be null: the multi-select is then null, not its branches
    if node["type"] not in _MULTI_SELECTS or not node["children"]:
        return None
    if node["type"] == "multi_select_dict":
        keys: tuple[str, ...] | None = tuple(pair["value"] for pair in node["children"])
        trees = [pair["children"][0] for pair in node["children"]]
    else:
        keys, trees = None, list(node["children"])
    if piped is not None:
        trees = [{"type": "pipe", "children": [piped, tree]} for tree in trees]
    branches = []
    for tree in trees:
        try:
            written = expression_text(tree)
            if jmespath.compile(written).parsed != tree:
                return None
        except (_NotWritten, jmespath.exceptions.JMESPathError, RecursionError):
            return None  # not written out, or not back to the same tree: the expression stays whole
        branches.append(written)
    return Split(keys, tuple(branches))


def answer(expression: str, found: Split, evaluate: Callable[[str], Any]) -> Any:
    """The multi-select's value: `evaluate(branch)` for each branch in order (the first failure raised, an
    INVALID_QUERY naming `expression`), assembled and checked as the evaluator checks a whole result."""
    values = []
    for branch in found.branches:
        try:
            values.append(evaluate(branch))
        except ToolError as error:
            raise _naming(error, branch, expression) from error
    result: Any = values if found.keys is None else dict(zip(found.keys, values, strict=True))
    return checked_result(expression, result)


def _naming(error: ToolError, branch: str, expression: str) -> ToolError:
    """`error` of the branch as the whole expression's: its INVALID_QUERY names the expression that was asked."""
    suffix = f"Expression: {branch}"
    if error.code != ErrorCode.INVALID_QUERY or not error.message.endswith(suffix):
        return error
    details = {**error.details, "query": expression} if "query" in error.details else error.details
    return ToolError(error.code, error.message[: -len(suffix)] + f"Expression: {expression}", details)


_MULTI_SELECTS = frozenset({"multi_select_dict", "multi_select_list"})

#
# What is piped in: its type when the expression alone says it is never null
#

_ARRAY_FUNCTIONS = frozenset({"sort_by", "sort", "map", "keys", "values", "to_array"})


def _type_of(node: dict, current: str | None) -> str | None:
    """ "array", "object", "number" or "string" when `node` over a value of type `current` is surely of that type
    (or fails), None when it may be null or its type is not known from the expression."""
    kind = node["type"]
    children = node["children"]
    if current is None:
        return None
    if kind in ("current", "identity"):
        return current
    if kind in ("pipe", "subexpression"):
        for child in children:
            current = _type_of(child, current)
        return current
    if kind in ("projection", "filter_projection"):
        return "array" if _type_of(children[0], current) == "array" else None
    if kind == "value_projection":
        return "array" if _type_of(children[0], current) == "object" else None
    if kind == "flatten":
        return "array" if _type_of(children[0], current) == "array" else None
    if kind == "index_expression" and children[1]["type"] == "slice":
        return "array" if _type_of(children[0], current) == "array" else None
    if kind == "multi_select_list":
        return "array"
    if kind == "multi_select_dict":
        return "object"
    if kind == "function_expression":
        name = node["value"]
        if name in _ARRAY_FUNCTIONS:
            return "array"
        if name == "length":
            return "number"
        if name == "merge":
            return "object"
        if name == "reverse" and len(children) == 1:
            reversed_type = _type_of(children[0], current)
            return reversed_type if reversed_type in ("array", "string") else None
    return None


#
# A syntax tree written out as an expression
#


class _NotWritten(Exception):
    """A node `text` does not write (the split is then not made)."""


_COMPARATORS = {"eq": "==", "ne": "!=", "lt": "<", "lte": "<=", "gt": ">", "gte": ">="}
# The kinds written bare as operands: chains of fields and indexes bind tighter than a comparison, a comparison
# and `!x` tighter than `&&`, `&&` tighter than `||` (both group from the left).
_CHAINED = frozenset({"subexpression", "index_expression"})
_COMPARED = _CHAINED | {"comparator", "not_expression"}
_AND = _COMPARED | {"and_expression"}
_OR = _AND | {"or_expression"}
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Nodes written as one term: nothing binds into them, so they need no parentheses as an operand.
_TERMS = frozenset({"field", "current", "literal", "function_expression", "multi_select_list", "multi_select_dict"})


def expression_text(node: dict) -> str:
    """`node` (jmespath's syntax tree) written as an expression. Parentheses go around every operand that is not
    a term; `_split` parses the text back and uses it only when it gives the same tree."""
    kind = node["type"]
    children = node["children"]
    if kind == "field":
        return _name(node["value"])
    if kind == "current":
        return "@"
    if kind == "literal":
        value = node["value"]
        if isinstance(value, str) and "'" not in value and "\\" not in value:
            return f"'{value}'"
        return "`" + json.dumps(node["value"], ensure_ascii=False).replace("`", "\\`") + "`"
    if kind == "subexpression":
        # After a dot a term or a chain of indexes is read on (brackets bind tighter); nothing else goes there.
        return ".".join([_operand(children[0]), *(expression_text(child) for child in children[1:])])
    if kind == "index_expression":
        return _before_bracket(children[0]) + "".join(expression_text(child) for child in children[1:])
    if kind == "index":
        return f"[{node['value']}]"
    if kind == "slice":
        parts = ["" if part is None else str(part) for part in children]
        return "[" + ":".join(parts if children[2] is not None else parts[:2]) + "]"
    if kind == "projection":
        left, right = children
        if left["type"] == "flatten":
            base = _before_bracket(left["children"][0]) + "[]"
        elif left["type"] == "index_expression" and left["children"][1]["type"] == "slice":
            base = expression_text(left)
        else:
            base = _before_bracket(left) + "[*]"
        return base + _projected(right)
    if kind == "filter_projection":
        left, right, condition = children
        return f"{_before_bracket(left)}[?{expression_text(condition)}]{_projected(right)}"
    if kind == "value_projection":
        left, right = children
        base = "*" if left["type"] == "identity" else f"{_operand(left)}.*"
        return base + _projected(right)
    if kind == "pipe":
        left, right = children
        return f"{expression_text(left)} | {_operand(right) if right['type'] == 'pipe' else expression_text(right)}"
    if kind == "or_expression":
        return f"{_operand(children[0], _OR)} || {_operand(children[1], _AND)}"
    if kind == "and_expression":
        return f"{_operand(children[0], _AND)} && {_operand(children[1], _COMPARED)}"
    if kind == "not_expression":
        return f"!{_operand(children[0])}"
    if kind == "comparator":
        return f"{_operand(children[0], _CHAINED)} {_COMPARATORS[node['value']]} {_operand(children[1], _CHAINED)}"
    if kind == "multi_select_list":
        return "[" + ", ".join(expression_text(child) for child in children) + "]"
    if kind == "multi_select_dict":
        return (
            "{"
            + ", ".join(f"{_name(pair['value'])}: {expression_text(pair['children'][0])}" for pair in children)
            + "}"
        )
    if kind == "function_expression":
        return f"{node['value']}({', '.join(expression_text(child) for child in children)})"
    if kind == "expref":
        return f"&{_operand(children[0], _CHAINED)}"
    raise _NotWritten(kind)


def _name(name: str) -> str:
    return name if _IDENTIFIER.fullmatch(name) else json.dumps(name, ensure_ascii=False)


def _operand(node: dict, bare: frozenset[str] = frozenset()) -> str:
    """`node` as an operand: bare when it is a term or of a kind in `bare` (those that bind at least as
    tightly as the operator it is an operand of), else in parentheses."""
    return expression_text(node) if node["type"] in _TERMS or node["type"] in bare else f"({expression_text(node)})"


def _before_bracket(node: dict) -> str:
    """The left of `[...]`: nothing for the value a bracket starts from (`[0]`, `[*]`, `[?p]`), else the node,
    which a bracket binds to when it is a term or a chain of fields and indexes."""
    if node["type"] == "identity":
        return ""
    if node["type"] == "index_expression":
        return expression_text(node)
    return _operand(node)


def _projected(node: dict) -> str:
    """What a projection applies to each item: nothing, `.x`..., or brackets (`[0]`, `[*]`, `[?p]`)."""
    if node["type"] == "identity":
        return ""
    return expression_text(node) if _leftmost(node)["type"] == "identity" else "." + expression_text(node)


def _leftmost(node: dict) -> dict:
    """The node an expression starts from: its first operand's, down to a leaf."""
    while node["type"] in _CHAINS:
        node = node["children"][0]
    return node


# Nodes that start with their first child's text.
_CHAINS = frozenset({"subexpression", "index_expression", "projection", "filter_projection", "value_projection",
                     "flatten", "pipe", "or_expression", "and_expression", "comparator"})  # fmt: skip
