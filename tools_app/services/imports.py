"""Import a table from a file: JSON, CSV or NDJSON. One home for every surface.

`table_import` reads an uploaded file and creates the table; `parse_table_file` turns a file's bytes into
a JSON document (the admin's "Replace data from a file"). Both raise a ValidationError on `file` naming the
line (and, for CSV, the row) and what is wrong; nothing is written unless the whole file is good.

Memory: `table_import` streams a CSV or NDJSON file into rows (docs/tables-at-scale.md). Rows are read one at
a time from the upload (on disk above Django's FILE_UPLOAD_MAX_MEMORY_SIZE), each record is checked and written
to the new table's rows in batches (the table is stored as rows: an array of records at its root), and as JSON
text to a temporary file (what the answer shows): neither the records nor the text are ever held whole, and the
whole import is one transaction. The limits are exact and checked as the text grows, at the row that crosses
them: one record's JSON (TOOLHUB_MAX_RECORD_BYTES), the records (TOOLHUB_MAX_TABLE_RECORDS), the table's JSON
(TOOLHUB_MAX_ROWS_TABLE_BYTES; a CSV with a wide header and empty cells grows a hundredfold as JSON) and the
owner's quota (TOOLHUB_MAX_OWNER_DATA_BYTES, QUOTA_EXCEEDED). A file larger than the table limit is refused
unread. A JSON file is one document, parsed whole: a table stored as a document, within
TOOLHUB_MAX_TABLE_BYTES.

Concurrency: at most TOOLHUB_IMPORTS_PER_OWNER imports of one owner, and TOOLHUB_IMPORTS_PER_WORKER in all,
run at once in a server process (`import_slots`); one more is refused at once with RATE_LIMITED (HTTP 429,
`Retry-After`), nothing read or written.

CSV: the first row is the header (names unique and not empty); each row becomes an object keyed by it.
Cells are typed the way a spreadsheet reads them, but strictly: `42` and `-7` integers (no leading zero, up
to 15 digits; `007` stays text), `2.5` numbers (digits on both sides of the point), `true`/`false` booleans,
an empty cell null; everything else stays a string (docs/data-to-tools.md). Quoting is RFC 4180's (a
quoted field may hold delimiters, line breaks and doubled quotes `""`; anything after a closing quote but
a delimiter is refused); only the delimiter (comma, semicolon, tab, bar) is sniffed from the header line.
"""

import codecs
import csv
import io
import itertools
import json
import math
import os
import re
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any, cast

from django.core.exceptions import ValidationError
from django.db import connection

from tools_app.kernel import telemetry
from tools_app.kernel.errors import ErrorCode, ToolhubError
from tools_app.kernel.limits import (
    IMPORT_MAX_QUOTED_LINE_CHARS,
    IMPORTS_PER_OWNER,
    IMPORTS_PER_WORKER,
    MAX_RECORD_KEY_BYTES,
    max_owner_data_bytes,
    max_record_bytes,
    max_rows_table_bytes,
    max_table_bytes,
    max_table_depth,
    max_table_records,
)
from tools_app.models import Table
from tools_app.services.quotas import data_quota_check, data_quota_left
from tools_app.services.tables import table_create_encoded, table_create_rows
from tools_app.validators import (
    JSONNumberError,
    TableDocumentEncoder,
    describe_path,
    json_loads,
    json_text_has_nul,
    nesting_beyond,
    record_texts,
    validate_json_value,
    validate_table_depth,
)

__all__ = [
    "IMPORT_FORMATS",
    "ImportedTable",
    "ImportSlots",
    "import_format",
    "import_slots",
    "parse_table_file",
    "table_import",
]

IMPORT_FORMATS = ("json", "csv", "ndjson")
_EXTENSIONS = {".json": "json", ".csv": "csv", ".tsv": "csv", ".ndjson": "ndjson", ".jsonl": "ndjson"}
_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]{0,14})")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)\.[0-9]+")
_TYPED_STARTS = frozenset("-0123456789tf")
SNIFF_CHARS = 4096
CHUNK = 1 << 20
RETRY_AFTER_SECONDS = 5
# The stored text's punctuation (TableDocumentEncoder: json's defaults), so that its length is data_bytes.
_SEPARATOR = ", "


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


#
# Concurrency
#


