"""Two agents that answer every message of the other with a new message would talk
forever, each exchange a model call or more, with no budget set: nothing stopped them.
Now one agent sends at most ``MARKUS_AGENT_MESSAGES_PER_HOUR`` messages to one colleague
(or one group) in an hour, with ``agent_send_message``, ``agent_reply`` or
``agent_send_group_message``; past that the tool answers why and nothing is sent, so the
exchange ends and the loop goes quiet."""

from __future__ import annotations

from typing import Any

import pytest

from agentbus.models import Chunk
from attention import loop
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue
from markus.agents.services import agent_create
from markus.llm.base import CallContext, LLMResponse, set_provider_override
from markus.llm.scripted import ScriptedProvider, Turn

pytestmark = pytest.mark.django_db(transaction=True)
OTHER = {"Ada": "grace", "Grace": "ada"}
PER_HOUR = 4


class Chatty(ScriptedProvider):
    """Answers every message with a new one to the other agent (by send or by reply, in
    turn), and then a final word; never runs out of things to say."""

    def complete(
        self, *, system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: CallContext
    ) -> LLMResponse:
        me, n = context.agent_name, len(self.calls)
        if messages[-1].get("role") == "tool":
            turn = Turn(text=f"{me} is done for now.")
        elif n % 2:
            turn = Turn(tool_calls=[("agent_reply", {"text": f"{me} answers (#{n})"})])
        else:
            turn = Turn(tool_calls=[("agent_send_message", {"to": OTHER[me], "text": f"{me} says more (#{n})"})])
        with self._lock:
            self.calls.append({"agent": me, "turn": turn, "results": [m for m in messages if m.get("role") == "tool"]})
        return self._play(turn, context, len(self.calls))


@pytest.fixture
def grace(alice, team):
    return agent_create(name="Grace", role="reviewer", owner=alice, team=team, agent_id="grace")[0]


def test_two_agents_answering_each_other_forever_stop_at_the_hourly_bound(agent, grace, settings):
    settings.MARKUS = {**settings.MARKUS, "AGENT_MESSAGES_PER_HOUR": PER_HOUR, "TRIAGE": False}
    provider = Chatty()
    set_provider_override(provider)
    try:
        mailbox_enqueue(
            agent_id=agent.id,
            source_type=MailboxType.SYSTEM_EVENT,
            payload={"summary": "Say hello to Grace", "content": "Say hello to Grace."},
        )
        for _ in range(60):
            for a in (agent, grace):
                loop.run_attention(a.id)
            if not MailboxItem.objects.filter(status__in=[Status.QUEUED, Status.PROCESSING]).exists():
                break
    finally:
        set_provider_override(None)
    assert not MailboxItem.objects.filter(status__in=[Status.QUEUED, Status.PROCESSING]).exists(), "still talking"
    for sender, recipient in (("ada", "grace"), ("grace", "ada")):
        sent = Chunk.objects.filter(sender_id=sender, recipient_id=recipient).count()
        assert PER_HOUR <= sent <= 2 * PER_HOUR, (sender, sent)  # its sends, and its final answers to them
    refused = [str(r["content"]) for c in provider.calls for r in c["results"] if "messages to" in str(r["content"])]
    assert refused and "in the last hour (MARKUS_AGENT_MESSAGES_PER_HOUR)" in refused[0]
