"""The data-access layer (SPEC §3, §8): every data type on array and object mounts, every error code,
argument validation, and that a failed write leaves data and version as they were."""

import copy

import pytest

from tools_app.execution.executors import execute
from tools_app.kernel.errors import ErrorCode, ToolError
from tools_app.models import Table

pytestmark = pytest.mark.django_db

ORDERS = [
    {"id": 1, "customer": "ada", "status": "paid", "total": 10.5},
    {"id": 2, "customer": "alan", "status": "shipped", "total": 20},
    {"id": 3, "customer": "grace", "status": "new", "total": 7.25},
]
PRODUCTS = {
    "KB-01": {"name": "Keyboard", "price": 120.5, "stock": 14},
    "MS-02": {"name": "Mouse", "price": 44.5, "stock": 31, "tags": ["usb"]},
    "CB-03": {"name": "Cable", "price": 14.0, "stock": 250},
}
# (json_path, whole document): the same collection at the root and nested two levels down.
ARRAY_MOUNTS = [("", ORDERS), ("/shop/orders", {"shop": {"orders": ORDERS, "name": "demo"}})]
OBJECT_MOUNTS = [("", PRODUCTS), ("/catalog/products", {"catalog": {"products": PRODUCTS}})]
ARRAY_IDS = ["array-root", "array-nested"]
OBJECT_IDS = ["object-root", "object-nested"]


@pytest.fixture
def mounted(owner, make_table, make_tool):
    """mounted(document, json_path, type, **fields) -> (table, tool) on a fresh copy of the document."""

    def make(document, json_path, tool_type, **fields):
        table = make_table(owner, name="data", data=copy.deepcopy(document))
        tool = make_tool(owner, table, type=tool_type, json_path=json_path, **fields)
        return table, tool

    return make


def _stored(table: Table) -> tuple[object, int]:
    row = Table.objects.get(pk=table.pk)
    return row.data, row.version


def _error(tool, arguments) -> ToolError:
    with pytest.raises(ToolError) as caught:
        execute(tool=tool, arguments=arguments)
    return caught.value


def _at(document, json_path):
    value = document
    for token in [t for t in json_path.split("/") if t]:
        value = value[token]
    return value


#
# Reads on array mounts
#


@pytest.mark.parametrize(("json_path", "document"), ARRAY_MOUNTS, ids=ARRAY_IDS)
def test_get_data_schema_on_array(mounted, json_path, document):
    """The shape of an array of records: count, field types, a template, no values."""
    # given
    _, tool = mounted(document, json_path, "get_data_schema")
    # when
    result = execute(tool=tool, arguments={})
    # then
    assert result == {
        "root_type": "array",
        "item_count": 3,
        "item_types": ["object"],
        "fields": {"id": ["integer"], "customer": ["string"], "status": ["string"], "total": ["integer", "number"]},
        "item_template": {"id": "integer", "customer": "string", "status": "string", "total": "number"},
        "optional_fields": [],
    }


@pytest.mark.parametrize(("json_path", "document"), ARRAY_MOUNTS, ids=ARRAY_IDS)
def test_get_all_data_on_array(mounted, json_path, document):
    """get_all_data returns exactly the value at the mount."""
    # given
    _, tool = mounted(document, json_path, "get_all_data")
    # when
    result = execute(tool=tool, arguments={})
    # then
    assert result == ORDERS


@pytest.mark.parametrize(("json_path", "document"), ARRAY_MOUNTS, ids=ARRAY_IDS)
@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("[?status=='paid'].id", [1]),
        ("length(@)", 3),
        ("[?total > `10`].customer", ["ada", "alan"]),
        ("[0].customer", "ada"),
        ("[?status=='lost']", []),
        ("[5]", None),
    ],
)
def test_query_data_on_array(mounted, json_path, document, query, expected):
    """query_data evaluates the JMESPath expression over the mount."""
    # given
    _, tool = mounted(document, json_path, "query_data")
    # when
    result = execute(tool=tool, arguments={"query": query})
    # then
    assert result == expected


@pytest.mark.parametrize(("json_path", "document"), ARRAY_MOUNTS, ids=ARRAY_IDS)
@pytest.mark.parametrize("arguments", [{}, {"limit": 1}, {"limit": 2, "offset": 1}])
def test_preview_without_preview_keys_is_get_all_data(mounted, json_path, document, arguments):
    """SPEC §3.2: without preview_keys, preview returns exactly what get_all_data returns."""
    # given
    table, tool = mounted(document, json_path, "preview")
    everything = mounted(document, json_path, "get_all_data")[1]
    # when
    result = execute(tool=tool, arguments=arguments)
    # then
    assert result == execute(tool=everything, arguments={})
    assert result == ORDERS


