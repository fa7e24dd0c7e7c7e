"""Declarative setup: export an owner's setup as one document, plan it, apply it all or nothing."""

import copy
import json

import pytest
import yaml
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.urls import reverse

from tests.api_helpers import client_for, db_snapshot, response_json
from tools_app import services
from tools_app.kernel.errors import ToolhubError
from tools_app.models import ApiKey, Binding, McpInstance, Prompt, Table, Tool

pytestmark = pytest.mark.django_db


@pytest.fixture
def setup_of(owner, make_table, make_tool, make_instance, bind, make_api_key):
    """Two tables, four tools (data, registry, external), two instances with bindings, prompts and a key."""
    orders = make_table(owner, name="orders", description="The shop's orders.")
    notes = make_table(owner, name="notes", data={"a": {"text": "x"}})
    query = make_tool(owner, orders, name="orders_query", metadata={"category": "sales", "tags": ["orders"]})
    everything = make_tool(owner, orders, type="get_all_data", name="orders_all", output_schema={"type": "array"})
    note = make_tool(owner, notes, type="select", name="notes_select", json_path="", alias="Notes")
    search = make_tool(owner, None, type="search_tools", name="find_tools")
    make_tool(owner, None, type="external", name="weather", description="", redact_arguments=["home_address"])
    shop = make_instance(owner, slug="shop", instructions="Be brief.", query_cpu_ms=500, key_rate_limit="10/minute")
    bind(shop, query, name_override="find_orders", description_override="Find orders.")
    bind(shop, everything, enabled=False)
    bind(shop, note, resource_uri="notes://note/{id}")
    bind(shop, search)
    desk = make_instance(owner, slug="desk", discovery="search", enabled=False)
    bind(desk, query)
    services.prompt_create(
        mcp_instance=shop,
        name="brief",
        title="Brief",
        arguments=[{"name": "topic", "required": True}],
        template="A brief on {{topic}}.",
    )
    make_api_key(shop, label="agent")
    return owner


def state(owner) -> dict:
    """Everything a setup document covers, field by field, by identity (no ids, no owners, no timestamps)."""
    tables = {t.name: (t.description, services.table_data(t.pk)[1]) for t in Table.objects.filter(owner=owner)}
    tools = {
        t.name: {
            "type": t.type,
            "table": t.table.name if t.table_id else None,
            **{
                f: getattr(t, f)
                for f in (
                    "json_path",
                    "description",
                    "alias",
                    "input_schema",
                    "output_schema",
                    "metadata",
                    "redact_arguments",
                )
            },
        }
        for t in Tool.objects.filter(owner=owner)
    }
    instances = {}
    for instance in McpInstance.objects.filter(owner=owner):
        instances[instance.slug] = {
            **{f: getattr(instance, f) for f in services.INSTANCE_FIELDS},
            "bindings": {
                b.tool.name: {f: getattr(b, f) for f in services.BINDING_FIELDS}
                for b in Binding.objects.filter(mcp_instance=instance).select_related("tool")
            },
            "prompts": {
                p.name: {f: getattr(p, f) for f in services.PROMPT_FIELDS}
                for p in Prompt.objects.filter(mcp_instance=instance)
            },
        }
    return {"tables": tables, "tools": tools, "instances": instances}


def test_export_names_everything_by_name_and_holds_no_key(setup_of):
    # when
    document = services.setup_export(owner=setup_of)

    # then
    assert document["toolhub_setup"] == 1
    assert document["scope"] == "owner"
    assert [t["name"] for t in document["tables"]] == ["notes", "orders"]
    assert "data" not in document["tables"][0]
    assert [t["name"] for t in document["tools"]] == [
        "find_tools",
        "notes_select",
        "orders_all",
        "orders_query",
        "weather",
    ]
    assert document["tools"][3]["table"] == "orders"
    assert "redact_arguments" not in document["tools"][3]  # none listed: left out
    assert document["tools"][4]["redact_arguments"] == ["home_address"]
    assert [i["slug"] for i in document["instances"]] == ["desk", "shop"]
    shop = document["instances"][1]
    assert shop["query_cpu_ms"] == 500
    assert "query_max_bytes" not in shop
    assert shop["bindings"][0] == {
        "tool": "orders_query",
        "enabled": True,
        "name_override": "find_orders",
        "description_override": "Find orders.",
        "resource_uri": "",
        "read_only": False,
        "pinned_arguments": {},
    }
    assert document["tables"][1]["redact_fields"] == []
    text = json.dumps(document)
    assert ApiKey.objects.get().prefix not in text
    assert '"id"' not in text
    assert "api_key" not in text


