"""Reads that several surfaces share and that judge more than one row (HackSoft's selectors).

- binding_call_target: what an MCP tools/call resolves to, in one statement, as a CallTarget (the row type
  the call pipeline runs).

The cross-row name rules (SPEC §2.4's names, custom resource URIs) are the binding queryset's
(Binding.objects.name_clashes, .resource_uri_clash): model validation asks them too.
"""

import functools
import json
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone
from oauth2_provider.models import get_access_token_model

from tools_app.models import ApiKey, Binding, McpInstance, Table, Tool

__all__ = ["CallTarget", "binding_call_target", "redact_fields_of"]


@dataclass(frozen=True, slots=True)
class CallTarget:
    """What a call resolved to. Over MCP: the instance, and the binding's and tool's columns (None when no
    binding has the name). Over the API and the admin: the tool, with no instance.

    `tool_changed` is the tool's updated_at as the database driver returned it: only compared with values
    from the same query (a cache key), so it is not converted.
    """

    owner_id: int
    instance_id: int | None = None
    max_result_bytes: int | None = None
    # The instance's evaluation budgets (None: the server default; tools_app.execution.call_limits.limits_for).
    query_cpu_ms: int | None = None
    query_max_elements: int | None = None
    query_max_bytes: int | None = None
    enabled: bool | None = None
    name_override: str | None = None
    tool_id: int | None = None
    tool_name: str | None = None
    tool_type: str | None = None
    tool_changed: Any = None
    table_id: int | None = None
    table_version: int | None = None
    tool: Tool | None = None
    key_rate_limit: str | None = None  # over MCP: the instance's rate per key, as read now
    instance_slug: str = ""  # over MCP: the instance's slug, the metrics' `instance` label
    discovery: str | None = None  # over MCP: the instance's discovery mode (the call_tool proxy)
    log_level: str | None = None  # over MCP: the instance's log level, as read now; "" = off
    # Over MCP (tools_app.grants): the instance or the binding is read-only, and the binding's pinned arguments.
    read_only: bool = False
    pinned_arguments: dict[str, Any] | None = None
    record_details: bool = True  # over MCP: the instance's record_call_details (the API and the admin: always)
    # The table's redact_fields as stored (a JSON list, as text or decoded); None: not read (redact_fields_of)
    redact_fields: Any = None

    @property
    def found(self) -> bool:
        return self.tool_id is not None

    @property
    def effective_name(self) -> str:
        return self.name_override or self.tool_name or ""


@functools.cache
def _call_target_sql(vendor: str, oauth: bool = False) -> str:
    """The one statement of a tools/call: re-checks key and instance, finds the binding by name, reads the
    table version. Built once from the models' table and column names (quoted for `vendor`)."""
    quote = connection.ops.quote_name

    def table(model: Any) -> str:
        return quote(model._meta.db_table)

    def col(alias: str, model: Any, field: str) -> str:
        return f"{alias}.{quote(model._meta.get_field(field).column)}"

    i, k, b, t, v, u = McpInstance, ApiKey, Binding, Tool, Table, get_user_model()
    columns = [
        col("i", i, "id"),
        col("i", i, "owner"),
        col("i", i, "max_result_bytes"),
        col("i", i, "query_cpu_ms"),
        col("i", i, "query_max_elements"),
        col("i", i, "query_max_bytes"),
        col("b", b, "enabled"),
        col("b", b, "name_override"),
        col("t", t, "id"),
        col("t", t, "name"),
        col("t", t, "type"),
        col("t", t, "updated_at"),
        col("t", t, "table"),
        col("v", v, "version"),
        col("i", i, "key_rate_limit"),
        col("i", i, "discovery"),
        col("i", i, "log_level"),
        col("i", i, "read_only"),
        col("b", b, "read_only"),
        col("b", b, "pinned_arguments"),
        col("i", i, "record_call_details"),
        col("v", v, "redact_fields"),
    ]
    if oauth:
        # The access token in place of the key: its audience and user were checked when the
        # request was authenticated; here only that it still exists (not revoked) and has not expired.
        k = get_access_token_model()
        key_join = (
            f" INNER JOIN {table(k)} k ON {col('k', k, 'expires')} > %s"
            # the user who authorized it must still be active
            f" INNER JOIN {table(u)} ku ON {col('ku', u, 'id')} = {col('k', k, 'user')} AND {col('ku', u, 'is_active')}"
        )
        key_check = f" AND {col('k', k, 'id')} = %s"
    else:
        key_join = f" INNER JOIN {table(k)} k ON {col('k', k, 'mcp_instance')} = {col('i', i, 'id')}"
        key_check = f" AND {col('k', k, 'id')} = %s AND {col('k', k, 'revoked_at')} IS NULL"
    return (
        f"SELECT {', '.join(columns)} FROM {table(i)} i"
        f"{key_join}"
        # The keys of a deactivated owner's instances stop working on the next request.
        f" INNER JOIN {table(u)} u ON {col('u', u, 'id')} = {col('i', i, 'owner')} AND {col('u', u, 'is_active')}"
        f" LEFT JOIN {table(b)} b ON {col('b', b, 'mcp_instance')} = {col('i', i, 'id')}"
        f" AND {col('b', b, 'name_key')} = %s"
        f" LEFT JOIN {table(t)} t ON {col('t', t, 'id')} = {col('b', b, 'tool')}"
        f" LEFT JOIN {table(v)} v ON {col('v', v, 'id')} = {col('t', t, 'table')}"
        f" WHERE {col('i', i, 'id')} = %s AND {col('i', i, 'slug')} = %s AND {col('i', i, 'enabled')}"
        f"{key_check}"
    )


