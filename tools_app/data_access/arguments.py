"""Argument validation against the tool's input schema (Draft 2020-12), with validators cached per schema.

The validator is tools_app.safe_schema's: it never fetches a reference and matches patterns in linear
time. Arguments nested deeper than TOOLHUB_MAX_ARGUMENT_DEPTH are refused before anything
recursive runs.
"""

from typing import Any

from referencing.exceptions import Unresolvable

from tools_app.kernel.errors import ErrorCode, ToolError
from tools_app.kernel.limits import ARGUMENT_ERROR_MAX_CHARS, max_argument_depth
from tools_app.safe_schema import UnsafeSchema, validator_for
from tools_app.validators import (
    describe_path,
    find_surrogate,
    json_dumps_checked,
    json_text_has_nul,
    nesting_beyond,
    surrogate_problem,
)


def _unusable_schema(reason: str) -> ToolError:
    return ToolError(
        ErrorCode.TOOL_NOT_CALLABLE,
        f"The tool's input schema cannot be applied: {reason} Nothing was fetched; the tool's owner must fix "
        "its schema.",
    )


def _where(path) -> str:
    return f"argument '{describe_path(list(path))}'" if path else "arguments"


def _describe(error) -> str:
    path = error.absolute_path
    where = _where(path)
    if error.validator == "maxLength" and isinstance(error.instance, str):
        # jsonschema says "'<the whole value>' is too long": name the length and the limit instead.
        return f"{where} has {len(error.instance):,} characters; the limit is {error.validator_value:,}"
    message = error.message
    if len(message) > ARGUMENT_ERROR_MAX_CHARS:
        # jsonschema's messages quote the failing value whole: a 4 MB argument would come back (and be logged).
        message = f"{message[:ARGUMENT_ERROR_MAX_CHARS]}… (cut at {ARGUMENT_ERROR_MAX_CHARS} characters)"
    if error.validator == "required" and not path:
        return message.replace("is a required property", "is required")
    if error.validator == "additionalProperties" and not path:
        return f"{message} (accepted arguments: see the tool's input schema)"
    return f"{where}: {message}"


def validate_arguments(
    *, schema: dict[str, Any], arguments: Any, base_schema: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Check `arguments` against the tool's schema, then against `base_schema`, what its type needs (the
    type's default input schema).

    Raises ToolError(INVALID_ARGUMENTS) naming the first failing argument (or arguments nested too deeply),
    ToolError(TOOL_NOT_CALLABLE) when the schema itself cannot be applied safely (tools_app.safe_schema).
    """
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise ToolError(ErrorCode.INVALID_ARGUMENTS, "Arguments must be a JSON object.")
    limit = max_argument_depth()
    too_deep = nesting_beyond(arguments, limit)
    if too_deep is not None:
        # Before json.dumps and the schema validator, which recurse (a RecursionError would be a 500).
        raise ToolError(
            ErrorCode.INVALID_ARGUMENTS,
            f"Invalid arguments: nested more than {limit} levels deep (at {_where(too_deep)}; "
            "TOOLHUB_MAX_ARGUMENT_DEPTH).",
            {"path": too_deep, "validator": "depth"},
        )
    try:
        # Python's json parser accepts NaN and Infinity; they are not JSON and PostgreSQL refuses them on write.
        text = json_dumps_checked(arguments)
    except ValueError as exc:
        raise ToolError(
            ErrorCode.INVALID_ARGUMENTS, "Invalid arguments: NaN and Infinity are not JSON numbers."
        ) from exc
    except TypeError as exc:
        raise ToolError(ErrorCode.INVALID_ARGUMENTS, f"Invalid arguments: not JSON ({exc}).") from exc
    if json_text_has_nul(text):
        # PostgreSQL's jsonb cannot store U+0000, so a write carrying one would fail at the database.
        raise ToolError(ErrorCode.INVALID_ARGUMENTS, "Invalid arguments: strings must not contain U+0000 (NUL).")
    found = find_surrogate(arguments, text=text)
    if found is not None:
        # Not text (UTF-8 cannot encode it): refused before it reaches a query, a table or the call log.
        path, in_key, char = found
        place = f"a key in {_where(path)}" if in_key else _where(path)
        raise ToolError(
            ErrorCode.INVALID_ARGUMENTS,
            f"Invalid arguments: {place} {surrogate_problem(char)}",
            {"path": path, "validator": "unicode"},
        )
    schemas = [schema]
    base = base_schema
    if base is not None and base is not schema:
        # A custom schema may be looser than the type's own: the type's base schema still applies, minus
        # additionalProperties (a custom schema may add documentation-only arguments).
        schemas.append({k: v for k, v in base.items() if k != "additionalProperties"})
    for candidate in schemas:
        try:
            validator = validator_for(candidate)
            error = next(iter(sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))), None)
        except UnsafeSchema as exc:  # a tool stored before these rules: refused, never fetched
            raise _unusable_schema(exc.problems[0]) from exc
        except Unresolvable as exc:
            raise _unusable_schema(f"the reference {str(exc.ref)!r} cannot be resolved inside it.") from exc
        except RecursionError as exc:  # a schema whose references loop without descending into the value
            raise _unusable_schema("its references loop without end.") from exc
        if error is not None:
            raise ToolError(
                ErrorCode.INVALID_ARGUMENTS,
                f"Invalid arguments: {_describe(error)}.",
                {"path": list(error.absolute_path), "validator": error.validator},
            )
    return _integers(arguments, schemas)


def _declares_integer(schema: dict[str, Any], name: str) -> bool:
    properties = schema.get("properties")
    spec = properties.get(name) if isinstance(properties, dict) else None
    kind = spec.get("type") if isinstance(spec, dict) else None
    return kind == "integer" or (isinstance(kind, list) and "integer" in kind and "number" not in kind)


def _integers(arguments: dict[str, Any], schemas: list[dict[str, Any]]) -> dict[str, Any]:
    """`arguments` with each integral float (2.0) that a schema declares an integer as that int.

    JSON Schema counts 2.0 as an integer, so it passes validation; the operations slice and count with
    these values (limit, offset), which needs an int.
    """
    coerced = {
        name: int(value)
        for name, value in arguments.items()
        if isinstance(value, float) and value.is_integer() and any(_declares_integer(s, name) for s in schemas)
    }
    return {**arguments, **coerced} if coerced else arguments
