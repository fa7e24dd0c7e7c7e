"""The one error shape of the JSON API (SPEC §6): `{"error", "message", "fields"}`, never a 500 for bad input."""

import pytest
import yaml
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError
from rest_framework import exceptions
from rest_framework.test import APIClient

from tests.api_helpers import client_for, db_snapshot, response_json
from tools_app.api.errors import exception_handler
from tools_app.kernel.errors import ErrorCode, ToolhubError
from tools_app.models import ApiToken

pytestmark = pytest.mark.django_db

PASSWORD = "pw-123456!"  # the root conftest's make_user default


#
# Authentication
#


def test_anonymous_is_a_401_with_www_authenticate_and_no_data(owner, table):
    """SPEC §6: no credentials → 401, no data."""
    # when
    response = APIClient().get("/api/tables/")

    # then
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Token"
    assert response.json() == {
        "error": "NOT_AUTHENTICATED",
        "message": "Authentication credentials were not provided.",
    }


def test_token_endpoint_returns_a_token_that_authenticates(owner, table):
    """POST /api/auth/token/ {username, password} → {"token"}; then `Authorization: Token <token>` works."""
    # given
    client = APIClient()

    # when
    response = client.post("/api/auth/token/", {"username": "owner", "password": PASSWORD}, format="json")
    client.credentials(HTTP_AUTHORIZATION=f"Token {response.json()['token']}")
    listed = client.get("/api/tables/")

    # then
    assert response.status_code == 200
    token = response.json()["token"]
    assert list(response.json()) == ["token"]
    assert ApiToken.objects.get(user=owner).digest == ApiToken.hash_token(token)
    assert listed.status_code == 200
    assert [row["id"] for row in listed.json()["results"]] == [table.pk]


def test_token_endpoint_issues_a_new_token_per_login(owner):
    """Each login is a new token (knox's model), both working until they expire or are revoked."""
    client = APIClient()
    first = client.post("/api/auth/token/", {"username": "owner", "password": PASSWORD}, format="json").json()
    second = client.post("/api/auth/token/", {"username": "owner", "password": PASSWORD}, format="json").json()
    assert first != second
    assert ApiToken.objects.filter(user=owner).count() == 2
    for body in (first, second):
        client.credentials(HTTP_AUTHORIZATION=f"Token {body['token']}")
        assert client.get("/api/tables/").status_code == 200


@pytest.mark.parametrize(
    ("payload", "fields"),
    [
        ({"username": "owner", "password": "wrong"}, ["non_field_errors"]),
        ({"username": "nobody", "password": PASSWORD}, ["non_field_errors"]),
        ({"username": "owner"}, ["password"]),
        ({}, ["username", "password"]),
    ],
)
def test_token_endpoint_refuses_bad_credentials_without_minting_a_token(owner, payload, fields):
    """Wrong or missing credentials are a 400 naming what is wrong; no token is created."""
    # given
    before = db_snapshot()

    # when
    response = APIClient().post("/api/auth/token/", payload, format="json")

    # then
    assert response.status_code == 400
    assert response.json()["error"] == "VALIDATION_ERROR"
    assert sorted(response.json()["fields"]) == sorted(fields)
    assert db_snapshot() == before


@pytest.mark.parametrize("header", ["Token stale-or-revoked", "Token", "Bearer thk_x", "Basic b3duZXI6eA=="])
def test_token_endpoint_ignores_a_stale_authorization_header(owner, header):
    """POST /api/auth/token/ checks the username and password only: a stale header does not make it a 401."""
    # given
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)

    # when
    response = client.post("/api/auth/token/", {"username": "owner", "password": PASSWORD}, format="json")

    # then
    assert response.status_code == 200
    assert ApiToken.objects.get(user=owner).digest == ApiToken.hash_token(response.json()["token"])


def test_token_endpoint_with_a_stale_header_and_a_wrong_password_is_a_400(owner):
    """The same request with a wrong password is the usual 400, not a 401; no token is minted."""
    # given
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token stale-or-revoked")
    before = db_snapshot()

    # when
    response = client.post("/api/auth/token/", {"username": "owner", "password": "wrong"}, format="json")

    # then
    assert response.status_code == 400
    assert response.json() == {
        "error": "VALIDATION_ERROR",
        "message": "Invalid input.",
        "fields": {"non_field_errors": ["Unable to log in with provided credentials."]},
    }
    assert db_snapshot() == before


