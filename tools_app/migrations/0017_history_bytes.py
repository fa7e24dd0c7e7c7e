"""The size of each history entry and of each table's history: what the history quotas bound (docs/history.md)."""

import json

from django.db import migrations, models


def measure(apps, schema_editor):
    """Entries written before this migration: their size as services.table_log measures it, and each table's sum."""
    table_change = apps.get_model("tools_app", "TableChange")
    table = apps.get_model("tools_app", "Table")
    totals: dict[int, int] = {}
    rows = table_change.objects.values_list("pk", "table_id", "patch", "inverse", "arguments", "result")
    for pk, table_id, *values in rows.iterator(chunk_size=200):
        size = sum(len(json.dumps(value)) for value in values if value is not None)
        table_change.objects.filter(pk=pk).update(bytes=size)
        totals[table_id] = totals.get(table_id, 0) + size
    for table_id, total in totals.items():
        table.objects.filter(pk=table_id).update(history_bytes=total)


class Migration(migrations.Migration):
    dependencies = [
        ("tools_app", "0016_binding_resource_uri_instance_log_level"),
    ]

    operations = [
        migrations.AddField(
            model_name="table",
            name="history_bytes",
            field=models.PositiveBigIntegerField(default=0, editable=False),
        ),
        migrations.AddField(
            model_name="tablechange",
            name="bytes",
            field=models.PositiveBigIntegerField(default=0, editable=False),
        ),
        migrations.RunPython(measure, migrations.RunPython.noop, elidable=True),
    ]
