"""The offline brain reaches the rhythm and memory tools from a person's chat, so the
demo (``make run``) can show them: "remember that …" saves an observation, "remind me
to … in 2h" sets a reminder, "check in every 2 hours" sets the heartbeat interval; the
reply says what it did, or what went wrong."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from attention import loop
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue
from markus.agents.models import Agent, ChatMessage
from markus.memory import search
from markus.memory.models import Observation

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.pg]
T0 = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)  # 12:00 in Tokyo


def chat(agent, alice, text: str, minutes: int = 0) -> str:
    mailbox_enqueue(
        agent_id=agent.id,
        source_type=MailboxType.HUMAN_CHAT,
        payload={"summary": text[:40], "content": text},
        metadata={"senderRole": "user", "senderId": str(alice.pk), "senderName": "alice"},
    )
    with time_machine.travel(T0 + timedelta(minutes=minutes), tick=False):
        loop.run_attention(agent.id)
    return ChatMessage.objects.filter(session__agent=agent, role="assistant").order_by("-created_at").first().content


def test_remember_remind_and_check_in_from_a_chat(tokyo, alice, offline):
    said = chat(tokyo, alice, "Please remember that Bob prefers the release notes in French.")
    assert "saved that to my long-term memory" in said
    [obs] = Observation.objects.filter(agent=tokyo)
    assert obs.content == "Bob prefers the release notes in French."
    assert [h.id for h in search.search_observations(tokyo.id, "release notes French")] == [obs.id]

    said = chat(tokyo, alice, "remind me to review the Q4 plan in 2h", minutes=1)
    [item] = MailboxItem.objects.filter(agent=tokyo, source_type=MailboxType.REMINDER)
    assert item.status == Status.DEFERRED and item.deferred_until == T0 + timedelta(hours=2, minutes=1)
    assert "review the Q4 plan" in item.content and "I set a reminder for 2026-12-01 14:01 (+09:00)" in said

    said = chat(tokyo, alice, "Things are calm: check in every 2 hours.", minutes=2)
    assert Agent.objects.get(id=tokyo.id).heartbeat_interval_minutes == 120
    assert "I will check in every 120 minutes." in said


def test_a_reminder_in_the_past_is_answered_not_set(tokyo, alice, offline):
    said = chat(tokyo, alice, "remind me to call Bob at 2026-11-30T09:00")  # yesterday
    assert not MailboxItem.objects.filter(agent=tokyo, source_type=MailboxType.REMINDER).exists()
    assert "I could not do that (schedule_reminder)" in said
