"""JSON Schemas that cannot reach out: THE save-time rules and THE validator used at call time.

A tool's input and output schemas are written by users, and the arguments checked against them by callers.
jsonschema, left to its defaults, fetches any `$ref` it cannot resolve (over HTTP, or a `file:` URL) and
matches `pattern` with Python's backtracking `re`. So:

- `schema_problems` is the save-time check (tools_app.validators.validate_json_schema, so every surface
  that saves a tool): `$ref` / `$dynamicRef` only point inside the schema (`#...`) and resolve there;
  `$schema` only names Draft 2020-12, at the root; `$id` only at the root (no embedded resources);
  every `pattern` and `patternProperties` key is one the linear-time engine runs (tools_app.kernel.patterns);
  `unevaluatedProperties` is not combined with `patternProperties` (jsonschema matches those with `re`).
- `validator_for` builds the one validator used at call time. Its registry retrieves nothing (a
  reference outside the schema is unresolvable, never fetched), its pattern keywords run on RE2,
  `uniqueItems` hashes each item once (jsonschema compares objects pairwise: quadratic), and it
  first applies the same rules to the schema: a tool stored before these rules existed is refused with
  UnsafeSchema, never fetched.
- `format` stays an annotation (Draft 2020-12's default): no format, `regex` included, is asserted.

No database, no settings: pure functions of JSON.
"""

import json
import re
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator, ValidationError, validators
from referencing import Registry
from referencing.exceptions import NoSuchResource, Unresolvable
from referencing.jsonschema import DRAFT202012

from tools_app.kernel.patterns import PatternError, compile_pattern

__all__ = ["DIALECT", "UnsafeSchema", "schema_problems", "validator_for"]

DIALECT = "https://json-schema.org/draft/2020-12/schema"
_DIALECTS = frozenset({DIALECT, DIALECT + "#"})
_REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef")
# Keywords whose value is a map of names to subschemas: the names are not keywords.
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
# Keywords whose value is data, not a schema: a "$ref" key in there is not a reference.
_DATA = frozenset({"const", "enum", "default", "examples"})


class UnsafeSchema(ValueError):
    """A schema the call-time validator refuses to apply; `problems` says why (as schema_problems)."""

    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems))
        self.problems = problems


def _refuse_retrieval(uri: str):
    """The registry's `retrieve`: nothing outside the schema is ever fetched, whatever the URI."""
    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]  # attrs classes: mypy misses their fields


_NO_RETRIEVAL: Registry = Registry(retrieve=_refuse_retrieval)  # type: ignore[call-arg]


def _where(path: list[str | int]) -> str:
    return "/".join(str(part) for part in path) or "(root)"


def _schemas(schema: Any) -> list[tuple[list[str | int], dict[str, Any]]]:
    """Every schema object inside `schema` with its path (iterative: any nesting json.loads produced)."""
    found: list[tuple[list[str | int], dict[str, Any]]] = []
    stack: list[tuple[list[str | int], Any]] = [([], schema)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, list):
            stack.extend((path + [index], item) for index, item in enumerate(node))
            continue
        if not isinstance(node, dict):
            continue
        found.append((path, node))
        for key, value in node.items():
            if key in _DATA:
                continue
            if key in _SCHEMA_MAPS and isinstance(value, dict):
                stack.extend((path + [key, name], sub) for name, sub in value.items())
            elif isinstance(value, dict | list):
                stack.append((path + [key], value))
    return found


def _pattern_problem(pattern: Any, where: str) -> str | None:
    if not isinstance(pattern, str):
        return None  # check_schema reports it
    try:
        _compiled(pattern)
    except re.error as exc:
        return f"The pattern {pattern!r} at {where} is not a valid regular expression ({exc})."
    except PatternError as exc:
        return f"The pattern {pattern!r} at {where} is refused: it uses {exc.what} (patterns run in linear time)."
    return None


