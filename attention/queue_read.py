"""Reading the queue, for the loop: the head of an agent's queue in one statement
(``read_queue``: at most QUEUE_READ_LIMIT items in dequeue order, the queue's depth, whether
deferred items came due, and whether each item has a saved LLM session), the burst
coalescing window (``window_left``, see ``attention.loop``) and the queue tidied before
triage (``untidy``, ``tidy``): expired items dropped, items about one task, requirement or
conversation folded together."""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import Exists, OuterRef, Q, QuerySet, Value
from django.db.models.functions import Concat
from django.utils import timezone

from mailbox import lifecycle
from mailbox import services as mailbox
from mailbox.expiry import expire_stale, is_expired
from mailbox.merge import consolidation_key, entity_key, is_strict
from mailbox.models import MailboxItem
from mailbox.registry import COMMENT_TYPES, Status, descriptor
from mailbox.selectors import queue_depth_subquery
from mailbox.statements import ATTNAMES as ITEM_COLUMNS
from mailbox.statements import statements
from markus.core.db import fixed_values_written_in

from . import records
from .lease import Fence, Lease, fenced
from .models import DecisionType, LLMSession
from .session import SESSION_PREFIX
from .triage import MAX_CANDIDATES

# The loop reads at most this many queued items per step: the head and what triage
# (its candidates), consolidation and the first prompt look at; the queue's depth is
# counted up to a cap (QUEUE_DEPTH_CAP). Reading, or counting, the whole queue for every
# item made a long queue O(n²).
QUEUE_READ_LIMIT = MAX_CANDIDATES


@dataclass
class QueueView:
    """The head of the queue as one statement read it: up to QUEUE_READ_LIMIT queued
    items in dequeue order, how many are queued in all (up to QUEUE_DEPTH_CAP + 1, which
    means more than the cap: ``mailbox.selectors.depth_label``), whether deferred items
    came due, and when it was read."""

    items: list[MailboxItem]
    depth: int
    due_deferred: bool
    read_at: datetime

    @property
    def complete(self) -> bool:
        return len(self.items) >= self.depth


def _queue_query(agent_id: str, now: datetime) -> QuerySet[MailboxItem]:
    mine = MailboxItem.objects.filter(agent_id=agent_id)
    depth = queue_depth_subquery(agent_id)  # up to QUEUE_DEPTH_CAP + 1: a read that never grows with the queue
    due = (
        mine.filter(status=Status.DEFERRED)
        .filter(Q(deferred_until__isnull=True) | Q(deferred_until__lte=now))
        .filter(lifecycle.not_parked())
    )
    saved = LLMSession.objects.filter(id=Concat(Value(SESSION_PREFIX), OuterRef("id")))
    return lifecycle.queued(agent_id).annotate(depth=depth, due=Exists(due), has_session=Exists(saved))[
        :QUEUE_READ_LIMIT
    ]


# The queue read is the loop's most frequent statement: its SQL is compiled once per
# database connection (with stand-in values whose places among the parameters are
# then known) and run with each call's values; building it with the ORM every time
# cost thirty times what the database spends on it.
_AGENT_STANDIN = "\x00agent-stand-in"


