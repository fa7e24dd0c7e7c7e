"""Filter backends of the API: DRF's, with the same answers on SQLite and PostgreSQL."""

from django.core.exceptions import FieldDoesNotExist
from django.db.models import F
from rest_framework import filters

__all__ = ["OrderingFilter"]


class OrderingFilter(filters.OrderingFilter):
    """`?ordering=`: DRF's OrderingFilter with one order on every backend.

    A nullable field (e.g. a tool's `last_used`) puts the rows without a value last in both directions:
    SQLite sorts NULL first and PostgreSQL last when ascending, and the reverse when descending. Ties are
    broken by id, so pages over a tied ordering never repeat or skip a row.
    """

    def filter_queryset(self, request, queryset, view):
        ordering = self.get_ordering(request, queryset, view)
        if not ordering:
            return queryset
        terms = [self.nulls_last(queryset.model, term) for term in ordering]
        if not {"id", "-id", "pk", "-pk"} & set(ordering):
            terms.append("pk")
        return queryset.order_by(*terms)

    @staticmethod
    def nulls_last(model, term: str):
        name = term.lstrip("-")
        try:
            field = model._meta.get_field(name)
        except FieldDoesNotExist:
            return term
        if not field.null:
            return term
        return F(name).desc(nulls_last=True) if term.startswith("-") else F(name).asc(nulls_last=True)
