"""Table history: snapshot + change log, audit, safe writes, compaction and retention."""

import copy
import random
from datetime import timedelta

import jsonpatch
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from mcp_app.tests.mcp_harness import Harness
from tests.api_helpers import client_for, db_snapshot
from tools_app import services
from tools_app.execution.executors import execute
from tools_app.execution.pipeline import Caller, run_tool_call, target_of_tool
from tools_app.kernel import json_patch
from tools_app.kernel.errors import ErrorCode, ToolError
from tools_app.models import CallLog, Surface, Table, TableChange, TableSnapshot
from tools_app.services import table_log
from tools_app.services.table_cache import table_cache
from tools_app.tests.history_helpers import write_elsewhere

# The document storage's snapshot and log of RFC 6902 patches, and its catch-up; a rows table's history:
# tools_app/tests/execution/test_records.py and test_rows_replace.py.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("document_storage")]

RECORDS = [{"id": 1, "status": "new"}, {"id": 2, "status": "paid"}, {"id": 3, "status": "new"}]


@pytest.fixture
def orders(make_table, owner):
    return make_table(owner, name="orders", data=[dict(record) for record in RECORDS])


@pytest.fixture
def write_tools(make_tool, owner, orders):
    return {kind: make_tool(owner, orders, type=kind, name=f"orders_{kind}") for kind in ("create", "update", "delete")}


def _document(table_id: int):
    """The document as the log says: the snapshot with every entry after it applied (no cache)."""
    snapshot_version, data = _snapshot(table_id)
    patches = TableChange.objects.filter(table_id=table_id, version__gt=snapshot_version).order_by("version")
    for patch in patches.values_list("patch", flat=True):
        data = jsonpatch.apply_patch(data, patch)
    return data


def _snapshot(table_id: int) -> tuple[int, object]:
    return TableSnapshot.objects.filter(table_id=table_id).values_list("version", "data").get()


def _versions(table_id: int) -> list[int]:
    return list(TableChange.objects.filter(table_id=table_id).order_by("version").values_list("version", flat=True))


def _api_call(user, tool, arguments):
    return client_for(user).post(f"/api/tools/{tool.pk}/call/", {"arguments": arguments}, format="json")


#
# json_patch: copy-on-write application
#


def test_apply_shares_untouched_containers_and_never_mutates_the_input():
    """A patch copies only the containers on its paths; the old document and the patch's values stay as they were."""
    # given
    document = {"orders": [{"id": 1, "tags": ["a"]}, {"id": 2}], "meta": {"count": 2}}
    before = copy.deepcopy(document)
    patch = [
        {"op": "add", "path": "/orders/-", "value": {"id": 3}},
        {"op": "replace", "path": "/orders/0/tags/0", "value": "b"},
        {"op": "remove", "path": "/orders/1"},
    ]
    # when
    after = json_patch.apply(document, patch)
    # then
    assert document == before
    assert after == {"orders": [{"id": 1, "tags": ["b"]}, {"id": 3}], "meta": {"count": 2}}
    assert after["meta"] is document["meta"]
    assert patch[0]["value"] == {"id": 3}


def test_apply_equals_the_library_on_random_patches():
    """200 random add/remove/replace/move sequences: the copy-on-write result is jsonpatch's on a deep copy."""
    rng = random.Random(14)
    for _ in range(200):
        document = {"a": [rng.randrange(9) for _ in range(5)], "b": {"x": {"y": [1, 2]}, "z": 3}}
        before = copy.deepcopy(document)
        patch = []
        shadow = copy.deepcopy(document)
        for _ in range(rng.randrange(1, 6)):
            choice = rng.randrange(5)
            length = len(shadow["a"])
            if choice == 0:
                operation = {"op": "add", "path": f"/a/{rng.randrange(length + 1)}", "value": {"n": rng.randrange(9)}}
            elif choice == 1 and length:
                operation = {"op": "remove", "path": f"/a/{rng.randrange(length)}"}
            elif choice == 2 and length:
                operation = {"op": "replace", "path": f"/a/{rng.randrange(length)}", "value": [rng.randrange(9)]}
            elif choice == 3:
                operation = {"op": "add", "path": "/b/x/y/-", "value": rng.randrange(9)}
            else:
                operation = {"op": "move", "from": "/b/z", "path": "/b/w"} if "z" in shadow["b"] else None
            if operation is None:
                continue
            shadow = jsonpatch.apply_patch(shadow, [operation])
            patch.append(operation)
        assert json_patch.apply(document, patch) == shadow
        assert document == before


