"""ToolFilterSet: the tool filters of the API list (a DRF FilterSet, so it lives in the API package).

Every choice starts from the ownership rule: `?table=` and `?mcp_instance=` accept only the caller's
objects, so another user's id is a 400 naming the parameter (SPEC §6). Category and tags live in
Tool.metadata (JSON); the lookups below give the same answer on SQLite and PostgreSQL.
"""

from django.db import connection
from django.db.models import BooleanField, Q, QuerySet
from django.db.models.constants import LOOKUP_SEP
from django.db.models.expressions import RawSQL
from django_filters import rest_framework as filters

from tools_app.api.filters import StrictFilterSet
from tools_app.choices import ToolType, default_category
from tools_app.models import Table, Tool

__all__ = ["ToolFilterSet", "category_q", "tag_filter"]


def _user(request):
    return getattr(request, "user", None)


def _tables(request):
    return Table.objects.for_user(_user(request))


# The instances a tool is bound to: the `?mcp_instance=` filter follows this path from Tool.
INSTANCE_PATH = "bindings__mcp_instance"


def related_model(model, lookup: str):
    """The model at the end of a relation path such as "bindings__mcp_instance", read from the fields."""
    for name in lookup.split(LOOKUP_SEP):
        model = model._meta.get_field(name).related_model
    return model


def _instances(request):
    # tools_app does not import mcp_app (STYLE: dependencies point one way): the instance model is the one
    # Tool's reverse relation leads to, resolved at request time, when every app is loaded.
    return related_model(Tool, INSTANCE_PATH).objects.for_user(_user(request))


def category_q(category: str) -> Q:
    """Tools whose effective category (Tool.category) is `category`.

    SPEC §2.2: metadata.category when set, else the type's default; a missing key, JSON null and ""
    all mean "not set".
    """
    defaulted = [value for value in ToolType.values if default_category(value) == category]
    unset = ~Q(metadata__has_key="category") | Q(metadata__category=None) | Q(metadata__category="")
    return Q(metadata__category=category) | (unset & Q(type__in=defaulted))


def tag_filter(queryset: QuerySet, tag: str) -> QuerySet:
    """Tools whose metadata.tags list holds `tag` exactly."""
    if connection.vendor == "postgresql":
        return queryset.filter(metadata__tags__contains=[tag])
    # SQLite has no JSON containment lookup; json_each walks the list (non-lists never match).
    table = Tool._meta.db_table
    has_tag = RawSQL(
        f"EXISTS (SELECT 1 FROM json_each({table}.metadata, '$.tags') AS tag "
        f"WHERE json_type({table}.metadata, '$.tags') = 'array' AND tag.type = 'text' AND tag.value = %s)",
        (tag,),
        output_field=BooleanField(),
    )
    return queryset.alias(_has_tag=has_tag).filter(_has_tag=True)


class ToolFilterSet(StrictFilterSet):
    table = filters.ModelChoiceFilter(queryset=_tables, help_text="Only tools on this table (one of yours).")
    type = filters.ChoiceFilter(choices=ToolType.choices, help_text="Only tools of this type.")
    category = filters.CharFilter(method="filter_category", help_text="Effective category (metadata or default).")
    tag = filters.CharFilter(method="filter_tag", help_text="Only tools whose metadata.tags holds this tag.")
    mcp_instance = filters.ModelChoiceFilter(
        field_name=INSTANCE_PATH,
        queryset=_instances,
        distinct=True,
        help_text="Only tools bound to this instance (one of yours).",
    )
    search = filters.CharFilter(method="filter_search", help_text="Substring of name, alias or description.")

    class Meta:
        model = Tool
        fields = ["table", "type", "category", "tag", "mcp_instance", "search"]

    def filter_category(self, queryset, name, value):
        return queryset.filter(category_q(value.strip())) if value.strip() else queryset

    def filter_tag(self, queryset, name, value):
        return tag_filter(queryset, value) if value else queryset

    def filter_search(self, queryset, name, value):
        value = value.strip()
        if not value:
            return queryset
        return queryset.filter(Q(name__icontains=value) | Q(alias__icontains=value) | Q(description__icontains=value))
