"""Replace lone UTF-16 surrogates stored before input refused them (tools_app.validators.find_surrogate).

Until 2026-11-24 a JSON value such as "\\ud800" could reach Table.data and the JSON fields of Tool on SQLite
(PostgreSQL refused it). Such a value cannot be encoded as UTF-8: MCP tools/list of an instance binding that
tool, reads of that table and its admin page failed. Each lone surrogate, in a string or an object key,
becomes U+FFFD (the replacement character); a table whose data changes gets version + 1, as after any write,
so no worker keeps serving the cached document. Rows without one are read and left as they are.
"""

import json
import re

from django.db import migrations
from django.db.models import F

SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def _clean(value):
    if isinstance(value, str):
        return SURROGATE.sub(REPLACEMENT, value)
    if isinstance(value, list):
        return [_clean(item) for item in value]
    if isinstance(value, dict):
        return {_clean(key): _clean(item) for key, item in value.items()}
    return value


def _holds_surrogate(value) -> bool:
    return value is not None and SURROGATE.search(json.dumps(value, ensure_ascii=False)) is not None


def replace_surrogates(apps, schema_editor):
    Table = apps.get_model("tools_app", "Table")
    Tool = apps.get_model("tools_app", "Tool")
    for pk in Table.objects.values_list("pk", flat=True).order_by("pk"):
        data = Table.objects.filter(pk=pk).values_list("data", flat=True).get()
        if _holds_surrogate(data):
            Table.objects.filter(pk=pk).update(data=_clean(data), version=F("version") + 1)
    fields = ["input_schema", "output_schema", "metadata"]
    for row in Tool.objects.values("pk", *fields).order_by("pk").iterator():
        changed = {field: _clean(row[field]) for field in fields if _holds_surrogate(row[field])}
        if changed:
            Tool.objects.filter(pk=row["pk"]).update(**changed)


class Migration(migrations.Migration):
    dependencies = [("tools_app", "0003_json_path_help_text")]

    operations = [migrations.RunPython(replace_surrogates, migrations.RunPython.noop)]