def test_checked_refuses_what_is_not_a_patch():
    with pytest.raises(ValueError, match="list of operations"):
        json_patch.checked({"op": "add"})
    with pytest.raises(ValueError, match="Not a JSON Patch"):
        json_patch.checked([{"op": "frobnicate", "path": "/a"}])
    assert json_patch.checked([{"op": "remove", "path": "/a"}]) == [{"op": "remove", "path": "/a"}]


#
# Storage: every write appends one entry; the snapshot is not rewritten
#


def test_writes_append_patches_and_leave_the_snapshot(write_tools, orders):
    """create, update and delete each append one entry (patch and inverse) and move the version by one; the stored
    snapshot stays at version 1 and the snapshot plus the log is the document."""
    # when
    execute(tool=write_tools["create"], arguments={"elements": [{"id": 4, "status": "new"}]})
    execute(tool=write_tools["update"], arguments={"elements": [{"id": 2, "status": "shipped", "note": "x"}]})
    execute(tool=write_tools["delete"], arguments={"keys": [1, "3"]})
    # then
    entries = list(
        TableChange.objects.filter(table=orders).order_by("version").values_list("version", "patch", "inverse")
    )
    assert entries == [
        (2, [{"op": "add", "path": "/-", "value": {"id": 4, "status": "new"}}], [{"op": "remove", "path": "/3"}]),
        (  # an update stores the fields it changed, not the record
            3,
            [
                {"op": "replace", "path": "/1/status", "value": "shipped"},
                {"op": "add", "path": "/1/note", "value": "x"},
            ],
            [{"op": "remove", "path": "/1/note"}, {"op": "replace", "path": "/1/status", "value": "paid"}],
        ),
        (
            4,
            [{"op": "remove", "path": "/2"}, {"op": "remove", "path": "/0"}],
            [
                {"op": "add", "path": "/0", "value": {"id": 1, "status": "new"}},
                {"op": "add", "path": "/2", "value": {"id": 3, "status": "new"}},
            ],
        ),
    ]
    assert (Table.objects.get(pk=orders.pk).version, _snapshot(orders.pk)) == (4, (1, RECORDS))
    expected = [{"id": 2, "status": "shipped", "note": "x"}, {"id": 4, "status": "new"}]
    assert _document(orders.pk) == expected
    assert services.table_data(orders.pk) == (4, expected)
    assert Table.objects.get(pk=orders.pk).data == expected  # a loaded table holds the current document


def test_object_mount_writes_are_patches_on_keys(owner, make_table, make_tool):
    """On an object mount the paths name the keys (RFC 6901 escaped); a missing array mount is created by create."""
    # given
    table = make_table(owner, name="shop", data={"items": {"a/b": {"price": 1}}, "meta": {}})
    create = make_tool(owner, table, type="create", name="items_create", json_path="/items")
    delete = make_tool(owner, table, type="delete", name="items_delete", json_path="/items")
    orders_create = make_tool(owner, table, type="create", name="new_create", json_path="/meta/orders")
    # when
    execute(tool=create, arguments={"elements": [{"key": "c~d", "content": {"price": 2}}]})
    execute(tool=delete, arguments={"keys": ["a/b"]})
    execute(tool=orders_create, arguments={"elements": [{"id": 1}]})
    # then
    patches = list(TableChange.objects.filter(table=table).order_by("version").values_list("patch", flat=True))
    assert patches == [
        [{"op": "add", "path": "/items/c~0d", "value": {"price": 2}}],
        [{"op": "remove", "path": "/items/a~1b"}],
        [{"op": "add", "path": "/meta/orders", "value": [{"id": 1}]}],
    ]
    assert _document(table.pk) == {"items": {"c~d": {"price": 2}}, "meta": {"orders": [{"id": 1}]}}


def test_a_refused_write_appends_nothing(write_tools, orders):
    """KEY_EXISTS, KEY_NOT_FOUND: no entry, no version, the snapshot untouched."""
    # given
    before = db_snapshot()
    # when
    errors = []
    for tool, arguments in [
        (write_tools["create"], {"elements": [{"id": 9}, {"id": 2}]}),
        (write_tools["update"], {"elements": [{"id": 1, "status": "x"}, {"id": 99}]}),
        (write_tools["delete"], {"keys": [1, 99]}),
    ]:
        with pytest.raises(ToolError) as caught:
            execute(tool=tool, arguments=arguments)
        errors.append(caught.value.code)
    # then
    assert errors == [ErrorCode.KEY_EXISTS, ErrorCode.KEY_NOT_FOUND, ErrorCode.KEY_NOT_FOUND]
    assert db_snapshot() == before


