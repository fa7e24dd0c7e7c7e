"""Model names quoted for SQL: the one way the statements built once from the models (selectors, services,
execution) name a table's column, so that a renamed field or db_column reaches every hand-written statement."""

from typing import Any

from django.db import connection


def column(model: Any, field: str) -> str:
    """`field`'s column of `model`, quoted for the default connection's engine."""
    return connection.ops.quote_name(model._meta.get_field(field).column)
