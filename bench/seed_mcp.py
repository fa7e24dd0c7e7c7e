"""Create (or reset) an MCP instance for end-to-end tests, the benchmark and the conformance run.

Run with the target database's environment (DATABASE_URL, DJANGO_SECRET_KEY):
    .venv/bin/python bench/seed_mcp.py --slug bench --rows 1000
Prints one JSON line: {"slug", "key", "instance_id", "tools": {name: id}, "table_id"}.
"""

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolhub.settings")

import django  # noqa: E402

django.setup()

from bench_data import rows  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402

from tools_app import services  # noqa: E402
from tools_app.models import (  # noqa: E402
    McpInstance,  # noqa: E402
    Table,
    Tool,
)
from tools_app.services import api_key_issue, binding_create, instance_create  # noqa: E402


def seed(slug: str, count: int, username: str) -> dict:
    user, _ = get_user_model().objects.get_or_create(username=username, defaults={"is_staff": True})
    McpInstance.objects.filter(slug=slug).delete()
    Tool.objects.filter(owner=user, name__startswith=f"{slug}_").delete()
    Table.objects.filter(owner=user, name=f"{slug}_orders").delete()
    table = services.table_create(owner=user, name=f"{slug}_orders", data=rows(count))
    instance = instance_create(
        owner=user,
        name=f"{slug} instance",
        slug=slug,
        instructions="Orders of the demo shop: query them with orders_query (JMESPath).",
    )
    tools = {}
    for tool_type, name, description in [
        ("query_data", "orders_query", "Query the orders with a JMESPath expression."),
        ("get_data_schema", "orders_schema", "The shape of the orders data."),
        ("select", "orders_by_id", "Orders by id."),
        ("create", "orders_add", "Add orders."),
    ]:
        tool = services.tool_create(
            owner=user, name=f"{slug}_{name}", type=tool_type, table=table, description=description
        )
        binding_create(mcp_instance=instance, tool=tool, name_override=name)
        tools[name] = tool.pk
    _, key = api_key_issue(mcp_instance=instance, label="seed")
    return {"slug": slug, "key": key, "instance_id": instance.pk, "tools": tools, "table_id": table.pk}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--slug", default="bench")
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--user", default="bench")
    args = parser.parse_args()
    print(json.dumps(seed(args.slug, args.rows, args.user)))
