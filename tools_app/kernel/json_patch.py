"""RFC 6902 JSON Patches over shared documents: THE way a table's change log is applied.

A table's history is a log of JSON Patches (tools_app.models.TableChange). A cached document is shared by the
readers of a process, so it is never mutated: `apply` copies only the containers on each operation's path
(a shallow copy each, e.g. the 100,000 pointers of a record list), then lets the `jsonpatch` library apply the
operation to those private copies. Everything else is shared between the old version and the new one, so a
write or a catch-up costs the size of the change and the length of the containers it touches, never a parse
or a deep copy of the document.

`pointer` builds the JSON Pointer of a path (RFC 6901 escaping); `checked` refuses what is not a patch.
"""

from collections.abc import Iterable, Sequence
from typing import Any

import jsonpatch
import jsonpointer

__all__ = ["PatchError", "apply", "checked", "pointer"]

PatchError = (
    jsonpatch.JsonPatchException,
    jsonpointer.JsonPointerException,
    KeyError,
    IndexError,
    TypeError,
    ValueError,
)


def pointer(tokens: Iterable[Any]) -> str:
    """The JSON Pointer of `tokens` ('a/b', 0) -> '/a~1b/0'; no tokens -> '' (the whole document)."""
    return "".join("/" + str(token).replace("~", "~0").replace("/", "~1") for token in tokens)


def checked(patch: Any) -> list[dict[str, Any]]:
    """`patch` when it is a list of RFC 6902 operations (the library's own checks), else ValueError."""
    if not isinstance(patch, list):
        raise ValueError("A JSON Patch is a list of operations.")
    try:
        jsonpatch.JsonPatch(patch)
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException, TypeError, KeyError) as exc:
        raise ValueError(f"Not a JSON Patch: {exc}") from exc
    return patch


def apply(document: Any, patch: Sequence[dict[str, Any]]) -> Any:
    """The document after `patch`, sharing every container the patch does not touch with `document`.

    Neither `document` nor the patch's values are changed. Raises one of PatchError when an operation does
    not apply (a missing path, a failed `test`).
    """
    state = _Private(document)
    for operation in patch:
        kind = operation["op"]
        if kind != "test":
            state.own_parent(operation["path"])
            if kind == "move":
                state.own_parent(operation["from"])
        state.root = jsonpatch.JsonPatch([operation]).apply(state.root, in_place=True)
        if kind in ("add", "replace") and operation["path"] == "":
            state.forget()  # the new root is the patch's value: shared, so copied before any later change
    return state.root


class _Private:
    """The document being patched and the containers this application copied (and so may change)."""

    def __init__(self, root: Any) -> None:
        self.root = root
        self._owned: dict[int, Any] = {}  # id -> container; holding it keeps the id unique meanwhile

    def forget(self) -> None:
        self._owned.clear()

    def _copy(self, value: Any) -> Any:
        if id(value) in self._owned:
            return value
        copy = dict(value) if isinstance(value, dict) else list(value)
        self._owned[id(copy)] = copy
        return copy

    def own_parent(self, path: str) -> None:
        """Copy, unless already copied, every container from the root to the parent of `path`."""
        tokens = jsonpointer.JsonPointer(path).parts
        if not tokens or not isinstance(self.root, dict | list):
            return
        self.root = node = self._copy(self.root)
        for token in tokens[:-1]:
            key: Any = int(token) if isinstance(node, list) else token
            child = node[key]
            if not isinstance(child, dict | list):
                return  # the operation fails on it, as the library reports
            node[key] = child = self._copy(child)
            node = child