@pytest.mark.parametrize(("json_path", "document"), ARRAY_MOUNTS, ids=ARRAY_IDS)
@pytest.mark.parametrize(
    ("arguments", "ids"),
    [
        ({}, [1, 2, 3]),
        ({"limit": 2}, [1, 2]),
        ({"offset": 1}, [2, 3]),
        ({"limit": 1, "offset": 2}, [3]),
        ({"offset": 5}, []),
        ({"limit": 2.0, "offset": 1.0}, [2, 3]),  # JSON Schema counts 2.0 as an integer: so does the window
    ],
)
def test_preview_with_preview_keys_on_array(mounted, json_path, document, arguments, ids):
    """With preview_keys: each record reduced to those keys, a window by limit/offset, the full count."""
    # given
    _, tool = mounted(document, json_path, "preview", metadata={"preview_keys": ["id", "status"]})
    status = {1: "paid", 2: "shipped", 3: "new"}
    # when
    result = execute(tool=tool, arguments=arguments)
    # then
    assert result == {"items": [{"id": i, "status": status[i]} for i in ids], "total_count": 3}


@pytest.mark.parametrize(("json_path", "document"), ARRAY_MOUNTS, ids=ARRAY_IDS)
@pytest.mark.parametrize(
    ("keys", "ids", "not_found"),
    [
        ([1, 3], [1, 3], []),
        (["1", "3"], [1, 3], []),
        ([3, "1"], [1, 3], []),
        ([2, 99, "x"], [2], [99, "x"]),
        ([7], [], [7]),
        ([2.0], [2], []),
    ],
)
def test_select_on_array_compares_keys_as_strings(mounted, json_path, document, keys, ids, not_found):
    """SPEC §8: keys may be strings or numbers and compare as strings; unknown keys are reported."""
    # given
    _, tool = mounted(document, json_path, "select")
    # when
    result = execute(tool=tool, arguments={"keys": keys})
    # then
    assert result == {"items": [ORDERS[i - 1] for i in ids], "not_found": not_found}


@pytest.mark.parametrize(("json_path", "document"), ARRAY_MOUNTS, ids=ARRAY_IDS)
def test_select_with_field_argument(mounted, json_path, document):
    """`field` selects by another field than key_field."""
    # given
    _, tool = mounted(document, json_path, "select")
    # when
    result = execute(tool=tool, arguments={"keys": ["grace", "ada", "bob"], "field": "customer"})
    # then
    assert result == {"items": [ORDERS[0], ORDERS[2]], "not_found": ["bob"]}


def test_select_uses_metadata_key_field(mounted):
    """Without `field`, elements are matched on metadata.key_field."""
    # given
    rows = [{"sku": "A1", "n": 1}, {"sku": "B2", "n": 2}]
    _, tool = mounted(rows, "", "select", metadata={"key_field": "sku"})
    # when
    result = execute(tool=tool, arguments={"keys": ["B2", 1]})
    # then
    assert result == {"items": [{"sku": "B2", "n": 2}], "not_found": [1]}


#
# Reads on object mounts
#


@pytest.mark.parametrize(("json_path", "document"), OBJECT_MOUNTS, ids=OBJECT_IDS)
def test_get_data_schema_on_object(mounted, json_path, document):
    """An object keyed by id is described like a collection of its entries."""
    # given
    _, tool = mounted(document, json_path, "get_data_schema")
    # when
    result = execute(tool=tool, arguments={})
    # then
    assert result["root_type"] == "object"
    assert result["key_count"] == 3
    assert result["layout"] == "keyed_collection"
    assert sorted(result["sample_keys"]) == ["CB-03", "KB-01", "MS-02"]
    assert result["fields"] == {"name": ["string"], "price": ["number"], "stock": ["integer"], "tags": ["array"]}
    assert result["item_template"] == {"name": "string", "price": "number", "stock": "integer", "tags": ["string"]}
    assert result["optional_fields"] == ["tags"]


def test_get_data_schema_on_a_record_and_a_scalar(mounted):
    """A plain object is a record; a scalar mount reports only its type."""
    # given
    document = {"shop": {"name": "demo", "open": True}, "motto": "hi"}
    _, record_tool = mounted(document, "/shop", "get_data_schema")
    _, scalar_tool = mounted(document, "/motto", "get_data_schema")
    # when
    record = execute(tool=record_tool, arguments={})
    scalar = execute(tool=scalar_tool, arguments={})
    # then
    assert record == {
        "root_type": "object",
        "key_count": 2,
        "layout": "record",
        "fields": {"name": ["string"], "open": ["boolean"]},
        "template": {"name": "string", "open": "boolean"},
    }
    assert scalar == {"root_type": "string"}


@pytest.mark.parametrize(("json_path", "document"), OBJECT_MOUNTS, ids=OBJECT_IDS)
def test_get_all_data_on_object(mounted, json_path, document):
    """get_all_data returns the object at the mount."""
    # given
    _, tool = mounted(document, json_path, "get_all_data")
    # when / then
    assert execute(tool=tool, arguments={}) == PRODUCTS


@pytest.mark.parametrize(("json_path", "document"), OBJECT_MOUNTS, ids=OBJECT_IDS)
@pytest.mark.parametrize(
    ("query", "expected"),
    [("sort(keys(@))", ["CB-03", "KB-01", "MS-02"]), ('"KB-01".price', 120.5), ("length(values(@)[?stock > `20`])", 2)],
)
def test_query_data_on_object(mounted, json_path, document, query, expected):
    """query_data works over an object mount too."""
    # given
    _, tool = mounted(document, json_path, "query_data")
    # when / then
    assert execute(tool=tool, arguments={"query": query}) == expected


