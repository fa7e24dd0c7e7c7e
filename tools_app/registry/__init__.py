"""The tool registry (SPEC §5): search, definitions, categories, usage guide, registration, export.

Everything works over a RegistryScope (scope.py): the enabled bindings of an MCP instance under their
effective names (tools_app.registry.instance_scope.InstanceScope), or the tools a user owns (UserScope, the API).
Reads come from a per-process index snapshot validated against the scope's fingerprint on every call
(search.IndexCache); the only writes are the use count of get_tool_definition and register_tool, both
through services. Nothing here knows about HTTP, DRF or MCP.
"""

from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from tools_app import services
from tools_app.choices import ToolType
from tools_app.data_access.budget import active, charge, too_expensive
from tools_app.kernel import telemetry
from tools_app.kernel.errors import ErrorCode, ToolError, ToolhubError
from tools_app.kernel.limits import MAX_TOOLS_PER_OWNER, SEARCH_MAX_RESULTS, SEARCH_QUERY_MAX_CHARS
from tools_app.models import Tool
from tools_app.registry.export import FORMATS, export_tool, export_tools
from tools_app.registry.guide import PENDING, code_span, usage_guide
from tools_app.registry.proxy import PROXY_NAME, finders, proxy_hint, through_proxy
from tools_app.registry.search import (
    METHODS,
    Hit,
    Index,
    ToolDoc,
    deep_copy,
    get_index,
    validate_method,
)

__all__ = [
    "PROXY_NAME",
    "finders",
    "proxy_hint",
    "through_proxy",
    "FORMATS",
    "METHODS",
    "export_tool",
    "export_tools",
    "get_index",
    "register_tool",
    "search_tools",
    "tool_definition",
    "tools_by_category",
    "usage_guide",
]


QUERY_SHOWN = 200  # characters of the query in the results' heading (the JSON `query` has all of it)


