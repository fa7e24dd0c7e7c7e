"""The directory of a rows table's collection (TableRecordBlock: records per block of positions) and the reads that
find an ordinal by it (records.position_at: a preview's offset, a cursor's page, the records view's window). Every
write of records keeps it exact; the reads answer as the document does. SQLite and PostgreSQL.

The block span is made 4 positions' gaps here, so a few records span many blocks (a real one holds 1,024)."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tools_app import services
from tools_app.data_access.sql import store
from tools_app.execution import record_pages, records
from tools_app.execution.executors import execute
from tools_app.models import Table, TableRecord, TableRecordBlock
from tools_app.tests.execution.conftest import SMALL_BLOCK_SPAN

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("small_blocks")]

SPAN = SMALL_BLOCK_SPAN


def _orders(count: int, start: int = 0) -> list[dict]:
    return [{"id": number, "name": f"n{number}", "status": "new"} for number in range(start, start + count)]


def _stored(table_id: int) -> tuple[records.Collection, list[int]]:
    collection = records.collections(table_id)[""]
    positions = list(
        TableRecord.objects.filter(collection_id=collection.id).order_by("position").values_list("position", flat=True)
    )
    return collection, positions


def _check_directory(table_id: int) -> list[int]:
    """The directory holds exactly the rows' counts per block, and position_at finds every ordinal's position."""
    collection, positions = _stored(table_id)
    counted: dict[int, int] = {}
    for position in positions:
        counted[position // SPAN] = counted.get(position // SPAN, 0) + 1
    directory = dict(TableRecordBlock.objects.filter(collection_id=collection.id).values_list("block", "record_count"))
    assert directory == counted
    assert collection.record_count == len(positions)
    assert [records.position_at(collection, index) for index in range(len(positions))] == positions
    assert records.position_at(collection, len(positions)) is None
    assert records.position_at(collection, -1) is None
    return positions


def _skips(sql: str) -> int:
    """How many rows a statement's OFFSET skips (0 without one)."""
    found = re.search(r"OFFSET (\d+)", sql)
    return int(found.group(1)) if found else 0


@pytest.fixture
def directory_table(make_table, make_tool, owner):
    table = make_table(owner, name="orders", data=_orders(10), storage="document")
    tools = {
        kind: make_tool(
            owner, table=table, type=kind, name=f"orders_{kind}", json_path="", metadata={"key_field": "id"}
        )
        for kind in ("create", "update", "delete")
    }
    assert records.table_to_rows(table.pk) is True
    return table, tools


def test_the_blocks_table_of_the_directory_is_the_models():
    assert store.BLOCKS_TABLE == TableRecordBlock._meta.db_table


def test_every_write_of_records_keeps_the_directory_exact(directory_table):
    table, tools = directory_table
    assert _check_directory(table.pk) == [number * store.POSITION_GAP for number in range(10)]
    assert TableRecordBlock.objects.filter(collection__table=table).count() == 3  # 4 + 4 + 2 records
    execute(tool=tools["create"], arguments={"elements": _orders(3, start=10)})
    assert len(_check_directory(table.pk)) == 13
    execute(tool=tools["delete"], arguments={"keys": [0, 1, 2, 3, 5]})  # block 0 emptied: its row goes
    positions = _check_directory(table.pk)
    assert positions[0] == 4 * store.POSITION_GAP
    assert not TableRecordBlock.objects.filter(collection__table=table, block=0).exists()
    execute(tool=tools["update"], arguments={"elements": [{"id": 4, "status": "paid"}]})  # no position moves
    assert _check_directory(table.pk) == positions
    # Written whole with records between the kept ones: they take positions between theirs.
    data = [*_orders(2, start=100), *services.table_data(table.pk)[1][:3], *_orders(3, start=200)]
    services.table_update(table=Table.objects.get(pk=table.pk), data=data)
    positions = _check_directory(table.pk)
    assert len(positions) == 8
    assert services.table_restore(table_id=table.pk, version=1) == 6
    assert _check_directory(table.pk) == [number * store.POSITION_GAP for number in range(10)]


def test_a_preview_at_every_offset_answers_as_the_document_does_and_skips_no_record(make_table, make_tool, owner):
    data = _orders(23)
    tools = {}
    for name in ("document", "rows"):
        table = make_table(owner, name=name, data=data, storage="document")
        tools[name] = make_tool(
            owner, table=table, type="preview", name=f"{name}_preview", json_path="", metadata={"preview_keys": ["id"]}
        )
    assert records.table_to_rows(tools["rows"].table_id) is True
    for offset in range(26):
        for limit in (None, 1, 5):
            arguments = {"offset": offset} if limit is None else {"offset": offset, "limit": limit}
            with CaptureQueriesContext(connection) as statements:
                got = execute(tool=tools["rows"], arguments=arguments)
            assert got == execute(tool=tools["document"], arguments=arguments), arguments
            wanted = [{"id": number} for number in range(offset, 23 if limit is None else min(23, offset + limit))]
            assert got == {"items": wanted, "total_count": 23}
            # The page's statement skips nothing; the directory's steps within one block, at most its records.
            skips = [_skips(statement["sql"]) for statement in statements]
            assert all(skip < SPAN // store.POSITION_GAP for skip in skips), (arguments, skips)


def test_a_records_view_page_deep_in_a_rows_collection_is_found_by_the_directory(directory_table):
    table, tools = directory_table
    execute(tool=tools["delete"], arguments={"keys": [1, 6]})
    for offset in range(10):
        with CaptureQueriesContext(connection) as statements:
            page = record_pages.record_page(table_id=table.pk, mount="", offset=offset, limit=3)
        expected = [0, 2, 3, 4, 5, 7, 8, 9][offset : offset + 3]
        assert [item.value["id"] for item in page.items] == expected, offset
        assert page.has_more == (offset + 3 < 8)
        assert all(_skips(statement["sql"]) < SPAN // store.POSITION_GAP for statement in statements), offset
