"""A rows table's whole-table answers over a real socket (uvicorn, toolhub.asgi): `GET /api/tables/<id>/` and the
setup export with data come chunked, and their bytes are the JSON renderer's for the same answer gathered
(tools_app.api.streamed)."""

import hashlib
import json
import urllib.request

import pytest

from tests.live_server import Uvicorn, run_python, server_database

# The server has a database of its own (server_database): the test uses none of the test run's.
pytestmark = pytest.mark.e2e

SEED = """
from django.contrib.auth import get_user_model
from tools_app import services
from tools_app.api.renderers import JSONRenderer
from tools_app.api.serializers import TableSerializer
from tools_app.execution import records
from tools_app.models import Table
from tools_app.services import setup
import hashlib
u = get_user_model().objects.create_user('live', password='pw-123456!')
rows = [{"id": n, "name": f"record {n} \\u00e9 \\u2028", "total": n * 1.25, "tags": ["a", n]} for n in range(5000)]
t = services.table_create(owner=u, name='big', data={"meta": {"v": 1}, "orders": rows})
services.tool_create(owner=u, name='g', type='get_all_data', table=t, json_path='/orders', description='All.')
records.table_to_rows(t.pk)
table = Table.objects.get(pk=t.pk)
body = JSONRenderer().render(TableSerializer(table).data)
export = JSONRenderer().render(setup.setup_export(owner=u, with_data=True))
token = services.api_token_issue(user=u, via='test')[1]
print(json.dumps({"id": t.pk, "version": table.version, "storage": table.storage, "token": token,
                  "sha": hashlib.sha256(body).hexdigest(), "size": len(body),
                  "export_sha": hashlib.sha256(export).hexdigest()}))
"""


def test_a_rows_table_streams_over_a_real_socket_with_the_gathered_bytes(tmp_path):
    with server_database("streamed", tmp_path, secret="s") as env:
        seeded = json.loads(run_python(env, SEED))
        assert seeded["storage"] == "rows"
        with Uvicorn(env) as server:
            headers = {"Authorization": f"Token {seeded['token']}"}
            request = urllib.request.Request(f"{server.base}/api/tables/{seeded['id']}/", headers=headers)
            with urllib.request.urlopen(request, timeout=60) as response:
                assert response.status == 200
                assert response.headers["Transfer-Encoding"] == "chunked"
                assert response.headers["Content-Length"] is None
                assert response.headers["ETag"] == f'"{seeded["version"]}"'
                assert response.headers["Content-Type"] == "application/json"
                body = response.read()
            assert len(body) == seeded["size"]
            assert hashlib.sha256(body).hexdigest() == seeded["sha"]
            assert len(json.loads(body)["data"]["orders"]) == 5000
            request = urllib.request.Request(f"{server.base}/api/setup/export/?data=true", headers=headers)
            with urllib.request.urlopen(request, timeout=60) as response:
                assert response.headers["Transfer-Encoding"] == "chunked"
                exported = response.read()
            assert hashlib.sha256(exported).hexdigest() == seeded["export_sha"]
