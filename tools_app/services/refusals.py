"""Requests refused before the call pipeline, for the owner's activity page (docs/activity.md).

A request over its rate limit (tools_app.kernel.rate_limits: an MCP key's, an API user's) is refused before any
tool runs and leaves no call-log row. The surfaces that refuse it tell `refusals.count()` whose it was (the owner,
and the instance over MCP): a dict increment under a lock in this process's memory, no I/O, so a flood of refused
requests costs no database work per request. `refusals.flush()` writes what this process counted, one
RefusalCount row per (owner, instance, scope, minute), in one INSERT.

When: a flush is due when counts are pending and FLUSH_SECONDS have passed since this process's last one (or
MAX_PENDING keys are pending). Whoever runs in the process next runs a due flush: the surface right after it
answered a refused request, the call pipeline after a call's record (its upkeep), the activity page before it
reads (always, not only when due); and the process at exit. Nothing runs on a timer: a process that serves
nothing after a burst writes its last counts when it next serves or stops. A flush that fails is logged; its
counts are dropped (the /metrics counter `toolhub_rate_limit_refusals` still has them).

Rows older than the call log's retention (TOOLHUB_CALL_LOG_DAYS) are deleted with the call log's prune.
"""

import atexit
import logging
import threading
import time
from datetime import UTC, datetime, timedelta

from django.utils import timezone

from tools_app.models import RefusalCount
from tools_app.services.call_log import call_log_days

__all__ = ["FLUSH_SECONDS", "RefusalCounts", "refusals", "refusals_prune"]

logger = logging.getLogger(__name__)

FLUSH_SECONDS = 10.0  # between two flushes of one process, at least (unless MAX_PENDING keys are pending)
MAX_PENDING = 10_000  # (owner, instance, scope, minute) keys held before a flush is due whatever the time


class RefusalCounts:
    """This process's refusals not yet written: {(owner id, instance id or None, scope, minute epoch): count}."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.pending: dict[tuple[int, int | None, str, int], int] = {}
        self._next_flush = 0.0

    def count(self, *, owner_id: int, instance_id: int | None, scope: str) -> bool:
        """Count one refused request; return whether a flush is due (the caller runs flush() where it may
        reach the database)."""
        minute = int(time.time()) // 60
        key = (owner_id, instance_id, scope, minute)
        with self._lock:
            self.pending[key] = self.pending.get(key, 0) + 1
            return time.monotonic() >= self._next_flush or len(self.pending) >= MAX_PENDING

    def due(self) -> bool:
        """Whether counts are pending and a flush is due. Read on every recorded call: no lock while nothing is
        pending."""
        if not self.pending:
            return False
        with self._lock:
            return bool(self.pending) and (time.monotonic() >= self._next_flush or len(self.pending) >= MAX_PENDING)

    def flush(self) -> int:
        """Write the pending counts (one INSERT); return how many rows. Never raises: a failure is logged."""
        with self._lock:
            batch, self.pending = self.pending, {}
            self._next_flush = time.monotonic() + FLUSH_SECONDS
        if not batch:
            return 0
        rows = [
            RefusalCount(
                owner_id=owner_id,
                mcp_instance_id=instance_id,
                scope=scope,
                minute=datetime.fromtimestamp(minute * 60, tz=UTC),
                count=count,
            )
            for (owner_id, instance_id, scope, minute), count in batch.items()
        ]
        try:
            RefusalCount.objects.bulk_create(rows)
        except Exception:
            # An instance or owner deleted meanwhile (a foreign key refused), the database away: the counts are
            # lost, the requests were refused all the same.
            logger.warning("Writing %d counts of refused requests failed; they are dropped.", len(rows), exc_info=True)
            return 0
        return len(rows)

    def clear(self) -> None:
        """Drop what is pending (tests)."""
        with self._lock:
            self.pending.clear()
            self._next_flush = 0.0


refusals = RefusalCounts()
atexit.register(refusals.flush)  # what the process counted last; nothing to do (no I/O) when nothing is pending


def refusals_prune(*, now: datetime | None = None) -> int:
    """Delete the counts older than the call log's retention; return how many rows."""
    cutoff = (now or timezone.now()) - timedelta(days=call_log_days())
    deleted, _ = RefusalCount.objects.filter(minute__lt=cutoff).delete()
    return deleted
