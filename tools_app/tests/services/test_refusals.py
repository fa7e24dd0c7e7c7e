"""Requests refused before the pipeline, counted for the activity page (tools_app.services.refusals): in memory
per refusal, written in one INSERT per due flush, pruned with the call log's retention."""

import logging
from datetime import UTC, datetime, timedelta

import pytest
from django.db import DatabaseError, connection
from django.test.utils import CaptureQueriesContext

from tools_app.models import RefusalCount
from tools_app.services import refusals_prune
from tools_app.services.refusals import MAX_PENDING, RefusalCounts

pytestmark = pytest.mark.django_db


def test_a_flood_of_refusals_costs_one_insert_per_due_flush(owner, instance):
    # given
    counts = RefusalCounts()
    # when: the first refusal is due at once; 10,000 more within the interval are counted in memory
    assert counts.count(owner_id=owner.pk, instance_id=instance.pk, scope="mcp_key") is True
    assert counts.flush() == 1
    with CaptureQueriesContext(connection) as queries:
        due = [counts.count(owner_id=owner.pk, instance_id=instance.pk, scope="mcp_key") for _ in range(10_000)]
    # then
    assert len(queries) == 0
    assert not any(due)
    assert not counts.due()
    with CaptureQueriesContext(connection) as queries:
        assert counts.flush() == 1  # one row: one (owner, instance, scope, minute) key
    assert len(queries) == 1
    assert sorted(RefusalCount.objects.values_list("count", flat=True)) in ([1, 10_000], [1, 1, 9_999])


def test_many_keys_pending_make_a_flush_due_whatever_the_time(owner):
    counts = RefusalCounts()
    counts.count(owner_id=owner.pk, instance_id=None, scope="user")
    counts.flush()
    for minute in range(MAX_PENDING):
        counts.pending[(owner.pk, None, "user", minute)] = 1
    assert counts.due() is True


def test_nothing_pending_is_never_due_and_writes_nothing():
    counts = RefusalCounts()
    with CaptureQueriesContext(connection) as queries:
        assert counts.due() is False
        assert counts.flush() == 0
    assert len(queries) == 0


def test_a_failed_flush_is_logged_and_never_raises(owner, instance, caplog, monkeypatch):
    # given: a database that refuses the write
    counts = RefusalCounts()
    counts.count(owner_id=owner.pk, instance_id=instance.pk, scope="mcp_key")

    def refused(*args, **kwargs):
        raise DatabaseError("the database is away")

    monkeypatch.setattr(RefusalCount.objects, "bulk_create", refused)
    # when
    with caplog.at_level(logging.WARNING):
        written = counts.flush()
    # then
    assert written == 0
    assert "Writing 1 counts of refused requests failed; they are dropped." in caplog.text
    assert counts.pending == {}


def test_counts_older_than_the_retention_are_pruned(owner, instance, settings):
    settings.TOOLHUB_CALL_LOG_DAYS = 30
    now = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
    for days in (31, 29):
        RefusalCount.objects.create(
            owner=owner, mcp_instance=instance, scope="mcp_key", minute=now - timedelta(days=days), count=1
        )
    assert refusals_prune(now=now) == 1
    assert list(RefusalCount.objects.values_list("minute", flat=True)) == [now - timedelta(days=29)]
