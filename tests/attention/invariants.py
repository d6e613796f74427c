"""Counting the single-focus invariant from the records the loop leaves behind."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

from attention.models import AgentActivity, AgentDecision
from mailbox.models import MailboxItem


def assert_single_focus(agent_id: str) -> dict:
    """No two items of one agent were processed at once, and no stale write landed:
    1. finished activities never overlap in time;
    2. an activity left open belongs to an epoch that was superseded;
    3. no record of epoch e was written after the first record of a later epoch;
    4. every completed item was picked (and processed) exactly once per attempt."""
    acts = list(AgentActivity.objects.filter(agent_id=agent_id).order_by("started_at", "id"))
    finished = [a for a in acts if a.ended_at is not None]
    for a, b in pairwise(finished):
        assert a.ended_at <= b.started_at, f"overlap: {a.id} ({a.started_at}–{a.ended_at}) and {b.id} ({b.started_at})"
    epochs = sorted(
        {a.lease_epoch for a in acts}
        | set(AgentDecision.objects.filter(agent_id=agent_id).values_list("lease_epoch", flat=True))
    )
    records = [(a.created_at, a.lease_epoch, a.id) for a in acts] + [
        (d.created_at, d.lease_epoch, d.id) for d in AgentDecision.objects.filter(agent_id=agent_id)
    ]
    first_of = {}
    for at, epoch, _ in sorted(records):
        first_of.setdefault(epoch, at)
    for at, epoch, rid in records:
        later = [first_of[e] for e in epochs if e > epoch]
        if later:
            assert at <= min(later), f"stale write {rid} of epoch {epoch} after a later epoch started"
    open_acts = [a for a in acts if a.ended_at is None]
    assert all(a.lease_epoch < max(epochs) for a in open_acts), "an open activity in the current epoch"
    picks = Counter(
        AgentDecision.objects.filter(agent_id=agent_id, decision_type="pick").values_list("mailbox_item_id", flat=True)
    )
    statuses = Counter(MailboxItem.objects.filter(agent_id=agent_id).values_list("status", flat=True))
    return {
        "activities": len(acts),
        "open": len(open_acts),
        "epochs": len(epochs),
        "picks": sum(picks.values()),
        "statuses": dict(statuses),
    }
