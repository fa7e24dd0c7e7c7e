"""The call log's foreign keys `owner` and `tool` lose their single-column indexes: the activity index
(owner, created_at, ...) and (tool, -created_at) start with them and serve the same lookups, and each index
is one more write on every call's insert.

Only the indexes are dropped (by their names as the database reports them), not the fields altered: Django's
AlterField would drop and re-create the foreign key constraints (a check of every row on PostgreSQL) and
rebuild the whole table on SQLite. On PostgreSQL the drop is CONCURRENTLY (outside a transaction), so calls go
on being recorded meanwhile.
"""

from django.conf import settings
from django.db import migrations, models


class DropSingleColumnIndex(migrations.operations.base.Operation):
    """Drop the index of `field_name`'s column alone (the one Django makes for a foreign key); the state's
    change is the AlterField next to it."""

    reduces_to_sql = False
    reversible = True

    def __init__(self, model_name: str, field_name: str) -> None:
        self.model_name, self.field_name = model_name, field_name

    def deconstruct(self):
        return self.__class__.__name__, [], {"model_name": self.model_name, "field_name": self.field_name}

    def state_forwards(self, app_label, state):
        pass

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        model = from_state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return
        column = model._meta.get_field(self.field_name).column
        concurrently = " CONCURRENTLY" if schema_editor.connection.vendor == "postgresql" else ""
        for name in schema_editor._constraint_names(model, [column], index=True, unique=False, primary_key=False):
            schema_editor.execute(f"DROP INDEX{concurrently} IF EXISTS {schema_editor.quote_name(name)}")

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        model = to_state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return
        schema_editor.execute(schema_editor._create_index_sql(model, fields=[model._meta.get_field(self.field_name)]))

    def describe(self):
        return f"Drop the index of {self.model_name}.{self.field_name} alone"


class Migration(migrations.Migration):
    atomic = False  # DROP INDEX CONCURRENTLY cannot run in a transaction

    dependencies = [
        ("tools_app", "0026_tablecollection_field_kinds"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                DropSingleColumnIndex(model_name="calllog", field_name="owner"),
                DropSingleColumnIndex(model_name="calllog", field_name="tool"),
            ],
            state_operations=[
                migrations.AlterField(
                    model_name="calllog",
                    name="owner",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=models.deletion.CASCADE,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                migrations.AlterField(
                    model_name="calllog",
                    name="tool",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=models.deletion.SET_NULL,
                        related_name="call_logs",
                        to="tools_app.tool",
                    ),
                ),
            ],
        ),
    ]
