"""Per-caller tool sets and pinned arguments (tools_app.grants), over MCP and the API.

A read-only key, an OAuth token without tools:all, a read-only instance or binding: no tool that changes data
in tools/list, the registry (search, definitions, guide, export) or the usage_guide prompt, and a call of one
is refused with nothing written. A binding's pinned arguments are out of every listed schema, cannot be sent,
and take their values from the caller's key.
"""

import json
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from oauth2_provider.models import AccessToken, get_application_model

from mcp_app.tests.mcp_harness import Harness, rpc_body
from tools_app import services
from tools_app.models import ApiKey, Binding, CallLog, Table, TableChange, Tool
from tools_app.oauth import resource_url
from tools_app.toolsets import generate_tools

WRITE_TYPES = ("create", "update", "delete")
CUSTOMERS = [
    {"id": 1, "customer": "acme", "item": "anvil"},
    {"id": 2, "customer": "globex", "item": "globe"},
    {"id": 3, "customer": "acme", "item": "rocket"},
]


@pytest.fixture
def shop(owner, table, make_tool, instance, bind):
    """Instance 'shop' with reads, writes and the registry tools, bound under their own names."""
    tools = {}
    for tool_type in ("query_data", "select", *WRITE_TYPES):
        tools[tool_type] = make_tool(owner, table, type=tool_type, name=f"orders_{tool_type}")
        bind(instance, tools[tool_type])
    for tool_type in ("search_tools", "get_tool_definition", "get_tool_usage_guide", "register_tool"):
        tools[tool_type] = make_tool(owner, type=tool_type, name=tool_type, description=f"Registry {tool_type}.")
        bind(instance, tools[tool_type])
    services.instance_update(instance=instance, allow_registration=True)
    full = services.api_key_issue(mcp_instance=instance, label="full")[1]
    reader = services.api_key_issue(mcp_instance=instance, label="reader", read_only=True)[1]
    return {"instance": instance, "tools": tools, "full": full, "reader": reader}


READS = ["get_tool_definition", "get_tool_usage_guide", "orders_query_data", "orders_select", "search_tools"]
EVERYTHING = sorted([*READS, "orders_create", "orders_delete", "orders_update", "register_tool"])


def listed(key: str, slug: str = "shop") -> list[str]:
    return sorted(tool["name"] for tool in Harness().rpc(slug, key, "tools/list")["result"]["tools"])


def searched(key: str) -> list[str]:
    result = Harness().call("shop", key, "search_tools", {"query": "orders registry tools", "limit": 50})["result"]
    return sorted(hit["tool_name"] for hit in result["structuredContent"]["results"])


def guide_names(text: str) -> list[str]:
    return sorted(line.split("`")[1] for line in text.splitlines() if line.startswith("### `"))


#
# Per-caller tool sets
#


