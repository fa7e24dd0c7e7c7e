"""Whole-table answers of the API streamed (docs/tables-at-scale.md, "Whole-table views and versions of a rows
table"): `GET /api/tables/<id>/`, `GET /api/tables/<id>/versions/<v>/` and `GET /api/setup/export/?data=true` of
tables stored as rows send their records as they are read, CHUNK rows per statement, so neither the records nor
the text are held whole, whatever the table's size.

The bytes are the ones the JSON renderer writes for the same answer gathered: the answer's other fields are
rendered by that renderer around a placeholder string at each `data`, and each table's document text is written
in its place with the renderer's own encoder, separators and escapes (`\\u2028`, `\\u2029`). Only an answer the
JSON renderer writes without an indent streams; the browsable API and `Accept: application/json; indent=n` get
the gathered answer (bounded by TOOLHUB_MAX_EVALUATED_BYTES).

What can be refused is refused before the first byte, by the view's own reads (the table, its access, the version
kept); a failure once the body started (the table deleted meanwhile, a version rebuilt over its bound, the
database) cannot change the status any more: the body is ended so that it is not JSON and the failure is logged
(_cut). HTTP trailers would say it too, but browsers, fetch and most client libraries never read them.
"""

import json
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

from rest_framework import renderers

from tools_app.execution import records
from tools_app.kernel.errors import ToolError
from tools_app.kernel.streaming import streaming_response

__all__ = ["Encoding", "json_encoding", "placeholder", "spliced_response", "deferred_document_text"]

logger = logging.getLogger("toolhub.api")


@dataclass(frozen=True)
class Encoding:
    """How the JSON renderer writes this request's answer: `encode` a value, with these item/key `separators`."""

    encode: Callable[[Any], str]
    separators: tuple[str, str]


def json_encoding(request: Any) -> Encoding | None:
    """The negotiated JSON renderer's encoding when the answer can stream (no indent asked for); None otherwise:
    the browsable API, another renderer, or an indented answer."""
    renderer = getattr(request, "accepted_renderer", None)
    if not isinstance(renderer, renderers.JSONRenderer):
        return None
    if renderer.get_indent(getattr(request, "accepted_media_type", None), {}) is not None:
        return None
    separators = renderers.SHORT_SEPARATORS if renderer.compact else renderers.LONG_SEPARATORS
    encode = partial(
        json.dumps,
        cls=renderer.encoder_class,
        ensure_ascii=renderer.ensure_ascii,
        allow_nan=not renderer.strict,
        separators=separators,
    )
    return Encoding(encode=encode, separators=separators)


def placeholder(number: int) -> str:
    """A string standing for the `number`-th streamed document in the rendered answer. No stored string holds a
    NUL (the validators refuse it), and JSON always writes it escaped, so its text is found exactly."""
    return f"\u0000streamed-document-{number}\u0000"


def deferred_document_text(table_id: int, version: int | None, encoding: Encoding) -> Callable[[], Iterator[str]]:
    """The text of a rows table's whole document at `version` (None: the current one when the answer gets to it),
    read when the answer gets to it, in one snapshot."""
    return lambda: records.document_text(table_id, version, encoding.encode, encoding.separators)


def spliced_response(request: Any, head: Any, parts: dict[str, Callable[[], Iterator[str]]], encoding: Encoding) -> Any:
    """A streamed 200 whose body is `head` as the JSON renderer writes it with each placeholder string in it
    replaced by the text its part yields (each part is started only when the body reaches it)."""
    text = encoding.encode(head)
    found = {encoding.encode(marker): part for marker, part in parts.items()}
    pattern = re.compile("|".join(re.escape(marker) for marker in found))

    def pieces() -> Iterator[bytes]:
        start = 0
        try:
            for match in pattern.finditer(text):
                yield _bytes(text[start : match.start()])
                for piece in found[match.group(0)]():
                    if piece:
                        yield _bytes(piece)
                start = match.end()
        except Exception as exc:  # not GeneratorExit: a client gone away ends the stream without a word
            yield _cut(request, exc)
            return
        yield _bytes(text[start:])

    return streaming_response(request, pieces(), content_type="application/json")


def _cut(request: Any, exc: Exception) -> bytes:
    """The end of a body whose reading failed after its status and first bytes were sent: logged, and ended by a
    NUL byte, which JSON allows nowhere unescaped (so no client can parse the body as a whole answer, whatever
    was sent before it, and whatever a proxy does with the connection), then a line naming the error."""
    logger.error("Streamed answer to %s cut: %s", request.path, exc, exc_info=exc)
    if isinstance(exc, ToolError):
        said = f"{exc.as_dict()['error']}: {exc.message}"
    else:
        said = "INTERNAL_ERROR: the server failed to read the rest of this answer (logged)"
    return _bytes(f"\u0000\nThis answer was cut after its first bytes; it is not JSON. {said}\n")


def _bytes(piece: str) -> bytes:
    """A piece of the answer as the JSON renderer encodes it: U+2028 and U+2029 escaped; UTF-8. A lone surrogate
    (a value stored before they were refused) is written as its JSON escape `\\udXXX`: the same value, where the
    gathered answer escapes every non-ASCII character instead."""
    piece = piece.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return piece.encode("utf-8", errors="backslashreplace")
