"""A deferred item that comes due while another item runs is weighed at the next safe
point between turns, as an item that just arrived. The real small model's chat failed an
attempt and waited out its back-off of 2 s; in those 2 s the loop took the agent's own
heartbeat, and the person's chat stayed deferred, past its time, for as long as the
heartbeat ran (up to ``MARKUS_ITEM_MAX_SECONDS``), because only the loop's read between
items brought a deferred item back."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from attention import loop
from attention.models import AgentDecision
from attention.queue_read import QUEUE_READ_LIMIT
from attention.scenarios import CHAT, CHECK_IN
from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.registry import Status
from mailbox.services import mailbox_enqueue
from markus.llm.scripted import Turn

pytestmark = pytest.mark.django_db(transaction=True)

BACK_OFF_S = 0.3


def decisions(item_id: str) -> list[str]:
    return list(
        AgentDecision.objects.filter(mailbox_item_id=item_id)
        .order_by("created_at", "id")
        .values_list("decision_type", flat=True)
    )


@pytest.fixture
def no_judge(monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "INTERRUPT_JUDGE", False)
    monkeypatch.setitem(settings.MARKUS, "DELIBERATION", False)


def a_chat_waiting_out_its_back_off(agent_id: str) -> MailboxItem:
    chat = mailbox_enqueue(
        agent_id=agent_id,
        source_type=T.HUMAN_CHAT,
        payload={"summary": "last commit", "content": "What changed in the last commit?"},
        metadata={"senderId": "1", "senderRole": "user"},
    )
    until = timezone.now() + timedelta(seconds=BACK_OFF_S)
    assert lifecycle.defer(chat.id, until=until, from_statuses=[Status.QUEUED], marks={"markerRetries": 1})
    return chat


def test_a_persons_chat_come_due_mid_heartbeat_preempts_it_at_the_next_turn(agent, scripted, no_judge):
    chat = a_chat_waiting_out_its_back_off(agent.id)
    # The heartbeat's first turn outlasts the chat's back-off.
    provider = scripted(
        Turn(tool_calls=[("update_working_memory", {"key": "k", "content": "checked"})], delay=BACK_OFF_S * 3),
        Turn(text="The parser now reads tabs."),
        Turn(text="heartbeat done"),
    )
    beat = mailbox_enqueue(agent_id=agent.id, source_type=T.HEARTBEAT, payload={"summary": "check-in", "content": ""})
    loop.run_attention(agent.id)
    # The preempted heartbeat resumes once its resume delay is over (the run that the
    # soonest deferred item's wake-up starts).
    time.sleep(settings.MARKUS["PREEMPT_RESUME_DELAY_S"])
    loop.run_attention(agent.id)
    assert [c["scenario"] for c in provider.calls] == [CHECK_IN, CHAT, CHECK_IN]
    assert decisions(beat.id) == ["pick", "preempt", "resume"]
    assert decisions(chat.id) == ["pick"]
    chat.refresh_from_db()
    beat.refresh_from_db()
    assert (chat.status, beat.status) == (Status.COMPLETED, Status.COMPLETED)


def test_an_item_deferred_until_later_is_left_alone_at_the_turns_of_another(agent, scripted, no_judge):
    chat = a_chat_waiting_out_its_back_off(agent.id)
    MailboxItem.objects.filter(id=chat.id).update(deferred_until=timezone.now() + timedelta(hours=1))
    provider = scripted(
        Turn(tool_calls=[("update_working_memory", {"key": "k", "content": "checked"})]),
        Turn(text="heartbeat done"),
    )
    beat = mailbox_enqueue(agent_id=agent.id, source_type=T.HEARTBEAT, payload={"summary": "check-in", "content": ""})
    loop.run_attention(agent.id)
    assert [c["scenario"] for c in provider.calls] == [CHECK_IN, CHECK_IN]
    assert decisions(beat.id) == ["pick"]
    chat.refresh_from_db()
    assert chat.status == Status.DEFERRED


def test_past_a_queue_the_focus_did_not_read_whole_the_turns_read_only_what_came_since(
    agent, scripted, no_judge, monkeypatch
):
    """A queue longer than the loop's read: each yield point reads what was queued since
    the focus's read, and the deferred items come due, not the whole queue again (10,000
    queued items were read at every turn: 320 ms a read on PostgreSQL, 2 ms now)."""
    monkeypatch.setitem(settings.MARKUS, "TRIAGE", False)
    backlog = [
        mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": f"e{i}", "content": "x"})
        for i in range(QUEUE_READ_LIMIT * 3)
    ]
    since = timezone.now()
    assert list(lifecycle.queued_or_come_due(agent.id, more_urgent_than=2, since=since)) == []
    chat = a_chat_waiting_out_its_back_off(agent.id)
    later = mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "new", "content": "x"})
    time.sleep(BACK_OFF_S)
    read = lifecycle.queued_or_come_due(agent.id, more_urgent_than=2, since=since)
    assert [i.id for i in read] == [chat.id, later.id]
    # Through the loop: the chat, come due during the first event's turn, preempts it.
    provider = scripted(
        Turn(tool_calls=[("update_working_memory", {"key": "k", "content": "x"})], delay=BACK_OFF_S * 3),
        Turn(text="The parser now reads tabs."),
        default=Turn(text="done"),
    )
    MailboxItem.objects.filter(id=chat.id).update(deferred_until=timezone.now() + timedelta(seconds=BACK_OFF_S))
    loop.run_attention(agent.id, budget=2)
    assert decisions(backlog[0].id)[:2] == ["pick", "preempt"]
    assert decisions(chat.id) == ["pick"] and provider.calls[1]["scenario"] == CHAT
