"""Resources, prompts and completion (issue 15, items 2-3): what an instance serves besides its tools.

Resources. A mount (a table and a JSON path) is a resource when an enabled binding of the instance can
already return all of it: a `get_all_data` or a `query_data` tool. Its URI is `toolhub://tables/<table id>`
followed by the JSON path (each token percent-encoded). Reading it runs that binding's tool through the one
call pipeline (tools_app.calls.run_tool_call: budget, paging, cache, call log), so a resource never shows
more than its tool would: a list over the instance's max_result_bytes comes in pages, the next one at
`<uri>?cursor=<next_cursor>`. A mount that also has an enabled `select` binding offers a resource template,
`<uri>{?key}`: one record by its key, read through the `select` tool. A table that only a schema, preview
or write tool uses is not a resource: its data is not otherwise readable over MCP.

Prompts. `usage_guide` is the registry's usage guide (tools_app.registry.usage_guide) of the instance's
tools, with the optional arguments `tool_names` (comma-separated) and `category`. After it come the owner's
enabled prompts (tools_app.models.Prompt), by name ignoring case: getting one renders its template with the
caller's values (Prompt.render), and arguments it cannot render with are INVALID_PARAMS naming them.

Completion. The prompt's `tool_names` (the last name being typed) and `category`, and the `key` of a record
template (keys of the mount's records, compared as strings) when the mount is also a resource (a bound tool
reads it whole: completion lists nothing a tool would not show). Anything else, the arguments of the owner's
prompts included (free text), completes to nothing.

Every function here runs in one database hop (mcp_app.hops) and starts with the re-check of the key and the
instance, as every handler does (mcp_app.handlers).
"""

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from mcp import types
from mcp.shared.exceptions import MCPError

from tools_app.calls import run_tool_call
from tools_app.choices import ToolType
from tools_app.data_access.operations import Mount
from tools_app.errors import ToolError
from tools_app.models import Binding, McpInstance, Prompt, PromptArgumentsError
from tools_app.registry import get_index, usage_guide
from tools_app.registry.instance_scope import InstanceScope
from tools_app.services import table_data
from tools_app.validators import MAX_PROMPT_ARGUMENT

from .handlers import (
    RequestState,
    _call_target,
    _current_instance,
    _decode_cursor,
    _encode_cursor,
    _page_size,
    caller_for,
)

__all__ = [
    "PROMPT_NAME",
    "complete_sync",
    "get_prompt_sync",
    "list_prompts_sync",
    "list_resource_templates_sync",
    "list_resources_sync",
    "read_resource_sync",
]

RESOURCE_NOT_FOUND = -32002  # MCP: resources/read of a URI the server does not serve
SCHEME = "toolhub://tables/"
MIME = "application/json"
MAX_URI = 2_000
MAX_COMPLETION_VALUE = 1_000
MAX_COMPLETIONS = 100  # the protocol's cap on values per completion
# The tool types that already return a whole mount, and the arguments that make them do it.
READERS: dict[str, dict[str, Any]] = {ToolType.GET_ALL_DATA: {}, ToolType.QUERY_DATA: {"query": "@"}}
RECORD_TYPE = ToolType.SELECT


@dataclass(slots=True)
class _Mount:
    table_id: int
    table_name: str
    table_description: str
    json_path: str
    reader: str | None = None  # the effective name of the binding a read runs
    reader_type: str | None = None
    selector: str | None = None  # the effective name of the `select` binding a record read runs
    key_field: str = "id"

    @property
    def uri(self) -> str:
        tokens = self.json_path.split("/")[1:] if self.json_path else []
        return SCHEME + str(self.table_id) + "".join("/" + quote(token, safe="") for token in tokens)

    @property
    def name(self) -> str:
        return self.table_name + (self.json_path if self.json_path else "")


