"""A JSON number Python cannot hold — an integer over Python's 4,300-digit conversion limit, a number beyond a
64-bit float — is a typed refusal naming the number wherever a client's JSON is parsed (one parser:
tools_app.validators.json_loads): API bodies (table create and PATCH, tool call arguments), table files
(JSON, NDJSON), the admin's JSON fields, MCP requests. Never a 500, nothing written."""

import io
import json

import pytest
from django.urls import reverse

from mcp_app.tests.mcp_harness import Harness, rpc_body, rpc_headers
from tests.api_helpers import client_for, db_snapshot
from tools_app.models import CallLog
from tools_app.validators import JSONNumberError, _maybe_huge_float, json_loads

pytestmark = pytest.mark.django_db

BIG = "9" * 5000
BIG_SHOWN = "9" * 30 + "… (5000 digits)"
TOO_LONG = "too long: integers have at most 4300 digits."


#
# The parser
#


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a": ' + BIG + "}", f"The number {BIG_SHOWN} at line 1, column 7 is {TOO_LONG}"),
        ("[1,\n -" + "1" * 4301 + "]", f"The number -{'1' * 29}… (4301 digits) at line 2, column 2 is {TOO_LONG}"),
        (
            '{"x": 1e400}',
            "The number 1e400 at line 1, column 7 is too large: numbers are at most about 1.8e308 (a 64-bit float).",
        ),
        (
            "[-" + "1" * 400 + ".5]",
            f"The number -{'1' * 29}… (401 digits) at line 1, column 2 is too large: "
            "numbers are at most about 1.8e308 (a 64-bit float).",
        ),
    ],
    ids=["5000-digit integer", "negative, second line", "1e400", "400-digit float"],
)
def test_a_number_python_cannot_hold_is_named_with_its_place(text, message):
    with pytest.raises(JSONNumberError) as refused:
        json_loads(text)
    assert str(refused.value) == message
    with pytest.raises(JSONNumberError):
        json_loads(text.encode())


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("[" + "9" * 4300 + "]", [int("9" * 4300)]),
        ('{"s": "' + BIG + '"}', {"s": BIG}),
        ('{"e": "e999", "n": 1.5e300}', {"e": "e999", "n": 1.5e300}),
        ("-0", 0),
        ("1E+308", 1e308),
    ],
    ids=["4300 digits", "digits in a string", "exponent-like text and a large float", "minus zero", "1E+308"],
)
def test_numbers_python_holds_parse_as_json_loads_does(text, value):
    assert json_loads(text) == value == json.loads(text)


@pytest.mark.parametrize(
    ("text", "checked"),
    [
        ('{"x": 1e400}', True),
        ("1E+308", True),
        ("[1e-999]", True),
        ("9" * 300, True),
        ("9" * 299, False),
        ("x" * 299 + "9", False),
        ("[1.5e10, 12e99]", False),
        ('{"query": "[?id==`42`] | [0]"}', False),
    ],
    ids=["1e400", "1E+308", "1e-999", "300 digits", "299 digits", "300 long, one digit", "2-digit exponents", "call"],
)
def test_the_checked_parse_runs_exactly_for_a_3_digit_exponent_or_300_digits(text, checked):
    """The pre-check that sends a body to the slower, checked parse: a superset of the literals that overflow."""
    assert _maybe_huge_float(text) is checked
    assert _maybe_huge_float(text.encode()) is checked


#
# API bodies
#


def test_api_table_create_with_a_huge_integer_is_a_400_naming_it(owner):
    # given
    before = db_snapshot()
    body = '{"name": "t", "data": {"n": ' + BIG + "}}"
    # when
    response = client_for(owner).post("/api/tables/", body, content_type="application/json")
    # then
    assert response.status_code == 400
    assert response.json() == {
        "error": "PARSE_ERROR",
        "message": f"JSON parse error - The number {BIG_SHOWN} at line 1, column 29 is {TOO_LONG}",
    }
    assert db_snapshot() == before


def test_api_table_patch_with_a_huge_integer_is_a_400_and_the_table_stays(owner, make_table):
    # given
    table = make_table(owner, data=[1])
    before = db_snapshot()
    # when
    response = client_for(owner).patch(
        f"/api/tables/{table.pk}/", '{"data": [' + BIG + "]}", content_type="application/json"
    )
    # then
    assert response.status_code == 400
    assert response.json()["error"] == "PARSE_ERROR"
    assert BIG_SHOWN in response.json()["message"]
    assert db_snapshot() == before


