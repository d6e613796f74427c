"""Whoever waits for an item the loop gives up on is answered: a person's chat after its
recovery attempts or its failed retries, an agent's message that waits for a reply; the
answer says why and what was already done, and the activity lists the calls that took
effect."""

from __future__ import annotations

import pytest

from agentbus.models import Chunk, Stream
from agentbus.services import send_agent_message
from attention import journal
from attention.models import ActivityLogType, AgentActivityLog
from mailbox.lifecycle import MAX_RECOVERY_ATTEMPTS
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.registry import Status
from mailbox.services import mailbox_enqueue
from markus.agents.models import ChatMessage
from markus.agents.services import agent_create
from markus.memory.models import Observation

from .crashes import MARKER, Crash, run_until_settled

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True)]


def chat(agent_id: str, text: str = "save a note") -> MailboxItem:
    return mailbox_enqueue(
        agent_id=agent_id,
        source_type=T.HUMAN_CHAT,
        payload={"summary": text, "content": text},
        metadata={"senderId": "1", "senderRole": "user"},
    )


def die_after_every_call(monkeypatch) -> list[int]:
    """Every call's transaction commits, then the worker dies."""
    real = journal._call
    deaths: list[int] = []

    def dying(*args, **kwargs):
        real(*args, **kwargs)
        deaths.append(1)
        raise Crash

    monkeypatch.setattr(journal, "_call", dying)
    return deaths


def test_a_chat_given_up_after_its_recovery_attempts_is_answered_with_why_and_what_was_done(agent, brain, monkeypatch):
    def die_once_it_saved(messages):  # the worker dies again on the turn after the call
        return any(m.get("role") == "tool" for m in messages)

    brain(crash_when=die_once_it_saved)
    brain_crashes = []
    real = journal._call

    def dying(*args, **kwargs):
        result = real(*args, **kwargs)
        if not brain_crashes:
            brain_crashes.append(1)
            raise Crash
        return result

    monkeypatch.setattr(journal, "_call", dying)
    item = chat(agent.id)
    run_until_settled(agent.id)
    assert MailboxItem.objects.get(id=item.id).status == Status.DROPPED
    assert Observation.objects.filter(content__icontains=MARKER).count() == 1
    replies = list(ChatMessage.objects.filter(role="assistant", session__agent_id=agent.id))
    assert len(replies) == 1
    reply = replies[0]
    assert reply.metadata["mailboxItemIds"] == [item.id] and reply.metadata["failed"] is True
    assert "could not finish" in reply.content
    assert f"stopped {MAX_RECOVERY_ATTEMPTS} time(s)" in reply.content
    assert "memory_save" in reply.content
    lost = AgentActivityLog.objects.filter(activity__mailbox_item_id=item.id, type=ActivityLogType.ERROR)
    assert any("calls that took effect: memory_save" in line.content for line in lost)


def test_a_chat_whose_attempts_all_fail_is_answered_that_it_failed(agent, brain, monkeypatch):
    b = brain()

    def broken(**kw):
        raise RuntimeError("the model is down")

    monkeypatch.setattr(b, "complete", broken)
    item = chat(agent.id)
    run_until_settled(agent.id)
    assert MailboxItem.objects.get(id=item.id).status == Status.COMPLETED
    reply = ChatMessage.objects.get(role="assistant", session__agent_id=agent.id)
    assert reply.metadata["failed"] is True and reply.metadata["mailboxItemIds"] == [item.id]
    assert "3 attempts failed (error: RuntimeError: the model is down)" in reply.content


def test_an_agent_message_dropped_at_a_crash_is_answered_on_the_bus(agent, alice, team, brain, monkeypatch):
    bea, _ = agent_create(name="Bea", role="engineer", owner=alice, team=team, agent_id="bea")
    brain()
    die_after_every_call(monkeypatch)
    asked = send_agent_message(sender=bea, recipient=agent, text="can you note this?", topic=None, actor="agent:bea")
    run_until_settled(agent.id)
    item = MailboxItem.objects.get(agent_id=agent.id, source_type=T.A2A_MESSAGE)
    assert item.status == Status.DROPPED
    answer = Stream.objects.get(reply_to=asked.stream_id, sender_id=agent.id)
    texts = list(Chunk.objects.filter(stream=answer).values_list("payload", flat=True))
    assert len(texts) == 1 and "could not finish" in texts[0]["text"] and "memory_save" in texts[0]["text"]
