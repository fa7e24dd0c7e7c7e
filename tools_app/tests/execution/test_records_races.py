"""Concurrent writers on one table stored as rows, on PostgreSQL: nothing lost, versions contiguous, and the
history (per-record inverses, newest first) takes the rows back to where they started."""

import pytest

from tools_app.tests.services.test_concurrency import _in_threads

WORKERS = 6
CALLS = 5


def _rows(table_id: int) -> dict[int, tuple]:
    from tools_app.models import TableRecord

    found = TableRecord.objects.filter(collection__table_id=table_id).values_list("position", "key", "data")
    return {position: (key, data) for position, key, data in found}


def _replayed(rows: dict[int, tuple], inverses: list[list]) -> dict[int, tuple]:
    rows = dict(rows)
    for inverse in inverses:
        for operation in inverse:
            position = operation["position"]
            if operation["op"] == "add":
                rows[position] = (operation["key"], operation["value"])
            elif operation["op"] == "remove":
                del rows[position]
            else:
                rows[position] = (rows[position][0], operation["value"])
    return rows


@pytest.mark.postgres
def test_concurrent_writers_on_a_rows_table_lose_nothing(postgres_db, owner, make_table, make_tool):  # noqa: F811
    from tools_app.execution import records
    from tools_app.execution.executors import execute
    from tools_app.models import Table, TableChange, TableCollection, Tool

    table = make_table(owner, name="rows", data=[{"id": 0, "shared": True}, {"id": "gone", "n": 1}])
    for kind in ("create", "update", "delete"):
        make_tool(owner, table=table, type=kind, name=kind, json_path="", metadata={"key_field": "id"})
    assert records.table_to_rows(table.pk) is True
    before = _rows(table.pk)

    def worker(index: int) -> list:
        tools = {tool.type: tool for tool in Tool.objects.filter(table_id=table.pk)}
        answers = []
        for call in range(CALLS):
            if call % 2 == 0:  # a record of its own
                answers.append(execute(tool=tools["create"], arguments={"elements": [{"id": f"{index}-{call}"}]}))
            else:  # a field of its own on the shared record: a lost update would drop one
                answers.append(
                    execute(tool=tools["update"], arguments={"elements": [{"id": 0, f"w{index}c{call}": 1}]})
                )
        return answers

    results = _in_threads(WORKERS, worker)

    assert not [result for result in results if isinstance(result, BaseException)], results
    versions = sorted(answer["version"] for answers in results for answer in answers)
    assert versions == list(range(2, 2 + WORKERS * CALLS))
    table = Table.objects.get(pk=table.pk)
    assert table.version == 1 + WORKERS * CALLS
    entries = TableChange.objects.filter(table=table).order_by("version")
    assert list(entries.values_list("version", flat=True)) == versions
    rows = _rows(table.pk)
    created = {f"{index}-{call}" for index in range(WORKERS) for call in range(0, CALLS, 2)}
    assert {key for key, _ in rows.values()} == {"0", "gone", *created}
    assert len(rows) == 2 + len(created) == TableCollection.objects.get(table=table).record_count
    shared = next(data for key, data in rows.values() if key == "0")
    assert shared == {
        "id": 0,
        "shared": True,
        **{f"w{index}c{call}": 1 for index in range(WORKERS) for call in range(1, CALLS, 2)},
    }
    inverses = list(entries.order_by("-version").values_list("inverse", flat=True))
    assert _replayed(rows, inverses) == before