def test_api_tool_call_with_a_huge_number_in_its_arguments_is_a_400(owner, table, make_tool):
    # given
    tool = make_tool(owner, table, type="create", name="orders_create")
    before = db_snapshot()
    # when
    response = client_for(owner).post(
        f"/api/tools/{tool.pk}/call/", '{"arguments": {"elements": [{"id": 1e999}]}}', content_type="application/json"
    )
    # then
    assert response.status_code == 400
    assert response.json() == {
        "error": "PARSE_ERROR",
        "message": "JSON parse error - The number 1e999 at line 1, column 36 is too large: numbers are at most "
        "about 1.8e308 (a 64-bit float).",
    }
    assert db_snapshot() == before


#
# Table files
#


@pytest.mark.parametrize(
    ("content", "filename", "message"),
    [
        ('{"a": [1,\n' + BIG + "]}", "big.json", f"The number {BIG_SHOWN} at line 2, column 1 is {TOO_LONG}"),
        (
            '{"id": 1}\n{"id": ' + BIG + "}\n",
            "big.ndjson",
            f"Line 2: the number {BIG_SHOWN} at column 8 is {TOO_LONG}",
        ),
        (
            '[{"x": 2e308}]',
            "inf.json",
            "The number 2e308 at line 1, column 8 is too large: numbers are at most about 1.8e308 (a 64-bit float).",
        ),
        (
            '{"id": 1}\n{"id": 2, "x": -1e400}\n',
            "inf.ndjson",
            "Line 2: the number -1e400 at column 16 is too large: numbers are at most about 1.8e308 (a 64-bit float).",
        ),
        (
            '{"id": 1, "note": "Infinity"}\r\n{"id": 2, "note": "Infinity", "x": [1.5e999]}\r\n',
            "inf.ndjson",
            "Line 2: the number 1.5e999 at column 37 is too large: numbers are at most about 1.8e308 (a 64-bit float).",
        ),
        (
            '{"id": 1, "x": ' + "9" * 400 + ".5}\n",
            "long.ndjson",
            f"Line 1: the number {'9' * 30}… (401 digits) at column 16 is too large: numbers are at most about "
            "1.8e308 (a 64-bit float).",
        ),
    ],
    ids=["json", "ndjson", "json float", "ndjson float", "ndjson float, Infinity in strings", "ndjson long float"],
)
def test_an_imported_file_with_such_a_number_is_a_400_naming_it(owner, content, filename, message):
    # given
    before = db_snapshot()
    file = io.BytesIO(content.encode())
    file.name = filename
    # when
    response = client_for(owner).post("/api/tables/import/", {"file": file, "name": "t"}, format="multipart")
    # then
    assert response.status_code == 400
    assert response.json() == {"error": "VALIDATION_ERROR", "message": "Invalid input.", "fields": {"file": [message]}}
    assert db_snapshot() == before


#
# The admin
#


def test_the_admin_table_form_refuses_a_huge_integer_naming_it(client, owner):
    # given
    client.force_login(owner)
    before = db_snapshot()
    # when
    response = client.post(
        reverse("admin:tools_app_table_add"), {"name": "t", "description": "", "data": '{"n": ' + BIG + "}"}
    )
    # then
    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {
        "data": [f"Invalid JSON data: The number {BIG_SHOWN} at line 1, column 7 is {TOO_LONG}"]
    }
    assert db_snapshot() == before


#
# MCP
#


def test_an_mcp_call_with_a_huge_integer_is_a_parse_error_naming_it(
    owner, table, make_tool, instance, bind, make_api_key
):
    # given
    bind(instance, make_tool(owner, table, type="create", name="orders_create"))
    _, key = make_api_key(instance)
    before = db_snapshot()
    body = rpc_body("tools/call", {"name": "orders_create", "arguments": {"elements": [{"id": 1}]}})
    raw = json.dumps(body).replace('[{"id": 1}]', "[{" + '"id": ' + BIG + "}]").encode()
    assert BIG.encode() in raw
    # when
    response = Harness().http("POST", f"/mcp/{instance.slug}/", content=raw, headers=rpc_headers(body, key=key))
    # then
    reply = response.json()
    assert reply["error"]["code"] == -32700
    assert reply["error"]["message"].startswith(f"Parse error: The number {BIG_SHOWN} at line 1, column ")
    assert reply["error"]["message"].endswith(TOO_LONG)
    assert db_snapshot() == before
    assert CallLog.objects.count() == 0