_NOW_STANDIN = datetime(2000, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


_compiled: weakref.WeakKeyDictionary[Any, tuple[str, list[Any], list[int], list[int]]] = weakref.WeakKeyDictionary()


def _compiled_queue_query() -> tuple[str, list[Any], list[int], list[int]]:
    conn = connections[DEFAULT_DB_ALIAS]  # this thread's connection, not the proxy
    try:
        return _compiled[conn]
    except KeyError:
        pass
    query = _queue_query(_AGENT_STANDIN, _NOW_STANDIN).query
    compiler = query.get_compiler(connection=conn)
    sql, params = compiler.as_sql()
    columns = [alias or getattr(getattr(expr, "target", None), "attname", None) for expr, _, alias in compiler.select]
    if columns != [*ITEM_COLUMNS, *_ANNOTATED]:  # what ``_items`` reads
        raise RuntimeError(f"the queue read's columns are not the item's and {_ANNOTATED}: {columns}")
    now_stored = conn.ops.adapt_datetimefield_value(_NOW_STANDIN)

    def places(params: list[Any]) -> tuple[list[int], list[int]]:
        agents = [i for i, p in enumerate(params) if p == _AGENT_STANDIN]
        return agents, [i for i, p in enumerate(params) if p in (_NOW_STANDIN, now_stored)]

    # Only the agent and the time vary: the rest is written into the SQL (the run's take
    # sends it prepared, and its plan is made once only when it knows them).
    agents, nows = places(list(params))
    sql, params = fixed_values_written_in(conn, sql, params, varying={*agents, *nows})
    made = (sql, params, *places(params))
    _compiled[conn] = made
    return made


def read_queue(agent_id: str) -> QueueView:
    """One statement: the head of the queue (at most QUEUE_READ_LIMIT queued items in
    dequeue order, by the partial index), the queue's full depth and whether deferred
    items (not parked) are due, as two uncorrelated subqueries of it, and for each item
    whether it has a saved LLM session. An empty queue returns no row to carry them:
    then the deferred items are looked at separately. (A run's first read on PostgreSQL
    goes with the statement that takes its lease: ``queue_sql``, ``view_of``.)"""
    now = timezone.now()
    sql, params = queue_sql(agent_id, now)
    return _view(agent_id, _items(sql, params), now)


def queue_sql(agent_id: str, now: datetime) -> tuple[str, list[Any]]:
    """The queue read's SQL and parameters (compiled once per connection)."""
    sql, template, agents, nows = _compiled_queue_query()
    params = list(template)
    stored_now = connection.ops.adapt_datetimefield_value(now)
    for i in agents:
        params[i] = agent_id
    for i in nows:
        params[i] = stored_now if template[i] != _NOW_STANDIN else now
    return sql, params


def _view(agent_id: str, rows: list[MailboxItem], now: datetime) -> QueueView:
    if not rows:
        return QueueView(items=[], depth=0, due_deferred=_any_due(agent_id, now), read_at=now)
    first = rows[0]
    return QueueView(
        items=rows,
        depth=int(getattr(first, "depth", 0) or len(rows)),
        due_deferred=bool(getattr(first, "due", False)),
        read_at=now,
    )


def view_of(agent_id: str, values: list[tuple[Any, ...]], now: datetime) -> QueueView:
    """A view of rows of ``queue_sql`` read elsewhere (the loop joins its run's first
    read to the statement that takes the lease, ``attention.lease_take``)."""
    return _view(agent_id, _as_items(values), now)


# The read's columns: the item's, in the model's order, then these annotations.
_ANNOTATED = ("depth", "due", "has_session")


def _items(sql: str, params: list[Any]) -> list[MailboxItem]:
    """The read's rows as items (``MailboxItem.objects.raw`` cost more than the
    statement)."""
    cursor = statements().cursor()
    cursor.execute(sql, params)
    return _as_items(cursor.fetchall())


def _as_items(values: list[tuple[Any, ...]]) -> list[MailboxItem]:
    """Rows of the read as items, converted as the ORM converts (by the mailbox's
    statements), each with its annotations as attributes."""
    made = statements()
    n = len(ITEM_COLUMNS)
    rows = []
    for row in values:
        item = made.item(row[:n])
        item.depth, item.due, item.has_session = row[n:]  # type: ignore[attr-defined]
        rows.append(item)
    return rows


def _any_due(agent_id: str, now: datetime) -> bool:
    return (
        MailboxItem.objects.filter(agent_id=agent_id, status=Status.DEFERRED)
        .filter(Q(deferred_until__isnull=True) | Q(deferred_until__lte=now))
        .filter(lifecycle.not_parked())
        .exists()
    )


def window_left(item: MailboxItem) -> float:
    """Seconds the head should still wait for a follow-up to fold into it (see the
    module's docstring): 0 for an item nothing could fold into any more."""
    window = settings.MARKUS["COALESCE_WINDOW_MS"] / 1000
    if window <= 0 or item.is_user_interaction or is_strict(item) or entity_key(item) is None:
        return 0.0
    if not (descriptor(item.source_type).invokes_llm or item.source_type in COMMENT_TYPES):
        return 0.0
    return max(0.0, window - (timezone.now() - item.queued_at).total_seconds())


def consolidation_due(items: list[MailboxItem]) -> bool:
    """Do two queued items share a task, a requirement or an agent conversation (and may
    fold together)? (``merge.consolidation_key``)"""
    keys: set[tuple[str, str]] = set()
    for item in items:
        key = consolidation_key(item)
        if key is None or is_strict(item):
            continue
        if key in keys:
            return True
        keys.add(key)
    return False


def untidy(view: QueueView) -> bool:
    """Does the head of the queue hold items to expire or to fold together first?
    (No statement: both are read off the items the read returned.)"""
    return any(is_expired(i, view.read_at) for i in view.items) or consolidation_due(view.items)


def tidy(lease: Lease) -> None:
    """The queue tidied before triage, in one fenced transaction (a stale worker must not
    touch the queue): the queued items that waited longer than their type's expiry are
    dropped (``mailbox.expiry``), each with its drop decision, and the items about one
    task, requirement or conversation are folded together
    (``mailbox_consolidate_by_entity``), each with its merge decision."""
    with fenced(lease) as tx:
        for item in expire_stale(lease.agent_id):
            record_expired(tx, item)
        merged: list[MailboxItem] = []
        mailbox.mailbox_consolidate_by_entity(lease.agent_id, merged=merged)
        for other in merged:
            records.record_decision(
                tx,
                item=other,
                decision_type=DecisionType.MERGE,
                reasoning=f"Consolidated into {other.merged_into_id} (same task, requirement or conversation)",
            )


def record_expired(tx: Fence, item: MailboxItem) -> None:
    """The drop decision of an item that expired (as dropped: its reason on it)."""
    records.record_decision(tx, item=item, decision_type=DecisionType.DROP, reasoning=item.drop_reason)
