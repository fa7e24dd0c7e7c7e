"""Resources, prompts and completion: what an instance serves besides its tools.

Resources. A mount (a table and a JSON path) is a resource when an enabled binding of the instance can
already return all of it: a `get_all_data` or a `query_data` tool. Its URI is `toolhub://tables/<table id>`
followed by the JSON path (each token percent-encoded). Reading it runs that binding's tool through the one
call pipeline (tools_app.execution.pipeline.run_tool_call: budget, paging, cache, call log), so a resource never shows
more than its tool would: a list over the instance's max_result_bytes comes in pages, the next one at
`<uri>?cursor=<next_cursor>`. A mount that also has an enabled `select` binding offers a resource template,
`<uri>{?key}`: one record by its key, read through the `select` tool. A table that only a schema, preview
or write tool uses is not a resource: its data is not otherwise readable over MCP.

Owner-chosen URIs (Binding.resource_uri, rules in tools_app.resource_uris): a reader binding with
one serves its mount at that fixed URI, a `select` binding with one serves records through that template,
its one variable standing for the key (percent-decoded). Fixed URIs are looked up first, then templates in
resource_uris.ordered order; the default URIs keep working alongside for bindings without one.

Prompts. `usage_guide` is the registry's usage guide (tools_app.registry.usage_guide) of the instance's
tools, with the optional arguments `tool_names` (comma-separated) and `category`. After it come the owner's
enabled prompts (tools_app.models.Prompt), by name ignoring case: getting one renders its template with the
caller's values (Prompt.render), and arguments it cannot render with are INVALID_PARAMS naming them.

Completion. The prompt's `tool_names` (the last name being typed) and `category`, and the variable of a
record template (`key` of a default one, the named variable of an owner-chosen one: keys of the mount's
records, compared as strings) when a bound tool reads the mount whole (completion lists nothing a tool would
not show). Anything else, the arguments of the owner's prompts included (free text), completes to nothing.

What a caller is shown follows its grant (tools_app.grants): the usage guide and completion list the tools
in its set; a binding with pinned arguments is neither a resource nor a template.

Every function here runs in one database hop (mcp_app.hops) and starts with the re-check of the key and the
instance, as every handler does (mcp_app.handlers).
"""

import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from mcp import types
from mcp.shared.exceptions import MCPError

from mcp_app.requests import (
    RequestState,
    call_target,
    caller_for,
    current_instance,
    decode_cursor,
    encode_cursor,
    grant_of,
    page_size,
)
from tools_app.choices import ToolType
from tools_app.data_access.operations import Mount
from tools_app.execution.pipeline import run_tool_call
from tools_app.kernel.errors import ToolError
from tools_app.kernel.limits import (
    COMPLETION_MAX_TYPED_CHARS,
    COMPLETION_MAX_VALUES,
    MAX_PROMPT_ARGUMENT,
    MAX_RESOURCE_URI_CHARS,
)
from tools_app.models import Binding, McpInstance, Prompt, PromptArgumentsError
from tools_app.registry import get_index, usage_guide
from tools_app.registry.instance_scope import InstanceScope
from tools_app.resource_uris import RESERVED_SCHEME, Template, ordered, parse_template, resource_uri_problem
from tools_app.services import table_data

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
# The tool types that already return a whole mount, and the arguments that make them do it.
READERS: dict[str, dict[str, Any]] = {ToolType.GET_ALL_DATA: {}, ToolType.QUERY_DATA: {"query": "@"}}
RECORD_TYPE = ToolType.SELECT


@dataclass(slots=True)
class _Mount:
    table_id: int
    table_name: str
    table_description: str
    json_path: str
    reader: str | None = None  # the effective name of the binding a read of the default URI runs
    reader_type: str | None = None
    selector: str | None = None  # the effective name of the `select` binding the default template runs
    key_field: str = "id"
    readable: bool = False  # an enabled reader binding reads it whole, at any URI (the completion rule)

    @property
    def uri(self) -> str:
        tokens = self.json_path.split("/")[1:] if self.json_path else []
        return SCHEME + str(self.table_id) + "".join("/" + quote(token, safe="") for token in tokens)

    @property
    def name(self) -> str:
        return self.table_name + (self.json_path if self.json_path else "")


@dataclass(slots=True)
class _Custom:
    """A binding's own resource URI (Binding.resource_uri): a fixed URI on a reader, a template on a select."""

    uri: str
    mount: _Mount
    binding: str  # its effective name
    tool_type: str
    key_field: str
    template: Template | None


@dataclass(slots=True)
class _Surface:
    mounts: dict[str, _Mount]  # by default URI, sorted
    resources: dict[str, _Custom]  # fixed custom URIs
    templates: list[_Custom]  # custom record templates, in the order they are tried (resource_uris.ordered)


