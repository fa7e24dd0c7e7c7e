"""JSON API: /api/tools/, filters, by-table and call (SPEC §6, §2.2, §8)."""

import pytest

from tests.api_helpers import client_for, db_snapshot
from tools_app.models import CallLog, Table, Tool
from tools_app.tool_schemas import default_input_schema

pytestmark = pytest.mark.django_db


def _ids(response) -> list[int]:
    assert response.status_code == 200, response.json()
    return sorted(row["id"] for row in response.json()["results"])


#
# CRUD
#


def test_create_fills_defaults_and_returns_the_contract_fields(owner, table):
    """POST creates a tool; the type's default input schema and category are filled in."""
    # when
    response = client_for(owner).post(
        "/api/tools/",
        {"name": "find_orders", "type": "query_data", "table": table.pk, "description": "Query the orders."},
        format="json",
    )

    # then
    assert response.status_code == 201
    body = response.json()
    tool = Tool.objects.get()
    assert body["id"] == tool.pk
    assert body["table"] == table.pk
    assert body["json_path"] == ""
    assert body["category"] == "read"
    assert body["tags"] == []
    assert body["use_count"] == 0
    assert body["last_used"] is None
    assert body["input_schema"] == default_input_schema("query_data")
    assert body["output_schema"] is None
    assert tool.owner == owner


def test_create_registry_tool_without_table(owner):
    """Registry tools have no table; category defaults to `registry`; metadata tags are shown."""
    # when
    response = client_for(owner).post(
        "/api/tools/",
        {"name": "search", "type": "search_tools", "description": "Find tools.", "metadata": {"tags": ["find"]}},
        format="json",
    )

    # then
    assert response.status_code == 201
    assert response.json()["table"] is None
    assert response.json()["category"] == "registry"
    assert response.json()["tags"] == ["find"]


def test_create_on_another_users_table_is_a_400_naming_table(owner, other_user, make_table):
    """SPEC §6: a reference to another user's object is a 400 naming the field; nothing is written."""
    # given
    theirs = make_table(other_user, name="theirs")
    before = db_snapshot()

    # when
    response = client_for(owner).post(
        "/api/tools/", {"name": "t", "type": "get_all_data", "table": theirs.pk, "description": "d"}, format="json"
    )

    # then
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "VALIDATION_ERROR"
    assert list(body["fields"]) == ["table"]
    assert body["fields"]["table"] == [f'Invalid pk "{theirs.pk}" - object does not exist.']
    assert db_snapshot() == before


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"name": "bad name!", "type": "search_tools", "description": "d"}, "name"),
        ({"name": "t", "type": "get_all_data", "description": "d"}, "table"),
        ({"name": "t", "type": "search_tools", "description": ""}, "description"),
        ({"name": "t", "type": "no_such_type", "description": "d"}, "type"),
        ({"name": "t", "type": "get_all_data", "table": None, "json_path": "orders", "description": "d"}, "json_path"),
        ({"name": "t", "type": "search_tools", "description": "d", "input_schema": {"type": "array"}}, "input_schema"),
        ({"name": "t", "type": "search_tools", "description": "d", "metadata": {"tags": "x"}}, "metadata"),
        ({"name": "t", "type": "search_tools", "description": "d", "metadata": []}, "metadata"),
        ({"name": "t", "type": "search_tools", "description": "d", "table": True}, "table"),
        ({"name": "t", "type": "search_tools", "description": "d", "table": "abc"}, "table"),
    ],
)
def test_create_with_bad_input_is_a_400_naming_the_field(owner, table, payload, field):
    """Each bad field is named in `fields`; nothing is written."""
    # given
    before = db_snapshot()

    # when
    response = client_for(owner).post("/api/tools/", payload, format="json")

    # then
    assert response.status_code == 400, response.json()
    assert response.json()["error"] == "VALIDATION_ERROR"
    assert field in response.json()["fields"]
    assert db_snapshot() == before


def test_patch_changes_description_and_metadata_category(owner, table, make_tool):
    """PATCH changes only what it sends; `category` follows metadata."""
    # given
    tool = make_tool(owner, table)

    # when
    response = client_for(owner).patch(
        f"/api/tools/{tool.pk}/", {"description": "New text.", "metadata": {"category": "sales"}}, format="json"
    )

    # then
    assert response.status_code == 200
    assert response.json()["category"] == "sales"
    tool.refresh_from_db()
    assert (tool.description, tool.metadata, tool.name) == ("New text.", {"category": "sales"}, "query_data_tool")


