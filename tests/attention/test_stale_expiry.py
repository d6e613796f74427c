"""Expiry of stale queued items (upstream drops queued items older than 3 days at
recovery: a heartbeat queued 8 days ago is not worth a call). Each type's expiry is in
the registry (``expires_after``); a person's item, an execution trigger and whatever
else somebody waits for never expire. An expired item is dropped with its reason, at
recovery and when the loop reads the queue, and the loop records a drop decision."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from attention.loop import run_attention
from attention.models import AgentDecision
from mailbox.models import MailboxItem
from mailbox.registry import MAILBOX_TYPE_REGISTRY, Status
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue, mailbox_recover
from markus.llm.scripted import Turn

pytestmark = pytest.mark.django_db
DAYS = timedelta(days=1)
HUMAN = {"senderRole": "user", "senderId": "1", "senderName": "alice"}


def _aged(agent, source_type, age: timedelta, *, metadata=None, **payload) -> MailboxItem:
    item = mailbox_enqueue(
        agent_id=agent.id,
        source_type=source_type,
        payload={"summary": f"{source_type} aged {age}", "content": "x", **payload},
        metadata=metadata,
    )
    MailboxItem.objects.filter(id=item.id).update(queued_at=timezone.now() - age)
    item.refresh_from_db()
    return item


def test_every_type_declares_its_expiry_and_what_somebody_waits_for_has_none():
    for t, d in MAILBOX_TYPE_REGISTRY.items():
        assert d.expires_after is None or d.expires_after >= timedelta(hours=1), t
    for waited in (T.HUMAN_CHAT, T.REVIEW_REQUEST, T.REMINDER, T.MENTION):
        assert MAILBOX_TYPE_REGISTRY[waited].expires_after is None, waited
    assert MAILBOX_TYPE_REGISTRY[T.HEARTBEAT].expires_after is not None
    assert MAILBOX_TYPE_REGISTRY[T.HEARTBEAT].expires_after < 8 * DAYS


@pytest.mark.pg
def test_recovery_drops_a_heartbeat_queued_eight_days_ago_with_its_reason(agent):
    stale = _aged(agent, T.HEARTBEAT, 8 * DAYS)
    report = mailbox_recover(agent.id)
    stale.refresh_from_db()
    assert stale.status == Status.DROPPED
    assert stale.drop_reason.startswith("expired:") and "8 days" in stale.drop_reason
    assert report.expired == [stale.id]


@pytest.mark.pg
def test_recovery_keeps_what_is_younger_than_its_types_expiry(agent):
    fresh = _aged(agent, T.SYSTEM_EVENT, MAILBOX_TYPE_REGISTRY[T.SYSTEM_EVENT].expires_after - timedelta(hours=1))
    assert mailbox_recover(agent.id).expired == []
    fresh.refresh_from_db()
    assert fresh.status == Status.QUEUED


@pytest.mark.pg
def test_a_persons_item_and_an_execution_trigger_never_expire(agent):
    kept = [
        _aged(agent, T.HUMAN_CHAT, 30 * DAYS, metadata=HUMAN),
        _aged(agent, T.TASK_COMMENT, 30 * DAYS, metadata=HUMAN, taskId="tsk_1"),
        _aged(agent, T.TASK_STATUS_UPDATE, 30 * DAYS, taskId="tsk_2", extra={"triggerExecution": True}),
        _aged(agent, T.REVIEW_REQUEST, 30 * DAYS, taskId="tsk_3"),
        _aged(agent, T.REQUIREMENT_UPDATE, 30 * DAYS, requirementId="req_1", extra={"actionRequired": True}),
    ]
    dropped = _aged(agent, T.TASK_STATUS_UPDATE, 30 * DAYS, taskId="tsk_4")  # informational
    assert mailbox_recover(agent.id).expired == [dropped.id]
    assert [MailboxItem.objects.get(id=i.id).status for i in kept] == [Status.QUEUED] * len(kept)


def test_the_loop_drops_a_stale_item_it_reads_and_records_why(agent, alice_client):
    stale = _aged(agent, T.HEARTBEAT, 8 * DAYS)
    result = run_attention(agent.id)
    assert result.status == "done" and result.processed == 0
    stale.refresh_from_db()
    assert stale.status == Status.DROPPED and stale.drop_reason.startswith("expired:")
    decision = AgentDecision.objects.get(mailbox_item=stale)
    assert decision.decision_type == "drop" and "expired" in decision.reasoning
    history = {h["id"]: h for h in alice_client.get(f"/api/agents/{agent.id}/mailbox").json()["history"]}
    shown = history[stale.id]
    assert shown["status"] == Status.DROPPED and shown["dropReason"] == stale.drop_reason
    assert [d["decisionType"] for d in shown["decisions"]] == ["drop"]


def test_the_loop_still_answers_a_persons_chat_that_waited_for_weeks(agent, scripted):
    provider = scripted(Turn(text="Sorry for the wait: hello"))
    chat = _aged(agent, T.HUMAN_CHAT, 21 * DAYS, metadata=HUMAN)
    stale = _aged(agent, T.A2A_MESSAGE, 21 * DAYS)
    run_attention(agent.id)
    assert MailboxItem.objects.get(id=chat.id).status == Status.COMPLETED
    assert MailboxItem.objects.get(id=stale.id).status == Status.DROPPED
    assert len(provider.calls) == 1  # one call, for the person; none for the stale message
