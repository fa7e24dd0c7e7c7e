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

The connection check is a real MCP session over HTTP (the SDK's client: initialize, then tools/list) against
the instance's endpoint URL, with a key the owner pastes into the form: the plaintext is only ever used for
that one session, never stored or logged. It is bounded by CHECK_SECONDS.
"""

import asyncio
import concurrent.futures
from typing import Any

import httpx2
from django.contrib import admin
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_app.auth import Credential
from mcp_app.features import prompts_page, resource_templates_page, resources_page
from mcp_app.handlers import tools_page
from mcp_app.requests import grant_of
from tools_app.models import ApiKey, McpInstance
from tools_app.oauth import SCOPE_ALL

CHECK_SECONDS = 10.0  # the whole connection check: connect, initialize, tools/list
MAX_PAGES = 20  # pages of each list shown (TOOLHUB_MCP_PAGE_SIZE each); a longer list says it was cut
OWNER = "owner"


def key_credential(instance: McpInstance, key: ApiKey) -> Credential:
    """The Credential a request with `key` opens on `instance` (mcp_app.auth.authenticate, from the same row)."""
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
    )


def owner_credential(instance: McpInstance) -> Credential:
    """The Credential of an OAuth client the owner authorized with every scope (tools:all)."""
    return Credential(
        instance_id=instance.pk,
        slug=instance.slug,
        api_key_id=None,
        owner_id=instance.owner_id,
        oauth_user_id=instance.owner_id,
        scopes=frozenset({SCOPE_ALL}),
        username=instance.owner.username,
    )


def _all_pages(page: Any, field: str) -> tuple[list[dict[str, Any]], bool]:
    """Every entry of a paged list (at most MAX_PAGES pages), and whether it was cut there."""
    entries: list[dict[str, Any]] = []
    cursor = None
    for _page in range(MAX_PAGES):
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
    """GET ?as=<key id>|owner: the lists for that credential. POST key=<plaintext>: the connection check."""
    instance = get_object_or_404(McpInstance.objects.for_user(request.user).select_related("owner"), pk=instance_id)
    keys = list(instance.api_keys.filter(revoked_at__isnull=True).order_by("pk"))
    chosen = request.GET.get("as", OWNER)
    if chosen == OWNER:
        credential, label = owner_credential(instance), f"the owner ({instance.owner.username}) signed in"
    else:
        key = next((key for key in keys if str(key.pk) == chosen), None)
        if key is None:
            raise Http404("No active API key of this instance has that id.")
        credential = key_credential(instance, key)
        label = f"API key {key.label or key.prefix}{' (read-only)' if key.read_only else ''}"
    check = None
    if request.method == "POST":
        pasted = request.POST.get("key", "").strip()
        if pasted:
            check = connection_check(instance.endpoint_url(request), pasted)
        else:
            check = {"ok": False, "error": "Paste one of this instance's API keys to check the connection."}
    context = {
        **admin.site.each_context(request),
        "opts": McpInstance._meta,
        "title": f"{instance.name} as a client sees it",
        "instance": instance,
        "keys": keys,
        "chosen": chosen,
        "credential_label": label,
        "endpoint_url": instance.endpoint_url(request),
        "listing": client_view(instance, credential) if instance.enabled else None,
        "check": check,
        "check_seconds": CHECK_SECONDS,
    }
    return TemplateResponse(request, "admin/tools_app/mcpinstance/as_client.html", context)
