"""Answers streamed in pieces (a large import's answer, a whole-table export) on every server toolhub runs under.

Django's ASGI handler gathers a synchronous iterator into one list before it sends the first byte (it warns
"StreamingHttpResponse must consume synchronous iterators"), which would hold the whole answer. Under ASGI the
pieces are therefore pulled one at a time through an asynchronous iterator, each in Django's thread for sync code
(`thread_sensitive`), where the view's database connection lives; under WSGI (and Django's test client) the
synchronous iterator is used as it is.
"""

from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from django.http import StreamingHttpResponse

__all__ = ["streaming_response"]

_DONE = object()


def streaming_response(request: Any, pieces: Iterable[bytes | str], **kwargs: Any) -> StreamingHttpResponse:
    """A StreamingHttpResponse of `pieces` (kwargs: status, content_type, ...) that sends each as it comes."""
    iterator = iter(pieces)
    if hasattr(request, "scope"):  # an ASGIRequest (DRF's Request passes the attribute through)
        return StreamingHttpResponse(_pulled(iterator), **kwargs)
    return StreamingHttpResponse(iterator, **kwargs)


async def _pulled(iterator: Iterator[bytes | str]) -> AsyncIterator[bytes | str]:
    pull = sync_to_async(_next, thread_sensitive=True)
    try:
        while (piece := await pull(iterator)) is not _DONE:
            yield piece
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:
            await sync_to_async(close, thread_sensitive=True)()


def _next(iterator: Iterator[bytes | str]) -> Any:
    return next(iterator, _DONE)
