"""Every item's processing has a time limit (``MARKUS_ITEM_MAX_SECONDS``, 600: the seed's
10-minute processing backstop). Without it a live worker could keep one item for its
twelve turns of up to two minutes each, and a holder frozen while its lease keeper kept
the lease alive could keep it for ever.

Two places hold it:

- **The loop**, at its safe point before each turn (where it also looks for a stop):
  an attempt that began more than the limit ago raises ``TimeLimitReached``, a
  ``CeilingReached``, so the item ends as at its ceiling of calls: failed, once, the
  person who asked told why, not tried again (``attention.settle``).
- **The sweep** (a receiver of ``swept``), for a holder that does not come back to a
  safe point: an item focused for longer than the limit and ``GRACE_S`` more, under a
  lease still alive, is taken from its holder (the lease's epoch moves on: the holder,
  should it wake, writes nothing), dropped with the reason, its activity closed, and
  whoever waits for it told why; then the lease is let go and the agent woken for the
  rest of its queue.

The clock is the attempt's: from the claim that began it (a resumed item, after a
preempt, a pause or an approval, starts a new one). A wait for an approval or for a
colleague's reply ends the run, so it is not counted.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import Status

from . import batch, records
from .endings import given_up
from .focus import Focus
from .lease import Lease, StaleLease, fenced, lease_release, lease_seconds, lease_take_over
from .model_call import CeilingReached
from .models import AgentAttention, AttentionState, DecisionType
from .services import wake

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


def end_overdue(now: datetime | None = None) -> int:
    """The sweep's hook: end every item whose holder kept it past the limit and the
    grace, under a lease still alive. Returns the items ended."""
    limit = limit_seconds()
    if limit is None:
        return 0
    now = now or timezone.now()
    overdue = AgentAttention.objects.filter(
        state=AttentionState.FOCUSED,
        lease_expires_at__gt=now,  # an expired lease is recovered by the next run
        focus_started_at__lt=now - timedelta(seconds=limit + grace_seconds()),
        current_item__status=Status.PROCESSING,
    ).values_list("agent_id", "lease_epoch", "current_item_id")
    ended = 0
    for agent_id, epoch, item_id in list(overdue):
        lease = lease_take_over(agent_id, epoch=epoch)
        if lease is None:  # its holder let go or moved on meanwhile
            continue
        try:
            ended += _end(lease, item_id, held_under=epoch, why=reason(limit))
        except StaleLease:
            continue
        finally:
            _let_go(lease)
    return ended


def _end(lease: Lease, item_id: str, *, held_under: int, why: str) -> int:
    """Drop the item its holder kept (still processing under ``held_under``), put the
    members of its batch back in the queue, close the activities the holder left open
    and tell whoever waits for the item, in one fenced transaction."""
    with fenced(lease) as tx:
        item = MailboxItem.objects.filter(id=item_id, status=Status.PROCESSING, lease_epoch=held_under).first()
        if item is None:
            return 0
        why = f"stopped: {why}"
        lifecycle.drop(item.id, reason=why[:300], epoch=held_under, fenced=True, from_statuses=[Status.PROCESSING])
        members = [
            m.id
            for m in MailboxItem.objects.filter(
                id__in=batch.members_of(item), status=Status.PROCESSING, lease_epoch=held_under
            )
        ]
        for member in members:
            lifecycle.requeue(member, epoch=held_under, fenced=True)
        item.refresh_from_db()
        records.record_decision(tx, item=item, decision_type=DecisionType.DROP, reasoning=why)
        records.close_lost_activities(tx, requeued=members, dropped=[item.id])
        given_up(tx, item, why)
    log.warning("attention: %s of %s ended by the sweep: %s", item_id, lease.agent_id, why)
    return 1


def _let_go(lease: Lease) -> None:
    """Release the lease taken over (its UPDATE sets the state idle), say so, and wake
    the agent for the rest of its queue."""
    if lease_release(lease):
        records.emit_state(lease.agent_id, AttentionState.IDLE, None, None, depth=None)
    wake(lease.agent_id)