@pytest.mark.usefixtures("login_lockout_off")
def test_token_endpoint_does_not_accept_a_session_in_place_of_a_password(owner):
    """A logged-in session is no credential for the token endpoint: it still needs username and password."""
    # given
    client = APIClient()
    assert client.login(username="owner", password=PASSWORD)

    # when
    response = client.post("/api/auth/token/", {}, format="json")

    # then
    assert response.status_code == 400
    assert sorted(response.json()["fields"]) == ["password", "username"]
    assert not ApiToken.objects.exists()


def test_a_wrong_token_is_a_401(owner):
    """An unknown token is AUTHENTICATION_FAILED."""
    # given
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")

    # when
    response = client.get("/api/tables/")

    # then
    assert response.status_code == 401
    assert response.json() == {"error": "AUTHENTICATION_FAILED", "message": "Invalid token."}


@pytest.mark.usefixtures("login_lockout_off")
def test_session_auth_works(owner, table):
    """Session auth (the browsable API): a logged-in user is served."""
    # given
    client = APIClient()
    assert client.login(username="owner", password=PASSWORD)

    # when
    response = client.get(f"/api/tables/{table.pk}/")

    # then
    assert response.status_code == 200
    assert response_json(response)["id"] == table.pk


#
# Bad requests
#


def test_malformed_json_is_a_400_parse_error_and_writes_nothing(owner):
    """A body that is not JSON is PARSE_ERROR, not a 500."""
    # given
    before = db_snapshot()

    # when
    response = client_for(owner).post("/api/tables/", '{"name": ', content_type="application/json")

    # then
    assert response.status_code == 400
    assert response.json()["error"] == "PARSE_ERROR"
    assert response.json()["message"].startswith("JSON parse error")
    assert db_snapshot() == before


def test_a_json_list_body_is_a_400_validation_error(owner):
    """A JSON value that is not an object is a VALIDATION_ERROR."""
    # when
    response = client_for(owner).post("/api/tables/", [1, 2], format="json")

    # then
    assert response.status_code == 400
    assert response.json() == {
        "error": "VALIDATION_ERROR",
        "message": "Invalid input.",
        "fields": {"non_field_errors": ["Invalid data. Expected a dictionary, but got list."]},
    }


def test_an_unsupported_media_type_is_a_415(owner):
    """A body in a format the API does not read is 415."""
    response = client_for(owner).post("/api/tables/", "name=x", content_type="text/plain")
    assert response.status_code == 415
    assert response.json()["error"] == "UNSUPPORTED_MEDIA_TYPE"


@pytest.mark.parametrize(
    ("payload", "field", "message"),
    [
        ({"name": "t", "type": "query_data", "table": "abc", "description": "d"}, "table", "Incorrect type."),
        ({"name": ["x"], "type": "search_tools", "description": "d"}, "name", "Not a valid string."),
        ({"name": "t", "type": 7, "description": "d"}, "type", '"7" is not a valid choice.'),
    ],
)
def test_wrong_types_are_a_400_naming_the_field(owner, payload, field, message):
    """Values of the wrong JSON type are named in `fields`."""
    # when
    response = client_for(owner).post("/api/tools/", payload, format="json")

    # then
    assert response.status_code == 400
    assert response.json()["fields"][field][0].startswith(message)


@pytest.mark.parametrize("page", ["99999999999999999999999999", "abc", "0", "-1", "2"])
def test_pages_out_of_range_are_a_404(owner, table, page):
    """A page past the end or not a number is NOT_FOUND "Invalid page.", never a 500."""
    response = client_for(owner).get(f"/api/tables/?page={page}")
    assert response.status_code == 404
    assert response.json() == {"error": "NOT_FOUND", "message": "Invalid page."}


@pytest.mark.parametrize(("page_size", "expected"), [("100000000000000000000", 2), ("500", 2), ("1", 1)])
def test_page_size_over_the_maximum_is_clamped(owner, make_table, page_size, expected):
    """A page_size over 500 is clamped to it."""
    # given
    make_table(owner, name="a")
    make_table(owner, name="b")

    # when
    response = client_for(owner).get(f"/api/tables/?page_size={page_size}")

    # then
    assert response.status_code == 200
    assert len(response.json()["results"]) == expected


