"""A table's snapshot and its history entries keep their JSON text as written (WrittenJSONField): on PostgreSQL
their columns become `json`, which keeps the text and its key order, instead of `jsonb`, which re-orders keys.

On PostgreSQL each table is altered in one statement (one rewrite of its rows, not one per column). The values
already stored come over in jsonb's key order, which is lost. On SQLite the columns are text already and keep
their type: only the state changes (Django's AlterField would rebuild both tables for a new field class).
"""

from django.db import migrations

import tools_app.models.fields
import tools_app.validators

COLUMNS = {
    "tablechange": ("patch", "inverse", "arguments", "result"),
    "tablesnapshot": ("data",),
}


def _retype(apps, schema_editor, to: str) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    quote = schema_editor.quote_name
    for model_name, field_names in COLUMNS.items():
        model = apps.get_model("tools_app", model_name)
        columns = [model._meta.get_field(name).column for name in field_names]
        changes = ", ".join(f"ALTER COLUMN {quote(column)} TYPE {to} USING {quote(column)}::{to}" for column in columns)
        schema_editor.execute(f"ALTER TABLE {quote(model._meta.db_table)} {changes}")


def to_json(apps, schema_editor):
    _retype(apps, schema_editor, "json")


def to_jsonb(apps, schema_editor):
    _retype(apps, schema_editor, "jsonb")


class Migration(migrations.Migration):
    dependencies = [
        ("tools_app", "0032_indexed_fields_order"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(to_json, to_jsonb)],
            state_operations=[
                migrations.AlterField(
                    model_name="tablechange",
                    name="arguments",
                    field=tools_app.models.fields.WrittenJSONField(blank=True, null=True),
                ),
                migrations.AlterField(
                    model_name="tablechange",
                    name="inverse",
                    field=tools_app.models.fields.WrittenJSONField(
                        help_text="RFC 6902 JSON Patch from version back to version - 1."
                    ),
                ),
                migrations.AlterField(
                    model_name="tablechange",
                    name="patch",
                    field=tools_app.models.fields.WrittenJSONField(
                        help_text="RFC 6902 JSON Patch from version - 1 to version."
                    ),
                ),
                migrations.AlterField(
                    model_name="tablechange",
                    name="result",
                    field=tools_app.models.fields.WrittenJSONField(blank=True, null=True),
                ),
                migrations.AlterField(
                    model_name="tablesnapshot",
                    name="data",
                    field=tools_app.models.fields.WrittenJSONField(
                        blank=True,
                        decoder=tools_app.validators.TableDocumentDecoder,
                        default=dict,
                        encoder=tools_app.validators.TableDocumentEncoder,
                    ),
                ),
            ],
        ),
    ]
