"""Every write of the domain goes through here: full_clean(), locks, counters (HackSoft's services).

Callers: the admin, the API, the MCP endpoint, management commands. Nothing here knows about
requests, serializers or MCP. What must hold under concurrency is decided with row locks
(select_for_update on PostgreSQL; IMMEDIATE transactions on SQLite, see settings) and database
constraints, never by a pre-check alone.

- tables.py: tables and tools (create, update, delete)
- table_log.py: the table write path, its change log and audit, cached reads, versions, restore, compaction
- instances.py: MCP instances, bindings and API keys
- prompts.py: the prompts of an MCP instance
- locks.py: the row-lock helpers both use
- tokens.py: API tokens (issue, revoke); revocation that follows the user (password, deactivation, log out everywhere)
- history.py: the admin history (LogEntry) of writes made outside the admin
- imports.py: a table from a JSON, CSV or NDJSON file
- generate.py: a planned set of tools (tools_app.toolsets) created and bound all or nothing
- call_log.py: the call log's retention and each owner's storage bound
- refusals.py: requests refused before the pipeline (rate limits), counted for the owner's activity page
- guard.py: the change guard (IN_USE unless confirmed), on the selector tools_app.selectors.usage_of
- setup.py: an owner's setup as one document: export, plan, apply (all or nothing)
"""

from tools_app.services.call_log import CallLogUpkeep, call_log_prune, call_log_trim
from tools_app.services.generate import tool_set_create
from tools_app.services.history import history_record
from tools_app.services.imports import (
    IMPORT_FORMATS,
    ImportedTable,
    import_format,
    import_slots,
    parse_table_file,
    table_import,
)
from tools_app.services.instances import (
    BINDING_FIELDS,
    INSTANCE_FIELDS,
    api_key_delete,
    api_key_delete_many,
    api_key_issue,
    api_key_revoke,
    binding_create,
    binding_create_many,
    binding_delete,
    binding_delete_many,
    binding_update,
    instance_create,
    instance_delete,
    instance_delete_many,
    instance_update,
)
from tools_app.services.locks import key_share, lock_rows
from tools_app.services.prompts import PROMPT_FIELDS, prompt_create, prompt_delete, prompt_update
from tools_app.services.refusals import refusals, refusals_prune
from tools_app.services.setup import setup_apply, setup_export, setup_plan, setup_validate
from tools_app.services.table_log import (
    SafeWrite,
    WriteAudit,
    Written,
    oldest_version,
    table_compact,
    table_data,
    table_data_sampled,
    table_document,
    table_head,
    table_prune,
    table_restore,
    table_unique_fields,
    table_version_data,
    table_write,
    write_audit,
)
from tools_app.services.tables import (
    TOOL_FIELDS,
    table_create,
    table_delete,
    table_delete_many,
    table_derived,
    table_update,
    tool_create,
    tool_delete,
    tool_delete_many,
    tool_update,
    tool_use_record,
)
from tools_app.services.tokens import (
    api_token_issue,
    api_token_revoke,
    api_token_ttl,
    user_credentials_revoked,
    user_credentials_watch,
    user_sign_out_everywhere,
)

__all__ = [
    "CallLogUpkeep",
    "call_log_prune",
    "call_log_trim",
    "refusals",
    "refusals_prune",
    "BINDING_FIELDS",
    "IMPORT_FORMATS",
    "INSTANCE_FIELDS",
    "PROMPT_FIELDS",
    "SafeWrite",
    "WriteAudit",
    "Written",
    "oldest_version",
    "table_compact",
    "table_prune",
    "table_restore",
    "table_version_data",
    "write_audit",
    "TOOL_FIELDS",
    "api_key_delete",
    "api_key_delete_many",
    "api_key_issue",
    "api_key_revoke",
    "api_token_issue",
    "api_token_revoke",
    "api_token_ttl",
    "user_credentials_revoked",
    "user_credentials_watch",
    "user_sign_out_everywhere",
    "binding_create",
    "binding_create_many",
    "binding_delete",
    "binding_delete_many",
    "binding_update",
    "instance_create",
    "instance_delete",
    "instance_delete_many",
    "history_record",
    "import_format",
    "parse_table_file",
    "import_slots",
    "ImportedTable",
    "prompt_create",
    "prompt_delete",
    "prompt_update",
    "setup_apply",
    "setup_export",
    "setup_plan",
    "setup_validate",
    "instance_update",
    "key_share",
    "lock_rows",
    "table_create",
    "table_data",
    "table_data_sampled",
    "table_unique_fields",
    "table_document",
    "table_head",
    "table_delete",
    "table_delete_many",
    "table_derived",
    "table_import",
    "table_update",
    "table_write",
    "tool_create",
    "tool_delete",
    "tool_delete_many",
    "tool_set_create",
    "tool_update",
    "tool_use_record",
]
