"""Reads of the loop's records: an agent's timeline, each mailbox item with the
decisions made about it and the activity that handled it."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet

from mailbox.models import MailboxItem
from mailbox.representation import PLACEHOLDER, private_of, serialize_item
from mailbox.selectors import (
    QUEUE_PAGE,
    depth_fields,
    queue_depth,
    queue_depth_subquery,
    queued_page,
    timeline_queryset,
)
from markus.core.counting import CappedCount, Counted, capped_count
from markus.core.errors import MarkusError

from .models import AgentActivity, AgentDecision, ToolCallRecord, ToolCallState

# What the item serialisation carries that a timeline row leaves out.
_NOT_IN_TIMELINE = frozenset({"agentId", "payload", "metadata", "marks", "attempts"})
# Where ``attach_details`` leaves an item's decisions and activity, as timeline rows.
DETAILS = "timeline_details"
_ACTIVITY_FIELDS = (
    "id",
    "type",
    "label",
    "total_tokens",
    "total_tools",
    "success",
    "outcome",
    "started_at",
    "ended_at",
)
# ``outcome``: "cancelled" or "stopped" for a run that neither completed nor failed, else "".
_ACTIVITY_KEYS = ("id", "type", "label", "totalTokens", "totalTools", "success", "outcome", "startedAt", "endedAt")


def _decision_row(decision_id: str, decision_type: str, reasoning: str, created_at: datetime) -> dict[str, Any]:
    return {"id": decision_id, "decisionType": decision_type, "reasoning": reasoning, "createdAt": created_at}


def _activity_row(values: tuple[Any, ...]) -> dict[str, Any]:
    return dict(zip(_ACTIVITY_KEYS, values, strict=True))


def timeline_entry(item: MailboxItem) -> dict[str, Any]:
    """An item as a timeline row: its decisions and the (latest) activity that handled
    it, from ``attach_details`` when the page was read with it, else from the
    relations (prefetched or not)."""
    details = getattr(item, DETAILS, None)
    if details is None:
        activities = list(item.activities.all())
        last = activities[-1] if activities else None
        details = (
            [_decision_row(d.id, d.decision_type, d.reasoning, d.created_at) for d in item.decisions.all()],
            None if last is None else _activity_row(tuple(getattr(last, f) for f in _ACTIVITY_FIELDS)),
        )
    decisions, activity = details
    return {
        **{k: v for k, v in serialize_item(item).items() if k not in _NOT_IN_TIMELINE},
        "decisions": decisions,
        "activity": activity,
    }


def attach_details(items: list[MailboxItem]) -> None:
    """Every item's decisions and latest activity for ``timeline_entry``, in two
    queries for the whole page, read as values: no model instance per decision or
    activity and no related-manager queryset per item (what a prefetch costs)."""
    ids = [i.id for i in items]
    decisions: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for item_id, decision_id, kind, reasoning, created_at in (
        AgentDecision.objects.filter(mailbox_item_id__in=ids)
        .order_by("created_at", "id")
        .values_list("mailbox_item_id", "id", "decision_type", "reasoning", "created_at")
    ):
        decisions[item_id].append(_decision_row(decision_id, kind, reasoning, created_at))
    activities: dict[str, dict[str, Any]] = {}
    for item_id, *activity in (
        AgentActivity.objects.filter(mailbox_item_id__in=ids)
        .order_by("started_at", "id")
        .values_list("mailbox_item_id", *_ACTIVITY_FIELDS)
    ):
        activities[item_id] = _activity_row(tuple(activity))  # the latest started wins
    for item in items:
        setattr(item, DETAILS, (decisions.get(item.id, []), activities.get(item.id)))


MAX_CURSOR = 64  # the length of an item id (MailboxItem.id)
# The timeline's totalCount stops here ("1,000+"): a count of 10,001 index entries was
# 1.3 ms of a 15 ms first page on SQLite (the goal is 1.2x a one-row page), of 1,001
# 0.15 ms; the history is paged by cursor, not by page number.
TIMELINE_COUNT_CAP = 1000
# The names of the counts ``timeline`` reads with its history page (``timeline_items``'s counts).
_TOTAL, _DEPTH = "timeline_total_counted", "timeline_queue_depth_counted"


def _anchor(agent_id: str, before: str) -> tuple[datetime, str]:
    """Where a ``before`` cursor (an item id of this agent's mailbox) sits in the
    timeline's order: its ``(queued_at, id)``. Bad input is a 400 with a message."""
    if not before or len(before) > MAX_CURSOR or not before.isprintable():
        raise MarkusError(
            f"before must be the id of an item of this timeline (a nextCursor), at most {MAX_CURSOR} chars"
        )
    found = list(MailboxItem.objects.filter(agent_id=agent_id, id=before).values_list("queued_at", "id")[:1])
    if not found:
        raise MarkusError(f"before: no item {before!r} in this agent's timeline")
    return found[0]


def _older_than(rows: QuerySet[MailboxItem], at: datetime, item_id: str, *, inclusive: bool) -> QuerySet[MailboxItem]:
    """The rows after ``(at, item_id)`` in the order ``-queued_at, -id`` (keyset).
    Written as ``queued_at <= at AND (...)`` so both databases seek the index
    ``(agent, -queued_at, -id)`` to ``at`` instead of walking the rows before it."""
    tie = Q(id__lte=item_id) if inclusive else Q(id__lt=item_id)
    return rows.filter(Q(queued_at__lte=at) & (Q(queued_at__lt=at) | tie))


def timeline_items(
    rows: QuerySet[MailboxItem],
    agent_id: str,
    *,
    limit: int,
    offset: int = 0,
    before: str | None = None,
    counts: dict[str, CappedCount] | None = None,
) -> tuple[list[MailboxItem], str | None]:
    """One page of ``rows`` (a ``timeline_queryset`` of ``agent_id``, newest first) with
    details, and the cursor of the next page (None on the last page).

    ``before`` (keyset): the items after that item, whatever the page's depth, in a
    fixed number of index seeks. ``offset`` (kept for compatibility): the position is
    found by skipping ``offset`` index entries (no row is read for them), then the
    page is read like a keyset page from there. ``counts``: bounded counts read in the
    page's own statement (each row carries them as attributes of these names; both
    databases compute an uncorrelated subquery once per statement, not per row)."""
    if before is not None:
        if offset:
            raise MarkusError("before and offset cannot be combined; before alone pages on")
        page = _older_than(rows, *_anchor(agent_id, before), inclusive=False)
    elif offset:
        start = list(rows.values_list("queued_at", "id")[offset : offset + 1])
        if not start:
            return [], None
        page = _older_than(rows, *start[0], inclusive=True)
    else:
        page = rows
    if counts:
        page = page.annotate(**counts)
    items = list(page[: limit + 1])
    more = len(items) > limit
    items = items[:limit]
    attach_details(items)
    return items, items[-1].id if more else None


def timeline(
    agent_id: str,
    *,
    limit: int = 50,
    offset: int = 0,
    before: str | None = None,
    types: list[str] | None = None,
    category: str | None = None,
    statuses: list[str] | None = None,
    queued_limit: int = QUEUE_PAGE,
    queued_after: str | None = None,
) -> dict[str, Any]:
    """The API's timeline page: one page of the queue (``queuedNextCursor``, to pass as
    ``queuedAfter``) with its depth, and one page of the history with the cursor of
    the next (``nextCursor``, to pass as ``before``; null on the last page).

    ``totalCount`` is counted on pages read without ``before`` only (null with it), and
    only up to ``TIMELINE_COUNT_CAP`` (``totalCountCapped``: there are more, "1,000+"):
    counting an agent's whole history cost more than reading any page of it
    (100,000 rows: 70 % of the first page's time on SQLite). ``queueDepth`` likewise
    stops at ``mailbox.selectors.QUEUE_DEPTH_CAP`` (``queueDepthCapped``).

    Both counts are read in the history page's statement (``timeline_items``'s
    ``counts``), not one statement each: a first page costs the statements of a
    one-row timeline's however long the history and the queue (a count of its own
    only when the page has no row to carry it)."""
    rows = timeline_queryset(agent_id, types=types, category=category, statuses=statuses)
    queued, queued_next = queued_page(agent_id, limit=queued_limit, after=queued_after)
    counts: dict[str, CappedCount] = {}
    if before is None:
        counts[_TOTAL] = CappedCount(rows, TIMELINE_COUNT_CAP)
    # A first page that holds the whole queue counts it; only a longer one is counted.
    if queued_next or queued_after:
        counts[_DEPTH] = queue_depth_subquery(agent_id)
    items, next_cursor = timeline_items(rows, agent_id, limit=limit, offset=offset, before=before, counts=counts)
    read = {name: getattr(items[0], name) for name in counts} if items else {}
    if _DEPTH in counts:
        depth = read[_DEPTH] if items else queue_depth(agent_id)
    else:
        depth = len(queued)
    if _TOTAL not in counts:
        total = {"totalCount": None, "totalCountCapped": False}
    elif items:
        total = Counted.of(read[_TOTAL], TIMELINE_COUNT_CAP).fields()
    else:  # no row on this page: none at all, or an offset past the end
        total = capped_count(rows, TIMELINE_COUNT_CAP).fields() if offset else Counted(0, False).fields()
    return {
        "queued": queued,
        **depth_fields(depth),
        "queuedNextCursor": queued_next,
        "history": [timeline_entry(i) for i in items],
        **total,
        "nextCursor": next_cursor,
    }


def day_activity(agent_id: str, start: datetime, end: datetime) -> dict[str, Any]:
    """The agent's finished activities that began in [start, end): counts, outcomes,
    tokens and the list (oldest first, at most 50), times in ``start``'s time zone. The
    daily report's item lists them; ``submit_daily_report`` stores them with the report."""
    rows = AgentActivity.objects.filter(
        agent_id=agent_id, started_at__gte=start, started_at__lt=end, ended_at__isnull=False
    ).order_by("started_at", "id")
    by_type: dict[str, int] = {}
    listed: list[dict[str, Any]] = []
    total = succeeded = tokens = 0
    for a in rows.iterator():
        total += 1
        succeeded += int(a.success)
        tokens += a.total_tokens
        by_type[a.type] = by_type.get(a.type, 0) + 1
        if len(listed) < 50:
            time = a.started_at.astimezone(start.tzinfo).strftime("%H:%M")
            # The report is read by the whole team: a private conversation is named as one.
            label = PLACEHOLDER if a.private_to is not None else a.label
            listed.append({"id": a.id, "type": a.type, "label": label, "success": a.success, "time": time})
    return {
        "total": total,
        "succeeded": succeeded,
        "failed": total - succeeded,
        "tokens": tokens,
        "byType": by_type,
        "activities": listed,
    }


# ------------------------------------------------------------------- waiting calls

WAITING_CALLS = 20


def waiting_calls(agent_id: str, *, limit: int = WAITING_CALLS) -> list[dict[str, Any]]:
    """The tool calls of the agent's parked items that wait for a person's approval
    (``ask`` tools), oldest first: the tool, its arguments, the approval, whose private
    conversation it belongs to (``privateTo``: the reader decides what to show)."""
    rows = (
        ToolCallRecord.objects.filter(
            mailbox_item__agent_id=agent_id,
            mailbox_item__status="deferred",
            state=ToolCallState.AWAITING,
        )
        .select_related("mailbox_item")
        .order_by("started_at", "id")[:limit]
    )
    return [
        {
            "mailboxItemId": r.mailbox_item_id,
            "name": r.name,
            "arguments": r.arguments,
            "approvalId": (r.effects or {}).get("approvalId"),
            "since": r.started_at,
            "privateTo": private_of(r.mailbox_item.marks),
        }
        for r in rows
    ]