def test_a_read_only_key_sees_the_same_set_without_writes_on_every_surface(client, owner, shop):
    """MCP tools/list, search_tools, get_tool_usage_guide, the usage_guide prompt and the API's search, guide and
    export for that key list one set: the tools that change no data."""
    # given
    reader = ApiKey.objects.get(label="reader")
    client.force_login(owner)
    pk = shop["instance"].pk

    # when
    over_mcp = {
        "tools/list": listed(shop["reader"]),
        "search_tools": searched(shop["reader"]),
        "get_tool_usage_guide": guide_names(
            Harness().call("shop", shop["reader"], "get_tool_usage_guide", {})["result"]["structuredContent"]["content"]
        ),
        "prompt": guide_names(
            Harness().rpc("shop", shop["reader"], "prompts/get", {"name": "usage_guide"})["result"]["messages"][0][
                "content"
            ]["text"]
        ),
    }
    over_api = {
        "export": sorted(
            t["name"] for t in client.get(f"/api/mcp-instances/{pk}/export/?key={reader.pk}").json()["tools"]
        ),
        "guide": guide_names(client.get(f"/api/mcp-instances/{pk}/guide/?key={reader.pk}").json()["content"]),
        "search": sorted(
            hit["tool_name"]
            for hit in client.get(
                f"/api/search/?q=orders+registry+tools&limit=50&mcp_instance={pk}&key={reader.pk}"
            ).json()["results"]
        ),
        "export read_only": sorted(
            t["name"] for t in client.get(f"/api/mcp-instances/{pk}/export/?read_only=true").json()["tools"]
        ),
    }

    # then
    assert over_mcp == dict.fromkeys(over_mcp, READS)
    assert over_api == dict.fromkeys(over_api, READS)
    assert listed(shop["full"]) == EVERYTHING
    owner_view = client.get(f"/api/mcp-instances/{pk}/export/").json()["tools"]
    assert sorted(t["name"] for t in owner_view) == EVERYTHING


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("orders_create", {"elements": [{"id": 9, "customer": "x"}]}),
        ("orders_update", {"elements": [{"id": 1, "status": "void"}]}),
        ("orders_delete", {"keys": [1]}),
        ("register_tool", {"name": "sneaky", "description": "x"}),
    ],
)
def test_a_read_only_key_calling_a_write_tool_is_refused_and_nothing_is_written(shop, table, name, arguments):
    # given
    version = table.version
    tools = Tool.objects.count()

    # when
    reply = Harness().call("shop", shop["reader"], name, arguments)

    # then: the tool is not in this caller's set, as it is not in its tools/list (JSON-RPC -32602)
    assert reply["error"]["code"] == -32602
    assert reply["error"]["message"] == (
        f"Unknown tool {name!r} for this caller: it changes data, and this API key is read-only."
    )
    assert Table.objects.get(pk=table.pk).version == version
    assert Tool.objects.count() == tools
    log = CallLog.objects.get()
    assert (log.tool_name, log.tool_id, log.status, log.error_code) == (name, None, "error", "TOOL_NOT_FOUND")
    assert Tool.objects.get(name=name).use_count == 0


def test_a_read_only_key_cannot_reach_a_write_tool_through_call_tool(shop, table):
    # given
    services.instance_update(instance=shop["instance"], discovery="search")
    version = table.version

    # when
    result = Harness().call(
        "shop",
        shop["reader"],
        "call_tool",
        {"tool_name": "orders_delete", "arguments": json.dumps({"keys": [1]})},
    )["result"]

    # then
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith(
        "TOOL_NOT_FOUND: Unknown tool 'orders_delete' for this caller: it changes data, and this API key is read-only."
    )
    assert Table.objects.get(pk=table.pk).version == version


def test_a_read_only_instance_and_a_read_only_binding_narrow_every_callers_set(shop, table):
    # given
    binding = Binding.objects.get(tool=shop["tools"]["delete"])
    services.binding_update(binding=binding, read_only=True)

    # when
    with_read_only_binding = listed(shop["full"])
    refused = Harness().call("shop", shop["full"], "orders_delete", {"keys": [1]})
    services.instance_update(instance=shop["instance"], read_only=True)
    with_read_only_instance = listed(shop["full"])
    refused_too = Harness().call("shop", shop["full"], "orders_create", {"elements": [{"id": 9}]})

    # then
    assert with_read_only_binding == [name for name in EVERYTHING if name != "orders_delete"]
    assert refused["error"]["message"].endswith("it changes data, and this instance or binding is read-only.")
    assert with_read_only_instance == READS
    assert refused_too["error"]["code"] == -32602
    assert Table.objects.get(pk=table.pk).version == 1


def _token(owner, slug: str, scope: str) -> str:
    app = get_application_model().objects.create(
        name="c", client_type="public", authorization_grant_type="authorization-code", redirect_uris="http://x/cb"
    )
    raw = "tho_" + ("R" if scope == "tools:read" else "A") * 43
    row = AccessToken(
        user=owner,
        application=app,
        expires=timezone.now() + timedelta(hours=1),
        scope=scope,
        resource=[resource_url("http://localhost", slug)],
    )
    row._raw_token = raw
    row.token = ""
    row.save()
    return raw