def _one_line(text: str, limit: int = 200) -> str:
    """Free text as one line of at most `limit` characters. Shown as it is, not escaped: inside a list item
    no line can open a block, and a model reads inline markup as text (a name in it stays copyable)."""
    line = " ".join((text or "").split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


#
# search_tools
#


def search_tools(*, scope: Any, query: str, method: str = "bm25", limit: int = 5) -> dict[str, Any]:
    """Ranked tools for `query`: {query, method, count, results: [{tool_name, tool_id, description, score,
    match_reason}], markdown}. Raises ToolError: INVALID_SEARCH_METHOD, INVALID_QUERY (regex),
    SEARCH_UNAVAILABLE (embedding/hybrid without the extra), INVALID_ARGUMENTS (empty query, bad limit).
    """
    method = validate_method(method)
    if not isinstance(query, str) or not query.strip():
        raise ToolError(ErrorCode.INVALID_ARGUMENTS, "Invalid arguments: 'query' must be a non-empty string.")
    if len(query) > SEARCH_QUERY_MAX_CHARS:
        raise ToolError(
            ErrorCode.INVALID_ARGUMENTS,
            f"Invalid arguments: 'query' has {len(query):,} characters; the limit is {SEARCH_QUERY_MAX_CHARS:,}. "
            "Send the part of the request that says what the tool should do.",
            {"argument": "query", "max_length": SEARCH_QUERY_MAX_CHARS, "length": len(query)},
        )
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= SEARCH_MAX_RESULTS:
        raise ToolError(ErrorCode.INVALID_ARGUMENTS, f"Invalid arguments: 'limit' must be 1–{SEARCH_MAX_RESULTS}.")
    budget = active()
    if budget is not None and len(query) > budget.limits.max_query_length:
        raise too_expensive(
            "query length limit", budget.limits.max_query_length, "characters", f" (the query has {len(query):,})"
        )
    index = get_index(scope)
    charge(len(index.docs) + len(query))  # the call's budget: what ranking the scope's tools costs
    with telemetry.search_timer(method):
        hits = index.search(query.strip(), method, limit)
    results = [hit.as_dict() for hit in hits]
    result: dict[str, Any] = {
        "query": query,
        "method": method,
        "count": len(results),
        "results": results,
        "markdown": _search_markdown(query, method, hits),
    }
    if through_proxy(scope):
        # Clients that only call listed tools run a found one through the call proxy.
        result["call_with"] = PROXY_NAME
        result["markdown"] += "\n" + proxy_hint(index) + "\n"
    return result


def _search_markdown(query: str, method: str, hits: list[Hit]) -> str:
    lines = [f"## Search results for {code_span(_one_line(query, QUERY_SHOWN))} ({method})", ""]
    if not hits:
        lines.append("No tool matches. Try other words, or list_tools_by_category with category `all`.")
    for number, hit in enumerate(hits, 1):
        lines += [
            f"{number}. {code_span(hit.doc.name)}",
            f"   - Description: {_one_line(hit.doc.description) or PENDING}",
            f"   - Score: {hit.score:.2f} ({_one_line(hit.match_reason, 400)})",
        ]
    return "\n".join(lines) + "\n"


#
# get_tool_definition
#


def _definition(doc: ToolDoc) -> dict[str, Any]:
    return {
        "name": doc.name,
        "tool_id": doc.tool_id,
        "type": doc.type,
        "description": doc.description,
        "input_schema": deep_copy(doc.input_schema),
        "output_schema": deep_copy(doc.output_schema),
        "category": doc.category,
        "tags": list(doc.tags),
        "mcp_server": doc.mcp_server or None,
        "examples": doc.examples,
        "return_format": doc.return_format or None,
        "documentation_url": doc.metadata.get("documentation_url") or None,
        # Set by the server for this binding (tools_app.grants): not in input_schema, never sent.
        "pinned_arguments": sorted(doc.pinned),
    }


def tool_definition(*, scope: Any, tool_name: str) -> dict[str, Any]:
    """The full definition of `tool_name` in the scope; bumps its use count (atomically, with F()).

    Raises ToolError(TOOL_NOT_FOUND) naming a few close names.
    """
    index = get_index(scope)
    doc = index.find(tool_name)
    if doc is None:
        raise ToolError(
            ErrorCode.TOOL_NOT_FOUND,
            f"No tool named {tool_name!r} here.{_suggest(index, tool_name)}",
            {"tool_name": tool_name},
        )
    services.tool_use_record(tool_id=doc.tool_id)
    return _definition(doc)


def _suggest(index: Index, name: str) -> str:
    hits = index.bm25(name, 3) if name else []
    if not hits:
        search, _definition = finders(index.docs)
        return f" Use {search} to find tools." if search else ""
    return " Did you mean: " + ", ".join(hit.doc.name for hit in hits) + "?"


#
# list_tools_by_category
#


def tools_by_category(*, scope: Any, category: str, limit: int = 20) -> dict[str, Any]:
    """`all`: every category with its count; otherwise the category's tools (at most `limit`).

    Raises ToolError(INVALID_CATEGORY) listing the categories that exist.
    """
    index = get_index(scope)
    wanted = (category or "").strip().lower()
    if wanted == "all":
        categories = [{"category": name, "count": count} for name, count in sorted(index.categories.items())]
        lines = [f"## Tool categories ({len(categories)})", ""]
        lines += [
            f"- {code_span(str(c['category']))}: {c['count']} tool{'s' if c['count'] != 1 else ''}" for c in categories
        ] or ["No tools."]
        return {
            "category": "all",
            "total_tools": len(index.docs),
            "categories": categories,
            "markdown": "\n".join(lines) + "\n",
        }
    if wanted not in index.categories:
        existing = sorted(index.categories)
        raise ToolError(
            ErrorCode.INVALID_CATEGORY,
            f"No category {category!r} here. Categories: {', '.join(existing) or '(none: no tools)'}; "
            "or 'all' for counts.",
            {"categories": existing},
        )
    docs = sorted((doc for doc in index.docs if doc.category == wanted), key=lambda doc: doc.name.lower())
    shown = docs[:limit]
    tools = [{"tool_name": doc.name, "description": doc.description, "tags": list(doc.tags)} for doc in shown]
    lines = [f"## Tools in category {code_span(wanted)} ({len(docs)})", ""]
    lines += [f"- {code_span(d.name)}: {_one_line(d.description) or PENDING}" for d in shown]
    if len(docs) > len(shown):
        lines.append(f"- … and {len(docs) - len(shown)} more (raise `limit`).")
    return {
        "category": wanted,
        "count": len(docs),
        "tools": tools,
        "truncated": len(docs) > len(shown),
        "markdown": "\n".join(lines) + "\n",
    }


#
# register_tool
#


def _reason(exc: ValidationError) -> tuple[str, dict[str, list[str]]]:
    if hasattr(exc, "error_dict"):
        fields = {name: [str(m) for e in errors for m in e.messages] for name, errors in exc.error_dict.items()}
    else:
        fields = {"__all__": list(exc.messages)}
    text = "; ".join(f"{name}: {' '.join(messages)}" for name, messages in fields.items())
    return text, fields


REGISTRATION_OFF = "Registration is not allowed here: the instance's allow_registration setting is off."


def _check_tool_quota(owner: Any, name: str) -> None:
    """Refuse a registration that would take `owner` past TOOLHUB_MAX_TOOLS_PER_OWNER tools.

    Counts every tool the owner has, of any type. Locks the owner's row (FOR NO KEY UPDATE on PostgreSQL:
    registrations of one owner queue, inserts that only reference the owner do not wait), so concurrent
    registrations cannot pass the quota together; on SQLite the IMMEDIATE transaction already does.
    Raises ToolError(REGISTRATION_FAILED) naming the quota.
    """
    quota = MAX_TOOLS_PER_OWNER.get()
    list(get_user_model().objects.select_for_update(no_key=True).filter(pk=owner.pk).values_list("pk", flat=True))
    count = Tool.objects.filter(owner=owner).count()
    if count >= quota:
        raise ToolError(
            ErrorCode.REGISTRATION_FAILED,
            f"The tool {name!r} was not registered: its owner already has {count} tools, and the quota is "
            f"{quota} tools per owner (setting TOOLHUB_MAX_TOOLS_PER_OWNER). Delete tools or ask the "
            "administrator to raise the quota.",
            {"reason": "quota", "quota": quota, "tools": count},
        )


def register_tool(
    *,
    scope: Any,
    name: str,
    description: str,
    category: str | None = None,
    tags: list[str] | None = None,
    input_schema: dict | None = None,
    mcp_server: str | None = None,
) -> dict[str, Any]:
    """Create an `external` tool owned by the scope's owner and bind it, in one transaction.

    Only where scope.allow_registration. Any failure is ToolError(REGISTRATION_FAILED) with the reason,
    and nothing is written.
    """
    if not scope.allow_registration:
        refusal = getattr(scope, "registration_refusal", None)
        raise ToolError(
            ErrorCode.REGISTRATION_FAILED,
            refusal or REGISTRATION_OFF,
            {"reason": "no_instance" if refusal else "not_allowed"},
        )
    metadata: dict[str, Any] = {}
    if category:
        metadata["category"] = category.strip().lower() if isinstance(category, str) else category
    if tags:
        metadata["tags"] = tags
    if mcp_server:
        metadata["mcp_server"] = mcp_server
    try:
        with transaction.atomic():
            _check_tool_quota(scope.owner, name)
            tool = services.tool_create(
                owner=scope.owner,
                name=name,
                type=ToolType.EXTERNAL,
                description=description or "",
                input_schema=input_schema or {"type": "object"},
                metadata=metadata,
            )
            scope.register(tool)
    except ToolError:
        raise
    except ValidationError as exc:
        text, fields = _reason(exc)
        raise ToolError(
            ErrorCode.REGISTRATION_FAILED, f"The tool {name!r} was not registered: {text}", {"fields": fields}
        ) from exc
    except ToolhubError as exc:
        raise ToolError(
            ErrorCode.REGISTRATION_FAILED,
            f"The tool {name!r} was not registered: {exc.message}",
            {"reason": str(exc.code)},
        ) from exc
    except IntegrityError as exc:
        raise ToolError(
            ErrorCode.REGISTRATION_FAILED,
            f"The tool {name!r} was not registered: it conflicts with a tool registered at the same time.",
            {"reason": "conflict"},
        ) from exc
    return {
        "registered": True,
        "tool_name": tool.name,
        "tool_id": tool.pk,
        "type": tool.type,
        "category": tool.category,
        "message": f"Tool {tool.name!r} registered (external"
        + (f", served by {mcp_server}" if mcp_server else "")
        + "): it is searchable and exportable here, and is called on its own server.",
    }