def test_put_replaces_the_tool(owner, table, make_tool):
    """PUT sends the whole tool, type and table included."""
    # given
    tool = make_tool(owner, table)

    # when
    response = client_for(owner).put(
        f"/api/tools/{tool.pk}/",
        {"name": "everything", "type": "get_all_data", "table": table.pk, "description": "All orders."},
        format="json",
    )

    # then
    assert response.status_code == 200
    tool.refresh_from_db()
    assert (tool.name, tool.type, tool.description) == ("everything", "get_all_data", "All orders.")


def test_rename_into_a_bound_name_is_a_409_and_changes_nothing(owner, table, make_tool, instance, bind):
    """SPEC §8: a rename into a collision on an instance is 409 NAME_CONFLICT naming the tool and instance."""
    # given
    first = make_tool(owner, table, name="orders")
    second = make_tool(owner, table, name="other")
    bind(instance, first)
    bind(instance, second)
    before = db_snapshot()

    # when
    response = client_for(owner).patch(f"/api/tools/{second.pk}/", {"name": "ORDERS"}, format="json")

    # then
    assert response.status_code == 409
    body = response.json()
    assert body["error"] == "NAME_CONFLICT"
    assert "'orders'" in body["message"]
    assert "'Shop'" in body["message"]
    assert list(body["fields"]) == ["name"]
    assert db_snapshot() == before


def test_delete_removes_the_tool(owner, table, make_tool):
    """DELETE removes the tool."""
    # given
    tool = make_tool(owner, table)

    # when
    response = client_for(owner).delete(f"/api/tools/{tool.pk}/")

    # then
    assert response.status_code == 204
    assert Tool.objects.count() == 0


def test_list_hides_other_users_tools(owner, other_user, make_table, make_tool):
    """The list holds the caller's tools only."""
    # given
    mine = make_tool(owner, make_table(owner))
    make_tool(other_user, make_table(other_user))

    # when
    response = client_for(owner).get("/api/tools/")

    # then
    assert _ids(response) == [mine.pk]


#
# Filters
#


@pytest.fixture
def catalog(owner, make_table, make_tool):
    """Four tools of the owner on two tables, with categories and tags in several forms."""
    orders = make_table(owner, name="orders")
    people = make_table(owner, name="people", data={"ada": {"role": "dev"}})
    return {
        "query": make_tool(owner, orders, name="q", metadata={"tags": ["sales", "Finance"]}),
        "create": make_tool(owner, orders, type="create", name="add", metadata={"category": "", "tags": ["sales"]}),
        "all": make_tool(owner, people, type="get_all_data", name="staff", metadata={"category": "hr", "tags": []}),
        "search": make_tool(owner, None, type="search_tools", name="finder", metadata={"category": None}),
        "orders": orders,
        "people": people,
    }


def test_filter_by_table(owner, catalog):
    """?table= keeps the tools on that table."""
    response = client_for(owner).get(f"/api/tools/?table={catalog['orders'].pk}")
    assert _ids(response) == sorted([catalog["query"].pk, catalog["create"].pk])


def test_filter_by_type(owner, catalog):
    """?type= keeps one type."""
    response = client_for(owner).get("/api/tools/?type=create")
    assert _ids(response) == [catalog["create"].pk]


@pytest.mark.parametrize(
    ("category", "expected"),
    [("read", ["query"]), ("write", ["create"]), ("hr", ["all"]), ("registry", ["search"]), ("nope", [])],
)
def test_filter_by_effective_category(owner, catalog, category, expected):
    """?category= matches metadata.category, or the type's default when it is missing, null or empty."""
    response = client_for(owner).get(f"/api/tools/?category={category}")
    assert _ids(response) == sorted(catalog[name].pk for name in expected)


@pytest.mark.parametrize(
    ("tag", "expected"), [("sales", ["query", "create"]), ("Finance", ["query"]), ("finance", []), ("sa", [])]
)
def test_filter_by_tag_matches_whole_tags(owner, catalog, tag, expected):
    """?tag= matches a whole entry of metadata.tags, exactly."""
    response = client_for(owner).get(f"/api/tools/?tag={tag}")
    assert _ids(response) == sorted(catalog[name].pk for name in expected)


