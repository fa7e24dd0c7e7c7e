"""A table's record collections stored as rows (docs/tables-at-scale.md): TableCollection, TableRecord,
TableRecordLayout and TableRecordBlock.

Not yet read or written by the tools: tools_app.data_access.sql_query answers JMESPath over these rows, and
tools_app.data_access.sql.store writes and reads them (the column names below are what both rely on).
"""

from django.db import models

from tools_app.models.table import Table


class CollectionKind(models.TextChoices):
    ARRAY = "array", "array of records"
    OBJECT = "object", "object of records by key"


class TableCollection(models.Model):
    """The records at one mount of a table (an array, or an object of records by key), stored one per row."""

    table = models.ForeignKey(Table, on_delete=models.CASCADE, related_name="collections")
    mount = models.CharField(max_length=2000, blank=True, help_text="JSON Pointer of the collection; '' = the root.")
    kind = models.CharField(max_length=6, choices=CollectionKind.choices)
    record_count = models.PositiveBigIntegerField(default=0, db_default=0)
    # An array's records are keyed (TableRecord.key) by this field of theirs: select by it is an index lookup.
    key_field = models.CharField(max_length=200, blank=True, default="id", db_default="id")
    # The JSON kinds each top-level field of its records has ever held (tools_app.data_access.sql.kinds), kept by
    # every write of records; compiled queries drop the type checks they make needless. NULL: not known (a
    # collection written before they were kept).
    field_kinds = models.JSONField(null=True, blank=True, editable=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["table", "mount"], name="table_collection_unique_mount")]

    def __str__(self) -> str:
        return f"{self.table_id}:{self.mount or '/'}"


class TableRecordLayout(models.Model):
    """The key order of a record's objects where PostgreSQL's JSONB would not keep it (codec.layout_of), stored
    once per distinct layout of a collection."""

    collection = models.ForeignKey(TableCollection, on_delete=models.CASCADE, related_name="layouts")
    digest = models.CharField(max_length=64)
    layout = models.JSONField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["collection", "digest"], name="table_record_layout_unique_digest")
        ]

    def __str__(self) -> str:
        return f"{self.collection_id}:{self.digest[:12]}"


class TableRecord(models.Model):
    """One record of a collection: its order (`position`, spaced), its key in an object of records, its JSON."""

    collection = models.ForeignKey(TableCollection, on_delete=models.CASCADE, related_name="records")
    position = models.BigIntegerField()
    # Null, not "": "" is a valid key; an array's record without its key field has none.
    key = models.TextField(  # noqa: DJ001
        null=True,
        blank=True,
        help_text="The record's key: its key in an object of records, its key field's value as a string in an array.",
    )
    # JSONB on PostgreSQL, JSON text on SQLite; written as codec.record_text (never through the ORM's encoder,
    # which would let JSONB turn 1e+16 into an integer).
    data = models.JSONField()
    # RESTRICT, not PROTECT: a layout in use is never deleted alone, but goes with its collection, whose records go
    # in the same delete (a table deleted, or laid out again).
    layout = models.ForeignKey(TableRecordLayout, null=True, blank=True, on_delete=models.RESTRICT, related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["collection", "position"], name="table_record_unique_position"),
        ]
        # Not unique: an array's records may share a key (data stored before keys were checked; the first wins).
        indexes = [models.Index(fields=["collection", "key"], name="table_record_key")]

    def __str__(self) -> str:
        return f"{self.collection_id}@{self.position}"


class TableRecordBlock(models.Model):
    """How many records of a collection hold a position in one block of positions (`block` = position //
    store.BLOCK_SPAN): the directory that finds the record at an ordinal (a preview's offset, a page's first
    record) by summing counts, then stepping within one block, instead of skipping every record before it.
    Written by the same statements' transaction as the records (tools_app.data_access.sql.store), so a read's
    snapshot sees counts exact for its rows; a block without records has no row."""

    collection = models.ForeignKey(TableCollection, on_delete=models.CASCADE, related_name="blocks")
    block = models.BigIntegerField()
    record_count = models.BigIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["collection", "block"], name="table_record_block_unique")]

    def __str__(self) -> str:
        return f"{self.collection_id}#{self.block}"
