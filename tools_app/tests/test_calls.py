"""Recording API and admin calls through tools_app.calls (SPEC §2.2, §4.4; STYLE's layering rule).

record_call bumps the use count and hands the finished call to the recorders other apps register; a
failing recorder is logged and never fails the call. The recorders here stand in for mcp_app's.
"""

import json
import logging

import pytest
from django.urls import reverse

from tests.api_helpers import client_for, fast_passwords  # noqa: F401 (fixture)
from tools_app import calls
from tools_app.admin import ToolAdmin
from tools_app.calls import FinishedCall, record_call
from tools_app.models import Tool

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]


@pytest.fixture
def received(monkeypatch):
    """Replace the registered recorders by one that keeps what it receives."""
    kept: list[FinishedCall] = []
    monkeypatch.setattr(calls, "_recorders", [kept.append])
    return kept


def _broken(call: FinishedCall) -> None:
    # Writes, then fails: the write must not survive (the recorder runs in its own atomic block).
    Tool.objects.filter(pk=call.tool.pk).update(description="written by a failing recorder")
    raise RuntimeError("recorder down")


def test_record_call_bumps_the_use_count_and_runs_the_recorders_in_order(owner, table, make_tool, monkeypatch):
    """use_count +1 and last_used set, then every recorder gets the same record, first registered first."""
    # given
    tool = make_tool(owner, table)
    order: list[tuple[str, FinishedCall]] = []
    monkeypatch.setattr(calls, "_recorders", [])
    first, second = (lambda call: order.append(("first", call))), (lambda call: order.append(("second", call)))
    calls.register_recorder(first)
    calls.register_recorder(second)
    calls.register_recorder(first)  # a second registration is ignored
    call = FinishedCall(tool=tool, source="api", ok=True, duration_ms=1.5)
    # when
    record_call(call)
    # then
    tool.refresh_from_db()
    assert (tool.use_count, tool.last_used is not None) == (1, True)
    assert order == [("first", call), ("second", call)]


def test_a_failing_recorder_is_logged_rolled_back_and_does_not_stop_the_others(
    owner, table, make_tool, monkeypatch, caplog
):
    """record_call does not raise; the failure is logged, its write undone, and the next recorder still runs."""
    # given
    tool = make_tool(owner, table)
    kept: list[FinishedCall] = []
    monkeypatch.setattr(calls, "_recorders", [_broken, kept.append])
    call = FinishedCall(tool=tool, source="admin", ok=False, duration_ms=2.0, error_code="X", error_message="m")
    # when
    with caplog.at_level(logging.ERROR, logger="tools_app.calls"):
        record_call(call)
    # then
    assert kept == [call]
    assert f"Could not record the admin call of tool {tool.pk}" in caplog.text
    tool.refresh_from_db()
    assert (tool.use_count, tool.description) == (1, "A query_data tool for tests.")


def test_a_failing_use_count_is_logged_and_the_recorders_still_run(
    owner, table, make_tool, received, monkeypatch, caplog
):
    """A database error while bumping the use count is logged; the call is still handed to the recorders."""
    # given
    tool = make_tool(owner, table)

    def refuse(**kwargs):
        raise RuntimeError("database down")

    monkeypatch.setattr(calls.services, "tool_use_record", refuse)
    call = FinishedCall(tool=tool, source="api", ok=True, duration_ms=1.0)
    # when
    with caplog.at_level(logging.ERROR, logger="tools_app.calls"):
        record_call(call)
    # then
    assert received == [call]
    assert f"Could not bump the use count of tool {tool.pk} after a call from the api" in caplog.text
    tool.refresh_from_db()
    assert tool.use_count == 0


