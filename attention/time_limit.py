"""Every item's processing has a time limit (``MARKUS_ITEM_MAX_SECONDS``, 600: the seed's
10-minute processing backstop). Without it a live worker could keep one item for its
twelve turns of up to two minutes each, and a holder frozen while its lease keeper kept
the lease alive could keep it for ever.

Two places hold it:

- **The loop**, at its safe point before each turn (where it also looks for a stop):
  an attempt that began more than the limit ago raises ``TimeLimitReached``, a
  ``CeilingReached``, so the item ends as at its ceiling of calls: failed, once, the
  person who asked told why, not tried again (``attention.settle``).
- **The sweep** (``attention.loop.end_overdue``, a receiver of ``swept``), for a holder
  that does not come back to a safe point: an item focused for longer than the limit and
  a lease's length more, under a lease still alive, is taken from its holder (the lease's
  epoch moves on: the holder, should it wake, writes nothing) and ended by the loop's
  recovery, as a dead holder's items are: dropped with the reason (``drop_overdue``),
  its activity closed, and whoever waits for it told why; then the lease is let go and
  the agent woken for the rest of its queue.

The clock is the attempt's: from the claim that began it (a resumed item, after a
preempt, a pause or an approval, starts a new one). A wait for an approval or for a
colleague's reply ends the run, so it is not counted.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import NamedTuple

from django.conf import settings
from django.utils import timezone

from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import Status

from . import batch, records
from .focus import Focus
from .lease import Fence, lease_seconds
from .model_call import CeilingReached
from .models import AgentAttention, AttentionState, DecisionType

log = logging.getLogger(__name__)

SETTING = "MARKUS_ITEM_MAX_SECONDS"


class TimeLimitReached(CeilingReached):
    """The item's attempt ran past ``MARKUS_ITEM_MAX_SECONDS``: it ends failed."""


def limit_seconds() -> float | None:
    """The limit in seconds; None (or 0 in the settings): no limit."""
    value = float(settings.MARKUS.get("ITEM_MAX_SECONDS") or 0)
    return value if value > 0 else None


def grace_seconds() -> float:
    """How much longer than the limit the sweep leaves a holder to reach its next safe
    point: a lease's length (what a dead holder's item waits to be recovered)."""
    return lease_seconds()


def reason(limit: float) -> str:
    minutes = limit / 60
    span = f"{minutes:g} min" if limit >= 60 else f"{limit:g} s"
    return f"it ran past its time limit of {span} ({SETTING})"


def check(focus: Focus) -> None:
    """The loop's safe point: raise ``TimeLimitReached`` once the attempt ran past the
    limit (its clock: the activity the attempt began with)."""
    limit = limit_seconds()
    if limit is None or focus.activity is None:
        return
    if (timezone.now() - focus.activity.started_at).total_seconds() > limit:
        raise TimeLimitReached(reason(limit))


# ---------------------------------------------------------------------------- the sweep


def overdue_holders(limit: float, now: datetime | None = None) -> list[tuple[str, int, str]]:
    """The agents whose holder kept its item past the limit and the grace, under a lease
    still alive (an expired lease is recovered by the next run): (agent, the lease's
    epoch, the item) each. The sweep's ``attention.loop.end_overdue`` ends them."""
    now = now or timezone.now()
    return list(
        AgentAttention.objects.filter(
            state=AttentionState.FOCUSED,
            lease_expires_at__gt=now,
            focus_started_at__lt=now - timedelta(seconds=limit + grace_seconds()),
            current_item__status=Status.PROCESSING,
        ).values_list("agent_id", "lease_epoch", "current_item_id")
    )


class Overdue(NamedTuple):
    """An item its holder kept past the limit: the item, the lease epoch it is held
    under, and why it ends."""

    item_id: str
    held_under: int
    why: str


def drop_overdue(tx: Fence, overdue: Overdue) -> MailboxItem | None:
    """In the recovery's fenced transaction: drop the item its holder kept (still
    processing under ``held_under``) with ``why`` and its drop decision, and put the
    members of its batch back in the queue. None: its holder moved on meanwhile."""
    item_id, held_under, why = overdue
    item = MailboxItem.objects.filter(id=item_id, status=Status.PROCESSING, lease_epoch=held_under).first()
    if item is None:
        return None
    lifecycle.drop(item.id, reason=why[:300], epoch=held_under, fenced=True, from_statuses=[Status.PROCESSING])
    members = MailboxItem.objects.filter(
        id__in=batch.members_of(item), status=Status.PROCESSING, lease_epoch=held_under
    ).values_list("id", flat=True)
    for member in list(members):
        lifecycle.requeue(member, epoch=held_under, fenced=True)
    item.refresh_from_db()
    records.record_decision(tx, item=item, decision_type=DecisionType.DROP, reasoning=why)
    log.warning("attention: %s of %s ended by the sweep: %s", item_id, tx.agent_id, why)
    return item
