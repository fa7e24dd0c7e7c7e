"""From data to tools in one step: table import, generate-tools, bulk binding over the API."""

import io
import json

import pytest

from tests.api_helpers import client_for, db_snapshot
from tools_app.models import Binding, Table, Tool

pytestmark = pytest.mark.django_db

SALES_CSV = (
    "id,customer,status,total,zip,vip\n"
    "1,Ada,paid,10.5,01234,true\n"
    "2,Alan,new,20,,false\n"
    '3,"Hopper, Grace",paid,7.25,99999,\n'
)
SALES = [
    {"id": 1, "customer": "Ada", "status": "paid", "total": 10.5, "zip": "01234", "vip": True},
    {"id": 2, "customer": "Alan", "status": "new", "total": 20, "zip": None, "vip": False},
    {"id": 3, "customer": "Hopper, Grace", "status": "paid", "total": 7.25, "zip": 99999, "vip": None},
]


def upload(client, content: bytes, filename: str, **fields):
    file = io.BytesIO(content)
    file.name = filename
    return client.post("/api/tables/import/", {"file": file, **fields}, format="multipart")


#
# Import
#


def test_import_csv_creates_the_table_with_typed_cells(owner):
    """A CSV becomes an array of objects keyed by the header; cells are typed only in canonical form."""
    # when
    response = upload(client_for(owner), SALES_CSV.encode(), "sales.csv", name="sales", description="Q1")

    # then
    assert response.status_code == 201
    body = response.json()
    table = Table.objects.get()
    assert body["id"] == table.pk
    assert (body["name"], body["description"], body["version"], body["owner"]) == ("sales", "Q1", 1, "owner")
    assert body["data"] == SALES
    assert table.data == SALES
    assert table.owner == owner


@pytest.mark.parametrize(
    ("content", "filename", "fields", "data"),
    [
        (b'{"a": [1, 2]}', "doc.json", {}, {"a": [1, 2]}),
        (b'\xef\xbb\xbf[{"id": 1}]', "doc.JSON", {}, [{"id": 1}]),
        (b'{"id": 1}\n\n{"id": 2}\r\n"x"\n', "log.ndjson", {}, [{"id": 1}, {"id": 2}, "x"]),
        (b'{"id": 1}\n', "log.jsonl", {}, [{"id": 1}]),
        ('{"s": "a\u2028b"}\n{"s": 2}'.encode(), "sep.ndjson", {}, [{"s": "a\u2028b"}, {"s": 2}]),
        (b"id\tname\n1\tA\n", "t.tsv", {}, [{"id": 1, "name": "A"}]),
        (b"id;name\n1;A\n", "export.txt", {"format": "csv"}, [{"id": 1, "name": "A"}]),
        (b"[1]", "no-extension", {"format": "json"}, [1]),
    ],
)
def test_import_each_format_from_the_name_or_the_format_field(owner, content, filename, fields, data):
    """The format comes from `format`, else from the file's extension; a BOM is dropped; blank lines skipped."""
    # when
    response = upload(client_for(owner), content, filename, name="t", **fields)

    # then
    assert response.status_code == 201, response.json()
    assert Table.objects.get().data == data


@pytest.mark.parametrize(
    ("cell", "value"),
    [
        ("42", 42),
        ("-7", -7),
        ("0", 0),
        ("999999999999999", 999999999999999),
        ("1000000000000000", "1000000000000000"),
        ("007", "007"),
        ("+1", "+1"),
        (" 42", " 42"),
        ("2.5", 2.5),
        ("1.50", 1.5),
        ("-0.25", -0.25),
        (".5", ".5"),
        ("1e3", "1e3"),
        ("NaN", "NaN"),
        ("true", True),
        ("false", False),
        ("TRUE", "TRUE"),
        ("", None),
        ("null", "null"),
        ("café", "café"),
    ],
)
def test_csv_cells_are_typed_strictly(cell, value):
    """Only unambiguous text becomes a number, boolean or null (docs/data-to-tools.md)."""
    from tools_app.services import parse_table_file

    # when
    data = parse_table_file(f'x\n"{cell}"\n'.encode(), "csv")

    # then
    assert data == [{"x": value}]
    assert type(data[0]["x"]) is type(value)


