"""Control of the loop: wake an agent, stop / pause / resume / start it, the sweep,
periodic items and the beat schedule."""

from __future__ import annotations

import logging

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from agentbus.team_channel import team_channel_sync_agent
from mailbox import services as mailbox
from mailbox.models import MailboxItem
from mailbox.registry import Status
from markus.agents.models import Agent
from markus.core.events import agent_group, send_event_on_commit
from markus.work.liveness import work_liveness_repair
from markus.core.signals import swept

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
    now = timezone.now()
    due = (
        MailboxItem.objects.filter(
            Q(status=Status.QUEUED)
            | Q(status=Status.PROCESSING)
            | (Q(status=Status.DEFERRED) & (Q(deferred_until__isnull=True) | Q(deferred_until__lte=now)))
        )
        .filter(mailbox.not_parked())
        .values_list("agent_id", flat=True)
        .distinct()
    )
    live = (
        AgentAttention.objects.filter(lease_expires_at__gt=now)
        .exclude(lease_owner="")
        .values_list("agent_id", flat=True)
    )
    abandoned = abandoned_leases(now).values_list("agent_id", flat=True)
    agents = (
        Agent.objects.running()
        .filter(Q(id__in=list(due)) | Q(id__in=list(abandoned)))
        .exclude(id__in=list(live))
        .values_list("id", flat=True)
    )
    kicked = 0
    for agent_id in agents:
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