def test_a_token_without_tools_all_lists_no_write_tool_and_keeps_its_step_up_answer(owner, shop, table):
    # given
    token = _token(owner, "shop", "tools:read")

    # when
    names = listed(token)
    write = Harness().post(
        "shop", rpc_body("tools/call", {"name": "orders_delete", "arguments": {"keys": [1]}}), key=token
    )

    # then: the same set as a read-only key; a write is still the OAuth step-up (403 insufficient_scope)
    assert names == READS
    assert write.status_code == 403
    assert 'error="insufficient_scope"' in write.headers["www-authenticate"]
    assert Table.objects.get(pk=table.pk).version == 1
    assert CallLog.objects.count() == 0


def test_the_sdk_client_lists_only_what_a_read_only_key_may_use(shop):
    async def scenario(client):
        return sorted(tool.name for tool in (await client.list_tools()).tools)

    assert Harness().with_client("shop", shop["reader"], scenario) == READS


#
# Pinned arguments
#


@pytest.fixture
def accounts(owner, make_table, make_tool, instance, bind):
    """A `select` bound with `field` = "customer" and `keys` from the key's `customer` attribute; an `update`
    bound with `dry_run` = true; two keys for two customers and one without the attribute."""
    table = make_table(owner, name="accounts", data=[dict(row) for row in CUSTOMERS])
    mine = make_tool(owner, table, type="select", name="my_orders", description="My orders.")
    bind(
        instance,
        mine,
        pinned_arguments={"field": {"value": "customer"}, "keys": {"from": "key.attributes.customer"}},
    )
    preview = make_tool(owner, table, type="update", name="preview_change", description="Preview a change.")
    bind(instance, preview, pinned_arguments={"dry_run": {"value": True}})
    keys = {
        name: services.api_key_issue(mcp_instance=instance, label=name, attributes=attributes)[1]
        for name, attributes in (
            ("acme", {"customer": "acme"}),
            ("globex", {"customer": "globex"}),
            ("nobody", {}),
        )
    }
    return {"table": table, "keys": keys, "select": mine, "update": preview, "instance": instance}


def test_two_keys_with_different_pins_read_only_their_own_records(accounts):
    # when
    acme = Harness().call("shop", accounts["keys"]["acme"], "my_orders", {})["result"]
    globex = Harness().call("shop", accounts["keys"]["globex"], "my_orders", {})["result"]

    # then
    assert acme["structuredContent"] == {"items": [CUSTOMERS[0], CUSTOMERS[2]], "not_found": []}
    assert globex["structuredContent"] == {"items": [CUSTOMERS[1]], "not_found": []}


@pytest.mark.parametrize(
    ("arguments", "named"),
    [({"keys": ["globex"]}, "'keys' is"), ({"field": "id", "keys": [2]}, "'field', 'keys' are")],
)
def test_a_pinned_argument_cannot_be_overridden(accounts, arguments, named):
    # when
    result = Harness().call("shop", accounts["keys"]["acme"], "my_orders", arguments)["result"]

    # then
    assert result["isError"] is True
    assert result["content"][0]["text"] == (
        f"INVALID_ARGUMENTS: Invalid arguments: {named} fixed by this server for this tool and cannot be sent; "
        f"call it without {'it' if named.endswith('is') else 'them'}."
    )
    assert "globex" not in json.dumps(result)


