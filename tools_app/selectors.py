"""Reads that several surfaces share and that judge more than one row (HackSoft's selectors).

- binding_call_target: what an MCP tools/call resolves to, in one statement, as a CallTarget (the row type
  the call pipeline runs).
- usage_of: THE "what uses this" read of the change guard: which instances, tool names and clients a table,
  tool, binding or instance serves (UsedBy rows). The services refuse an unconfirmed delete, rename or breaking
  schema change with it (IN_USE), the API answers its rows as `details.used_by`, the admin shows them on its
  confirmation pages.

The cross-row name rules (SPEC §2.4's names, custom resource URIs) are the binding queryset's
(Binding.objects.name_clashes, .resource_uri_clash): model validation asks them too.
"""

import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Count, Max, Q
from django.utils import timezone
from oauth2_provider.models import get_access_token_model

from tools_app.kernel.limits import IN_USE_DAYS, IN_USE_MAX_CLIENTS
from tools_app.kernel.prepared import fetch_one
from tools_app.models import ApiKey, Binding, CallLog, McpInstance, Table, Tool
from tools_app.models.columns import column

__all__ = ["CallTarget", "UsedBy", "binding_call_target", "in_use_days", "redact_fields_of", "usage_of"]


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
    table_storage: str | None = None  # over MCP: the table's storage, read with its version
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
    # The tool's redact_arguments, stored the same way (redact_fields_of); None: no tool
    redact_arguments: Any = None

    @property
    def found(self) -> bool:
        return self.tool_id is not None

    @property
    def effective_name(self) -> str:
        return self.name_override or self.tool_name or ""


# What opened the call whose target _call_target_sql reads, and so what it re-checks besides the instance.
OPENED_BY_KEY, OPENED_BY_TOKEN, OPENED_IN_ADMIN = "key", "oauth", "admin"


@functools.cache
def _call_target_sql(vendor: str, opener: str = OPENED_BY_KEY) -> str:
    """The one statement of a tools/call: re-checks key and instance, finds the binding by name, reads the
    table version. Built once from the models' table and column names (quoted for `vendor`). Its parameters
    are named (`%(name)s`): Django's SQLite cursor rewrites positional ones with a regular expression over the
    whole statement on every call (pipeline._record_sql)."""
    quote = connection.ops.quote_name

    def table(model: Any) -> str:
        return quote(model._meta.db_table)

    def col(alias: str, model: Any, field: str) -> str:
        return f"{alias}.{column(model, field)}"

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
        col("v", v, "storage"),
        col("t", t, "redact_arguments"),
    ]
    if opener == OPENED_IN_ADMIN:
        # The admin's "as a client" page (toolhub.as_client), in-process: the signed-in user's right to the
        # instance was checked by the view; no key or token is presented, so none is checked here.
        key_join = key_check = ""
    elif opener == OPENED_BY_TOKEN:
        # The access token in place of the key: its audience and user were checked when the
        # request was authenticated; here only that it still exists (not revoked) and has not expired.
        k = get_access_token_model()
        key_join = (
            f" INNER JOIN {table(k)} k ON {col('k', k, 'expires')} > %(now)s"
            # the user who authorized it must still be active
            f" INNER JOIN {table(u)} ku ON {col('ku', u, 'id')} = {col('k', k, 'user')} AND {col('ku', u, 'is_active')}"
        )
        key_check = f" AND {col('k', k, 'id')} = %(key)s"
    else:
        key_join = f" INNER JOIN {table(k)} k ON {col('k', k, 'mcp_instance')} = {col('i', i, 'id')}"
        key_check = f" AND {col('k', k, 'id')} = %(key)s AND {col('k', k, 'revoked_at')} IS NULL"
    return (
        f"SELECT {', '.join(columns)} FROM {table(i)} i"
        f"{key_join}"
        # The keys of a deactivated owner's instances stop working on the next request.
        f" INNER JOIN {table(u)} u ON {col('u', u, 'id')} = {col('i', i, 'owner')} AND {col('u', u, 'is_active')}"
        f" LEFT JOIN {table(b)} b ON {col('b', b, 'mcp_instance')} = {col('i', i, 'id')}"
        f" AND {col('b', b, 'name_key')} = %(name)s"
        f" LEFT JOIN {table(t)} t ON {col('t', t, 'id')} = {col('b', b, 'tool')}"
        f" LEFT JOIN {table(v)} v ON {col('v', v, 'id')} = {col('t', t, 'table')}"
        f" WHERE {col('i', i, 'id')} = %(instance)s AND {col('i', i, 'slug')} = %(slug)s AND {col('i', i, 'enabled')}"
        f"{key_check}"
    )


