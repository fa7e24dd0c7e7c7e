"""Migration 0004: lone surrogates stored before input refused them become U+FFFD (SQLite could store them).

The migration ran on the schema of its time (Table.data a column; migration 0013 moved the document into
TableSnapshot), so the test migrates its database back to 0004's parent, writes rows with the models of then, runs
the migration's function and migrates forward again: 0013 carries the cleaned documents into the snapshots.
"""

import importlib

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

migration = importlib.import_module("tools_app.migrations.0004_replace_stored_lone_surrogates")
BEFORE = ("tools_app", "0003_json_path_help_text")
AFTER = ("tools_app", "0004_replace_stored_lone_surrogates")


@pytest.fixture
def sqlite_only():
    if connection.vendor != "sqlite":
        pytest.skip("Only SQLite ever stored lone surrogates in JSON (PostgreSQL's jsonb refuses them).")


@pytest.fixture
def old_schema(sqlite_only):
    """The database at 0004's parent; migrated forward to the latest state at the end."""
    executor = MigrationExecutor(connection)
    executor.migrate([BEFORE])
    yield executor.loader.project_state([BEFORE]).apps
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


def test_stored_surrogates_are_replaced_and_the_table_version_bumped(old_schema, owner):
    """Strings and keys, nested, in table data and tool JSON fields; clean rows keep their values and version."""
    Table = old_schema.get_model("tools_app", "Table")
    Tool = old_schema.get_model("tools_app", "Tool")
    # given: written past validation, as the API could before input refused surrogates
    table = Table.objects.create(
        owner_id=owner.pk, name="dirty", data=[{"id": 1, "note": "a\ud800b", "k\udfff": ["\udc00"]}]
    )
    clean = Table.objects.create(owner_id=owner.pk, name="clean", data=[{"id": 1, "note": "ok é"}])
    common = {"owner_id": owner.pk, "table_id": table.pk, "type": "get_all_data", "description": "Reads."}
    tool = Tool.objects.create(
        name="reader", metadata={"tags": ["x\ud83d"]}, output_schema={"title": "\ud800"}, **common
    )
    other = Tool.objects.create(name="other", metadata={"tags": ["fine"]}, **common)
    before = {t.pk: (t.input_schema, t.output_schema, t.metadata) for t in Tool.objects.all()}
    # when
    migration.replace_surrogates(old_schema, None)
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
