"""The expression indexes of a table's declared `indexed_fields` (docs/tables-at-scale.md, "Indexes").

THE entry point: ensure_indexes(table_id). Call it whenever the set of (collection, field) pairs of a table may
have changed: the table's `indexed_fields` were saved (services.table_update / table_create do), a collection
of the table was created (the storage code, once the collection row is in), or collections were deleted. It
makes the engine's indexes exactly those of the table's fields over its current collections, and drops those of
collections that no longer exist (a deleted table's included).

Inside a transaction it runs after the commit (transaction.on_commit): PostgreSQL builds the indexes
CONCURRENTLY, which cannot run inside one, and an index is never built for a collection a rollback takes
back. Outside one it runs at once.

Failures: the declaration is the truth and the indexes follow it. A build that fails (a lock or statement
timeout, a cancelled build, a deadlock with another DDL) is logged, counted in
`toolhub_index_builds_failed_total`, and an index it left invalid is dropped; the saved `indexed_fields`
stand, queries answer the same without the index (only slower), and the next ensure_indexes of the table
(or `manage.py sync_table_indexes`) builds what is missing. Two syncs of one table queue on an advisory lock
(PostgreSQL) so they never build the same index twice.
"""

import logging
import zlib

from django.db import connection, transaction
from django.db.models import Q

from tools_app.data_access.sql.indexes import IndexSync, indexed_collection_ids, sync_indexes
from tools_app.kernel.telemetry.metrics import index_build_failed
from tools_app.models import Table, TableCollection, TableRecord

__all__ = ["ensure_indexes", "indexed_table_ids", "sync_table_indexes"]

logger = logging.getLogger(__name__)

RECORDS = TableRecord._meta.db_table
_LOCK_SPACE = zlib.crc32(b"toolhub.table_indexes") % 2**31  # the advisory lock's first key; the table id is the second


def _dialect() -> str:
    return "postgresql" if connection.vendor == "postgresql" else "sqlite"


def ensure_indexes(table_id: int) -> None:
    """Bring table `table_id`'s record indexes in line with its `indexed_fields` and collections: now, or after
    the commit of the transaction in progress. Never raises for a failed build (see the module docstring)."""
    if connection.in_atomic_block:
        transaction.on_commit(lambda: _sync_quietly(table_id), robust=True)
        return
    _sync_quietly(table_id)


def _sync_quietly(table_id: int) -> None:
    try:
        sync_table_indexes(table_id)
    except Exception:
        logger.exception("Could not bring the record indexes of table %s in line with its indexed_fields.", table_id)
        index_build_failed()


def sync_table_indexes(table_id: int) -> IndexSync:
    """ensure_indexes' work, run now, outside any transaction; returns what it did."""
    if connection.in_atomic_block and connection.vendor == "postgresql":
        raise RuntimeError("sync_table_indexes runs outside a transaction (CREATE INDEX CONCURRENTLY)")
    dialect = _dialect()
    with connection.cursor() as cursor:
        locked = _lock(cursor, table_id)
        try:
            fields = Table.objects.filter(pk=table_id).values_list("indexed_fields", flat=True).first() or []
            collections = list(TableCollection.objects.filter(table_id=table_id).values_list("pk", flat=True))
            indexed = indexed_collection_ids(cursor, dialect=dialect, records_table=RECORDS)
            live = set(TableCollection.objects.filter(pk__in=indexed).values_list("pk", flat=True))
            result = sync_indexes(
                cursor,
                dialect=dialect,
                records_table=RECORDS,
                collection_ids=collections,
                fields=fields,
                in_transaction=connection.in_atomic_block,
                drop_collections=indexed - live,
            )
        finally:
            if locked:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", (_LOCK_SPACE, _lock_key(table_id)))
    for _name in result.failed:
        index_build_failed()
    if result.created or result.dropped:
        logger.info("Table %s record indexes: created %s, dropped %s.", table_id, result.created, result.dropped)
    return result


def indexed_table_ids() -> list[int]:
    """The tables whose record indexes a sync may change, in id order: those that declare `indexed_fields`, and
    those owning a collection that still has record indexes."""
    with connection.cursor() as cursor:
        indexed = indexed_collection_ids(cursor, dialect=_dialect(), records_table=RECORDS)
    owning = TableCollection.objects.filter(pk__in=indexed).values_list("table_id", flat=True)
    tables = Table.objects.filter(~Q(indexed_fields=[]) | Q(pk__in=owning)).order_by("pk")
    return list(tables.values_list("pk", flat=True))


def _lock_key(table_id: int) -> int:
    return int(table_id) % (2**31)


def _lock(cursor, table_id: int) -> bool:
    """PostgreSQL: wait for another sync of this table (a session lock: the builds run in autocommit)."""
    if connection.vendor != "postgresql":
        return False
    cursor.execute("SELECT pg_advisory_lock(%s, %s)", (_LOCK_SPACE, _lock_key(table_id)))
    return True
