"""Bring tables' record indexes in line with their declared `indexed_fields` (docs/tables-at-scale.md, "Indexes").

    manage.py sync_table_indexes --table 12      # one table
    manage.py sync_table_indexes --all           # every table that declares fields or still has record indexes

What services.table_indexes.sync_table_indexes does after each change of a table's fields or collections, run now:
it builds what a failed or interrupted build left missing (or invalid, on PostgreSQL) and drops what no declared
field needs. Idempotent; on PostgreSQL the builds run CONCURRENTLY (writes go on). A build that fails is listed and
the command exits with an error once every table was tried.
"""

from django.core.management.base import BaseCommand, CommandError

from tools_app.models import Table
from tools_app.services.table_indexes import indexed_table_ids, sync_table_indexes


class Command(BaseCommand):
    help = "Build the record indexes tables' indexed_fields need, and drop the others (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("--table", type=int, action="append", default=[], help="A table id (repeatable).")
        parser.add_argument(
            "--all", action="store_true", help="Every table that declares indexed fields or has record indexes."
        )

    def handle(self, *args, **options):
        ids = list(dict.fromkeys(options["table"]))
        if not ids and not options["all"]:
            raise CommandError("Name a table with --table ID, or give --all.")
        missing = sorted(set(ids) - set(Table.objects.filter(pk__in=ids).values_list("pk", flat=True)))
        if missing:
            raise CommandError(f"Table {missing[0]} does not exist.")
        if options["all"]:
            ids += [table_id for table_id in indexed_table_ids() if table_id not in ids]
        failed = 0
        for table_id in ids:
            result = sync_table_indexes(table_id)
            failed += len(result.failed)
            line = f"table {table_id}: {len(result.created)} created, {len(result.dropped)} dropped"
            if result.failed:
                line += ", failed: " + "; ".join(f"{name}: {message}" for name, message in result.failed.items())
            self.stdout.write(line)
        if failed:
            raise CommandError(f"{failed} index build(s) failed; the queries answer the same without them (slower).")
        self.stdout.write(self.style.SUCCESS(f"{len(ids)} table(s) in line with their indexed fields."))
