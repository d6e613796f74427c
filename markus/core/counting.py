"""Counts that do not grow with the table: a list's total, or a queue's depth, counted up
to a cap, so that reading the first page of a long history costs what reading the first
page of a short one costs.

A count over the cap is shown as the cap with a "+" ("10,000+"): an API answer carries
the capped number and a flag beside it (``totalCount`` and ``totalCountCapped``); a page
says "10,000+". Below the cap the count is exact. ``capped_count`` is one statement,
``SELECT COUNT(*) FROM (SELECT … LIMIT cap + 1)``: the database stops reading the index
after ``cap + 1`` entries, where a full ``COUNT(*)`` reads all of them (100,000 rows: a
parallel sequential scan on PostgreSQL)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import IntegerField, QuerySet, Subquery

COUNT_CAP = 10_000  # a list's total is exact up to this, then "10,000+"


@dataclass(frozen=True)
class Counted:
    """A count, exact below the cap; ``capped``: there are more than ``count``."""

    count: int
    capped: bool

    def __str__(self) -> str:
        return f"{self.count:,}+" if self.capped else f"{self.count:,}"

    def fields(self, name: str = "totalCount") -> dict[str, Any]:
        """The count as an API answer carries it: ``{name: n, name + "Capped": bool}``."""
        return {name: self.count, f"{name}Capped": self.capped}


class Shown(int):
    """A capped count as a page shows it: computes as the number, prints "1,000+" past
    the cap (``capped``)."""

    capped: bool = False

    def __str__(self) -> str:
        return f"{int(self):,}+" if self.capped else str(int(self))


def shown(count: int, capped: bool) -> Shown:
    made = Shown(count)
    made.capped = capped
    return made


def capped_count(rows: QuerySet[Any], cap: int | None = None) -> Counted:
    """``rows`` counted up to ``cap`` (``COUNT_CAP``) in one statement that reads at most
    cap + 1 rows."""
    cap = COUNT_CAP if cap is None else cap
    n = rows.order_by()[: cap + 1].count()
    return Counted(min(n, cap), n > cap)


class CappedCount(Subquery):
    """``capped_count`` as a subquery of a bigger statement: the number of rows of
    ``rows``, at most ``cap + 1`` (more than ``cap`` reads as ``cap + 1``)."""

    template = "(SELECT COUNT(*) FROM (%(subquery)s) capped)"

    def __init__(self, rows: QuerySet[Any], cap: int) -> None:
        super().__init__(rows.order_by().values("pk")[: cap + 1], output_field=IntegerField())