def _mounts(instance: McpInstance) -> dict[str, _Mount]:
    """The instance's mounts that are resources or have a record template, by URI (sorted)."""
    rows = (
        Binding.objects.filter(
            mcp_instance_id=instance.pk,
            enabled=True,
            tool__type__in=[*READERS, RECORD_TYPE],
            tool__table__isnull=False,
        )
        .order_by("name_key", "id")
        .values_list(
            "name_override",
            "tool__name",
            "tool__type",
            "tool__json_path",
            "tool__metadata",
            "tool__table_id",
            "tool__table__name",
            "tool__table__description",
        )
    )
    mounts: dict[tuple[int, str], _Mount] = {}
    for override, tool_name, tool_type, json_path, metadata, table_id, table_name, description in rows:
        mount = mounts.setdefault(
            (table_id, json_path or ""), _Mount(table_id, table_name, description or "", json_path or "")
        )
        name = override or tool_name
        if tool_type == RECORD_TYPE:
            if mount.selector is None:
                mount.selector = name
                mount.key_field = (metadata or {}).get("key_field") or "id"
        elif mount.reader is None or (tool_type == ToolType.GET_ALL_DATA != mount.reader_type):
            mount.reader, mount.reader_type = name, tool_type
    return {mount.uri: mount for mount in sorted(mounts.values(), key=lambda m: m.uri)}


def _page(items: list[tuple[str, Any]], cursor: str | None) -> tuple[list[Any], str | None]:
    """Keyset paging over (uri, entry) pairs sorted by uri, as tools/list pages by name."""
    if cursor:
        after = _decode_cursor(cursor)
        items = [(uri, entry) for uri, entry in items if uri > after]
    size = _page_size()
    page = items[:size]
    return [entry for _, entry in page], _encode_cursor(page[-1][0]) if len(items) > size else None


#
# resources/list, resources/templates/list, resources/read
#


def list_resources_sync(state: RequestState, cursor: str | None) -> dict[str, Any]:
    instance = _current_instance(state)
    entries = []
    for uri, mount in _mounts(instance).items():
        if mount.reader is None:
            continue
        described = mount.table_description or f"The data of table {mount.table_name!r}"
        where = f" at {mount.json_path}" if mount.json_path else ""
        resource = {
            "uri": uri,
            "name": mount.name,
            "title": f"{mount.table_name}{where}",
            "description": f"{described}{where}, as JSON (what the tool {mount.reader} returns).",
            "mimeType": MIME,
        }
        entries.append((uri, resource))
    resources, next_cursor = _page(entries, cursor)
    result: dict[str, Any] = {"resources": resources}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return result


def list_resource_templates_sync(state: RequestState, cursor: str | None) -> dict[str, Any]:
    instance = _current_instance(state)
    entries = []
    for uri, mount in _mounts(instance).items():
        if mount.selector is None:
            continue
        template = {
            "uriTemplate": uri + "{?key}",
            "name": f"{mount.name} record",
            "title": f"One record of {mount.table_name}" + (f" at {mount.json_path}" if mount.json_path else ""),
            "description": (
                f"One record by its key ({mount.key_field!r}, compared as a string), as JSON: what the tool "
                f"{mount.selector} returns for that key."
            ),
            "mimeType": MIME,
        }
        entries.append((uri, template))
    templates, next_cursor = _page(entries, cursor)
    result: dict[str, Any] = {"resourceTemplates": templates}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return result


def _not_found(uri: str, why: str) -> MCPError:
    shown = uri if len(uri) <= 200 else uri[:200] + "…"
    return MCPError(RESOURCE_NOT_FOUND, f"Resource not found: {shown} ({why}). resources/list names what is served.")


def _split(uri: str) -> tuple[str, dict[str, str]]:
    """The resource's base URI and its query (`key` or `cursor`), refusing anything else."""
    if len(uri) > MAX_URI:
        raise MCPError(types.INVALID_PARAMS, f"The URI is over {MAX_URI} characters.")
    if not uri.startswith(SCHEME):
        raise _not_found(uri, f"this server's resources start with {SCHEME}")
    parts = urlsplit(uri)
    query = {name: values[-1] for name, values in parse_qs(parts.query, keep_blank_values=True).items()}
    unknown = sorted(set(query) - {"key", "cursor"})
    if unknown or len(query) > 1:
        raise MCPError(types.INVALID_PARAMS, "A resource URI takes one of ?key=<record key> or ?cursor=<next_cursor>.")
    base = uri.split("?", 1)[0].split("#", 1)[0]
    return base, query