def test_filter_by_mcp_instance(owner, catalog, instance, bind):
    """?mcp_instance= keeps the tools bound to that instance."""
    # given
    bind(instance, catalog["all"])
    bind(instance, catalog["search"])

    # when
    response = client_for(owner).get(f"/api/tools/?mcp_instance={instance.pk}")

    # then
    assert _ids(response) == sorted([catalog["all"].pk, catalog["search"].pk])


def test_filter_by_search(owner, catalog):
    """?search= matches name, alias or description, ignoring case."""
    # given
    Tool.objects.filter(pk=catalog["all"].pk).update(alias="Team directory")

    # when
    by_alias = client_for(owner).get("/api/tools/?search=DIRECTORY")
    by_name = client_for(owner).get("/api/tools/?search=find")

    # then
    assert _ids(by_alias) == [catalog["all"].pk]
    assert _ids(by_name) == [catalog["search"].pk]


@pytest.mark.parametrize("param", ["table", "mcp_instance"])
def test_filter_on_another_users_object_is_a_400_naming_it(owner, other_user, make_table, make_instance, param):
    """SPEC §6: filter choices come from the ownership rule; another user's id is a 400 naming the filter."""
    # given
    theirs = make_table(other_user, name="theirs") if param == "table" else make_instance(other_user, slug="theirs")

    # when
    response = client_for(owner).get(f"/api/tools/?{param}={theirs.pk}")

    # then
    assert response.status_code == 400
    assert response.json()["error"] == "VALIDATION_ERROR"
    assert list(response.json()["fields"]) == [param]


def test_filter_with_unknown_type_is_a_400(owner):
    """An unknown ?type= is a 400 naming `type`."""
    response = client_for(owner).get("/api/tools/?type=nope")
    assert response.status_code == 400
    assert list(response.json()["fields"]) == ["type"]


#
# Ordering
#


@pytest.fixture
def used_tools(owner, make_tool):
    """Five tools: two never used, three used on 1, 3 and 2 March (created in that order)."""
    from datetime import UTC, datetime

    tools = [make_tool(owner, None, type="search_tools", name=f"t{index}") for index in range(5)]
    for index, day in ((1, 1), (2, 3), (4, 2)):
        Tool.objects.filter(pk=tools[index].pk).update(last_used=datetime(2026, 3, day, tzinfo=UTC), use_count=day)
    return tools


@pytest.mark.parametrize(
    ("ordering", "expected"),
    [
        ("-last_used", [2, 4, 1, 0, 3]),
        ("last_used", [1, 4, 2, 0, 3]),
        ("-last_used,-id", [2, 4, 1, 3, 0]),
        ("-use_count", [2, 4, 1, 0, 3]),
        ("-name", [4, 3, 2, 1, 0]),
    ],
)
def test_ordering_puts_never_used_tools_last_on_every_backend(owner, used_tools, ordering, expected):
    """?ordering=last_used / -last_used: never-used tools (no last_used) come last both ways; ties by id."""
    # when
    response = client_for(owner).get(f"/api/tools/?ordering={ordering}")

    # then
    assert response.status_code == 200
    assert [row["id"] for row in response.json()["results"]] == [used_tools[index].pk for index in expected]


def test_ordering_pages_do_not_repeat_tied_rows(owner, used_tools):
    """Pages over a tied ordering (two never-used tools) are stable: together they list every tool once."""
    # when
    pages = [
        client_for(owner).get(f"/api/tools/?ordering=-last_used&page_size=2&page={page}").json()["results"]
        for page in (1, 2, 3)
    ]

    # then
    assert [row["id"] for page in pages for row in page] == [used_tools[i].pk for i in (2, 4, 1, 0, 3)]


def test_unknown_ordering_field_is_a_400_naming_it(owner, used_tools):
    """An ordering term outside ordering_fields is refused (DRF drops it silently), naming `ordering`."""
    response = client_for(owner).get("/api/tools/?ordering=name,owner__password")
    assert response.status_code == 400
    assert response.json()["error"] == "VALIDATION_ERROR"
    assert response.json()["fields"]["ordering"] == [
        "Unknown ordering 'owner__password': use one or more of created_at, id, last_used, name, type, "
        "updated_at, use_count, comma-separated, each optionally prefixed by '-'."
    ]


#
# by-table
#


def test_by_table_lists_the_callers_tools_on_that_table(owner, catalog):
    """GET /api/tools/by-table/<id>/ lists the tools on that table."""
    response = client_for(owner).get(f"/api/tools/by-table/{catalog['orders'].pk}/")
    assert _ids(response) == sorted([catalog["query"].pk, catalog["create"].pk])
    assert response.json()["count"] == 2


