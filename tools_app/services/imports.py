"""Import a table from a file: JSON, CSV or NDJSON (issue 15 item 6). One home for every surface.

`parse_table_file` turns the bytes of an uploaded file into a JSON document, or raises a ValidationError
on `file` naming the line (and, for CSV, the row) and what is wrong; `table_import` parses and creates the
table through `table_create`, so the table limits (TOOLHUB_MAX_TABLE_BYTES, TOOLHUB_MAX_TABLE_DEPTH) apply
as to every write. Nothing is written unless the whole file is good.

Bounded before and while parsing: the file itself is at most TOOLHUB_MAX_TABLE_BYTES (a larger one is
refused before it is decoded), and a CSV is refused as soon as the records built so far would already be
over that size as JSON (a CSV with a wide header and empty cells grows a hundredfold as JSON).

CSV: the first row is the header (names unique and not empty); each row becomes an object keyed by it.
Cells are typed the way a spreadsheet reads them, but strictly: `42` and `-7` integers (no leading zero, up
to 15 digits; `007` stays text), `2.5` numbers (digits on both sides of the point), `true`/`false` booleans,
an empty cell null; everything else stays a string (docs/data-to-tools.md). Quoting is RFC 4180's (a
quoted field may hold delimiters, line breaks and doubled quotes `""`; anything after a closing quote but
a delimiter is refused); only the delimiter (comma, semicolon, tab, bar) is sniffed from the header line.
"""

import csv
import io
import json
import math
import os
import re
from typing import Any

from django.core.exceptions import ValidationError

from ..models import Table
from ..validators import JSONNumberError, json_loads, max_table_bytes
from .tables import table_create

__all__ = ["IMPORT_FORMATS", "import_format", "parse_table_file", "table_import"]

IMPORT_FORMATS = ("json", "csv", "ndjson")
_EXTENSIONS = {".json": "json", ".csv": "csv", ".tsv": "csv", ".ndjson": "ndjson", ".jsonl": "ndjson"}
_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]{0,14})")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)\.[0-9]+")
_MAX_REPORTED = 200  # characters of a bad line quoted in an error
SNIFF_CHARS = 4096


def _refuse(message: str, **params: Any) -> ValidationError:
    return ValidationError({"file": ValidationError(message, code="invalid_file", params=params or None)})


def import_format(filename: str, requested: str | None) -> str:
    """The format asked for, else the one the file name's extension says; neither is a refusal."""
    if requested:
        if requested not in IMPORT_FORMATS:
            raise ValidationError(
                {"format": ValidationError("Unknown format %(value)r: one of json, csv, ndjson.", code="invalid")}
            )
        return requested
    extension = os.path.splitext(filename or "")[1].lower()
    if extension in _EXTENSIONS:
        return _EXTENSIONS[extension]
    raise ValidationError(
        {
            "format": ValidationError(
                "Cannot tell the format from the file name %(name)r: pass format = json, csv or ndjson "
                "(or name the file .json, .csv, .tsv, .ndjson or .jsonl).",
                code="required",
                params={"name": filename or ""},
            )
        }
    )