@pytest.mark.parametrize(("json_path", "document"), OBJECT_MOUNTS, ids=OBJECT_IDS)
def test_preview_without_preview_keys_on_object_is_get_all_data(mounted, json_path, document):
    """Without preview_keys, preview of an object is the object."""
    # given
    _, tool = mounted(document, json_path, "preview")
    # when / then
    assert execute(tool=tool, arguments={"limit": 1}) == PRODUCTS


@pytest.mark.parametrize(("json_path", "document"), OBJECT_MOUNTS, ids=OBJECT_IDS)
def test_preview_with_preview_keys_on_object(mounted, json_path, document):
    """Object entries come back as {key, content} reduced to the preview keys, windowed, with the count."""
    # given
    _, tool = mounted(document, json_path, "preview", metadata={"preview_keys": ["name"]})
    # when
    whole = execute(tool=tool, arguments={})
    window = execute(tool=tool, arguments={"limit": 1, "offset": 1})
    # then
    assert whole["total_count"] == 3
    assert sorted(whole["items"], key=lambda item: item["key"]) == [
        {"key": "CB-03", "content": {"name": "Cable"}},
        {"key": "KB-01", "content": {"name": "Keyboard"}},
        {"key": "MS-02", "content": {"name": "Mouse"}},
    ]
    assert window == {"items": [whole["items"][1]], "total_count": 3}


@pytest.mark.parametrize(("json_path", "document"), OBJECT_MOUNTS, ids=OBJECT_IDS)
def test_select_on_object(mounted, json_path, document):
    """Object entries are selected by key; missing keys are reported."""
    # given
    _, tool = mounted(document, json_path, "select")
    # when
    result = execute(tool=tool, arguments={"keys": ["MS-02", "nope", "KB-01"]})
    # then
    assert result == {
        "items": [{"key": "MS-02", "content": PRODUCTS["MS-02"]}, {"key": "KB-01", "content": PRODUCTS["KB-01"]}],
        "not_found": ["nope"],
    }


def test_select_on_object_with_numeric_keys(mounted):
    """Numbers and strings name the same entry of an object mount."""
    # given
    _, tool = mounted({"1": {"n": "one"}, "2": {"n": "two"}}, "", "select")
    # when
    result = execute(tool=tool, arguments={"keys": [2, "1", 3]})
    # then
    assert result == {
        "items": [{"key": "2", "content": {"n": "two"}}, {"key": "1", "content": {"n": "one"}}],
        "not_found": [3],
    }


#
# Writes on array mounts
#


@pytest.mark.parametrize(("json_path", "document"), ARRAY_MOUNTS, ids=ARRAY_IDS)
def test_create_on_array_appends(mounted, json_path, document):
    """create appends records and returns {"created": N, "version": V}."""
    # given
    table, tool = mounted(document, json_path, "create")
    new = [{"id": 4, "customer": "edsger"}, {"id": "5", "customer": "barbara"}]
    # when
    result = execute(tool=tool, arguments={"elements": new})
    # then
    assert result == {"created": 2, "version": 2}
    data, version = _stored(table)
    assert _at(data, json_path) == ORDERS + new
    assert version == 2


@pytest.mark.parametrize(("json_path", "document"), ARRAY_MOUNTS, ids=ARRAY_IDS)
def test_update_on_array_merges_patches(mounted, json_path, document):
    """update applies JSON Merge Patch to each keyed record (null removes a field)."""
    # given
    table, tool = mounted(document, json_path, "update")
    # when
    result = execute(
        tool=tool,
        arguments={"elements": [{"id": 1, "status": "refunded", "total": None}, {"id": 3, "notes": {"a": 1}}]},
    )
    # then
    assert result == {"updated": 2, "version": 2}
    data, version = _stored(table)
    assert _at(data, json_path) == [
        {"id": 1, "customer": "ada", "status": "refunded"},
        ORDERS[1],
        {"id": 3, "customer": "grace", "status": "new", "total": 7.25, "notes": {"a": 1}},
    ]
    assert version == 2


def test_update_with_a_string_key_keeps_the_stored_key(mounted):
    """Keys compare as strings, and matching "1" to 1 does not rewrite the record's key."""
    # given
    table, tool = mounted(ORDERS, "", "update")
    # when
    result = execute(tool=tool, arguments={"elements": [{"id": "1", "status": "refunded"}]})
    # then
    assert result == {"updated": 1, "version": 2}
    data, _ = _stored(table)
    assert data[0] == {"id": 1, "customer": "ada", "status": "refunded", "total": 10.5}


