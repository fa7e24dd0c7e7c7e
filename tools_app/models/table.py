"""Table: a JSON document that tools read and write (SPEC §2.1), stored as a snapshot and a change log."""

from collections.abc import Callable
from typing import Any, ClassVar

from django.core.exceptions import ValidationError
from django.db import models

from tools_app.models.base import OwnedModel
from tools_app.models.fields import WrittenJSONField
from tools_app.validators import (
    TableDocumentDecoder,
    TableDocumentEncoder,
    validate_indexed_fields,
    validate_json_value,
    validate_redact_fields,
    validate_table_depth,
)

_UNSET: Any = object()


class TableStorage(models.TextChoices):
    """Where a table's record collections live (docs/tables-at-scale.md): in its document, or one record per row
    (TableCollection / TableRecord), the document keeping an empty container at each collection's mount."""

    DOCUMENT = "document", "one JSON document"
    ROWS = "rows", "record collections as rows"


class Table(OwnedModel):
    """A JSON document that tools read and write. `version` grows by one on every data write.

    The row holds only the table's small columns: a write changes `version`, `data_bytes` and `updated_at` and
    appends one TableChange, never rewriting the document (on SQLite an UPDATE rewrites the whole row, a large
    document included). The document is TableSnapshot (the snapshot at its version) plus the entries after it;
    `data` reads it through the process's cache (services.table_log.document) and, once set, is written as the
    table's snapshot by save() (services.table_create; a loaded table's document is never written back).
    """

    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    version = models.PositiveBigIntegerField(default=1, editable=False)
    # The document's size as JSON text: exact when the document is written whole, estimated between;
    # TOOLHUB_MAX_TABLE_BYTES is checked on it.
    data_bytes = models.PositiveBigIntegerField(default=0, editable=False)
    # The sum of the `bytes` of the table's history entries (TableChange): kept by services.table_log as entries
    # are appended and pruned, and bounded per table and per owner (docs/history.md, "Quotas").
    history_bytes = models.PositiveBigIntegerField(default=0, db_default=0, editable=False)
    # Moves once, document -> rows (manage.py tables_to_rows); never back.
    storage = models.CharField(
        max_length=8,
        choices=TableStorage.choices,
        default=TableStorage.DOCUMENT,
        db_default=TableStorage.DOCUMENT,
        editable=False,
    )
    # The version at which the table moved to rows: history entries up to it hold document patches.
    rows_since_version = models.PositiveBigIntegerField(null=True, blank=True, editable=False)
    # Record field names whose values the call log never keeps (the call-detail pipeline, docs/call-log.md).
    redact_fields = models.JSONField(
        default=list,
        db_default=[],  # in the database too: the previous release still writes tables during the migration
        blank=True,
        validators=[validate_redact_fields],
        help_text="Record field names whose values never appear in the call log: anywhere in a call's arguments "
        'or result excerpt, at any depth, the value of such a field is kept as "[redacted]". Credentials '
        "(passwords, tokens, API keys, ...) are always redacted.",
    )

    # Record fields the engine keeps expression indexes on, per collection of the table
    # (tools_app.services.table_indexes; docs/tables-at-scale.md, "Indexes").
    indexed_fields = models.JSONField(
        default=list,
        db_default=[],
        blank=True,
        help_text=(
            "Record field names whose filters and sorts the database answers from an index. Those filtered on"
            " together in one index too, in this order: list the fields tested with == first."
        ),
    )

    # (table id, version) -> the document: services.table_log.document, plugged in by the services when they
    # load (tools_app.apps imports them once the models are ready). The models sit below the services, so they
    # name the reader's shape here and never import it.
    document_reader: ClassVar[Callable[[int, int], Any] | None] = None
    # The same for a table stored as rows: its document with the records spliced in (bounded).
    rows_reader: ClassVar[Callable[[int, int], Any] | None] = None

    class Meta:
        ordering = ["name", "id"]
        indexes = [models.Index(fields=["owner", "name"])]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._document = _UNSET
        self._document_pending = False
        super().__init__(*args, **kwargs)

    def __str__(self):
        return self.name

    def refresh_from_db(self, using: Any = None, fields: Any = None, from_queryset: Any = None) -> None:
        """Reload the row; the document is read again (through the cache) on its next use."""
        wanted = None if fields is None else [name for name in fields if name != "data"]
        if wanted is None or wanted:
            super().refresh_from_db(using=using, fields=wanted, from_queryset=from_queryset)
        if fields is None or "data" in fields:
            self._document = _UNSET
            self._document_pending = False

    @property
    def data(self) -> Any:
        """The current document (SPEC §2.1 `data`): set on this object, else read through the cache and the log."""
        if self._document is _UNSET:
            if self.pk is None:
                return {}
            if Table.document_reader is None:
                raise RuntimeError("No table document reader: the services plug it in when the app is ready.")
            reader = Table.rows_reader if self.storage == TableStorage.ROWS else None
            self._document = (reader or Table.document_reader)(self.pk, self.version)
            self._document_pending = False
        return self._document

    @data.setter
    def data(self, value: Any) -> None:
        self._document = value
        self._document_pending = True

    def clean(self):
        # Here, not as the field's validator: Django skips validators for "empty" values ({}, ""), which are no list.
        try:
            validate_indexed_fields(self.indexed_fields)
        except ValidationError as exc:
            raise ValidationError({"indexed_fields": exc.error_list}) from exc
        if not self._document_pending:
            return  # not set, so not changed: a rename must not load and re-check the whole document
        if self._document is None:
            raise ValidationError({"data": ValidationError("data must be a JSON value, not null.", code="invalid")})
        try:
            validate_table_depth(self._document)  # first: the checks below recurse
            validate_json_value(self._document)
            self.data_bytes = len(TableDocumentEncoder().encode(self._document))  # refused over the size limit
        except ValidationError as exc:
            raise ValidationError({"data": exc.error_list}) from exc

    def save(self, *args: Any, **kwargs: Any) -> None:
        """Save the row; a document set on this object (a new table, a fixture) becomes its snapshot at its
        version. Data writes to an existing table go through the services, which append to the log."""
        pending = self._document_pending and kwargs.get("update_fields") is None
        if pending and self._document is None:
            raise ValidationError({"data": ["data must be a JSON value, not null."]})
        if pending and not self.data_bytes:
            self.data_bytes = len(TableDocumentEncoder().encode(self._document))
        super().save(*args, **kwargs)
        if pending:
            TableSnapshot.objects.update_or_create(
                table=self, defaults={"version": self.version, "data": self._document}
            )
            self._document_pending = False


class TableSnapshot(models.Model):
    """A table's document at `version`, written when the table is created or written whole, and by compaction
    (services.table_log.table_compact); the log entries after `version` complete it."""

    table = models.OneToOneField(Table, on_delete=models.CASCADE, primary_key=True, related_name="snapshot")
    version = models.PositiveBigIntegerField(default=1)
    # The encoder refuses a document over TOOLHUB_MAX_TABLE_BYTES; the decoder reads a deep document
    # stored before TOOLHUB_MAX_TABLE_DEPTH existed from anywhere. The text is kept as written (WrittenJSONField),
    # so the document reads back in its written key order on every engine.
    data = WrittenJSONField(default=dict, blank=True, encoder=TableDocumentEncoder, decoder=TableDocumentDecoder)

    def __str__(self) -> str:
        return f"{self.table_id} at v{self.version}"
