"""A from / to date range filter for any date-time field of a changelist (both ends
inclusive, whole days in the current time zone)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, datetime, time, timedelta
from typing import Any, TypeVar

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ChangeList
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.utils import timezone

_M = TypeVar("_M", bound=Model)


def _day_start(value: date) -> datetime:
    return timezone.make_aware(datetime.combine(value, time.min))


class DateRangeFilter(admin.ListFilter):
    """Subclass with ``field_name``; the query string gets ``<field>_from`` and
    ``<field>_to`` (``YYYY-MM-DD``)."""

    field_name = ""
    template = "admin/console/date_range_filter.html"

    def __init__(
        self,
        request: HttpRequest,
        params: dict[str, list[str]],
        model: type[Model],
        model_admin: admin.ModelAdmin[Any],
    ) -> None:
        # Django >= 5.0 passes each parameter's list of values; the stub still says str.
        super().__init__(request, params, model, model_admin)  # type: ignore[arg-type]
        self.param_from, self.param_to = f"{self.field_name}_from", f"{self.field_name}_to"
        for name in (self.param_from, self.param_to):
            if name in params:
                values = params.pop(name)
                value = values[-1] if isinstance(values, list) else values
                if value:
                    self.used_parameters[name] = value
        self.start, self.end = self._parse(self.param_from), self._parse(self.param_to)

    def _parse(self, name: str) -> date | None:
        raw = self.used_parameters.get(name)
        if not raw or not isinstance(raw, str):  # __init__ stores only strings
            return None
        try:
            return date.fromisoformat(raw)
        except ValueError as exc:
            raise IncorrectLookupParameters(f"{name} must be a date (YYYY-MM-DD)") from exc

    def has_output(self) -> bool:
        return True

    def expected_parameters(self) -> list[str | None]:
        return [self.param_from, self.param_to]

    def queryset(self, request: HttpRequest, queryset: QuerySet[_M]) -> QuerySet[_M]:
        if self.start is not None:
            queryset = queryset.filter(**{f"{self.field_name}__gte": _day_start(self.start)})
        if self.end is not None:
            queryset = queryset.filter(**{f"{self.field_name}__lt": _day_start(self.end + timedelta(days=1))})
        return queryset

    # The stub types ListFilter.choices as SimpleListFilter's shape
    # (selected / query_string / display); this filter has its own template.
    def choices(self, changelist: ChangeList) -> Iterator[dict[str, Any]]:  # type: ignore[override]
        """One 'choice' for the template: the form's values, the other parameters to
        keep as hidden inputs, and the link that clears the range."""
        mine = {self.param_from, self.param_to}
        keep = [
            (k, v)
            for k, values in changelist.params.items()
            if k not in mine and k != "p"
            for v in (values if isinstance(values, list) else [values])
        ]
        yield {
            "param_from": self.param_from,
            "param_to": self.param_to,
            "value_from": self.used_parameters.get(self.param_from, ""),
            "value_to": self.used_parameters.get(self.param_to, ""),
            "hidden": keep,
            "clear_url": changelist.get_query_string(remove=list(mine)),
            "active": bool(self.used_parameters),
        }


def date_range_filter(field_name: str, title: str) -> type[DateRangeFilter]:
    return type(
        f"{field_name.title().replace('_', '')}RangeFilter",
        (DateRangeFilter,),
        {"field_name": field_name, "title": title},
    )
