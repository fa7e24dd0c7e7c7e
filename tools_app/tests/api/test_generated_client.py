"""A Python client generated from /api/schema/ (openapi-python-client, docs/api.md) works against the server.

The generator runs on the live schema into a temporary directory; the generated package then logs in, creates
a table and a tool on it, calls the tool, lists the tools on the table, and reads a refusal in the error shape,
all through the WSGI application in process (httpx's WSGI transport).
"""

import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.wsgi import get_wsgi_application

pytestmark = pytest.mark.django_db(transaction=False)

GENERATOR = Path(sys.executable).with_name("openapi-python-client")


@pytest.fixture
def generated_client(tmp_path, client):
    """The package openapi-python-client generates from the schema, imported."""
    if not GENERATOR.exists():
        pytest.skip("openapi-python-client is not installed (requirements-dev.txt)")
    schema = tmp_path / "schema.json"
    schema.write_bytes(client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").content)
    # The generator formats its output with ruff, found on PATH.
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path)}
    result = subprocess.run(
        [GENERATOR, "generate", "--path", schema, "--meta", "none", "--output-path", tmp_path / "toolhub_client"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    # then: every operation and component is generated, without warnings.
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Warning" not in result.stdout, result.stdout
    sys.path.insert(0, str(tmp_path))
    try:
        yield importlib.import_module("toolhub_client")
    finally:
        sys.path.remove(str(tmp_path))
        for name in [name for name in sys.modules if name.split(".")[0] == "toolhub_client"]:
            del sys.modules[name]
        shutil.rmtree(tmp_path / "toolhub_client", ignore_errors=True)


@pytest.fixture
def wsgi_transport():
    """httpx over the WSGI application, on the test's database connection (see test_api_schemathesis)."""
    import httpx
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield httpx.WSGITransport(app=get_wsgi_application())
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def test_generated_client_runs_the_main_flow(generated_client, wsgi_transport, make_user):
    """Log in, create a table and a query tool, call it, list the table's tools, read an error."""
    import httpx

    api = importlib.import_module("toolhub_client.api")
    models = importlib.import_module("toolhub_client.models")
    from toolhub_client.api.auth import auth_token_create
    from toolhub_client.api.tables import tables_create
    from toolhub_client.api.tools import tools_by_table_list, tools_call_create, tools_create

    # given
    make_user("alice", password="pw-123456!")
    anonymous = generated_client.Client(base_url="http://testserver")
    anonymous.set_httpx_client(httpx.Client(transport=wsgi_transport, base_url="http://testserver"))

    # when
    login = auth_token_create.sync(
        client=anonymous, body=models.AuthTokenRequestRequest(username="alice", password="pw-123456!")
    )
    client = generated_client.AuthenticatedClient(base_url="http://testserver", token=login.token, prefix="Token")
    client.set_httpx_client(
        httpx.Client(
            transport=wsgi_transport, base_url="http://testserver", headers={"Authorization": f"Token {login.token}"}
        )
    )
    table = tables_create.sync(
        client=client, body=models.TableRequest(name="orders", data=[{"id": 1, "status": "paid"}])
    )
    tool = tools_create.sync(
        client=client,
        body=models.QueryDataToolRequest(
            name="orders_query", type_=models.QueryDataToolRequestType.QUERY_DATA, table=table.id, description="Query."
        ),
    )
    called = tools_call_create.sync(
        id=tool.id,
        client=client,
        body=models.ToolCallRequest(arguments=models.ToolCallRequestArguments.from_dict({"query": "[0].status"})),
    )
    listed = tools_by_table_list.sync(table_id=table.id, client=client)
    refused = tables_create.sync_detailed(client=client, body=models.TableRequest(name="   "))

    # then
    assert api is not None
    assert (table.name, table.version, table.data) == ("orders", 1, [{"id": 1, "status": "paid"}])
    assert (tool.name, tool.table, tool.category) == ("orders_query", table.id, "read")
    assert called.result == "paid"
    assert [item.id for item in listed.results] == [tool.id]
    assert refused.status_code == 400
    assert refused.parsed.error == "VALIDATION_ERROR"
    assert refused.parsed.fields.to_dict() == {"name": ["This field may not be blank."]}