BAD_FILES = [
    (
        b"id,name\n1,caf\xe9\n",
        "latin1.csv",
        {},
        "file",
        "The file is not UTF-8 text: line 2 has the byte 0xe9 (at byte offset 13). Save it as UTF-8 and upload it "
        "again.",
    ),
    (
        b"id,name,total\n1,a,2\n2,b\n3,c,4\n",
        "ragged.csv",
        {},
        "file",
        "Row 2 (line 3) has 2 values; the header has 3 columns.",
    ),
    (
        b'id,note\n1,"multi\nline"\n2,x,extra\n',
        "ragged2.csv",
        {},
        "file",
        "Row 2 (line 4) has 3 values; the header has 2 columns.",
    ),
    (
        b"id,id\n1,2\n",
        "dup.csv",
        {},
        "file",
        "Line 1 (the header): the column name 'id' is used twice (columns 1 and 2).",
    ),
    (b"id,\n1,2\n", "noname.csv", {}, "file", "Line 1 (the header): column 2 has no name."),
    (b'id,name\n1,"open\n', "quote.csv", {}, "file", "Invalid CSV at line 2: unexpected end of data."),
    (
        b'{"id": 1}\n{"id": 2,}\n{"id": 3}\n',
        "bad.ndjson",
        {},
        "file",
        'Line 2 is not one JSON value (column 10: Expecting property name enclosed in double quotes): {"id": 2,}',
    ),
    (b'{\n  "a": [1,\n}', "bad.json", {}, "file", "Invalid JSON at line 3, column 1: Expecting value."),
    (b"  \n\n ", "blank.json", {}, "file", "The file is empty."),
    (b"", "empty.csv", {}, "file", "The submitted file is empty."),
    (b"[1]", "data.xlsx", {}, "format", None),
    (b"[1]", "data.json", {"format": "xml"}, "format", '"xml" is not a valid choice.'),
    (b"[1]", "data.json", {"name": ""}, "name", "This field may not be blank."),
    (b"[1]", "data.json", {"colour": "red"}, "colour", None),
]


@pytest.mark.parametrize(("content", "filename", "fields", "field", "message"), BAD_FILES)
def test_a_bad_file_is_a_400_naming_the_line_and_writes_nothing(owner, content, filename, fields, field, message):
    """Encoding errors, ragged CSV rows, one bad NDJSON line, an empty file...: 400 naming what and where."""
    # given
    before = db_snapshot()
    fields = {"name": "t", **fields}

    # when
    response = upload(client_for(owner), content, filename, **fields)

    # then
    assert response.status_code == 400, response.json()
    body = response.json()
    assert body["error"] == "VALIDATION_ERROR"
    assert list(body["fields"]) == [field]
    if message is not None:
        assert body["fields"][field] == [message]
    assert db_snapshot() == before


def test_an_unknown_extension_says_how_to_name_the_format(owner):
    # when
    response = upload(client_for(owner), b"[1]", "data.xlsx", name="t")

    # then
    assert response.json()["fields"] == {
        "format": [
            "Cannot tell the format from the file name 'data.xlsx': pass format = json, csv or ndjson (or name the "
            "file .json, .csv, .tsv, .ndjson or .jsonl)."
        ]
    }


def test_a_file_over_the_table_limit_is_refused_before_parsing(owner, settings):
    """A file larger than TOOLHUB_MAX_TABLE_BYTES is refused whole, before it is decoded."""
    # given
    settings.TOOLHUB_MAX_TABLE_BYTES = 100
    before = db_snapshot()

    # when
    response = upload(client_for(owner), b"[" + b"1," * 60 + b"1]", "big.json", name="t")

    # then
    assert response.status_code == 400
    assert response.json()["fields"] == {
        "file": ["The file is 123 bytes; a table document is at most 100 bytes (TOOLHUB_MAX_TABLE_BYTES)."]
    }
    assert db_snapshot() == before


