"""Declarative setup: an owner's tables, tools, instances, bindings and prompts as one document, and its apply.

- document.py: the document's structure (SETUP_SCHEMA), reading and checking one, JSON/YAML text
- export.py: setup_export
- apply.py: setup_plan and setup_apply (Change)

`setup_export` writes the document; `setup_plan` says what applying one would change; `setup_apply` makes the
owner's setup what the document says, all or nothing, through the services (full_clean, locks, the change
guard), and answers the same changes as the plan. Applying a document twice changes nothing the second time.

The document (docs/setup.md), a JSON object (YAML is the same object):

    {"toolhub_setup": 1, "scope": "owner" | {"instance": "<slug>"},
     "tables": [{"name", "description", "data"?}],
     "tools": [{"name", "type", "table": "<table name>" | null, "json_path", "description", "alias",
                "input_schema", "output_schema"?, "metadata", "redact_arguments"?}],
     "instances": [{"slug", "name", ..., "bindings": [{"tool": "<tool name>", "enabled", "name_override",
                    "description_override", "resource_uri"}], "prompts": [{"name", ...}]}]}

Identities are names, never database ids: a table and a tool by their name (unique within the document and among
the owner's tables and tools it names), an instance by its slug, a binding by its instance and tool, a prompt by
its instance and name (ignoring case). API keys are never part of it. A table without `data` keeps its data; with
it, the data is written (a data write, with its history entry) when it differs.

Scope: "owner" (a whole owner's setup) deletes what the document does not name: tables, tools, instances, and the
bindings and prompts of the instances it names. {"instance": slug} (one instance with what it uses) deletes only
that instance's bindings and prompts the document does not name; its tables and tools are created or updated,
never deleted.

A bad document is a ValidationError naming the field by its path (`tools.2.type`,
`instances.0.bindings.1.tool`); nothing is written. Deletes and breaking changes of what is in use are IN_USE
(services.guard) unless `force`.
"""

from tools_app.services.setup.apply import Change, setup_apply, setup_plan
from tools_app.services.setup.document import (
    SETUP_SCHEMA,
    SETUP_VERSION,
    setup_document_dump,
    setup_document_load,
    setup_validate,
)
from tools_app.services.setup.export import setup_export

__all__ = [
    "SETUP_SCHEMA",
    "SETUP_VERSION",
    "Change",
    "setup_apply",
    "setup_document_dump",
    "setup_document_load",
    "setup_export",
    "setup_plan",
    "setup_validate",
]