@pytest.mark.parametrize("which", ["theirs", "missing", "malformed"])
def test_by_table_is_404_for_a_table_that_is_not_the_callers(owner, other_user, make_table, make_tool, which):
    """SPEC §6: 404 if the table is missing or not the caller's."""
    # given
    theirs = make_table(other_user, name="theirs")
    make_tool(other_user, theirs)
    table_id = {"theirs": theirs.pk, "missing": theirs.pk + 100, "malformed": "abc"}[which]

    # when
    response = client_for(owner).get(f"/api/tools/by-table/{table_id}/")

    # then
    assert response.status_code == 404
    assert response.json()["error"] == "NOT_FOUND"


def test_by_table_for_a_superuser_lists_every_tool_on_the_table(superuser, owner, table, make_tool):
    """SPEC §8: a superuser sees every tool on that table."""
    # given
    first = make_tool(owner, table, name="a")
    second = make_tool(owner, table, name="b")

    # when
    response = client_for(superuser).get(f"/api/tools/by-table/{table.pk}/")

    # then
    assert _ids(response) == sorted([first.pk, second.pk])


#
# call
#


def test_call_returns_the_result_and_records_the_call(owner, table, make_tool):
    """POST call runs the tool: 200 {"result"}; use_count +1 and a CallLog row with surface "api"."""
    # given
    tool = make_tool(owner, table)

    # when
    response = client_for(owner).post(
        f"/api/tools/{tool.pk}/call/", {"arguments": {"query": "[?status=='paid'].customer"}}, format="json"
    )

    # then
    assert response.status_code == 200
    assert response.json() == {"result": ["ada"]}
    tool.refresh_from_db()
    assert tool.use_count == 1
    assert tool.last_used is not None
    log = CallLog.objects.get()
    assert (log.surface, log.status, log.tool_id, log.tool_name, log.mcp_instance_id, log.owner_id) == (
        "api",
        "ok",
        tool.pk,
        "query_data_tool",
        None,
        owner.pk,
    )
    assert log.error_code == ""


def test_call_with_an_integral_float_argument_runs_with_that_integer(owner, table, make_tool):
    """{"limit": 2.0} is an integer to JSON Schema: the preview runs with 2 (it was a 500)."""
    # given
    tool = make_tool(owner, table, type="preview", metadata={"preview_keys": ["id"]})

    # when
    response = client_for(owner).post(
        f"/api/tools/{tool.pk}/call/", {"arguments": {"limit": 2.0, "offset": 1.0}}, format="json"
    )

    # then
    assert response.status_code == 200
    assert response.json() == {"result": {"items": [{"id": 2}, {"id": 3}], "total_count": 3}}


def test_call_of_a_write_tool_changes_the_data_once(owner, table, make_tool):
    """A create call appends and reports the new version (SPEC §8 shape)."""
    # given
    tool = make_tool(owner, table, type="create")

    # when
    response = client_for(owner).post(
        f"/api/tools/{tool.pk}/call/", {"arguments": {"elements": [{"id": 4, "customer": "linus"}]}}, format="json"
    )

    # then
    assert response.status_code == 200
    assert response.json() == {"result": {"created": 1, "version": 2}}
    table.refresh_from_db()
    assert table.version == 2
    assert table.data[-1] == {"id": 4, "customer": "linus"}


@pytest.mark.parametrize(
    ("tool_type", "arguments", "code"),
    [
        ("query_data", {"query": "[?"}, "INVALID_QUERY"),
        ("query_data", {}, "INVALID_ARGUMENTS"),
        ("create", {"elements": [{"id": 1}]}, "KEY_EXISTS"),
        ("delete", {"keys": [99]}, "KEY_NOT_FOUND"),
    ],
)
def test_call_with_a_tool_error_is_a_400_with_its_code(owner, table, make_tool, tool_type, arguments, code):
    """SPEC §6: a tool error is a 400 with the tool's code; the data stays as it was; the call is logged."""
    # given
    tool = make_tool(owner, table, type=tool_type)
    data_before = [(t.data, t.version) for t in Table.objects.all()]

    # when
    response = client_for(owner).post(f"/api/tools/{tool.pk}/call/", {"arguments": arguments}, format="json")

    # then
    assert response.status_code == 400
    assert response.json()["error"] == code
    assert response.json()["message"]
    assert "fields" not in response.json()
    assert [(t.data, t.version) for t in Table.objects.all()] == data_before
    log = CallLog.objects.get()
    assert (log.status, log.error_code, log.surface) == ("error", code, "api")


