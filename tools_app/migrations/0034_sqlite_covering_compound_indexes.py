"""SQLite: each compound record index is built again with its covering columns (indexes.compound_statement).

The indexes are not part of the models' state: tools_app.data_access.sql.indexes makes them from a table's
`indexed_fields`. A compound index made before it carried `position` and its fields' JSON text answers the same,
only without reading a filter's projection from the index; this brings every table that declares two or more
fields in line once (the sync is idempotent: it builds the new index and drops the old). PostgreSQL's compound
indexes are unchanged: nothing to do there.
"""

from django.db import migrations

from tools_app.data_access.sql.indexes import sync_indexes


def covering_compound_indexes(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "sqlite":
        return
    table_model = apps.get_model("tools_app", "Table")
    collection_model = apps.get_model("tools_app", "TableCollection")
    records_table = apps.get_model("tools_app", "TableRecord")._meta.db_table
    for table_id, fields in table_model.objects.values_list("id", "indexed_fields").iterator():
        if not isinstance(fields, list) or len(fields) < 2:
            continue
        collection_ids = list(collection_model.objects.filter(table_id=table_id).values_list("id", flat=True))
        if not collection_ids:
            continue
        with connection.cursor() as cursor:
            sync_indexes(cursor, dialect="sqlite", records_table=records_table, collection_ids=collection_ids,
                         fields=fields, in_transaction=True)  # fmt: skip


class Migration(migrations.Migration):
    dependencies = [
        ("tools_app", "0033_history_written_json"),
    ]

    operations = [
        migrations.RunPython(covering_compound_indexes, migrations.RunPython.noop),
    ]
