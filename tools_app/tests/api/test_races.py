"""An object deleted while a request on it runs: 404 NOT_FOUND, never a 500, never brought back to life.

The race is simulated by deleting the row after the view has fetched the object and validated the request,
just before the write (or inside the service call), as a concurrent request committing then would.
"""

import pytest
from rest_framework import mixins

from tests.api_helpers import client_for, db_snapshot
from tools_app import services
from tools_app import services as mcp_services
from tools_app.api.errors import exception_handler
from tools_app.models import ApiKey, Binding, McpInstance, Table, Tool

pytestmark = pytest.mark.django_db

NOT_FOUND = {"error": "NOT_FOUND", "message": "The object no longer exists: it was deleted while the request ran."}


def delete_before_write(monkeypatch, model, pk: int) -> None:
    """Make every update view delete the row `pk` of `model` after validating the request, before writing."""
    original = mixins.UpdateModelMixin.perform_update

    def racing(self, serializer):
        model.objects.filter(pk=pk).delete()
        return original(self, serializer)

    monkeypatch.setattr(mixins.UpdateModelMixin, "perform_update", racing)


def delete_first(monkeypatch, module, name: str, model, pk: int) -> None:
    """Make `module.name` delete the row `pk` of `model` (as a concurrent request would), then run as usual."""
    original = getattr(module, name)

    def racing(**kwargs):
        model.objects.filter(pk=pk).delete()
        return original(**kwargs)

    monkeypatch.setattr(module, name, racing)


@pytest.mark.parametrize("method", ["patch", "put"])
def test_tool_update_of_a_tool_deleted_meanwhile_is_a_404(owner, table, make_tool, monkeypatch, method):
    """PATCH/PUT on a tool deleted during the request: 404 NOT_FOUND and the tool stays deleted."""
    # given
    tool = make_tool(owner, table, type="get_all_data", name="all")
    delete_before_write(monkeypatch, Tool, tool.pk)
    body = {"description": "New."}
    if method == "put":
        body.update(name="all", type="get_all_data", table=table.pk)

    # when
    response = getattr(client_for(owner), method)(f"/api/tools/{tool.pk}/", body, format="json")

    # then
    assert response.status_code == 404
    assert response.json() == NOT_FOUND
    assert not Tool.objects.exists()


@pytest.mark.parametrize("body", [{"name": "renamed"}, {"data": [1]}])
def test_table_update_of_a_table_deleted_meanwhile_is_a_404(owner, table, monkeypatch, body):
    """PATCH on a table deleted during the request (a rename or a data write): 404 and the table stays deleted."""
    # given
    delete_before_write(monkeypatch, Table, table.pk)

    # when
    response = client_for(owner).patch(f"/api/tables/{table.pk}/", body, format="json")

    # then
    assert response.status_code == 404
    assert response.json() == NOT_FOUND
    assert not Table.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_instance_update_of_an_instance_deleted_meanwhile_is_a_404(owner, instance, monkeypatch):
    """PATCH on an instance deleted during the request: 404; the instance is not created again."""
    # given
    delete_before_write(monkeypatch, McpInstance, instance.pk)

    # when
    response = client_for(owner).patch(f"/api/mcp-instances/{instance.pk}/", {"name": "New"}, format="json")

    # then
    assert response.status_code == 404
    assert response.json() == NOT_FOUND
    assert not McpInstance.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_binding_update_of_a_binding_deleted_meanwhile_is_a_404(owner, table, make_tool, instance, bind, monkeypatch):
    """PATCH on a binding deleted during the request: 404; the binding is not created again."""
    # given
    binding = bind(instance, make_tool(owner, table))
    delete_before_write(monkeypatch, Binding, binding.pk)

    # when
    response = client_for(owner).patch(f"/api/bindings/{binding.pk}/", {"enabled": False}, format="json")

    # then
    assert response.status_code == 404
    assert response.json() == NOT_FOUND
    assert not Binding.objects.exists()


def test_binding_update_whose_instance_is_deleted_meanwhile_is_a_400_naming_it(
    owner, table, make_tool, instance, bind, monkeypatch
):
    """PATCH on a binding whose instance is deleted during the request: the service's check names the instance."""
    # given
    binding = bind(instance, make_tool(owner, table))
    delete_before_write(monkeypatch, McpInstance, instance.pk)

    # when
    response = client_for(owner).patch(f"/api/bindings/{binding.pk}/", {"name_override": "x"}, format="json")

    # then
    assert response.status_code == 400
    assert response.json()["fields"] == {"mcp_instance": [f"MCP instance with id {instance.pk} does not exist."]}
    assert (McpInstance.objects.count(), Binding.objects.count()) == (0, 0)


# A database error inside the test's own transaction would poison it: this one runs in autocommit, as requests do.
@pytest.mark.django_db(transaction=True)
def test_key_revoke_of_a_key_deleted_meanwhile_is_a_404(owner, instance, make_api_key, monkeypatch):
    """DELETE on a key whose instance is deleted during the request: 404, not a database error."""
    # given
    key, _ = make_api_key(instance)
    delete_first(monkeypatch, mcp_services, "api_key_revoke", McpInstance, instance.pk)

    # when
    response = client_for(owner).delete(f"/api/mcp-instances/{instance.pk}/keys/{key.pk}/")

    # then
    assert response.status_code == 404
    assert response.json() == NOT_FOUND
    assert not ApiKey.objects.exists()


@pytest.mark.parametrize("kind", ["tool", "table", "instance", "binding"])
def test_delete_of_an_object_deleted_meanwhile_is_a_204(owner, table, make_tool, instance, bind, monkeypatch, kind):
    """DELETE is idempotent: the object another request deleted is gone either way, so the answer is 204."""
    # given
    binding = bind(instance, make_tool(owner, table))
    path, model, pk = {
        "tool": ("/api/tools/{}/", Tool, binding.tool_id),
        "table": ("/api/tables/{}/", Table, table.pk),
        "instance": ("/api/mcp-instances/{}/", McpInstance, instance.pk),
        "binding": ("/api/bindings/{}/", Binding, binding.pk),
    }[kind]
    if kind == "binding":  # no service: the view deletes the model instance itself
        original = Binding.delete
        monkeypatch.setattr(Binding, "delete", lambda self: (Binding.objects.all().delete(), original(self)))
    else:
        module = mcp_services if kind == "instance" else services
        delete_first(monkeypatch, module, f"{kind}_delete", model, pk)

    # when
    response = client_for(owner).delete(path.format(pk) + "?force=true")  # bound and enabled: in use

    # then
    assert response.status_code == 204
    assert not model.objects.filter(pk=pk).exists()


def test_handler_maps_object_does_not_exist_to_404():
    """Any Model.DoesNotExist reaching the handler is NOT_FOUND, not a 500."""
    response = exception_handler(Tool.DoesNotExist("Tool matching query does not exist."), {})
    assert (response.status_code, response.data) == (404, NOT_FOUND)


def test_a_refused_race_writes_nothing_else(owner, table, make_tool, monkeypatch):
    """The 404 leaves every other row as it was."""
    # given
    tool = make_tool(owner, table, type="get_all_data", name="all")
    keep = make_tool(owner, table, type="get_all_data", name="keep")
    delete_before_write(monkeypatch, Tool, tool.pk)
    before = db_snapshot()
    before["tools_app.Tool"] = [row for row in before["tools_app.Tool"] if row["id"] == keep.pk]

    # when
    response = client_for(owner).patch(f"/api/tools/{tool.pk}/", {"description": "x"}, format="json")

    # then
    assert response.status_code == 404
    assert db_snapshot() == before
