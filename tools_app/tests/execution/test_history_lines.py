"""The readable lines of a table's history entries name records by key, on both storages (execution.history_lines):
exact lines for keyed arrays, keyless arrays, object collections, nested paths and restores."""

import copy

import pytest

from tools_app import services
from tools_app.execution import records
from tools_app.execution.history_lines import entry_lines, readable_diff
from tools_app.execution.pipeline import Caller, run_tool_call, target_of_tool
from tools_app.kernel.limits import HISTORY_MAX_DIFF_LINES
from tools_app.models import Surface, Table, TableChange, TableCollection
from tools_app.tests.history_helpers import write_elsewhere

pytestmark = pytest.mark.django_db

SHOP = {
    "orders": [
        {"id": 1041, "status": "new", "items": [{"id": 7, "qty": 1}, {"id": 8, "qty": 2}]},
        {"id": 1042, "status": "paid", "items": []},
    ],
    "customers": {"c1": {"name": "Ann"}, "c2": {"name": "Bo"}},
    "notes": [{"text": "a"}, {"text": "b"}],
    "settings": {"theme": "dark"},
    "banner": "x" * 4000,  # so that a whole write's diff is smaller than the document (else it is stored whole)
}


def _text(line) -> str:
    sign = {"added": "+", "removed": "-", "changed": "~"}[line.kind]
    values = " -> ".join(value for value in (line.before, line.after) if value)
    return f"{sign} {line.where}: {values}" if values else f"{sign} {line.where}"


def _shown(table_id: int) -> dict[int, list[str]]:
    table = Table.objects.get(pk=table_id)
    shown = entry_lines(table, list(TableChange.objects.filter(table=table)))
    return {version: [_text(line) for line in lines] for version, (lines, _more) in shown.items()}


@pytest.fixture
def shop_tools(make_table, make_tool, owner):
    """make(name) -> (table, run): a table holding SHOP with create/update/delete tools on /orders and /customers;
    run(kind, mount, arguments) writes through the call pipeline."""

    def make(name: str):
        table = make_table(owner, name=name, data=copy.deepcopy(SHOP), storage="document")
        tools = {
            (kind, mount): make_tool(owner, table, type=kind, name=f"{name}_{kind}_{mount[1:]}", json_path=mount)
            for kind in ("create", "update", "delete")
            for mount in ("/orders", "/customers")
        }
        caller = Caller(surface=Surface.ADMIN, user_id=owner.pk, user=owner)

        def run(kind: str, mount: str, arguments: dict) -> None:
            tool = tools[(kind, mount)]
            assert run_tool_call(caller=caller, target=target_of_tool(tool), name=tool.name, arguments=arguments).ok

        return table, run

    return make


def _tool_writes(run) -> None:
    run("update", "/orders", {"elements": [{"id": 1042, "status": "shipped"}]})
    run("create", "/orders", {"elements": [{"id": 1043, "status": "new", "items": []}]})
    run("update", "/customers", {"elements": [{"key": "c2", "content": {"name": "Bea", "vip": True}}]})
    run("create", "/customers", {"elements": [{"key": "c3", "content": {"name": "Cy"}}]})
    run("delete", "/orders", {"keys": [1041]})
    run("delete", "/customers", {"keys": ["c1"]})


TOOL_WRITES = {
    2: ['~ orders › 1042 · status: "paid" -> "shipped"'],
    3: ['+ orders › 1043: {"id": 1043, "items": [], "status": "new"}'],
    4: ['~ customers › c2 · name: "Bo" -> "Bea"', "+ customers › c2 · vip: true"],
    5: ['+ customers › c3: {"name": "Cy"}'],
    6: ['- orders › 1041: {"id": 1041, "items": [{"id": 7, "qty": 1}, {"id": 8, "qty": 2}], "status": "new"}'],
    7: ['- customers › c1: {"name": "Ann"}'],
}


def test_document_tool_writes_name_records_by_key(shop_tools):
    table, run = shop_tools("shop")
    _tool_writes(run)
    assert _shown(table.pk) == TOOL_WRITES


def test_rows_tool_writes_name_records_by_key(shop_tools):
    table, run = shop_tools("shop")
    assert records.table_to_rows(table.pk) is True
    _tool_writes(run)
    assert _shown(table.pk) == TOOL_WRITES


def test_document_whole_writes_name_nested_and_keyless_records(shop_tools):
    table, _run = shop_tools("shop")
    changed = copy.deepcopy(SHOP)
    del changed["orders"][0]["items"][0]  # record 7 goes: record 8 is at index 0 afterwards
    changed["orders"][0]["items"][0]["qty"] = 5
    changed["orders"][1]["status"] = "shipped"
    changed["notes"][1]["text"] = "B"  # notes hold no key: their records keep their index
    changed["notes"].append({"text": "c"})
    changed["settings"]["theme"] = "light"  # no record on the path: the pointer
    services.table_update(table=table, data=changed)
    assert _shown(table.pk) == {
        2: [
            '- orders › 1041 › items › 7: {"id": 7, "qty": 1}',
            "~ orders › 1041 › items › 8 · qty: 2 -> 5",
            '~ orders › 1042 · status: "paid" -> "shipped"',
            '~ notes › [1] · text: "b" -> "B"',
            '+ notes › [2]: {"text": "c"}',
            '~ /settings/theme: "dark" -> "light"',
        ]
    }