def test_a_pinned_write_argument_cannot_be_overridden_and_nothing_is_written(accounts):
    # given
    table = accounts["table"]

    # when
    refused = Harness().call(
        "shop", accounts["keys"]["acme"], "preview_change", {"elements": [{"id": 1, "item": "x"}], "dry_run": False}
    )["result"]
    previewed = Harness().call(
        "shop", accounts["keys"]["acme"], "preview_change", {"elements": [{"id": 1, "item": "x"}]}
    )["result"]

    # then: refused, and the allowed call is a dry run (the pin), so the table is unchanged
    assert refused["content"][0]["text"].startswith("INVALID_ARGUMENTS: Invalid arguments: 'dry_run' is fixed")
    assert previewed["structuredContent"]["dry_run"] is True
    assert Table.objects.get(pk=table.pk).version == 1
    assert TableChange.objects.filter(table=table).count() == 0
    assert Table.objects.get(pk=table.pk).data == CUSTOMERS


def test_the_write_audit_records_the_effective_arguments(accounts, owner):
    # given: a real write whose pinned argument says which record
    table = accounts["table"]
    writer = services.tool_create(owner=owner, name="rename_first", type="update", table=table, description="x")
    services.binding_create(
        mcp_instance=accounts["instance"], tool=writer, pinned_arguments={"idempotency_key": {"from": "key.label"}}
    )

    # when
    result = Harness().call("shop", accounts["keys"]["acme"], "rename_first", {"elements": [{"id": 1, "item": "axe"}]})

    # then
    assert result["result"]["isError"] is False
    change = TableChange.objects.filter(table=table).latest("version")
    assert change.arguments == {"elements": [{"id": 1, "item": "axe"}], "idempotency_key": "acme"}


def test_pinned_arguments_are_not_in_any_listed_schema_and_the_guide_names_them(client, owner, accounts):
    # when
    entry = next(
        tool
        for tool in Harness().rpc("shop", accounts["keys"]["acme"], "tools/list")["result"]["tools"]
        if tool["name"] == "my_orders"
    )
    client.force_login(owner)
    exported = client.get(f"/api/mcp-instances/{accounts['instance'].pk}/export/?format=openai").json()
    guide = client.get(f"/api/mcp-instances/{accounts['instance'].pk}/guide/?tool_names=my_orders").json()["content"]

    # then
    assert entry["inputSchema"]["properties"] == {}
    assert "required" not in entry["inputSchema"]
    function = next(t["function"] for t in exported["tools"] if t["function"]["name"] == "my_orders")
    assert function["parameters"]["properties"] == {}
    assert (
        '**Set by the server** (do not send them): `field = "customer"`; '
        "`keys = the caller's key.attributes.customer`" in guide
    )


def test_a_key_without_the_pinned_attribute_does_not_see_the_tool_and_cannot_call_it(accounts):
    # when
    names = listed(accounts["keys"]["nobody"])
    reply = Harness().call("shop", accounts["keys"]["nobody"], "my_orders", {})

    # then
    assert "my_orders" not in names
    assert "preview_change" in names
    assert reply["error"]["message"] == (
        "Unknown tool 'my_orders' for this caller: its binding takes arguments from key.attributes.customer, "
        "which this caller does not have."
    )


def test_a_binding_with_pins_is_no_resource(accounts):
    # when
    templates = Harness().rpc("shop", accounts["keys"]["acme"], "resources/templates/list")["result"]

    # then
    assert templates["resourceTemplates"] == []


@pytest.mark.parametrize(
    ("pins", "message"),
    [
        (
            {"customer": {"value": "acme"}},
            "pinned_arguments['customer']: the tool's input schema declares no argument 'customer' (it declares: "
            "field, keys).",
        ),
        ({"keys": {"value": "acme"}}, "pinned_arguments['keys']: the value fails the tool's input schema: "),
        ({"keys": {"from": "key.secret"}}, "pinned_arguments['keys']: unknown source 'key.secret'"),
        ({"keys": {"value": 1, "from": "key.label"}}, "pinned_arguments['keys'] must be {\"value\": <json>}"),
        (False, "pinned_arguments must be an object"),
    ],
)
def test_a_pin_that_does_not_fit_the_tool_is_a_400_naming_pinned_arguments(
    client, owner, table, make_tool, instance, pins, message
):
    # given
    tool = make_tool(owner, table, type="select", name="by_id")
    client.force_login(owner)

    # when
    response = client.post(
        "/api/bindings/",
        {"mcp_instance": instance.pk, "tool": tool.pk, "pinned_arguments": pins},
        content_type="application/json",
    )

    # then
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "VALIDATION_ERROR"
    assert body["fields"]["pinned_arguments"][0].startswith(message)
    assert Binding.objects.count() == 0