def binding_call_target(
    *,
    instance_id: int,
    slug: str,
    api_key_id: int | None,
    name: str,
    oauth_token_id: int | None = None,
    in_admin: bool = False,
) -> CallTarget | None:
    """The binding of instance `instance_id` whose effective name is `name` ignoring case (SPEC §2.4), with
    its tool and the tool's table version, as a CallTarget (binding columns None when no binding has the
    name); None when the instance is gone or disabled, its slug changed, its owner is deactivated, or the key
    is revoked or another instance's (or, for an OAuth access token, the token is revoked or expired): the
    re-check of the caller rides on the same round trip (SPEC §1).

    `in_admin` with neither a key nor a token: the admin's in-process call as the owner signed in
    (toolhub.as_client), whose view checked the user's right to the instance; only the instance is re-checked."""
    params: dict[str, Any] = {"name": name.lower(), "instance": instance_id, "slug": slug}
    if api_key_id is not None:
        sql, params["key"] = _call_target_sql(connection.vendor, OPENED_BY_KEY), api_key_id
    elif oauth_token_id is None and in_admin:
        sql = _call_target_sql(connection.vendor, OPENED_IN_ADMIN)
    else:
        # Opened by an OAuth access token: the token must still be there and unexpired, its user active.
        sql, params["key"] = _call_target_sql(connection.vendor, OPENED_BY_TOKEN), oauth_token_id
        params["now"] = connection.ops.adapt_datetimefield_value(timezone.now())
    row = fetch_one(sql, params)  # prepared on PostgreSQL: planning it cost more than running it
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
        table_storage,
        redact_arguments,
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
        table_storage=table_storage,
        key_rate_limit=key_rate_limit,
        instance_slug=slug,
        discovery=discovery,
        log_level=log_level,
        read_only=bool(instance_read_only) or bool(binding_read_only),
        pinned_arguments=_pins(pinned),
        record_details=bool(record_details),
        redact_fields=redact_fields if table_id is not None else "[]",
        redact_arguments=redact_arguments,
    )


def _pins(value: Any) -> Any:
    """A binding's pinned_arguments as read by raw SQL. Nearly every binding pins nothing: its empty object
    (the JSON text "{}", or {} from a driver that decodes JSON) is not parsed on every call."""
    if value == "{}" or value == {}:
        return {}
    return _json_column(Binding, "pinned_arguments", value)


def _json_column(model: Any, name: str, value: Any) -> Any:
    """A JSON column read by raw SQL, as the model field reads it (SQLite returns its text)."""
    if value is None:
        return None
    return model._meta.get_field(name).from_db_value(value, None, connection)


NO_FIELDS: frozenset[str] = frozenset()


def redact_fields_of(stored: Any) -> frozenset[str]:
    """A table's redact_fields (or a tool's redact_arguments) as a set of names, from the column as a query
    returned it (JSON text, or the list a driver decoded); an empty set for none."""
    if not stored or stored == "[]":
        return NO_FIELDS
    if isinstance(stored, str):
        return _parsed_fields(stored)
    return frozenset(name for name in stored if isinstance(name, str))


@functools.lru_cache(maxsize=256)
def _parsed_fields(text: str) -> frozenset[str]:
    value = json.loads(text)
    return frozenset(name for name in value if isinstance(name, str)) if isinstance(value, list) else NO_FIELDS


#
# The change guard's read
#


def in_use_days() -> int:
    """TOOLHUB_IN_USE_DAYS: a call this recent makes what it called in use (0: only bindings count)."""
    return IN_USE_DAYS.get()


@dataclass(frozen=True, slots=True)
class UsedBy:
    """One way something is in use: a tool name clients reach on an instance (or through the API and the admin,
    `instance` None), because it is bound and enabled on an enabled instance, or because it was called lately."""

    instance: str | None  # the instance's slug; None: calls through the API or the admin's try-it
    tool: str  # the name clients use: the binding's effective name (over MCP), else the tool's own
    tool_id: int | None
    bound: bool  # bound and enabled on an enabled instance
    calls: int = 0  # calls in the last in_use_days() days
    last_called: datetime | None = None
    clients: tuple[str, ...] = field(default=())  # who called lately: key labels, OAuth clients, users

    def as_dict(self) -> dict[str, Any]:
        return {
            "instance": self.instance,
            "tool": self.tool,
            "tool_id": self.tool_id,
            "bound": self.bound,
            "calls": self.calls,
            "last_called": self.last_called.isoformat() if self.last_called else None,
            "clients": list(self.clients),
        }

    def __str__(self) -> str:
        where = f"{self.tool!r} on the instance {self.instance!r}" if self.instance else f"{self.tool!r} (API)"
        how = ["bound"] if self.bound else []
        if self.calls:
            how.append(f"{self.calls} call{'s' if self.calls != 1 else ''} in {in_use_days()} days")
        return f"{where} ({', '.join(how)})"


