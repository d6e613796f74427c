"""Control of the loop: wake an agent, stop / pause / resume / start it, the sweep,
periodic items and the beat schedule."""

from __future__ import annotations

import logging
from datetime import datetime

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from agentbus.team_channel import team_channel_sync_agent
from mailbox import services as mailbox
from mailbox.models import MailboxItem
from mailbox.registry import Status
from markus.agents.models import Agent
from markus.core.events import agent_group, send_event_on_commit
from markus.core.signals import swept
from markus.work.liveness import work_liveness_repair

from .lease import abandoned_leases
from .models import AgentAttention

log = logging.getLogger(__name__)
RUN_ATTENTION = "attention.run_attention"


def wake(agent_id: str, *, countdown: float | None = None) -> None:
    """Send run_attention for the agent (now, or after ``countdown`` seconds). The task
    is found by name in the Celery app: the loop's own task module imports this one."""
    run_attention = current_app.tasks[RUN_ATTENTION]
    try:
        if countdown:
            run_attention.apply_async((agent_id,), countdown=countdown)
        else:
            run_attention.delay(agent_id)
    except Exception:  # the broker is down: the sweep will find the work
        log.exception("could not send run_attention for %s", agent_id)


def wake_on_commit(agent_id: str) -> None:
    if settings.MARKUS["WAKE_ON_ENQUEUE"]:
        transaction.on_commit(lambda: wake(agent_id))


def on_item_enqueued(sender: type[MailboxItem], item: MailboxItem, **kwargs: object) -> None:
    if item.status == Status.QUEUED:
        wake_on_commit(item.agent_id)


def _set_status(agent: Agent, status: str) -> None:
    with transaction.atomic():
        Agent.objects.filter(id=agent.id).update(status=status)
        AgentAttention.objects.filter(agent_id=agent.id).update(cancel_requested=status != Agent.RunStatus.RUNNING)
        team_channel_sync_agent(agent.id)  # the UPDATE sends no signal: a running agent is a member
        send_event_on_commit(agent_group(agent.id), "agent:status", {"agentId": agent.id, "status": status})


def agent_pause(agent: Agent) -> None:
    """The in-flight LLM call is cancelled at its next check, the in-flight item goes
    back to the queue (its session kept), deferred items stay deferred."""
    _set_status(agent, Agent.RunStatus.PAUSED)


def agent_stop(agent: Agent) -> None:
    _set_status(agent, Agent.RunStatus.STOPPED)


def agent_resume(agent: Agent) -> None:
    _set_status(agent, Agent.RunStatus.RUNNING)
    transaction.on_commit(lambda: wake(agent.id))


def agent_start(agent: Agent) -> None:
    """Start-up: the loop recovers stale items when it takes the lease."""
    agent_resume(agent)


def agents_to_kick(now: datetime) -> list[str]:
    """The running agents without a live lease that have due work (an item queued, one
    processing, a deferred one come due, none of them parked) or an abandoned lease, in
    one statement. Each running agent's items are probed through an index, one
    ``SELECT … LIMIT 1`` per kind of due work that stops at the first match: the cost
    follows the running agents, never the items (a ``DISTINCT agent_id`` over every open
    item took 209 ms at 100,000 queued on SQLite).

    Probes, not ``EXISTS``: PostgreSQL may run an ``EXISTS`` as a hashed subplan, one
    scan of every queued item hashed by agent (it did, 245 ms at 100,000: the JSON
    ``marks`` filter makes it guess a handful of rows), where a correlated ``LIMIT 1``
    stays a seek per agent; one probe a status, as ``status IN (…)`` priced a sequential
    scan and crossed the JIT threshold."""
    mine = MailboxItem.objects.filter(agent_id=OuterRef("pk")).order_by()

    def probe(rows: QuerySet[MailboxItem]) -> Subquery:
        return Subquery(rows.values("pk")[:1])

    # Only a deferred item is ever parked (``lifecycle.park`` defers it, ``unpark`` clears
    # the mark as it re-queues it): the queued and processing probes need no JSON filter,
    # whose guessed selectivity is what steered PostgreSQL off the index.
    came_due = (Q(deferred_until__isnull=True) | Q(deferred_until__lte=now)) & mailbox.not_parked()
    live = AgentAttention.objects.filter(lease_expires_at__gt=now).exclude(lease_owner="").values("agent_id")
    abandoned = abandoned_leases(now).values("agent_id")
    return list(
        Agent.objects.running()
        .alias(
            queued=probe(mine.filter(status=Status.QUEUED)),
            processing=probe(mine.filter(status=Status.PROCESSING)),
            due=probe(mine.filter(came_due, status=Status.DEFERRED)),
        )
        .filter(Q(queued__isnull=False) | Q(processing__isnull=False) | Q(due__isnull=False) | Q(id__in=abandoned))
        .exclude(id__in=live)
        .order_by()
        .values_list("id", flat=True)
    )


def sweep() -> int:
    """The backstop, every few seconds from beat:

    1. Liveness repair: every task that waits gets its waker back (markus.work.liveness).
    2. Kick running agents that have due work and no live lease (a lost wake-up, an
       expired lease after a crash, a deferred item that came due), and those whose
       lease ran out without a release and whose state is not idle (a worker died
       deliberating, and its items were handled or cancelled meanwhile): the run that
       takes the lease closes what the dead one left open and lets go (idle).
    3. The other apps' backstops (the AgentBus outbox relay).
    Returns agents kicked."""
    try:
        work_liveness_repair()
    except Exception:
        log.exception("liveness repair failed")
    kicked = 0
    for agent_id in agents_to_kick(timezone.now()):
        wake(agent_id)
        kicked += 1
    # The backstops (the loop's own, the AgentBus outbox relay) hear ``swept``.
    for receiver, failure in swept.send_robust(sender=None):
        if isinstance(failure, Exception):
            log.error("sweep receiver %s failed", receiver, exc_info=failure)
    return kicked


def sync_beat_schedule() -> dict[str, list[str]]:
    """The beat entries declared in code (``attention.schedules``), created where
    missing; an entry an operator changed is left as it is. ``manage.py up`` calls it;
    ``post_migrate`` does too, so a standalone ``celery beat`` has them."""
    from .schedules import ensure_beat_schedule

    return ensure_beat_schedule()
