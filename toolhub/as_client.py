"""The admin's "see it as a client" page of an MCP instance (docs/mcp-clients.md, "See it as a client").

It lives here, not in tools_app.admin, because it shows what the MCP endpoint itself answers: tools/list,
prompts/list, resources/list and resources/templates/list come from mcp_app's own listing functions
(tools_page, prompts_page, resources_page, resource_templates_page) with the Grant that mcp_app.requests.grant_of
makes for the chosen credential. The import-linter contracts keep tools_app.admin and mcp_app independent;
toolhub sits above both.

The chosen credential is one of the instance's active API keys, or the owner signed in. Keys are stored
hashed, so the key's Credential is built from its row (read_only, label, attributes), as mcp_app.auth builds
it from the same row for a request. "The owner signed in" is what an OAuth client the owner authorized with
scope tools:all gets. Showing a list writes nothing (not even the key's last use).

Each listed tool can be called from the page: the call is mcp_app's own tools/call handler (call_tool_sync), run
in-process with the chosen credential marked as the admin's (Credential.admin_user_id): the instance's bindings,
name overrides, pins, budgets and read-only flags apply as for a client with that credential, the answer is the
tools/call result (or JSON-RPC error) a client gets, and the call is recorded as the signed-in user's on surface
"admin", like the tool's try-it. The key is not used for it (its last use does not move).

The connection check is a real MCP session over HTTP (the SDK's client: initialize, then tools/list) against
the instance's endpoint URL, bounded by CHECK_SECONDS, with either
- a key the owner pastes into the form: the plaintext is only ever used for that one session, never stored or
  logged; or
- the signed-in user's session: the server mints an OAuth access token for that user, for this one endpoint,
  scope tools:all, expiring with the check, and deletes it when the check ends (oauth_app.tokens.
  session_check_token). It never reaches the browser, so the page holds no reusable secret.
"""

import asyncio
import concurrent.futures
from typing import Any

import httpx2
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from mcp_app.auth import Credential
from mcp_app.features import prompts_page, resource_templates_page, resources_page
from mcp_app.handlers import call_tool_sync, tools_page
from mcp_app.requests import RequestState, grant_of
from oauth_app.tokens import session_check_token
from tools_app.admin.tool_forms import compact_json, parse_json, pretty_json
from tools_app.kernel.limits import CONNECTION_CHECK_MAX_PAGES, TRY_IT_MAX_CHARS
from tools_app.models import ApiKey, McpInstance
from tools_app.oauth import SCOPE_ALL
from tools_app.tool_types.examples import from_schema

CHECK_SECONDS = 10.0  # the whole connection check: connect, initialize, tools/list
OWNER = "owner"
# The connection check's two ways in (the form's "with" field).
WITH_KEY, WITH_SESSION = "key", "session"


def key_credential(instance: McpInstance, key: ApiKey, admin_user_id: int | None = None) -> Credential:
    """The Credential a request with `key` opens on `instance` (mcp_app.auth.authenticate, from the same row);
    with `admin_user_id`, that of the page's own calls as the key (run by that admin user)."""
    attributes = key.attributes if isinstance(key.attributes, dict) else {}
    return Credential(
        instance_id=instance.pk,
        slug=instance.slug,
        api_key_id=key.pk,
        owner_id=instance.owner_id,
        key_read_only=key.read_only,
        key_label=key.label,
        key_attributes=tuple(sorted((str(name), str(value)) for name, value in attributes.items())),
        username=instance.owner.username,
        admin_user_id=admin_user_id,
    )


def owner_credential(instance: McpInstance, admin_user_id: int | None = None) -> Credential:
    """The Credential of an OAuth client the owner authorized with every scope (tools:all); with
    `admin_user_id`, that of the page's own calls as the owner signed in (run by that admin user)."""
    return Credential(
        instance_id=instance.pk,
        slug=instance.slug,
        api_key_id=None,
        owner_id=instance.owner_id,
        oauth_user_id=instance.owner_id,
        scopes=frozenset({SCOPE_ALL}),
        username=instance.owner.username,
        admin_user_id=admin_user_id,
    )


def _all_pages(page: Any, field: str) -> tuple[list[dict[str, Any]], bool]:
    """Every entry of a paged list (at most CONNECTION_CHECK_MAX_PAGES pages), and whether it was cut there."""
    entries: list[dict[str, Any]] = []
    cursor = None
    for _page in range(CONNECTION_CHECK_MAX_PAGES):
        result = page(cursor)
        entries.extend(result[field])
        cursor = result.get("nextCursor")
        if cursor is None:
            return entries, False
    return entries, True