@pytest.mark.parametrize("page_size", ["abc", "-5", "0", "null", "true", "1.5", "+5", " 5", "\u0665"])
def test_a_malformed_page_size_is_a_400_naming_it(owner, table, page_size):
    """A page_size that is not a whole number of at least 1 is refused, not replaced by the default."""
    response = client_for(owner).get("/api/tables/", {"page_size": page_size})
    assert response.status_code == 400
    assert response.json() == {
        "error": "VALIDATION_ERROR",
        "message": "Invalid input.",
        "fields": {"page_size": [f"A whole number of at least 1 is required (got {page_size!r})."]},
    }


@pytest.mark.parametrize("object_id", ["99999999999999999999999", "-1", "0", "abc"])
def test_malformed_or_huge_ids_are_a_404(owner, object_id):
    """Ids that cannot exist are NOT_FOUND."""
    for path in (f"/api/tables/{object_id}/", f"/api/tools/{object_id}/call/", f"/api/bindings/{object_id}/"):
        response = client_for(owner).get(path) if "call" not in path else client_for(owner).post(path, {})
        assert response.status_code == 404, path
        assert response.json()["error"] == "NOT_FOUND"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/api/tables/?format=xml", "Unknown format 'xml': use one of api, json."),
        ("/api/tables/1/?format=csv", "Unknown format 'csv': use one of api, json."),
    ],
)
def test_an_unknown_format_is_a_406_in_the_error_shape(owner, table, path, message):
    """`?format=` picks a renderer; one the endpoint does not have is 406 NOT_ACCEPTABLE (was a bare 404)."""
    # when
    response = client_for(owner).get(path)

    # then
    assert response.status_code == 406
    assert response["content-type"] == "application/json"
    assert response.json() == {"error": "NOT_ACCEPTABLE", "message": message}


def test_an_unknown_schema_format_is_a_406_in_the_schemas_default_format(owner):
    """/api/schema/ renders its answers, errors included, as YAML unless JSON is asked for."""
    # when
    response = client_for(owner).get("/api/schema/?format=xml")

    # then
    assert response.status_code == 406
    assert yaml.safe_load(response.content) == {
        "error": "NOT_ACCEPTABLE",
        "message": "Unknown format 'xml': use one of json, yaml.",
    }


@pytest.mark.parametrize(("fmt", "content_type"), [("json", "application/json"), ("api", "text/html; charset=utf-8")])
def test_a_known_format_is_served(owner, table, fmt, content_type):
    """`?format=json` and `?format=api` (the browsable API) keep working."""
    response = client_for(owner).get(f"/api/tables/{table.pk}/?format={fmt}")
    assert response.status_code == 200
    assert response["content-type"] == content_type


def test_an_unsatisfiable_accept_header_is_a_406(owner):
    """An Accept header no renderer satisfies is 406 NOT_ACCEPTABLE too."""
    response = client_for(owner).get("/api/tables/", HTTP_ACCEPT="application/xml")
    assert response.status_code == 406
    assert response.json() == {"error": "NOT_ACCEPTABLE", "message": "Could not satisfy the request Accept header."}


def test_a_method_not_offered_is_a_405(owner):
    """DELETE on a list is METHOD_NOT_ALLOWED."""
    response = client_for(owner).delete("/api/tables/")
    assert response.status_code == 405
    assert response.json() == {"error": "METHOD_NOT_ALLOWED", "message": 'Method "DELETE" not allowed.'}


def test_an_unexpected_error_is_a_500_without_internals(owner, table, monkeypatch):
    """A bug is a 500 INTERNAL_ERROR whose body reveals nothing of the exception."""
    # given
    from tools_app.api import serializers

    def broken(self, instance):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(serializers.TableSerializer, "to_representation", broken)

    # when
    response = client_for(owner).get(f"/api/tables/{table.pk}/")

    # then
    assert response.status_code == 500
    assert response.json() == {
        "error": "INTERNAL_ERROR",
        "message": "An unexpected error occurred; it has been logged.",
    }


#
# The handler itself
#


