"""Filters of the API: an ordering backend with the same answers on SQLite and PostgreSQL that refuses an
unknown field, a boolean query filter that refuses what is not a boolean, and StrictFilterSet, the base of
every filterset (a bad filter value is a 400 VALIDATION_ERROR naming the parameter, never ignored).
"""

import re
from datetime import UTC

from django import forms
from django.core.exceptions import FieldDoesNotExist, ValidationError
from django.db import models
from django.db.models import F
from django_filters import rest_framework as django_filters
from django_filters.fields import IsoDateTimeField
from django_filters.widgets import BooleanWidget
from rest_framework import filters, serializers

__all__ = ["OrderingFilter", "StrictBooleanFilter", "StrictFilterSet", "UtcDateTimeFilter"]


class OrderingFilter(filters.OrderingFilter):
    """`?ordering=`: DRF's OrderingFilter with one order on every backend, and no silent typos.

    A nullable field (e.g. a tool's `last_used`) puts the rows without a value last in both directions:
    SQLite sorts NULL first and PostgreSQL last when ascending, and the reverse when descending. Ties are
    broken by id, so pages over a tied ordering never repeat or skip a row.

    DRF drops a term outside `ordering_fields`, so `?ordering=nmae` answered the default order; here it is
    a 400 VALIDATION_ERROR naming `ordering`, and the schema's pattern lists the fields.
    """

    def get_ordering(self, request, queryset, view):
        raw = request.query_params.get(self.ordering_param)
        if raw:
            terms = [term.strip() for term in raw.split(",")]
            valid = {name for name, _label in self.get_valid_fields(queryset, view, {"request": request})}
            unknown = [term for term in terms if term.removeprefix("-") not in valid]
            if unknown:
                raise serializers.ValidationError(
                    {
                        self.ordering_param: [
                            f"Unknown ordering {unknown[0][:100]!r}: use one or more of "
                            f"{', '.join(sorted(valid))}, comma-separated, each optionally prefixed by '-'."
                        ]
                    }
                )
        return super().get_ordering(request, queryset, view)

    def get_schema_operation_parameters(self, view):
        fields = sorted(name for name in getattr(view, "ordering_fields", None) or () if isinstance(name, str))
        if not fields:
            return super().get_schema_operation_parameters(view)
        term = "-?(?:" + "|".join(re.escape(name) for name in fields) + ")"
        return [
            {
                "name": self.ordering_param,
                "required": False,
                "in": "query",
                "description": f"Sort by one or more of {', '.join(fields)}, comma-separated; '-' sorts descending. "
                "Any other value is a 400.",
                "schema": {"type": "string", "pattern": f"^(?:{term}(?:,{term})*)?$"},
            }
        ]

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


class _UtcDateTimeField(IsoDateTimeField):
    """An ISO 8601 time, in UTC. Python takes offsets up to ±23:59 and PostgreSQL only up to ±15:59, so the
    time is compared in UTC (as the database stores it); one that UTC cannot hold (year 1 at -01:00) is an
    error naming the parameter, not a database error."""

    def to_python(self, value):
        value = super().to_python(value)
        if value is None:
            return value
        try:
            return value.astimezone(UTC)
        except (OverflowError, ValueError):
            raise ValidationError(
                "Enter a time that UTC can hold (got %(value)s).", code="invalid", params={"value": value}
            ) from None


class UtcDateTimeFilter(django_filters.IsoDateTimeFilter):
    """`?created_after=<ISO 8601>`: django-filter's ISO time filter, compared in UTC (_UtcDateTimeField)."""

    field_class = _UtcDateTimeField


class StrictFilterSet(django_filters.FilterSet):
    """The base of the API's filtersets: django-filter's, with model booleans read strictly (StrictBooleanFilter).

    django-filter already answers an invalid choice or id with a form error, which the DRF backend raises
    as a 400 naming the parameter; a boolean it could not read was ignored instead.
    """

    FILTER_DEFAULTS = {
        **django_filters.FilterSet.FILTER_DEFAULTS,
        models.BooleanField: {"filter_class": StrictBooleanFilter},
    }