def test_key_index_follows_a_long_mixed_sequence(write_tools, orders):
    """300 random creates, updates and deletes: the document always equals a plain re-computation, and the kept
    key index answers like a fresh one (it is carried across versions, never rebuilt)."""
    rng = random.Random(7)
    expected = [dict(record) for record in RECORDS]
    next_id = 100
    for _ in range(300):
        choice = rng.randrange(3)
        if choice == 0 or not expected:
            batch = [{"id": next_id + n, "v": rng.randrange(9)} for n in range(rng.randrange(1, 3))]
            next_id += len(batch)
            execute(tool=write_tools["create"], arguments={"elements": batch})
            expected.extend(batch)
        elif choice == 1:
            record = rng.choice(expected)
            execute(tool=write_tools["update"], arguments={"elements": [{"id": record["id"], "v": -1}]})
            record["v"] = -1
        else:
            victims = rng.sample([r["id"] for r in expected], min(len(expected), rng.randrange(1, 3)))
            execute(tool=write_tools["delete"], arguments={"keys": victims})
            expected = [r for r in expected if r["id"] not in victims]
    assert services.table_data(orders.pk)[1] == expected
    table_cache.clear()
    assert services.table_data(orders.pk)[1] == expected
    assert _document(orders.pk) == expected


def test_delete_on_duplicate_keys_removes_every_holder(owner, make_table, make_tool):
    """Data stored with a key twice (before keys were checked): delete removes both records, as it always did."""
    table = make_table(owner, name="dups", data=[{"id": 1}, {"id": 2, "n": 1}, {"id": 2, "n": 2}, {"id": 3}])
    delete = make_tool(owner, table, type="delete", name="dups_delete")
    assert execute(tool=delete, arguments={"keys": [2]}) == {"deleted": 2, "version": 2}
    assert services.table_data(table.pk)[1] == [{"id": 1}, {"id": 3}]


def test_another_workers_write_is_caught_up_not_reparsed(write_tools, orders):
    """This process holds version v; after another worker's writes it applies their patches: two queries (the
    version, the patches), no read of the snapshot."""
    # given
    services.table_data(orders.pk)
    held = table_cache.held(orders.pk)
    with table_log.write_audit(table_log.WriteAudit()):
        execute(tool=write_tools["create"], arguments={"elements": [{"id": 4}]})
    table_cache.put(orders.pk, held.version, held.data, held.size)  # as if the write had been made by another worker
    table_cache._store.put(orders.pk, held)
    # when
    with CaptureQueriesContext(connection) as queries:
        version, data = services.table_data(orders.pk)
    # then
    assert (version, [r["id"] for r in data]) == (2, [1, 2, 3, 4])
    assert len(queries.captured_queries) == 2
    assert not any('"data"' in query["sql"] for query in queries.captured_queries)


#
# Audit: who, how, with what, on every surface
#


def test_api_call_is_audited_with_user_token_tool_and_arguments(owner, write_tools, orders):
    """Over the API with an API token: the entry names the user, the token, the surface, the tool, the arguments."""
    # given
    token, text = services.api_token_issue(user=owner)
    client = client_for()
    client.credentials(HTTP_AUTHORIZATION=f"Token {text}")
    arguments = {"elements": [{"id": 4, "status": "new"}]}
    # when
    response = client.post(f"/api/tools/{write_tools['create'].pk}/call/", {"arguments": arguments}, format="json")
    # then
    assert response.status_code == 200, response.content
    entry = TableChange.objects.get(table=orders)
    assert (entry.surface, entry.user_id, entry.api_token_id, entry.api_key_id) == ("api", owner.pk, token.pk, None)
    assert (entry.tool_id, entry.tool_name, entry.binding_name, entry.arguments) == (
        write_tools["create"].pk,
        "orders_create",
        "",
        arguments,
    )
    assert entry.version_before == 1
    assert entry.version == 2