def test_a_csv_that_grows_past_the_limit_as_json_is_stopped_while_parsing(owner, settings):
    """A wide header with empty cells grows ~100x as JSON: refused at the row that crosses the limit."""
    # given
    settings.TOOLHUB_MAX_ROWS_TABLE_BYTES = 3000
    header = ",".join(f"column_with_a_long_name_{n}" for n in range(20))
    content = (header + "\n" + ("," * 19 + "\n") * 100).encode()
    assert len(content) < 3000
    before = db_snapshot()

    # when
    response = upload(client_for(owner), content, "wide.csv", name="t")

    # then
    assert response.status_code == 400
    assert response.json()["fields"] == {
        "file": [
            "By row 5 (line 6) the table is already over 3000 bytes of JSON (TOOLHUB_MAX_ROWS_TABLE_BYTES); import "
            "a smaller file."
        ]
    }
    assert db_snapshot() == before


def test_a_document_over_the_limit_after_parsing_is_refused_by_the_table_rule(owner, settings):
    """The parsed document goes through table_create: the table size rule of every write applies."""
    # given
    settings.TOOLHUB_MAX_TABLE_BYTES = 30
    before = db_snapshot()

    # when
    response = upload(client_for(owner), b'{"a":"xxxxxxxxxxxxxxxxxxxxxx"}', "d.json", name="t")

    # then
    assert response.status_code == 400
    assert response.json()["fields"] == {
        "data": ["A table document is at most 30 bytes of JSON (TOOLHUB_MAX_TABLE_BYTES); this one is 31 bytes."]
    }
    assert db_snapshot() == before


def test_a_document_nested_too_deep_is_refused(owner, settings):
    # given
    settings.TOOLHUB_MAX_TABLE_DEPTH = 3
    before = db_snapshot()

    # when
    response = upload(client_for(owner), b'{"a": {"b": {"c": [1]}}}', "d.json", name="t")

    # then
    assert response.status_code == 400
    assert list(response.json()["fields"]) == ["data"]
    assert "TOOLHUB_MAX_TABLE_DEPTH" in response.json()["fields"]["data"][0]
    assert db_snapshot() == before


def test_import_needs_credentials_and_a_multipart_body(owner):
    # given
    before = db_snapshot()

    # when
    anonymous = upload(client_for(None), b"[1]", "d.json", name="t")
    as_json = client_for(owner).post("/api/tables/import/", {"name": "t", "file": "[1]"}, format="json")

    # then
    assert anonymous.status_code == 401
    assert as_json.status_code == 415
    assert as_json.json()["error"] == "UNSUPPORTED_MEDIA_TYPE"
    assert db_snapshot() == before


#
# Generate tools
#


@pytest.fixture
def sales(owner):
    from tools_app import services

    return services.table_create(owner=owner, name="Sales 2024", data=SALES)


def test_generate_creates_the_read_set_named_and_described_from_the_data(owner, sales):
    """Without writes: schema, all, query, preview, select; descriptions carry count, fields, key, examples."""
    # when
    response = client_for(owner).post(f"/api/tables/{sales.pk}/generate-tools/", {}, format="json")

    # then
    assert response.status_code == 201, response.json()
    body = response.json()
    assert [(tool["name"], tool["type"]) for tool in body["tools"]] == [
        ("sales_2024_schema", "get_data_schema"),
        ("sales_2024_all", "get_all_data"),
        ("sales_2024_query", "query_data"),
        ("sales_2024_preview", "preview"),
        ("sales_2024_select", "select"),
    ]
    assert body["bindings"] == []
    assert body["notes"] == []
    tools = {tool["type"]: tool for tool in body["tools"]}
    fields = (
        'Fields (names and example values quoted from the data): "id" (integer, e.g. 1), "customer" (string, e.g. '
        '"Ada"), "status" (string, e.g. "paid"), "total" (integer|number, e.g. 10.5), "vip" (boolean|null, e.g. '
        'true), "zip" (integer|null|string, e.g. "01234").'
    )
    assert tools["query_data"]["description"] == (
        'Run a JMESPath expression over the table "Sales 2024" (3 records, an array) and return its value. '
        + fields
        + " Examples run on this data: `length(@)` -> 3; `[?status=='paid'] | length(@)` -> 2; "
        "`max_by(@, &total).id` -> 2."
    )
    assert tools["select"]["description"] == (
        'Fetch full records of the table "Sales 2024" by their "id" field, e.g. keys=[1, 2]; keys that are not '
        "found are listed in not_found. " + fields
    )
    assert tools["preview"]["metadata"]["preview_keys"] == ["id", "customer", "status", "total"]
    assert all(tool["metadata"]["key_field"] == "id" for tool in body["tools"])
    assert all(tool["table"] == sales.pk and tool["json_path"] == "" for tool in body["tools"])
    assert tools["get_all_data"]["output_schema"] == {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "id": {"type": "integer", "examples": [1]},
                "customer": {"type": "string", "examples": ["Ada"]},
                "status": {"type": "string", "examples": ["paid"]},
                "total": {"type": ["integer", "number"], "examples": [10.5]},
                "zip": {"type": ["integer", "null", "string"], "examples": ["01234"]},
                "vip": {"type": ["boolean", "null"], "examples": [True]},
            },
        },
    }
    assert Tool.objects.filter(owner=owner).count() == 5


