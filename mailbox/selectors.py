"""Reads of the mailbox: the queue in dequeue order and the filtered history. (The
timeline enriched with decisions and activities is the loop's: attention.selectors.)"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Q, QuerySet

from markus.core.counting import CappedCount, Shown, capped_count, shown
from markus.core.errors import MarkusError
from markus.core.statements import made_once

from .lifecycle import queued
from .models import MailboxItem
from .registry import MAILBOX_TYPE_REGISTRY, Category, Status, is_known_type, types_in_category
from .representation import serialize_item
from .statements import statements

# A queue's depth is counted up to this; a longer queue reads as QUEUE_DEPTH_CAP + 1 and
# is shown as "1000+" (``depth_label``, ``depth_fields``): counting every queued item
# cost 26 ms a read at 100,000 on SQLite, 37 ms on PostgreSQL, the cap well under 1 ms.
QUEUE_DEPTH_CAP = 1000


def _queued_rows(agent_id: Any) -> QuerySet[MailboxItem]:
    return MailboxItem.objects.filter(agent_id=agent_id, status=Status.QUEUED)


class Listed(NamedTuple):
    """A waiting item as a listing of the queue shows it (``waiting_listing``)."""

    id: str
    priority: int
    source_type: str
    summary: str


def _listing_sql(conn: BaseDatabaseWrapper) -> str:
    """``waiting_listing``'s statement on this connection (made once): the summary taken
    out of the payload by the database when it is a string (then no payload is read);
    otherwise the payload, for ``MailboxItem.summary`` to read as it reads any."""
    qn = conn.ops.quote_name
    payload = qn("payload")
    if conn.vendor == "postgresql":
        is_text = f"jsonb_typeof({payload} -> 'summary') = 'string'"
        text = f"{payload} ->> 'summary'"
    else:
        is_text = f"json_type({payload}, '$.summary') = 'text'"
        text = f"json_extract({payload}, '$.summary')"
    return (
        f"SELECT {qn('id')}, {qn('priority')}, {qn('source_type')},"
        f" CASE WHEN {is_text} THEN {text} END, CASE WHEN {is_text} THEN NULL ELSE {payload} END"
        f" FROM {qn(MailboxItem._meta.db_table)}"
        f" WHERE {qn('agent_id')} = %s AND {qn('status')} = '{Status.QUEUED.value}'"
        f" ORDER BY {qn('priority')}, {qn('queued_at')}, {qn('id')} LIMIT %s"
    )


_PAYLOAD = MailboxItem._meta.get_field("payload")


def waiting_listing(agent_id: str, limit: int) -> list[Listed]:
    """The queue's head as a listing shows it (a prompt's mailbox block): id, priority,
    type and summary of the first ``limit`` queued items in dequeue order, one statement made once per
    connection, no model instance and no payload decoded (the summary comes out of the
    database as text), the payload read only where the summary is not a string."""
    sql = made_once(_listing_sql)
    cursor = statements().cursor()
    cursor.execute(sql, [agent_id, limit])
    listed = []
    for item_id, priority, source_type, summary, payload in cursor.fetchall():
        if summary is None:  # no summary, or not a string: as the model reads it
            summary = MailboxItem(payload=_PAYLOAD.from_db_value(payload, _PAYLOAD.cached_col, connection)).summary
        listed.append(Listed(item_id, priority, source_type, summary))
    return listed


def queued_before(agent_id: str, before: datetime, limit: int) -> list[MailboxItem]:
    """Up to ``limit`` items queued before ``before``, the longest-queued first (then by
    id). One precompiled statement."""
    sql = statements()
    return sql.select(sql.queued_before, [agent_id, sql.stamp(before), limit])


def queue_depth(agent_id: str) -> int:
    """How many items are queued, up to QUEUE_DEPTH_CAP + 1 (which means "more than the
    cap"): one statement that reads at most that many index entries."""
    counted = capped_count(_queued_rows(agent_id), QUEUE_DEPTH_CAP)
    return counted.count + 1 if counted.capped else counted.count


def queue_depth_subquery(agent_id: Any) -> CappedCount:
    """``queue_depth`` as a subquery of a bigger statement (the loop's queue read)."""
    return CappedCount(_queued_rows(agent_id), QUEUE_DEPTH_CAP)


def depth_capped(depth: int) -> bool:
    return depth > QUEUE_DEPTH_CAP


def depth_label(depth: int) -> str:
    """A depth as a person reads it: "12", or "1000+" past the cap."""
    return f"{QUEUE_DEPTH_CAP}+" if depth_capped(depth) else str(depth)


def depth_shown(depth: int) -> Shown:
    """A depth for a page: the number (the cap past it), printed "1,000+" past the cap."""
    return shown(min(depth, QUEUE_DEPTH_CAP), depth_capped(depth))


def depth_fields(depth: int, name: str = "queueDepth") -> dict[str, Any]:
    """A depth as an API answer or an event carries it: the number (the cap past it) and
    ``<name>Capped``."""
    return {name: min(depth, QUEUE_DEPTH_CAP), f"{name}Capped": depth_capped(depth)}


def queued_items(agent_id: str) -> list[dict[str, Any]]:
    return [serialize_item(i) for i in queued(agent_id)]


QUEUE_PAGE = 50  # the queue's page by default, in the API and the mind
QUEUE_PAGE_MAX = 500
_EPOCH, _MICROSECOND = datetime(1970, 1, 1, tzinfo=UTC), timedelta(microseconds=1)
_QUEUE_CURSOR = re.compile(r"^([0-4])~(\d{1,20})~([A-Za-z0-9_]{1,64})$")


def queue_cursor(item: MailboxItem) -> str:
    """Where an item sits in dequeue order, as a cursor that outlives the item (it may
    be claimed before the next page is read): ``priority~queued-at µs~id``."""
    return f"{item.priority}~{(item.queued_at - _EPOCH) // _MICROSECOND}~{item.id}"


def queued_page(
    agent_id: str, *, limit: int = QUEUE_PAGE, after: str | None = None
) -> tuple[list[dict[str, Any]], str | None]:
    """One page of the queue in dequeue order and the cursor of the next (None on the
    last page): keyset on ``(priority, queued_at, id)``, the queue's index order."""
    rows = queued(agent_id)
    if after is not None:
        match = _QUEUE_CURSOR.match(after)
        if match is None:
            raise MarkusError("queuedAfter must be a queuedNextCursor of this queue")
        priority, micros, item_id = int(match[1]), int(match[2]), match[3]
        at = _EPOCH + micros * _MICROSECOND
        rows = rows.filter(
            Q(priority__gt=priority)
            | Q(priority=priority, queued_at__gt=at)
            | Q(priority=priority, queued_at=at, id__gt=item_id)
        )
    items = list(rows[: limit + 1])
    more = len(items) > limit
    items = items[:limit]
    return [serialize_item(i) for i in items], queue_cursor(items[-1]) if more else None


def timeline_queryset(
    agent_id: str,
    *,
    types: list[str] | None = None,
    category: str | None = None,
    statuses: list[str] | None = None,
) -> QuerySet[MailboxItem]:
    rows = MailboxItem.objects.filter(agent_id=agent_id)
    if types:
        unknown = [t for t in types if not is_known_type(t)]
        if unknown:
            raise MarkusError(f"unknown type {unknown[0]!r}; expected one of: {', '.join(MAILBOX_TYPE_REGISTRY)}")
        rows = rows.filter(source_type__in=types)
    if category:
        if category not in Category._value2member_map_:
            raise MarkusError(f"unknown category {category!r}; expected one of: {', '.join(c.value for c in Category)}")
        rows = rows.filter(source_type__in=types_in_category(category))
    if statuses:
        bad = [s for s in statuses if s not in Status._value2member_map_]
        if bad:
            raise MarkusError(f"unknown status {bad[0]!r}; expected one of: {', '.join(s.value for s in Status)}")
        rows = rows.filter(status__in=statuses)
    return rows.order_by("-queued_at", "-id")
