"""The admin's History of a table: readable diff, versions, restore with confirmation."""

import pytest
from django.urls import reverse

from tests.api_helpers import db_snapshot
from tools_app import services
from tools_app.execution.history_lines import readable_diff
from tools_app.execution.pipeline import Caller, run_tool_call, target_of_tool
from tools_app.models import Surface, TableChange

pytestmark = pytest.mark.django_db

RECORDS = [{"id": 1, "status": "new"}, {"id": 2, "status": "paid"}]


@pytest.fixture
def written(owner, make_table, make_tool):
    """A table with three writes: a create, an update of one field, a delete."""
    table = make_table(owner, name="orders", data=[dict(r) for r in RECORDS])
    for kind, arguments in [
        ("create", {"elements": [{"id": 3, "status": "new"}]}),
        ("update", {"elements": [{"id": 2, "status": "shipped"}]}),
        ("delete", {"keys": [1]}),
    ]:
        tool = make_tool(owner, table, type=kind, name=f"orders_{kind}")
        caller = Caller(surface=Surface.ADMIN, user_id=owner.pk, user=owner)
        assert run_tool_call(caller=caller, target=target_of_tool(tool), name=tool.name, arguments=arguments).ok
    return table


def test_readable_diff_names_fields_and_values():
    lines, more = readable_diff(
        [
            {"op": "replace", "path": "/1", "value": {"id": 2, "status": "shipped", "note": "n"}},
            {"op": "remove", "path": "/0"},
            {"op": "add", "path": "/-", "value": {"id": 3}},
        ],
        [
            {"op": "remove", "path": "/2"},
            {"op": "add", "path": "/0", "value": {"id": 1}},
            {"op": "replace", "path": "/1", "value": {"id": 2, "status": "paid"}},
        ],
    )
    assert [(line.kind, line.where, line.before, line.after) for line in lines] == [
        ("added", "/1 · note", "", '"n"'),
        ("changed", "/1 · status", '"paid"', '"shipped"'),
        ("removed", "/0", '{"id": 1}', ""),
        ("added", "/-", "", '{"id": 3}'),
    ]
    assert more == 0


def test_history_page_shows_who_how_and_what(owner_client, written):
    response = owner_client.get(reverse("admin:tools_app_table_history", args=[written.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert html.index('data-version="4"') < html.index('data-version="3"') < html.index('data-version="2"')
    assert "Admin, tool orders_update" in html
    assert (
        "~ changed <code>orders › 2 · status</code>: "
        "<code>&quot;paid&quot;</code> &rarr; <code>&quot;shipped&quot;</code>" in html
    )
    assert (
        "&minus; removed <code>orders › 1</code>: "
        "<code>{&quot;id&quot;: 1, &quot;status&quot;: &quot;new&quot;}</code>" in html
    )
    assert reverse("admin:tools_app_table_restore", args=[written.pk, 1]) in html


def test_version_page_shows_the_document_then(owner_client, written):
    response = owner_client.get(reverse("admin:tools_app_table_version", args=[written.pk, 1]))
    assert response.status_code == 200
    assert "&quot;paid&quot;" in response.content.decode()
    assert "Restore this version" in response.content.decode()
    assert owner_client.get(reverse("admin:tools_app_table_version", args=[written.pk, 9])).status_code == 404


def test_restore_asks_then_writes_a_new_version(owner_client, owner, written):
    url = reverse("admin:tools_app_table_restore", args=[written.pk, 1])
    before = db_snapshot()
    confirm = owner_client.get(url)
    assert confirm.status_code == 200
    assert "written as version 5" in confirm.content.decode()
    assert db_snapshot() == before  # asking writes nothing
    done = owner_client.post(url)
    assert done.status_code == 302
    assert services.table_data(written.pk) == (5, RECORDS)
    entry = TableChange.objects.get(table=written, version=5)
    assert (entry.surface, entry.user_id, entry.arguments) == ("admin", owner.pk, {"version": 1})


def test_a_refused_restore_says_why_and_writes_nothing(owner_client, owner, make_table, settings):
    """A restore the quota refuses is a message on the History page (not a 500), and nothing is written."""
    table = make_table(owner, name="big", data={"text": "a" * 1500})
    services.table_update(table=table, data={"text": "b"})
    settings.TOOLHUB_MAX_OWNER_DATA_BYTES = 1000
    before = db_snapshot()
    response = owner_client.post(reverse("admin:tools_app_table_restore", args=[table.pk, 1]), follow=True)
    assert response.status_code == 200
    shown = [str(message) for message in response.context["messages"]]
    assert len(shown) == 1
    assert shown[0].startswith("Version 1 was not restored: QUOTA_EXCEEDED: This write would bring your tables to ")
    assert db_snapshot() == before


def test_other_users_history_is_404_and_restore_writes_nothing(client, other_user, written):
    client.force_login(other_user)
    before = db_snapshot()
    for url in (
        reverse("admin:tools_app_table_history", args=[written.pk]),
        reverse("admin:tools_app_table_version", args=[written.pk, 1]),
        reverse("admin:tools_app_table_restore", args=[written.pk, 1]),
    ):
        assert client.get(url).status_code == 404
    assert client.post(reverse("admin:tools_app_table_restore", args=[written.pk, 1])).status_code == 404
    assert db_snapshot() == before


def test_admin_edit_of_the_data_is_an_audited_entry(owner_client, owner, make_table):
    table = make_table(owner, name="small", data={"a": 1})
    response = owner_client.post(
        reverse("admin:tools_app_table_change", args=[table.pk]),
        {"name": "small", "description": "", "data": '{"a": 2}'},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    entry = TableChange.objects.get(table=table)
    assert (entry.surface, entry.user_id, entry.version, entry.patch) == (
        "admin",
        owner.pk,
        2,
        [{"op": "replace", "path": "", "value": {"a": 2}}],
    )
