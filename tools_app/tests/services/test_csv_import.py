"""CSV import is RFC 4180 (tools_app/services/imports.py): a corpus of quoting cases, each read by the import
and by a reference reader — Python's csv module set to RFC 4180 by hand (no sniffing) — with the same
result, or refused by both."""

import csv
import io

import pytest
from django.core.exceptions import ValidationError

from tools_app.services import parse_table_file

# (name, text, delimiter): every cell is text (no number, boolean or empty cell), so the import's typed cells
# equal the reference's strings.
CORPUS = [
    ("plain", "id,text\nx,abc\n", ","),
    ("quoted delimiter", 'id,text\nx,"a, b"\n', ","),
    ("doubled quotes and a comma", 'id,text\nx,"a ""quoted"" , comma"\n', ","),
    ("only doubled quotes", 'id,text\nx,""""""\n', ","),
    ("doubled quote at the start", 'id,text\nx,"""a"\n', ","),
    ("doubled quote at the end", 'id,text\nx,"a"""\n', ","),
    ("quoted line break", 'id,text\nx,"line one\nline two"\n', ","),
    ("quoted CRLF", 'id,text\r\nx,"line one\r\nline two"\r\n', ","),
    ("CRLF line ends", "id,text\r\nx,abc\r\ny,def\r\n", ","),
    ("no final line break", 'id,text\nx,"a ""b"""', ","),
    ("quoted header", '"id","the ""text"""\nx,abc\n', ","),
    ("quoted header with the delimiter", '"a,b",c\nx,y\n', ","),
    ("spaces belong to the field", "id,text\nx,  a b  \n", ","),
    ("single quotes are text", "id,text\nx,'a b'\n", ","),
    ("single-quoted header", "'id','text'\nx,y\n", ","),
    ("quote inside an unquoted field is text", 'id,text\nx,a"b\n', ","),
    ("semicolon with doubled quotes", 'id;text\nx;"a ""b""; c"\n', ";"),
    ("tab with doubled quotes", 'id\ttext\nx\t"a ""b""\tc"\n', "\t"),
    ("bar", "id|text\nx|a,b\n", "|"),
    ("doubled quotes and comma in several cells", 'a,b,c\n"1 ""x"", y","2, ""z""",w\n', ","),
]

# Refused by the reference reader (csv.Error) or with a row whose length is not the header's.
REFUSED = [
    ("text after a closing quote", 'id,a,b\n1,"x ""y"", z"\n', ","),  # 2 cells: the quote opened at x closes at z
    ("stray quote after a quoted field", 'id,text\nx,"a"b\n', ","),
    ("backslash-escaped quote", 'id,text\nx,"a \\"b\\" c"\n', ","),
    ("unterminated quote", 'id,text\nx,"abc\n', ","),
    ("quoted field then a space", 'id,text\nx,"abc" \n', ","),
]


def reference(text: str, delimiter: str) -> list[dict]:
    """RFC 4180 as Python's csv module reads it when told so (no sniffing): records keyed by the header."""
    rows = list(
        csv.reader(
            io.StringIO(text, newline=""),
            delimiter=delimiter,
            quotechar='"',
            doublequote=True,
            escapechar=None,
            skipinitialspace=False,
            strict=True,
        )
    )
    header, body = [name.strip() for name in rows[0]], [row for row in rows[1:] if row]
    for row in body:
        if len(row) != len(header):
            raise csv.Error(f"a row has {len(row)} cells, the header {len(header)}")
    return [dict(zip(header, row, strict=True)) for row in body]


@pytest.mark.parametrize(("text", "delimiter"), [case[1:] for case in CORPUS], ids=[case[0] for case in CORPUS])
def test_the_import_reads_each_quoting_case_as_the_reference_reader(text, delimiter):
    """Quoted delimiters, doubled quotes, quoted line breaks, CRLF, quoted headers: cell for cell as RFC 4180."""
    assert parse_table_file(text.encode(), "csv") == reference(text, delimiter)


@pytest.mark.parametrize(("text", "delimiter"), [case[1:] for case in REFUSED], ids=[case[0] for case in REFUSED])
def test_the_import_refuses_what_the_reference_reader_refuses(text, delimiter):
    """Text after a closing quote, a backslash escape, an unterminated quote: refused by both, never split
    another way."""
    with pytest.raises(csv.Error):
        reference(text, delimiter)
    with pytest.raises(ValidationError) as refused:
        parse_table_file(text.encode(), "csv")
    assert list(refused.value.error_dict) == ["file"]


def test_doubled_quotes_with_a_comma_are_one_cell():
    """The header alone shows no doubled quote; the rows' `""` is still an escaped quote."""
    assert parse_table_file(b'id,text\n1,"a ""quoted"" , comma"\n', "csv") == [{"id": 1, "text": 'a "quoted" , comma'}]


def test_a_row_split_wrongly_by_its_quotes_is_refused_naming_it():
    """`"x ""y"", z"` is one cell: the row has 2 values for 3 columns."""
    with pytest.raises(ValidationError) as refused:
        parse_table_file(b'id,a,b\n1,"x ""y"", z"\n', "csv")
    assert refused.value.message_dict == {"file": ["Row 1 (line 2) has 2 values; the header has 3 columns."]}
