"""Move tables' record collections into rows (docs/tables-at-scale.md, "Migration of existing tables").

    manage.py tables_to_rows --table 12      # one table
    manage.py tables_to_rows --all           # every table still stored as a document

One table per transaction, under its row lock; a table already moved is skipped, so an interrupted run is
resumed by running it again. Each moved table records the version at which it moved (rows_since_version).
`--all` with no table left to move succeeds ("0 moved"), so a start script or an upgrade runs it every time. A table
in which nothing is a collection (a scalar root) stays a document, with a line saying so.
"""

from django.core.management.base import BaseCommand, CommandError

from tools_app.execution import records
from tools_app.models import Table, TableStorage

NO_COLLECTION = "no collection in it: no array or object at its root or its tools' mounts"


class Command(BaseCommand):
    help = "Store tables' record collections as rows (one table per transaction; resumable)."

    def add_arguments(self, parser):
        parser.add_argument("--table", type=int, action="append", default=[], help="A table id (repeatable).")
        parser.add_argument("--all", action="store_true", help="Every table still stored as a document.")

    def handle(self, *args, **options):
        ids = list(options["table"])
        if options["all"]:
            ids += list(Table.objects.filter(storage=TableStorage.DOCUMENT).order_by("id").values_list("id", flat=True))
        if not ids and not options["all"]:
            raise CommandError("Name a table with --table ID, or give --all.")
        moved = skipped = kept = 0
        for table_id in dict.fromkeys(ids):
            try:
                changed = records.table_to_rows(table_id)
            except Table.DoesNotExist as exc:
                raise CommandError(f"Table {table_id} does not exist.") from exc
            if changed is None:
                kept += 1
                self.stdout.write(f"table {table_id}: kept as a document ({NO_COLLECTION})")
                continue
            moved += changed
            skipped += not changed
            self.stdout.write(f"table {table_id}: {'moved to rows' if changed else 'already rows'}")
        summary = f"{moved} moved, {skipped} already stored as rows"
        summary += f", {kept} kept as documents (no collection)." if kept else "."
        self.stdout.write(self.style.SUCCESS(summary))
