"""Stop / pause mid-item, a failed attempt retried, and recovery after a dead worker."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from attention import services
from attention.lease import lease_take
from attention.models import ActivityLogType, AgentActivity, AgentAttention, AgentDecision
from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue
from markus.llm.scripted import Turn

from .conftest import wait_for


def status(item_id):
    return MailboxItem.objects.get(id=item_id).status


@pytest.mark.pg
def test_pause_cancels_the_call_in_flight_requeues_the_item_and_resume_finishes_it(celery_worker, scripted, agent):
    slow = Turn(text="never returned", delay=30.0)
    provider = scripted(slow, Turn(text="done after resume"))
    later = mailbox_enqueue(agent_id=agent.id, source_type=T.MEMORY_CONSOLIDATION, payload={"summary": "dream"})
    MailboxItem.objects.filter(id=later.id).update(
        status="deferred", deferred_until=timezone.now() + timedelta(hours=1)
    )  # a deferred item must survive the pause
    work = mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "job", "content": "x"})
    assert slow.started.wait(15)
    services.agent_pause(agent)
    wait_for(lambda: status(work.id) == "queued", message="in-flight item re-queued")
    assert status(later.id) == "deferred"
    first = AgentActivity.objects.get(mailbox_item_id=work.id)
    wait_for(lambda: AgentActivity.objects.get(id=first.id).ended_at is not None, message="activity closed")
    assert AgentActivity.objects.get(id=first.id).success is False
    assert MailboxItem.objects.get(id=work.id).attempts == 0  # a pause is not a failed attempt
    agent.refresh_from_db()
    services.agent_resume(agent)
    wait_for(lambda: status(work.id) == "completed", message="resumed item completed")
    assert len(provider.calls) == 2
    assert list(AgentDecision.objects.filter(mailbox_item_id=work.id).values_list("decision_type", flat=True)) == [
        "pick",
        "pause",
        "resume",
    ]


def test_an_empty_answer_is_retried_at_most_twice(celery_worker, scripted, agent):
    provider = scripted(default=Turn(text="   "))
    work = mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "job", "content": "x"})
    wait_for(lambda: status(work.id) == "completed", message="item given up")
    item = MailboxItem.objects.get(id=work.id)
    assert item.marks["markerRetries"] == 2
    assert len(provider.calls) == 3
    acts = list(AgentActivity.objects.filter(mailbox_item_id=work.id))
    assert len(acts) == 3 and not any(a.success for a in acts)
    assert AgentActivity.objects.filter(id=acts[-1].id, logs__type=ActivityLogType.ERROR).exists()


def test_a_plain_final_answer_ends_the_turn_and_a_retry_after_an_empty_one_completes_normally(
    celery_worker, scripted, agent
):
    provider = scripted(Turn(text=""), Turn(text="fine"))
    work = mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "job", "content": "x"})
    wait_for(lambda: status(work.id) == "completed", message="completed")
    acts = list(AgentActivity.objects.filter(mailbox_item_id=work.id).order_by("started_at"))
    assert [a.success for a in acts] == [False, True]
    # The retry opens with why the first attempt failed.
    assert "Attempt 1 failed: an empty answer" in str(provider.calls[1]["messages"])


@pytest.mark.pg
def test_a_worker_that_died_holding_the_lease_is_recovered_by_the_sweep(celery_worker, agent, monkeypatch):
    from django.conf import settings

    monkeypatch.setitem(settings.MARKUS, "WAKE_ON_ENQUEUE", False)
    chat = mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.HUMAN_CHAT,
        payload={"summary": "hi", "content": "hi"},
        metadata={"senderId": "1", "senderRole": "user"},
    )
    other = mailbox_enqueue(agent_id=agent.id, source_type=T.A2A_MESSAGE, payload={"summary": "ping", "content": "p"})
    # The dead worker: took a short lease, claimed both items in turn, then vanished.
    dead = lease_take(agent.id, seconds=0.3)
    assert lifecycle.claim_next(agent_id=agent.id, epoch=dead.epoch).id == chat.id
    MailboxItem.objects.filter(id=other.id).update(status="processing", lease_epoch=dead.epoch)
    monkeypatch.setitem(settings.MARKUS, "WAKE_ON_ENQUEUE", True)
    wait_for(lambda: services.sweep() >= 1, timeout=5, message="sweep finds the expired lease")
    wait_for(lambda: status(chat.id) == "completed", message="human chat re-queued and answered")
    dropped = MailboxItem.objects.get(id=other.id)
    assert dropped.status == "dropped" and "recovery" in dropped.drop_reason
    assert MailboxItem.objects.get(id=chat.id).attempts == 2
    assert AgentAttention.objects.get(agent=agent).lease_epoch > dead.epoch