@pytest.mark.parametrize(("json_path", "document"), ARRAY_MOUNTS, ids=ARRAY_IDS)
def test_delete_on_array(mounted, json_path, document):
    """delete removes the records with those keys (strings or numbers) and reports how many."""
    # given
    table, tool = mounted(document, json_path, "delete")
    # when
    result = execute(tool=tool, arguments={"keys": ["1", 3]})
    # then
    assert result == {"deleted": 2, "version": 2}
    data, version = _stored(table)
    assert _at(data, json_path) == [ORDERS[1]]
    assert version == 2


def test_delete_repeating_a_key_deletes_once(mounted):
    """The same key twice (as number and string) removes one record."""
    # given
    table, tool = mounted(ORDERS, "", "delete")
    # when
    result = execute(tool=tool, arguments={"keys": [2, "2"]})
    # then
    assert result == {"deleted": 1, "version": 2}
    assert [row["id"] for row in _stored(table)[0]] == [1, 3]


def test_nested_write_leaves_siblings_alone(mounted):
    """A write at /shop/orders leaves the rest of the document as it was."""
    # given
    document = {"shop": {"orders": ORDERS, "name": "demo"}, "other": [1, 2]}
    table, tool = mounted(document, "/shop/orders", "delete")
    # when
    execute(tool=tool, arguments={"keys": [1, 2, 3]})
    # then
    assert _stored(table) == ({"shop": {"orders": [], "name": "demo"}, "other": [1, 2]}, 2)


def test_create_on_a_missing_last_segment_creates_an_array(mounted):
    """SPEC §3.1: create may create a missing last segment as an array."""
    # given
    table, tool = mounted({"shop": {"name": "demo"}}, "/shop/orders", "create")
    # when
    result = execute(tool=tool, arguments={"elements": [{"id": 1}]})
    # then
    assert result == {"created": 1, "version": 2}
    assert _stored(table) == ({"shop": {"name": "demo", "orders": [{"id": 1}]}}, 2)


def test_create_on_a_missing_middle_segment_is_mount_not_found(mounted):
    """Only the last segment may be created; a missing parent is MOUNT_NOT_FOUND and nothing is written."""
    # given
    table, tool = mounted({"shop": {}}, "/shop/region/orders", "create")
    # when
    error = _error(tool, {"elements": [{"id": 1}]})
    # then
    assert error.code == ErrorCode.MOUNT_NOT_FOUND
    assert error.message == "The mount '/shop/region/orders' does not exist in the table: no 'region' under /shop."
    assert error.details == {"json_path": "/shop/region/orders", "missing_segment": "region"}
    assert _stored(table) == ({"shop": {}}, 1)


def test_create_under_a_missing_top_segment_names_the_tool_mount(mounted):
    """The error names the tool's mount, not the parent that was looked up, and the part that is missing."""
    # given
    table, tool = mounted({"other": []}, "/missing/deeper", "create")
    # when
    error = _error(tool, {"elements": [{"id": 1}]})
    # then
    assert error.code == ErrorCode.MOUNT_NOT_FOUND
    assert error.message == (
        "The mount '/missing/deeper' does not exist in the table: no 'missing' under (the document root)."
    )
    assert error.details == {"json_path": "/missing/deeper", "missing_segment": "missing"}
    assert _stored(table) == ({"other": []}, 1)


def test_create_under_a_missing_segment_of_an_array_parent_is_refused(mounted):
    """A missing last segment under an array cannot be created: MOUNT_NOT_FOUND, nothing written."""
    # given
    table, tool = mounted({"rows": [[1]]}, "/rows/3", "create")
    # when
    error = _error(tool, {"elements": [{"id": 1}]})
    # then
    assert error.code == ErrorCode.MOUNT_NOT_FOUND
    assert _stored(table) == ({"rows": [[1]]}, 1)


#
# Writes on object mounts
#


@pytest.mark.parametrize(("json_path", "document"), OBJECT_MOUNTS, ids=OBJECT_IDS)
def test_create_on_object_adds_entries(mounted, json_path, document):
    """create adds {key, content} entries to an object mount."""
    # given
    table, tool = mounted(document, json_path, "create")
    # when
    result = execute(
        tool=tool, arguments={"elements": [{"key": "HB-04", "content": {"name": "Hub"}}, {"key": 5, "content": 1}]}
    )
    # then
    assert result == {"created": 2, "version": 2}
    data, version = _stored(table)
    assert _at(data, json_path) == {**PRODUCTS, "HB-04": {"name": "Hub"}, "5": 1}
    assert version == 2


@pytest.mark.parametrize(("json_path", "document"), OBJECT_MOUNTS, ids=OBJECT_IDS)
def test_update_on_object_merges_content(mounted, json_path, document):
    """update merges each content into its entry (JSON Merge Patch)."""
    # given
    table, tool = mounted(document, json_path, "update")
    # when
    result = execute(
        tool=tool,
        arguments={"elements": [{"key": "KB-01", "content": {"stock": 0, "price": None}}]},
    )
    # then
    assert result == {"updated": 1, "version": 2}
    data, version = _stored(table)
    assert _at(data, json_path)["KB-01"] == {"name": "Keyboard", "stock": 0}
    assert _at(data, json_path)["MS-02"] == PRODUCTS["MS-02"]
    assert version == 2