def test_the_example_queries_run_on_the_data_with_the_results_the_description_gives(owner, sales):
    """Each example in metadata.examples is called through the API and returns what the description says."""
    # given
    client = client_for(owner)
    tools = client.post(f"/api/tables/{sales.pk}/generate-tools/", {}, format="json").json()["tools"]
    query = next(tool for tool in tools if tool["type"] == "query_data")

    # when
    results = {
        expression: client.post(f"/api/tools/{query['id']}/call/", {"arguments": {"query": expression}}, format="json")
        for expression in ("length(@)", "[?status=='paid'] | length(@)", "max_by(@, &total).id")
    }

    # then
    assert query["metadata"]["examples"] == [
        'sales_2024_query(query="length(@)")',
        "sales_2024_query(query=\"[?status=='paid'] | length(@)\")",
        'sales_2024_query(query="max_by(@, &total).id")',
    ]
    assert {expression: response.json() for expression, response in results.items()} == {
        "length(@)": {"result": 3},
        "[?status=='paid'] | length(@)": {"result": 2},
        "max_by(@, &total).id": {"result": 2},
    }


def test_generate_with_writes_and_an_instance_creates_and_binds_all_eight(owner, sales, make_instance):
    # given
    instance = make_instance(owner)

    # when
    response = client_for(owner).post(
        f"/api/tables/{sales.pk}/generate-tools/",
        {"mcp_instance": instance.pk, "writes": True, "preview_keys": ["customer", "total"], "name_prefix": "q1"},
        format="json",
    )

    # then
    assert response.status_code == 201, response.json()
    body = response.json()
    assert [tool["name"] for tool in body["tools"]] == [
        "q1_schema",
        "q1_all",
        "q1_query",
        "q1_preview",
        "q1_select",
        "q1_create",
        "q1_update",
        "q1_delete",
    ]
    assert [(b["mcp_instance"], b["tool"], b["enabled"]) for b in body["bindings"]] == [
        (instance.pk, tool["id"], True) for tool in body["tools"]
    ]
    assert Binding.objects.filter(mcp_instance=instance).count() == 8
    preview = next(tool for tool in body["tools"] if tool["type"] == "preview")
    assert preview["metadata"]["preview_keys"] == ["customer", "total"]
    assert preview["description"] == (
        'Preview the table "Sales 2024" with only "customer", "total" of each of the 3 records; `limit` and `offset` '
        "page through them, and total_count says how many there are."
    )


