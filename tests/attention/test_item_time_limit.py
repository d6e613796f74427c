"""Every item's processing has a time limit (``MARKUS_ITEM_MAX_SECONDS``, 10 minutes as
the seed's processing backstop): a model that is slow and never finishes no longer runs
its twelve turns of up to two minutes each. The limit is checked at the loop's safe
points (before each turn) and by the sweep, for a holder that froze past it while its
lease stayed alive. Either way the item ends once, the person who asked is told why
(a failure answer, never silence), and it is not tried again.

The slow model is a local OpenAI-compatible server (``tests/llm/misbehaving_model.py``)
through the real ``openai`` SDK."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import openai  # noqa: F401  (imported before the item's clock runs: a cold import is slow)
import pytest
from django.utils import timezone

from attention import loop, services
from attention.lease import StaleLease, fenced, lease_take
from attention.models import AgentAttention, AgentDecision, AttentionState
from attention.tool_loop import MAX_TURNS
from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.registry import Status
from mailbox.services import mailbox_enqueue
from markus.agents.models import ChatMessage
from tests.llm.misbehaving_model import MisbehavingModel, call, delay_first_byte

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def own_settings(settings):
    """A copy of MARKUS for the test: what it changes in it is gone after it."""
    settings.MARKUS = dict(settings.MARKUS)


@pytest.fixture
def model(settings):
    servers: list[MisbehavingModel] = []

    def serve(script: Any) -> MisbehavingModel:
        server = MisbehavingModel(script).__enter__()
        servers.append(server)
        settings.MARKUS.update(
            LLM_PROVIDER="openai",
            LLM_BASE_URL=server.url,
            LLM_API_KEY="sk-test",
            LLM_MODEL="slow",
            TRIAGE=False,
            INTERRUPT_JUDGE=False,
        )
        return server

    yield serve
    for server in servers:
        server.__exit__(None, None, None)


def chat(agent_id: str, text: str = "Summarise the release notes") -> MailboxItem:
    return mailbox_enqueue(
        agent_id=agent_id,
        source_type=T.HUMAN_CHAT,
        payload={"summary": text, "content": text},
        metadata={"senderId": "1", "senderRole": "user"},
    )


def told(agent_id: str) -> list[ChatMessage]:
    return list(ChatMessage.objects.filter(role="assistant", session__agent_id=agent_id).order_by("created_at"))


def test_the_default_limit_is_the_seeds_ten_minutes():
    from markus.settings import MARKUS

    assert MARKUS["ITEM_MAX_SECONDS"] == 600


def test_a_slow_model_that_never_finishes_ends_at_the_time_limit_and_the_person_is_told(agent, model, settings):
    settings.MARKUS["ITEM_MAX_SECONDS"] = 4.0
    # Every turn takes 0.8 s and asks for one more look at the mailbox, a page further
    # each time (the same look answered the same would be no progress): it would go on
    # for MAX_TURNS turns, and each failed attempt would be tried again.
    server = model(lambda body, n: delay_first_byte(0.8, call("check_mailbox", {"offset": n})))
    item = chat(agent.id)

    loop.run_attention(agent.id)

    item.refresh_from_db()
    assert 1 <= server.calls < MAX_TURNS  # stopped at a safe point past the limit
    assert item.status == Status.COMPLETED and item.attempts == 1
    [reply] = told(agent.id)
    assert reply.metadata["failed"] is True
    assert "time limit" in reply.content and "MARKUS_ITEM_MAX_SECONDS" in reply.content

    loop.run_attention(agent.id)  # ended for good: not tried again
    assert len(told(agent.id)) == 1
    item.refresh_from_db()
    assert item.attempts == 1


def frozen_holder(agent, item: MailboxItem, minutes_ago: float):
    """A worker that took the agent's lease, claimed ``item`` and froze ``minutes_ago``
    with its lease still alive (its keeper renews it during a call that never returns)."""
    frozen = lease_take(agent.id, seconds=3600)
    assert frozen is not None
    assert lifecycle.claim(item.id, epoch=frozen.epoch) is not None
    AgentAttention.objects.filter(agent_id=agent.id).update(
        state=AttentionState.FOCUSED,
        current_item_id=item.id,
        focus_started_at=timezone.now() - timedelta(minutes=minutes_ago),
    )
    return frozen


def test_the_sweep_ends_an_item_whose_live_holder_froze_past_the_limit(agent):
    item = chat(agent.id)
    frozen = frozen_holder(agent, item, minutes_ago=12)

    services.sweep()  # the beat's backstop: its receivers include the time limit's

    item.refresh_from_db()
    assert item.status == Status.DROPPED and "time limit" in item.drop_reason
    [reply] = told(agent.id)
    assert reply.metadata["failed"] is True and "time limit" in reply.content
    assert AgentDecision.objects.filter(mailbox_item_id=item.id, decision_type="drop").exists()
    with pytest.raises(StaleLease), fenced(frozen):  # the frozen worker, woken, writes nothing
        pass
    row = AgentAttention.objects.get(agent_id=agent.id)
    assert row.lease_owner == "" and row.state == AttentionState.IDLE

    from attention import loop

    assert loop.end_overdue() == 0  # once
    assert len(told(agent.id)) == 1


def test_the_sweep_leaves_a_holder_within_the_limit_alone(agent):
    item = chat(agent.id)
    holder = frozen_holder(agent, item, minutes_ago=5)
    from attention import loop

    assert loop.end_overdue() == 0

    item.refresh_from_db()
    assert item.status == Status.PROCESSING and told(agent.id) == []
    with fenced(holder):  # still its lease
        pass