def test_export_then_apply_for_a_fresh_owner_reproduces_the_setup(setup_of, make_user):
    """Export -> apply for another owner (the slugs freed first: they are global) gives the same setup, field by
    field, data included; applying the same document again changes nothing."""
    # given
    document = services.setup_export(owner=setup_of, with_data=True)
    expected = state(setup_of)
    for instance in McpInstance.objects.filter(owner=setup_of):
        services.instance_delete(instance=instance, force=True)
    fresh = make_user("fresh")

    # when
    changes = services.setup_apply(owner=fresh, document=copy.deepcopy(document))

    # then
    assert sorted((c.action, c.kind) for c in changes).count(("create", "tool")) == 5
    assert {c.action for c in changes} == {"create"}
    assert len(changes) == 2 + 5 + 2 + 5 + 1
    assert state(fresh) == expected
    assert services.setup_export(owner=fresh, with_data=True) == document
    assert services.setup_plan(owner=fresh, document=document) == []
    assert services.setup_apply(owner=fresh, document=document) == []


def test_plan_lists_updates_creates_and_deletes(setup_of):
    # given
    document = services.setup_export(owner=setup_of)
    document["tables"] = [t for t in document["tables"] if t["name"] != "notes"]
    document["tools"] = [t for t in document["tools"] if t["name"] not in ("notes_select", "weather")]
    shop = document["instances"][1]
    shop["bindings"] = [b for b in shop["bindings"] if b["tool"] != "notes_select"]
    shop["instructions"] = "Be precise."
    shop["prompts"].append({"name": "recap", "template": "Recap."})
    document["tools"][0]["description"] = "Find tools."

    # when
    changes = [c.as_dict() for c in services.setup_plan(owner=setup_of, document=document)]

    # then
    assert [(c["action"], c["kind"], c["name"], c.get("fields")) for c in changes] == [
        ("delete", "binding", "shop/notes_select", None),
        ("delete", "tool", "notes_select", None),
        ("delete", "tool", "weather", None),
        ("update", "tool", "find_tools", ["description"]),
        ("delete", "table", "notes", None),
        ("update", "instance", "shop", ["instructions"]),
        ("create", "prompt", "shop/recap", None),
    ]
    assert changes[0]["used_by"][0]["tool"] == "notes_select"  # bound and enabled on an enabled instance


def test_renaming_a_table_moves_its_tools_instead_of_deleting_them(setup_of):
    """A table the document names anew is created, the tools that name it move there, then the old one goes: the
    tools (and their bindings) are the same rows."""
    # given
    document = services.setup_export(owner=setup_of, with_data=True)
    document["tables"] = [t if t["name"] != "orders" else {**t, "name": "sales"} for t in document["tables"]]
    for tool in document["tools"]:
        if tool["table"] == "orders":
            tool["table"] = "sales"
    ids = dict(Tool.objects.filter(owner=setup_of).values_list("name", "pk"))

    # when
    changes = services.setup_apply(owner=setup_of, document=document)

    # then
    assert [(c.action, c.kind, c.name, c.fields) for c in changes] == [
        ("create", "table", "sales", ()),
        ("update", "tool", "orders_all", ("table",)),
        ("update", "tool", "orders_query", ("table",)),
        ("delete", "table", "orders", ()),
    ]
    assert dict(Tool.objects.filter(owner=setup_of).values_list("name", "pk")) == ids
    assert Tool.objects.get(name="orders_query").table.name == "sales"
    assert Binding.objects.filter(tool__name="orders_query").count() == 2
    assert services.setup_plan(owner=setup_of, document=document) == []