def test_api_call_hands_its_outcome_to_the_recorders(owner, table, make_tool, received):
    """POST /api/tools/<id>/call/: one record per call, source "api", with the tool error's code and message."""
    # given
    tool = make_tool(owner, table)
    api = client_for(owner)
    # when
    ok = api.post(f"/api/tools/{tool.pk}/call/", {"arguments": {"query": "length(@)"}}, format="json")
    failed = api.post(f"/api/tools/{tool.pk}/call/", {"arguments": {"query": "[?"}}, format="json")
    # then
    assert (ok.status_code, ok.json()) == (200, {"result": 3})
    assert failed.status_code == 400
    assert [(c.tool.pk, c.source, c.ok, c.error_code, c.error_message) for c in received] == [
        (tool.pk, "api", True, "", ""),
        (tool.pk, "api", False, "INVALID_QUERY", failed.json()["message"]),
    ]
    assert all(c.duration_ms > 0 for c in received)
    tool.refresh_from_db()
    assert tool.use_count == 2


def test_api_call_answers_when_a_recorder_fails(owner, table, make_tool, monkeypatch, caplog):
    """The call's result is returned and the use count bumped although the recorder failed."""
    # given
    tool = make_tool(owner, table)
    monkeypatch.setattr(calls, "_recorders", [_broken])
    # when
    with caplog.at_level(logging.ERROR, logger="tools_app.calls"):
        response = client_for(owner).post(
            f"/api/tools/{tool.pk}/call/", {"arguments": {"query": "[?status=='paid'].customer"}}, format="json"
        )
    # then
    assert (response.status_code, response.json()) == (200, {"result": ["ada"]})
    assert f"Could not record the api call of tool {tool.pk}" in caplog.text
    tool.refresh_from_db()
    assert (tool.use_count, tool.description) == (1, "A query_data tool for tests.")


def test_try_it_hands_its_outcome_to_the_recorders(client, owner, table, make_tool, received):
    """The admin's try-it records source "admin", its error code and message, and the duration it shows."""
    # given
    tool = make_tool(owner, table, name="orders_query")
    client.force_login(owner)
    url = reverse("admin:tools_app_tool_try", args=[tool.pk])
    # when
    ok = client.post(url, {"query": "[?status=='paid'].id"}).context["outcome"]
    failed = client.post(url, {"query": "[?"}).context["outcome"]
    # then
    assert [(c.tool.pk, c.source, c.ok, c.error_code, c.error_message, c.duration_ms) for c in received] == [
        (tool.pk, "admin", True, "", "", ok["duration_ms"]),
        (tool.pk, "admin", False, "INVALID_QUERY", failed["message"], failed["duration_ms"]),
    ]
    tool.refresh_from_db()
    assert tool.use_count == 2


def test_try_it_shows_the_result_when_a_recorder_fails(client, owner, table, make_tool, monkeypatch):
    """A failing recorder does not turn the admin's try-it into an error page."""
    # given
    tool = make_tool(owner, table, name="orders_query")
    client.force_login(owner)
    monkeypatch.setattr(calls, "_recorders", [_broken])
    # when
    response = client.post(reverse("admin:tools_app_tool_try", args=[tool.pk]), {"query": "[?status=='paid'].id"})
    # then
    assert response.status_code == 200
    outcome = response.context["outcome"]
    assert (outcome["ok"], json.loads(outcome["result"])) == (True, [1])
    tool.refresh_from_db()
    assert (tool.use_count, tool.description) == (1, "A query_data tool for tests.")


def test_tool_pages_without_panel_providers_show_no_panels(client, owner, table, make_tool, received, monkeypatch):
    """tools_app alone: the tool pages render without the blocks other apps add, and name no call log."""
    # given
    tool = make_tool(owner, table, name="orders_query")
    client.force_login(owner)
    monkeypatch.setattr(ToolAdmin, "panel_providers", [])
    # when
    change = client.get(reverse("admin:tools_app_tool_change", args=[tool.pk]))
    tried = client.post(reverse("admin:tools_app_tool_try", args=[tool.pk]), {"query": "length(@)"})
    # then
    assert (change.status_code, tried.status_code) == (200, 200)
    assert change.context["tool_panel_templates"] == []
    for html in (change.content.decode(), tried.content.decode()):
        assert "toolhub-panels" not in html
        assert "call log" not in html
    assert "toolhub-after" not in change.content.decode()
    assert json.loads(tried.context["outcome"]["result"]) == 3
