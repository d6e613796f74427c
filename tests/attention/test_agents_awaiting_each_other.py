"""Two agents awaiting each other cannot deadlock (README, "Ask and keep your place"):
Ada asks Grace and Grace asks Ada at the same time, each with ``await_reply=true``.
Each asking item is parked (deferred, no worker held), so each agent is free to take
up the other's question, answer it, and then resume its own item with the answer. With
a real Celery worker of two threads, both questions are answered and both asking items
complete, within a bounded wait."""

from __future__ import annotations

import json
from typing import Any

import pytest

from attention.models import AgentAttention
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue
from markus.agents.services import agent_create
from markus.llm.base import CONTEXT_MARK, CallContext, LLMResponse, set_provider_override
from markus.llm.scripted import DELIBERATION, TRIAGE, ScriptedProvider, Turn

from .conftest import wait_for

pytestmark = pytest.mark.pg
OTHER = {"Ada": "grace", "Grace": "ada"}
OPEN = [Status.QUEUED, Status.PROCESSING, Status.DEFERRED]


class Colleagues(ScriptedProvider):
    """Each agent asks the other for its number and waits; answers a colleague's
    question with its own number; finishes its own item with the answer it got."""

    def complete(
        self, *, system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: CallContext
    ) -> LLMResponse:
        if context.scenario in (TRIAGE, DELIBERATION):
            return super().complete(system=system, messages=messages, tools=tools, context=context)
        me = context.agent_name
        results = []
        for m in messages:
            if m.get("role") == "tool":
                try:  # the last result carries the loop's context block after the JSON
                    results.append(json.loads(str(m["content"]).split(CONTEXT_MARK)[0]))
                except (TypeError, ValueError):
                    results.append({"text": m["content"]})
        if context.item.get("type") == MailboxType.SYSTEM_EVENT:  # its own question
            replied = [r for r in results if isinstance(r, dict) and r.get("status") == "replied"]
            if replied:
                turn = Turn(text=f"{me} learned: {replied[-1]['reply']}")
            else:
                ask = {"to": OTHER[me], "text": f"{me} asks: what is your number?", "await_reply": True}
                turn = Turn(tool_calls=[("agent_send_message", ask)])
        elif results:  # answered the colleague already
            turn = Turn(text=f"{me} answered")
        else:
            turn = Turn(tool_calls=[("agent_reply", {"text": f"{me}'s number is {len(me)}"})])
        with self._lock:
            self.calls.append({"agent": me, "type": context.item.get("type"), "turn": turn})
        return self._play(turn, context, len(self.calls))


@pytest.fixture
def grace(alice, team):
    return agent_create(name="Grace", role="reviewer", owner=alice, team=team, agent_id="grace")[0]


def test_two_agents_asking_each_other_at_once_both_get_their_answer_and_finish(celery_worker, agent, grace):
    run_both(agent, grace)


def test_each_asks_once_when_both_ask_at_once(celery_worker, agent, grace):
    provider = run_both(agent, grace)
    asked = [c["agent"] for c in provider.calls if c["type"] == MailboxType.SYSTEM_EVENT and c["turn"].tool_calls]
    assert sorted(asked) == ["Ada", "Grace"]


def run_both(agent, grace) -> Colleagues:
    provider = Colleagues()
    set_provider_override(provider)
    try:
        asks = [
            mailbox_enqueue(
                agent_id=a.id,
                source_type=MailboxType.SYSTEM_EVENT,
                payload={"summary": f"Ask {OTHER[a.name]} for their number", "content": "Ask your colleague."},
            )
            for a in (agent, grace)
        ]
        wait_for(
            lambda: all(MailboxItem.objects.get(id=i.id).status == Status.COMPLETED for i in asks),
            timeout=90,
            message="both asking items to complete",
        )
        # The answering items finish too (one may have been preempted by its agent's
        # returning answer, and resumes shortly): nothing is left open.
        wait_for(
            lambda: not MailboxItem.objects.filter(status__in=OPEN).exists(),
            timeout=90,
            message="every item to settle",
        )
    finally:
        set_provider_override(None)
    learned = {c["agent"]: c["turn"].text for c in provider.calls if c["turn"].text.startswith(c["agent"] + " learned")}
    assert learned == {"Ada": "Ada learned: Grace's number is 5", "Grace": "Grace learned: Ada's number is 3"}
    # Each asked before either answered: both were parked, waiting on each other, at once.
    first_answer = next(
        i
        for i, c in enumerate(provider.calls)
        if c["turn"].tool_calls[:1] and c["turn"].tool_calls[0][0] == "agent_reply"
    )
    asked = [c["agent"] for c in provider.calls[:first_answer] if c["type"] == MailboxType.SYSTEM_EVENT]
    assert sorted(asked) == ["Ada", "Grace"]
    for item in asks:
        item.refresh_from_db()
        assert "waitingForReply" not in (item.marks or {})
    questions = [i for i in MailboxItem.objects.filter(source_type=MailboxType.A2A_MESSAGE) if "asks:" in i.content]
    assert {i.agent_id for i in questions} == {"ada", "grace"}
    assert all(i.status == Status.COMPLETED for i in questions)  # every question answered
    # Every run lets its lease go (it does so after its last item settled, so a moment later).
    wait_for(
        lambda: not AgentAttention.objects.exclude(lease_owner="").filter(current_item__isnull=False).exists(),
        timeout=10,
        message="every run to let its lease go",
    )
    return provider