def test_mcp_call_is_audited_with_key_instance_and_binding(owner, write_tools, orders, instance, bind, make_api_key):
    """Over MCP: the key, the instance and the binding's effective name; the user is the key's owner."""
    # given
    bind(instance, write_tools["delete"], name_override="remove_orders")
    key, text = make_api_key(instance, label="agent-1")
    # when
    result = Harness().call(instance.slug, text, "remove_orders", {"keys": [2]})["result"]
    # then
    assert result["isError"] is False
    entry = TableChange.objects.get(table=orders)
    assert (entry.surface, entry.user_id, entry.api_key_id, entry.mcp_instance_id, entry.binding_name) == (
        "mcp",
        owner.pk,
        key.pk,
        instance.pk,
        "remove_orders",
    )
    assert entry.arguments == {"keys": [2]}


def test_audit_and_call_record_are_one_unit(owner, write_tools, orders, monkeypatch):
    """The entry and the call log row share the write's transaction: a failed record keeps neither."""
    # given
    from tools_app.execution import pipeline as calls

    def broken(*args, **kwargs):
        raise RuntimeError("call log down")

    monkeypatch.setattr(calls, "_write", broken)
    before = db_snapshot()
    caller = Caller(surface=Surface.API, user_id=owner.pk, user=owner)
    # when
    outcome = run_tool_call(
        caller=caller,
        target=target_of_tool(write_tools["create"]),
        name="orders_create",
        arguments={"elements": [{"id": 9}]},
    )
    # then
    assert outcome.error.code == ErrorCode.INTERNAL_ERROR
    assert db_snapshot() == before


#
# Safe writes: expected_version, dry_run, idempotency_key
#


def test_expected_version_conflict_names_the_version_and_writes_nothing(owner, write_tools, orders):
    # given
    before = db_snapshot()
    # when
    response = _api_call(owner, write_tools["create"], {"elements": [{"id": 4}], "expected_version": 7})
    # then
    assert response.status_code == 409
    assert response.json()["error"] == "VERSION_CONFLICT"
    assert response.json()["message"].startswith("The table is at version 1, not the expected_version 7;")
    after = db_snapshot()
    assert after["tools_app.Table"] == before["tools_app.Table"]
    assert after["tools_app.TableChange"] == []


def test_safe_writes_over_mcp(owner, write_tools, orders, instance, bind, make_api_key):
    """VERSION_CONFLICT and dry_run mean the same over MCP: an isError result naming the code, or the patch."""
    # given
    bind(instance, write_tools["update"])
    _, key = make_api_key(instance)
    before = db_snapshot()
    # when
    conflict = Harness().call(
        instance.slug, key, "orders_update", {"elements": [{"id": 1, "status": "x"}], "expected_version": 3}
    )["result"]
    dry = Harness().call(instance.slug, key, "orders_update", {"elements": [{"id": 1, "status": "x"}], "dry_run": True})
    # then
    assert conflict["isError"] is True
    assert conflict["content"][0]["text"].startswith("VERSION_CONFLICT: The table is at version 1, not the")
    assert dry["result"]["structuredContent"] == {
        "dry_run": True,
        "version": 2,
        "patch": [{"op": "replace", "path": "/0/status", "value": "x"}],
    }
    after = db_snapshot()
    assert after["tools_app.Table"] == before["tools_app.Table"]
    assert after["tools_app.TableChange"] == []


def test_expected_version_that_matches_writes(owner, write_tools, orders):
    response = _api_call(owner, write_tools["update"], {"elements": [{"id": 1, "status": "x"}], "expected_version": 1})
    assert response.json() == {"result": {"updated": 1, "version": 2}}


def test_dry_run_returns_the_patch_and_writes_nothing(owner, write_tools, orders):
    # given
    before = db_snapshot()
    # when
    response = _api_call(owner, write_tools["delete"], {"keys": [2], "dry_run": True})
    # then
    assert response.json() == {"result": {"dry_run": True, "version": 2, "patch": [{"op": "remove", "path": "/1"}]}}
    after = db_snapshot()
    assert after["tools_app.Table"] == before["tools_app.Table"]
    assert after["tools_app.TableChange"] == []
    assert services.table_data(orders.pk) == (1, RECORDS)


def test_dry_run_of_a_refused_write_is_the_same_error(owner, write_tools, orders):
    response = _api_call(owner, write_tools["create"], {"elements": [{"id": 1}], "dry_run": True})
    assert (response.status_code, response.json()["error"]) == (400, "KEY_EXISTS")