def schema_problems(schema: Any) -> list[str]:
    """What makes `schema` (a JSON Schema that Draft 2020-12 accepts) unsafe to apply: [] when nothing."""
    problems: list[str] = []
    references: list[tuple[str, str]] = []
    has_unevaluated = has_pattern_properties = False
    for path, node in _schemas(schema):
        where = _where(path)
        for keyword in _REFERENCES:
            target = node.get(keyword)
            if not isinstance(target, str):
                continue
            if not target.startswith("#"):
                problems.append(
                    f"{keyword} {target!r} at {where} points outside the schema: only references inside it "
                    "(starting with '#') are allowed, and nothing is ever fetched."
                )
            elif keyword != "$recursiveRef":
                references.append((target, where))
        if "$schema" in node and (path or node["$schema"] not in _DIALECTS):
            problems.append(f"$schema at {where} is refused: only {DIALECT!r}, at the root, is allowed.")
        if "$id" in node and path:
            problems.append(f"$id at {where} is refused: a schema is one resource ($id only at the root).")
        if "pattern" in node:
            problem = _pattern_problem(node["pattern"], f"{where}/pattern")
            if problem:
                problems.append(problem)
        pattern_properties = node.get("patternProperties")
        if isinstance(pattern_properties, dict):
            has_pattern_properties = True
            for pattern in pattern_properties:
                problem = _pattern_problem(pattern, f"{where}/patternProperties")
                if problem:
                    problems.append(problem)
        has_unevaluated = has_unevaluated or "unevaluatedProperties" in node
    if has_unevaluated and has_pattern_properties:
        problems.append("unevaluatedProperties cannot be combined with patternProperties in one schema.")
    if not problems and references and isinstance(schema, dict):
        resolver = _NO_RETRIEVAL.resolver_with_root(DRAFT202012.create_resource(schema))
        for target, where in references:
            try:
                resolver.lookup(target)
            except Unresolvable:
                problems.append(f"$ref {target!r} at {where} points to nothing inside the schema.")
    return problems


#
# The call-time validator: RE2 for every keyword jsonschema would match with `re`.
#


@lru_cache(maxsize=1024)
def _compiled(pattern: str):
    # Case-sensitive, Python `re` semantics (what jsonschema's re.search gave), matched in linear time.
    return compile_pattern(pattern, ignore_case=False)


def _search(pattern: str, text: str) -> bool:
    return _compiled(pattern).search(text) is not None


def _pattern(validator, pattern, instance, schema):
    if validator.is_type(instance, "string") and not _search(pattern, instance):
        # jsonschema's message, with a long string cut: the whole argument would be echoed back otherwise.
        shown = repr(instance) if len(instance) <= 100 else f"{instance[:100]!r}... ({len(instance)} characters)"
        yield ValidationError(f"{shown} does not match {pattern!r}")


def _pattern_properties(validator, pattern_properties, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in pattern_properties.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional(instance: dict[str, Any], schema: dict[str, Any]):
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    for key in instance:
        if key not in properties and not any(_search(pattern, key) for pattern in patterns):
            yield key


def _additional_properties(validator, additional, instance, schema):
    # jsonschema's own, with the patternProperties match on RE2 (its find_additional_properties uses re).
    if not validator.is_type(instance, "object"):
        return
    extras = set(_additional(instance, schema))
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(each) for each in sorted(extras))
            patterns = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {patterns}")
        else:
            listed = sorted(extras, key=str)
            names = ", ".join(repr(extra) for extra in listed)
            verb = "was" if len(listed) == 1 else "were"
            yield ValidationError(f"Additional properties are not allowed ({names} {verb} unexpected)")


def _identity(value: Any) -> Any:
    """A hashable key equal for JSON values JSON Schema calls equal (1 == 1.0; true != 1; key order ignored)."""
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, list):
        return ("array", tuple(_identity(item) for item in value))
    return ("object", frozenset((key, _identity(item)) for key, item in value.items()))


def _unique_items(validator, unique, instance, schema):
    # jsonschema compares objects pairwise (quadratic: 100,000 small objects are 5e9 comparisons); hashing each
    # item once is linear. Arguments are nested at most TOOLHUB_MAX_ARGUMENT_DEPTH deep, so the recursion is bounded.
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[Any] = set()
    for item in instance:
        key = _identity(item)
        if key in seen:
            shown = repr(instance) if len(repr(item)) * len(instance) <= 1000 else f"an array of {len(instance)} items"
            yield ValidationError(f"{shown} has non-unique elements")
            return
        seen.add(key)


_SafeValidator = validators.extend(
    Draft202012Validator,
    {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
        "uniqueItems": _unique_items,
    },
)


def validator_for(schema: dict[str, Any]) -> Any:
    """The validator applying `schema` at call time: retrieves nothing, matches patterns in linear time.

    Raises UnsafeSchema when the schema breaks the save-time rules (a tool stored before they existed).
    Built once per distinct schema (cached by its JSON text).
    """
    return _validator(json.dumps(schema, sort_keys=True))


@lru_cache(maxsize=512)
def _validator(schema_json: str) -> Any:
    schema = json.loads(schema_json)
    problems = schema_problems(schema)
    if problems:
        raise UnsafeSchema(problems)
    if isinstance(schema, dict):
        # Checked above to be Draft 2020-12; left in, a subschema evolve() would pick jsonschema's own
        # Draft 2020-12 class (by $schema) instead of this one.
        schema = {key: value for key, value in schema.items() if key != "$schema"}
    return _SafeValidator(schema, registry=_NO_RETRIEVAL)