class ImportSlots:
    """Imports running at once in this process, per owner and in all; see the module docstring."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._total = 0
        self._by_owner: dict[int, int] = {}

    @contextmanager
    def held(self, owner_id: int | None) -> Iterator[None]:
        """Hold a slot while the block runs; ToolhubError(RATE_LIMITED) at once when none is free."""
        per_owner = IMPORTS_PER_OWNER.get()
        per_worker = IMPORTS_PER_WORKER.get()
        with self._lock:
            if owner_id is not None and self._by_owner.get(owner_id, 0) >= per_owner:
                raise _busy("TOOLHUB_IMPORTS_PER_OWNER", per_owner, "of this user")
            if self._total >= per_worker:
                raise _busy("TOOLHUB_IMPORTS_PER_WORKER", per_worker, "on this server process")
            self._total += 1
            if owner_id is not None:
                self._by_owner[owner_id] = self._by_owner.get(owner_id, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                self._total -= 1
                if owner_id is not None:
                    left = self._by_owner[owner_id] - 1
                    if left:
                        self._by_owner[owner_id] = left
                    else:
                        del self._by_owner[owner_id]

    def running(self, owner_id: int | None = None) -> int:
        with self._lock:
            return self._total if owner_id is None else self._by_owner.get(owner_id, 0)


def _busy(setting: str, limit: int, whose: str) -> ToolhubError:
    telemetry.rate_limited("imports")
    return ToolhubError(
        ErrorCode.RATE_LIMITED,
        f"Too many imports at once {whose}: at most {limit} run at the same time ({setting}). Wait for one to "
        f"finish, then try again (in about {RETRY_AFTER_SECONDS} s).",
        {"retry_after": RETRY_AFTER_SECONDS, "limit": limit, "setting": setting},
    )


import_slots = ImportSlots()


#
# Reading the file
#


def _size(file: IO[bytes]) -> int:
    file.seek(0, io.SEEK_END)
    size = file.tell()
    file.seek(0)
    return size


def _is_blank(file: IO[bytes]) -> bool:
    file.seek(0)
    first = True
    while chunk := file.read(CHUNK):
        if first:
            chunk, first = chunk.removeprefix(codecs.BOM_UTF8), False
        if chunk.strip():
            file.seek(0)
            return False
    file.seek(0)
    return True


def _not_utf8(file: IO[bytes]) -> ValidationError:
    """The refusal naming the line, byte and offset of the file's first byte that is not UTF-8."""
    file.seek(0)
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0  # of the chunk being decoded
    while chunk := file.read(CHUNK):
        pending = len(decoder.getstate()[0])  # bytes of an unfinished character kept from the last chunk
        try:
            decoder.decode(chunk)
        except UnicodeDecodeError as exc:
            where = offset - pending + exc.start
            file.seek(0)
            head = file.read(where + 1)
            return _refuse(
                "The file is not UTF-8 text: line %(line)d has the byte 0x%(byte)02x (at byte offset %(offset)d). "
                "Save it as UTF-8 and upload it again.",
                line=head.count(b"\n", 0, where) + 1,
                byte=head[where],
                offset=where,
            )
        offset += len(chunk)
    return _refuse("The file is not UTF-8 text: it ends inside a character. Save it as UTF-8 and upload it again.")


def _innermost(file: IO[bytes]) -> IO[bytes]:
    """The file object an upload wraps (Django's UploadedFile, tempfile's wrapper): a text stream over the wrapper
    asks its `closed` through two Python-level proxies for every line it reads."""
    inner: Any = file
    while not isinstance(inner, io.IOBase):
        inner = getattr(inner, "file", None)
        if inner is None:
            return file
    return cast(IO[bytes], inner)


@contextmanager
def _text(file: IO[bytes], newline: str) -> Iterator[io.TextIOWrapper]:
    """The file as UTF-8 text (a byte-order mark dropped), read as it is consumed; the file stays open."""
    file.seek(0)
    stream = io.TextIOWrapper(_innermost(file), encoding="utf-8-sig", newline=newline)  # type: ignore[arg-type]
    try:
        yield stream
    except UnicodeDecodeError as exc:
        raise _not_utf8(file) from exc
    finally:
        stream.detach()


def _quote(text: str) -> str:
    return text if len(text) <= IMPORT_MAX_QUOTED_LINE_CHARS else text[:IMPORT_MAX_QUOTED_LINE_CHARS] + "…"


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


