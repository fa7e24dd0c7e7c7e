"""The API's JSON parser: DRF's, paired with the API's JSONRenderer.

The browsable API renders its raw-data form with the default parser's `renderer_class`; pairing it with
tools_app.api.renderers.JSONRenderer keeps that form from failing on a stored lone surrogate.
"""

from rest_framework import parsers

from tools_app.api.renderers import JSONRenderer

__all__ = ["JSONParser"]


class JSONParser(parsers.JSONParser):
    renderer_class = JSONRenderer