def test_handler_maps_toolhub_errors_to_their_code_and_status():
    """ToolhubError → 400 with its code; NOT_FOUND → 404; NAME_CONFLICT → 409; details are kept."""
    bad = exception_handler(ToolhubError(ErrorCode.INVALID_QUERY, "Bad query.", {"at": 3}), {})
    missing = exception_handler(ToolhubError(ErrorCode.NOT_FOUND, "No such thing."), {})
    conflict = exception_handler(ToolhubError(ErrorCode.NAME_CONFLICT, "Taken."), {})
    assert (bad.status_code, bad.data) == (
        400,
        {"error": "INVALID_QUERY", "message": "Bad query.", "details": {"at": 3}},
    )
    assert (missing.status_code, missing.data) == (404, {"error": "NOT_FOUND", "message": "No such thing."})
    assert (conflict.status_code, conflict.data["error"]) == (409, "NAME_CONFLICT")


def test_handler_turns_a_django_validation_error_with_name_conflict_into_409():
    """A Django ValidationError carrying code NAME_CONFLICT (from a service) is 409 NAME_CONFLICT."""
    exc = DjangoValidationError({"name": DjangoValidationError("Name taken on 'crm'.", code="NAME_CONFLICT")})
    response = exception_handler(exc, {})
    assert response.status_code == 409
    assert response.data == {
        "error": "NAME_CONFLICT",
        "message": "Name taken on 'crm'.",
        "fields": {"name": ["Name taken on 'crm'."]},
    }


def test_handler_flattens_nested_field_errors():
    """Nested serializer errors get dotted field names, so `fields` is always {field: [messages]}."""
    exc = exceptions.ValidationError({"arguments": {"query": ["Required."]}, "items": [{}, {"id": ["Bad."]}]})
    response = exception_handler(exc, {})
    assert response.status_code == 400
    assert response.data["fields"] == {"arguments.query": ["Required."], "items.1.id": ["Bad."]}


def test_handler_turns_an_integrity_error_into_a_409_conflict():
    """A uniqueness race lost after validation is a 409, not a 500."""
    response = exception_handler(IntegrityError("duplicate key value violates unique constraint"), {})
    assert response.status_code == 409
    assert response.data["error"] == "CONFLICT"
    assert "duplicate" not in response.data["message"]


def test_deeply_nested_json_is_a_400_not_a_500(owner):
    """JSON nested beyond Python's recursion limit is refused as bad input; nothing is written."""
    # given
    before = db_snapshot()
    body = '{"name": "deep", "data": ' + "[" * 100_000 + "]" * 100_000 + "}"

    # when
    response = client_for(owner).post("/api/tables/", body, content_type="application/json")

    # then
    assert response.status_code == 400
    assert response.json() == {"error": "VALIDATION_ERROR", "message": "The input is nested too deeply to process."}
    assert db_snapshot() == before


@pytest.mark.parametrize("data", [{"k": "a\u0000b"}, {"\u0000": 1}, ["\u0000"]])
def test_nul_characters_in_table_data_are_a_400_on_every_backend(owner, data):
    """U+0000 cannot be stored by PostgreSQL's jsonb: refused as a validation error naming `data`, not a 500."""
    # given
    before = db_snapshot()

    # when
    response = client_for(owner).post("/api/tables/", {"name": "nul", "data": data}, format="json")

    # then
    assert response.status_code == 400
    assert response.json()["fields"] == {"data": ["Strings must not contain the character U+0000 (NUL)."]}
    assert db_snapshot() == before


def test_the_text_backslash_u0000_is_ordinary_data(owner):
    """Only the NUL character is refused; the six characters \\u0000 are ordinary text."""
    response = client_for(owner).post("/api/tables/", {"name": "t", "data": {"k": "\\u0000"}}, format="json")
    assert response.status_code == 201
    assert response.json()["data"] == {"k": "\\u0000"}


def test_nul_characters_in_call_arguments_are_invalid_arguments(owner, table, make_tool):
    """A write call carrying U+0000 is INVALID_ARGUMENTS and leaves the table as it was."""
    # given
    tool = make_tool(owner, table, type="create")
    before = db_snapshot()

    # when
    response = client_for(owner).post(
        f"/api/tools/{tool.pk}/call/", {"arguments": {"elements": [{"id": 9, "note": "\u0000"}]}}, format="json"
    )

    # then
    assert response.status_code == 400
    assert response.json()["error"] == "INVALID_ARGUMENTS"
    after = db_snapshot()
    assert after["tools_app.Table"] == before["tools_app.Table"]