def test_apply_refuses_deleting_what_is_in_use_unless_forced(setup_of):
    # given
    document = services.setup_export(owner=setup_of)
    document["instances"] = [i for i in document["instances"] if i["slug"] != "shop"]
    before = db_snapshot()

    # when
    with pytest.raises(ToolhubError) as refused:
        services.setup_apply(owner=setup_of, document=document)

    # then
    assert refused.value.code == "IN_USE"
    assert db_snapshot() == before
    changes = services.setup_apply(owner=setup_of, document=document, force=True)
    assert [(c.action, c.kind, c.name) for c in changes] == [("delete", "instance", "shop")]
    assert not McpInstance.objects.filter(slug="shop").exists()


def test_instance_scope_touches_only_that_instance(setup_of):
    # given
    document = services.setup_export(owner=setup_of, instance_slug="desk")
    assert [t["name"] for t in document["tools"]] == ["orders_query"]
    assert [t["name"] for t in document["tables"]] == ["orders"]
    document["instances"][0]["bindings"] = []

    # when
    changes = services.setup_apply(owner=setup_of, document=document)

    # then: the desk instance is disabled, so its binding is not in use
    assert [(c.action, c.kind, c.name) for c in changes] == [("delete", "binding", "desk/orders_query")]
    assert Tool.objects.filter(owner=setup_of).count() == 5
    assert Binding.objects.filter(mcp_instance__slug="shop").count() == 4


@pytest.mark.parametrize(
    ("mutate", "field", "message"),
    [
        (lambda d: d["tools"][1].update(type="nope"), "tools.1.type", "Value 'nope' is not a valid choice."),
        (lambda d: d["tools"][1].update(colour="red"), "tools.1.colour", "Unknown field."),
        (lambda d: d["tools"][1].pop("name"), "tools.1.name", "This field is required."),
        (lambda d: d["tools"][1].update(table="missing"), "tools.1.table", "No table 'missing'"),
        (lambda d: d["instances"][1]["bindings"][0].update(tool="gone"), "instances.1.bindings.0.tool", "No tool"),
        (lambda d: d["instances"][0].update(max_result_bytes="big"), "instances.0.max_result_bytes", "not of type"),
        (lambda d: d["tools"].append(dict(d["tools"][0])), "tools.5.name", "named twice"),
        (lambda d: d["tools"][4].update(name="bad name"), "tools.4.name", "Tool names are 1–64 characters"),
        (lambda d: d.update(toolhub_setup=2), "toolhub_setup", "2 is not one of [1]"),
    ],
)
def test_bad_document_is_400_naming_the_field_and_writes_nothing(setup_of, mutate, field, message):
    # given
    document = services.setup_export(owner=setup_of)
    document["instances"][1]["instructions"] = "Changed, so a half-applied document would show."
    mutate(document)
    before = db_snapshot()

    # when
    response = client_for(setup_of).post("/api/setup/apply/", document, format="json")

    # then
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "VALIDATION_ERROR"
    assert field in body["fields"]
    assert message in body["fields"][field][0]
    assert db_snapshot() == before


def test_refusal_at_write_time_rolls_back_everything(setup_of, make_user, make_instance):
    """A slug another user holds is refused on the instance's path; what was written before it is undone."""
    # given
    make_instance(make_user("someone"), slug="taken")
    document = services.setup_export(owner=setup_of)
    document["tables"].append({"name": "new_table"})
    document["instances"].append({"slug": "taken", "name": "Taken"})
    before = db_snapshot()

    # when
    with pytest.raises(ValidationError) as refused:
        services.setup_apply(owner=setup_of, document=document)

    # then
    assert list(refused.value.error_dict) == ["instances.2.slug"]
    assert db_snapshot() == before


def test_api_export_plan_apply(setup_of, other_user):
    client = client_for(setup_of)
    exported = client.get("/api/setup/export/?instance=shop&data=true")
    assert exported.status_code == 200
    document = response_json(exported)
    assert document["scope"] == {"instance": "shop"}
    assert document["tables"][0]["data"] == services.table_data(Table.objects.get(name="notes").pk)[1]
    assert client.get("/api/setup/export/?instance=nope").status_code == 404
    assert client_for(other_user).get("/api/setup/export/?instance=shop").status_code == 404
    plan = client.post("/api/setup/plan/", document, format="json")
    assert plan.status_code == 200
    assert plan.json() == {"changes": []}
    document["instances"][0]["description"] = "The shop."
    applied = client.post("/api/setup/apply/", document, format="json")
    assert applied.status_code == 200
    assert applied.json() == {
        "changes": [{"action": "update", "kind": "instance", "name": "shop", "fields": ["description"]}],
        "applied": True,
    }
    assert McpInstance.objects.get(slug="shop").description == "The shop."


