"""An agent message that waits for an answer is answered even when the agent's
deliberation drops it or handles it inline (without agent_reply): the sender, or a bus
``request`` waiting on it, gets a reply that says so, instead of waiting for its timeout."""

from __future__ import annotations

import json

import pytest

from agentbus.models import Chunk, Stream
from attention import loop
from attention.toolbox import ToolContext, execute_tool
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue
from markus.agents.services import agent_create
from markus.llm.base import set_provider_override
from markus.llm.scripted import ScriptedProvider, Turn

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def pair(alice, team, settings):
    settings.MARKUS = {**settings.MARKUS, "WAKE_ON_ENQUEUE": False}
    ada, _ = agent_create(name="Ada", agent_id="ada", owner=alice, team=team)
    bea, _ = agent_create(name="Bea", agent_id="bea", owner=alice, team=team)
    yield ada, bea
    set_provider_override(None)


def ask(bea) -> str:
    ok, said = execute_tool(
        ToolContext(agent_id="bea", agent_name="Bea", scenario="a2a"),
        "agent_send_message",
        {"to": "ada", "text": "Is the release branch cut yet?"},
    )
    assert ok, said
    return json.loads(said)["streamId"]


def reply_texts(stream_id: str) -> list[str]:
    replies = Stream.objects.filter(reply_to=stream_id, sender_id="ada")
    assert all(r.closed_at is not None for r in replies)
    return [c.payload["text"] for c in Chunk.objects.filter(stream__in=replies).order_by("sequence")]


@pytest.mark.parametrize("how", ["drop", "inline"])
def test_a_question_the_deliberation_drops_or_answers_inline_gets_a_reply(pair, how):
    ada, bea = pair
    stream_id = ask(bea)
    question = MailboxItem.objects.get(agent=ada, source_type=MailboxType.A2A_MESSAGE)
    # Of the question's priority: a rival to deliberate over (a more urgent head goes at once).
    mailbox_enqueue(
        agent_id="ada",
        source_type=MailboxType.SYSTEM_EVENT,
        priority=question.priority,
        payload={"summary": "build green"},
    )

    def decide(cands):
        other = next(c["id"] for c in cands if c["id"] != question.id)
        choice = (
            {"drop": [{"item_id": question.id, "reason": "Bea asked in the channel already"}]}
            if how == "drop"
            else {"inline_completed_ids": [question.id]}
        )
        return Turn(tool_calls=[("complete_deliberation", {"process_item_id": other, "reasoning": "r", **choice})])

    set_provider_override(ScriptedProvider([Turn(text="noted")], deliberation=[decide]))
    loop.run_attention(ada.id, budget=1)

    question.refresh_from_db()
    assert question.status == (Status.DROPPED if how == "drop" else Status.COMPLETED)
    [text] = reply_texts(stream_id)
    if how == "drop":
        assert "not answered" in text and "Bea asked in the channel already" in text
    else:
        assert "handled" in text
    loop.run_attention(ada.id)  # nothing asks twice
    assert len(reply_texts(stream_id)) == 1
