"""Activities of killed workers (issue 11, item 6a): when a new worker takes over an
agent whose items were left processing by a dead one, the dead worker's open
activities are closed as failed, with a "worker lost" line in their log, instead of
staying open forever and showing as successful."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from attention import records
from attention.lease import fenced, lease_take
from attention.loop import run_attention
from attention.models import ActivityLogType, AgentActivity, AgentAttention
from attention.scenarios import CHAT, SYSTEM_NOTICE
from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.registry import Status
from mailbox.services import mailbox_enqueue
from markus.llm.scripted import Turn


def expire_lease(agent_id: str) -> None:
    AgentAttention.objects.filter(agent_id=agent_id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def died_working_on(agent_id: str, source_type: str, scenario: str, **enqueue):
    """A worker took the lease, claimed the item, opened its activity, then vanished."""
    item = mailbox_enqueue(agent_id=agent_id, source_type=source_type, **enqueue)
    dead = lease_take(agent_id)
    claimed = lifecycle.claim_next(agent_id=agent_id, epoch=dead.epoch)
    assert claimed.id == item.id
    activity = records.start_activity(dead, item=claimed, scenario=scenario)
    with fenced(dead) as tx:
        records.log(tx, activity, ActivityLogType.STATUS, f"started {scenario}")
    expire_lease(agent_id)
    return dead, claimed, activity


@pytest.mark.pg
@pytest.mark.django_db
def test_recovery_closes_the_dead_workers_activity_as_failed(agent, scripted):
    scripted()  # nothing should reach the provider: the item is dropped by recovery
    _, item, activity = died_working_on(
        agent.id, T.SYSTEM_EVENT, SYSTEM_NOTICE, payload={"summary": "job", "content": "x"}
    )
    assert AgentActivity.objects.get(id=activity.id).ended_at is None

    result = run_attention(agent.id)

    assert result.status == "done"
    assert MailboxItem.objects.get(id=item.id).status == Status.DROPPED
    closed = AgentActivity.objects.get(id=activity.id)
    assert closed.ended_at is not None
    assert closed.success is False
    last = closed.logs.order_by("-seq").first()
    assert last.type == ActivityLogType.ERROR and "worker lost" in last.content
    assert [log.seq for log in closed.logs.order_by("seq")] == [1, 2]


@pytest.mark.pg
@pytest.mark.django_db
def test_a_recovered_chat_gets_a_new_activity_and_the_lost_one_stays_failed(agent, scripted):
    scripted(Turn(text="Hello again"))
    dead, item, lost = died_working_on(
        agent.id,
        T.HUMAN_CHAT,
        CHAT,
        payload={"summary": "hi", "content": "hi"},
        metadata={"senderId": "1", "senderRole": "user"},
    )

    run_attention(agent.id)

    assert MailboxItem.objects.get(id=item.id).status == Status.COMPLETED
    activities = {a.id: a for a in AgentActivity.objects.filter(mailbox_item_id=item.id)}
    assert len(activities) == 2
    assert activities[lost.id].ended_at is not None and activities[lost.id].success is False
    assert activities[lost.id].logs.filter(type=ActivityLogType.ERROR, content__contains="worker lost").exists()
    (new,) = (a for a in activities.values() if a.id != lost.id)
    assert new.ended_at is not None and new.success is True and new.lease_epoch > dead.epoch
    assert not new.logs.filter(content__contains="worker lost").exists()
    # It ended when it was last heard of: the agent's activities still never overlap.
    assert lost.started_at <= activities[lost.id].ended_at <= new.started_at


@pytest.mark.pg
@pytest.mark.django_db
def test_a_live_lease_is_not_recovered_and_its_activity_stays_open(agent, scripted):
    scripted()
    item = mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "job", "content": "x"})
    live = lease_take(agent.id)
    claimed = lifecycle.claim_next(agent_id=agent.id, epoch=live.epoch)
    activity = records.start_activity(live, item=claimed, scenario=SYSTEM_NOTICE)
    with fenced(live) as tx:
        records.ensure_stored(tx, activity)

    assert run_attention(agent.id).status == "busy"

    assert MailboxItem.objects.get(id=item.id).status == Status.PROCESSING
    assert AgentActivity.objects.get(id=activity.id).ended_at is None
