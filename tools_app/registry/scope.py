"""What registry tools work over (SPEC §5): the tools bound to one instance, or the tools a user owns.

tools_app does not import mcp_app; the MCP side provides its own scope (tools_app.registry.instance_scope.InstanceScope)
with the same interface.
"""

from dataclasses import dataclass, field
from typing import Any, Protocol

from django.db.models import Count, Max

from tools_app.kernel.errors import ErrorCode, ToolError
from tools_app.models import Tool


@dataclass(frozen=True)
class CatalogEntry:
    """A tool as the scope shows it: under its effective name and description."""

    name: str
    description: str
    tool: Tool
    # The binding's pinned arguments (tools_app.grants): left out of the schemas the scope shows.
    pinned: dict[str, Any] = field(default_factory=dict)


class RegistryScope(Protocol):
    owner: Any
    allow_registration: bool
    # Optional: why register_tool is refused where allow_registration is false (registry.REGISTRATION_OFF if absent).
    # registration_refusal: str

    def entries(self) -> list[CatalogEntry]:
        """Every tool in the scope (registry and external tools included), under effective names."""
        ...

    def fingerprint(self) -> tuple:
        """A cheap value that changes whenever entries() would change (for caches shared across requests)."""
        ...

    def register(self, tool: Tool) -> None:
        """Make a newly registered tool part of the scope (bind it), or raise ToolError."""
        ...


class UserScope:
    """The tools owned by a user (all of them for a superuser), under their own names: the API's scope."""

    allow_registration = False
    registration_refusal = (
        "register_tool needs an MCP instance that allows registration: it creates the tool and binds it to that "
        "instance, and a call through the API has no instance. Call it over MCP on an instance with "
        "allow_registration on."
    )

    def __init__(self, user: Any):
        self.owner = user

    def _queryset(self):
        return Tool.objects.for_user(self.owner)

    def entries(self) -> list[CatalogEntry]:
        return [CatalogEntry(tool.name, tool.description, tool) for tool in self._queryset().order_by("name", "id")]

    def fingerprint(self) -> tuple:
        stats = self._queryset().aggregate(count=Count("id"), changed=Max("updated_at"))
        return ("user", getattr(self.owner, "pk", None), stats["count"], stats["changed"])

    def register(self, tool: Tool) -> None:
        raise ToolError(ErrorCode.REGISTRATION_FAILED, self.registration_refusal, {"reason": "no_instance"})