@dataclass(slots=True)  # not frozen: a frozen dataclass is ~3x slower to make, and an import makes one per row
class _Record:
    value: Any
    row: int  # 1 for the first record
    line: int  # the file's line where the record ends
    checked: bool  # already known to be JSON the tables accept (a CSV row: typed cells only)
    source: str | None = None  # an NDJSON record's line, as read: parsed again to refuse a number (_check_numbers)


def _line_value(number: int, line: str) -> Any:
    """The JSON value of NDJSON line `number` (`line` as read), every number checked; the refusal naming the line
    and what is wrong with it when it is none."""
    line = line.removesuffix("\n").removesuffix("\r")
    try:
        return json_loads(line)
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


def _ndjson_records(stream: IO[str]) -> Iterator[_Record]:
    depth = max_table_depth() - 1  # each record sits in the table's array
    row = 0
    # Lines end at \n (and \r\n) only: a split at U+2028 or a lone \r would cut a JSON value in two.
    for number, line in enumerate(stream, start=1):
        if line.isspace():
            continue
        try:
            # The line's end is JSON whitespace. A float beyond a 64-bit float reads as an infinity, refused after
            # the record is encoded (_check_numbers): a scan of every line for one costs more.
            value = json_loads(line, floats_checked=False)
        except (ValueError, RecursionError):
            value = _line_value(number, line)  # refuses the line, naming what is wrong (a position in it)
        # A line with no more brackets than the depth allows cannot nest deeper (brackets in strings only
        # overcount): the walk over the value runs for the rare line that might.
        path = None if line.count("{") + line.count("[") <= depth else nesting_beyond(value, depth)
        if path is not None:
            _line_value(number, line)  # a number beyond a float is refused first, as the line's parse refuses it
            raise ValidationError(
                {
                    "data": ValidationError(
                        "A table document nests at most %(max)d levels of objects and arrays "
                        "(TOOLHUB_MAX_TABLE_DEPTH); this one goes deeper at %(where)s.",
                        code="too_deep",
                        params={"max": depth + 1, "where": describe_path([row, *path])},
                    )
                }
            )
        row += 1
        yield _Record(value, row, number, checked=False, source=line)


def _cell(text: str) -> Any:
    if text == "":
        return None
    if text[0] not in _TYPED_STARTS:
        return text  # no integer, number or boolean starts so: most text cells skip the patterns below
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


def _csv_records(stream: IO[str]) -> Iterator[_Record]:
    first = stream.readline(SNIFF_CHARS)
    if first and not first.endswith(("\n", "\r")):
        first += stream.readline()  # the rest of a long header line
    reader = csv.reader(itertools.chain([first], stream), dialect=RFC4180, delimiter=_delimiter(first))
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
        count = 0
        for row in reader:
            if not row:
                continue  # a blank line
            if len(row) != len(names):
                raise _refuse(
                    "Row %(row)d (line %(line)d) has %(got)d values; the header has %(want)d columns.",
                    row=count + 1,
                    line=reader.line_num,
                    got=len(row),
                    want=len(names),
                )
            count += 1
            yield _Record(dict(zip(names, map(_cell, row), strict=True)), count, reader.line_num, checked=True)
    except csv.Error as exc:
        raise _refuse(
            "Invalid CSV at line %(line)d: %(error)s.", line=reader.line_num, error=str(exc).rstrip(".")
        ) from exc


def _records(file: IO[bytes], fmt: str) -> Iterator[_Record]:
    with _text(file, newline="" if fmt == "csv" else "\n") as stream:
        yield from (_csv_records(stream) if fmt == "csv" else _ndjson_records(stream))


def _check_file(file: IO[bytes], rows: bool = False) -> None:
    """Refuse, unread, a file larger than the table it would make may be (a document's TOOLHUB_MAX_TABLE_BYTES, a
    rows table's TOOLHUB_MAX_ROWS_TABLE_BYTES: its JSON is never shorter than the file), and an empty one."""
    limit = max_rows_table_bytes(connection.vendor) if rows else max_table_bytes()
    size = _size(file)
    if size > limit:
        if rows:
            raise _refuse(
                "The file is %(size)d bytes; a table is at most %(max)d bytes (TOOLHUB_MAX_ROWS_TABLE_BYTES).",
                size=size,
                max=limit,
            )
        raise _refuse(
            "The file is %(size)d bytes; a table document is at most %(max)d bytes (TOOLHUB_MAX_TABLE_BYTES).",
            size=size,
            max=limit,
        )
    if _is_blank(file):
        raise _refuse("The file is empty.")


def _json_document(file: IO[bytes]) -> Any:
    with _text(file, newline="") as stream:
        text = stream.read()
    return _parse_json(text)


