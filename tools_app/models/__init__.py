"""The domain's models (SPEC §2): one module per model, all of them re-exported here.

McpInstance, ApiKey, Binding and CallLog were created by mcp_app; they moved here with
their tables (db_table keeps the old names, tools_app migration 0005), so the domain owns every model
and the MCP endpoint, the API and the admin are interfaces over it.
"""

from tools_app.models.api_key import API_KEY_PREFIX, ApiKey
from tools_app.models.api_token import API_TOKEN_PREFIX, ApiToken
from tools_app.models.base import OwnedModel
from tools_app.models.binding import Binding
from tools_app.models.call import CallLog, CallStatus, Surface
from tools_app.models.embedding import EmbeddingVector
from tools_app.models.instance import Discovery, LogLevel, McpInstance
from tools_app.models.prompt import Prompt, PromptArgumentsError, PromptQuerySet, prompt_name_conflict
from tools_app.models.refusal import RefusalCount
from tools_app.models.table import Table, TableSnapshot, TableStorage
from tools_app.models.table_change import TableChange
from tools_app.models.table_record import (
    CollectionKind,
    TableCollection,
    TableRecord,
    TableRecordBlock,
    TableRecordLayout,
)
from tools_app.models.tool import NameClash, Tool, ToolQuerySet, name_conflict_error

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
    "RefusalCount",
    "Surface",
    "Table",
    "TableChange",
    "TableCollection",
    "TableRecord",
    "TableRecordBlock",
    "TableRecordLayout",
    "TableSnapshot",
    "TableStorage",
    "Tool",
    "ToolQuerySet",
    "name_conflict_error",
    "prompt_name_conflict",
]
