"""A binding that narrows the records its read tools see (`where` in pinned_arguments, tools_app.grants).

Two keys whose `customer` attributes differ call the same tools of the same table with the same arguments and
each gets only its own customer's records, on a document table and on a rows table, whatever JMESPath it
sends; nothing outside the narrowing is reachable (select answers it as not found); a narrowed binding of a
write is refused when saved, and nothing is written.
"""

import json
import pickle

import jmespath
import pytest
from django.urls import reverse

from mcp_app.tests.mcp_harness import Harness
from tools_app import services
from tools_app.data_access import narrowing, operations
from tools_app.data_access.operations import Mount
from tools_app.execution import heavy, records
from tools_app.execution.call_limits import default_limits
from tools_app.execution.executors import execute
from tools_app.execution.heavy import Job
from tools_app.models import ApiKey, Binding, CallLog, Table, TableChange

ORDERS = [
    {"id": 1, "customer": "acme", "item": "anvil", "total": 30},
    {"id": 2, "customer": "globex", "item": "globe", "total": 12.5},
    {"id": 3, "customer": "acme", "item": "rocket", "total": 0},
    {"id": 4, "customer": "initech", "item": "stapler", "total": 4},
    {"id": 5, "customer": "acme", "item": "magnet", "total": 7},
    {"id": 6, "customer": "globex", "item": "map", "total": -1},
    {"id": 7, "item": "no customer", "total": 99},
    {"id": 8, "customer": ["acme"], "item": "listed customer", "total": 1},
]
MINE = {"acme": [ORDERS[0], ORDERS[2], ORDERS[4]], "globex": [ORDERS[1], ORDERS[5]]}
NARROWING = {"where": {"customer": {"from": "key.attributes.customer"}}}
EXPRESSIONS = [
    "[].id",
    "length(@)",
    "[?total > `0`]",
    "sort_by(@, &total)[].item",
    "max_by(@, &total).id",
    "@",
    "[*].{i: id, c: customer}",
    "sum([].total)",
    "[?customer == 'initech'] | length(@)",
    "@ | @ | [].id",
    "to_array(@)[0].id",
]


@pytest.fixture(params=["document", "rows"])
def narrowed(request, owner, make_table, make_tool, instance, bind):
    """Instance 'shop': query, select, get_all, preview and schema tools of one orders table, each bound with
    the narrowing to the key's `customer`; keys for acme, globex and one without the attribute."""
    table = make_table(owner, name="orders", data=[dict(order) for order in ORDERS], storage="document")
    tools = {}
    for tool_type in ("query_data", "select", "get_all_data", "preview", "get_data_schema"):
        tools[tool_type] = make_tool(owner, table, type=tool_type, name=f"orders_{tool_type}")
        bind(instance, tools[tool_type], pinned_arguments=NARROWING)
    if request.param == "rows":
        assert records.table_to_rows(table.pk) is True
    keys = {
        name: services.api_key_issue(mcp_instance=instance, label=name, attributes=attributes)[1]
        for name, attributes in (("acme", {"customer": "acme"}), ("globex", {"customer": "globex"}), ("nobody", {}))
    }
    return {"table": table, "tools": tools, "keys": keys, "instance": instance, "storage": request.param}


def call(key: str, name: str, arguments: dict) -> dict:
    return Harness().call("shop", key, name, arguments)["result"]


def value(result: dict):
    assert result.get("isError") is not True, result["content"][0]["text"]
    content = result["structuredContent"]
    return content["result"] if set(content) == {"result"} else content


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_two_keys_query_the_same_table_with_the_same_expression_and_see_only_their_own_records(narrowed, expression):
    # when
    answers = {who: value(call(narrowed["keys"][who], "orders_query_data", {"query": expression})) for who in MINE}

    # then: exactly what the expression gives over the caller's own records
    assert answers == {who: jmespath.search(expression, MINE[who]) for who in MINE}
    assert answers["acme"] != answers["globex"] or expression.endswith("length(@)")


def test_the_narrowed_query_runs_as_sql_on_rows_and_answers_the_same(narrowed, monkeypatch):
    """Over rows the narrowing is the first filter of the one SQL statement: no record is read in chunks."""
    if narrowed["storage"] != "rows":
        pytest.skip("rows only")

    # given
    def no_chunks(*args, **kwargs):
        raise AssertionError("the records were read in chunks")

    monkeypatch.setattr(records, "_chunks", no_chunks)

    # when
    answer = value(call(narrowed["keys"]["acme"], "orders_query_data", {"query": "[?total > `0`].item"}))
    counted = value(call(narrowed["keys"]["globex"], "orders_query_data", {"query": "length(@)"}))

    # then
    assert answer == ["anvil", "magnet"]
    assert counted == 2