@pytest.mark.parametrize(("json_path", "document"), OBJECT_MOUNTS, ids=OBJECT_IDS)
def test_delete_on_object(mounted, json_path, document):
    """delete removes entries by key and reports how many."""
    # given
    table, tool = mounted(document, json_path, "delete")
    # when
    result = execute(tool=tool, arguments={"keys": ["KB-01", "CB-03"]})
    # then
    assert result == {"deleted": 2, "version": 2}
    data, version = _stored(table)
    assert _at(data, json_path) == {"MS-02": PRODUCTS["MS-02"]}
    assert version == 2


def test_successive_writes_bump_version_once_each(mounted):
    """version grows by exactly one per successful write call."""
    # given
    table, create = mounted([], "", "create")
    # when
    results = [execute(tool=create, arguments={"elements": [{"id": i}]}) for i in range(4)]
    # then
    assert [r["version"] for r in results] == [2, 3, 4, 5]
    assert _stored(table) == ([{"id": 0}, {"id": 1}, {"id": 2}, {"id": 3}], 5)


def test_reads_see_the_latest_write(mounted, owner, make_tool):
    """After a write, every read type sees the new data (no stale cache)."""
    # given
    table, create = mounted(ORDERS, "", "create")
    read_all = make_tool(owner, table, type="get_all_data")
    shape = make_tool(owner, table, type="get_data_schema")
    assert execute(tool=shape, arguments={})["item_count"] == 3
    # when
    execute(tool=create, arguments={"elements": [{"id": 4}]})
    # then
    assert execute(tool=read_all, arguments={})[-1] == {"id": 4}
    assert execute(tool=shape, arguments={})["item_count"] == 4


#
# Errors
#


@pytest.mark.parametrize(
    ("tool_type", "arguments", "message"),
    [
        ("query_data", {}, "Invalid arguments: 'query' is required."),
        ("query_data", {"query": 5}, "Invalid arguments: argument 'query': 5 is not of type 'string'."),
        ("query_data", {"query": ""}, "Invalid arguments: argument 'query': '' should be non-empty."),
        ("select", {}, "Invalid arguments: 'keys' is required."),
        ("select", {"keys": []}, "Invalid arguments: argument 'keys': [] should be non-empty."),
        (
            "select",
            {"keys": [{"id": 1}]},
            "Invalid arguments: argument 'keys[0]': {'id': 1} is not of type 'string', 'integer', 'number'.",
        ),
        ("preview", {"limit": "3"}, "Invalid arguments: argument 'limit': '3' is not of type 'integer'."),
        ("preview", {"limit": 0}, "Invalid arguments: argument 'limit': 0 is less than the minimum of 1."),
        ("preview", {"offset": -1}, "Invalid arguments: argument 'offset': -1 is less than the minimum of 0."),
        (
            "create",
            {"elements": {"id": 1}},
            "Invalid arguments: argument 'elements': {'id': 1} is not of type 'array'.",
        ),
        ("update", {"elements": [1]}, "Invalid arguments: argument 'elements[0]': 1 is not of type 'object'."),
        ("delete", {"keys": None}, "Invalid arguments: argument 'keys': None is not of type 'array'."),
    ],
)
def test_invalid_arguments_name_the_argument(mounted, tool_type, arguments, message):
    """Arguments failing the input schema are INVALID_ARGUMENTS, naming the argument."""
    # given
    table, tool = mounted(ORDERS, "", tool_type)
    # when
    error = _error(tool, arguments)
    # then
    assert error.code == ErrorCode.INVALID_ARGUMENTS
    assert error.message == message
    assert _stored(table) == (ORDERS, 1)


def test_unexpected_argument_is_named(mounted):
    """An argument the schema does not know is named."""
    # given
    _, tool = mounted(ORDERS, "", "get_all_data")
    # when
    error = _error(tool, {"bogus": 1})
    # then
    assert error.code == ErrorCode.INVALID_ARGUMENTS
    assert "'bogus' was unexpected" in error.message


@pytest.mark.parametrize("arguments", [[1], "query", 3])
def test_arguments_must_be_an_object(mounted, arguments):
    """Arguments are a JSON object."""
    # given
    _, tool = mounted(ORDERS, "", "query_data")
    # when
    error = _error(tool, arguments)
    # then
    assert (error.code, error.message) == (ErrorCode.INVALID_ARGUMENTS, "Arguments must be a JSON object.")


def test_missing_arguments_count_as_empty(mounted):
    """None as arguments is an empty object (tools without arguments run)."""
    # given
    _, tool = mounted(ORDERS, "", "get_all_data")
    # when / then
    assert execute(tool=tool, arguments=None) == ORDERS


@pytest.mark.parametrize("query", ["[?status==", "[?status=='paid'", "foo[", "a..b", "foo]", "&&"])
def test_invalid_jmespath_is_invalid_query(mounted, query):
    """A JMESPath syntax error is INVALID_QUERY quoting the expression."""
    # given
    _, tool = mounted(ORDERS, "", "query_data")
    # when
    error = _error(tool, {"query": query})
    # then
    assert error.code == ErrorCode.INVALID_QUERY
    assert query in error.message


