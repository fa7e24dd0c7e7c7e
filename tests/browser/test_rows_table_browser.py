"""A table imported from a CSV is stored as rows (docs/tables-at-scale.md, "Import"): its admin page shows its
shape and size from its first records, and its download streams the whole document from the server (uvicorn,
ASGI: through an asynchronous iterator), in a real browser."""

import json
import re

import pytest

from tests.browser.support import shot
from tests.live_server import run_python

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

ROWS = 3000

SEED = f"""
import io
from django.contrib.auth.models import User
from tools_app import services
csv = "sku,name,price\\n" + "".join(f"S{{n:05d}},item {{n}},{{n}}.5\\n" for n in range({ROWS}))
bob = User.objects.get(username="bob")
with services.table_import(owner=bob, name="catalog", file=io.BytesIO(csv.encode()), fmt="csv") as imported:
    print(imported.table.pk, imported.table.storage)
"""


def test_a_rows_table_page_and_its_streamed_download(server, new_page):
    table_id, storage = run_python(server["env"], SEED).split()
    assert storage == "rows"
    page = new_page("bob")
    page.goto(f"/admin/tools_app/table/{table_id}/change/")
    shape = page.inner_text("#toolhub-shape")
    assert f'"item_count": {ROWS}' in shape
    assert '"sku"' in shape
    shot(page, "rows-01-table-page")
    link = page.get_by_role("link", name=re.compile("download", re.IGNORECASE)).first
    response = page.request.get(link.get_attribute("href"))
    assert response.status == 200
    assert response.headers["content-disposition"] == 'attachment; filename="catalog.json"'
    records = json.loads(response.body())
    assert len(records) == ROWS
    assert records[0] == {"sku": "S00000", "name": "item 0", "price": 0.5}
    assert records[-1] == {"sku": f"S{ROWS - 1:05d}", "name": f"item {ROWS - 1}", "price": ROWS - 1 + 0.5}
