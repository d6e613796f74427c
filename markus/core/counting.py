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

from django.core.exceptions import EmptyResultSet
from django.db import connections
from django.db.models import IntegerField, QuerySet, Subquery, Value

COUNT_CAP = 10_000  # a list's total is exact up to this, then "10,000+"


@dataclass(frozen=True)
class Counted:
    """A count, exact below the cap; ``capped``: there are more than ``count``."""

    count: int
    capped: bool

    @classmethod
    def of(cls, n: int, cap: int) -> Counted:
        """The count of ``n`` rows read up to ``cap + 1`` (more than ``cap``: capped)."""
        return cls(min(n, cap), n > cap)

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
    if not _plain(rows):
        n = rows.order_by()[: cap + 1].count()
        return Counted.of(n, cap)
    # Written out: Django's count() of a sliced query drops the constant it selects.
    try:
        sql, params = _nothing_of_the_row(rows)[: cap + 1].query.sql_with_params()
    except EmptyResultSet:  # a filter that matches nothing (``id__in=[]``)
        return Counted(0, False)
    with connections[rows.db].cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM ({sql}) capped", params)
        n = cursor.fetchone()[0]
    return Counted.of(n, cap)


def _nothing_of_the_row(rows: QuerySet[Any]) -> QuerySet[Any]:
    """``rows`` selecting a constant, unordered: counting them reads index entries only
    (an index that serves the filter covers the subselect). Selecting the primary key
    read every counted row where the index lacks it: the queue's depth through the
    index ``(agent, status)``, 1.3 ms instead of 0.09 ms for 1,001 rows on SQLite."""
    if not _plain(rows):  # its rows are what it selects: counted as they are
        return rows.order_by().values("pk")
    return rows.order_by().annotate(counted_one=Value(1)).values("counted_one")


def _plain(rows: QuerySet[Any]) -> bool:
    """Whether ``rows`` are the rows of its table as filtered (not distinct, grouped,
    combined or a values list): then what it selects does not change how many."""
    q = rows.query
    return not (q.distinct or q.group_by is not None or q.combinator or q.values_select or q.annotations)


class CappedCount(Subquery):
    """``capped_count`` as a subquery of a bigger statement: the number of rows of
    ``rows``, at most ``cap + 1`` (more than ``cap`` reads as ``cap + 1``)."""

    template = "(SELECT COUNT(*) FROM (%(subquery)s) capped)"

    def __init__(self, rows: QuerySet[Any], cap: int) -> None:
        super().__init__(_nothing_of_the_row(rows)[: cap + 1], output_field=IntegerField())