def _grow(size: int, record: _Record, length: int) -> int:
    """The table's JSON text length once `record` (`length` characters as JSON) is appended to `size`
    characters; the file is refused when the text, closed, would be over TOOLHUB_MAX_TABLE_BYTES."""
    size += length + (len(_SEPARATOR) if record.row > 1 else 0)
    limit = max_table_bytes()
    if size + 1 > limit:  # + the closing bracket
        raise _refuse(
            "By row %(row)d (line %(line)d) the table is already over %(max)d bytes of JSON "
            "(TOOLHUB_MAX_TABLE_BYTES); import a smaller file.",
            row=record.row,
            line=record.line,
            max=limit,
        )
    return size


def _check_record(record: _Record, text: str) -> None:
    """Refuse what no table may hold: NaN, Infinity, a NUL character, a lone surrogate (a CSV's cells can
    only hold a NUL); the same refusal as a table write's (`data`). `text` is the record's ASCII JSON
    (json.JSONEncoder's, NaN written as such)."""
    try:
        if not record.checked:
            # In that text NaN, Infinity, a NUL and a lone surrogate are written `NaN`, `Infinity`, `\u0000` and
            # `\udXXX`: a text holding none of those holds none of them (one holding one, perhaps inside a string,
            # gets the full check). Four `in` tests: any() over a tuple would make a generator per record.
            if "NaN" in text or "Infinity" in text or "\\u0000" in text or "\\ud" in text:
                validate_json_value(record.value)
        elif "\\u0000" in text and json_text_has_nul(text):
            raise ValidationError("Strings must not contain the character U+0000 (NUL).", code="invalid_json")
    except ValidationError as exc:
        raise ValidationError({"data": exc.error_list}) from exc


def _check_numbers(record: _Record, text: str) -> None:
    """Refuse an NDJSON record holding a number beyond a 64-bit float as its line's parse refuses it (naming the
    line, the number and its column). Its line was parsed without that check: such a number reads as an infinity,
    which `text` (the record's JSON, json.JSONEncoder's) writes `Infinity`; a line whose record shows it is parsed
    again with every number checked (a line holding the constant `Infinity` parses, and _check_record refuses it)."""
    if record.source is not None and "Infinity" in text:
        _line_value(record.line, record.source)


def parse_table_file(raw: bytes, fmt: str) -> Any:
    """The JSON document a file of format `fmt` (json, csv, ndjson) holds; ValidationError on `file` if bad.

    The whole document as Python values (the admin edits it so); imports through the API stream instead
    (table_import). The table limits are checked by the write that follows, as for every document.
    """
    if fmt not in IMPORT_FORMATS:
        raise ValueError(f"unknown import format {fmt!r}")
    file = io.BytesIO(raw)
    _check_file(file)
    if fmt == "json":
        return _json_document(file)
    records = []
    size = 1
    encode = json.JSONEncoder().encode  # TableDocumentEncoder's text, without its whole-document check
    for record in _records(file, fmt):
        text = encode(record.value)
        _check_numbers(record, text)
        size = _grow(size, record, len(text))
        records.append(record.value)
    return records


def _refuse_row(record: _Record, message: str, **params: Any) -> ValidationError:
    return _refuse("Row %(row)d (line %(line)d): " + message, row=record.row, line=record.line, **params)


class _Encoded:
    """The compact text of the record a stream yielded last (record_texts'), for the store to write without
    encoding the record again."""

    __slots__ = ("compact", "record")

    def __init__(self) -> None:
        self.record: Any = None
        self.compact: str | None = None

    def compact_of(self, record: Any) -> str | None:
        return self.compact if record is self.record else None


