"""The call log's indexes: every call inserts a row, and each index is one more write of that insert, so the
table keeps none that another index already covers, and every foreign key still has an index to be found by
(a deleted tool, key, instance or user finds its rows without reading the table)."""

import pytest
from django.db import connection

from tools_app.models import CallLog

pytestmark = pytest.mark.django_db


def _indexes() -> dict[str, list[str]]:
    """The call log's indexes in the database: name -> columns, in order (the primary key left out)."""
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, CallLog._meta.db_table)
    return {
        name: info["columns"]
        for name, info in constraints.items()
        if info["index"] and not info["primary_key"] and not info["unique"]
    }


def test_no_index_is_the_start_of_another():
    indexes = _indexes()
    redundant = sorted(
        (name, other)
        for name, columns in indexes.items()
        for other, longer in indexes.items()
        if other != name and len(longer) > len(columns) and longer[: len(columns)] == columns
    )
    assert redundant == []


def test_every_foreign_key_leads_an_index():
    leading = {columns[0] for columns in _indexes().values()}
    foreign_keys = sorted(field.column for field in CallLog._meta.concrete_fields if field.is_relation)
    assert foreign_keys == ["api_key_id", "mcp_instance_id", "owner_id", "tool_id", "user_id"]
    assert [column for column in foreign_keys if column not in leading] == []


def test_the_indexes_are_the_activity_pages_and_one_per_other_foreign_key():
    assert sorted(_indexes().values()) == [
        ["api_key_id"],
        ["created_at", "mcp_instance_id", "tool_name", "status", "error_code", "duration_ms"],
        ["mcp_instance_id"],
        ["owner_id", "created_at", "mcp_instance_id", "tool_name", "status", "error_code", "duration_ms"],
        ["tool_id", "created_at"],
        ["user_id"],
    ]