def test_generated_tools_are_served_over_mcp(owner, sales, make_instance, make_api_key):
    """The bound tools reach tools/list with their output schemas, and the query runs over MCP."""
    from mcp_app.tests.mcp_harness import Harness, rpc_body

    # given
    instance = make_instance(owner)
    _, key = make_api_key(instance)
    client_for(owner).post(f"/api/tables/{sales.pk}/generate-tools/", {"mcp_instance": instance.pk}, format="json")
    harness = Harness()

    # when
    listed = harness.post(instance.slug, rpc_body("tools/list"), key=key).json()
    called = harness.post(
        instance.slug,
        rpc_body("tools/call", {"name": "sales_2024_query", "arguments": {"query": "[?status=='paid'].id"}}),
        key=key,
    ).json()

    # then
    by_name = {tool["name"]: tool for tool in listed["result"]["tools"]}
    assert sorted(by_name) == [
        "sales_2024_all",
        "sales_2024_preview",
        "sales_2024_query",
        "sales_2024_schema",
        "sales_2024_select",
    ]
    assert by_name["sales_2024_select"]["outputSchema"]["required"] == ["items", "not_found"]
    assert called["result"]["structuredContent"] == {"result": [1, 3]}


def test_an_object_mount_is_keyed_by_its_entries(owner, make_table):
    # given
    table = make_table(owner, name="catalog", data={"products": {"KB-01": {"name": "Keyboard", "price": 120.5}}})

    # when
    response = client_for(owner).post(
        f"/api/tables/{table.pk}/generate-tools/", {"json_path": "/products", "writes": True}, format="json"
    )

    # then
    assert response.status_code == 201, response.json()
    tools = {tool["type"]: tool for tool in response.json()["tools"]}
    assert sorted(tool["name"] for tool in tools.values()) == [
        "catalog_products_all",
        "catalog_products_create",
        "catalog_products_delete",
        "catalog_products_preview",
        "catalog_products_query",
        "catalog_products_schema",
        "catalog_products_select",
        "catalog_products_update",
    ]
    assert tools["select"]["description"].startswith(
        'Fetch full records of the table "catalog" at "/products" by their key, e.g. keys=["KB-01"];'
    )
    assert tools["query_data"]["description"].endswith(
        "Examples run on this data: `keys(@)[:3]` -> [\"KB-01\"]; `values(@)[?name=='Keyboard'] | length(@)` -> 1."
    )


def test_records_without_a_unique_key_get_no_select_update_or_delete(owner, make_table):
    # given
    table = make_table(owner, name="events", data=[{"kind": "a"}, {"kind": "a"}])

    # when
    response = client_for(owner).post(f"/api/tables/{table.pk}/generate-tools/", {"writes": True}, format="json")

    # then
    assert response.status_code == 201
    body = response.json()
    assert [tool["type"] for tool in body["tools"]] == [
        "get_data_schema",
        "get_all_data",
        "query_data",
        "preview",
        "create",
    ]
    assert body["notes"] == [
        "No field is present in every record with unique values: select, update and delete (which find records by "
        "key) were not generated."
    ]


def test_an_empty_array_gets_the_tools_that_need_no_key(owner, make_table):
    # given
    table = make_table(owner, name="inbox", data={"messages": []})

    # when
    response = client_for(owner).post(
        f"/api/tables/{table.pk}/generate-tools/", {"json_path": "/messages", "writes": True}, format="json"
    )

    # then
    assert response.status_code == 201
    body = response.json()
    assert [tool["name"] for tool in body["tools"]] == [
        "inbox_messages_schema",
        "inbox_messages_all",
        "inbox_messages_query",
        "inbox_messages_preview",
        "inbox_messages_create",
    ]
    assert body["notes"] == [
        "The mount holds no records yet, so no key field could be chosen: select, update and delete (which find "
        "records by key) were not generated."
    ]
    query = body["tools"][2]
    assert query["description"] == (
        'Run a JMESPath expression over the table "inbox" at "/messages" (0 items, an array) and return its value. '
        "Examples run on this data: `length(@)` -> 0."
    )


def test_a_name_used_by_one_of_your_tools_is_a_409_and_nothing_is_created(owner, sales, make_tool):
    # given
    make_tool(owner, sales, name="SALES_2024_preview", type="preview")
    before = db_snapshot()

    # when
    response = client_for(owner).post(f"/api/tables/{sales.pk}/generate-tools/", {}, format="json")

    # then
    assert response.status_code == 409
    assert response.json()["error"] == "NAME_CONFLICT"
    assert response.json()["message"] == (
        "The name 'sales_2024_preview' is already used by your tool 'SALES_2024_preview' (id "
        f"{Tool.objects.get().pk}); pass another name_prefix, or delete that tool first."
    )
    assert db_snapshot() == before


