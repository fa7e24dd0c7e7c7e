"""RFC 6902 JSON Patches over shared documents: THE way a table's change log is applied.

A table's history is a log of JSON Patches (tools_app.models.TableChange). A cached document is shared by the
readers of a process, so it is never mutated: `apply` copies only the containers on each operation's path
(a shallow copy each, e.g. the 100,000 pointers of a record list), then lets the `jsonpatch` library apply the
operation to those private copies. Everything else is shared between the old version and the new one, so a
write or a catch-up costs the size of the change and the length of the containers it touches, never a parse
or a deep copy of the document.

`diff` computes the patch between two documents and its inverse: what a whole-document write stores (and an
update of a record), so history costs the change, not the document.

`pointer` builds the JSON Pointer of a path (RFC 6901 escaping); `checked` refuses what is not a patch.
"""

import difflib
import json
from collections.abc import Iterable, Sequence
from typing import Any

import jsonpatch
import jsonpointer

from tools_app.kernel.limits import PATCH_MAX_ALIGNED_ITEMS

__all__ = ["PatchError", "apply", "checked", "diff", "pointer"]

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


#
# Diff
#


def diff(
    old: Any, new: Any, *, keys: Sequence[str] = ("id",), at: Sequence[Any] = (), ordered: bool = False
) -> tuple[list, list]:
    """(patch, inverse): RFC 6902 patches from `old` to `new` and back, touching only what differs.

    Objects are compared key by key. An array's equal head and tail are skipped; its middle is aligned with
    difflib: records (objects) that all hold one of `keys` with unique string or integer values are matched by
    that key, so an inserted or removed record is one `add` or `remove` and a changed one is diffed field by field
    (never a shift of every later index); other elements are matched by content, or position by position when
    both middles have the same length. `at` is the path of `old` inside a larger document (the operations'
    paths start there). Values are compared as JSON: 1, 1.0 and true differ. `apply(old, patch)` is `new` and
    `apply(new, inverse)` is `old` (tools_app/tests/services/test_history_storage.py checks it on random documents).

    Applied, an object's members added come last: `new` and `old` as values, not in their members' order. With
    `ordered`, in that order too: an object whose shared members are in another order, or whose own members are
    not after them, is replaced whole (a restore answers the version's document as it was).
    """
    patch: list[dict[str, Any]] = []
    undo: list[dict[str, Any]] = []
    _diff(old, new, list(at), patch, undo, tuple(keys), ordered)
    undo.reverse()  # each inverse undoes its operation on the document right after it: applied newest first
    return patch, undo


def _same(left: Any, right: Any, ordered: bool = False) -> bool:
    """Equal as JSON values: Python's == holds 1 == 1.0 == True, three different JSON values. With `ordered`, equal
    objects also hold their members in one order."""
    if left is right:
        return True
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        members = list(left) == list(right) if ordered else left.keys() == right.keys()
        return members and all(_same(value, right[key], ordered) for key, value in left.items())
    if isinstance(left, list):
        return len(left) == len(right) and all(
            _same(one, other, ordered) for one, other in zip(left, right, strict=True)
        )
    return bool(left == right)


def _diff(old: Any, new: Any, tokens: list, patch: list, undo: list, keys: tuple[str, ...], ordered: bool) -> None:
    if old is new:
        return
    objects = isinstance(old, dict) and isinstance(new, dict)
    if objects and (not ordered or _same_order(old, new)):
        # Removed last first: the inverse, applied newest first, adds them back in their order.
        for key in reversed(old) if ordered else old:
            if key not in new:
                path = pointer([*tokens, key])
                patch.append({"op": "remove", "path": path})
                undo.append({"op": "add", "path": path, "value": old[key]})
        for key, value in new.items():
            if key in old:
                _diff(old[key], value, [*tokens, key], patch, undo, keys, ordered)
            else:
                path = pointer([*tokens, key])
                patch.append({"op": "add", "path": path, "value": value})
                undo.append({"op": "remove", "path": path})
        return
    if isinstance(old, list) and isinstance(new, list):
        _diff_list(old, new, tokens, patch, undo, keys, ordered)
        return
    if not objects and _same(old, new, ordered):
        return
    path = pointer(tokens)
    patch.append({"op": "replace", "path": path, "value": new})
    undo.append({"op": "replace", "path": path, "value": old})


def _same_order(old: dict, new: dict) -> bool:
    """Whether the members both hold come first in both, in one order: a member-wise patch keeps both orders."""
    shared = [key for key in old if key in new]
    return list(old)[: len(shared)] == shared == list(new)[: len(shared)]


def _diff_list(
    old: list, new: list, tokens: list, patch: list, undo: list, keys: tuple[str, ...], ordered: bool
) -> None:
    start, old_end, new_end = 0, len(old), len(new)
    while start < old_end and start < new_end and _same(old[start], new[start], ordered):
        start += 1
    while old_end > start and new_end > start and _same(old[old_end - 1], new[new_end - 1], ordered):
        old_end -= 1
        new_end -= 1
    before, after = old[start:old_end], new[start:new_end]
    if not before and not after:
        return
    key = _record_key(before, after, keys)
    if key is not None and max(len(before), len(after)) <= PATCH_MAX_ALIGNED_ITEMS:
        matcher = difflib.SequenceMatcher(
            None, [item[key] for item in before], [item[key] for item in after], autojunk=False
        )
        opcodes = matcher.get_opcodes()
    elif len(before) == len(after) or max(len(before), len(after)) > PATCH_MAX_ALIGNED_ITEMS:
        opcodes = [("replace", 0, len(before), 0, len(after))]
        key = None
    else:
        opcodes = difflib.SequenceMatcher(None, _contents(before), _contents(after)).get_opcodes()
    position = start  # where the next element of `before` now is, in the array being patched
    for tag, old_from, old_to, new_from, new_to in opcodes:
        if tag == "equal" or (tag == "replace" and key is None):
            paired = min(old_to - old_from, new_to - new_from)
            for offset in range(paired):
                _diff(
                    before[old_from + offset], after[new_from + offset], [*tokens, position], patch, undo, keys, ordered
                )
                position += 1
            old_from += paired
            new_from += paired
        for item in before[old_from:old_to]:
            path = pointer([*tokens, position])
            patch.append({"op": "remove", "path": path})
            undo.append({"op": "add", "path": path, "value": item})
        for item in after[new_from:new_to]:
            path = pointer([*tokens, position])
            patch.append({"op": "add", "path": path, "value": item})
            undo.append({"op": "remove", "path": path})
            position += 1


def _record_key(before: list, after: list, keys: tuple[str, ...]) -> str | None:
    """The first of `keys` that every element of both lists holds as a unique string or integer, else None."""
    if not before or not after or not all(isinstance(item, dict) for item in (*before, *after)):
        return None
    for key in keys:
        for items in (before, after):
            values = [item.get(key) for item in items]
            if not all(type(value) is str or type(value) is int for value in values):
                break
            if len(set(values)) != len(values):
                break
        else:
            return key
    return None


def _contents(items: list) -> list:
    """Each element as a hashable token equal only for equal JSON values."""
    return [json.dumps(item, sort_keys=True) if isinstance(item, dict | list) else (type(item), item) for item in items]