def test_jmespath_type_error_is_invalid_query(mounted):
    """A type error while evaluating is INVALID_QUERY too, not a crash."""
    # given
    _, tool = mounted(ORDERS, "", "query_data")
    # when
    error = _error(tool, {"query": "sum([].customer)"})
    # then
    assert error.code == ErrorCode.INVALID_QUERY
    assert "sum([].customer)" in error.message


@pytest.mark.parametrize(
    ("tool_type", "arguments"),
    [
        ("get_data_schema", {}),
        ("get_all_data", {}),
        ("query_data", {"query": "@"}),
        ("preview", {}),
        ("select", {"keys": [1]}),
        ("update", {"elements": [{"id": 1}]}),
        ("delete", {"keys": [1]}),
    ],
)
def test_missing_mount_is_mount_not_found(mounted, tool_type, arguments):
    """SPEC §3.1: a missing mount is an error for reads, updates and deletes, naming the missing segment."""
    # given
    table, tool = mounted({"shop": {"orders": ORDERS}}, "/shop/missing", tool_type)
    # when
    error = _error(tool, arguments)
    # then
    assert error.code == ErrorCode.MOUNT_NOT_FOUND
    assert error.message == "The mount '/shop/missing' does not exist in the table: no 'missing' under /shop."
    assert _stored(table) == ({"shop": {"orders": ORDERS}}, 1)


def test_array_index_mount(mounted):
    """A numeric segment indexes an array; out of range is MOUNT_NOT_FOUND."""
    # given
    document = {"pages": [{"rows": [1, 2]}, {"rows": [3]}]}
    _, ok = mounted(document, "/pages/1/rows", "get_all_data")
    _, missing = mounted(document, "/pages/2/rows", "get_all_data")
    # when / then
    assert execute(tool=ok, arguments={}) == [3]
    assert _error(missing, {}).code == ErrorCode.MOUNT_NOT_FOUND


def test_escaped_pointer_tokens(mounted):
    """~1 and ~0 in json_path name keys holding '/' and '~'."""
    # given
    _, tool = mounted({"a/b": {"c~d": [7]}}, "/a~1b/c~0d", "get_all_data")
    # when / then
    assert execute(tool=tool, arguments={}) == [7]


@pytest.mark.parametrize(
    ("tool_type", "arguments", "metadata"),
    [
        ("select", {"keys": [1]}, {}),
        ("preview", {}, {"preview_keys": ["id"]}),
        ("create", {"elements": [{"id": 1}]}, {}),
        ("update", {"elements": [{"id": 1}]}, {}),
        ("delete", {"keys": [1]}, {}),
    ],
)
def test_scalar_mount_is_mount_type_mismatch(mounted, tool_type, arguments, metadata):
    """Collection tools on a scalar mount are MOUNT_TYPE_MISMATCH naming what was found; nothing written."""
    # given
    table, tool = mounted({"shop": {"name": "demo"}}, "/shop/name", tool_type, metadata=metadata)
    # when
    error = _error(tool, arguments)
    # then
    assert error.code == ErrorCode.MOUNT_TYPE_MISMATCH
    assert error.message.startswith("The mount '/shop/name' holds a string;")
    assert _stored(table) == ({"shop": {"name": "demo"}}, 1)


@pytest.mark.parametrize(
    ("elements", "key"),
    [
        ([{"id": 2, "customer": "dup"}], "2"),
        ([{"id": "3"}], "3"),
        ([{"id": 4}, {"id": 1}], "1"),
        ([{"id": 4}, {"id": 5}, {"id": "4"}], "4"),
    ],
)
def test_create_existing_or_repeated_key_on_array_is_key_exists(mounted, elements, key):
    """A key already present, or repeated within the batch, refuses the whole create."""
    # given
    table, tool = mounted(ORDERS, "", "create")
    # when
    error = _error(tool, {"elements": elements})
    # then
    assert error.code == ErrorCode.KEY_EXISTS
    assert error.details["key"] == key
    assert "nothing was created" in error.message
    assert _stored(table) == (ORDERS, 1)


@pytest.mark.parametrize(
    "elements",
    [
        [{"key": "KB-01", "content": {}}],
        [{"key": "NEW", "content": 1}, {"key": "NEW", "content": 2}],
    ],
)
def test_create_existing_or_repeated_key_on_object_is_key_exists(mounted, elements):
    """Object mounts refuse existing and repeated keys too, writing nothing."""
    # given
    table, tool = mounted(PRODUCTS, "", "create")
    # when
    error = _error(tool, {"elements": elements})
    # then
    assert error.code == ErrorCode.KEY_EXISTS
    assert _stored(table) == (PRODUCTS, 1)


