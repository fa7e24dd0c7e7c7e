"""Create a planned set of tools (and their bindings) all or nothing.

The plan (names, types, descriptions, output schemas derived from the data) is tools_app.toolsets'; this
is its write: every name is checked first (one of the owner's tools, or a binding on the instance, already
holding it is a NAME_CONFLICT), then the tools are created and bound in one transaction, so a refusal at any
step (a concurrent bind taking a name included) leaves nothing behind.
"""

from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction

from tools_app.kernel.errors import ErrorCode
from tools_app.models import Binding, McpInstance, Tool
from tools_app.services.instances import binding_create
from tools_app.services.locks import lock_rows_no_key
from tools_app.services.tables import tool_create

__all__ = ["tool_set_create"]


def _conflict(name: str, message: str, **params: Any) -> ValidationError:
    return ValidationError(
        {"name_prefix": ValidationError(message, code=ErrorCode.NAME_CONFLICT, params={"name": name, **params})}
    )


def _check_names(owner, names: list[str], mcp_instance: McpInstance | None) -> None:
    """NAME_CONFLICT for a name already used by one of the owner's tools, or by a binding on the instance."""
    for name in names:
        existing = Tool.objects.filter(owner=owner, name__iexact=name).order_by("pk").first()
        if existing is not None:
            raise _conflict(
                name,
                "The name %(name)r is already used by your tool %(tool)r (id %(id)d); pass another name_prefix, "
                "or delete that tool first.",
                tool=existing.name,
                id=existing.pk,
            )
        if mcp_instance is not None:
            clashes = Binding.objects.name_clashes(instance_ids=[mcp_instance.pk], name=name)
            if clashes:
                raise _conflict(
                    name,
                    "The name %(name)r is already used by the tool %(tool)r on the instance %(instance)r (names are "
                    "unique per instance, ignoring case); pass another name_prefix.",
                    tool=clashes[0].tool,
                    instance=clashes[0].instance,
                )


def tool_set_create(
    *, owner, tools: list[dict[str, Any]], mcp_instance: McpInstance | None = None
) -> tuple[list[Tool], list[Binding]]:
    """Create the tools (each a dict of tool_create's fields) and bind each to `mcp_instance`; all or nothing."""
    created: list[Tool] = []
    bindings: list[Binding] = []
    with transaction.atomic():
        # One owner's tool sets are created one at a time (PostgreSQL: the owner's row, FOR NO KEY UPDATE, which
        # foreign-key checks do not wait for; SQLite's IMMEDIATE transactions already run one at a time), so two
        # at once cannot both pass the name check below.
        lock_rows_no_key(get_user_model().objects.filter(pk=owner.pk))
        _check_names(owner, [fields["name"] for fields in tools], mcp_instance)
        for fields in tools:
            created.append(tool_create(owner=owner, **fields))
        if mcp_instance is not None:
            for tool in created:
                bindings.append(binding_create(mcp_instance=mcp_instance, tool=tool))
    return created, bindings
