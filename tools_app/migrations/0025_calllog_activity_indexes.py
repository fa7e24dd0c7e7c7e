"""The activity page's covering indexes on the call log (tools_app.activity): (owner, created_at, ...) replaces
(owner, -created_at), and (created_at, ...) replaces created_at's own index; the label "API key" of two foreign keys.

Built before the indexes they replace are dropped, and on PostgreSQL with CREATE INDEX CONCURRENTLY (outside a
transaction): the call pipeline keeps recording calls while a large call log is indexed.
"""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class AddIndexOnline(migrations.AddIndex):
    """AddIndex, built CONCURRENTLY on PostgreSQL (writes to the table go on meanwhile)."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        model = to_state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.add_index(model, self.index, concurrently=True)
        else:
            schema_editor.add_index(model, self.index)


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run in a transaction

    dependencies = [
        ("tools_app", "0024_db_defaults"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        AddIndexOnline(
            model_name="calllog",
            index=models.Index(
                fields=["owner", "created_at", "mcp_instance", "tool_name", "status", "error_code", "duration_ms"],
                name="calllog_owner_activity",
            ),
        ),
        AddIndexOnline(
            model_name="calllog",
            index=models.Index(
                fields=["created_at", "mcp_instance", "tool_name", "status", "error_code", "duration_ms"],
                name="calllog_activity",
            ),
        ),
        migrations.RemoveIndex(model_name="calllog", name="mcp_app_cal_owner_i_96717f_idx"),
        migrations.AlterField(
            model_name="calllog",
            name="created_at",
            field=models.DateTimeField(default=django.utils.timezone.now, editable=False),
        ),
        # The label the admin shows: "API key", not Django's "Api key" (no change in the database).
        migrations.AlterField(
            model_name="calllog",
            name="api_key",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="call_logs",
                to="tools_app.apikey",
                verbose_name="API key",
            ),
        ),
        migrations.AlterField(
            model_name="tablechange",
            name="api_key",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="tools_app.apikey",
                verbose_name="API key",
            ),
        ),
    ]
