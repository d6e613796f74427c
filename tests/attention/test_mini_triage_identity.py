"""The mini triage (the fallback when deliberation is off) asks as the agent itself,
with its role (seed section 21, "Mini Triage Loop": "Triage LLM uses the agent's name
and role in its system prompt"): the same identity line as every other prompt of the
agent. Through the real openai SDK against the local stub server."""

from __future__ import annotations

import functools
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from attention import loop
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue
from markus.agents.models import Agent

from ..llm.stub_openai import StubOpenAI

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def openai_brain(model_server):
    return functools.partial(model_server, DELIBERATION=False, INTERRUPT_JUDGE=False)


def two_notices(agent):
    items = []
    for n, summary in enumerate(("old notice", "new notice")):
        item = mailbox_enqueue(
            agent_id=agent.id, source_type=T.SYSTEM_EVENT, priority=2, payload={"summary": summary, "content": summary}
        )
        MailboxItem.objects.filter(id=item.id).update(queued_at=timezone.now() - timedelta(minutes=5 - n))
        items.append(item)
    return items


def triage_system_prompt(agent, use_brain) -> str:
    """The system prompt of the mini triage's first request."""
    old, _ = two_notices(agent)
    answer = json.dumps({"processItemId": old.id, "reasoning": "oldest first"})
    with StubOpenAI([{"content": answer}, {"content": "handled"}]) as stub:
        use_brain(stub.url)
        loop.run_attention(agent.id, budget=1)
    first = stub.requests[0]["body"]["messages"][0]
    assert first["role"] == "system"
    return first["content"]


def test_the_mini_triage_prompt_names_the_agent_and_its_role(openai_brain, agent):
    system = triage_system_prompt(agent, openai_brain)
    assert system.startswith("You are Ada, engineer.")
    from attention.scenarios import identity

    assert system.startswith(identity(agent))  # the one identity line of every prompt


def test_an_agent_without_a_role_is_named_alone(openai_brain, agent):
    Agent.objects.filter(id=agent.id).update(role="")
    agent.refresh_from_db()
    system = triage_system_prompt(agent, openai_brain)
    assert system.startswith("You are Ada.") and "You are Ada, " not in system
