"""Content negotiation of the API: DRF's, with an unknown `?format=` answered in the error shape."""

from rest_framework import exceptions
from rest_framework.negotiation import DefaultContentNegotiation

__all__ = ["ContentNegotiation"]


class ContentNegotiation(DefaultContentNegotiation):
    """`?format=` picks a renderer by its format (json, api, ...). DRF answers a format the view has no
    renderer for with a bare 404, as if the URL did not exist; here it is a 406 NOT_ACCEPTABLE naming the
    formats there are, like an Accept header no renderer satisfies."""

    def filter_renderers(self, renderers, format):
        kept = [renderer for renderer in renderers if renderer.format == format]
        if not kept:
            formats = ", ".join(sorted({renderer.format for renderer in renderers}))
            raise exceptions.NotAcceptable(f"Unknown format {format!r}: use one of {formats}.")
        return kept
