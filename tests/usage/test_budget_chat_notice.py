"""A person whose chat waits behind a used-up budget is told so in the chat, once (a
person who asked always gets an answer): the agent takes no LLM work, so without it the
message would sit in the queue in silence. Their message still waits and is answered
once the budget allows."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import time_machine

from attention import loop
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue
from markus.agents.models import ChatMessage
from markus.agents.services import main_session
from markus.usage.services import budget_set

from .conftest import PER_CALL, llm_requests, notices, statuses

pytestmark = pytest.mark.django_db(transaction=True)
T0 = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)


def ask(agent, alice, text: str):
    return mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.HUMAN_CHAT,
        priority=0,
        payload={"summary": text, "content": text},
        metadata={"senderId": alice.pk, "sessionId": main_session(agent.id).id},
    )


def notices_in_chat(agent) -> list[ChatMessage]:
    return list(ChatMessage.objects.filter(session__agent=agent, metadata__budgetNotice=True).order_by("id"))


def test_a_chat_waiting_behind_a_used_up_budget_is_told_why_once_and_still_answered_later(agent, alice, stub):
    with time_machine.travel(T0, tick=True):
        budget_set(agent=agent, limits={"dailyTokens": PER_CALL})
        notices(agent, 1)
        loop.run_attention(agent.id, budget=10)  # spends the day's tokens
        item = ask(agent, alice, "are you there?")

        result = loop.run_attention(agent.id, budget=10)

        assert result.status == "blocked"
        [told] = notices_in_chat(agent)
        assert told.role == "assistant"
        assert "budget" in told.content.lower() and "waits" in told.content.lower()
        assert told.metadata["mailboxItemIds"] == [item.id]
        assert statuses(agent)["queued"] == 1  # the message waits: nothing is lost

        loop.run_attention(agent.id, budget=10)  # the sweep's next kick

        assert len(notices_in_chat(agent)) == 1  # told once, not at every kick
        calls = llm_requests(stub)
        budget_set(agent=agent, limits={"dailyTokens": 100_000})

        loop.run_attention(agent.id, budget=10)

        assert llm_requests(stub) == calls + 1
        assert statuses(agent).get("queued", 0) == 0