def test_idempotency_key_repeat_returns_the_first_result_and_writes_once(
    owner, write_tools, orders, instance, bind, make_api_key
):
    """The same key on the same table: the first answer again, on any surface, with one entry only."""
    # given
    bind(instance, write_tools["create"])
    _, key = make_api_key(instance)
    arguments = {"elements": [{"id": 4}], "idempotency_key": "order-4"}
    # when
    first = _api_call(owner, write_tools["create"], arguments).json()
    again = _api_call(owner, write_tools["create"], arguments).json()
    over_mcp = Harness().call(instance.slug, key, "orders_create", arguments)["result"]
    # then
    assert first == again == {"result": {"created": 1, "version": 2}}
    assert over_mcp["structuredContent"] == {"created": 1, "version": 2}
    assert _versions(orders.pk) == [2]
    assert Table.objects.get(pk=orders.pk).version == 2
    assert CallLog.objects.count() == 3


def test_idempotency_key_with_other_arguments_is_refused(owner, write_tools, orders):
    # given
    _api_call(owner, write_tools["create"], {"elements": [{"id": 4}], "idempotency_key": "k1"})
    before = db_snapshot()
    # when
    response = _api_call(owner, write_tools["create"], {"elements": [{"id": 5}], "idempotency_key": "k1"})
    # then
    assert response.status_code == 409
    assert response.json()["error"] == "IDEMPOTENCY_KEY_REUSED"
    after = db_snapshot()
    assert after["tools_app.Table"] == before["tools_app.Table"]
    assert after["tools_app.TableChange"] == before["tools_app.TableChange"]


def test_idempotency_key_expires_after_24_hours(owner, write_tools, orders):
    # given
    _api_call(owner, write_tools["create"], {"elements": [{"id": 4}], "idempotency_key": "k1"})
    TableChange.objects.update(at=timezone.now() - timedelta(hours=25))
    # when
    response = _api_call(owner, write_tools["delete"], {"keys": [4], "idempotency_key": "k1"})
    # then
    assert response.json() == {"result": {"deleted": 1, "version": 3}}


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"expected_version": "1"}, "expected_version must be an integer of at least 1"),
        ({"expected_version": True}, "expected_version must be an integer of at least 1"),
        ({"expected_version": 0}, "expected_version must be an integer of at least 1"),
        ({"expected_version": 2**70}, "expected_version must be an integer of at least 1"),
        ({"dry_run": "yes"}, "dry_run must be true or false"),
        ({"idempotency_key": ""}, "idempotency_key must be a string of 1 to 200 printable characters"),
        ({"idempotency_key": "k" * 201}, "idempotency_key must be a string of 1 to 200 printable characters"),
        ({"idempotency_key": "a\x00b"}, "idempotency_key must be a string of 1 to 200 printable characters"),
        ({"idempotency_key": 5}, "idempotency_key must be a string of 1 to 200 printable characters"),
    ],
)
def test_bad_safe_write_arguments_are_invalid_arguments(owner, write_tools, orders, arguments, message):
    # given
    before = db_snapshot()
    # when
    response = _api_call(owner, write_tools["create"], {"elements": [{"id": 4}], **arguments})
    # then
    assert response.status_code == 400
    assert response.json()["error"] == "INVALID_ARGUMENTS"
    assert message in response.json()["message"]
    after = db_snapshot()
    assert after["tools_app.Table"] == before["tools_app.Table"]
    assert after["tools_app.TableChange"] == []


def test_safe_write_arguments_work_with_a_custom_schema(owner, make_tool, orders):
    """A tool whose own schema does not declare them still takes them (they are taken out first)."""
    schema = {"type": "object", "properties": {"elements": {"type": "array"}}, "additionalProperties": False}
    tool = make_tool(owner, orders, type="create", name="strict_create", input_schema=schema)
    result = execute(tool=tool, arguments={"elements": [{"id": 4}], "dry_run": True})
    assert result == {"dry_run": True, "version": 2, "patch": [{"op": "add", "path": "/-", "value": {"id": 4}}]}


def test_default_schemas_guide_and_export_name_the_safe_write_arguments(owner, write_tools, instance, bind):
    """The default input schemas declare them; the usage guide and every export format show them."""
    from tools_app.tool_types import TOOL_TYPES

    safe = {"expected_version", "dry_run", "idempotency_key"}
    for kind in ("create", "update", "delete"):
        assert safe <= set(TOOL_TYPES[kind].input_schema["properties"])
        assert safe <= set(write_tools[kind].input_schema["properties"])
        bind(instance, write_tools[kind])
    client = client_for(owner)
    guide = client.get(f"/api/mcp-instances/{instance.pk}/guide/").json()["content"]
    assert all(name in guide for name in safe)
    assert "IDEMPOTENCY_KEY_REUSED" in guide
    assert "VERSION_CONFLICT" in guide
    for export_format in ("mcp", "openai", "anthropic"):
        exported = client.get(f"/api/mcp-instances/{instance.pk}/export/", {"format": export_format}).json()
        text = str(exported["tools"])
        assert all(name in text for name in safe), export_format


