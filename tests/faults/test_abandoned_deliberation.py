"""What scenarios 8 and 10 (a worker killed or frozen mid-deliberation) found, pinned
without processes, on both databases: a deliberation claims nothing, so a worker that
dies deliberating leaves no item ``processing``; the run that takes its lease must
still close the open deliberation activity (failed, "worker lost") and leave
``deciding``, and the sweep must wake such an agent even when nothing is queued."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from attention import records, services
from attention.lease import fenced, lease_take
from attention.lease_take import lease_take_for_run
from attention.loop import run_attention
from attention.models import ActivityLogType, AgentActivity, AgentAttention, AttentionState
from mailbox.registry import ActivityType
from markus.agents.services import agent_create

pytestmark = [pytest.mark.pg, pytest.mark.django_db]


def died_deliberating(agent_id: str) -> AgentActivity:
    """A worker took the lease, switched to deciding, opened its deliberation activity
    (on no item), then vanished; its lease ran out."""
    dead = lease_take(agent_id)
    assert dead is not None
    activity = AgentActivity(
        agent_id=agent_id,
        mailbox_item=None,
        type=ActivityType.INTERNAL.value,
        label="Deliberation: 3 item(s) waiting",
        lease_epoch=dead.epoch,
    )
    with fenced(dead, state=AttentionState.DECIDING, focus_started_at=timezone.now()) as tx:
        records.ensure_stored(tx, activity)
        records.log(tx, activity, ActivityLogType.STATUS, "started deliberation")
    AgentAttention.objects.filter(agent_id=agent_id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    return activity


@pytest.fixture
def agent_id() -> str:
    owner = User.objects.create_user("dana", password="pw")
    return agent_create(name="Dana", role="engineer", owner=owner, agent_id="dana")[0].id


def test_the_take_tells_a_run_left_without_letting_go(agent_id):
    died_deliberating(agent_id)
    take = lease_take_for_run(agent_id)
    assert take.lease is not None and take.abandoned and not take.in_flight


def test_a_clean_release_is_not_abandoned(agent_id):
    assert run_attention(agent_id).status == "done"  # took the lease, found nothing, let go
    take = lease_take_for_run(agent_id)
    assert take.lease is not None and not take.abandoned


def test_the_next_run_closes_a_dead_deliberation_and_leaves_deciding(agent_id):
    activity = died_deliberating(agent_id)

    result = run_attention(agent_id)

    assert result.status == "done"
    closed = AgentActivity.objects.get(id=activity.id)
    assert closed.ended_at is not None and closed.success is False
    last = closed.logs.order_by("-seq").first()
    assert last.type == ActivityLogType.ERROR and "worker lost" in last.content and "deliberation" in last.content
    row = AgentAttention.objects.get(agent_id=agent_id)
    assert (row.state, row.lease_owner, row.current_item_id) == (AttentionState.IDLE, "", None)


def test_the_sweep_wakes_an_agent_left_deciding_with_nothing_queued(agent_id, monkeypatch):
    woken: list[str] = []
    monkeypatch.setattr(services, "wake", lambda a, **kw: woken.append(a))
    died_deliberating(agent_id)

    assert services.sweep() == 1
    assert woken == [agent_id]

    run_attention(agent_id)  # what the wake-up runs: it lets go, idle; nothing to kick any more
    woken.clear()
    assert services.sweep() == 0 and woken == []


@pytest.mark.parametrize("status", ["paused", "stopped"])
def test_the_sweep_closes_a_dead_deliberation_of_an_agent_that_is_not_running(agent_id, status, monkeypatch):
    """No run takes the lease of an agent that is not running, so the sweep tidies up
    after its dead worker itself: the deliberation's activity ends failed, the state goes
    back to idle, the lease is let go; nothing is woken, and the next sweep finds nothing."""
    from markus.agents.models import Agent

    woken: list[str] = []
    monkeypatch.setattr(services, "wake", lambda a, **kw: woken.append(a))
    activity = died_deliberating(agent_id)
    Agent.objects.filter(id=agent_id).update(status=status)

    services.sweep()

    closed = AgentActivity.objects.get(id=activity.id)
    assert closed.ended_at is not None and closed.success is False
    assert "worker lost" in closed.logs.order_by("-seq").first().content
    row = AgentAttention.objects.get(agent_id=agent_id)
    assert (row.state, row.lease_owner, row.current_item_id) == (AttentionState.IDLE, "", None)
    assert woken == []
    epoch = row.lease_epoch
    services.sweep()
    assert AgentAttention.objects.get(agent_id=agent_id).lease_epoch == epoch  # nothing left to tidy


def test_the_sweep_leaves_a_live_lease_of_an_agent_that_is_not_running_alone(agent_id):
    """A pause lets the holder stop at its next check: its lease is live, not the sweep's."""
    from markus.agents.models import Agent

    holder = lease_take(agent_id)
    with fenced(holder, state=AttentionState.DECIDING, focus_started_at=timezone.now()):
        pass
    Agent.objects.filter(id=agent_id).update(status="paused")
    services.sweep()
    row = AgentAttention.objects.get(agent_id=agent_id)
    assert (row.lease_owner, row.lease_epoch, row.state) == (holder.owner, holder.epoch, AttentionState.DECIDING)
