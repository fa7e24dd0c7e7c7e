"""What the generator (tools_app.toolsets) writes into a tool and what keeps it current, apart from the generator's
write (services.generate) so that a table's own write (services.tables.table_update) can use it too.

- The generated marker: `metadata.generated.hash` is generated_hash of the text generation gave the tool, so a
  tool whose text no longer has it was edited by hand (generated_edited; regeneration then keeps it).
- The fast-fields sentence (docs/tables-at-scale.md, "Indexes"): the descriptions of `query_data` and
  `get_data_schema` say which fields a table indexes, " Filters and sorts on `status`, `total` are fast
  (indexed); on other fields slower.", right after a fixed text of the type's description (FAST_FIELDS_AFTER:
  "and return its value.", "before writing a query."). When the table's indexed_fields change,
  `fast_fields_refresh` rewrites that sentence, and only it, in the descriptions of the table's tools of those
  types (fast_fields_description), at the first occurrence of that fixed text (what the data contributes to a
  description, field names and example values, comes after it; before it are only the table's name and mount):

  1. Right after it, the sentence in its exact generated form (for any list of fields): replaced by the sentence
     for the new fields, or removed when no field is declared any more.
  2. No sentence there, in a generated tool's description that nobody edited (generated_edited: the table had no
     indexed field when it was generated): the new sentence is put there. Text is added only to text that is
     wholly the generator's.
  3. Anything else is left as it is: a description without the fixed text (the owner wrote or reworded it), a
     sentence the owner reworded or removed from an edited description, a tool the owner made.

  Everything around the sentence is kept byte for byte; a description that would grow over MAX_DESCRIPTION is cut
  as generation cuts (fit_description). A generated tool that was not edited stays not edited (its marker's hash
  follows the new text, so regeneration goes on updating it); an edited one stays edited.
"""

import hashlib
import json
import re
from collections.abc import Collection
from typing import Any

from django.utils import timezone

from tools_app.kernel.limits import MAX_DESCRIPTION
from tools_app.models import Tool
from tools_app.services.locks import lock_rows

__all__ = [
    "FAST_FIELDS_AFTER",
    "GENERATED_FIELDS",
    "fast_fields_description",
    "fast_fields_refresh",
    "fast_fields_sentence",
    "field_ref",
    "fit_description",
    "generated_edited",
    "generated_hash",
    "generated_text",
]

# What generation writes into a tool and the owner may edit: regeneration updates these.
GENERATED_FIELDS = ("description", "output_schema", "examples")

# The tool types whose generated descriptions carry the fast-fields sentence, and the text each puts it after.
FAST_FIELDS_AFTER = {"query_data": "and return its value.", "get_data_schema": "before writing a query."}

_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
_QUOTED = r'"(?:[^"\\]|\\.)*"'  # a JSON string: field_ref's form of any other name
_FIELD = rf"(?:{_IDENTIFIER}|{_QUOTED})"
# The sentence exactly as fast_fields_sentence writes it, for any list of fields (a quoted name cannot end it).
_SENTENCE = re.compile(rf" Filters and sorts on {_FIELD}(?:, {_FIELD})* are fast \(indexed\); on other fields slower\.")


def generated_text(description: str, output_schema: Any, metadata: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "output_schema": output_schema, "examples": metadata.get("examples")}


def generated_hash(description: str, output_schema: Any, metadata: dict[str, Any]) -> str:
    """The hash of a tool's generated text (GENERATED_FIELDS): equal while nobody edited it."""
    text = json.dumps(generated_text(description, output_schema, metadata), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def generated_edited(tool: Tool) -> bool:
    """Whether a generated tool's text was edited since it was generated (False for a tool not generated)."""
    marker = (tool.metadata or {}).get("generated")
    if not isinstance(marker, dict) or "hash" not in marker:
        return False
    return marker["hash"] != generated_hash(tool.description, tool.output_schema, tool.metadata or {})


def field_ref(name: str) -> str:
    """A field name as a JMESPath identifier (quoted when it is not a plain one)."""
    return name if re.fullmatch(_IDENTIFIER, name) else json.dumps(name)


def fit_description(text: str) -> str:
    """`text` within MAX_DESCRIPTION characters, a longer one cut with an ellipsis."""
    return text if len(text) <= MAX_DESCRIPTION else text[: MAX_DESCRIPTION - 1] + "…"


def fast_fields_sentence(indexed_fields: Collection[str]) -> str:
    """The sentence (with its leading space) that says which fields are fast; "" when none is declared."""
    if not indexed_fields:
        return ""
    named = ", ".join(field_ref(name) for name in indexed_fields)
    return f" Filters and sorts on {named} are fast (indexed); on other fields slower."


def fast_fields_description(
    description: str, tool_type: str, indexed_fields: Collection[str], *, generated: bool
) -> str:
    """`description` with its fast-fields sentence for `indexed_fields` (the rule in the module docstring);
    `generated`: the description is the generator's, unedited (metadata.generated, and not generated_edited)."""
    after = FAST_FIELDS_AFTER.get(tool_type)
    at = description.find(after) if after else -1
    if at < 0:
        return description
    at += len(after or "")
    sentence = fast_fields_sentence(indexed_fields)
    found = _SENTENCE.match(description, at)
    if found is None and not (generated and sentence):
        return description
    end = at if found is None else found.end()
    return fit_description(description[:at] + sentence + description[end:])


def fast_fields_refresh(table_id: int, indexed_fields: Collection[str]) -> list[int]:
    """Bring the fast-fields sentence of the table's `query_data` and `get_data_schema` tools in line with
    `indexed_fields` (the module docstring's rule), inside the caller's transaction (the tools locked, in id
    order, as the other tool writes lock them); the ids of the tools whose description changed."""
    ids = lock_rows(Tool.objects.filter(table_id=table_id, type__in=FAST_FIELDS_AFTER))
    changed = []
    now = timezone.now()
    for tool in Tool.objects.filter(pk__in=ids).order_by("pk").only("type", "description", "output_schema", "metadata"):
        metadata: dict[str, Any] = tool.metadata or {}
        marker = metadata.get("generated")
        unedited = isinstance(marker, dict) and not generated_edited(tool)
        description = fast_fields_description(tool.description, tool.type, indexed_fields, generated=unedited)
        if description == tool.description:
            continue
        if isinstance(marker, dict) and unedited:
            rehashed = generated_hash(description, tool.output_schema, metadata)
            metadata = {**metadata, "generated": {**marker, "hash": rehashed}}
        Tool.objects.filter(pk=tool.pk).update(description=description, metadata=metadata, updated_at=now)
        changed.append(tool.pk)
    return changed