def client_view(instance: McpInstance, credential: Credential) -> dict[str, Any]:
    """tools/list, prompts/list, resources/list and resources/templates/list as the endpoint answers them for
    `credential` (every page)."""
    grant = grant_of(credential)
    tools, tools_cut = _all_pages(lambda cursor: tools_page(instance, grant, cursor), "tools")
    prompts, prompts_cut = _all_pages(lambda cursor: prompts_page(instance, cursor), "prompts")
    resources, resources_cut = _all_pages(lambda cursor: resources_page(instance, cursor), "resources")
    templates, templates_cut = _all_pages(lambda cursor: resource_templates_page(instance, cursor), "resourceTemplates")
    return {
        "tools": tools,
        "prompts": prompts,
        "resources": resources,
        "templates": templates,
        "cut": tools_cut or prompts_cut or resources_cut or templates_cut,
        "writes": grant.writes and not instance.read_only,
    }


def example_of(schema: Any) -> dict[str, Any]:
    """The arguments a tool's call form starts with: the first of its listed input schema's `examples` when that
    is an object, else its required arguments with placeholders (tools_app.tool_types.examples.from_schema)."""
    if not isinstance(schema, dict):
        return {}
    examples = schema.get("examples")
    if isinstance(examples, list) and examples and isinstance(examples[0], dict):
        return examples[0]
    return from_schema(schema)


