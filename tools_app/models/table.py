"""Table: a JSON document that tools read and write (SPEC §2.1)."""

from django.core.exceptions import ValidationError
from django.db import models

from ..validators import TableDocumentDecoder, TableDocumentEncoder, validate_json_value, validate_table_depth
from .base import OwnedModel


class Table(OwnedModel):
    """A JSON document that tools read and write. `version` grows by one on every data write."""

    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    # Issue 12: the encoder refuses a document over TOOLHUB_MAX_TABLE_BYTES on every write; the decoder reads a
    # deep document stored before TOOLHUB_MAX_TABLE_DEPTH existed from anywhere (admin pages included).
    data = models.JSONField(default=dict, blank=True, encoder=TableDocumentEncoder, decoder=TableDocumentDecoder)
    version = models.PositiveBigIntegerField(default=1, editable=False)

    class Meta:
        ordering = ["name", "id"]
        indexes = [models.Index(fields=["owner", "name"])]

    def __str__(self):
        return self.name

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