def _ids(values: Iterable[Any] | None) -> list[int]:
    return [value if isinstance(value, int) else value.pk for value in values or ()]


def _client(key_label: str | None, key_prefix: str | None, oauth_client: str, username: str | None, surface: str):
    if key_prefix:
        return f"key {key_label!r} ({key_prefix}…)" if key_label else f"key {key_prefix}…"
    if oauth_client:
        return f"OAuth client {oauth_client}" + (f" of {username}" if username else "")
    return f"{surface} user {username}" if username else surface


def usage_of(
    *,
    tables: Iterable[Any] | None = None,
    tools: Iterable[Any] | None = None,
    bindings: Iterable[Any] | None = None,
    instances: Iterable[Any] | None = None,
    days: int | None = None,
) -> list[UsedBy]:
    """What would break if these tables, tools, bindings or instances (objects or ids) went away: every tool name
    they serve that is bound and enabled on an enabled instance, or was called in the last `days` days (default
    TOOLHUB_IN_USE_DAYS), with the calls' count, last time and clients. Sorted by instance, then tool name; empty
    when nothing uses them. A table serves its tools; an instance, its bindings; a binding, its tool on its
    instance (calls through that instance); a tool, its bindings and its calls on every surface."""
    binding_q, call_q = Q(pk__in=[]), Q(pk__in=[])
    if tables is not None and (ids := _ids(tables)):
        binding_q |= Q(tool__table_id__in=ids)
        call_q |= Q(tool__table_id__in=ids)
    if tools is not None and (ids := _ids(tools)):
        binding_q |= Q(tool_id__in=ids)
        call_q |= Q(tool_id__in=ids)
    if instances is not None and (ids := _ids(instances)):
        binding_q |= Q(mcp_instance_id__in=ids)
        call_q |= Q(mcp_instance_id__in=ids)
    if bindings is not None and (ids := _ids(bindings)):
        binding_q |= Q(pk__in=ids)
        for instance_id, tool_id in Binding.objects.filter(pk__in=ids).values_list("mcp_instance_id", "tool_id"):
            call_q |= Q(mcp_instance_id=instance_id, tool_id=tool_id)
    found: dict[tuple[str | None, str], UsedBy] = {}
    bound = (
        Binding.objects.filter(binding_q, enabled=True, mcp_instance__enabled=True)
        .select_related("mcp_instance", "tool")
        .order_by("mcp_instance__slug", "name_key")
    )
    for binding in bound:
        key = (binding.mcp_instance.slug, binding.effective_name.lower())
        found[key] = UsedBy(binding.mcp_instance.slug, binding.effective_name, binding.tool_id, bound=True)
    window = in_use_days() if days is None else days
    if window > 0:
        since = timezone.now() - timedelta(days=window)
        calls = CallLog.objects.filter(call_q, created_at__gte=since).order_by()
        totals = calls.values("mcp_instance__slug", "tool_name", "tool_id").annotate(
            n=Count("id"), last=Max("created_at")
        )
        clients: dict[tuple[str | None, str], list[str]] = {}
        seen = calls.values_list(
            "mcp_instance__slug",
            "tool_name",
            "api_key__label",
            "api_key__prefix",
            "oauth_client",
            "user__username",
            "surface",
        ).distinct()
        for slug, name, label, prefix, oauth_client, username, surface in seen[:1000]:
            named = clients.setdefault((slug, name.lower()), [])
            client = _client(label, prefix, oauth_client, username, surface)
            if client not in named and len(named) < IN_USE_MAX_CLIENTS:
                named.append(client)
        for row in totals:
            key = (row["mcp_instance__slug"], row["tool_name"].lower())
            earlier = found.get(key)
            calls_before = earlier.calls if earlier else 0
            last = max(filter(None, [earlier.last_called if earlier else None, row["last"]]))
            found[key] = UsedBy(
                instance=key[0],
                tool=earlier.tool if earlier else row["tool_name"],
                tool_id=earlier.tool_id if earlier else row["tool_id"],
                bound=earlier.bound if earlier else False,
                calls=calls_before + row["n"],
                last_called=last,
                clients=tuple(sorted(clients.get(key, []))),
            )
    return sorted(found.values(), key=lambda used: (used.instance is None, used.instance or "", used.tool.lower()))
