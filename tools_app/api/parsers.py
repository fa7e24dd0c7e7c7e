"""The API's JSON parser: DRF's, paired with the API's JSONRenderer, reading through validators.json_loads.

The browsable API renders its raw-data form with the default parser's `renderer_class`; pairing it with
tools_app.api.renderers.JSONRenderer keeps that form from failing on a stored lone surrogate. Bodies are
parsed by the one parser of client JSON (tools_app.validators.json_loads): a number Python cannot hold (a
5,000-digit integer, 1e400) is a 400 PARSE_ERROR naming the number and where it is, like any other bad JSON.
"""

import codecs
from typing import Any

from django.conf import settings
from rest_framework import parsers
from rest_framework.exceptions import ParseError
from rest_framework.utils import json

from tools_app.api.renderers import JSONRenderer
from tools_app.validators import json_loads

__all__ = ["JSONParser"]


class JSONParser(parsers.JSONParser):
    renderer_class = JSONRenderer

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = codecs.getreader(encoding)(stream).read()
            parse_constant = json.strict_constant if self.strict else None
            return json_loads(text, parse_constant=parse_constant)
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from exc