def test_a_name_taken_on_the_instance_is_a_409_and_nothing_is_created(
    owner, sales, make_instance, make_tool, bind, make_table
):
    # given
    instance = make_instance(owner)
    other = make_tool(owner, make_table(owner, name="other"), name="anything")
    bind(instance, other, name_override="sales_2024_query")
    before = db_snapshot()

    # when
    response = client_for(owner).post(
        f"/api/tables/{sales.pk}/generate-tools/", {"mcp_instance": instance.pk}, format="json"
    )

    # then
    assert response.status_code == 409
    assert response.json()["message"] == (
        "The name 'sales_2024_query' is already used by the tool 'anything' on the instance 'Shop' (names are "
        "unique per instance, ignoring case); pass another name_prefix."
    )
    assert db_snapshot() == before


@pytest.mark.parametrize(
    ("payload", "field", "message"),
    [
        (
            {"json_path": "/missing"},
            "json_path",
            "The mount '/missing' does not exist in the table: no 'missing' under (the document root).",
        ),
        (
            {"json_path": "/0/customer"},
            "json_path",
            "The value at /0/customer is a string: tools are generated for an array of records or an object of "
            "entries.",
        ),
        (
            {"json_path": "no-slash"},
            "json_path",
            "A JSON Pointer is empty (the whole document) or starts with '/' (got 'no-slash').",
        ),
        (
            {"preview_keys": ["id", "colour"]},
            "preview_keys",
            "No field 'colour' in the records at (root); the fields are: customer, id, status, total, vip, zip.",
        ),
        ({"writes": "true"}, "writes", "Must be a valid boolean."),
        (
            {"name_prefix": "bad name"},
            "name_prefix",
            "Letters, digits, '_', '.' and '-' only (tool names allow no others).",
        ),
        ({"mcp_instance": 999999}, "mcp_instance", 'Invalid pk "999999" - object does not exist.'),
        ({"mcp_instance": True}, "mcp_instance", "Incorrect type. Expected pk value, received bool."),
        (
            {"colour": "red"},
            "colour",
            "Unknown field. The fields are: json_path, mcp_instance, name_prefix, overwrite_edited, preview_keys, "
            "writes.",
        ),
    ],
)
def test_bad_generate_input_is_a_400_naming_the_field_and_writes_nothing(owner, sales, payload, field, message):
    # given
    before = db_snapshot()

    # when
    response = client_for(owner).post(f"/api/tables/{sales.pk}/generate-tools/", payload, format="json")

    # then
    assert response.status_code == 400, response.json()
    assert response.json()["error"] == "VALIDATION_ERROR"
    assert response.json()["fields"] == {field: [message]}
    assert db_snapshot() == before


def test_another_users_table_is_404_and_instance_is_400(owner, other_user, sales, make_instance, make_table):
    # given
    theirs = make_instance(other_user, slug="theirs")
    their_table = make_table(other_user, name="t", data=[{"id": 1}])
    before = db_snapshot()

    # when
    table_404 = client_for(owner).post(f"/api/tables/{their_table.pk}/generate-tools/", {}, format="json")
    instance_400 = client_for(owner).post(
        f"/api/tables/{sales.pk}/generate-tools/", {"mcp_instance": theirs.pk}, format="json"
    )

    # then
    assert table_404.status_code == 404
    assert instance_400.status_code == 400
    assert list(instance_400.json()["fields"]) == ["mcp_instance"]
    assert db_snapshot() == before


#
# Bulk binding
#