#
# History API
#


def test_history_lists_entries_newest_first(owner, write_tools, orders):
    # given
    _api_call(owner, write_tools["create"], {"elements": [{"id": 4}]})
    _api_call(owner, write_tools["delete"], {"keys": [1]})
    # when
    response = client_for(owner).get(f"/api/tables/{orders.pk}/history/")
    # then
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 2
    newest, oldest = body["results"]
    assert {key: newest[key] for key in ("version", "version_before", "user", "api_key", "surface", "tool")} == {
        "version": 3,
        "version_before": 2,
        "user": "owner",
        "api_key": None,
        "surface": "api",
        "tool": {"id": write_tools["delete"].pk, "name": "orders_delete"},
    }
    assert newest["arguments"] == {"keys": [1]}
    assert newest["patch"] == [{"op": "remove", "path": "/0"}]
    assert oldest["version"] == 2
    assert set(newest) >= {"at", "binding", "api_token"}


def test_versions_give_each_document_and_404_outside_retention(owner, write_tools, orders):
    # given
    _api_call(owner, write_tools["create"], {"elements": [{"id": 4}]})
    _api_call(owner, write_tools["update"], {"elements": [{"id": 4, "x": 1}]})
    client = client_for(owner)
    # when / then
    assert client.get(f"/api/tables/{orders.pk}/versions/1/").json() == {"version": 1, "data": RECORDS}
    assert client.get(f"/api/tables/{orders.pk}/versions/2/").json()["data"] == [*RECORDS, {"id": 4}]
    assert client.get(f"/api/tables/{orders.pk}/versions/3/").json()["data"] == [*RECORDS, {"id": 4, "x": 1}]
    for missing in ("4", "0", "-1", "abc", "99999999999999999999"):
        response = client.get(f"/api/tables/{orders.pk}/versions/{missing}/")
        assert (response.status_code, response.json()["error"]) == (404, "NOT_FOUND"), missing
    TableChange.objects.filter(table=orders, version=2).delete()  # pruned
    assert client.get(f"/api/tables/{orders.pk}/versions/1/").status_code == 404
    assert client.get(f"/api/tables/{orders.pk}/versions/2/").status_code == 200


def test_restore_writes_the_old_document_as_a_new_version(owner, write_tools, orders):
    # given
    _api_call(owner, write_tools["delete"], {"keys": [1, 2, 3]})
    # when
    response = client_for(owner).post(f"/api/tables/{orders.pk}/restore/", {"version": 1}, format="json")
    # then
    assert response.status_code == 200
    assert (response.json()["version"], response.json()["data"]) == (3, RECORDS)
    assert response["ETag"] == '"3"'
    entry = TableChange.objects.get(table=orders, version=3)
    assert (entry.surface, entry.user_id, entry.arguments) == ("api", owner.pk, {"version": 1})
    assert _document(orders.pk) == RECORDS
    # the restore is itself history: restoring version 2 deletes them again
    client_for(owner).post(f"/api/tables/{orders.pk}/restore/", {"version": 2}, format="json")
    assert services.table_data(orders.pk) == (4, [])


@pytest.mark.parametrize(
    ("body", "field"),
    [({}, "version"), ({"version": "1"}, "version"), ({"version": 0}, "version"), ({"version": 1, "x": 1}, "x")],
)
def test_restore_with_a_bad_body_is_400_and_writes_nothing(owner, orders, body, field):
    before = db_snapshot()
    response = client_for(owner).post(f"/api/tables/{orders.pk}/restore/", body, format="json")
    assert (response.status_code, response.json()["error"]) == (400, "VALIDATION_ERROR")
    assert field in response.json()["fields"]
    assert db_snapshot() == before


def test_restore_outside_retention_is_404_and_writes_nothing(owner, orders):
    before = db_snapshot()
    response = client_for(owner).post(f"/api/tables/{orders.pk}/restore/", {"version": 5}, format="json")
    assert (response.status_code, response.json()["error"]) == (404, "NOT_FOUND")
    assert db_snapshot() == before


