"""SPEC §4.4, §2.2: the recorder writes every call, also when a row its batch refers to was deleted meanwhile.

A batch queued before a tool, instance, key or user was deleted and written after: the deleted row must
cost only its own links (on_delete SET_NULL keeps the row without the tool or key; CASCADE drops the
deleted instance's rows, as the delete did with the older ones), never the other calls of the batch.
These tests run with committed transactions (transactional_db), because the foreign keys are checked at
commit, on both databases.
"""

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from mcp_app import recording
from mcp_app.models import ApiKey, CallLog
from mcp_app.recording import CallRecord, recorder
from mcp_app.services import api_key_delete, api_key_issue, binding_create, instance_create, instance_delete
from tools_app import services
from tools_app.models import Tool

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
TOUCHED = datetime(2026, 5, 1, 12, 30, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _touch_time(monkeypatch):
    """Key touches in these tests happen at TOUCHED."""
    monkeypatch.setattr(recording, "timezone", SimpleNamespace(now=lambda: TOUCHED))


def _at(second: int) -> datetime:
    return T0.replace(second=second)


def _record(instance, tool, key=None, second: int = 0, **fields) -> None:
    recorder.record(
        CallRecord(
            instance_id=instance.pk,
            owner_id=instance.owner_id,
            tool_id=tool.pk,
            tool_name=tool.name,
            api_key_id=key.pk if key is not None else None,
            duration_ms=1.0,
            at=_at(second),
            **{"status": "ok", **fields},
        )
    )


def _rows() -> list[tuple]:
    """(instance id, tool id, tool name, key id, created second) of every call-log row, in write order."""
    return [
        (row.mcp_instance_id, row.tool_id, row.tool_name, row.api_key_id, row.created_at.second)
        for row in CallLog.objects.order_by("id")
    ]


def _counters(tool) -> tuple[int, datetime | None]:
    return tuple(Tool.objects.filter(pk=tool.pk).values_list("use_count", "last_used").get())


@pytest.fixture
def shop(owner, table, make_tool):
    """Instance 'shop' with key `key`, tools `kept` and `doomed` bound to it."""
    instance = instance_create(owner=owner, name="Shop", slug="shop")
    key, _ = api_key_issue(mcp_instance=instance, label="main")
    kept = make_tool(owner, table, type="get_all_data", name="kept")
    doomed = make_tool(owner, table, type="get_all_data", name="doomed")
    binding_create(mcp_instance=instance, tool=kept)
    binding_create(mcp_instance=instance, tool=doomed)
    return instance, key, kept, doomed


def test_common_path_is_one_insert_and_one_update_per_tool_and_key(shop):
    """Nothing deleted: the batch costs one bulk insert, one F() update per tool and one update per key."""
    # given
    instance, key, kept, doomed = shop
    for second in range(3):
        _record(instance, kept, key, second)
    _record(instance, doomed, key, 3)
    recorder.touch_key(key.pk)
    # when
    with CaptureQueriesContext(connection) as queries:
        written = recorder.flush()
    # then
    statements = [query["sql"].split()[0] for query in queries.captured_queries]
    statements = [verb for verb in statements if verb not in ("BEGIN", "COMMIT")]  # SQLite logs them
    assert written == 4
    assert statements == ["INSERT", "UPDATE", "UPDATE", "UPDATE"]
    assert _counters(kept) == (3, _at(2))
    assert _counters(doomed) == (1, _at(3))
    assert ApiKey.objects.get(pk=key.pk).last_used_at == TOUCHED


def test_calls_of_a_deleted_tool_keep_their_rows_without_the_tool(shop):
    """A tool deleted while its calls wait: their rows stay with tool NULL (SET_NULL), its count is gone
    with it, and every other call of the batch is recorded and counted."""
    # given
    instance, key, kept, doomed = shop
    _record(instance, kept, key, 1)
    _record(instance, doomed, key, 2)
    _record(instance, kept, key, 3)
    _record(instance, doomed, key, 4)
    recorder.touch_key(key.pk)
    services.tool_delete(tool=doomed)
    # when
    written = recorder.flush()
    # then
    assert written == 4
    assert _rows() == [
        (instance.pk, kept.pk, "kept", key.pk, 1),
        (instance.pk, None, "doomed", key.pk, 2),
        (instance.pk, kept.pk, "kept", key.pk, 3),
        (instance.pk, None, "doomed", key.pk, 4),
    ]
    assert _counters(kept) == (2, _at(3))
    assert not Tool.objects.filter(pk=doomed.pk).exists()
    assert ApiKey.objects.get(pk=key.pk).last_used_at == TOUCHED


def test_calls_of_a_deleted_instance_are_dropped_and_the_others_kept(owner, shop):
    """An instance deleted while its calls wait: its rows go as its older rows went (CASCADE); the other
    instance's calls are recorded, and the tool's use count counts the calls of both."""
    # given
    instance, key, kept, _ = shop
    gone = instance_create(owner=owner, name="Gone", slug="gone")
    gone_key, _ = api_key_issue(mcp_instance=gone, label="gone")
    binding_create(mcp_instance=gone, tool=kept)
    _record(instance, kept, key, 1)
    _record(gone, kept, gone_key, 2)
    _record(instance, kept, key, 3)
    _record(gone, kept, gone_key, 4)
    recorder.touch_key(key.pk)
    recorder.touch_key(gone_key.pk)
    instance_delete(instance=gone)
    # when
    written = recorder.flush()
    # then
    assert written == 2
    assert _rows() == [(instance.pk, kept.pk, "kept", key.pk, 1), (instance.pk, kept.pk, "kept", key.pk, 3)]
    assert _counters(kept) == (4, _at(4))
    assert list(ApiKey.objects.values_list("pk", flat=True)) == [key.pk]
    assert ApiKey.objects.get(pk=key.pk).last_used_at == TOUCHED


def test_calls_with_a_deleted_key_keep_their_rows_without_the_key(shop):
    """A key deleted while its calls wait: their rows stay with key NULL (SET_NULL); its touch is dropped."""
    # given
    instance, key, kept, doomed = shop
    other_key, _ = api_key_issue(mcp_instance=instance, label="other")
    _record(instance, kept, key, 1)
    _record(instance, doomed, other_key, 2)
    _record(instance, kept, other_key, 3)
    recorder.touch_key(key.pk)
    recorder.touch_key(other_key.pk)
    api_key_delete(api_key=other_key)
    # when
    written = recorder.flush()
    # then
    assert written == 3
    assert _rows() == [
        (instance.pk, kept.pk, "kept", key.pk, 1),
        (instance.pk, doomed.pk, "doomed", None, 2),
        (instance.pk, kept.pk, "kept", None, 3),
    ]
    assert _counters(kept) == (2, _at(3))
    assert _counters(doomed) == (1, _at(2))
    assert list(ApiKey.objects.values_list("pk", flat=True)) == [key.pk]
    assert ApiKey.objects.get(pk=key.pk).last_used_at == TOUCHED


def test_calls_of_a_deleted_user_are_dropped_and_the_others_kept(owner, make_user, make_table, make_tool, shop):
    """A user deleted while calls on their instance wait (CallLog.owner is CASCADE): other users' calls stay."""
    # given
    instance, key, kept, _ = shop
    leaver = make_user("leaver")
    their_table = make_table(leaver, name="theirs")
    their_tool = make_tool(leaver, their_table, type="get_all_data", name="theirs")
    their_instance = instance_create(owner=leaver, name="Theirs", slug="theirs")
    _record(their_instance, their_tool, None, 1)
    _record(instance, kept, key, 2)
    get_user_model().objects.filter(pk=leaver.pk).delete()
    # when
    written = recorder.flush()
    # then
    assert written == 1
    assert _rows() == [(instance.pk, kept.pk, "kept", key.pk, 2)]
    assert _counters(kept) == (1, _at(2))


def test_a_row_that_keeps_failing_costs_only_itself(shop, monkeypatch):
    """If the batch still fails when written again, the rows are written in smaller and smaller pieces:
    the one row the database keeps refusing is dropped, every other row and every use count is written."""
    # given
    instance, key, kept, doomed = shop
    for second in range(7):
        _record(instance, kept, key, second)
    _record(instance, doomed, key, 7)
    for second in range(8, 12):
        _record(instance, kept, key, second)
    services.tool_delete(tool=doomed)
    real_live = recording._live

    def stale_live(calls, key_ids=()):
        # As if the tool were deleted again after each check: the doomed row keeps its dead tool id.
        live = real_live(calls, key_ids)
        return recording._Live(live.tools | {doomed.pk}, live.instances, live.keys, live.owners)

    monkeypatch.setattr(recording, "_live", stale_live)
    # when
    written = recorder.flush()
    # then
    assert written == 11
    assert _rows() == [(instance.pk, kept.pk, "kept", key.pk, second) for second in (*range(7), *range(8, 12))]
    assert _counters(kept) == (11, _at(11))
    assert CallLog.objects.filter(tool_name="doomed").count() == 0


def test_a_lost_connection_drops_the_batch_with_one_log_line(shop, monkeypatch, caplog):
    """An error that is not about the rows (the database unreachable) is not retried row by row."""
    # given
    from django.db import OperationalError

    instance, key, kept, _ = shop
    for second in range(4):
        _record(instance, kept, key, second)

    def unreachable(*args, **kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(recording, "_save", unreachable)
    monkeypatch.setattr(recording, "_live", unreachable)
    # when
    written = recorder.flush()
    # then
    assert written == 0
    assert recorder.pending == 0
    assert CallLog.objects.count() == 0
    assert _counters(kept) == (0, None)
    dropped = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert dropped == ["Could not record 4 MCP call(s); they are dropped."]


@pytest.mark.postgres
def test_a_row_postgresql_refuses_costs_only_itself(shop):
    """PostgreSQL refuses a NUL in text: that one row is dropped; the rest of the batch and all counts stay."""
    # given
    if connection.vendor != "postgresql":
        pytest.skip("SQLite stores a NUL in text")
    instance, key, kept, _ = shop
    _record(instance, kept, key, 1)
    _record(instance, kept, key, 2, status="error", error_code="INVALID_QUERY", error_message="bad \x00 byte")
    _record(instance, kept, key, 3)
    # when
    written = recorder.flush()
    # then
    assert written == 2
    assert _rows() == [(instance.pk, kept.pk, "kept", key.pk, 1), (instance.pk, kept.pk, "kept", key.pk, 3)]
    assert _counters(kept) == (3, _at(3))