def test_bulk_binding_binds_every_tool(owner, make_instance, make_tool, table):
    # given
    instance = make_instance(owner)
    tools = [make_tool(owner, table, name=f"t{n}") for n in range(3)]

    # when
    response = client_for(owner).post(
        f"/api/mcp-instances/{instance.pk}/bindings/bulk/",
        {"tools": [t.pk for t in tools], "enabled": False},
        format="json",
    )

    # then
    assert response.status_code == 201, response.json()
    assert [(b["tool"], b["enabled"], b["effective_name"]) for b in response.json()["bindings"]] == [
        (tool.pk, False, tool.name) for tool in tools
    ]
    assert list(Binding.objects.order_by("pk").values_list("tool_id", "enabled")) == [(t.pk, False) for t in tools]


def test_bulk_binding_with_a_name_conflict_binds_nothing(owner, make_instance, make_tool, table):
    # given
    instance = make_instance(owner)
    first, second, twin = (
        make_tool(owner, table, name="a"),
        make_tool(owner, table, name="b"),
        make_tool(owner, table, name="B"),
    )
    before = db_snapshot()

    # when
    response = client_for(owner).post(
        f"/api/mcp-instances/{instance.pk}/bindings/bulk/", {"tools": [first.pk, second.pk, twin.pk]}, format="json"
    )

    # then
    assert response.status_code == 409
    assert response.json()["fields"] == {
        "tools": [
            f"Tool 'B' (id {twin.pk}): The name 'B' is already used by the tool 'b' on the instance 'Shop' (names are "
            "unique per instance, ignoring case)."
        ]
    }
    assert db_snapshot() == before


def test_bulk_binding_of_an_already_bound_tool_binds_nothing(owner, make_instance, make_tool, table, bind):
    # given
    instance = make_instance(owner)
    bound, free = make_tool(owner, table, name="a"), make_tool(owner, table, name="b")
    bind(instance, bound)
    before = db_snapshot()

    # when
    response = client_for(owner).post(
        f"/api/mcp-instances/{instance.pk}/bindings/bulk/", {"tools": [free.pk, bound.pk]}, format="json"
    )

    # then
    assert response.status_code == 400
    assert response.json()["fields"] == {
        "tools": [f"Tool 'a' (id {bound.pk}): The tool 'a' is already bound to the instance 'Shop'."]
    }
    assert db_snapshot() == before


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"tools": []}, "tools"),
        ({"tools": "1"}, "tools"),
        ({"tools": [999999]}, "tools.0"),
        ({"tools": [True]}, "tools.0"),
        ({}, "tools"),
        ({"tools": [0], "enabled": "yes"}, "enabled"),
        ({"tools": [0], "extra": 1}, "extra"),
    ],
)
def test_bad_bulk_input_is_a_400_and_binds_nothing(owner, make_instance, make_tool, table, payload, field):
    # given
    instance = make_instance(owner)
    tool = make_tool(owner, table, name="a")
    payload = (
        {**payload, "tools": [tool.pk if t == 0 else t for t in payload["tools"]]}
        if isinstance(payload.get("tools"), list)
        else payload
    )
    before = db_snapshot()

    # when
    response = client_for(owner).post(f"/api/mcp-instances/{instance.pk}/bindings/bulk/", payload, format="json")

    # then
    assert response.status_code == 400, response.json()
    assert field in response.json()["fields"]
    assert db_snapshot() == before


def test_bulk_binding_refuses_duplicates_and_other_users_objects(
    owner, other_user, make_instance, make_tool, table, make_table
):
    # given
    instance = make_instance(owner)
    theirs = make_instance(other_user, slug="theirs")
    mine = make_tool(owner, table, name="a")
    their_tool = make_tool(other_user, make_table(other_user), name="x")
    before = db_snapshot()
    client = client_for(owner)

    # when
    twice = client.post(
        f"/api/mcp-instances/{instance.pk}/bindings/bulk/", {"tools": [mine.pk, mine.pk]}, format="json"
    )
    their_instance = client.post(f"/api/mcp-instances/{theirs.pk}/bindings/bulk/", {"tools": [mine.pk]}, format="json")
    their_tool_ = client.post(
        f"/api/mcp-instances/{instance.pk}/bindings/bulk/", {"tools": [their_tool.pk]}, format="json"
    )

    # then
    assert twice.json()["fields"] == {"tools": [f"The tool {mine.pk} is listed twice."]}
    assert their_instance.status_code == 404
    assert their_tool_.status_code == 400
    assert their_tool_.json()["fields"] == {"tools.0": [f'Invalid pk "{their_tool.pk}" - object does not exist.']}
    assert db_snapshot() == before


