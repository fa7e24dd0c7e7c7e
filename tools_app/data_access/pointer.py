"""RFC 6901 JSON Pointers: parse, resolve, and replace a value without mutating the document."""

from typing import Any

from tools_app.kernel.errors import ErrorCode, ToolError

_MISSING = object()


def parse(pointer: str) -> tuple[str, ...]:
    """'/a/b~1c' -> ('a', 'b/c'). The empty pointer is the whole document."""
    if pointer == "":
        return ()
    if not pointer.startswith("/"):
        raise ToolError(ErrorCode.MOUNT_NOT_FOUND, f"Invalid JSON Pointer {pointer!r}: it must start with '/'.")
    return tuple(token.replace("~1", "/").replace("~0", "~") for token in pointer[1:].split("/"))


def _step(value: Any, token: str) -> Any:
    if isinstance(value, dict):
        return value.get(token, _MISSING)
    if isinstance(value, list):
        if token.isdigit() and (token == "0" or not token.startswith("0")) and int(token) < len(value):
            return value[int(token)]
        return _MISSING
    return _MISSING


def resolve(document: Any, tokens: tuple[str, ...], pointer: str) -> Any:
    """The value at `tokens`, or ToolError(MOUNT_NOT_FOUND) naming `pointer` and the first missing segment.

    `tokens` may be a prefix of `pointer`'s (a mount's parent): the error still names the mount, `pointer`.
    """
    value = document
    for depth, token in enumerate(tokens):
        value = _step(value, token)
        if value is _MISSING:
            reached = "/" + "/".join(tokens[:depth]) if depth else "(the document root)"
            raise ToolError(
                ErrorCode.MOUNT_NOT_FOUND,
                f"The mount {pointer!r} does not exist in the table: no {token!r} under {reached}.",
                {"json_path": pointer, "missing_segment": token},
            )
    return value


def exists(document: Any, tokens: tuple[str, ...]) -> bool:
    value = document
    for token in tokens:
        value = _step(value, token)
        if value is _MISSING:
            return False
    return True


def replace(document: Any, tokens: tuple[str, ...], new_value: Any) -> Any:
    """A new document with `new_value` at `tokens`: containers on the path are copied, nothing is mutated.

    The last segment may be missing from its parent object (it is added); every other segment must exist.
    """
    if not tokens:
        return new_value
    head, rest = tokens[0], tokens[1:]
    if isinstance(document, dict):
        copy = dict(document)
        copy[head] = replace(document[head], rest, new_value) if rest else new_value
        return copy
    if isinstance(document, list):
        index = int(head)
        items = list(document)
        items[index] = replace(document[index], rest, new_value) if rest else new_value
        return items
    raise ToolError(ErrorCode.MOUNT_NOT_FOUND, "The mount's parent is not an object or an array.")