def call_as_client(credential: Credential, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """tools/call `name`(`arguments`) through mcp_app's handler with `credential` (one marked with
    admin_user_id): {"result": the CallToolResult a client gets} or {"error": the JSON-RPC error's code and
    message}."""
    state = RequestState(caller=credential, key_hash=None)
    try:
        return {"result": call_tool_sync(state, name, arguments)}
    except MCPError as exc:
        if state.denied is not None:  # the instance went away since the page was shown: the HTTP refusal
            return {"error": {"code": state.denied.status, "message": state.denied.message}}
        return {"error": {"code": exc.code, "message": exc.message}}


def _shown(answer: dict[str, Any]) -> dict[str, Any]:
    """A tools/call answer as the page shows it: the text content, structuredContent and isError of a result
    (each cut at TRY_IT_MAX_CHARS), or the error; `json` is the whole answer."""
    whole = pretty_json(answer)
    shown: dict[str, Any] = {"json": whole[:TRY_IT_MAX_CHARS], "cut": len(whole) > TRY_IT_MAX_CHARS}
    if "error" in answer:
        return {**shown, "error": answer["error"]}
    result = answer["result"]
    texts = [part.get("text", "") for part in result.get("content", []) if part.get("type") == "text"]
    text = "\n\n".join(texts)
    structured = pretty_json(result["structuredContent"]) if "structuredContent" in result else None
    return {
        **shown,
        "is_error": bool(result.get("isError")),
        "text": text[:TRY_IT_MAX_CHARS],
        "structured": structured[:TRY_IT_MAX_CHARS] if structured is not None else None,
    }


def _call_from_form(request, credential: Credential) -> dict[str, Any]:
    """The page's tools/call: the tool named in the form, its arguments as the JSON object typed there."""
    name = request.POST.get("tool", "")
    text = request.POST.get("arguments", "").strip() or "{}"
    called: dict[str, Any] = {"tool": name, "arguments": text}
    try:
        arguments = parse_json(text, label="arguments")
    except ValidationError as exc:
        return {**called, "problem": " ".join(exc.messages)}
    if not isinstance(arguments, dict):
        return {**called, "problem": "The arguments must be a JSON object, e.g. {}."}
    return {**called, "answer": _shown(call_as_client(credential, name, arguments))}


def _tool_forms(tools: list[dict[str, Any]], called: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A call form per listed tool: its name, the arguments it shows (those just sent, or an example) and,
    for the tool just called, what the call answered."""
    forms = []
    for tool in tools:
        form = {
            "name": tool["name"],
            "description": tool.get("description", ""),
            "arguments": compact_json(example_of(tool.get("inputSchema"))),
        }
        if called is not None and called["tool"] == tool["name"]:
            form.update(called)
        forms.append(form)
    return forms


async def _check(url: str, key: str) -> dict[str, Any]:
    # One deadline, the whole check's (connection_check's wait_for): the client's own timeouts lie past it, so a
    # silent server is always "No answer within N seconds", never whichever of two equal timers fired first.
    async with httpx2.AsyncClient(headers={"authorization": f"Bearer {key}"}, timeout=CHECK_SECONDS + 5) as http:
        async with Client(streamable_http_client(url, http_client=http), mode="legacy", cache=None) as client:
            server = client.server_info
            tools = (await client.list_tools()).tools
    return {
        "ok": True,
        "server": f"{server.name} {server.version}" if server else "",
        "tools": len(tools),
        "names": [tool.name for tool in tools],
    }


def connection_check(url: str, key: str) -> dict[str, Any]:
    """initialize + tools/list with the SDK's client against `url`, `key` as the bearer token, in a thread of
    its own (the calling request's thread may be the one the server needs): {"ok", "server", "tools", "names"},
    or {"ok": False, "error": what went wrong, exactly}."""

    def run() -> dict[str, Any]:
        return asyncio.run(asyncio.wait_for(_check(url, key), CHECK_SECONDS))

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        try:
            return pool.submit(run).result(timeout=CHECK_SECONDS + 5)
        except (TimeoutError, concurrent.futures.TimeoutError):
            return {"ok": False, "error": f"No answer within {CHECK_SECONDS:g} seconds."}
        except BaseException as exc:  # noqa: BLE001 — the page shows any failure as it is
            return {"ok": False, "error": _describe(exc)}


def _describe(exc: BaseException) -> str:
    """The innermost errors of an exception group (anyio wraps the client's), as `Type: message` lines."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(inner) for inner in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"


@sensitive_post_parameters("key")  # Django's error reports never show the pasted key
@require_http_methods(["GET", "POST"])
def as_client_page(request, instance_id: int):
    """GET ?as=<key id>|owner: the lists for that credential. POST action=call (tool, arguments): that tool
    called as that credential. POST with=key (key=<plaintext>) or with=session: the connection check."""
    instance = get_object_or_404(McpInstance.objects.for_user(request.user).select_related("owner"), pk=instance_id)
    keys = list(instance.api_keys.filter(revoked_at__isnull=True).order_by("pk"))
    chosen = request.GET.get("as", OWNER)
    if chosen == OWNER:
        credential, label = owner_credential(instance), f"the owner ({instance.owner.username}) signed in"
        calling = owner_credential(instance, admin_user_id=request.user.pk)
    else:
        key = next((key for key in keys if str(key.pk) == chosen), None)
        if key is None:
            raise Http404("No active API key of this instance has that id.")
        credential = key_credential(instance, key)
        calling = key_credential(instance, key, admin_user_id=request.user.pk)
        label = f"API key {key.label or key.prefix}{' (read-only)' if key.read_only else ''}"
    check = called = None
    if request.method == "POST" and request.POST.get("action") == "call":
        # A disabled instance answers 404 to every client: nothing to call (its page lists nothing either).
        called = _call_from_form(request, calling) if instance.enabled else None
    elif request.method == "POST":
        check = _connection_check_from_form(request, instance, request.POST.get("with", WITH_KEY))
    listing = client_view(instance, credential) if instance.enabled else None
    context = {
        **admin.site.each_context(request),
        "opts": McpInstance._meta,
        "title": f"{instance.name} as a client sees it",
        "instance": instance,
        "keys": keys,
        "chosen": chosen,
        "credential_label": label,
        "endpoint_url": instance.endpoint_url(request),
        "listing": listing,
        "tool_forms": _tool_forms(listing["tools"], called) if listing is not None else [],
        "called": called,
        "check": check,
        "check_seconds": CHECK_SECONDS,
    }
    return TemplateResponse(request, "admin/tools_app/mcpinstance/as_client.html", context)


def _connection_check_from_form(request, instance: McpInstance, check_with: str) -> dict[str, Any]:
    """The connection check with the pasted key, or with the signed-in user's session (a token minted for it)."""
    url = instance.endpoint_url(request)
    if check_with == WITH_SESSION:
        with session_check_token(user=request.user, resource=url, seconds=CHECK_SECONDS + 5) as token:
            result = connection_check(url, token)
        return {**result, "as": f"your session ({request.user.get_username()})"}
    pasted = request.POST.get("key", "").strip()
    if not pasted:
        return {"ok": False, "error": "Paste one of this instance's API keys to check the connection."}
    return {**connection_check(url, pasted), "as": "the pasted key"}
