"""Filters of the instance and binding lists; choices start from the ownership rule (another user's id is a 400)."""

from django_filters import rest_framework as filters

from tools_app.api.filters import StrictBooleanFilter, StrictFilterSet
from tools_app.models import Binding, McpInstance, Tool

__all__ = ["BindingFilterSet", "McpInstanceFilterSet"]


def _instances(request):
    return McpInstance.objects.for_user(getattr(request, "user", None))


def _tools(request):
    return Tool.objects.for_user(getattr(request, "user", None))


class McpInstanceFilterSet(StrictFilterSet):
    enabled = StrictBooleanFilter(help_text="Only enabled (true) or disabled (false) instances.")
    allow_registration = StrictBooleanFilter(help_text="Only instances that allow (true) or refuse tool registration.")

    class Meta:
        model = McpInstance
        fields = ["enabled", "discovery", "allow_registration"]


class BindingFilterSet(StrictFilterSet):
    mcp_instance = filters.ModelChoiceFilter(queryset=_instances, help_text="Only bindings of this instance.")
    tool = filters.ModelChoiceFilter(queryset=_tools, help_text="Only bindings of this tool.")
    enabled = StrictBooleanFilter(help_text="Only enabled (true) or disabled (false) bindings.")

    class Meta:
        model = Binding
        fields = ["mcp_instance", "tool", "enabled"]
