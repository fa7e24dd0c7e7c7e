"""Filters of the API: an ordering backend with the same answers on SQLite and PostgreSQL, and a boolean
query filter that refuses what is not a boolean."""

from django import forms
from django.core.exceptions import FieldDoesNotExist, ValidationError
from django.db.models import F
from django_filters import rest_framework as django_filters
from django_filters.widgets import BooleanWidget
from rest_framework import filters

__all__ = ["OrderingFilter", "StrictBooleanFilter"]


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


class _StrictBooleanWidget(BooleanWidget):
    """Reads true/false/1/0 (any case) as django-filter's BooleanWidget; passes anything else on as it is."""

    def value_from_datadict(self, data, files, name):
        value = super().value_from_datadict(data, files, name)
        raw = data.get(name)
        return raw if value is None and raw not in (None, "") else value


class _StrictBooleanField(forms.NullBooleanField):
    def to_python(self, value):
        if value is None or isinstance(value, bool):
            return value
        raise ValidationError("Enter true or false (got %(value)r).", code="invalid", params={"value": value})


class StrictBooleanFilter(django_filters.BooleanFilter):
    """`?flag=true|false` (or 1/0, any case; empty: no filter). django-filter ignores any other value, which
    would answer an unfiltered list to `?enabled=bogus`; this filter refuses it: a 400 naming the filter."""

    field_class = _StrictBooleanField

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", _StrictBooleanWidget)
        super().__init__(*args, **kwargs)
