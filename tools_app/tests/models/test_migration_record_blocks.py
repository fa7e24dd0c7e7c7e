"""Migration 0028: the directory of positions (TableRecordBlock) is filled for the records stored before it, with
the block span the code uses (store.BLOCK_SPAN). SQLite and PostgreSQL."""

from collections import Counter

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tools_app.data_access.sql import store
from tools_app.execution import records
from tools_app.models import TableCollection, TableRecord, TableRecordBlock, TableRecordLayout

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = ("tools_app", "0027_calllog_no_redundant_indexes")


def _migrate(target: list) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(target or executor.loader.graph.leaf_nodes())


def test_the_directory_of_stored_records_is_filled(make_table, make_tool, owner):
    table = make_table(owner, name="rows", data=[{"id": 0}], storage="document")
    make_tool(owner, table=table, type="get_all_data", name="all_rows", json_path="")
    assert records.table_to_rows(table.pk) is True
    collection = TableCollection.objects.get(table=table)
    span = store.BLOCK_SPAN
    with connection.cursor() as cursor:
        store.write_records(
            cursor,
            dialect=records.dialect(),
            records_table=TableRecord._meta.db_table,
            layouts_table=TableRecordLayout._meta.db_table,
            collection_id=collection.pk,
            value=[{"id": n} for n in range(1, 8)],
            positions=[-span - 1, -span, -1, span - 1, span, 5 * span + 3, 5 * span + 4],
        )
    # given: the records without their directory, as a database before the migration holds them
    _migrate([BEFORE])
    # when
    _migrate([])
    # then: the blocks the code counts (position // span), negative positions included
    blocks = TableRecordBlock.objects.filter(collection=collection).values_list("block", "record_count")
    assert sorted(blocks) == [(-2, 1), (-1, 2), (0, 2), (1, 1), (5, 2)]
    positions = TableRecord.objects.filter(collection=collection).values_list("position", flat=True)
    assert sorted(blocks) == sorted(Counter(p // span for p in positions).items())
