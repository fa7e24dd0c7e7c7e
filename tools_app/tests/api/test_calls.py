"""Call details (SPEC §10, docs/call-log.md): every call on every surface records its arguments and an excerpt of
its result or error, redacted and bounded, shown by GET /api/calls/ and /api/calls/<id>/ to the owner only."""

import json
import logging
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from mcp_app.tests.mcp_harness import Harness
from tests.api_helpers import client_for
from tools_app import services
from tools_app.admin.tool_forms import RAW_FIELD
from tools_app.execution import pipeline
from tools_app.models import CallLog

pytestmark = pytest.mark.django_db

SSN = "123-45-6789"
PASSWORD = "hunter2-very-secret"
KEY = "thk_" + "A" * 43
PEOPLE = [{"id": 1, "name": "ada", "ssn": SSN}, {"id": 2, "name": "alan", "ssn": "987-65-4321"}]
SURFACES = ["mcp", "api", "admin"]


@pytest.fixture(autouse=True)
def _fresh_upkeep():
    pipeline.upkeep.clear()
    yield
    pipeline.upkeep.clear()


@pytest.fixture
def people(owner, make_table, make_tool, instance, bind, make_api_key):
    """Instance 'shop' serving a people table whose `ssn` is redacted: a query tool, a create tool and a tool
    that takes any arguments (get_all_data with an open schema), and a key."""
    table = make_table(owner, name="people", data=[dict(p) for p in PEOPLE])
    services.table_update(table=table, redact_fields=["ssn"])
    tools = {
        "query": make_tool(owner, table, name="people_query"),
        "create": make_tool(owner, table, type="create", name="people_create"),
        "open": make_tool(owner, table, type="get_all_data", name="people_all", input_schema={"type": "object"}),
    }
    for tool in tools.values():
        bind(instance, tool)
    return {"table": table, "instance": instance, "key": make_api_key(instance)[1], **tools}


def call_on(surface: str, people: dict, owner, tool, arguments: dict) -> None:
    if surface == "mcp":
        reply = Harness().call("shop", people["key"], tool.name, arguments)
        assert "result" in reply, reply
    elif surface == "api":
        client_for(owner).post(f"/api/tools/{tool.pk}/call/", {"arguments": arguments}, format="json")
    else:
        client = Client()
        client.force_login(owner)
        response = client.post(reverse("admin:tools_app_tool_try", args=[tool.pk]), {RAW_FIELD: json.dumps(arguments)})
        assert response.status_code == 200