def _run(state: RequestState, name: str, arguments: dict[str, Any]) -> Any:
    """Run the binding `name` through the pipeline; its value, or MCPError naming the pipeline's error."""
    target = _call_target(state, name)
    outcome = run_tool_call(caller=caller_for(state, target, name), target=target, name=name, arguments=arguments)
    if outcome.error is not None:
        raise _pipeline_error(outcome.error)
    return outcome


def _pipeline_error(error: ToolError) -> MCPError:
    return MCPError(types.INVALID_PARAMS, f"{error.code}: {error.message}", error.as_dict())


def read_resource_sync(state: RequestState, uri: str) -> dict[str, Any]:
    base, query = _split(uri)
    instance = _current_instance(state)
    mount = _mounts(instance).get(base)
    if mount is None:
        raise _not_found(uri, "no enabled tool of this instance reads that table and path")
    if "key" in query:
        if mount.selector is None:
            raise _not_found(uri, "records of this mount are not served by key: no select tool is bound")
        outcome = _run(state, mount.selector, {"keys": [query["key"]]})
        items = outcome.value.get("items") if isinstance(outcome.value, dict) else None
        if not items:
            raise _not_found(uri, f"no record has the key {query['key'][:100]!r}")
        text = json.dumps(items[0], ensure_ascii=False, separators=(",", ":"))
        return {"contents": [{"uri": uri, "mimeType": MIME, "text": text}]}
    if mount.reader is None:
        raise _not_found(uri, "only single records of this mount are served (add ?key=<key>)")
    assert mount.reader_type is not None
    arguments = dict(READERS[mount.reader_type])
    if "cursor" in query:
        arguments["cursor"] = query["cursor"]
    outcome = _run(state, mount.reader, arguments)
    content: dict[str, Any] = {"uri": uri, "mimeType": MIME, "text": outcome.text}
    if outcome.page is not None:
        next_cursor = outcome.value.get("next_cursor") if isinstance(outcome.value, dict) else None
        # A page of a list over the budget (docs/paging.md): where the next one is.
        content["_meta"] = {"toolhub/page": outcome.page.note}
        if next_cursor:
            content["_meta"]["toolhub/next"] = f"{base}?cursor={quote(next_cursor, safe='')}"
    return {"contents": [content]}


#
# prompts
#

PROMPT_NAME = "usage_guide"
PROMPT: dict[str, Any] = {
    "name": PROMPT_NAME,
    "title": "Tools usage guide",
    "description": "How to use this server's tools: what each does, its arguments and examples, by category.",
    "arguments": [
        {"name": "tool_names", "description": "Comma-separated tool names (default: all).", "required": False},
        {"name": "category", "description": "Only the tools of this category (default: all).", "required": False},
    ],
}


def _listed(prompt: Prompt) -> dict[str, Any]:
    """An owner's prompt as prompts/list shows it (MCP Prompt: name, title, description, arguments)."""
    entry: dict[str, Any] = {"name": prompt.name}
    if prompt.title:
        entry["title"] = prompt.title
    if prompt.description:
        entry["description"] = prompt.description
    entry["arguments"] = [
        {
            "name": item["name"],
            **({"description": item["description"]} if item.get("description") else {}),
            "required": bool(item.get("required")),
        }
        for item in prompt.arguments
    ]
    return entry


def list_prompts_sync(state: RequestState, cursor: str | None) -> dict[str, Any]:
    """`usage_guide`, then the instance's enabled prompts by name ignoring case; keyset pages as tools/list.

    Names are unique per instance ignoring case, so the lower-cased name is the page key ("" for usage_guide,
    which no owner's prompt can be named).
    """
    instance = _current_instance(state)
    prompts = Prompt.objects.enabled_for(instance).only("name", "title", "description", "arguments")
    entries: list[tuple[str, Any]] = [("", PROMPT)]
    entries += sorted(((prompt.name.lower(), _listed(prompt)) for prompt in prompts), key=lambda entry: entry[0])
    listed, next_cursor = _page(entries, cursor)
    result: dict[str, Any] = {"prompts": listed}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return result


