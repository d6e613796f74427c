"""Within one priority the loop takes the oldest item first (first in, first out), in
one chat session as across the mailbox: a person's two messages are answered in the
order they were said, and agents' items of one priority run in the order they came.
Upstream's own audit calls its newest-first order a bug candidate; here the queue's
order is ``(priority, queued_at, id)``, ids time-ordered (``markus.core.ids``)."""

from __future__ import annotations

import pytest
from django.conf import settings

from attention import loop
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue
from markus.llm.scripted import Turn

from .helpers import enqueue, picked

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "COALESCE_WINDOW_MS", 0)
    monkeypatch.setitem(settings.MARKUS, "INTERRUPT_JUDGE", False)


def say(agent, alice, text, session_id=None):
    return mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.HUMAN_CHAT,
        payload={"summary": text, "content": text},
        metadata={"senderId": str(alice.id), "senderName": "alice", "senderRole": "user"}
        | ({"sessionId": session_id} if session_id else {}),
    )


def asked(call) -> str:
    return [m for m in call["messages"] if m["role"] == "user"][-1]["content"]


def test_a_persons_two_messages_in_one_session_are_answered_oldest_first(scripted, agent, alice):
    provider = scripted(Turn(text="answer to the first"), Turn(text="answer to the second"))
    first = say(agent, alice, "first: is the deploy done?")
    second = say(agent, alice, "second: and the migration?")
    assert first.status == second.status == "queued"  # a person's chat never merges at enqueue

    loop.run_attention(agent.id)

    assert [asked(c) for c in provider.calls] == ["first: is the deploy done?", "second: and the migration?"]
    done = MailboxItem.objects.filter(id__in=[first.id, second.id]).order_by("completed_at")
    assert [i.id for i in done] == [first.id, second.id]


def test_items_of_one_priority_run_in_the_order_they_came_not_newest_first(scripted, agent, monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "TRIAGE", False)  # the queue's own order, no one choosing
    scripted(default=Turn(text="noted"))
    for n, minutes in enumerate((30, 20, 10)):
        enqueue(agent, T.SYSTEM_EVENT, f"notice {n}", priority=2, minutes_ago=minutes)
    enqueue(agent, T.SYSTEM_EVENT, "urgent notice", priority=1)  # a higher priority still goes first

    loop.run_attention(agent.id)

    assert picked(agent) == ["urgent notice", "notice 0", "notice 1", "notice 2"]


def test_the_offline_brains_deliberation_also_takes_the_longest_waiting(agent, monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "LLM_PROVIDER", "offline")
    for n, minutes in enumerate((5, 15)):
        enqueue(agent, T.A2A_MESSAGE, f"question {n}", priority=2, minutes_ago=minutes)

    loop.run_attention(agent.id, budget=1)

    assert picked(agent)[0] == "question 1"  # queued 15 min ago, before question 0
