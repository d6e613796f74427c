"""Triage before processing (seed section 21), tiers 0 and 1.

1. Tier 0: the head is a user interaction (they always go first), or no queued item
   shares the head's priority (priorities clearly separate), or the brain cannot
   triage: process the head.
2. Tier 1: items of equal priority compete; the brain sees them (with their age) and
   answers which to process now, which to defer and which to drop as redundant.
3. The answer is checked before it is applied: only candidates count, the chosen item
   is never deferred or dropped, and neither is a user interaction (a human's chat or
   comment) or a strict item (an execution trigger, a review request: a task waits).
   The head is put back if another item goes first.
4. ``agent:triage`` announces the result; the reasoning lands in working memory under
   ``triage-decision``; deferred and dropped items get their decision records.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from mailbox import services as mailbox
from mailbox.merge import is_strict
from mailbox.models import MailboxItem
from mailbox.registry import Status, descriptor
from markus.agents.models import Agent, WorkingMemory
from markus.core.events import agent_group, send_event_on_commit
from markus.llm.base import CallContext, get_provider

from . import records
from .lease import Lease, fenced
from .models import DecisionType
from .scenarios import item_brief

log = logging.getLogger(__name__)
MAX_CANDIDATES = 10


def candidate_brief(item: MailboxItem) -> dict[str, Any]:
    age = (timezone.now() - item.queued_at).total_seconds()
    return {
        **item_brief(item),
        "queuedAt": item.queued_at.isoformat(),
        "ageSeconds": round(age, 1),
        "periodic": descriptor(item.source_type).periodic,
    }


def triage(lease: Lease, head: MailboxItem) -> MailboxItem:
    """Return the item to process now (claimed): the head, or what tier 1 chose."""
    if head.is_user_interaction or not settings.MARKUS["TRIAGE"]:
        return head
    rivals = list(mailbox.queued(lease.agent_id).filter(priority=head.priority)[: MAX_CANDIDATES - 1])
    provider = get_provider()
    if not rivals or not provider.triages:
        return head
    candidates = [head, *rivals]
    agent = Agent.objects.get(id=lease.agent_id)
    try:
        answer = provider.triage(
            candidates=[candidate_brief(c) for c in candidates],
            context=CallContext(scenario="triage", agent_name=agent.name),
        )
    except Exception:
        log.exception("triage failed for %s; processing the head", lease.agent_id)
        return head
    return _apply(lease, head, candidates, answer if isinstance(answer, dict) else {})


def _ids(answer: dict, key: str) -> list[str]:
    value = answer.get(key) or []
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _apply(lease: Lease, head: MailboxItem, candidates: list[MailboxItem], answer: dict) -> MailboxItem:
    by_id = {c.id: c for c in candidates}
    pid = answer.get("processItemId")
    chosen = (by_id.get(pid) if isinstance(pid, str) else None) or head
    # A human's item, and a strict one a task waits for, are never deferred or dropped.
    untouchable = {chosen.id} | {c.id for c in candidates if c.is_user_interaction or is_strict(c)}
    drop = [i for i in dict.fromkeys(_ids(answer, "dropItemIds")) if i in by_id and i not in untouchable]
    defer = [
        i for i in dict.fromkeys(_ids(answer, "deferItemIds")) if i in by_id and i not in untouchable and i not in drop
    ]
    reasoning = str(answer.get("reasoning") or "")[:2000]
    until = timezone.now() + timedelta(seconds=float(settings.MARKUS["TRIAGE_DEFER_SECONDS"]))
    with fenced(lease):
        if chosen.id != head.id:
            mailbox.mailbox_put_back(head.id, epoch=lease.epoch)
        # From here on the head, unless chosen, is a queued candidate like the others.
        for item_id in drop:
            if mailbox.mailbox_drop(item_id, reason=f"triage: {reasoning}"[:300], from_statuses=[Status.QUEUED]):
                _record(lease, by_id[item_id], DecisionType.DROP, reasoning)
        for item_id in defer:
            if mailbox.mailbox_defer(item_id, until=until, from_statuses=[Status.QUEUED]):
                _record(lease, by_id[item_id], DecisionType.DEFER, reasoning)
        if reasoning:
            WorkingMemory.objects.update_or_create(
                agent_id=lease.agent_id,
                key="triage-decision",
                defaults={"content": reasoning, "updated_at": timezone.now()},
            )
        send_event_on_commit(
            agent_group(lease.agent_id),
            "agent:triage",
            {
                "agentId": lease.agent_id,
                "tier": 1,
                "candidates": [c.id for c in candidates],
                "processItemId": chosen.id,
                "deferItemIds": defer,
                "dropItemIds": drop,
                "reasoning": reasoning,
            },
        )
    if chosen.id == head.id:
        return head
    claimed = mailbox.mailbox_claim(chosen.id, epoch=lease.epoch, fence=lease.fence())
    if claimed is not None:
        return claimed
    # The chosen item went away meanwhile: fall back to the head of the queue.
    fallback = mailbox.mailbox_claim_next(agent_id=lease.agent_id, epoch=lease.epoch, fence=lease.fence())
    return fallback or head


def _record(lease: Lease, item: MailboxItem, decision: str, reasoning: str) -> None:
    records.record_decision(
        lease, item=item, decision_type=decision, reasoning=f"Triage: {reasoning}", context={"tier": 1}
    )
