"""Owner storage quotas (docs/history.md, "Quotas"): a write that would take an owner's table documents over
TOOLHUB_MAX_OWNER_DATA_BYTES is refused with QUOTA_EXCEEDED and writes nothing.

History has its own bounds (TOOLHUB_HISTORY_MAX_TABLE_BYTES, TOOLHUB_HISTORY_MAX_OWNER_BYTES) but never refuses a
write: over them, the oldest entries are compacted away (services.table_log.history_enforce).
"""

from django.db.models import Sum

from tools_app.kernel.errors import ErrorCode, ToolError
from tools_app.kernel.limits import max_owner_data_bytes
from tools_app.models import Table

__all__ = ["data_quota_check", "data_quota_left"]


def data_quota_check(
    *, owner_id: int, new_size: int, table_id: int | None = None, old_size: int = 0, others: int | None = None
) -> None:
    """Refuse (QUOTA_EXCEEDED) a write that makes table `table_id` (None: a new table) `new_size` bytes when the
    owner's tables would then hold more than TOOLHUB_MAX_OWNER_DATA_BYTES. A write that does not grow the table is
    always allowed, so an owner over a lowered quota can still shrink and delete. `others`: the data_bytes of the
    owner's other tables when the caller read them in its transaction (else they are read here)."""
    limit = max_owner_data_bytes()
    if not limit or new_size <= old_size:
        return
    if others is None:
        rest = Table.objects.filter(owner_id=owner_id)
        if table_id is not None:
            rest = rest.exclude(pk=table_id)
        others = rest.aggregate(total=Sum("data_bytes"))["total"] or 0
    used = others + old_size
    wanted = used - old_size + new_size
    if wanted <= limit:
        return
    raise ToolError(
        ErrorCode.QUOTA_EXCEEDED,
        f"This write would bring your tables to {wanted} bytes of data, over your storage quota of {limit} bytes "
        f"(TOOLHUB_MAX_OWNER_DATA_BYTES; {used} bytes are used). Nothing was written. Delete or shrink a table, or "
        "ask the operator to raise the quota.",
        {"quota": "TOOLHUB_MAX_OWNER_DATA_BYTES", "limit": limit, "used": used, "requested": wanted},
    )


def data_quota_left(*, owner_id: int, table_id: int | None = None) -> int | None:
    """The bytes of data table `table_id` (None: a new table) may hold before the owner's tables would be over
    TOOLHUB_MAX_OWNER_DATA_BYTES; None when there is no quota. A stream that writes a table (an import) checks its
    size against this as it grows, and calls data_quota_check for the refusal when it crosses it."""
    limit = max_owner_data_bytes()
    if not limit:
        return None
    others = Table.objects.filter(owner_id=owner_id)
    if table_id is not None:
        others = others.exclude(pk=table_id)
    return limit - (others.aggregate(total=Sum("data_bytes"))["total"] or 0)
