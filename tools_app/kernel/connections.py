"""Giving a request's database connection back while it waits on something that needs none.

A password hash, an outbound fetch or a long wait must not hold a pooled connection: otherwise a burst of
requests that are going to fail (bad logins, slow client metadata documents) drains the pool for everyone
(docs/auth.md). With PostgreSQL and psycopg's pool, `close()` returns the connection to the pool and the next
query takes one again. SQLite has no pool (and closing a test's in-memory database would lose it): left alone.
A connection inside a transaction (`atomic`) belongs to its caller and is kept.
"""

from django.db import connections


def release_connections() -> None:
    """Give this thread's PostgreSQL connections back to the pool, except one inside a transaction."""
    for connection in connections.all(initialized_only=True):
        if connection.vendor == "postgresql" and connection.connection is not None and not connection.in_atomic_block:
            connection.close()
