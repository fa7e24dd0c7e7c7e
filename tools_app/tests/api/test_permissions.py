"""The ownership matrix of the JSON API (SPEC §2, §6): every endpoint × owner, other user, superuser, anonymous.

Another user's object is a 404 (a reference to it a 400), anonymous is a 401 with no data, superusers see
everything; every denial leaves every row as it was.
"""

from dataclasses import dataclass
from typing import Any

import pytest

from tests.api_helpers import client_for, db_snapshot

pytestmark = pytest.mark.django_db

ACTORS = ("owner", "other", "superuser", "anonymous")


@dataclass(frozen=True)
class Endpoint:
    name: str
    method: str
    path: str  # formatted with the ids of the owner's objects
    expected: tuple[int, int, int, int]  # status for owner, other, superuser, anonymous
    body: dict[str, Any] | None = None
    listed: tuple[str, ...] = ()  # for lists: the objects that owner and superuser see and others don't
    id_field: str = "id"  # where a listed row keeps the object's id


ENDPOINTS = [
    # tables
    Endpoint("tables-list", "get", "/api/tables/", (200, 200, 200, 401), listed=("table",)),
    Endpoint("tables-create", "post", "/api/tables/", (201, 201, 201, 401), {"name": "new"}),
    Endpoint("tables-retrieve", "get", "/api/tables/{table}/", (200, 404, 200, 401)),
    Endpoint("tables-patch", "patch", "/api/tables/{table}/", (200, 404, 200, 401), {"name": "renamed"}),
    Endpoint("tables-put", "put", "/api/tables/{table}/", (200, 404, 200, 401), {"name": "renamed", "data": [1]}),
    Endpoint("tables-delete", "delete", "/api/tables/{table}/?force=true", (204, 404, 204, 401)),
    # tools
    Endpoint("tools-list", "get", "/api/tools/", (200, 200, 200, 401), listed=("tool", "spare_tool")),
    Endpoint(
        "tools-create-on-owners-table",
        "post",
        "/api/tools/",
        # other: the table is not one of its choices; superuser: a tool only mounts a table of its own owner.
        (201, 400, 400, 401),
        {"name": "new_tool", "type": "get_all_data", "table": "{table}", "description": "All data."},
    ),
    Endpoint("tools-retrieve", "get", "/api/tools/{tool}/", (200, 404, 200, 401)),
    Endpoint("tools-patch", "patch", "/api/tools/{tool}/", (200, 404, 200, 401), {"description": "Changed."}),
    Endpoint(
        "tools-put",
        "put",
        "/api/tools/{tool}/?force=true",
        (200, 404, 200, 401),
        {"name": "q2", "type": "query_data", "table": "{table}", "description": "Changed."},
    ),
    Endpoint("tools-delete", "delete", "/api/tools/{tool}/?force=true", (204, 404, 204, 401)),
    Endpoint(
        "tools-by-table", "get", "/api/tools/by-table/{table}/", (200, 404, 200, 401), listed=("tool", "spare_tool")
    ),
    Endpoint(
        "tools-call", "post", "/api/tools/{tool}/call/", (200, 404, 200, 401), {"arguments": {"query": "length(@)"}}
    ),
    # MCP instances
    Endpoint("instances-list", "get", "/api/mcp-instances/", (200, 200, 200, 401), listed=("instance",)),
    Endpoint("instances-create", "post", "/api/mcp-instances/", (201, 201, 201, 401), {"name": "N", "slug": "new"}),
    Endpoint("instances-retrieve", "get", "/api/mcp-instances/{instance}/", (200, 404, 200, 401)),
    Endpoint("instances-patch", "patch", "/api/mcp-instances/{instance}/", (200, 404, 200, 401), {"description": "x"}),
    Endpoint("instances-put", "put", "/api/mcp-instances/{instance}/", (405, 405, 405, 401), {"name": "x"}),
    Endpoint("instances-delete", "delete", "/api/mcp-instances/{instance}/?force=true", (204, 404, 204, 401)),
    # API keys
    Endpoint("keys-list", "get", "/api/mcp-instances/{instance}/keys/", (200, 404, 200, 401), listed=("key",)),
    Endpoint("keys-create", "post", "/api/mcp-instances/{instance}/keys/", (201, 404, 201, 401), {"label": "k"}),
    Endpoint("keys-retrieve", "get", "/api/mcp-instances/{instance}/keys/{key}/", (200, 404, 200, 401)),
    Endpoint("keys-revoke", "delete", "/api/mcp-instances/{instance}/keys/{key}/", (204, 404, 204, 401)),
    # bindings
    Endpoint("bindings-list", "get", "/api/bindings/", (200, 200, 200, 401), listed=("binding",)),
    Endpoint(
        "bindings-create",
        "post",
        "/api/bindings/",
        (201, 400, 201, 401),
        {"mcp_instance": "{instance}", "tool": "{spare_tool}"},
    ),
    Endpoint("bindings-retrieve", "get", "/api/bindings/{binding}/", (200, 404, 200, 401)),
    Endpoint("bindings-patch", "patch", "/api/bindings/{binding}/", (200, 404, 200, 401), {"enabled": False}),
    Endpoint("bindings-put", "put", "/api/bindings/{binding}/", (405, 405, 405, 401), {"enabled": False}),
    Endpoint("bindings-delete", "delete", "/api/bindings/{binding}/?force=true", (204, 404, 204, 401)),
    # registry (tools_app.api.registry): read-only views over the same ownership rule
    Endpoint(
        "search",
        "get",
        "/api/search/?q=query_data&method=regex",
        (200, 200, 200, 401),
        listed=("tool",),
        id_field="tool_id",
    ),
    Endpoint("instances-guide", "get", "/api/mcp-instances/{instance}/guide/", (200, 404, 200, 401)),
    Endpoint("instances-export", "get", "/api/mcp-instances/{instance}/export/", (200, 404, 200, 401)),
    Endpoint("tools-export", "get", "/api/tools/{tool}/export/", (200, 404, 200, 401)),
]


