"""The API's renderers: DRF's JSON and browsable renderers, made safe for text that is not Unicode.

A lone UTF-16 surrogate cannot be encoded as UTF-8. Input holding one is refused (tools_app.validators),
but a value stored before that check (SQLite kept them), or one echoed in an error message, must still
render: as a JSON escape (`\\ud800`) instead of a 500 raised while the response is encoded.
"""

from rest_framework import renderers

__all__ = ["BrowsableAPIRenderer", "JSONRenderer"]


class _AsciiJSONRenderer(renderers.JSONRenderer):
    ensure_ascii = True


class JSONRenderer(renderers.JSONRenderer):
    """DRF's JSONRenderer (UTF-8); a response holding a lone surrogate is written with ASCII escapes instead."""

    def render(self, data, accepted_media_type=None, renderer_context=None):
        try:
            return super().render(data, accepted_media_type, renderer_context)
        except UnicodeEncodeError:
            # Only surrogates fail to encode. JSON may escape any character, and `\ud800` is how JSON
            # text writes this one, so the client reads back the value that is stored.
            return _AsciiJSONRenderer().render(data, accepted_media_type, renderer_context)


class BrowsableAPIRenderer(renderers.BrowsableAPIRenderer):
    """The browsable API's HTML page; a lone surrogate in it (the page echoes stored values) shows as `\\udXXX`."""

    def render(self, data, accepted_media_type=None, renderer_context=None):
        page = super().render(data, accepted_media_type, renderer_context)
        return page.encode(self.charset, errors="backslashreplace") if isinstance(page, str) else page