def test_a_binding_saves_and_shows_its_pins_through_the_api(client, owner, table, make_tool, instance):
    # given
    tool = make_tool(owner, table, type="select", name="by_id")
    client.force_login(owner)
    pins = {"keys": {"from": "key.attributes.customer"}, "field": {"value": "customer"}}

    # when
    created = client.post(
        "/api/bindings/",
        {"mcp_instance": instance.pk, "tool": tool.pk, "pinned_arguments": pins},
        content_type="application/json",
    )

    # then
    assert created.status_code == 201
    assert created.json()["pinned_arguments"] == pins
    assert created.json()["read_only"] is False
    assert Binding.objects.get().pinned_arguments == pins


#
# Keys through the API
#


def test_a_key_is_issued_read_only_with_attributes(client, owner, instance):
    # given
    client.force_login(owner)

    # when
    created = client.post(
        f"/api/mcp-instances/{instance.pk}/keys/",
        {"label": "agent", "read_only": True, "attributes": {"customer": "acme"}},
        content_type="application/json",
    )
    listed_keys = client.get(f"/api/mcp-instances/{instance.pk}/keys/").json()["results"]

    # then
    assert created.status_code == 201
    body = created.json()
    assert (body["label"], body["read_only"], body["attributes"]) == ("agent", True, {"customer": "acme"})
    assert body["key"].startswith("thk_")
    assert [(k["label"], k["read_only"], k["attributes"]) for k in listed_keys] == [
        ("agent", True, {"customer": "acme"})
    ]


@pytest.mark.parametrize(
    ("attributes", "message"),
    [
        ({"customer": 7}, "attributes['customer'] must be a string (got int)."),
        ({"bad name": "x"}, "attributes: the name 'bad name' is not 1-64 characters of A-Z a-z 0-9 _ . -."),
        (False, 'attributes must be a JSON object of strings, e.g. {"customer": "acme"}.'),
    ],
)
def test_bad_key_attributes_are_a_400_and_no_key_is_issued(client, owner, instance, attributes, message):
    # given
    client.force_login(owner)

    # when
    response = client.post(
        f"/api/mcp-instances/{instance.pk}/keys/", {"attributes": attributes}, content_type="application/json"
    )

    # then
    assert response.status_code == 400
    assert response.json()["fields"]["attributes"] == [message]
    assert ApiKey.objects.count() == 0


#
# The call proxy names the instance's own registry tools
#


def test_call_tool_names_the_instances_registry_tools_by_their_effective_names(owner, make_tool, instance, bind, table):
    # given
    services.instance_update(instance=instance, discovery="search")
    bind(instance, make_tool(owner, type="search_tools", name="search_tools"), name_override="find_tools")
    bind(instance, make_tool(owner, type="get_tool_definition", name="gtd"), name_override="tool_definition")
    bind(instance, make_tool(owner, table, name="orders_query"))
    key = services.api_key_issue(mcp_instance=instance)[1]

    # when
    entry = Harness().rpc("shop", key, "tools/list")["result"]["tools"][0]
    missing = Harness().call("shop", key, "call_tool", {"tool_name": "order_qery"})["result"]
    found = Harness().call("shop", key, "find_tools", {"query": "orders"})["result"]

    # then
    assert entry["name"] == "call_tool"
    assert "find a tool with find_tools (tool_definition gives its input schema)" in entry["description"]
    assert "search_tools" not in entry["description"]
    assert missing["content"][0]["text"].endswith(
        "Did you mean: orders_query? find_tools finds a tool by what it does."
    )
    assert "(`tool_definition` gives its input schema)" in found["structuredContent"]["markdown"]


