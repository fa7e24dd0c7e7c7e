"""The registry scope of an MCP instance: the tools of its enabled bindings, under their effective names."""

from django.db.models import Count, Max

from tools_app.models import Binding, McpInstance, Tool
from tools_app.registry.scope import CatalogEntry
from tools_app.services import binding_create


class InstanceScope:
    def __init__(self, instance: McpInstance):
        self.instance = instance
        self.owner = instance.owner
        self.allow_registration = instance.allow_registration

    def _bindings(self):
        return Binding.objects.enabled_for(self.instance)

    def entries(self) -> list[CatalogEntry]:
        return [
            CatalogEntry(binding.effective_name, binding.effective_description, binding.tool)
            for binding in self._bindings().order_by("name_key", "id")
        ]

    def fingerprint(self) -> tuple:
        stats = self._bindings().aggregate(
            count=Count("id"), bindings_changed=Max("updated_at"), tools_changed=Max("tool__updated_at")
        )
        return ("instance", self.instance.pk, stats["count"], stats["bindings_changed"], stats["tools_changed"])

    def register(self, tool: Tool) -> None:
        binding_create(mcp_instance=self.instance, tool=tool)