def test_document_root_records_are_named_under_the_table_and_a_restore_by_key(make_table, make_tool, owner):
    table = make_table(
        owner, name="stock", data=[{"id": 1, "qty": 120}, {"id": 2, "qty": 3}, {"qty": 0}], storage="document"
    )
    tools = {kind: make_tool(owner, table, type=kind, name=f"stock_{kind}") for kind in ("update", "delete")}
    caller = Caller(surface=Surface.ADMIN, user_id=owner.pk, user=owner)
    for kind, arguments in [("update", {"elements": [{"id": 2, "qty": 30}]}), ("delete", {"keys": [1]})]:
        tool = tools[kind]
        assert run_tool_call(caller=caller, target=target_of_tool(tool), name=tool.name, arguments=arguments).ok
    assert services.table_restore(table_id=table.pk, version=1) == 4
    assert _shown(table.pk) == {
        2: ["~ stock › 2 · qty: 3 -> 30"],
        3: ['- stock › 1: {"id": 1, "qty": 120}'],
        # the restore undoes both, newest first: the keys are resolved against the document it applied to
        4: ['+ stock › 1: {"id": 1, "qty": 120}', "~ stock › 2 · qty: 30 -> 3"],
    }
    # a whole write of the keyless record: its index, against the document before
    services.table_update(table=table, data=[{"id": 1, "qty": 120}, {"id": 2, "qty": 3}, {"qty": 9}])
    assert _shown(table.pk)[5] == ["~ stock › [2] · qty: 0 -> 9"]


def test_rows_restore_and_object_replace_without_key_and_entries_before_the_move(shop_tools):
    table, run = shop_tools("shop")
    run("update", "/orders", {"elements": [{"id": 1042, "status": "shipped"}]})  # version 2, as a document
    assert records.table_to_rows(table.pk) is True
    run("update", "/customers", {"elements": [{"key": "c2", "content": {"name": "Bea"}}]})  # 3
    run("delete", "/orders", {"keys": [1041]})  # 4
    assert services.table_restore(table_id=table.pk, version=2) == 5
    shown = _shown(table.pk)
    assert shown[5] == [
        '+ orders › 1041: {"id": 1041, "items": [{"id": 7, "qty": 1}, {"id": 8, "qty": 2}], "status": "new"}',
        '~ customers › c2 · name: "Bea" -> "Bo"',
    ]
    # an entry written before the move patched the document that held the records, which is not kept: its index
    assert shown[2] == ['~ orders › [1] · status: "paid" -> "shipped"']
    # an object collection's replace carries no key: the record's key at its position names it
    assert shown[3] == ['~ customers › c2 · name: "Bo" -> "Bea"']


def test_rows_operation_without_a_key_shows_its_position(shop_tools):
    table, _run = shop_tools("shop")
    assert records.table_to_rows(table.pk) is True
    orders = TableCollection.objects.get(table=table, mount="/orders")
    write_elsewhere(
        table.pk,
        [{"op": "replace", "collection": orders.pk, "position": 4096, "value": {"status": "draft"}}],
        [{"op": "replace", "collection": orders.pk, "position": 4096, "value": {"status": "new"}}],
    )
    assert _shown(table.pk) == {2: ['~ orders › [position 4096] · status: "new" -> "draft"']}


def test_a_long_key_is_cut_in_the_line(make_table, make_tool, owner):
    key = "k" * 5000
    table = make_table(owner, name="long", data={"items": [{"id": key, "n": 1}]}, storage="document")
    make_tool(owner, table, type="update", name="long_update", json_path="/items")
    services.table_update(table=table, data={"items": [{"id": key, "n": 2}], "pad": "x" * 12_000})
    assert _shown(table.pk)[2] == ["~ items › " + "k" * 79 + "… · n: 1 -> 2", '+ /pad: "' + "x" * 238 + "…"]


def test_lines_past_the_cap_are_counted_not_named():
    patch = [
        {"op": "add", "path": f"/{number}", "value": {"id": number}} for number in range(HISTORY_MAX_DIFF_LINES + 5)
    ]
    inverse = [{"op": "remove", "path": f"/{number}"} for number in reversed(range(HISTORY_MAX_DIFF_LINES + 5))]
    lines, more = readable_diff(patch, inverse)
    assert (len(lines), more, lines[0].where, lines[-1].where) == (
        HISTORY_MAX_DIFF_LINES,
        5,
        "/0",
        f"/{HISTORY_MAX_DIFF_LINES - 1}",
    )