@pytest.mark.parametrize(
    "escape",
    [
        "$",
        "$.orders",
        "@.@",
        ")] | [*]",
        "@) | `1` | (@",
        "`[1]` || @",
        "[?customer != 'acme'] || `\"x\"`",
        "not_null(@, `[]`)",
    ],
)
def test_no_expression_reaches_records_outside_the_narrowing(narrowed, escape):
    # when
    result = call(narrowed["keys"]["acme"], "orders_query_data", {"query": escape})

    # then: an invalid expression is refused; a valid one sees the acme records only
    text = json.dumps(result)
    assert "globex" not in text
    assert "initech" not in text
    assert "no customer" not in text
    if result.get("isError"):
        assert result["content"][0]["text"].startswith("INVALID_QUERY")
    else:
        assert value(result) == jmespath.search(escape, MINE["acme"])


def test_select_of_a_key_outside_the_narrowing_answers_not_found(narrowed):
    # when
    answer = value(call(narrowed["keys"]["acme"], "orders_select", {"keys": [1, 2, 4, 5, 7, 8, 99, "2", 1]}))

    # then
    assert answer == {"items": [ORDERS[0], ORDERS[4]], "not_found": ["2", 4, 7, 8, 99]}


def test_get_all_preview_and_schema_see_only_the_narrowed_records(narrowed):
    # when
    acme = narrowed["keys"]["acme"]
    everything = value(call(acme, "orders_get_all_data", {}))
    previewed = value(call(acme, "orders_preview", {}))
    shape = value(call(acme, "orders_get_data_schema", {}))
    globex_shape = value(call(narrowed["keys"]["globex"], "orders_get_data_schema", {}))

    # then
    assert everything == MINE["acme"]
    assert previewed == MINE["acme"]
    assert shape["item_count"] == 3
    assert globex_shape["item_count"] == 2
    assert shape["fields"] == {
        "id": ["integer"],
        "customer": ["string"],
        "item": ["string"],
        "total": ["integer"],
    }


def test_a_narrowed_call_is_logged_with_its_effective_narrowing_and_cannot_send_where(narrowed):
    # when
    sent = call(narrowed["keys"]["acme"], "orders_query_data", {"query": "@", "where": {"customer": "globex"}})
    value(call(narrowed["keys"]["acme"], "orders_query_data", {"query": "length(@)"}))

    # then
    assert sent["isError"] is True
    assert sent["content"][0]["text"].startswith("INVALID_ARGUMENTS: Invalid arguments: 'where' is fixed")
    assert "globe" not in json.dumps(sent)
    logged = CallLog.objects.filter(status="ok").get()
    assert json.loads(logged.arguments) == {"query": "length(@)", "where": {"customer": "acme"}}


def test_a_key_without_the_attribute_does_not_see_narrowed_tools(narrowed):
    # when
    listing = Harness().rpc("shop", narrowed["keys"]["nobody"], "tools/list")["result"]["tools"]
    names = [tool["name"] for tool in listing]
    reply = Harness().rpc(
        "shop", narrowed["keys"]["nobody"], "tools/call", {"name": "orders_query_data", "arguments": {"query": "@"}}
    )

    # then
    assert names == []
    assert reply["error"]["code"] == -32602
    assert "key.attributes.customer" in reply["error"]["message"]


def test_the_guide_and_the_definition_show_the_narrowing(client, owner, narrowed):
    # given
    client.force_login(owner)
    pk = narrowed["instance"].pk
    key_id = ApiKey.objects.get(label="acme").pk

    # when
    guide = client.get(f"/api/mcp-instances/{pk}/guide/?key={key_id}&tool_names=orders_query_data").json()["content"]
    over_mcp = call(narrowed["keys"]["acme"], "orders_query_data", {"query": "length(@)"})
    listed = {
        tool["name"]: tool["inputSchema"]
        for tool in Harness().rpc("shop", narrowed["keys"]["acme"], "tools/list")["result"]["tools"]
    }

    # then
    assert (
        "**Set by the server** (do not send them): "
        "`only records whose customer = the caller's key.attributes.customer`" in guide
    )
    assert value(over_mcp) == 3
    assert "where" not in listed["orders_query_data"]["properties"]
    assert listed["orders_query_data"]["required"] == ["query"]


def test_call_tool_in_search_mode_keeps_the_narrowing(narrowed, owner, make_tool, bind):
    # given
    instance = narrowed["instance"]
    bind(instance, make_tool(owner, type="search_tools", name="find_tools", description="Find tools."))
    services.instance_update(instance=instance, discovery="search")

    # when
    result = call(
        narrowed["keys"]["globex"],
        "call_tool",
        {"tool_name": "orders_query_data", "arguments": json.dumps({"query": "[].item"})},
    )

    # then
    assert value(result) == ["globe", "map"]


