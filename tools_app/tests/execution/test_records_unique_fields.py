"""generate-tools' key field over a rows table is checked over every record, in the engine
(records.unique_fields): the same answer the document path gives over the whole array (toolsets._Sample), on
SQLite and PostgreSQL."""

import random

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tools_app.execution import records
from tools_app.models import Table, Tool
from tools_app.toolsets import _Sample, description_drift, generate_tools

pytestmark = pytest.mark.django_db

NAMES = ["id", "code", "n", 'we"ird', "back\\slash", "100%", "it's", "tab\tname", "missing"]


def reference(value: list, names: list[str]) -> list[str]:
    """The document path's rule (toolsets._Sample._key_field) for each name alone, over the whole array."""
    kept = []
    for name in names:
        texts = []
        for record in value:
            field = record.get(name) if isinstance(record, dict) else None
            if not isinstance(field, str | int) or isinstance(field, bool):
                break
            texts.append(str(field))
        else:
            if len(set(texts)) == len(texts):
                kept.append(name)
    return kept


def generated_value(chooser: random.Random, size: int) -> list:
    pool = [
        lambda n: n,
        lambda n: str(n),
        lambda n: f"s{n}",
        lambda n: n + 0.0,
        lambda n: True,
        lambda n: None,
        lambda n: 2**70 + n,
        lambda n: [n],
        lambda n: {"v": n},
        lambda n: "é\u2028" + str(n),
    ]
    value: list = []
    for position in range(size):
        if chooser.random() < 0.03:
            value.append(chooser.choice([1, "x", None, [1]]))  # a record that is no object
            continue
        record = {}
        for name in NAMES[:-1]:
            if chooser.random() < 0.05:
                continue  # absent
            kind = chooser.choice(pool) if chooser.random() < 0.2 else pool[chooser.choice([0, 2])]
            record[name] = kind(position if chooser.random() < 0.9 else chooser.randrange(3))
        value.append(record)
    return value


def rows_table(owner, make_table, value, name="t"):
    table = make_table(owner, name=name, data=value)
    records.table_to_rows(table.pk)
    assert Table.objects.get(pk=table.pk).storage == "rows"
    return table


def test_generated_arrays_get_the_document_paths_answer(owner, make_table):
    chooser = random.Random(29)
    checked = kept = 0
    for round_ in range(30):
        value = generated_value(chooser, chooser.choice([1, 2, 5, 20]))
        if round_ % 3 == 0:  # columns that hold, so that "kept" is exercised on every name
            value = [{name: f"{name}{n}" for name in NAMES[:-1]} | {"n": n} for n in range(chooser.randrange(1, 9))]
        table = rows_table(owner, make_table, value, name=f"t{round_}")
        expected = reference(value, NAMES)
        assert records.unique_fields(table.pk, "", NAMES) == expected, value
        checked += 1
        kept += len(expected)
    assert (checked, kept > 60) == (30, True)


@pytest.mark.parametrize(
    ("values", "kept"),
    [
        ([1, 2, 3], True),
        ([1, "1"], False),  # one key as SPEC §8's string
        (["a", "b", "a"], False),
        ([1, 2.0], False),  # a float is no key
        ([1, True], False),
        ([1, None], False),
        ([2**70, 2**70 + 1], True),  # beyond 64 bits: SQLite reads them inexactly, so they are read in Python
        ([2**70, 2**70], False),
        (["é", "e\u0301"], True),
        ([-5, "-5"], False),
    ],
)
def test_the_rule_at_its_edges(owner, make_table, values, kept):
    table = rows_table(owner, make_table, [{"k": v, "other": n} for n, v in enumerate(values)])
    assert records.unique_fields(table.pk, "", ["k"]) == (["k"] if kept else [])


def test_a_record_that_is_no_object_keys_nothing(owner, make_table):
    table = rows_table(owner, make_table, [{"k": 1}, 5, {"k": 2}])
    assert records.unique_fields(table.pk, "", ["k"]) == []


def test_one_statement_checks_the_fields_without_reading_the_records(owner, make_table):
    table = rows_table(owner, make_table, [{"id": n, "sku": f"S{n}", "n": n % 2} for n in range(50)])
    with CaptureQueriesContext(connection) as queries:
        assert records.unique_fields(table.pk, "", ["id", "sku", "n"]) == ["id", "sku"]
    counted = [query["sql"] for query in queries.captured_queries if "COUNT(DISTINCT" in query["sql"]]
    assert len(counted) == 1
    assert not any('SELECT position, "key"' in query["sql"] for query in queries.captured_queries)


def test_a_duplicate_past_the_sample_keys_nothing_in_generate_tools(owner, make_table, monkeypatch):
    """The first SCHEMA_SAMPLE records describe the table; a value repeated after them still takes the field out
    of the key candidates, as over the whole document: "code" (the first by name) repeats at record 40, "sku" does
    not."""
    value = [{"code": f"C{n % 40}", "sku": f"S{n}", "n": n} for n in range(60)]
    table = rows_table(owner, make_table, value)
    monkeypatch.setattr(records, "SCHEMA_SAMPLE", 25)
    generated = generate_tools(owner=owner, table=table, json_path="", writes=True)
    query = next(tool for tool in generated.tools if tool.type == "query_data")
    assert Tool.objects.get(pk=query.pk).metadata["key_field"] == "sku"
    assert _Sample(value, "").key_field == "sku"  # the document path over the whole array
    assert description_drift(Tool.objects.get(pk=query.pk)) is None


def test_no_field_keying_every_record_generates_no_select(owner, make_table, monkeypatch):
    value = [{"sku": f"S{n % 30}", "n": n % 30} for n in range(60)]
    table = rows_table(owner, make_table, value)
    monkeypatch.setattr(records, "SCHEMA_SAMPLE", 25)
    generated = generate_tools(owner=owner, table=table, json_path="", writes=True)
    assert {tool.type for tool in generated.tools} >= {"query_data", "get_all_data"}
    assert not {"select", "update", "delete"} & {tool.type for tool in generated.tools}
    assert any("No field is present in every record with unique values" in note for note in generated.notes)
    assert _Sample(value, "").key_field is None
