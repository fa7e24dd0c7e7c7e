"""The call log's detail page in the admin (docs/call-log.md): a call as its client saw it, redacted, with
"Open in try-it" prefilled with its arguments; another owner's call is a 404."""

import json
from urllib.parse import parse_qs, urlparse

import pytest
from django.test import Client
from django.urls import reverse
from django.utils.html import escape

from mcp_app.tests.mcp_harness import Harness
from tools_app import services
from tools_app.admin.tool_forms import RAW_FIELD
from tools_app.models import CallLog

pytestmark = pytest.mark.django_db

SSN = "123-45-6789"


@pytest.fixture
def redacted_shop(owner, make_table, make_tool, instance, bind, make_api_key):
    table = make_table(owner, name="people", data=[{"id": 1, "name": "ada", "ssn": SSN}])
    services.table_update(table=table, redact_fields=["ssn"])
    tool = make_tool(owner, table, name="people_query")
    bind(instance, tool)
    return {"tool": tool, "key": make_api_key(instance, label="laptop")[1], "instance": instance}


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def detail_url(call: CallLog) -> str:
    return reverse("admin:tools_app_calllog_change", args=[call.pk])


def test_the_detail_page_shows_the_call_as_the_client_saw_it(owner, redacted_shop):
    # given
    Harness().call("shop", redacted_shop["key"], "people_query", {"query": "[?id==`1`]"})
    call = CallLog.objects.get()
    # when
    response = logged_in(owner).get(detail_url(call))
    # then
    assert response.status_code == 200
    page = response.content.decode()
    assert SSN not in page
    context = response.context
    assert json.loads(context["arguments"]) == {"query": "[?id==`1`]"}
    assert json.loads(context["result"]) == [{"id": 1, "name": "ada", "ssn": "[redacted]"}]
    assert context["has_redactions"] is True
    for fact in ("people_query", "MCP", "owner", "laptop", "/mcp/shop/", f"/api/calls/{call.pk}/"):
        assert fact in page
    assert 'id="toolhub-open-try-it"' in page


def test_open_in_try_it_fills_in_the_arguments(owner, redacted_shop):
    Harness().call("shop", redacted_shop["key"], "people_query", {"query": "[0].name"})
    call = CallLog.objects.get()
    client = logged_in(owner)
    link = client.get(detail_url(call)).context["try_it_url"]
    assert urlparse(link).path == reverse("admin:tools_app_tool_try", args=[redacted_shop["tool"].pk])
    assert parse_qs(urlparse(link).query) == {"arguments": ['{"query":"[0].name"}']}
    # when: following it
    form = client.get(link).context["form"]
    # then: the raw JSON arguments hold the call's arguments, and running them gives the same result
    assert form.initial == {RAW_FIELD: {"query": "[0].name"}}
    outcome = client.post(link, {RAW_FIELD: json.dumps(form.initial[RAW_FIELD])}).context["outcome"]
    assert (outcome["ok"], outcome["result"]) == (True, '"ada"')
    assert CallLog.objects.latest("id").surface == "admin"


def test_a_failed_call_shows_its_error(owner, redacted_shop):
    Harness().call("shop", redacted_shop["key"], "people_query", {"query": "[?"})
    call = CallLog.objects.get()
    response = logged_in(owner).get(detail_url(call))
    page = response.content.decode()
    assert 'id="toolhub-call-error-code">INVALID_QUERY<' in page
    assert call.error_message in page


def test_metadata_only_says_so(owner, redacted_shop):
    services.instance_update(instance=redacted_shop["instance"], record_call_details=False)
    Harness().call("shop", redacted_shop["key"], "people_query", {"query": "[0]"})
    response = logged_in(owner).get(detail_url(CallLog.objects.get()))
    page = response.content.decode()
    assert 'id="toolhub-call-no-details"' in page
    assert "toolhub-open-try-it" not in page


def test_another_owners_call_is_a_404(owner, other_user, redacted_shop):
    Harness().call("shop", redacted_shop["key"], "people_query", {"query": "[0]"})
    call = CallLog.objects.get()
    assert logged_in(other_user).get(detail_url(call)).status_code == 404
    assert CallLog.objects.count() == 1


def test_the_list_links_each_call_to_its_detail(owner, redacted_shop):
    Harness().call("shop", redacted_shop["key"], "people_query", {"query": "[0]"})
    call = CallLog.objects.get()
    page = logged_in(owner).get(reverse("admin:tools_app_calllog_changelist")).content.decode()
    assert f'href="{detail_url(call)}"' in page


def test_a_tables_redact_fields_are_edited_on_its_page(owner, make_table):
    table = make_table(owner, name="people", data=[{"id": 1, "ssn": SSN}])
    url = reverse("admin:tools_app_table_change", args=[table.pk])
    client = logged_in(owner)
    form = {"name": "people", "description": "", "data": json.dumps(table.data)}
    # when: two names, then a name twice
    saved = client.post(url, {**form, "redact_fields": " ssn, email "})
    refused = client.post(url, {**form, "redact_fields": "ssn, ssn"})
    # then
    assert saved.status_code == 302
    assert refused.status_code == 200
    assert refused.context["adminform"].form.errors["redact_fields"] == ["redact_fields names a field twice."]
    table.refresh_from_db()
    assert table.redact_fields == ["ssn", "email"]
    assert table.version == 1
    assert 'value="ssn, email"' in client.get(url).content.decode()


def test_a_tools_redact_arguments_are_edited_on_its_page(owner, redacted_shop):
    tool = redacted_shop["tool"]
    url = reverse("admin:tools_app_tool_change", args=[tool.pk])
    client = logged_in(owner)
    form = {
        "name": tool.name,
        "alias": "",
        "type": tool.type,
        "description": tool.description,
        "table": tool.table_id,
        "json_path": "",
        "input_schema": json.dumps(tool.input_schema),
        "output_schema": "",
        "metadata": "{}",
    }
    # when: two names, then a name twice
    saved = client.post(url, {**form, "redact_arguments": " query, note "})
    refused = client.post(url, {**form, "redact_arguments": "query, query"})
    # then
    assert saved.status_code == 302
    assert refused.status_code == 200
    assert refused.context["adminform"].form.errors["redact_arguments"] == ["redact_arguments names an argument twice."]
    tool.refresh_from_db()
    assert tool.redact_arguments == ["query", "note"]
    assert 'value="query, note"' in client.get(url).content.decode()
    # and: the next call's record follows them
    Harness().call("shop", redacted_shop["key"], "people_query", {"query": "[?name=='ada'].id"})
    call = CallLog.objects.get()
    response = client.get(detail_url(call))
    assert json.loads(response.context["arguments"]) == {"query": "[redacted]"}
    page = response.content.decode()
    assert "[?name==" not in page
    assert escape("[?name==") not in page
