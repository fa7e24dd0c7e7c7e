"""The domain's models (SPEC §2): one module per model, all of them re-exported here.

McpInstance, ApiKey, Binding and CallLog were created by mcp_app; they moved here in issue 7 with
their tables (db_table keeps the old names, tools_app migration 0005), so the domain owns every model
and the MCP endpoint, the API and the admin are interfaces over it.
"""

from .api_key import API_KEY_PREFIX, ApiKey
from .api_token import API_TOKEN_PREFIX, ApiToken
from .base import OwnedModel
from .binding import Binding
from .call import CallLog, CallStatus, Surface
from .embedding import EmbeddingVector
from .instance import Discovery, LogLevel, McpInstance
from .prompt import Prompt, PromptArgumentsError, PromptQuerySet, prompt_name_conflict
from .table import Table, TableSnapshot
from .table_change import TableChange
from .table_record import CollectionKind, TableCollection, TableRecord, TableRecordLayout
from .tool import NameClash, Tool, ToolQuerySet, name_conflict_error

__all__ = [
    "API_KEY_PREFIX",
    "API_TOKEN_PREFIX",
    "ApiKey",
    "ApiToken",
    "Binding",
    "CallLog",
    "CallStatus",
    "CollectionKind",
    "Discovery",
    "EmbeddingVector",
    "LogLevel",
    "McpInstance",
    "NameClash",
    "OwnedModel",
    "Prompt",
    "PromptArgumentsError",
    "PromptQuerySet",
    "Surface",
    "Table",
    "TableChange",
    "TableCollection",
    "TableRecord",
    "TableRecordLayout",
    "TableSnapshot",
    "Tool",
    "ToolQuerySet",
    "name_conflict_error",
    "prompt_name_conflict",
]