def binding_call_target(
    *, instance_id: int, slug: str, api_key_id: int | None, name: str, oauth_token_id: int | None = None
) -> CallTarget | None:
    """The binding of instance `instance_id` whose effective name is `name` ignoring case (SPEC §2.4), with
    its tool and the tool's table version, as a CallTarget (binding columns None when no binding has the
    name); None when the instance is gone or disabled, its slug changed, its owner is deactivated, or the key
    is revoked or another instance's (or, for an OAuth access token, the token is revoked or expired): the
    re-check of the caller rides on the same round trip (SPEC §1)."""
    params: list[Any]
    if api_key_id is not None:
        sql, params = _call_target_sql(connection.vendor, False), [name.lower(), instance_id, slug, api_key_id]
    else:
        # Opened by an OAuth access token: the token must still be there and unexpired, its user active.
        now = connection.ops.adapt_datetimefield_value(timezone.now())
        sql, params = _call_target_sql(connection.vendor, True), [now, name.lower(), instance_id, slug, oauth_token_id]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    (
        owner_id,
        max_result_bytes,
        query_cpu_ms,
        query_max_elements,
        query_max_bytes,
        enabled,
        name_override,
        tool_id,
        tool_name,
        tool_type,
        changed,
        table_id,
        table_version,
        key_rate_limit,
        discovery,
        log_level,
        instance_read_only,
        binding_read_only,
        pinned,
        record_details,
        redact_fields,
    ) = row[1:]
    return CallTarget(
        owner_id=owner_id,
        instance_id=row[0],
        max_result_bytes=max_result_bytes,
        query_cpu_ms=query_cpu_ms,
        query_max_elements=query_max_elements,
        query_max_bytes=query_max_bytes,
        enabled=enabled,
        name_override=name_override,
        tool_id=tool_id,
        tool_name=tool_name,
        tool_type=tool_type,
        tool_changed=changed,
        table_id=table_id,
        table_version=table_version,
        key_rate_limit=key_rate_limit,
        instance_slug=slug,
        discovery=discovery,
        log_level=log_level,
        read_only=bool(instance_read_only) or bool(binding_read_only),
        pinned_arguments=_json_column(Binding, "pinned_arguments", pinned),
        record_details=bool(record_details),
        redact_fields=redact_fields if table_id is not None else "[]",
    )


def _json_column(model: Any, name: str, value: Any) -> Any:
    """A JSON column read by raw SQL, as the model field reads it (SQLite returns its text)."""
    if value is None:
        return None
    return model._meta.get_field(name).from_db_value(value, None, connection)


NO_FIELDS: frozenset[str] = frozenset()


def redact_fields_of(stored: Any) -> frozenset[str]:
    """A table's redact_fields as a set of names, from the column as a query returned it (JSON text, or the
    list a driver decoded); an empty set for none."""
    if not stored or stored == "[]":
        return NO_FIELDS
    if isinstance(stored, str):
        return _parsed_fields(stored)
    return frozenset(name for name in stored if isinstance(name, str))


@functools.lru_cache(maxsize=256)
def _parsed_fields(text: str) -> frozenset[str]:
    value = json.loads(text)
    return frozenset(name for name in value if isinstance(name, str)) if isinstance(value, list) else NO_FIELDS
