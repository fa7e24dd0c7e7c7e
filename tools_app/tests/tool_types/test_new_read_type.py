"""A new read type is its declaration and one executor entry (docs/architecture.md, "Where things go"): a
stand-in type registered here by those two alone (and its choice, which a migration adds for a real type) is
created, called through the pipeline and narrowed, over a document table and a table stored as rows, with the
same answers. No other module lists the read types."""

from typing import Any

import pytest

from tools_app.data_access.operations import Mount
from tools_app.execution import records
from tools_app.execution.executors import EXECUTORS, execute, reader
from tools_app.execution.pipeline import Caller, run_tool_call, target_of_tool
from tools_app.kernel.errors import ErrorCode
from tools_app.models import CallLog, Surface, TableCollection, Tool
from tools_app.tool_types import READ, TOOL_TYPES, is_pageable, is_read
from tools_app.tool_types.base import READ_ONLY, ToolTypeSpec

ORDERS = [
    {"id": 1, "customer": "Ada", "status": "paid"},
    {"id": 2, "customer": "Alan", "status": "shipped"},
    {"id": 3, "customer": "Grace", "status": "shipped"},
    {"id": 4, "customer": "Ada", "status": "new"},
    "not a record",
]
CATALOG = {"KB": {"name": "Keyboard", "status": "sold"}, "MS": {"name": "Mouse", "status": "stocked"}}
DATA = {"settings": {"currency": "EUR"}, "orders": ORDERS, "catalog": CATALOG}


def distinct_values(data: Any, mount: Mount, arguments: dict) -> Any:
    """The stand-in's operation: the distinct string values of one field over the records at the mount."""
    value = mount.value(data)
    found = value if isinstance(value, list) else list(value.values()) if isinstance(value, dict) else []
    field = arguments["field"]
    values = {record[field] for record in found if isinstance(record, dict) and isinstance(record.get(field), str)}
    return {"field": field, "values": sorted(values), "records": len(found)}


SPEC = ToolTypeSpec(
    value="distinct_values",
    label="Distinct values",
    kind=READ,
    input_schema={
        "type": "object",
        "properties": {"field": {"type": "string", "description": "The field whose values are listed."}},
        "required": ["field"],
        "additionalProperties": False,
    },
    annotations=READ_ONLY,
    help={"summary": "The distinct values of one field.", "example": '{"field": "status"}', "topics": []},
    example=lambda tool, value: {"field": "status"},
    returns="The field, its distinct string values, sorted, and how many records were read.",
)


@pytest.fixture
def stand_in(monkeypatch):
    """The stand-in type registered as its declaration module and its EXECUTORS line register a type; its
    `executor` is that line (a test may give it a collection reader)."""
    field = Tool._meta.get_field("type")
    monkeypatch.setattr(field, "choices", [*field.choices, (SPEC.value, SPEC.label)])
    monkeypatch.setitem(TOOL_TYPES, SPEC.value, SPEC)

    def register(executor=None):
        monkeypatch.setitem(EXECUTORS, SPEC.value, executor or reader(distinct_values))

    register()
    return register


@pytest.fixture
def tools_on(make_table, make_tool, owner):
    """tools_on(storage, mounts): a table of DATA with a stand-in tool at each mount (by mount), stored as a
    document, or moved to rows once its tools are made (records.table_to_rows: its collections become rows)."""

    def make(storage: str, mounts: tuple[str, ...]) -> dict[str, Tool]:
        table = make_table(owner, name=f"as_{storage}", data=DATA, storage="document")
        tools = {
            mount: make_tool(
                owner, table=table, type=SPEC.value, name=f"{storage}_{mount.strip('/') or 'root'}", json_path=mount
            )
            for mount in mounts
        }
        if storage == "rows":
            assert records.table_to_rows(table.pk) is True
            assert TableCollection.objects.filter(table=table).exists()
        table.refresh_from_db()
        assert table.storage == storage
        return {mount: Tool.objects.get(pk=tool.pk) for mount, tool in tools.items()}

    return make


def call(owner, tool, arguments):
    caller = Caller(surface=Surface.API, user_id=owner.pk, user=owner)
    outcome = run_tool_call(caller=caller, target=target_of_tool(tool), name=tool.name, arguments=arguments)
    return ("ok", outcome.value) if outcome.error is None else ("error", outcome.error.code)


EXPECTED = {
    ("/orders", "status"): {"field": "status", "values": ["new", "paid", "shipped"], "records": 5},
    ("/orders", "customer"): {"field": "customer", "values": ["Ada", "Alan", "Grace"], "records": 5},
    ("/catalog", "status"): {"field": "status", "values": ["sold", "stocked"], "records": 2},
    ("/settings", "currency"): {"field": "currency", "values": [], "records": 1},
    ("", "orders"): {"field": "orders", "values": [], "records": 3},
}


def test_the_declaration_alone_makes_it_a_read(stand_in):
    assert (is_read(SPEC.value), is_pageable(SPEC.value)) == (True, False)


@pytest.mark.parametrize("storage", ["document", "rows"])
def test_it_is_created_and_called_through_the_pipeline_on_both_storages(stand_in, tools_on, owner, storage):
    # given
    tools = tools_on(storage, ("/orders", "/catalog", "/settings", ""))
    # when
    answers = {(mount, field): call(owner, tools[mount], {"field": field}) for mount, field in EXPECTED}
    # then
    assert answers == {key: ("ok", value) for key, value in EXPECTED.items()}
    assert tools["/orders"].input_schema == SPEC.input_schema  # its declaration's default
    assert CallLog.objects.filter(tool__type=SPEC.value, status="ok").count() == len(EXPECTED)
    assert call(owner, tools["/orders"], {"field": 1}) == ("error", ErrorCode.INVALID_ARGUMENTS)


@pytest.mark.parametrize("storage", ["document", "rows"])
def test_a_narrowing_reaches_it_on_both_storages(stand_in, tools_on, storage):
    # given
    tool = tools_on(storage, ("/orders",))["/orders"]
    # when
    narrowed = execute(tool=tool, arguments={"field": "customer"}, where={"status": "shipped"})
    # then
    assert narrowed == {"field": "customer", "values": ["Alan", "Grace"], "records": 2}


def test_its_entry_may_name_how_it_reads_a_collection_where_its_rows_are(stand_in, tools_on, owner):
    """A collection reader answers for the rows table's collection (here without reading a record); GATHER hands
    the call back to the operation over the gathered records. A document table never asks it."""
    # given
    asked = []

    def count_only(collection, mount, arguments, extra, *, where, window):
        asked.append((collection.mount, where))
        if where is not None:
            return records.GATHER
        return {"field": arguments["field"], "values": [], "records": collection.record_count}

    stand_in(reader(distinct_values, over_collection=count_only))
    on_rows = tools_on("rows", ("/orders",))["/orders"]
    on_document = tools_on("document", ("/orders",))["/orders"]
    # when
    read = call(owner, on_rows, {"field": "status"})
    gathered = execute(tool=on_rows, arguments={"field": "status"}, where={"status": "shipped"})
    from_document = call(owner, on_document, {"field": "status"})
    # then
    assert read == ("ok", {"field": "status", "values": [], "records": 5})
    assert gathered == {"field": "status", "values": ["shipped"], "records": 2}
    assert from_document == ("ok", EXPECTED[("/orders", "status")])
    assert asked == [("/orders", None), ("/orders", {"status": "shipped"})]
