"""Migration 0004: lone surrogates stored before input refused them become U+FFFD (SQLite could store them)."""

import importlib

import pytest
from django.apps import apps
from django.db import connection

from tools_app.models import Table, Tool

pytestmark = pytest.mark.django_db

migration = importlib.import_module("tools_app.migrations.0004_replace_stored_lone_surrogates")


@pytest.fixture
def sqlite_only():
    if connection.vendor != "sqlite":
        pytest.skip("Only SQLite ever stored lone surrogates in JSON (PostgreSQL's jsonb refuses them).")


def test_stored_surrogates_are_replaced_and_the_table_version_bumped(sqlite_only, owner, table, make_tool):
    """Strings and keys, nested, in table data and tool JSON fields; clean rows keep their values and version."""
    # given: written past validation, as the API could before input refused surrogates
    clean = Table.objects.create(owner=owner, name="clean", data=[{"id": 1, "note": "ok é"}])
    Table.objects.filter(pk=table.pk).update(data=[{"id": 1, "note": "a\ud800b", "k\udfff": ["\udc00"]}])
    tool = make_tool(owner, table, type="get_all_data", name="reader")
    Tool.objects.filter(pk=tool.pk).update(metadata={"tags": ["x\ud83d"]}, output_schema={"title": "\ud800"})
    other = make_tool(owner, table, type="get_all_data", name="other")
    before = {t.pk: (t.input_schema, t.output_schema, t.metadata) for t in Tool.objects.all()}
    # when
    migration.replace_surrogates(apps, None)
    # then
    table.refresh_from_db()
    assert (table.data, table.version) == ([{"id": 1, "note": "a\ufffdb", "k\ufffd": ["\ufffd"]}], 2)
    clean.refresh_from_db()
    assert (clean.data, clean.version) == ([{"id": 1, "note": "ok é"}], 1)
    tool.refresh_from_db()
    assert (tool.metadata, tool.output_schema, tool.input_schema) == (
        {"tags": ["x\ufffd"]},
        {"title": "\ufffd"},
        before[tool.pk][0],
    )
    other.refresh_from_db()
    assert (other.input_schema, other.output_schema, other.metadata) == before[other.pk]
