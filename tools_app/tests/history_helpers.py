"""What another worker's table write leaves in the database: one change-log entry and version +1."""

from django.db import transaction

from tools_app.models import Table, TableChange


def write_elsewhere(table_id: int, patch: list, inverse: list | None = None) -> int:
    """Append the entry of `patch` and move the version, as a write in another process does; the new version."""
    with transaction.atomic():
        version = Table.objects.select_for_update().filter(pk=table_id).values_list("version", flat=True).get() + 1
        TableChange.objects.create(table_id=table_id, version=version, patch=patch, inverse=inverse or [])
        Table.objects.filter(pk=table_id).update(version=version)
    return version
