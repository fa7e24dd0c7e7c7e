"""The call log's retention and each owner's storage bound (docs/call-log.md), kept lazily.

- call_log_prune: rows older than TOOLHUB_CALL_LOG_DAYS are deleted, oldest first, a bounded batch at a time.
- call_log_trim: when an owner's recorded details (arguments, result excerpts, error messages:
  CallLog.recorded_bytes) pass TOOLHUB_CALL_LOG_OWNER_BYTES, the details of their oldest calls are dropped
  (the rows stay, metadata only, for the statistics) until the owner is back under 90 % of the bound.
- CallLogUpkeep: when to run them, decided per process from what it records: a prune at most every
  PRUNE_INTERVAL seconds, an owner's trim after this process recorded a sixteenth of the bound for that owner.
  The pipeline tells it of every record (a clock read and a dict update) and runs what falls due after the
  call's record is committed; nothing runs on a timer.
"""

import threading
import time
from datetime import timedelta

from django.db.models import Sum
from django.utils import timezone

from tools_app.kernel.limits import CALL_LOG_DAYS, CALL_LOG_OWNER_BYTES
from tools_app.models import CallLog

__all__ = ["CallLogUpkeep", "call_log_days", "call_log_owner_bytes", "call_log_prune", "call_log_trim"]

PRUNE_INTERVAL = 60.0  # seconds between two prunes of one process
PRUNE_BATCH = 1000  # rows per DELETE
PRUNE_BATCHES = 10  # DELETEs per prune at most: a long backlog goes over several prunes
TRIM_BATCH = 2000  # rows whose details one trim reads and drops at most per statement
TRIM_EVERY = 16  # an owner's trim is due after this process recorded bound / TRIM_EVERY bytes for them
TRIM_TARGET = 0.9  # a trim brings the owner back under this share of the bound


def call_log_days() -> int:
    """TOOLHUB_CALL_LOG_DAYS: how long a call stays in the call log (default 30 days)."""
    return CALL_LOG_DAYS.get()


def call_log_owner_bytes() -> int:
    """TOOLHUB_CALL_LOG_OWNER_BYTES: the recorded details one owner's call log keeps at most (default 64 MiB)."""
    return CALL_LOG_OWNER_BYTES.get()


def call_log_prune(*, now=None) -> int:
    """Delete call-log rows older than the retention period, oldest first, at most PRUNE_BATCH * PRUNE_BATCHES;
    return how many."""
    cutoff = (now or timezone.now()) - timedelta(days=call_log_days())
    deleted = 0
    for _ in range(PRUNE_BATCHES):
        ids = list(
            CallLog.objects.filter(created_at__lt=cutoff)
            .order_by("created_at")
            .values_list("pk", flat=True)[:PRUNE_BATCH]
        )
        if not ids:
            break
        count, _ = CallLog.objects.filter(pk__in=ids).delete()
        deleted += count
        if len(ids) < PRUNE_BATCH:
            break
    return deleted


def call_log_trim(owner_id: int) -> int:
    """Drop the details of `owner_id`'s oldest recorded calls while their recorded details are over the bound
    (see the module docstring); return how many calls lost their details."""
    bound = call_log_owner_bytes()
    total = CallLog.objects.filter(owner_id=owner_id).aggregate(total=Sum("recorded_bytes"))["total"] or 0
    excess = total - int(bound * TRIM_TARGET)
    if total <= bound or excess <= 0:
        return 0
    cleared = 0
    for _ in range(PRUNE_BATCHES):  # a bound lowered far below what is kept is reached over several trims
        if excess <= 0:
            break
        rows = list(
            CallLog.objects.filter(owner_id=owner_id, recorded_bytes__gt=0)
            .order_by("created_at", "id")
            .values_list("pk", "recorded_bytes")[:TRIM_BATCH]
        )
        if not rows:
            break
        ids = []
        for pk, size in rows:
            ids.append(pk)
            excess -= size
            if excess <= 0:
                break
        cleared += CallLog.objects.filter(pk__in=ids).update(
            arguments="", arguments_truncated=False, result_excerpt="", result_truncated=False, recorded_bytes=0
        )
    return cleared


class CallLogUpkeep:
    """When this process runs call_log_prune and call_log_trim (the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next_prune = 0.0
        self._trim_after = 0
        self._recorded: dict[int, int] = {}

    def due(self, owner_id: int, recorded_bytes: int, now: float | None = None) -> tuple[bool, bool]:
        """(prune due, owner's trim due) after a record of `recorded_bytes` for `owner_id`; each is reset when
        reported due, so the caller runs it."""
        now = time.monotonic() if now is None else now
        with self._lock:
            prune = now >= self._next_prune
            if prune:  # the settings are read again at each prune, not on every call
                self._next_prune = now + PRUNE_INTERVAL
                self._trim_after = call_log_owner_bytes() // TRIM_EVERY
            trim = False
            if recorded_bytes:
                total = self._recorded.get(owner_id, 0) + recorded_bytes
                trim = total >= self._trim_after
                if trim or len(self._recorded) < 100_000:
                    self._recorded[owner_id] = 0 if trim else total
        return prune, trim

    def clear(self) -> None:
        with self._lock:
            self._next_prune = 0.0
            self._recorded.clear()
