"""Filters of the bindings list; choices start from the ownership rule (another user's id is a 400)."""

from django_filters import rest_framework as filters

from mcp_app.models import Binding, McpInstance
from tools_app.models import Tool

__all__ = ["BindingFilterSet"]


def _instances(request):
    return McpInstance.objects.for_user(getattr(request, "user", None))


def _tools(request):
    return Tool.objects.for_user(getattr(request, "user", None))


class BindingFilterSet(filters.FilterSet):
    mcp_instance = filters.ModelChoiceFilter(queryset=_instances, help_text="Only bindings of this instance.")
    tool = filters.ModelChoiceFilter(queryset=_tools, help_text="Only bindings of this tool.")
    enabled = filters.BooleanFilter(help_text="Only enabled (true) or disabled (false) bindings.")

    class Meta:
        model = Binding
        fields = ["mcp_instance", "tool", "enabled"]