def _owner_prompt(instance: McpInstance, name: str, arguments: dict[str, str] | None) -> dict[str, Any]:
    """prompts/get of one of the owner's prompts: its template rendered with the caller's values."""
    prompt = Prompt.objects.enabled_for(instance).filter(name=name).first()
    if prompt is None:
        raise MCPError(
            types.INVALID_PARAMS, f"Unknown prompt {name[:80]!r}: prompts/list names the prompts of this server."
        )
    try:
        text = prompt.render(arguments)
    except PromptArgumentsError as exc:
        raise MCPError(types.INVALID_PARAMS, str(exc)) from None
    return {
        "description": prompt.description or prompt.title or f"The prompt {prompt.name} of {instance.name}.",
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
    }


def get_prompt_sync(state: RequestState, name: str, arguments: dict[str, str] | None) -> dict[str, Any]:
    instance = _current_instance(state)
    if name != PROMPT_NAME:
        return _owner_prompt(instance, name, arguments)
    arguments = arguments or {}
    unknown = sorted(set(arguments) - {"tool_names", "category"})
    if unknown:
        raise MCPError(types.INVALID_PARAMS, f"{PROMPT_NAME} takes tool_names and category; unknown: {unknown[:5]}.")
    for argument, value in arguments.items():
        if len(value) > MAX_PROMPT_ARGUMENT:
            raise MCPError(types.INVALID_PARAMS, f"{argument!r} is over {MAX_PROMPT_ARGUMENT} characters.")
    guide = usage_guide(
        scope=InstanceScope(instance), tool_names=arguments.get("tool_names"), category=arguments.get("category")
    )
    text = guide["content"]
    if guide["warnings"]:
        text += "\n" + "\n".join(f"> {warning}" for warning in guide["warnings"]) + "\n"
    return {
        "description": f"The usage guide of {instance.name}'s tools.",
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
    }


#
# completion/complete
#


def _completion(values: list[str]) -> dict[str, Any]:
    return {
        "completion": {
            "values": values[:MAX_COMPLETIONS],
            "total": len(values),
            "hasMore": len(values) > MAX_COMPLETIONS,
        }
    }


def _prefixed(candidates: Any, typed: str) -> list[str]:
    folded = typed.lower()
    return sorted({str(c) for c in candidates if str(c).lower().startswith(folded)}, key=lambda c: (c.lower(), c))


def _record_keys(mount: _Mount) -> list[Any]:
    _, data = table_data(mount.table_id)
    try:
        collection = Mount(mount.json_path, mount.key_field).collection(data)
    except ToolError:
        return []
    if isinstance(collection, dict):
        return list(collection)
    keys = [record.get(mount.key_field) for record in collection if isinstance(record, dict)]
    return [key for key in keys if isinstance(key, str | int | float) and not isinstance(key, bool)]


def complete_sync(state: RequestState, ref: dict[str, Any], argument: dict[str, Any]) -> dict[str, Any]:
    instance = _current_instance(state)
    name, typed = argument.get("name"), argument.get("value") or ""
    if not isinstance(typed, str) or len(typed) > MAX_COMPLETION_VALUE:
        return _completion([])
    if ref.get("type") == "ref/prompt" and ref.get("name") == PROMPT_NAME:
        index = get_index(InstanceScope(instance))
        if name == "category":
            return _completion(_prefixed(index.categories, typed.strip()))
        if name == "tool_names":
            done, _, last = typed.rpartition(",")
            head = done + "," if done else ""
            chosen = {part.strip().lower() for part in done.split(",")}
            names = [doc.name for doc in index.docs if doc.name.lower() not in chosen]
            return _completion([head + found for found in _prefixed(names, last.strip())])
        return _completion([])
    if ref.get("type") == "ref/resource" and name == "key":
        uri = ref.get("uri")
        if isinstance(uri, str) and uri.endswith("{?key}"):
            mount = _mounts(instance).get(uri[: -len("{?key}")])
            # Keys are offered only where a bound tool already reads the mount whole: a select-only mount
            # answers for a key the caller knows, and completion must not list what no tool would.
            if mount is not None and mount.selector is not None and mount.reader is not None:
                return _completion(_prefixed(_record_keys(mount), typed))
    return _completion([])