def _rows_stream(file: IO[bytes], fmt: str, out: IO[str], table: Table, encoded: _Encoded) -> Iterator[Any]:
    """The file's records, checked one at a time as they are read, for the table's rows; each is also written to
    `out` as the table's JSON text (an array), and `table.data_bytes` follows its length. Refused at the record
    that breaks a rule (nothing is written: the caller's transaction rolls back): a record's JSON over
    TOOLHUB_MAX_RECORD_BYTES, more records than TOOLHUB_MAX_TABLE_RECORDS, the table's JSON over
    TOOLHUB_MAX_ROWS_TABLE_BYTES (VALIDATION_ERROR on `file` naming the row, its line and the setting), or over the
    owner's TOOLHUB_MAX_OWNER_DATA_BYTES (QUOTA_EXCEEDED). Each record is encoded once: its text in the document
    (TableDocumentEncoder's; the limits are checked record by record on it) and its stored text (kept in `encoded`
    for the store) come from one encoding."""
    table_limit = max_rows_table_bytes(connection.vendor)
    records_limit = max_table_records()
    record_limit = max_record_bytes()
    quota_left = data_quota_left(owner_id=table.owner_id, table_id=table.pk)
    out.write("[")
    size = 1
    for record in _records(file, fmt):
        text, compact = record_texts(record.value)
        _check_numbers(record, text)
        _check_record(record, text)
        if record.row > records_limit:
            raise _refuse_row(
                record, "a table holds at most %(max)d records (TOOLHUB_MAX_TABLE_RECORDS).", max=records_limit
            )
        if len(text) > record_limit:
            raise _refuse_row(
                record,
                "the record is %(size)d bytes of JSON; one record is at most %(max)d bytes (TOOLHUB_MAX_RECORD_BYTES).",
                size=len(text),
                max=record_limit,
            )
        key = record.value.get("id") if isinstance(record.value, dict) else None
        if isinstance(key, str) and len(key.encode()) > MAX_RECORD_KEY_BYTES:
            raise _refuse_row(
                record,
                "its id is over %(max)d bytes of UTF-8; a record's key is at most that.",
                max=MAX_RECORD_KEY_BYTES,
            )
        size += len(text) + (len(_SEPARATOR) if record.row > 1 else 0)
        if size + 1 > table_limit:  # + the closing bracket
            raise _refuse(
                "By row %(row)d (line %(line)d) the table is already over %(max)d bytes of JSON "
                "(TOOLHUB_MAX_ROWS_TABLE_BYTES); import a smaller file.",
                row=record.row,
                line=record.line,
                max=table_limit,
            )
        if quota_left is not None and size + 1 > quota_left:
            # The owner's other tables as data_quota_left read them: no statement runs while the rows' COPY is open.
            others = max_owner_data_bytes() - quota_left
            data_quota_check(owner_id=table.owner_id, table_id=table.pk, new_size=size + 1, others=others)
        if record.row > 1:
            out.write(_SEPARATOR)
        out.write(text)
        table.data_bytes = size + 1
        encoded.record, encoded.compact = record.value, compact
        yield record.value
    out.write("]")


@dataclass(frozen=True, slots=True)
class ImportedTable:
    """A table just created by table_import, with its document's JSON text (read it before the block ends)."""

    table: Table
    document: IO[str]


@contextmanager
def table_import(*, owner: Any, name: str, file: IO[bytes], fmt: str, description: str = "") -> Iterator[ImportedTable]:
    """Create a table from an uploaded file (format json, csv or ndjson); all or nothing (see the module).

    A context manager: the block gets the table and its document as JSON text (a temporary file, gone when
    the block ends), so that a caller can answer with the document without parsing it back. Holds one of
    the owner's import slots from the start (RATE_LIMITED when none is free).
    """
    if fmt not in IMPORT_FORMATS:
        raise ValueError(f"unknown import format {fmt!r}")
    with import_slots.held(getattr(owner, "pk", None)), tempfile.TemporaryFile("w+", encoding="ascii") as out:
        if fmt != "json":
            # An array of records: streamed into the rows of a table stored as rows, never held whole.
            _check_file(file, rows=True)
            encoded = _Encoded()
            table = table_create_rows(
                owner=owner,
                name=name,
                description=description,
                records=lambda created: _rows_stream(file, fmt, out, created, encoded),
                compact_of=encoded.compact_of,
            )
            out.flush()
            out.seek(0)
            yield ImportedTable(table=table, document=out)
            return
        # A JSON file is one document, parsed whole: a table stored as a document, within TOOLHUB_MAX_TABLE_BYTES.
        _check_file(file)
        document = _json_document(file)
        try:
            validate_table_depth(document)
            validate_json_value(document)
            text = TableDocumentEncoder().encode(document)
        except ValidationError as exc:
            raise ValidationError({"data": exc.error_list}) from exc
        del document
        out.write(text)
        size = len(text)
        del text
        out.flush()
        out.seek(0)
        stored: IO[bytes] = out.buffer  # type: ignore[assignment]
        table = table_create_encoded(owner=owner, name=name, description=description, document=stored, size=size)
        out.seek(0)
        yield ImportedTable(table=table, document=out)