@pytest.mark.parametrize("tool_type", ["create", "update", "delete"])
def test_a_narrowed_write_binding_is_refused_when_saved_and_nothing_is_written(
    client, owner, make_table, make_tool, instance, tool_type
):
    # given
    table = make_table(owner, name="orders", data=[dict(order) for order in ORDERS])
    tool = make_tool(owner, table, type=tool_type, name=f"orders_{tool_type}")
    client.force_login(owner)

    # when
    response = client.post(
        "/api/bindings/",
        {"mcp_instance": instance.pk, "tool": tool.pk, "pinned_arguments": NARROWING},
        content_type="application/json",
    )

    # then
    assert response.status_code == 400
    assert response.json()["fields"]["pinned_arguments"] == [
        "pinned_arguments['where'] narrows the records a read sees, and this tool is a "
        f"{tool_type} tool (it fits get_all_data, get_data_schema, preview, query_data, select); writes "
        "through a narrowed binding are not offered."
    ]
    assert Binding.objects.count() == 0
    assert Table.objects.get(pk=table.pk).version == 1
    assert TableChange.objects.count() == 0


@pytest.mark.parametrize(
    ("narrowing", "message"),
    [
        ({}, "must be an object of 1 to 20 record fields"),
        ({"customer": {"from": "key.secret"}}, "unknown source 'key.secret'"),
        ({"customer": "acme"}, 'must be {"value": <json>} or {"from": "<source>"}'),
        ({"customer": {"value": "x" * 300}}, "a constant is at most 200 characters of JSON"),
    ],
)
def test_a_bad_narrowing_is_a_400_naming_it(client, owner, make_table, make_tool, instance, narrowing, message):
    # given
    table = make_table(owner, name="orders")
    tool = make_tool(owner, table, type="query_data", name="orders_query")
    client.force_login(owner)

    # when
    response = client.post(
        "/api/bindings/",
        {"mcp_instance": instance.pk, "tool": tool.pk, "pinned_arguments": {"where": narrowing}},
        content_type="application/json",
    )

    # then
    assert response.status_code == 400
    assert message in response.json()["fields"]["pinned_arguments"][0]
    assert Binding.objects.count() == 0


def test_a_constant_narrowing_serves_one_fixed_subset_to_every_caller(owner, make_table, make_tool, instance, bind):
    # given
    table = make_table(owner, name="orders", data=[dict(order) for order in ORDERS])
    tool = make_tool(owner, table, type="query_data", name="cheap_orders")
    bind(instance, tool, pinned_arguments={"where": {"total": {"value": 0}}})
    key = services.api_key_issue(mcp_instance=instance, label="any")[1]

    # when
    answer = value(call(key, "cheap_orders", {"query": "[].item"}))

    # then
    assert answer == ["rocket"]


def test_the_admin_binding_form_saves_a_narrowing_refuses_one_on_a_write_and_lists_it(
    client, owner, make_table, make_tool, instance
):
    # given
    table = make_table(owner, name="orders", data=[dict(order) for order in ORDERS])
    query = make_tool(owner, table, type="query_data", name="orders_query")
    delete = make_tool(owner, table, type="delete", name="orders_delete")
    client.force_login(owner)
    url = reverse("admin:tools_app_binding_add")

    # when
    refused = client.post(
        url,
        {"mcp_instance": instance.pk, "tool": delete.pk, "enabled": "on", "pinned_arguments": json.dumps(NARROWING)},
    )
    saved = client.post(
        url, {"mcp_instance": instance.pk, "tool": query.pk, "enabled": "on", "pinned_arguments": json.dumps(NARROWING)}
    )
    listing = client.get(reverse("admin:tools_app_binding_changelist")).content.decode()

    # then
    assert refused.status_code == 200
    assert "writes through a narrowed binding are not offered" in refused.content.decode()
    assert saved.status_code == 302
    assert Binding.objects.get().pinned_arguments == NARROWING
    assert "only records whose customer = the caller&#x27;s key.attributes.customer" in listing


