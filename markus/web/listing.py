"""Long lists on the pages (tasks, requirements, notifications, answered approvals): a
page of rows, its honest count, and the filters that chose them, all read from the
URL, so a link, a reload or a live refresh shows the same rows.

The count stops at ``markus.core.counting.COUNT_CAP`` and then reads "10,000+" (the
pages past it are not offered): counting a whole long list cost more than reading its
first page, and grew with the table.

A parameter the page cannot use (an unknown state, a page past the last, a search
longer than ``SEARCH_MAX``) is ignored and named in a note shown above the list,
never an error page: the rest of the URL still applies. A NUL byte anywhere in the
query is refused before the view (``markus.core.input.refuse_bad_characters``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import urlencode

from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from django.http import QueryDict
from django.utils.functional import cached_property

from markus.core.counting import capped_count, shown
from markus.core.input import whole_number

PER_PAGE = 50  # rows a list shows at a time
SEARCH_MAX = 200  # characters of a search; a title is at most 300


class Ignored(ValueError):
    """A filter's value the page cannot use; its message says why."""


Cleaner = Callable[[str], str]


def one_of(choices: Iterable[str]) -> Cleaner:
    allowed = list(choices)

    def clean(raw: str) -> str:
        if raw not in allowed:
            raise Ignored(f"expected one of {', '.join(allowed)}")
        return raw

    return clean


def search_text(raw: str) -> str:
    text = raw.strip()
    if len(text) > SEARCH_MAX:
        raise Ignored(f"at most {SEARCH_MAX} characters")
    return text


class CappedPaginator(Paginator):
    """Django's paginator with its count capped (``capped_count``): one bounded count."""

    @cached_property
    def count(self) -> int:
        counted = capped_count(cast("QuerySet[Any]", self.object_list))
        return shown(counted.count, counted.capped)  # "10,000+" on the page


@dataclass
class Query:
    """What the URL asked of a page's lists: the filters kept (valid ones only, so
    the links never carry a bad one on) and a note per value ignored."""

    raw: QueryDict
    kept: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def read(self, cleaners: Mapping[str, Cleaner]) -> dict[str, str]:
        """The filters of one list: name → clean value, for those the URL gives."""
        found = {}
        for name, clean in cleaners.items():
            raw = self.raw.get(name, "")
            if not raw:
                continue
            try:
                found[name] = self.kept[name] = clean(raw)
            except Ignored as exc:
                self.notes.append(f"{name}={raw[:40]!r} ignored: {exc}.")
        return found

    def url(self, **changes: Any) -> str:
        """``?…`` of the kept filters with ``changes`` (a falsy value drops the name)."""
        params = {k: v for k, v in {**self.kept, **changes}.items() if v}
        return f"?{urlencode(params)}" if params else "?"

    def hidden(self, *names: str) -> list[tuple[str, str]]:
        """The kept filters of the other lists, for a form's hidden inputs."""
        return [(n, self.kept[n]) for n in names if n in self.kept]

    def page(self, rows: QuerySet[Any], name: str = "page", per_page: int = PER_PAGE) -> Listed:
        """One page of ``rows`` (ordered by the caller): two queries, the (capped) count
        and the rows."""
        paginator = CappedPaginator(rows, per_page)
        raw = self.raw.get(name, "")
        number = 1
        if raw:
            asked = whole_number(raw)
            if asked is None or asked < 1:
                self.notes.append(f"{name}={raw[:40]!r} ignored: not a page number.")
            elif asked > paginator.num_pages:
                self.notes.append(f"{name}={raw} ignored: there {_pages(paginator.num_pages)}.")
                number = paginator.num_pages
            else:
                number = asked
        if number > 1:
            self.kept[name] = str(number)
        return Listed(paginator.page(number), self, name)


def _pages(n: int) -> str:
    return "is 1 page" if n == 1 else f"are {n} pages"


@dataclass
class Listed:
    """A page of a list, with the links to its neighbours keeping every other filter."""

    page: Page
    query: Query
    name: str

    @property
    def rows(self) -> list[Any]:
        return list(self.page.object_list)

    @property
    def count(self) -> int:
        """The rows in all, up to the cap: shown as "10,000+" past it."""
        return self.page.paginator.count

    @property
    def previous_url(self) -> str:
        if not self.page.has_previous():
            return ""
        previous = self.page.previous_page_number()
        return self.query.url(**{self.name: previous if previous > 1 else ""})

    @property
    def next_url(self) -> str:
        return self.query.url(**{self.name: self.page.next_page_number()}) if self.page.has_next() else ""