def _decode(raw: bytes) -> str:
    """UTF-8 text (a byte-order mark is dropped); otherwise a refusal naming the line and the byte."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise _refuse(
            "The file is not UTF-8 text: line %(line)d has the byte 0x%(byte)02x (at byte offset %(offset)d). "
            "Save it as UTF-8 and upload it again.",
            line=line,
            byte=raw[exc.start],
            offset=exc.start,
        ) from exc


def _quote(text: str) -> str:
    return text if len(text) <= _MAX_REPORTED else text[:_MAX_REPORTED] + "…"


def _parse_json(text: str) -> Any:
    try:
        return json_loads(text)
    except JSONNumberError as exc:
        raise _refuse("%(error)s", error=str(exc)) from exc
    except json.JSONDecodeError as exc:
        raise _refuse(
            "Invalid JSON at line %(line)d, column %(column)d: %(error)s.",
            line=exc.lineno,
            column=exc.colno,
            error=exc.msg,
        ) from exc
    except RecursionError as exc:
        raise _refuse("The JSON is nested too deeply to read.") from exc


def _parse_ndjson(text: str) -> list[Any]:
    records = []
    # Lines end at \n (and \r\n) only: str.splitlines() would also split at U+2028, which JSON strings may hold.
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        try:
            records.append(json_loads(line))
        except JSONNumberError as exc:
            raise _refuse(
                "Line %(line)d: the number %(number)s at column %(column)d is %(problem)s",
                line=number,
                number=exc.shown,
                column=exc.column,
                problem=exc.problem,
            ) from exc
        except json.JSONDecodeError as exc:
            raise _refuse(
                "Line %(line)d is not one JSON value (column %(column)d: %(error)s): %(text)s",
                line=number,
                column=exc.colno,
                error=exc.msg,
                text=_quote(line),
            ) from exc
        except RecursionError as exc:
            raise _refuse("Line %(line)d is nested too deeply to read.", line=number) from exc
    return records


def _cell(text: str) -> Any:
    if text == "":
        return None
    if _INTEGER.fullmatch(text):
        return int(text)
    if _NUMBER.fullmatch(text):
        number = float(text)
        if math.isfinite(number):
            return number
    if text == "true":
        return True
    if text == "false":
        return False
    return text


class RFC4180(csv.Dialect):
    """RFC 4180: fields quoted with `"`, a `"` inside a quoted field doubled (`""`), nothing after a closing
    quote but a delimiter or the end of the line, spaces part of the field. Only the delimiter varies."""

    delimiter = ","
    quotechar = '"'
    doublequote = True
    escapechar = None
    skipinitialspace = False
    lineterminator = "\r\n"
    quoting = csv.QUOTE_MINIMAL
    strict = True


def _delimiter(text: str) -> str:
    """The delimiter (comma, semicolon, tab, bar) the header line uses; a comma when it has none.

    Only the delimiter is taken from the sniffer: the rest of the dialect is RFC 4180's. The header line
    alone cannot show how quotes are escaped (the sniffer would guess `doublequote=False` from it, and
    split `"a ""b"", c"` into three cells), nor which quote character the rows use.
    """
    # The sniffer's regular expressions backtrack: it sees the start of the header line only.
    header = text[:SNIFF_CHARS].split("\n", 1)[0]
    try:
        return csv.Sniffer().sniff(header, delimiters=",;\t|").delimiter
    except csv.Error:
        return ","


def _parse_csv(text: str) -> list[dict[str, Any]]:
    reader = csv.reader(io.StringIO(text, newline=""), dialect=RFC4180, delimiter=_delimiter(text))
    limit = max_table_bytes()
    try:
        header = next(reader, None)
        if header is None:
            raise _refuse("The file is empty: a CSV needs a header line.")
        names = [name.strip() for name in header]
        for column, name in enumerate(names, start=1):
            if not name:
                raise _refuse("Line 1 (the header): column %(column)d has no name.", column=column)
        seen: dict[str, int] = {}
        for column, name in enumerate(names, start=1):
            if name in seen:
                raise _refuse(
                    "Line 1 (the header): the column name %(name)r is used twice (columns %(first)d and %(second)d).",
                    name=name,
                    first=seen[name],
                    second=column,
                )
            seen[name] = column
        # Each record costs at least its keys and punctuation as JSON, plus its cells' text.
        per_record = sum(len(json.dumps(name)) + 4 for name in names) + 2
        size = 2
        records: list[dict[str, Any]] = []
        for row in reader:
            if not row:
                continue  # a blank line
            if len(row) != len(names):
                raise _refuse(
                    "Row %(row)d (line %(line)d) has %(got)d values; the header has %(want)d columns.",
                    row=len(records) + 1,
                    line=reader.line_num,
                    got=len(row),
                    want=len(names),
                )
            size += per_record + sum(map(len, row))
            if size > limit:
                raise _refuse(
                    "By row %(row)d (line %(line)d) the table is already over %(max)d bytes of JSON "
                    "(TOOLHUB_MAX_TABLE_BYTES); import a smaller file.",
                    row=len(records) + 1,
                    line=reader.line_num,
                    max=limit,
                )
            records.append(dict(zip(names, map(_cell, row), strict=True)))
    except csv.Error as exc:
        raise _refuse(
            "Invalid CSV at line %(line)d: %(error)s.", line=reader.line_num, error=str(exc).rstrip(".")
        ) from exc
    return records


def parse_table_file(raw: bytes, fmt: str) -> Any:
    """The JSON document a file of format `fmt` (json, csv, ndjson) holds; ValidationError on `file` if bad."""
    limit = max_table_bytes()
    if len(raw) > limit:
        raise _refuse(
            "The file is %(size)d bytes; a table document is at most %(max)d bytes (TOOLHUB_MAX_TABLE_BYTES).",
            size=len(raw),
            max=limit,
        )
    text = _decode(raw)
    if not text.strip():
        raise _refuse("The file is empty.")
    if fmt == "json":
        return _parse_json(text)
    if fmt == "ndjson":
        return _parse_ndjson(text)
    if fmt == "csv":
        return _parse_csv(text)
    raise ValueError(f"unknown import format {fmt!r}")


def table_import(*, owner, name: str, raw: bytes, fmt: str, description: str = "") -> Table:
    """Create a table from a file's bytes (format json, csv or ndjson); all or nothing (see the module)."""
    data = parse_table_file(raw, fmt)
    return table_create(owner=owner, name=name, description=description, data=data)