def raw_row(call_id: int) -> str:
    """Every column of the stored row as the database holds it, as one text."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {CallLog._meta.db_table} WHERE id = %s", [call_id])
        return " ".join(str(value) for value in cursor.fetchone())


#
# The API
#


def test_a_call_shows_what_the_client_sent_and_got(owner, people):
    # given: a query over MCP
    Harness().call("shop", people["key"], "people_query", {"query": "[?id==`2`].name"})
    call = CallLog.objects.get()
    # when
    body = client_for(owner).get(f"/api/calls/{call.pk}/").json()
    # then
    assert body == {
        "id": call.pk,
        "created_at": body["created_at"],
        "tool": people["query"].pk,
        "tool_name": "people_query",
        "instance": people["instance"].pk,
        "instance_slug": "shop",
        "surface": "mcp",
        "status": "ok",
        "error_code": "",
        "error_message": "",
        "duration_ms": call.duration_ms,
        "caller": "owner",
        "api_key": str(call.api_key),
        "oauth_client": "",
        "details_recorded": True,
        "arguments": {"query": "[?id==`2`].name"},
        "arguments_truncated": False,
        "result_excerpt": ["alan"],
        "result_truncated": False,
    }
    assert call.api_key.label in body["api_key"]


def test_a_failed_call_shows_its_error_as_the_excerpt(owner, people):
    client_for(owner).post(f"/api/tools/{people['query'].pk}/call/", {"arguments": {"query": "[?"}}, format="json")
    body = client_for(owner).get("/api/calls/").json()["results"][0]
    assert (body["surface"], body["status"], body["error_code"]) == ("api", "error", "INVALID_QUERY")
    assert body["arguments"] == {"query": "[?"}
    assert body["result_excerpt"]["error"] == "INVALID_QUERY"
    assert body["result_excerpt"]["message"] == body["error_message"]


def test_the_list_is_newest_first_and_filtered(owner, people):
    # given: an ok MCP call, a failed API call, an ok admin call
    call_on("mcp", people, owner, people["query"], {"query": "length(@)"})
    call_on("api", people, owner, people["query"], {"query": "[?"})
    call_on("admin", people, owner, people["open"], {})
    client = client_for(owner)

    def names(query: str) -> list[tuple[str, str, str]]:
        response = client.get(f"/api/calls/{query}")
        assert response.status_code == 200, response.json()
        return [(r["surface"], r["tool_name"], r["status"]) for r in response.json()["results"]]

    # then
    everything = names("")
    assert everything == [
        ("admin", "people_all", "ok"),
        ("api", "people_query", "error"),
        ("mcp", "people_query", "ok"),
    ]
    assert client.get("/api/calls/").json()["count"] == 3
    assert names("?surface=mcp") == [("mcp", "people_query", "ok")]
    assert names("?status=error") == [("api", "people_query", "error")]
    assert names("?status=ok&surface=admin") == [("admin", "people_all", "ok")]
    assert names(f"?instance={people['instance'].pk}") == [("mcp", "people_query", "ok")]
    assert names("?instance=shop") == [("mcp", "people_query", "ok")]
    assert names(f"?tool={people['query'].pk}") == everything[1:]
    assert names("?tool=people_all") == everything[:1]
    assert names("?error_code=INVALID_QUERY") == everything[1:2]
    assert names("?tool=nothing") == []
    assert client.get("/api/calls/?page_size=1").json()["next"].endswith("page=2&page_size=1")


@pytest.mark.parametrize(
    "query",
    [
        "?status=maybe",
        "?surface=email",
        "?created_after=yesterday",
        # A time UTC cannot hold (before year 1 once its offset is taken away).
        "?created_before=0001-01-01T00:30:00%2B01:00",
    ],
)
def test_a_bad_filter_is_a_400_naming_it(owner, people, query):
    call_on("api", people, owner, people["query"], {"query": "length(@)"})
    response = client_for(owner).get(f"/api/calls/{query}")
    assert response.status_code == 400
    assert set(response.json()["fields"]) == {query[1:].split("=")[0]}


def test_times_are_compared_in_utc_whatever_their_offset(owner, people):
    """Python reads offsets up to ±23:59, PostgreSQL only up to ±15:59: an offset it could not take (found
    by schemathesis: a 500) is a time like any other."""
    call_on("api", people, owner, people["query"], {"query": "length(@)"})
    made = CallLog.objects.get().created_at
    client = client_for(owner)

    def count(query: str) -> int:
        response = client.get("/api/calls/" + query)
        assert response.status_code == 200, response.json()
        return response.json()["count"]

    # the same instant, written with an offset of -16:07
    before = (made - timedelta(seconds=1)).astimezone(timezone.get_fixed_timezone(-(16 * 60 + 7)))
    after = (made + timedelta(seconds=1)).astimezone(timezone.get_fixed_timezone(-(16 * 60 + 7)))
    assert count("?created_after=" + before.isoformat().replace("+", "%2B")) == 1
    assert count("?created_after=" + after.isoformat().replace("+", "%2B")) == 0
    assert count("?created_after=0475-06-26T16:45:54.269876-16:07") == 1


def test_another_owners_call_is_a_404_and_not_listed(owner, other_user, superuser, people):
    # given: owner's call
    call_on("api", people, owner, people["query"], {"query": "length(@)"})
    call = CallLog.objects.get()
    # then: another user sees nothing of it
    other = client_for(other_user)
    response = other.get(f"/api/calls/{call.pk}/")
    assert response.status_code == 404
    assert response.json()["error"] == "NOT_FOUND"
    assert other.get("/api/calls/").json() == {"count": 0, "next": None, "previous": None, "results": []}
    assert other.get(f"/api/calls/?tool={people['query'].pk}").json()["count"] == 0
    # a superuser sees every call; anonymous is a 401
    assert client_for(superuser).get(f"/api/calls/{call.pk}/").json()["id"] == call.pk
    assert client_for(None).get("/api/calls/").status_code == 401
    assert client_for(owner).get("/api/calls/abc/").status_code == 404


def test_calls_are_read_only(owner, people):
    call_on("api", people, owner, people["query"], {"query": "length(@)"})
    call = CallLog.objects.get()
    client = client_for(owner)
    assert client.delete(f"/api/calls/{call.pk}/").status_code == 405
    assert client.post("/api/calls/", {}, format="json").status_code == 405
    assert CallLog.objects.count() == 1


def test_the_api_root_lists_calls(client):
    assert client.get("/api/").json()["calls"].endswith("/api/calls/")


#
# Redaction on every surface
#


@pytest.mark.parametrize("surface", SURFACES)
def test_redacted_fields_never_reach_the_row_the_api_or_the_logs(surface, owner, people, caplog):
    # given: a query whose result holds the redacted field, naming its value itself
    caplog.set_level(logging.DEBUG)
    # when
    call_on(surface, people, owner, people["query"], {"query": f"[?ssn=='{SSN}']"})
    # then: the row, the API and the logs hold no SSN
    call = CallLog.objects.get()
    assert call.status == "ok"
    assert SSN not in raw_row(call.pk)
    body = client_for(owner).get(f"/api/calls/{call.pk}/").json()
    assert body["arguments"] == {"query": "[?ssn=='[redacted]']"}
    assert body["result_excerpt"] == [{"id": 1, "name": "ada", "ssn": "[redacted]"}]
    assert SSN not in json.dumps(body)
    assert SSN not in caplog.text


@pytest.mark.parametrize(
    ("query", "shape", "recorded"),
    [
        ("[].ssn", "a list of 2 items", "[].ssn"),
        ("[].{s: ssn}", "a list of 2 items", "[].{s: ssn}"),
        ("[].[id, ssn]", "a list of 2 items", "[].[id, ssn]"),
        ("map(&ssn, @)", "a list of 2 items", "map(&ssn, @)"),
        ("[0].*", "a list of 3 items", "[0].*"),
        ("values(@[1])", "a list of 3 items", "values(@[1])"),
        # A query naming a redacted field has its literals redacted too (what it may compare the field with).
        ("join(',', [].ssn)", "a string", "join('[redacted]', [].ssn)"),
        ("[?id==`1`] | [0].ssn", "a string", '[?id==`"[redacted]"`] | [0].ssn'),
    ],
)
def test_a_query_that_shows_a_redacted_field_without_its_key_keeps_only_its_shape(
    owner, people, query, shape, recorded
):
    """Redaction by key cannot see a value renamed or detached from its key: such a result is not kept."""
    # when
    Harness().call("shop", people["key"], "people_query", {"query": query})
    # then
    call = CallLog.objects.get()
    assert call.status == "ok"
    assert SSN not in raw_row(call.pk)
    assert "987-65-4321" not in raw_row(call.pk)
    body = client_for(owner).get(f"/api/calls/{call.pk}/").json()
    assert body["arguments"] == {"query": recorded}
    assert body["result_excerpt"] == f"[withheld: {shape}; the table has redact_fields and a query can rename them]"


@pytest.mark.parametrize(
    ("query", "kept"),
    [
        ("[?ssn=='987-65-4321'].name", ["alan"]),
        ("sort_by(@, &ssn)[0].name", "ada"),
        ("max_by(@, &ssn)", {"id": 2, "name": "alan", "ssn": "[redacted]"}),
    ],
)
def test_a_query_that_reads_a_redacted_field_only_to_choose_records_is_kept(owner, people, query, kept):
    Harness().call("shop", people["key"], "people_query", {"query": query})
    call = CallLog.objects.get()
    body = client_for(owner).get(f"/api/calls/{call.pk}/").json()
    assert body["result_excerpt"] == kept
    assert "987-65-4321" not in raw_row(call.pk)


@pytest.mark.parametrize("surface", SURFACES)
def test_credentials_are_always_redacted(surface, owner, people, caplog):
    # given: arguments holding a password, a nested token and a toolhub key inside free text
    caplog.set_level(logging.DEBUG)
    arguments = {
        "password": PASSWORD,
        "options": {"clientSecret": {"value": "s3cr3t-value"}, "limit": 5},
        "note": f"use {KEY} then stop",
    }
    # when
    call_on(surface, people, owner, people["open"], arguments)
    # then
    call = CallLog.objects.get()
    row = raw_row(call.pk)
    for secret in (PASSWORD, "s3cr3t-value", KEY):
        assert secret not in row
        assert secret not in caplog.text
    body = client_for(owner).get(f"/api/calls/{call.pk}/").json()
    assert body["arguments"] == {
        "password": "[redacted]",
        "options": {"clientSecret": "[redacted]", "limit": 5},
        "note": "use [redacted] then stop",
    }
    assert body["result_excerpt"][0] == {"id": 1, "name": "ada", "ssn": "[redacted]"}


@pytest.mark.parametrize("surface", SURFACES)
def test_a_write_is_redacted_in_its_arguments(surface, owner, people):
    call_on(surface, people, owner, people["create"], {"elements": [{"id": 9, "name": "eve", "ssn": "555-00-1111"}]})
    call = CallLog.objects.get()
    assert call.status == "ok"
    assert "555-00-1111" not in raw_row(call.pk)
    assert call.arguments_value == {"elements": [{"id": 9, "name": "eve", "ssn": "[redacted]"}]}
    assert call.result_value == {"created": 1, "version": 2}


def test_an_error_message_never_quotes_a_redacted_value(owner, people):
    # given: a create whose record repeats a key that exists: the error names the key; the key is a
    # redacted field's value elsewhere in the arguments
    arguments = {"elements": [{"id": 1, "ssn": SSN}], "idempotency_key": SSN}
    call_on("api", people, owner, people["create"], arguments)
    call = CallLog.objects.get()
    assert call.status == "error"
    assert SSN not in raw_row(call.pk)
    assert call.arguments_value == {"elements": [{"id": 1, "ssn": "[redacted]"}], "idempotency_key": "[redacted]"}


def test_a_redact_field_added_later_applies_to_the_next_call(owner, people):
    client = client_for(owner)
    response = client.patch(f"/api/tables/{people['table'].pk}/", {"redact_fields": ["ssn", "name"]}, format="json")
    assert response.status_code == 200
    assert response.json()["redact_fields"] == ["ssn", "name"]
    Harness().call("shop", people["key"], "people_query", {"query": "[0]"})
    assert CallLog.objects.get().result_value == {"id": 1, "name": "[redacted]", "ssn": "[redacted]"}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("ssn", "Expected a list of items"),
        ([""], "This field may not be blank."),
        ([7], "Not a valid string."),
        (["ssn", "ssn"], "A field is named twice."),
        (["x" * 201], "Ensure this field has no more than 200 characters."),
        ([f"f{i}" for i in range(101)], "Ensure this field has no more than 100 elements."),
    ],
)
@pytest.mark.parametrize(("kind", "field"), [("table", "redact_fields"), ("open", "redact_arguments")])
def test_bad_redacted_names_are_a_400_and_write_nothing(owner, people, kind, field, value, message):
    """A table's redact_fields and a tool's redact_arguments: the same rules."""
    row = people[kind]
    if kind == "open":
        services.tool_update(tool=row, redact_arguments=["card"])
    url = f"/api/{'tables' if kind == 'table' else 'tools'}/{row.pk}/"
    before = getattr(row, field)
    assert before in (["ssn"], ["card"])
    response = client_for(owner).patch(url, {field: value}, format="json")
    assert response.status_code == 400
    assert response.json()["error"] == "VALIDATION_ERROR"
    fields = response.json()["fields"]
    assert list(fields) == [f"{field}.0" if isinstance(value, list) and len(value) == 1 else field]
    assert message in json.dumps(fields)
    row.refresh_from_db()
    assert getattr(row, field) == before


#
# A tool's redact_arguments
#

CARD = "4111-1111-1111-1111"


@pytest.mark.parametrize("surface", SURFACES)
def test_a_tools_redact_arguments_never_reach_the_row_the_api_the_page_or_the_logs(surface, owner, people, caplog):
    # given: the open tool's `card` is sensitive; a card sent as the argument, inside another one and in free text
    caplog.set_level(logging.DEBUG)
    services.tool_update(tool=people["open"], redact_arguments=["card"])
    arguments = {"card": CARD, "options": {"card": "5500-0000-0000-0004", "limit": 5}, "note": f"card {CARD} on file"}
    # when
    call_on(surface, people, owner, people["open"], arguments)
    # then: the row, the API, the admin's page of the call and the logs hold neither card
    call = CallLog.objects.get()
    assert (call.surface, call.status) == (surface, "ok")
    body = client_for(owner).get(f"/api/calls/{call.pk}/").json()
    assert body["arguments"] == {
        "card": "[redacted]",
        "options": {"card": "[redacted]", "limit": 5},
        "note": "card [redacted] on file",
    }
    assert body["result_excerpt"][0] == {"id": 1, "name": "ada", "ssn": "[redacted]"}
    listed = client_for(owner).get("/api/calls/").json()["results"]
    admin = Client()
    admin.force_login(owner)
    page = admin.get(reverse("admin:tools_app_calllog_change", args=[call.pk])).content.decode()
    for card in (CARD, "5500-0000-0000-0004"):
        assert card not in raw_row(call.pk)
        assert card not in json.dumps(body)
        assert card not in json.dumps(listed)
        assert card not in page
        assert card not in caplog.text


def test_a_redacted_arguments_value_is_redacted_where_the_result_repeats_it(owner, people):
    # given: `name` is a sensitive argument of the open tool (not a redacted field of its table)
    services.tool_update(tool=people["open"], redact_arguments=["name"])
    # when
    Harness().call("shop", people["key"], "people_all", {"name": "alan"})
    # then: the result keeps the records, with the value the argument held redacted wherever it appears
    call = CallLog.objects.get()
    assert call.arguments_value == {"name": "[redacted]"}
    assert call.result_value == [
        {"id": 1, "name": "ada", "ssn": "[redacted]"},
        {"id": 2, "name": "[redacted]", "ssn": "[redacted]"},
    ]
    assert "alan" not in raw_row(call.pk)


def test_a_redacted_argument_is_redacted_in_an_error_that_quotes_it(owner, people):
    # given: the create's `elements` are sensitive; a record created, then created again: the error names its key
    services.tool_update(tool=people["create"], redact_arguments=["elements"])
    call_on("api", people, owner, people["create"], {"elements": [{"id": 1234, "name": "zed"}]})
    # when
    call_on("api", people, owner, people["create"], {"elements": [{"id": 1234, "name": "zed"}]})
    # then
    call = CallLog.objects.latest("id")
    assert call.status == "error"
    assert call.arguments_value == {"elements": "[redacted]"}
    message = (
        "elements[0]: the key '[redacted]' already exists in '(root)'; nothing was created. Use an update tool to "
        "change it."
    )
    assert call.error_message == message
    details = {"key": "[redacted]", "index": 0}
    assert call.result_value == {"error": "KEY_EXISTS", "message": message, "details": details}
    assert "1234" not in raw_row(call.pk)
    assert "zed" not in raw_row(call.pk)


def test_a_tool_without_a_table_redacts_its_arguments(owner, make_tool, instance, bind, make_api_key):
    # given: an external tool (served elsewhere: the call is refused here, and recorded with its arguments)
    weather = make_tool(owner, None, type="external", name="weather", description="Elsewhere.")
    services.tool_update(tool=weather, redact_arguments=["home_address"])
    # when
    client_for(owner).post(
        f"/api/tools/{weather.pk}/call/", {"arguments": {"home_address": "1 Main St", "days": 3}}, format="json"
    )
    # then
    call = CallLog.objects.get()
    assert call.error_code == "TOOL_NOT_CALLABLE"
    assert call.arguments_value == {"home_address": "[redacted]", "days": 3}
    assert "1 Main St" not in raw_row(call.pk)


def test_a_tools_redact_arguments_are_read_and_written_by_the_api(owner, people):
    client = client_for(owner)
    url = f"/api/tools/{people['open'].pk}/"
    assert client.get(url).json()["redact_arguments"] == []
    response = client.patch(url, {"redact_arguments": ["card", "pin"]}, format="json")
    assert response.status_code == 200
    assert response.json()["redact_arguments"] == ["card", "pin"]
    people["open"].refresh_from_db()
    assert people["open"].redact_arguments == ["card", "pin"]
    # a tool without a table, created with them
    created = client.post(
        "/api/tools/", {"name": "weather", "type": "external", "redact_arguments": ["home_address"]}, format="json"
    )
    assert created.status_code == 201
    assert created.json()["redact_arguments"] == ["home_address"]


#
# Bounds, metadata only, retention, storage
#


def test_a_long_result_is_cut_cleanly_and_marked(owner, people, settings):
    settings.TOOLHUB_CALL_RESULT_BYTES = 1000
    settings.TOOLHUB_CALL_ARGUMENTS_BYTES = 300
    rows = [{"id": i, "name": "x" * 40, "ssn": f"000-00-{i:04d}"} for i in range(100)]
    services.table_update(table=people["table"], data=rows)
    Harness().call("shop", people["key"], "people_all", {"note": "y" * 1000})
    call = CallLog.objects.get()
    assert call.status == "ok"
    assert (call.arguments_truncated, call.result_truncated) == (True, True)
    assert len(call.arguments.encode()) <= 300
    assert len(call.result_excerpt.encode()) <= 1000
    assert call.arguments_value["note"].endswith("…[cut]")
    excerpt = call.result_value
    assert excerpt[-1] == f"[cut: {100 - (len(excerpt) - 1)} more items]"
    assert excerpt[0] == {"id": 0, "name": "x" * 40, "ssn": "[redacted]"}
    assert "000-00-0000" not in call.result_excerpt
    assert call.recorded_bytes == len(call.arguments.encode()) + len(call.result_excerpt.encode())
    body = client_for(owner).get(f"/api/calls/{call.pk}/").json()
    assert (body["arguments_truncated"], body["result_truncated"]) == (True, True)


def test_an_instance_may_record_metadata_only(owner, people):
    # given
    response = client_for(owner).patch(
        f"/api/mcp-instances/{people['instance'].pk}/", {"record_call_details": False}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["record_call_details"] is False
    # when: an ok call and a failed one
    Harness().call("shop", people["key"], "people_query", {"query": "[0]"})
    Harness().call("shop", people["key"], "people_query", {"query": f"[?ssn=='{SSN}'"})
    # then: metadata only, and the error message is still kept without secrets
    ok, failed = CallLog.objects.order_by("id")
    for call in (ok, failed):
        assert (call.arguments, call.result_excerpt, call.recorded_bytes) == ("", "", 0)
    assert failed.error_code == "INVALID_QUERY"
    body = client_for(owner).get(f"/api/calls/{ok.pk}/").json()
    assert (body["details_recorded"], body["arguments"], body["result_excerpt"]) == (False, None, None)
    # the API and the admin still record theirs (no instance)
    call_on("api", people, owner, people["query"], {"query": "[0].id"})
    assert CallLog.objects.latest("id").result_value == 1


def test_calls_past_retention_are_pruned_when_recording(owner, people, settings):
    # given: a call 31 days old and one 29 days old
    settings.TOOLHUB_CALL_LOG_DAYS = 30
    call_on("api", people, owner, people["query"], {"query": "[0].id"})
    call_on("api", people, owner, people["query"], {"query": "[1].id"})
    old, recent = CallLog.objects.order_by("id")
    CallLog.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=31))
    CallLog.objects.filter(pk=recent.pk).update(created_at=timezone.now() - timedelta(days=29))
    pipeline.upkeep.clear()  # the next record runs the prune
    # when
    call_on("api", people, owner, people["query"], {"query": "[2].id"})
    # then
    assert list(CallLog.objects.order_by("id").values_list("pk", flat=True)) == [
        recent.pk,
        CallLog.objects.latest("id").pk,
    ]


def test_an_owner_over_the_storage_bound_loses_the_oldest_details(owner, people, settings):
    # given: a bound of 2,000 bytes, checked after every 125 bytes recorded (a sixteenth)
    settings.TOOLHUB_CALL_LOG_OWNER_BYTES = 2000
    for index in range(12):
        call_on("api", people, owner, people["query"], {"query": f"[?id==`{index}`] | length(@) || `{'0' * 150}`"})
    # then: the newest calls keep their details, the oldest lost theirs; no row was deleted
    calls = list(CallLog.objects.order_by("id"))
    assert len(calls) == 12
    kept = sum(call.recorded_bytes for call in calls)
    assert kept <= 2000
    assert calls[-1].details_recorded
    assert not calls[0].details_recorded
    assert calls[0].status == "ok"
    assert [call.details_recorded for call in calls] == sorted(call.details_recorded for call in calls)
