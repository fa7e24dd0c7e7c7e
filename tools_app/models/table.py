"""Table: a JSON document that tools read and write (SPEC §2.1)."""

from django.core.exceptions import ValidationError
from django.db import models

from ..validators import TableDocumentDecoder, TableDocumentEncoder, validate_json_value, validate_table_depth
from .base import OwnedModel


class Table(OwnedModel):
    """A JSON document that tools read and write. `version` grows by one on every data write.

    `data` is the snapshot at `snapshot_version`, not necessarily the current document: read the document
    through services.table_data (or services.table_document), which applies the change log after it."""

    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    # Issue 12: the encoder refuses a document over TOOLHUB_MAX_TABLE_BYTES on every write; the decoder reads a
    # deep document stored before TOOLHUB_MAX_TABLE_DEPTH existed from anywhere (admin pages included).
    data = models.JSONField(default=dict, blank=True, encoder=TableDocumentEncoder, decoder=TableDocumentDecoder)
    version = models.PositiveBigIntegerField(default=1, editable=False)
    # Issue 14: `data` is the snapshot of the document at this version; the writes since are TableChange entries
    # (the document at `version` is the snapshot with them applied: services.table_data). Compaction moves it.
    snapshot_version = models.PositiveBigIntegerField(default=1, editable=False)
    # About the document's size as JSON text (exact at each snapshot; TOOLHUB_MAX_TABLE_BYTES is checked on it).
    data_bytes = models.PositiveBigIntegerField(default=0, editable=False)

    class Meta:
        ordering = ["name", "id"]
        indexes = [models.Index(fields=["owner", "name"])]

    def __str__(self):
        return self.name

    @classmethod
    def from_db(cls, db, field_names, values):
        """A table loaded with its document holds the CURRENT document (issue 14): the snapshot with the change
        log after it applied (through the process's cache), and says so (snapshot_version = version), so that
        saving it whole writes a consistent snapshot. Reads of `data` anywhere stay right."""
        instance = super().from_db(db, field_names, values)
        loaded = instance.__dict__
        if (
            "data" in loaded
            and "snapshot_version" in loaded
            and loaded.get("version") not in (None, instance.snapshot_version)
        ):
            from ..services.table_log import document  # the log's reader; models load before services

            instance.data = document(instance.pk, instance.version).data
            instance.snapshot_version = instance.version
        return instance

    def clean(self):
        if "data" in self.get_deferred_fields():
            return  # not loaded, so not changed: a rename must not load and re-check the whole document
        if self.data is None:
            raise ValidationError({"data": ValidationError("data must be a JSON value, not null.", code="invalid")})
        try:
            validate_table_depth(self.data)  # first: the checks below recurse
            validate_json_value(self.data)
        except ValidationError as exc:
            raise ValidationError({"data": exc.error_list}) from exc