@pytest.mark.parametrize(
    ("document", "tool_type", "arguments", "key"),
    [
        (ORDERS, "update", {"elements": [{"id": 1, "status": "x"}, {"id": 9, "status": "y"}]}, "9"),
        (ORDERS, "delete", {"keys": [1, "nope"]}, "nope"),
        (PRODUCTS, "update", {"elements": [{"key": "KB-01", "content": {}}, {"key": "XX", "content": {}}]}, "XX"),
        (PRODUCTS, "delete", {"keys": ["KB-01", "XX"]}, "XX"),
    ],
)
def test_missing_key_is_key_not_found_and_nothing_changes(mounted, document, tool_type, arguments, key):
    """A missing key refuses the whole update or delete, even when other keys exist."""
    # given
    table, tool = mounted(document, "", tool_type)
    # when
    error = _error(tool, arguments)
    # then
    assert error.code == ErrorCode.KEY_NOT_FOUND
    assert error.details["key"] == key
    assert f"no element with key {key!r}" in error.message
    assert _stored(table) == (document, 1)


@pytest.mark.parametrize(
    ("document", "tool_type", "elements", "message"),
    [
        (ORDERS, "create", [{"customer": "no id"}], "Invalid arguments: elements[0] has no key field 'id'."),
        (
            ORDERS,
            "create",
            [{"id": 9}, "text"],
            "Invalid arguments: elements[1] must be an object holding its key "
            "'id' to create a record of an array mount (got a string).",
        ),
        (ORDERS, "update", [{"status": "x"}], "Invalid arguments: elements[0] has no key field 'id'."),
        (
            PRODUCTS,
            "create",
            [{"id": 1}],
            'Invalid arguments: elements[0] must be {"key": ..., "content": ...} '
            "to create an entry of an object mount.",
        ),
        (
            PRODUCTS,
            "update",
            [{"key": "KB-01"}],
            'Invalid arguments: elements[0] must be {"key": ..., '
            '"content": ...} to update an entry of an object mount.',
        ),
    ],
)
def test_malformed_elements_are_invalid_arguments(mounted, document, tool_type, elements, message):
    """Elements of the wrong form for the mount are INVALID_ARGUMENTS naming the element; nothing written."""
    # given
    table, tool = mounted(document, "", tool_type)
    # when
    error = _error(tool, {"elements": elements})
    # then
    assert (error.code, error.message) == (ErrorCode.INVALID_ARGUMENTS, message)
    assert _stored(table) == (document, 1)


def test_external_tool_is_not_callable(owner, make_tool):
    """SPEC §3.2: external tools are catalogued, not run here; the error says where they are served."""
    # given
    tool = make_tool(owner, None, type="external", metadata={"mcp_server": "https://tools.example.com/mcp"})
    # when
    error = _error(tool, {})
    # then
    assert error.code == ErrorCode.TOOL_NOT_CALLABLE
    assert "https://tools.example.com/mcp" in error.message


#
# Custom input schemas
#


def test_custom_schema_is_enforced(mounted):
    """A custom schema's own constraints apply (here a shorter query)."""
    # given
    schema = {"type": "object", "properties": {"query": {"type": "string", "maxLength": 10}}, "required": ["query"]}
    _, tool = mounted(ORDERS, "", "query_data", input_schema=schema)
    # when
    error = _error(tool, {"query": "[?status=='paid'].id"})
    # then
    assert error.code == ErrorCode.INVALID_ARGUMENTS
    assert error.message == "Invalid arguments: argument 'query' has 20 characters; the limit is 10."
    assert execute(tool=tool, arguments={"query": "[0].id"}) == 1


def test_custom_schema_may_add_arguments(mounted):
    """A custom schema may document extra arguments; they are accepted."""
    # given
    schema = {
        "type": "object",
        "properties": {"keys": {"type": "array"}, "reason": {"type": "string"}},
        "required": ["keys"],
    }
    _, tool = mounted(ORDERS, "", "select", input_schema=schema)
    # when
    result = execute(tool=tool, arguments={"keys": [2], "reason": "audit"})
    # then
    assert result == {"items": [ORDERS[1]], "not_found": []}


def test_type_needs_apply_under_a_looser_custom_schema(mounted):
    """A custom schema that forgets `required` or item types still cannot break the type's needs."""
    # given
    schema = {"type": "object", "properties": {"keys": {"description": "anything"}}}
    table, tool = mounted(ORDERS, "", "delete", input_schema=schema)
    # when
    missing = _error(tool, {})
    empty = _error(tool, {"keys": []})
    wrong = _error(tool, {"keys": "1"})
    # then
    assert (missing.code, missing.message) == (ErrorCode.INVALID_ARGUMENTS, "Invalid arguments: 'keys' is required.")
    assert empty.message == "Invalid arguments: argument 'keys': [] should be non-empty."
    assert wrong.message == "Invalid arguments: argument 'keys': '1' is not of type 'array'."
    assert _stored(table) == (ORDERS, 1)


def test_stricter_custom_schema_refuses_numbers(mounted):
    """A custom schema may narrow keys to strings."""
    # given
    schema = {
        "type": "object",
        "properties": {"keys": {"type": "array", "items": {"type": "string"}}},
        "required": ["keys"],
    }
    _, tool = mounted(ORDERS, "", "select", input_schema=schema)
    # when
    error = _error(tool, {"keys": [1]})
    # then
    assert error.message == "Invalid arguments: argument 'keys[0]': 1 is not of type 'string'."