def test_call_of_an_external_tool_is_tool_not_callable(owner, make_tool):
    """SPEC §8: an external tool is TOOL_NOT_CALLABLE."""
    # given
    tool = make_tool(owner, None, type="external", metadata={"mcp_server": "github"})

    # when
    response = client_for(owner).post(f"/api/tools/{tool.pk}/call/", {"arguments": {}}, format="json")

    # then
    assert response.status_code == 400
    assert response.json()["error"] == "TOOL_NOT_CALLABLE"
    assert "github" in response.json()["message"]


@pytest.mark.parametrize("body", [{"arguments": [1, 2]}, {"arguments": "x"}, {"arguments": None}])
def test_call_with_arguments_that_are_not_an_object_is_a_400_naming_arguments(owner, table, make_tool, body):
    """`arguments` must be a JSON object; nothing runs and nothing is recorded."""
    # given
    tool = make_tool(owner, table)
    before = db_snapshot()

    # when
    response = client_for(owner).post(f"/api/tools/{tool.pk}/call/", body, format="json")

    # then
    assert response.status_code == 400
    assert response.json()["error"] == "VALIDATION_ERROR"
    assert list(response.json()["fields"]) == ["arguments"]
    assert db_snapshot() == before


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({"args": {"query": "[0]"}}, {"args": ['Unknown field. The body is {"arguments": {...}}.']}),
        (
            {"arguments": {"query": "[0]"}, "argumens": {}, "format": "x"},
            {
                "argumens": ['Unknown field. The body is {"arguments": {...}}.'],
                "format": ['Unknown field. The body is {"arguments": {...}}.'],
            },
        ),
    ],
)
def test_call_with_an_unknown_body_key_is_a_400_naming_it(owner, table, make_tool, body, fields):
    """A wrong top-level key (e.g. `args`) is refused instead of running the tool with no arguments."""
    # given
    tool = make_tool(owner, table)
    before = db_snapshot()

    # when
    response = client_for(owner).post(f"/api/tools/{tool.pk}/call/", body, format="json")

    # then
    assert response.status_code == 400
    assert response.json() == {"error": "VALIDATION_ERROR", "message": "Invalid input.", "fields": fields}
    assert db_snapshot() == before


def test_call_with_a_body_that_is_not_an_object_is_a_400(owner, table, make_tool):
    """A JSON list as the body is a 400 VALIDATION_ERROR; nothing runs."""
    # given
    tool = make_tool(owner, table)
    before = db_snapshot()

    # when
    response = client_for(owner).post(f"/api/tools/{tool.pk}/call/", [1], format="json")

    # then
    assert response.status_code == 400
    assert response.json()["fields"] == {"non_field_errors": ["Invalid data. Expected a dictionary, but got list."]}
    assert db_snapshot() == before


def test_call_without_arguments_runs_with_none(owner, table, make_tool):
    """An empty body means no arguments."""
    # given
    tool = make_tool(owner, table, type="get_all_data")

    # when
    response = client_for(owner).post(f"/api/tools/{tool.pk}/call/", {}, format="json")

    # then
    assert response.status_code == 200
    assert response.json()["result"][0]["customer"] == "ada"


def test_call_runs_registry_tools_over_the_callers_scope(owner, make_tool, monkeypatch):
    """Registry tools called over the API work over the caller's own tools: execute() gets UserScope(caller)."""
    # given
    from tools_app.execution import pipeline as calls
    from tools_app.registry.scope import UserScope

    seen = {}

    def fake_execute(*, tool, arguments, scope, where):
        seen.update(tool=tool.pk, arguments=arguments, scope=scope, where=where)
        return {"ok": True}

    monkeypatch.setattr(calls, "execute", fake_execute)
    definition = make_tool(owner, None, type="get_tool_definition", name="define")

    # when
    response = client_for(owner).post(
        f"/api/tools/{definition.pk}/call/", {"arguments": {"tool_name": "x"}}, format="json"
    )

    # then
    assert response.status_code == 200
    assert response.json() == {"result": {"ok": True}}
    assert seen["tool"] == definition.pk
    assert seen["where"] is None  # a tool called over the API narrows nothing
    assert seen["arguments"] == {"tool_name": "x"}
    assert isinstance(seen["scope"], UserScope)
    assert seen["scope"].owner == owner
