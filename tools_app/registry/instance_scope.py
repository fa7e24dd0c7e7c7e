"""The registry scope of an MCP instance: the tools of its enabled bindings, under their effective names, as one
caller may use them (tools_app.grants): without the tools outside its set, pinned arguments out of the schemas."""

from django.db.models import Count, Max

from tools_app.grants import FULL_GRANT, Grant
from tools_app.models import Binding, McpInstance, Tool
from tools_app.registry.scope import CatalogEntry
from tools_app.services import binding_create


class InstanceScope:
    """`grant`: the caller's (MCP: the key's or token's; the API's `key` parameter); by default the owner's
    view, every enabled binding."""

    def __init__(self, instance: McpInstance, grant: Grant = FULL_GRANT):
        self.instance = instance
        self.owner = instance.owner
        self.grant = grant
        self.allow_registration = instance.allow_registration

    def _bindings(self):
        return Binding.objects.enabled_for(self.instance)

    def _usable(self, binding: Binding) -> bool:
        read_only = self.instance.read_only or binding.read_only
        return self.grant.may_use(binding.tool.type, read_only=read_only, pins=binding.pinned_arguments)

    def entries(self) -> list[CatalogEntry]:
        return [
            CatalogEntry(binding.effective_name, binding.effective_description, binding.tool, binding.pinned_arguments)
            for binding in self._bindings().order_by("name_key", "id")
            if self._usable(binding)
        ]

    def fingerprint(self) -> tuple:
        stats = self._bindings().aggregate(
            count=Count("id"), bindings_changed=Max("updated_at"), tools_changed=Max("tool__updated_at")
        )
        return (
            "instance",
            self.instance.pk,
            self.instance.read_only,
            self.grant.identity,
            stats["count"],
            stats["bindings_changed"],
            stats["tools_changed"],
        )

    def register(self, tool: Tool) -> None:
        binding_create(mcp_instance=self.instance, tool=tool)