def _surface(instance: McpInstance) -> _Surface:
    """The instance's resources and record templates: default URIs by mount, and the bindings' own URIs.

    A binding with a resource_uri serves its mount at that URI; the mount keeps its default URI (or
    template) while another binding without one reads it. A resource_uri that no longer suits its tool's
    type (the tool's type changed since) is ignored: the binding serves at the default URI.
    """
    rows = (
        Binding.objects.filter(
            mcp_instance_id=instance.pk,
            enabled=True,
            tool__type__in=[*READERS, RECORD_TYPE],
            tool__table__isnull=False,
            # A binding with pinned arguments reads what its pins narrow it to, not a mount (tools_app.grants):
            # no resource, no template, no completion of its keys.
            pinned_arguments={},
        )
        .order_by("name_key", "id")
        .values_list(
            "name_override",
            "resource_uri",
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
    resources: dict[str, _Custom] = {}
    templates: dict[str, _Custom] = {}
    for override, resource_uri, tool_name, tool_type, json_path, metadata, table_id, table_name, description in rows:
        mount = mounts.setdefault(
            (table_id, json_path or ""), _Mount(table_id, table_name, description or "", json_path or "")
        )
        name = override or tool_name
        record = tool_type == RECORD_TYPE
        key_field = ((metadata or {}).get("key_field") or "id") if record else "id"
        if not record:
            mount.readable = True
        if resource_uri and resource_uri_problem(resource_uri, record=record) is None:
            custom = _Custom(resource_uri, mount, name, tool_type, key_field, parse_template(resource_uri))
            (templates if record else resources).setdefault(resource_uri, custom)
        elif record:
            if mount.selector is None:
                mount.selector, mount.key_field = name, key_field
        elif mount.reader is None or (tool_type == ToolType.GET_ALL_DATA != mount.reader_type):
            mount.reader, mount.reader_type = name, tool_type
    by_template = {custom.template: custom for custom in templates.values() if custom.template is not None}
    return _Surface(
        mounts={mount.uri: mount for mount in sorted(mounts.values(), key=lambda m: m.uri)},
        resources=resources,
        templates=[by_template[template] for template in ordered(list(by_template))],
    )


def _page(items: list[tuple[str, Any]], cursor: str | None) -> tuple[list[Any], str | None]:
    """Keyset paging over (uri, entry) pairs, sorted here by uri, as tools/list pages by name."""
    items = sorted(items, key=lambda item: item[0])
    if cursor:
        after = decode_cursor(cursor)
        items = [(uri, entry) for uri, entry in items if uri > after]
    size = page_size()
    page = items[:size]
    return [entry for _, entry in page], encode_cursor(page[-1][0]) if len(items) > size else None


#
# resources/list, resources/templates/list, resources/read
#


def _resource_entry(uri: str, mount: _Mount, reader: str) -> dict[str, Any]:
    described = mount.table_description or f"The data of table {mount.table_name!r}"
    where = f" at {mount.json_path}" if mount.json_path else ""
    return {
        "uri": uri,
        "name": mount.name,
        "title": f"{mount.table_name}{where}",
        "description": f"{described}{where}, as JSON (what the tool {reader} returns).",
        "mimeType": MIME,
    }


def list_resources_sync(state: RequestState, cursor: str | None) -> dict[str, Any]:
    return resources_page(current_instance(state), cursor)


def resources_page(instance: McpInstance, cursor: str | None) -> dict[str, Any]:
    """resources/list's answer on `instance` (already checked); also the admin's "as a client" page's."""
    surface = _surface(instance)
    entries = [(uri, _resource_entry(uri, m, m.reader)) for uri, m in surface.mounts.items() if m.reader is not None]
    entries += [(uri, _resource_entry(uri, c.mount, c.binding)) for uri, c in surface.resources.items()]
    resources, next_cursor = _page(entries, cursor)
    result: dict[str, Any] = {"resources": resources}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return result


def _template_entry(
    uri_template: str, mount: _Mount, selector: str, key_field: str, variable: str | None
) -> dict[str, Any]:
    """A template's listing; `variable` None for a default `{?key}` template (worded as before owner-chosen
    URIs existed)."""
    key = f"{variable} = the record's {key_field!r}" if variable is not None else repr(key_field)
    return {
        "uriTemplate": uri_template,
        "name": f"{mount.name} record",
        "title": f"One record of {mount.table_name}" + (f" at {mount.json_path}" if mount.json_path else ""),
        "description": (
            f"One record by its key ({key}, compared as a string), as JSON: what the tool {selector} returns for "
            "that key."
        ),
        "mimeType": MIME,
    }


def list_resource_templates_sync(state: RequestState, cursor: str | None) -> dict[str, Any]:
    return resource_templates_page(current_instance(state), cursor)


def resource_templates_page(instance: McpInstance, cursor: str | None) -> dict[str, Any]:
    """resources/templates/list's answer on `instance` (already checked); also the "as a client" page's."""
    surface = _surface(instance)
    entries = [
        # Paged by the mount's URI, as for default URIs (the same order and cursors).
        (uri, _template_entry(uri + "{?key}", m, m.selector, m.key_field, None))
        for uri, m in surface.mounts.items()
        if m.selector is not None
    ]
    entries += [
        (c.uri, _template_entry(c.uri, c.mount, c.binding, c.key_field, c.template.variable))
        for c in surface.templates
        if c.template is not None
    ]
    templates, next_cursor = _page(entries, cursor)
    result: dict[str, Any] = {"resourceTemplates": templates}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return result


def _not_found(uri: str, why: str) -> MCPError:
    shown = uri if len(uri) <= 200 else uri[:200] + "…"
    return MCPError(RESOURCE_NOT_FOUND, f"Resource not found: {shown} ({why}). resources/list names what is served.")


def _split(uri: str) -> tuple[str, dict[str, str]]:
    """A default resource's base URI and its query (`key` or `cursor`), refusing anything else."""
    parts = urlsplit(uri)
    query = {name: values[-1] for name, values in parse_qs(parts.query, keep_blank_values=True).items()}
    unknown = sorted(set(query) - {"key", "cursor"})
    if unknown or len(query) > 1:
        raise MCPError(types.INVALID_PARAMS, "A resource URI takes one of ?key=<record key> or ?cursor=<next_cursor>.")
    base = uri.split("?", 1)[0].split("#", 1)[0]
    return base, query


def _run(state: RequestState, name: str, arguments: dict[str, Any]) -> Any:
    """Run the binding `name` through the pipeline; its value, or MCPError naming the pipeline's error."""
    target = call_target(state, name)
    outcome = run_tool_call(caller=caller_for(state, target, name), target=target, name=name, arguments=arguments)
    if outcome.error is not None:
        raise _pipeline_error(outcome.error)
    return outcome


def _pipeline_error(error: ToolError) -> MCPError:
    return MCPError(types.INVALID_PARAMS, f"{error.code}: {error.message}", error.as_dict())


def _read_record(state: RequestState, uri: str, selector: str, key: str) -> dict[str, Any]:
    outcome = _run(state, selector, {"keys": [key]})
    items = outcome.value.get("items") if isinstance(outcome.value, dict) else None
    if not items:
        raise _not_found(uri, f"no record has the key {key[:100]!r}")
    text = json.dumps(items[0], ensure_ascii=False, separators=(",", ":"))
    return {"contents": [{"uri": uri, "mimeType": MIME, "text": text}]}


def _read_whole(
    state: RequestState, uri: str, reader: str, reader_type: str, cursor: str | None, next_page: Any
) -> dict[str, Any]:
    arguments = dict(READERS[reader_type])
    if cursor is not None:
        arguments["cursor"] = cursor
    outcome = _run(state, reader, arguments)
    content: dict[str, Any] = {"uri": uri, "mimeType": MIME, "text": outcome.text}
    if outcome.page is not None:
        next_cursor = outcome.value.get("next_cursor") if isinstance(outcome.value, dict) else None
        # A page of a list over the budget (docs/paging.md): where the next one is.
        content["_meta"] = {"toolhub/page": outcome.page.note}
        if next_cursor:
            content["_meta"]["toolhub/next"] = next_page(quote(next_cursor, safe=""))
    return {"contents": [content]}


def _read_default(state: RequestState, surface: _Surface, uri: str) -> dict[str, Any]:
    base, query = _split(uri)
    mount = surface.mounts.get(base)
    if mount is None:
        raise _not_found(uri, "no enabled tool of this instance reads that table and path")
    if "key" in query:
        if mount.selector is None:
            raise _not_found(uri, "records of this mount are not served by key: no select tool is bound")
        return _read_record(state, uri, mount.selector, query["key"])
    if mount.reader is None:
        raise _not_found(uri, "only single records of this mount are served (add ?key=<key>)")
    assert mount.reader_type is not None
    return _read_whole(
        state, uri, mount.reader, mount.reader_type, query.get("cursor"), lambda cursor: f"{base}?cursor={cursor}"
    )


CUSTOM_CURSOR = re.compile(r"^(?P<base>.+)[?&]cursor=(?P<cursor>[^&#]*)$")


def read_resource_sync(state: RequestState, uri: str) -> dict[str, Any]:
    if len(uri) > MAX_RESOURCE_URI_CHARS:
        raise MCPError(types.INVALID_PARAMS, f"The URI is over {MAX_RESOURCE_URI_CHARS} characters.")
    instance = current_instance(state)
    surface = _surface(instance)
    if uri.startswith(SCHEME):
        return _read_default(state, surface, uri)
    # A binding's own URI: a fixed one, a page of one (<uri>?cursor=...), or a record template's.
    cursor = None
    custom = surface.resources.get(uri)
    if custom is None and (paged := CUSTOM_CURSOR.match(uri)) is not None:
        custom = surface.resources.get(paged["base"])
        cursor = unquote(paged["cursor"]) if custom is not None else None
    if custom is not None:
        base = custom.uri
        separator = "&" if "?" in base else "?"
        return _read_whole(
            state, uri, custom.binding, custom.tool_type, cursor, lambda c: f"{base}{separator}cursor={c}"
        )
    for custom in surface.templates:
        assert custom.template is not None
        key = custom.template.match(uri)
        if key is not None:
            return _read_record(state, uri, custom.binding, key)
    if uri.startswith(f"{RESERVED_SCHEME}:"):
        raise _not_found(uri, f"this server's default resources start with {SCHEME}")
    raise _not_found(uri, "no enabled tool of this instance is served at that URI")


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
    return prompts_page(current_instance(state), cursor)


def prompts_page(instance: McpInstance, cursor: str | None) -> dict[str, Any]:
    """prompts/list's answer on `instance` (already checked); also the admin's "as a client" page's."""
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
    instance = current_instance(state)
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
        scope=InstanceScope(instance, grant_of(state.caller)),
        tool_names=arguments.get("tool_names"),
        category=arguments.get("category"),
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
            "values": values[:COMPLETION_MAX_VALUES],
            "total": len(values),
            "hasMore": len(values) > COMPLETION_MAX_VALUES,
        }
    }


