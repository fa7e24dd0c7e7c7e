"""WrittenJSONField: a JSON column that reads back the JSON text as it was written, key order included."""

from typing import Any

from django.db import models


class WrittenJSONField(models.JSONField):
    """A JSONField whose PostgreSQL column is `json`, not `jsonb`.

    `json` keeps the text it is given, so a value reads back with each object's keys in the order they were written,
    as on SQLite (whose JSON column is text); `jsonb` re-orders them (shorter keys first, then bytewise). For values
    written and read whole, never searched inside by the database: a table's snapshot and its history entries
    (docs/history.md), which must give back what was written. The price, on PostgreSQL: no jsonb operators, lookups
    or indexes over the column, and no equality (`json` has no `=`); the text is stored as given (the writers'
    json.dumps), compressed like any large value.
    """

    def db_type(self, connection: Any) -> str | None:
        return "json" if connection.vendor == "postgresql" else super().db_type(connection)

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        if connection.vendor != "postgresql":
            return super().get_db_prep_value(value, connection, prepared)
        # Django binds a JSONField's value as jsonb, which the server would parse (re-ordering its keys) before the
        # column's cast to json: bound as json, the text reaches the column as it is.
        from django.db.backends.postgresql.operations import get_json_dumps
        from psycopg.types.json import Json

        if not prepared:
            value = self.get_prep_value(value)
        return Json(value, dumps=get_json_dumps(self.encoder))

    def select_format(self, compiler: Any, sql: str, params: Any) -> tuple[str, Any]:
        # Read as text and parsed by the field's decoder (from_db_value), as Django reads jsonb; psycopg would
        # otherwise parse a json value itself, without the decoder.
        if compiler.connection.vendor == "postgresql":
            return f"({sql})::text", params
        return super().select_format(compiler, sql, params)