def test_call_tool_says_when_no_search_tool_is_bound(owner, make_tool, instance, bind, table):
    # given
    services.instance_update(instance=instance, discovery="search")
    bind(instance, make_tool(owner, table, name="orders_query"))
    key = services.api_key_issue(mcp_instance=instance)[1]

    # when
    entry = Harness().rpc("shop", key, "tools/list")["result"]["tools"][0]
    missing = Harness().call("shop", key, "call_tool", {"tool_name": "nothing_like_it"})["result"]

    # then
    assert "no search tool is bound here" in entry["description"]
    assert missing["content"][0]["text"].endswith("No search tool is bound here.")


#
# Strict function-calling hosts
#


def strict_problems(schema, path="$", root=True):
    """Why OpenAI Agents' strict conversion (agents.strict_schema.ensure_strict_json_schema with open objects
    rejected, as its MCP conversion runs it) would fall back to a non-strict schema: an object that permits
    undeclared properties, `additionalProperties` other than false, a root `anyOf`, a `$ref`."""
    problems = []
    if not isinstance(schema, dict):
        return [f"{path}: not a schema"]
    if root and "anyOf" in schema:
        problems.append(f"{path}: anyOf at the root")
    if "$ref" in schema:
        problems.append(f"{path}: $ref")
    kinds = schema.get("type")
    is_object = kinds == "object" or (isinstance(kinds, list) and "object" in kinds) or "properties" in schema
    if is_object and schema.get("additionalProperties", False) is not False:
        problems.append(f"{path}: additionalProperties is not false")
    elif is_object and not schema.get("properties") and "additionalProperties" not in schema:
        problems.append(f"{path}: an object that permits undeclared properties")
    for name, sub in (schema.get("properties") or {}).items():
        problems += strict_problems(sub, f"{path}.{name}", False)
    if isinstance(schema.get("items"), dict):
        problems += strict_problems(schema["items"], f"{path}[]", False)
    for index, sub in enumerate(schema.get("anyOf") or []):
        problems += strict_problems(sub, f"{path}.anyOf[{index}]", False)
    return problems


def test_every_generated_tool_and_call_tool_pass_the_strict_conversion(owner, make_table, instance):
    # given
    listing = make_table(owner, name="orders")
    catalog = make_table(
        owner,
        name="catalog",
        data={"KB-01": {"name": "keyboard", "price": 99}, "MS-02": {"name": "mouse", "price": 25}},
    )
    generate_tools(owner=owner, table=listing, writes=True, mcp_instance=instance)
    generate_tools(owner=owner, table=catalog, writes=True, mcp_instance=instance)
    key = services.api_key_issue(mcp_instance=instance)[1]

    # when
    tools = Harness().rpc("shop", key, "tools/list")["result"]["tools"]
    services.instance_update(instance=instance, discovery="search")
    proxy = Harness().rpc("shop", key, "tools/list")["result"]["tools"][0]

    # then
    assert len(tools) == 16
    assert {tool["name"]: strict_problems(tool["inputSchema"]) for tool in tools} == {
        tool["name"]: [] for tool in tools
    }
    assert proxy["name"] == "call_tool"
    assert strict_problems(proxy["inputSchema"]) == []


