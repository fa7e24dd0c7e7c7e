"""EmbeddingVector: the registry's shared cache of sentence vectors."""

from django.db import models


class EmbeddingVector(models.Model):
    """A sentence vector of one text under one embedding model, shared by every worker (SPEC §1).

    Keyed by content, not by tool: the text hash says which text was embedded, so an edited tool gets a
    new row and identical texts (copies, other users' tools) share one. Rows are a cache: any can be
    deleted, and the registry embeds the text again on its next semantic search.
    """

    model_id = models.CharField(max_length=100)
    text_hash = models.CharField(max_length=64, help_text="SHA-256 of the embedded text, hex.")
    vector = models.BinaryField(help_text="float32 values, little-endian.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["model_id", "text_hash"], name="embedding_vector_unique_text")]

    def __str__(self):
        return f"{self.model_id} {self.text_hash[:12]}"