def test_history_of_another_users_table_is_404(other_user, orders):
    client = client_for(other_user)
    before = db_snapshot()
    assert client.get(f"/api/tables/{orders.pk}/history/").status_code == 404
    assert client.get(f"/api/tables/{orders.pk}/versions/1/").status_code == 404
    assert client.post(f"/api/tables/{orders.pk}/restore/", {"version": 1}, format="json").status_code == 404
    assert db_snapshot() == before


def test_table_api_etag_and_if_match(owner, orders):
    """GET answers ETag "<version>"; a PATCH with a stale If-Match is 412 and writes nothing; a matching one writes
    a whole-document entry."""
    client = client_for(owner)
    assert client.get(f"/api/tables/{orders.pk}/")["ETag"] == '"1"'
    before = db_snapshot()
    stale = client.patch(f"/api/tables/{orders.pk}/", {"data": []}, format="json", HTTP_IF_MATCH='"7"')
    assert (stale.status_code, stale.json()["error"]) == (412, "PRECONDITION_FAILED")
    assert 'ETag "1"' in stale.json()["message"]
    assert db_snapshot() == before
    garbage = client.patch(f"/api/tables/{orders.pk}/", {"data": []}, format="json", HTTP_IF_MATCH="nonsense")
    assert garbage.status_code == 412
    ok = client.patch(f"/api/tables/{orders.pk}/", {"data": [{"id": 9}]}, format="json", HTTP_IF_MATCH='"1"')
    assert (ok.status_code, ok["ETag"], ok.json()["data"]) == (200, '"2"', [{"id": 9}])
    entry = TableChange.objects.get(table=orders)
    assert entry.patch == [{"op": "replace", "path": "", "value": [{"id": 9}]}]
    assert entry.inverse == [{"op": "replace", "path": "", "value": RECORDS}]
    assert (entry.surface, entry.user_id) == ("api", owner.pk)
    assert _snapshot(orders.pk) == (2, [{"id": 9}])
    assert client.get(f"/api/tables/{orders.pk}/versions/1/").json()["data"] == RECORDS


def test_rename_is_not_a_version_and_has_no_entry(owner, orders):
    response = client_for(owner).patch(f"/api/tables/{orders.pk}/", {"name": "renamed"}, format="json")
    assert (response.status_code, response.json()["version"], response["ETag"]) == (200, 1, '"1"')
    assert not TableChange.objects.exists()


#
# Compaction and retention
#


def test_compaction_folds_the_log_into_a_snapshot_after_n_entries(
    write_tools, orders, settings, django_capture_on_commit_callbacks
):
    # given
    settings.TOOLHUB_TABLE_COMPACT_EVERY = 3
    # when
    for number in range(4, 9):
        with django_capture_on_commit_callbacks(execute=True):
            execute(tool=write_tools["create"], arguments={"elements": [{"id": number}]})
    # then
    version = Table.objects.get(pk=orders.pk).version
    snapshot_version, data = _snapshot(orders.pk)
    # versions 2..6; at 3 (a multiple of 3) the 2 entries were not enough; at 6 the 5 entries were folded
    assert (version, snapshot_version) == (6, 6)
    assert [r["id"] for r in data] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert _versions(orders.pk) == [2, 3, 4, 5, 6]  # inside retention: every entry is kept
    assert [r["id"] for r in _document(orders.pk)] == [1, 2, 3, 4, 5, 6, 7, 8]


def test_prune_keeps_every_version_inside_retention(write_tools, orders, settings):
    # given
    settings.TOOLHUB_HISTORY_DAYS = 1
    settings.TOOLHUB_HISTORY_VERSIONS = 2
    for number in range(4, 10):
        execute(tool=write_tools["create"], arguments={"elements": [{"id": number}]})  # versions 2..7
    TableChange.objects.filter(version__lte=4).update(at=timezone.now() - timedelta(days=2))
    # when: nothing is pruned while the snapshot still needs the entries
    assert services.table_prune(orders.pk) == 0
    services.table_compact(orders.pk, force=True)
    # then: old entries outside both limits go; those in the last 2 versions or the last day stay
    assert _versions(orders.pk) == [5, 6, 7]
    assert services.oldest_version(orders.pk, 7) == 4
    assert services.table_version_data(orders.pk, 4) == [*RECORDS, {"id": 4}, {"id": 5}, {"id": 6}]
    with pytest.raises(TableChange.DoesNotExist):
        services.table_version_data(orders.pk, 3)