def test_what_a_strict_host_sends_is_accepted(owner, make_table, instance, table):
    """Strict hosts send every property, null for those they have no value for."""
    # given
    generate_tools(owner=owner, table=table, writes=True, mcp_instance=instance)
    services.instance_update(instance=instance, discovery="search")
    key = services.api_key_issue(mcp_instance=instance)[1]
    nulls = {"expected_version": None, "dry_run": None, "idempotency_key": None}
    record = {"id": 4, "customer": "barbara", "status": "new", "total": 3}

    # when
    created = Harness().call("shop", key, "orders_create", {"elements": [record], **nulls})["result"]
    updated = Harness().call(
        "shop",
        key,
        "call_tool",
        {"tool_name": "orders_update", "arguments": json.dumps({"elements": [{**record, "status": "paid"}], **nulls})},
    )["result"]
    refused = Harness().call("shop", key, "orders_create", {"elements": [{"id": 5, "colour": "red"}]})["result"]

    # then
    assert created["structuredContent"] == {"created": 1, "version": 2}
    assert updated["structuredContent"] == {"updated": 1, "version": 3}
    assert Table.objects.get(pk=table.pk).data[-1] == {**record, "status": "paid"}
    assert refused["content"][0]["text"].startswith("INVALID_ARGUMENTS")
    assert Table.objects.get(pk=table.pk).version == 3


#
# The admin, and a tool edited under its pins
#


def test_the_admin_issues_a_read_only_key_with_attributes_and_shows_it(client, owner, instance):
    # given
    client.force_login(owner)

    # when
    created = client.post(
        reverse("admin:tools_app_mcpinstance_key_create", args=[instance.pk]),
        {"label": "agent", "read_only": "on", "attributes": '{"customer": "acme"}'},
    )
    refused = client.post(
        reverse("admin:tools_app_mcpinstance_key_create", args=[instance.pk]),
        {"label": "bad", "attributes": '{"customer": 7}'},
        follow=True,
    )
    page = client.get(reverse("admin:tools_app_mcpinstance_change", args=[instance.pk])).content.decode()

    # then
    assert created.status_code == 200
    key = ApiKey.objects.get()
    assert (key.label, key.read_only, key.attributes) == ("agent", True, {"customer": "acme"})
    assert "The key was not created: attributes[&#x27;customer&#x27;] must be a string (got int)." in (
        refused.content.decode()
    )
    assert "read-only<br><code>customer=acme</code>" in page


def test_the_admin_binding_form_checks_and_saves_pins(client, owner, table, make_tool, instance):
    # given
    tool = make_tool(owner, table, type="select", name="by_id")
    client.force_login(owner)
    url = reverse("admin:tools_app_binding_add")
    base = {"mcp_instance": instance.pk, "tool": tool.pk, "enabled": "on"}

    # when
    refused = client.post(url, {**base, "pinned_arguments": '{"customer": {"value": 1}}'})
    saved = client.post(url, {**base, "pinned_arguments": '{"keys": {"from": "key.label"}}'})
    listing = client.get(reverse("admin:tools_app_binding_changelist")).content.decode()

    # then
    assert refused.status_code == 200
    assert "the tool&#x27;s input schema declares no argument &#x27;customer&#x27;" in refused.content.decode()
    assert saved.status_code == 302
    assert Binding.objects.get().pinned_arguments == {"keys": {"from": "key.label"}}
    assert "keys = the caller&#x27;s key.label" in listing


def test_a_tool_whose_schema_no_longer_declares_a_pinned_argument_is_refused_not_run_unpinned(accounts, owner):
    # given: the select's schema loses `field`, which the binding pins
    tool = accounts["select"]
    schema = {
        "type": "object",
        "properties": {"keys": {"type": "array", "items": {"type": "string"}, "minItems": 1}},
        "required": ["keys"],
    }
    services.tool_update(tool=tool, input_schema=schema, force=True)  # past the change guard

    # when
    result = Harness().call("shop", accounts["keys"]["acme"], "my_orders", {})["result"]

    # then
    assert result["isError"] is True
    assert result["content"][0]["text"] == (
        "TOOL_NOT_CALLABLE: The tool 'my_orders' cannot run here: its binding pins 'field', which its input schema "
        "no longer declares. The owner must change the binding or the tool."
    )