def _prefixed(candidates: Any, typed: str) -> list[str]:
    folded = typed.lower()
    return sorted({str(c) for c in candidates if str(c).lower().startswith(folded)}, key=lambda c: (c.lower(), c))


def _record_keys(mount: _Mount, key_field: str) -> list[Any]:
    _, data = table_data(mount.table_id)
    try:
        collection = Mount(mount.json_path, key_field).collection(data)
    except ToolError:
        return []
    if isinstance(collection, dict):
        return list(collection)
    keys = [record.get(key_field) for record in collection if isinstance(record, dict)]
    return [key for key in keys if isinstance(key, str | int | float) and not isinstance(key, bool)]


def _template_keys(instance: McpInstance, uri: Any, name: Any) -> list[Any] | None:
    """The keys a record template's variable completes to, or None when `uri` and `name` are no template's
    variable. Keys are offered only where a bound tool already reads the mount whole: a select-only mount
    answers for a key the caller knows, and completion must not list what no tool would."""
    if not isinstance(uri, str) or not isinstance(name, str):
        return None
    surface = _surface(instance)
    if uri.endswith("{?key}") and name == "key":
        mount = surface.mounts.get(uri[: -len("{?key}")])
        if mount is not None and mount.selector is not None:
            return _record_keys(mount, mount.key_field) if mount.readable else []
        return None
    for custom in surface.templates:
        if custom.uri == uri and custom.template is not None and custom.template.variable == name:
            return _record_keys(custom.mount, custom.key_field) if custom.mount.readable else []
    return None


def complete_sync(state: RequestState, ref: dict[str, Any], argument: dict[str, Any]) -> dict[str, Any]:
    instance = current_instance(state)
    name, typed = argument.get("name"), argument.get("value") or ""
    if not isinstance(typed, str) or len(typed) > COMPLETION_MAX_TYPED_CHARS:
        return _completion([])
    if ref.get("type") == "ref/prompt" and ref.get("name") == PROMPT_NAME:
        index = get_index(InstanceScope(instance, grant_of(state.caller)))
        if name == "category":
            return _completion(_prefixed(index.categories, typed.strip()))
        if name == "tool_names":
            done, _, last = typed.rpartition(",")
            head = done + "," if done else ""
            chosen = {part.strip().lower() for part in done.split(",")}
            names = [doc.name for doc in index.docs if doc.name.lower() not in chosen]
            return _completion([head + found for found in _prefixed(names, last.strip())])
        return _completion([])
    if ref.get("type") == "ref/resource":
        keys = _template_keys(instance, ref.get("uri"), name)
        if keys:
            return _completion(_prefixed(keys, typed))
    return _completion([])
