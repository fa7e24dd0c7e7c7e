"""manage.py sync_table_indexes: builds the record indexes declared fields need and a failed build left missing,
drops those no declared field needs, and names what it did; bad arguments change nothing."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from tools_app import services
from tools_app.data_access.sql.indexes import compound_statement, index_statements
from tools_app.data_access.sql.store import field_kinds
from tools_app.models import TableRecord
from tools_app.tests.sql_differential import dialect, record_indexes, store, two_indexed_tables

# PostgreSQL builds CONCURRENTLY: outside a transaction. No index is left from an earlier test: the sets compared.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_leftover_record_indexes")]

RECORDS = TableRecord._meta.db_table


def _wanted(collection_id: int, *fields: str) -> set[str]:
    with connection.cursor() as cursor:
        known = field_kinds(cursor, collection_id)
    names = set(compound_statement(dialect=dialect(), records_table=RECORDS, collection_id=collection_id,
                                   fields=fields, known=known))  # fmt: skip
    for name in fields:
        names |= set(index_statements(dialect=dialect(), records_table=RECORDS, collection_id=collection_id,
                                      field_name=name))  # fmt: skip
    return names


def _run(*args: str) -> str:
    out = StringIO()
    call_command("sync_table_indexes", *args, stdout=out)
    return out.getvalue()


def test_it_builds_what_is_missing_and_drops_what_no_field_needs(owner, make_table):
    """Declared `status, total` on one table and `total` on another; one index of the first dropped behind the
    services' back (a failed build) and a stray one of the second's collection made: --all builds the first
    again, drops the stray one, and a second run changes nothing."""
    # given
    orders, first, other, second = two_indexed_tables(owner, make_table, 20)
    wanted = _wanted(first.collection_id, "status", "total") | _wanted(second.collection_id, "total")
    lost = sorted(_wanted(first.collection_id, "status"))[0]
    stray = sorted(index_statements(dialect=dialect(), records_table=RECORDS, collection_id=second.collection_id,
                                    field_name="status").items())[0]  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(f'DROP INDEX "{lost}"')
        cursor.execute(stray[1], ())
    before = record_indexes()

    # when
    output = _run("--all")
    again = _run("--all")

    # then
    assert before == wanted - {lost} | {stray[0]}
    assert record_indexes() == wanted
    assert output.splitlines() == [
        f"table {orders.pk}: 1 created, 0 dropped",
        f"table {other.pk}: 0 created, 1 dropped",
        "2 table(s) in line with their indexed fields.",
    ]
    assert again.splitlines() == [
        f"table {orders.pk}: 0 created, 0 dropped",
        f"table {other.pk}: 0 created, 0 dropped",
        "2 table(s) in line with their indexed fields.",
    ]


def test_one_table_or_a_refusal_that_changes_nothing(owner, make_table):
    """--table syncs the named table only; a table that does not exist, or no argument, is refused before any
    table is synced."""
    # given
    records = [{"id": index, "total": index} for index in range(5)]
    orders = make_table(owner, name="orders", data=[], storage="document")
    collection = store(orders, "/orders", records)
    services.table_update(table=orders, indexed_fields=["total"])
    (lost,) = sorted(_wanted(collection.collection_id, "total"))[:1]
    with connection.cursor() as cursor:
        cursor.execute(f'DROP INDEX "{lost}"')
    before = record_indexes()

    # when
    with pytest.raises(CommandError, match=f"Table {orders.pk + 100} does not exist."):
        _run("--table", str(orders.pk), "--table", str(orders.pk + 100))
    with pytest.raises(CommandError, match="Name a table with --table ID, or give --all."):
        _run()
    refused = record_indexes()
    output = _run("--table", str(orders.pk))

    # then
    assert refused == before
    assert lost not in refused
    assert output.splitlines() == [
        f"table {orders.pk}: 1 created, 0 dropped",
        "1 table(s) in line with their indexed fields.",
    ]
    assert record_indexes() == before | {lost}
