"""Concurrent generate-tools and bulk binds, on PostgreSQL: all or nothing holds under races."""

import pytest
from django.core.exceptions import ValidationError

from tools_app.kernel.errors import ErrorCode
from tools_app.tests.services.test_concurrency import _in_threads

RACERS = 6


def _codes(refusal: ValidationError) -> list[str]:
    return [error.code for errors in refusal.error_dict.values() for error in errors]


@pytest.mark.postgres
@pytest.mark.parametrize("bound", [True, False])
def test_concurrent_generations_of_one_table_create_one_set(postgres_db, owner, make_table, make_instance, bound):  # noqa: F811
    """6 threads generate the tools of one table (bound to one instance, or not: then only the owner's row lock
    keeps them apart): one set is created; the 5 others, one at a time after it, find it generated and up to date."""
    from tools_app.models import Binding, McpInstance, Table, Tool
    from tools_app.toolsets import generate_tools

    # given
    table = make_table(owner, name="sales", data=[{"id": n, "status": "paid"} for n in range(1, 50)])
    instance = make_instance(owner)

    # when
    def worker(index: int):
        generated = generate_tools(
            owner=owner,
            table=Table.objects.get(pk=table.pk),
            mcp_instance=McpInstance.objects.get(pk=instance.pk) if bound else None,
        )
        return [tool.pk for tool in generated.tools]

    results = _in_threads(RACERS, worker)

    # then
    assert all(isinstance(r, list) for r in results), results
    assert all(r == results[0] for r in results)
    assert sorted(Tool.objects.values_list("pk", flat=True)) == sorted(results[0])
    assert Binding.objects.filter(mcp_instance=instance).count() == (5 if bound else 0)


@pytest.mark.postgres
def test_concurrent_bulk_binds_of_overlapping_names_keep_names_unique(postgres_db, owner, table, make_tool, instance):  # noqa: F811
    """Each thread binds its own pair of tools, all pairs named 'a' and 'b' in other cases: one pair wins whole."""
    from tools_app.models import Binding, McpInstance, Tool
    from tools_app.services import binding_create_many

    # given
    pairs = [
        [make_tool(owner, table, name=f"a{'_' * n}x").pk, make_tool(owner, table, name=f"B{'_' * n}x").pk]
        for n in range(RACERS)
    ]
    for n, (first, second) in enumerate(pairs):
        Tool.objects.filter(pk=first).update(name="a" if n % 2 else "A")
        Tool.objects.filter(pk=second).update(name="b" if n % 2 else "B")

    # when
    def worker(index: int):
        tools = list(Tool.objects.filter(pk__in=pairs[index]).order_by("pk"))
        bindings = binding_create_many(mcp_instance=McpInstance.objects.get(pk=instance.pk), tools=tools)
        return [binding.tool_id for binding in bindings]

    results = _in_threads(RACERS, worker)

    # then
    winners = [r for r in results if isinstance(r, list)]
    refusals = [r for r in results if isinstance(r, ValidationError)]
    assert len(winners) == 1, results
    assert all(_codes(refusal) == [ErrorCode.NAME_CONFLICT] for refusal in refusals)
    assert sorted(Binding.objects.values_list("tool_id", flat=True)) == sorted(winners[0])
