"""The admin index's dashboard (QA items 3 and 6): only links the user may follow; a read tool to try first."""

import re

import pytest
from django.contrib.auth.models import Group, Permission
from django.urls import reverse

from tools_app.models import CallLog

DASHBOARD = re.compile(r'<div class="toolhub-dashboard module" id="toolhub-dashboard">(.*?)\n</div>', re.S)


def dashboard(client) -> str:
    response = client.get(reverse("admin:index"))
    assert response.status_code == 200
    return DASHBOARD.search(response.content.decode()).group(1)


def links(html: str) -> list[str]:
    return [href.replace("&amp;", "&") for href in re.findall(r'href="([^"]+)"', html)]


@pytest.fixture
def populated(owner, table, make_tool, instance, bind):
    """The owner's table, a write tool that sorts first, a read tool, an instance with both bound, a call."""
    create = make_tool(owner, table, type="create", name="a_create")
    query = make_tool(owner, table, type="query_data", name="orders_query")
    bind(instance, create)
    bind(instance, query)
    CallLog.objects.create(owner=owner, mcp_instance=instance, tool_name="orders_query", status="ok", duration_ms=1)
    return {"create": create, "query": query}


def test_every_dashboard_link_opens_for_a_toolhub_user(client, owner, populated):
    """A member of "toolhub users" gets the full dashboard, and each of its links opens (200)."""
    # given
    client.force_login(owner)
    # when
    html = dashboard(client)
    # then
    hrefs = links(html)
    assert reverse("admin:tools_app_tool_try", args=[populated["query"].pk]) in hrefs
    assert reverse("admin:tools_app_calllog_changelist") in hrefs
    assert "Try the tool orders_query" in html
    assert "cannot manage toolhub objects" not in html
    assert [href for href in hrefs if client.get(href.split("#")[0]).status_code != 200] == []


def test_dashboard_suggests_a_read_tool_not_a_write_tool(client, owner, populated):
    """The tool to try first changes nothing, even when a write tool sorts before it."""
    # given
    client.force_login(owner)
    # when
    html = dashboard(client)
    # then
    assert "Try the tool orders_query" in html
    assert "a_create" not in html


def test_dashboard_suggests_no_tool_when_only_write_tools_exist(client, owner, table, make_tool):
    """With only write tools there is nothing safe to try, so no try-it step."""
    # given
    make_tool(owner, table, type="delete", name="remove")
    client.force_login(owner)
    # when
    html = dashboard(client)
    # then
    assert "Try the tool" not in html


def test_staff_user_outside_the_group_gets_no_links_and_is_told_why(client, make_user):
    """A staff user without toolhub permissions sees no link (each would be a 403) and how to get access."""
    # given
    user = make_user("newcomer")
    user.groups.clear()
    client.force_login(user)
    # when
    html = dashboard(client)
    # then
    assert links(html) == []
    assert "Your account cannot manage toolhub objects yet" in html
    assert "toolhub users" in html
    assert "Next steps" not in html


def test_view_only_user_gets_only_view_links(client, make_user, owner, populated):
    """A user who may only view sees links to what it may view, none to add pages, try-it or key creation."""
    # given
    viewers = Group.objects.create(name="viewers")
    viewers.permissions.set(Permission.objects.filter(codename__startswith="view_"))
    owner.groups.set([viewers])  # the owner of the populated objects, now with view permissions only
    client.force_login(owner)
    # when
    html = dashboard(client)
    # then
    hrefs = links(html)
    assert hrefs  # the instance and the call log can be viewed
    assert not [href for href in hrefs if href.endswith("/add/") or "/try/" in href]
    assert "create an API key" not in html
    assert [href for href in hrefs if client.get(href.split("#")[0]).status_code != 200] == []
