"""Small query helpers shared by the apps."""

from __future__ import annotations

from django.db.models import F, Func, IntegerField, QuerySet, Subquery
from django.db.models.functions import Coalesce


def count_subquery(queryset: QuerySet) -> Coalesce:
    """COUNT(*) of a correlated queryset as a scalar subquery (0 when empty), so a
    list can carry a per-row count in the same query."""
    counted = queryset.order_by().annotate(n=Func(F("pk"), function="COUNT")).values("n")
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)
