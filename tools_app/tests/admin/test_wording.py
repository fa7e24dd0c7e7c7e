"""What the admin says, word for word: breadcrumbs, messages, labels, dates, the guide tool's name, the recent
actions, the "Generate tools" default, restores in a table's history, and help texts that link to docs/."""

import re
from datetime import UTC, datetime

import pytest
from django.contrib.admin.models import LogEntry
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from tools_app import services
from tools_app.models import CallLog, TableChange

pytestmark = pytest.mark.django_db


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()


def breadcrumbs(html: str) -> str:
    match = re.search(r'<div class="breadcrumbs">(.*?)</div>', html, re.S)
    assert match is not None
    return text_of(match.group(1)).replace("&rsaquo;", "›")


def test_a_tools_breadcrumbs_name_toolhub_then_tools(owner, table, make_tool):
    tool = make_tool(owner, table, name="orders_query")
    page = logged_in(owner).get(reverse("admin:tools_app_tool_change", args=[tool.pk])).content.decode()
    assert breadcrumbs(page) == "Home › toolhub › Tools › orders_query"


def test_a_message_keeps_the_tools_name_as_written(owner, table, make_tool):
    tool = make_tool(owner, table, name="orders_query")
    response = logged_in(owner).post(reverse("admin:tools_app_tool_try", args=[tool.pk]), {"query": "[].id"})
    page = response.content.decode()
    duration = response.context["outcome"]["duration_ms"]
    assert f'<li class="success">orders_query ran in {duration} ms.</li>' in page
    assert "Orders_query" not in page


def test_the_api_key_label_is_written_API_key():
    assert str(CallLog._meta.get_field("api_key").verbose_name) == "API key"
    assert str(TableChange._meta.get_field("api_key").verbose_name) == "API key"


def test_the_call_log_writes_every_time_one_way(owner):
    CallLog.objects.create(
        owner=owner,
        tool_name="orders_query",
        status="ok",
        duration_ms=1.0,
        created_at=datetime(2026, 11, 27, 9, 17, 43, tzinfo=UTC),
    )
    page = logged_in(owner).get(reverse("admin:tools_app_calllog_changelist")).content.decode()
    # the list's column and the statistics' "last call" alike
    assert page.count("2026-11-27 09:17:43") == 2
    assert "a.m." not in page
    assert "Nov. 27" not in page


def test_the_usage_guide_page_names_the_guide_tool_as_bound(owner, instance, bind, make_tool):
    guide = make_tool(owner, type="get_tool_usage_guide", name="tool_guide")
    url = reverse("admin:tools_app_mcpinstance_guide", args=[instance.pk])
    page = logged_in(owner).get(url).content.decode()
    summary = re.search(r'<summary id="toolhub-guide-summary">(.*?)</summary>', page, re.S)
    assert summary is not None
    assert text_of(summary.group(1)) == (
        "The usage guide of this instance (no usage-guide tool is bound: clients cannot ask for it)"
    )
    bind(instance, guide)
    page = logged_in(owner).get(url).content.decode()
    summary = re.search(r'<summary id="toolhub-guide-summary">(.*?)</summary>', page, re.S)
    assert summary.group(1) == "What <code>tool_guide</code> returns for this instance"
    assert "get_tool_usage_guide</code> returns" not in page


def test_api_logins_stay_out_of_the_recent_actions(owner, table):
    # given: an admin action of the owner's, then three API logins
    LogEntry.objects.log_actions(user_id=owner.pk, queryset=[table], action_flag=2, change_message="Changed data.")
    for _ in range(3):
        response = APIClient().post("/api/auth/token/", {"username": "owner", "password": "pw-123456!"}, format="json")
        assert response.status_code == 200
    assert LogEntry.objects.count() == 4  # the tokens' own history keeps the logins
    # when
    page = logged_in(owner).get(reverse("admin:index")).content.decode()
    # then
    recent = re.search(r'<div class="module" id="recent-actions-module">(.*?)</div>', page, re.S).group(1)
    assert text_of(recent) == "Recent actions My actions Changed: orders Table"


def test_generate_tools_binds_to_the_newest_enabled_instance_by_default(owner, table, make_instance):
    make_instance(owner, slug="older")
    newest = make_instance(owner, slug="newest")
    make_instance(owner, slug="off", enabled=False)
    response = logged_in(owner).post(
        reverse("admin:tools_app_table_changelist"),
        {"action": "generate_tools_action", "_selected_action": [str(table.pk)]},
    )
    assert response.status_code == 200
    assert re.search(rf'<option value="{newest.pk}" selected>', response.content.decode())
    assert response.context["form"].fields["mcp_instance"].initial == newest.pk


def test_generate_tools_without_an_instance_offers_do_not_bind(owner, table):
    response = logged_in(owner).post(
        reverse("admin:tools_app_table_changelist"),
        {"action": "generate_tools_action", "_selected_action": [str(table.pk)]},
    )
    assert response.context["form"].fields["mcp_instance"].initial is None
    assert '<option value="" selected>(do not bind)</option>' in response.content.decode()


def test_a_restore_says_so_in_the_history(owner, table):
    services.table_update(table=table, data=[{"id": 1, "status": "new"}])
    api = APIClient()
    api.force_authenticate(owner)
    assert api.post(f"/api/tables/{table.pk}/restore/", {"version": 1}, format="json").status_code == 200
    page = logged_in(owner).get(reverse("admin:tools_app_table_history", args=[table.pk])).content.decode()
    rows = re.findall(r'<tr class="toolhub-history-entry" data-version="(\d+)">(.*?)</tr>', page, re.S)
    how = {version: text_of(re.findall(r"<td>(.*?)</td>", row, re.S)[3]) for version, row in rows}
    assert how["3"] == "API, restore of version 1"
    assert "restore" not in how["2"]


def test_help_texts_link_the_docs_they_cite(owner, instance):
    page = logged_in(owner).get(reverse("admin:tools_app_mcpinstance_change", args=[instance.pk])).content.decode()
    for name in ("budgets", "mcp-clients", "call-log", "oauth"):
        assert f'<a href="/admin/docs/{name}.md">docs/{name}.md</a>' in page
    # every citation is a link: in its href (after "/admin/") or its text (after ">"), never plain
    assert re.findall(r"(?<![/>])docs/[a-z-]+\.md", page) == []


def test_the_docs_pages_render_in_the_admin(owner, client):
    response = logged_in(owner).get("/admin/docs/activity.md")
    assert response.status_code == 200
    assert response.context["title"] == "Activity: charts of the call log"
    page = response.content.decode()
    assert '<a href="/admin/docs/call-log.md">call-log.md</a>' in page
    assert "<table>" in page
    # only docs/ files by plain name; anonymous: the login
    assert logged_in(owner).get("/admin/docs/no-such-page.md").status_code == 404
    assert logged_in(owner).get("/admin/docs/..%2FREADME.md").status_code == 404
    response = client.get("/admin/docs/activity.md")
    assert response.status_code == 302
    assert response.url.startswith("/admin/login/")