def test_crash_between_append_and_compaction_loses_nothing(
    write_tools, orders, settings, monkeypatch, django_capture_on_commit_callbacks
):
    """The write commits its entry; a compaction that dies half-way (after writing the snapshot, before its
    commit) is rolled back whole, the write still answers, and the document is still snapshot + log. The next
    compaction succeeds."""
    # given
    settings.TOOLHUB_TABLE_COMPACT_EVERY = 1
    original = table_log.table_prune

    def crash(table_id):
        raise RuntimeError("killed during compaction")

    monkeypatch.setattr(table_log, "table_prune", crash)
    # when
    with django_capture_on_commit_callbacks(execute=True):
        result = execute(tool=write_tools["create"], arguments={"elements": [{"id": 4}]})
    # then
    assert result == {"created": 1, "version": 2}
    assert Table.objects.get(pk=orders.pk).version == 2
    assert _snapshot(orders.pk) == (1, RECORDS)  # the compaction was rolled back whole
    table_cache.clear()
    assert services.table_data(orders.pk) == (2, [*RECORDS, {"id": 4}])
    assert _document(orders.pk) == [*RECORDS, {"id": 4}]
    # and the next compaction works
    monkeypatch.setattr(table_log, "table_prune", original)
    assert services.table_compact(orders.pk, force=True) in (True, False)
    assert _snapshot(orders.pk) == (
        2,
        [*RECORDS, {"id": 4}],
    )


def test_crash_inside_the_compaction_transaction_rolls_the_snapshot_back(write_tools, orders, monkeypatch):
    """A failure after the snapshot UPDATE but inside its transaction: the old snapshot and version stay."""
    # given
    execute(tool=write_tools["create"], arguments={"elements": [{"id": 4}]})
    from django.db.models import QuerySet

    original_update = QuerySet.update

    def update_then_die(self, **kwargs):
        count = original_update(self, **kwargs)
        if "data" in kwargs:
            raise RuntimeError("power cut")
        return count

    monkeypatch.setattr(QuerySet, "update", update_then_die)
    # when
    with pytest.raises(RuntimeError, match="power cut"):
        services.table_compact(orders.pk, force=True)
    monkeypatch.setattr(QuerySet, "update", original_update)
    # then
    assert _snapshot(orders.pk) == (1, RECORDS)
    table_cache.clear()
    assert services.table_data(orders.pk) == (2, [*RECORDS, {"id": 4}])


def test_a_cold_worker_loads_snapshot_plus_log(write_tools, orders):
    for number in range(4, 9):
        execute(tool=write_tools["create"], arguments={"elements": [{"id": number}]})
    table_cache.clear()
    with CaptureQueriesContext(connection) as queries:
        version, data = services.table_data(orders.pk)
    assert (version, [r["id"] for r in data]) == (6, [1, 2, 3, 4, 5, 6, 7, 8])
    assert len(queries.captured_queries) == 3  # version, snapshot, patches


def test_size_limit_is_checked_on_the_estimate(write_tools, orders, settings):
    """TOOLHUB_MAX_TABLE_BYTES holds without serializing the document: the estimate grows by what is added."""
    import json

    settings.TOOLHUB_MAX_TABLE_BYTES = len(json.dumps(RECORDS)) + 40
    execute(tool=write_tools["create"], arguments={"elements": [{"id": 4}]})
    stored = Table.objects.filter(pk=orders.pk).values_list("data_bytes", flat=True).get()
    assert stored == len(json.dumps([*RECORDS, {"id": 4}]))
    with pytest.raises(ToolError) as caught:
        execute(tool=write_tools["create"], arguments={"elements": [{"id": 5, "pad": "x" * 40}]})
    assert caught.value.code == ErrorCode.VALIDATION_ERROR


def test_a_catch_up_that_does_not_apply_loads_the_snapshot(write_tools, orders):
    """A cached version whose patches do not apply (never expected) is not trusted: the snapshot and the log are."""
    # given: this process holds a wrong version 1 (one record short)
    table_cache.put(orders.pk, 1, RECORDS[:1], len(str(RECORDS[:1])))
    write_elsewhere(orders.pk, [{"op": "remove", "path": "/2"}], [{"op": "add", "path": "/2", "value": RECORDS[2]}])
    # when
    version, data = services.table_data(orders.pk)
    # then
    assert (version, data) == (2, RECORDS[:2])
