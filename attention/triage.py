"""Triage before processing (seed section 21), tiers 0 and 1.

1. Tier 0: the head is a user interaction (they always go first), or no queued item
   shares the head's priority (priorities clearly separate), or the brain cannot
   triage: process the head.
2. Tier 1: items of equal priority compete; the brain sees them (with their age) and
   answers which to process now, which to defer and which to drop as redundant.
3. The answer is checked before it is applied: only candidates count, the chosen item
   is never deferred or dropped, and neither is a user interaction (a human's chat or
   comment) or a strict item (an execution trigger, a review request: a task waits).
   Nothing is claimed while the brain thinks: the checked answer is applied in the
   transaction that claims the chosen item (``apply_plan``).
4. ``agent:triage`` announces the result; the reasoning lands in working memory under
   ``triage-decision``; deferred and dropped items get their decision records.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from mailbox import services as mailbox
from mailbox.merge import is_strict
from mailbox.models import MailboxItem
from mailbox.registry import Status, descriptor
from markus.agents.models import WorkingMemory
from markus.core.events import agent_group, send_event_on_commit
from markus.llm.base import CallContext, get_provider

from . import records
from .lease import Lease, fenced
from .models import DecisionType
from .scenarios import item_brief

log = logging.getLogger(__name__)
MAX_CANDIDATES = 10
TRIAGE_MEMORY_KEY = "triage-decision"


def candidate_brief(item: MailboxItem) -> dict[str, Any]:
    age = (timezone.now() - item.queued_at).total_seconds()
    return {
        **item_brief(item),
        "queuedAt": item.queued_at.isoformat(),
        "ageSeconds": round(age, 1),
        "periodic": descriptor(item.source_type).periodic,
    }


@dataclass
class Plan:
    """Tier 1's answer, checked: the item to process now, and the candidates to drop
    and to defer (ids), applied in the transaction that claims the chosen item;
    ``batch``: ids of other queued items processed together with the chosen one, in
    one LLM session (issue 15: claimed with it, re-queued with it if interrupted)."""

    chosen: MailboxItem
    candidates: list[MailboxItem]
    batch: list[str] = field(default_factory=list)
    drop: list[str] = field(default_factory=list)
    defer: list[str] = field(default_factory=list)
    reasoning: str = ""


def triage(lease: Lease, head: MailboxItem, queue: list[MailboxItem], agent_name: str) -> Plan | None:
    """Tier 0 (None: process the head) or tier 1 (the brain's checked answer). ``queue``:
    the queued items in dequeue order, the head first, none claimed yet; the provider
    is asked outside any transaction."""
    if head.is_user_interaction or not settings.MARKUS["TRIAGE"]:
        return None
    rivals = [q for q in queue if q.id != head.id and q.priority == head.priority][: MAX_CANDIDATES - 1]
    if not rivals:
        return None
    provider = get_provider()
    if not provider.triages:
        return None
    candidates = [head, *rivals]
    try:
        answer = provider.triage(
            candidates=[candidate_brief(c) for c in candidates],
            context=CallContext(scenario="triage", agent_name=agent_name),
        )
    except Exception:
        log.exception("triage failed for %s; processing the head", lease.agent_id)
        return None
    return _plan(head, candidates, answer if isinstance(answer, dict) else {})


def _ids(answer: dict, key: str) -> list[str]:
    value = answer.get(key) or []
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _plan(head: MailboxItem, candidates: list[MailboxItem], answer: dict) -> Plan:
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
    return Plan(chosen=chosen, candidates=candidates, drop=drop, defer=defer, reasoning=reasoning)


def apply_plan(lease: Lease, plan: Plan, *, remember: Callable[[str, str], None] | None = None) -> None:
    """Drop and defer what tier 1 said (only items still queued), keep its reasoning in
    working memory, announce ``agent:triage``. Runs in the fenced transaction that
    claims the chosen item; ``remember``: told of the working-memory write."""
    by_id = {c.id: c for c in plan.candidates}
    until = timezone.now() + timedelta(seconds=float(settings.MARKUS["TRIAGE_DEFER_SECONDS"]))
    with fenced(lease):
        for item_id in plan.drop:
            if mailbox.mailbox_drop(item_id, reason=f"triage: {plan.reasoning}"[:300], from_statuses=[Status.QUEUED]):
                _record(lease, by_id[item_id], DecisionType.DROP, plan.reasoning)
        for item_id in plan.defer:
            if mailbox.mailbox_defer(item_id, until=until, from_statuses=[Status.QUEUED]):
                _record(lease, by_id[item_id], DecisionType.DEFER, plan.reasoning)
        if plan.reasoning:
            now = timezone.now()
            memory = WorkingMemory.objects.filter(agent_id=lease.agent_id, key=TRIAGE_MEMORY_KEY)
            if not memory.update(content=plan.reasoning, updated_at=now):
                WorkingMemory.objects.create(
                    agent_id=lease.agent_id, key=TRIAGE_MEMORY_KEY, content=plan.reasoning, updated_at=now
                )
            if remember is not None:
                remember(TRIAGE_MEMORY_KEY, plan.reasoning)
        send_event_on_commit(
            agent_group(lease.agent_id),
            "agent:triage",
            {
                "agentId": lease.agent_id,
                "tier": 1,
                "candidates": [c.id for c in plan.candidates],
                "processItemId": plan.chosen.id,
                "deferItemIds": plan.defer,
                "dropItemIds": plan.drop,
                "reasoning": plan.reasoning,
            },
        )


def _record(lease: Lease, item: MailboxItem, decision: str, reasoning: str) -> None:
    records.record_decision(
        lease, item=item, decision_type=decision, reasoning=f"Triage: {reasoning}", context={"tier": 1}
    )