def test_a_prefix_that_is_no_python_name_gets_tools_without_python_examples(owner, table):
    """Tool names may start with a digit or hold '-' and '.', Python names not: such tools get no examples
    (metadata.examples must parse as Python), and the generation succeeds."""
    api = client_for(owner)
    answered = api.post(f"/api/tables/{table.pk}/generate-tools/", {"name_prefix": "2024-sales"}, format="json")
    assert answered.status_code == 201
    tools = answered.json()["tools"]
    assert [tool["name"] for tool in tools][:2] == ["2024-sales_schema", "2024-sales_all"]
    assert all("examples" not in tool["metadata"] for tool in tools)


#
# Import: streamed, and bounded (issue "Nobody takes it down")
#


def test_an_import_keeps_every_character_and_never_parses_its_document_back(owner, monkeypatch):
    """Backslashes, quotes, tabs, non-ASCII text and escapes survive the streamed write (PostgreSQL: COPY) and
    the answer, which is spliced from the stored text: the document is never read back into Python values."""
    # given
    from tools_app.services import table_log

    def no_parse(*args, **kwargs):
        raise AssertionError("the import read its document back")

    monkeypatch.setattr(table_log, "document", no_parse)
    content = 'id,text\n1,"a\\\\b \\\\\\\\n ""q"" \t café ☕ \\u0041"\n2,\\\n'.encode()
    expected = [{"id": 1, "text": 'a\\\\b \\\\\\\\n "q" \t café ☕ \\u0041'}, {"id": 2, "text": "\\"}]

    # when
    response = upload(client_for(owner), content, "t.csv", name="t")

    # then
    assert response.status_code == 201, response.content
    assert response.json()["data"] == expected
    monkeypatch.undo()
    table = Table.objects.get()
    assert table.data == expected
    assert table.data_bytes == len(json.dumps(expected))


@pytest.mark.parametrize(
    ("setting", "whose"),
    [("TOOLHUB_IMPORTS_PER_OWNER", "of this user"), ("TOOLHUB_IMPORTS_PER_WORKER", "on this server process")],
)
def test_an_import_over_the_concurrent_imports_is_a_429_and_writes_nothing(owner, other_user, settings, setting, whose):
    """With the owner's import slot (or every slot of the process) taken by an import still running, another is
    refused at once: 429 RATE_LIMITED naming the setting, Retry-After, nothing read or written."""
    # given
    from tools_app.services import import_slots

    settings.TOOLHUB_IMPORTS_PER_OWNER = 1
    settings.TOOLHUB_IMPORTS_PER_WORKER = 1
    before = db_snapshot()
    running_for = owner if setting == "TOOLHUB_IMPORTS_PER_OWNER" else other_user

    # when
    with import_slots.held(running_for.pk):
        response = upload(client_for(owner), SALES_CSV.encode(), "sales.csv", name="sales")

    # then
    assert response.status_code == 429
    assert response.headers["Retry-After"] == "5"
    assert response.json() == {
        "error": "RATE_LIMITED",
        "message": f"Too many imports at once {whose}: at most 1 run at the same time ({setting}). Wait for one to "
        "finish, then try again (in about 5 s).",
        "details": {"retry_after": 5, "limit": 1, "setting": setting},
    }
    assert db_snapshot() == before
    assert import_slots.running() == 0
    assert upload(client_for(owner), SALES_CSV.encode(), "sales.csv", name="sales").status_code == 201


def test_a_refused_import_gives_its_slot_back(owner, settings):
    settings.TOOLHUB_IMPORTS_PER_OWNER = 1
    from tools_app.services import import_slots

    assert upload(client_for(owner), b"id\n1,2\n", "bad.csv", name="t").status_code == 400
    assert import_slots.running(owner.pk) == 0
    assert upload(client_for(owner), b"id\n1\n", "good.csv", name="t").status_code == 201