def test_management_command_exports_plans_and_applies(setup_of, tmp_path, capsys):
    path = tmp_path / "setup.yaml"
    call_command("toolhub_setup", "export", "--owner", setup_of.username, "--format", "yaml", "--output", str(path))
    text = path.read_text()
    assert text.startswith("toolhub_setup: 1\n")
    call_command("toolhub_setup", "plan", "--owner", setup_of.username, str(path))
    assert capsys.readouterr().out.strip() == "No changes."
    path.write_text(text.replace("instructions: Be brief.", "instructions: Be kind."))
    call_command("toolhub_setup", "apply", str(path), "--owner", setup_of.username)
    assert capsys.readouterr().out.strip() == "update instance shop (instructions)\n1 change applied."
    assert McpInstance.objects.get(slug="shop").instructions == "Be kind."


def test_admin_setup_page_plans_then_applies(client, setup_of):
    """Upload a document: the page shows its plan; applying it needs the box when it breaks what is in use."""
    # given
    client.force_login(setup_of)
    url = reverse("admin:tools_app_mcpinstance_setup")
    exported = client.get(url + "?export=yaml")
    text = exported.content.decode().replace("instructions: Be brief.", "instructions: Be kind.")
    text = text.replace("  - tool: notes_select\n", "  - tool: notes_select_gone\n")

    # when
    refused = client.post(url, {"document": text, "plan": "1"})

    # then
    assert exported["Content-Disposition"] == 'attachment; filename="toolhub-setup.yaml"'
    assert refused.status_code == 200
    assert refused.context["problems"] == [
        "instances.1.bindings.2.tool: No tool 'notes_select_gone' in the document's tools."
    ]

    # when
    text = text.replace("  - tool: notes_select_gone\n", "  - tool: notes_select\n")
    planned = client.post(url, {"document": text, "plan": "1"})
    before = db_snapshot()
    without_notes = yaml.safe_load(text)
    without_notes["instances"][1]["bindings"] = [
        b for b in without_notes["instances"][1]["bindings"] if b["tool"] != "notes_select"
    ]
    unforced = client.post(url, {"document": json.dumps(without_notes), "apply": "1"})

    # then
    assert [str(change) for change in planned.context["changes"]] == ["update instance shop (instructions)"]
    assert 'name="apply"' in planned.content.decode()
    assert unforced.status_code == 200
    assert unforced.context["problems"][0].startswith(
        "What this document changes is in use and applying it would delete the binding 'shop/notes_select': "
        "'notes_select' on the instance 'shop' (bound)."
    )
    assert [used["tool"] for used in unforced.context["used_by"]] == ["notes_select"]
    assert db_snapshot() == before

    # when
    applied = client.post(url, {"document": text, "apply": "1"})

    # then
    assert applied.status_code == 302
    assert McpInstance.objects.get(slug="shop").instructions == "Be kind."


def test_admin_setup_page_needs_the_permissions(client, make_user):
    nobody = make_user("nobody")
    nobody.groups.clear()  # staff, in no group: no model permission
    client.force_login(nobody)
    assert client.get(reverse("admin:tools_app_mcpinstance_setup")).status_code == 403


def test_management_command_names_the_fields_of_a_bad_document(setup_of, tmp_path):
    path = tmp_path / "setup.json"
    path.write_text(json.dumps({"toolhub_setup": 1, "tools": [{"name": "x", "type": "nope"}]}))
    before = db_snapshot()
    with pytest.raises(CommandError) as refused:
        call_command("toolhub_setup", "apply", str(path), "--owner", setup_of.username)
    assert str(refused.value).splitlines()[0] == "The document is refused, nothing was written:"
    assert "tools.0.type: Value 'nope' is not a valid choice." in str(refused.value)
    assert db_snapshot() == before