@pytest.fixture
def owned_objects(owner, other_user, superuser, make_table, make_tool, make_instance, bind, make_api_key):
    """The owner's objects (one of each), plus the three other actors."""
    table = make_table(owner)
    tool = make_tool(owner, table, name="q")
    spare_tool = make_tool(owner, table, type="get_all_data", name="spare")
    instance = make_instance(owner)
    binding = bind(instance, tool)
    key, _ = make_api_key(instance)
    return {
        "ids": {
            "table": table.pk,
            "tool": tool.pk,
            "spare_tool": spare_tool.pk,
            "instance": instance.pk,
            "binding": binding.pk,
            "key": key.pk,
        },
        "users": {"owner": owner, "other": other_user, "superuser": superuser, "anonymous": None},
    }


def _fill(value: Any, ids: dict[str, int]) -> Any:
    """Replace "{name}" placeholders in a body by the ids (as numbers)."""
    if isinstance(value, dict):
        return {key: _fill(item, ids) for key, item in value.items()}
    if isinstance(value, str) and value.startswith("{") and value.endswith("}"):
        return ids[value[1:-1]]
    return value


@pytest.mark.parametrize("actor", ACTORS)
@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=[endpoint.name for endpoint in ENDPOINTS])
def test_ownership_matrix(owned_objects, endpoint, actor):
    """Each actor gets its status; denials and reads write nothing; lists show only what the actor may see."""
    # given
    ids = owned_objects["ids"]
    expected = endpoint.expected[ACTORS.index(actor)]
    client = client_for(owned_objects["users"][actor])
    before = db_snapshot()

    # when
    call = getattr(client, endpoint.method)
    path = endpoint.path.format(**ids)
    response = call(path, _fill(endpoint.body, ids), format="json") if endpoint.body else call(path)

    # then
    assert response.status_code == expected, response.content
    denied = expected >= 400
    if denied:
        body = response.json()
        assert set(body) <= {"error", "message", "fields"}
        assert body["error"] in {"NOT_AUTHENTICATED", "NOT_FOUND", "VALIDATION_ERROR", "METHOD_NOT_ALLOWED"}
        assert db_snapshot() == before
    if expected == 401:
        assert response.headers["WWW-Authenticate"] == "Token"
    if endpoint.listed and expected == 200:
        listed = sorted(row[endpoint.id_field] for row in response.json()["results"])
        sees_them = actor in ("owner", "superuser")
        assert listed == (sorted(ids[name] for name in endpoint.listed) if sees_them else [])
    if endpoint.method == "get":
        assert db_snapshot() == before
