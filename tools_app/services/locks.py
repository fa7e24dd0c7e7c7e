"""Row locks shared by the services and the call recorder (PostgreSQL; SQLite runs writers one at a time)."""

from django.db import connections
from django.db.models import QuerySet


def lock_rows(rows: QuerySet) -> list[int]:
    """Lock `rows` for the rest of the transaction, in id order (a no-op on SQLite, whose IMMEDIATE
    transactions already run one at a time); return their ids."""
    return list(rows.select_for_update().order_by("pk").values_list("pk", flat=True))


def lock_rows_no_key(rows: QuerySet) -> list[int]:
    """lock_rows, FOR NO KEY UPDATE: writers of the rows queue, foreign-key checks (KEY SHARE) do not wait."""
    return list(rows.select_for_update(no_key=True).order_by("pk").values_list("pk", flat=True))


def key_share(rows: QuerySet) -> list[tuple]:
    """The rows of a `values_list()` queryset (tuples), locked FOR KEY SHARE on PostgreSQL until the
    transaction ends: the lock a foreign-key check takes. It waits for a delete or a key change in progress
    (FOR UPDATE) and keeps one from starting, but not for updates of other columns. Django's
    select_for_update() has no such mode, hence the SQL. SQLite: a plain read (its IMMEDIATE transactions
    already run one at a time)."""
    connection = connections[rows.db]
    if connection.vendor != "postgresql":
        return list(rows)
    sql, params = rows.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"{sql} FOR KEY SHARE", params)
        return cursor.fetchall()
