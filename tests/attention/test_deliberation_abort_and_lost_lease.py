"""The deliberation's concurrency and its abort, through the real loop with the scripted
brain: a human's chat that arrives after the loop read the queue but before the
deliberation began still aborts it; a second worker cannot deliberate for the same agent
meanwhile; a deliberation whose lease was lost applies nothing."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from attention import deliberation, loop
from attention.lease import lease_take
from attention.models import AgentAttention, AgentDecision
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue
from markus.llm.base import set_provider_override
from markus.llm.scripted import ScriptedProvider, Turn
from tests.attention.helpers import picked

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.pg]


@pytest.fixture(autouse=True)
def _reset():
    yield
    set_provider_override(None)


def enqueue(agent, summary: str, *, kind: str = T.SYSTEM_EVENT, minutes_ago: float = 0, **meta) -> MailboxItem:
    item = mailbox_enqueue(
        agent_id=agent.id,
        source_type=kind,
        priority=None if kind == T.HUMAN_CHAT else 2,
        payload={"summary": summary, "content": summary},
        metadata=meta or None,
    )
    if minutes_ago:
        MailboxItem.objects.filter(id=item.id).update(queued_at=timezone.now() - timedelta(minutes=minutes_ago))
    return item


def status(item: MailboxItem) -> str:
    return MailboxItem.objects.get(id=item.id).status


def decide_first(cands):
    return Turn(tool_calls=[("complete_deliberation", {"process_item_id": cands[0]["id"], "reasoning": "first"})])


def test_a_chat_arriving_between_the_queue_read_and_the_deliberation_aborts_it(agent, monkeypatch):
    enqueue(agent, "a", minutes_ago=2)
    enqueue(agent, "b", minutes_ago=1)
    provider = ScriptedProvider(
        default=Turn(text="ok"),
        deliberation=[Turn(tool_calls=[("check_mailbox", {})]), decide_first, decide_first],
    )
    set_provider_override(provider)
    original = deliberation.deliberate
    arrived: list[MailboxItem] = []

    def late_chat(run, queue, depth, provider, **kw):
        if not arrived:  # the loop has read the queue: the chat comes in now
            arrived.append(enqueue(agent, "hello?", kind=T.HUMAN_CHAT, senderId="1", senderRole="user"))
        return original(run, queue, depth, provider, **kw)

    monkeypatch.setattr(deliberation, "deliberate", late_chat)
    loop.run_attention(agent.id, budget=1)
    assert picked(agent) == ["hello?"]  # the chat first, not an item of the stale listing
    assert AgentDecision.objects.filter(decision_type="deliberate", outcome="aborted, results discarded").exists()


def test_a_second_worker_cannot_deliberate_for_the_same_agent(agent):
    a = enqueue(agent, "a", minutes_ago=2)
    enqueue(agent, "b", minutes_ago=1)
    second: list[loop.RunResult] = []

    def other_worker():
        try:
            second.append(loop.run_attention(agent.id))
        finally:
            connection.close()

    def while_deliberating(cands):
        # Another worker is told to run this agent while its deliberation is in flight.
        thread = threading.Thread(target=other_worker)
        thread.start()
        thread.join()
        return Turn(tool_calls=[("check_mailbox", {})])

    provider = ScriptedProvider(default=Turn(text="ok"), deliberation=[while_deliberating, decide_first])
    set_provider_override(provider)
    loop.run_attention(agent.id, budget=1)
    assert second[0].status == "busy" and second[0].processed == 0
    assert len(provider.deliberation_calls) == 2  # one deliberation, two turns
    assert status(a) == "completed"


def test_a_deliberation_that_lost_its_lease_applies_nothing(agent, monkeypatch):
    a = enqueue(agent, "a", minutes_ago=2)
    b = enqueue(agent, "b", minutes_ago=1)

    def steal_then_decide(cands):
        AgentAttention.objects.filter(agent_id=agent.id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
        assert lease_take(agent.id, seconds=60) is not None  # another worker has it now
        return Turn(
            tool_calls=[
                (
                    "complete_deliberation",
                    {"process_item_id": a.id, "drop": [{"item_id": b.id, "reason": "x"}], "reasoning": "r"},
                )
            ]
        )

    set_provider_override(ScriptedProvider(default=Turn(text="ok"), deliberation=[steal_then_decide]))
    result = loop.run_attention(agent.id, budget=1)
    assert result.status == "stale"
    assert status(a) == status(b) == "queued"  # nothing claimed, nothing dropped
    assert not AgentDecision.objects.filter(decision_type__in=["drop", "pick", "deliberate"]).exists()


@pytest.mark.parametrize("scenario", ["deliberation", "check_in"])
def test_a_defer_beyond_any_sensible_time_is_refused_with_a_tool_error(agent, scenario):
    from attention.deliberation_decision import MAX_DEFER_MINUTES
    from attention.toolbox import ToolContext, execute_tool

    a = enqueue(agent, "a")
    b = enqueue(agent, "b")
    ctx = ToolContext(agent_id=agent.id, agent_name=agent.name, scenario=scenario)
    ok, result = execute_tool(ctx, "defer_mailbox_item", {"item_id": b.id, "minutes": 10**12})
    assert not ok and f"at most {MAX_DEFER_MINUTES}" in result
    if scenario == "deliberation":
        ok, result = execute_tool(
            ctx,
            "complete_deliberation",
            {"process_item_id": a.id, "defer": [{"item_id": b.id, "minutes": 10**12}], "reasoning": "r"},
        )
        assert not ok and f"at most {MAX_DEFER_MINUTES}" in result
        assert "deliberation" not in ctx.effects
    assert status(b) == "queued"
