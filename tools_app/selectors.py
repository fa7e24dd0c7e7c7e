"""Reads that several surfaces share and that judge more than one row (HackSoft's selectors).

- binding_call_target: what an MCP tools/call resolves to, in one statement.
- name_clashes: SPEC §2.4's cross-row rule, the one place that says which bindings hold a name on an
  instance; model validation, the services and the admin forms all ask it.
- resource_uri_clash: the same for custom resource URIs (issue 15, tools_app.resource_uris).
"""

import functools
from collections.abc import Iterable
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone
from oauth2_provider.models import get_access_token_model

from tools_app import calls  # calls -> services -> selectors: CallTarget is looked up when used
from tools_app.models import ApiKey, Binding, McpInstance, NameClash, Table, Tool
from tools_app.resource_uris import conflict

__all__ = ["binding_call_target", "name_clashes", "resource_uri_clash"]


def name_clashes(
    *, instance_ids: Iterable[int], name: str, exclude_binding: int | None = None, exclude_tool: int | None = None
) -> list[NameClash]:
    """SPEC §2.4, THE name rule: the bindings of `instance_ids` whose effective name is `name`, ignoring case
    (other than the binding or the tool being saved). Model validation (a tool's rename), the binding
    services and the admin's binding forms all ask this; the unique constraint on (instance, name_key) is
    the guarantee under concurrency, this the friendly answer naming the tool and the instance."""
    clashes = Binding.objects.filter(mcp_instance_id__in=list(instance_ids), name_key=name.lower())
    if exclude_binding is not None:
        clashes = clashes.exclude(pk=exclude_binding)
    if exclude_tool is not None:
        clashes = clashes.exclude(tool_id=exclude_tool)
    return [NameClash.of(binding) for binding in clashes.select_related("mcp_instance", "tool").order_by("pk")]


def resource_uri_clash(*, instance_id: int, uri: str, exclude_binding: int | None = None) -> str | None:
    """Why `uri` cannot be a resource URI of instance `instance_id` next to its other bindings' custom URIs
    (tools_app.resource_uris.conflict: unique; a template the same as another or matching a fixed URI), or
    None. Binding.clean asks it; the binding services ask again under the instance's lock."""
    others = Binding.objects.with_resource_uri(instance_id).select_related("tool", "mcp_instance").order_by("pk")
    if exclude_binding is not None:
        others = others.exclude(pk=exclude_binding)
    for other in others:
        problem = conflict(uri, other.resource_uri)
        if problem is not None:
            where = f"of the tool {other.effective_name!r} on the instance {other.mcp_instance.name!r}"
            return problem.replace("{where}", where)
    return None


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
    ]
    if oauth:
        # The access token (issue 16) in place of the key: its audience and user were checked when the
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
        # Issue 13: the keys of a deactivated owner's instances stop working on the next request.
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
) -> "calls.CallTarget | None":
    """The binding of instance `instance_id` whose effective name is `name` ignoring case (SPEC §2.4), with
    its tool and the tool's table version, as a CallTarget (binding columns None when no binding has the
    name); None when the instance is gone or disabled, its slug changed, its owner is deactivated, or the key
    is revoked or another instance's (or, for an OAuth access token, the token is revoked or expired): the
    re-check of the caller rides on the same round trip (SPEC §1)."""
    params: list[Any]
    if api_key_id is not None:
        sql, params = _call_target_sql(connection.vendor, False), [name.lower(), instance_id, slug, api_key_id]
    else:
        # Issue 16: opened by an OAuth access token: the token must still be there and unexpired, its user active.
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
    ) = row[1:]
    return calls.CallTarget(
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
    )