def test_a_narrowed_read_moved_to_a_heavy_worker_runs_narrowed_there(narrowed, monkeypatch):
    """A document table's narrowed read hands the heavy lane an operation that narrows (data_access.narrowing),
    and the Job a heavy worker would receive (pickled) runs the narrowing itself over the whole table."""
    if narrowed["storage"] != "document":
        pytest.skip("a rows table is read where its rows are, not in a heavy worker")
    # given
    handed = []
    real_read = heavy.read

    def recording_read(operation, **kwargs):
        handed.append((operation, kwargs["extra"]))
        return real_read(operation, **kwargs)

    monkeypatch.setattr(heavy, "read", recording_read)

    # when
    answer = value(call(narrowed["keys"]["globex"], "orders_query_data", {"query": "[].item"}))
    operation, extra = handed[0]
    job = Job(operation, narrowed["table"].pk, 1, "", "id", {"query": "[].item"}, extra, default_limits(), 0.0, 0.0)
    shipped = pickle.loads(pickle.dumps(job))
    in_worker = shipped.operation(
        ORDERS, Mount(shipped.json_path, shipped.key_field), shipped.arguments, *shipped.extra
    )

    # then
    assert answer == ["globe", "map"]
    assert operation is narrowing.read_narrowed
    assert extra == (operations.query_data, {"customer": "globex"})
    assert in_worker == ["globe", "map"]


@pytest.mark.parametrize("storage", ["document", "rows"])
def test_an_object_of_entries_is_narrowed_to_its_matching_entries(
    owner, make_table, make_tool, instance, bind, storage
):
    # given
    catalog = {
        "KB-01": {"vendor": "acme", "price": 99},
        "MS-02": {"vendor": "globex", "price": 25},
        "PN-03": {"vendor": "acme", "price": 3},
    }
    table = make_table(owner, name="catalog", data=catalog, storage="document")
    for tool_type in ("query_data", "select", "get_all_data"):
        tool = make_tool(owner, table, type=tool_type, name=f"catalog_{tool_type}")
        bind(instance, tool, pinned_arguments={"where": {"vendor": {"from": "key.attributes.vendor"}}})
    if storage == "rows":
        assert records.table_to_rows(table.pk) is True
    key = services.api_key_issue(mcp_instance=instance, label="acme", attributes={"vendor": "acme"})[1]

    # when
    keys = value(call(key, "catalog_query_data", {"query": "keys(@)"}))
    cheap = value(call(key, "catalog_query_data", {"query": "values(@)[?price < `50`].price"}))
    everything = value(call(key, "catalog_get_all_data", {}))
    selected = value(call(key, "catalog_select", {"keys": ["KB-01", "MS-02"]}))

    # then
    assert keys == ["KB-01", "PN-03"]
    assert cheap == [3]
    assert everything == {"KB-01": catalog["KB-01"], "PN-03": catalog["PN-03"]}
    assert selected == {"items": [{"key": "KB-01", "content": catalog["KB-01"]}], "not_found": ["MS-02"]}


def test_the_api_saves_a_narrowing_and_the_openapi_schema_describes_it(client, owner, make_table, make_tool, instance):
    # given
    table = make_table(owner, name="orders", data=[dict(order) for order in ORDERS])
    tool = make_tool(owner, table, type="query_data", name="orders_query")
    client.force_login(owner)

    # when
    created = client.post(
        "/api/bindings/",
        {"mcp_instance": instance.pk, "tool": tool.pk, "pinned_arguments": NARROWING},
        content_type="application/json",
    )
    schema = client.get("/api/schema/?format=json").json()

    # then
    assert created.status_code == 201
    assert created.json()["pinned_arguments"] == NARROWING
    assert Binding.objects.get().pinned_arguments == NARROWING
    pins = schema["components"]["schemas"]["Binding"]["properties"]["pinned_arguments"]
    assert pins["properties"]["where"]["additionalProperties"] == pins["additionalProperties"]


@pytest.mark.parametrize("storage", ["document", "rows"])
def test_a_narrowing_to_null_keeps_no_record_that_is_no_object(owner, make_table, make_tool, storage):
    """`[?x == null]` keeps a string or a number (each field of one is null); the narrowing keeps objects only,
    on rows too, where such a narrowing is tested in Python rather than composed into the SQL statement."""
    # given
    data = [{"x": None, "id": 1}, "text", 5, [1], True, {"id": 2}, {"x": 0, "id": 3}, None]
    table = make_table(owner, name="mixed", data=data, storage="document")
    tool = make_tool(owner, table, type="query_data", name="mixed_query")
    if storage == "rows":
        assert records.table_to_rows(table.pk) is True

    # when
    answers = {
        query: execute(tool=tool, arguments={"query": query}, where={"x": None})
        for query in ("@", "length(@)", "[*].id", "{n: length(@), ids: [].id}", "[?id == `2`] | [0]")
    }

    # then
    assert answers == {
        "@": [{"x": None, "id": 1}, {"id": 2}],
        "length(@)": 2,
        "[*].id": [1, 2],
        "{n: length(@), ids: [].id}": {"n": 2, "ids": [1, 2]},
        "[?id == `2`] | [0]": {"id": 2},
    }