#
# Failed writes leave data and version untouched
#


FAILING_WRITES = [
    (ORDERS, "", "create", {"elements": [{"id": 1}]}),
    (ORDERS, "", "create", {"elements": [{"id": 7}, {"id": 7}]}),
    (ORDERS, "", "create", {"elements": [{"id": 7}, {"nope": 1}]}),
    (ORDERS, "", "create", {"elements": []}),
    (ORDERS, "", "update", {"elements": [{"id": 1, "status": "x"}, {"id": 42}]}),
    (ORDERS, "", "delete", {"keys": [1, 2, 42]}),
    (PRODUCTS, "", "create", {"elements": [{"key": "Z", "content": 1}, {"key": "KB-01", "content": 2}]}),
    (PRODUCTS, "", "update", {"elements": [{"key": "KB-01", "content": {"stock": 0}}, {"key": "Z", "content": {}}]}),
    (PRODUCTS, "", "delete", {"keys": ["KB-01", "Z"]}),
    ({"shop": {"name": "demo"}}, "/shop/name", "create", {"elements": [{"id": 1}]}),
    ({"shop": {}}, "/shop/a/b", "create", {"elements": [{"id": 1}]}),
    ({"shop": {}}, "/shop/a", "update", {"elements": [{"id": 1}]}),
]


@pytest.mark.parametrize(("document", "json_path", "tool_type", "arguments"), FAILING_WRITES)
def test_failed_write_leaves_data_and_version_untouched(
    mounted, owner, make_tool, document, json_path, tool_type, arguments
):
    """Whatever the failure, the stored data and version are exactly as before, and reads agree."""
    # given
    table, tool = mounted(document, json_path, tool_type)
    reader = make_tool(owner, table, type="get_all_data")
    # when
    with pytest.raises(ToolError):
        execute(tool=tool, arguments=arguments)
    # then
    assert _stored(table) == (document, 1)
    assert execute(tool=reader, arguments={}) == document


@pytest.mark.django_db(transaction=True)
def test_failed_write_in_a_real_transaction_writes_nothing(owner, make_table, make_tool):
    """Outside a test transaction too (real COMMIT/ROLLBACK), a refused write leaves the row as it was."""
    # given
    table = make_table(owner, name="data", data=copy.deepcopy(ORDERS))
    tool = make_tool(owner, table, type="update")
    # when
    with pytest.raises(ToolError):
        execute(tool=tool, arguments={"elements": [{"id": 1, "status": "x"}, {"id": 42}]})
    execute(tool=tool, arguments={"elements": [{"id": 2, "status": "lost"}]})
    # then
    data, version = _stored(table)
    assert version == 2
    assert [row["status"] for row in data] == ["paid", "lost", "new"]


@pytest.mark.parametrize(
    ("tool_type", "arguments"),
    [
        ("create", {"elements": [{"id": 9, "score": float("nan")}]}),
        ("update", {"elements": [{"id": 1, "total": float("inf")}]}),
        ("select", {"keys": [float("nan")]}),
    ],
)
def test_nan_and_infinity_are_invalid_arguments(mounted, tool_type, arguments):
    """NaN and Infinity are not JSON: refused as INVALID_ARGUMENTS (PostgreSQL would refuse the write)."""
    # given
    table, tool = mounted(ORDERS, "", tool_type)
    # when
    error = _error(tool, arguments)
    # then
    assert (error.code, error.message) == (
        ErrorCode.INVALID_ARGUMENTS,
        "Invalid arguments: NaN and Infinity are not JSON numbers.",
    )
    assert _stored(table) == (ORDERS, 1)


@pytest.mark.parametrize(
    "query",
    ["`NaN`", "to_number('1e999')", "to_number('nan')", "[`1e999`]", "{v: sum([`1e308`, `1e308`])}"],
)
def test_query_producing_nan_or_infinity_is_invalid_query(owner, table, make_tool, query):
    """JSON cannot carry NaN/Infinity: a query that makes one is INVALID_QUERY, not a serialisation crash."""
    # given
    tool = make_tool(owner, table, "query_data")
    # when
    with pytest.raises(ToolError) as caught:
        execute(tool=tool, arguments={"query": query})
    # then
    assert caught.value.code == ErrorCode.INVALID_QUERY
    assert caught.value.message == (
        "The JMESPath expression produced NaN or Infinity, which JSON cannot represent (from a literal, "
        f"to_number, sum or avg). Expression: {query}"
    )


def test_query_with_finite_sum_and_large_literal_comparison_succeeds(owner, table, make_tool):
    """Flagged functions and non-finite literals only fail when the result really holds a non-finite number."""
    # given
    tool = make_tool(owner, table, "query_data")
    # when
    total = execute(tool=tool, arguments={"query": "sum([*].total)"})
    below = execute(tool=tool, arguments={"query": "[?total < `1e999`].id"})
    # then
    assert total == 37.75
    assert below == [1, 2, 3]
