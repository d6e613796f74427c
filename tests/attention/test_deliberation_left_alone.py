"""A deliberation is atomic (seed section 21): what arrives while the agent deliberates
is not weighed until it has decided, unless it is a human's chat (which aborts it,
tests/attention/test_deliberation.py). A system event, a colleague's message, a
person's comment on a task or a mention arriving mid-deliberation leave it alone: one
deliberation, its decision applied (the staged drop done, the chosen item first), no
abort recorded, and the newcomer handled afterwards, not lost."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from attention import loop
from attention.models import AgentActivity, AgentDecision
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from markus.llm.base import set_provider_override
from markus.llm.scripted import ScriptedProvider, Turn
from tests.attention.helpers import enqueue, picked

pytestmark = pytest.mark.pg  # both databases

ARRIVALS = [
    (T.SYSTEM_EVENT, {}),
    (T.A2A_MESSAGE, {"senderId": "bea", "senderName": "Bea", "senderRole": "agent"}),
    (T.TASK_COMMENT, {"senderId": "1", "senderName": "alice", "senderRole": "user"}),
    (T.MENTION, {"senderId": "1", "senderName": "alice", "senderRole": "user"}),
]


def status(item: MailboxItem) -> str:
    return MailboxItem.objects.get(id=item.id).status


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind,sender", ARRIVALS, ids=[k.value for k, _ in ARRIVALS])
def test_a_non_chat_arrival_mid_deliberation_leaves_it_alone(agent, kind, sender):
    a = enqueue(agent, T.SYSTEM_EVENT, "a", 2, minutes_ago=3)
    b = enqueue(agent, T.SYSTEM_EVENT, "b", 2, minutes_ago=2)
    c = enqueue(agent, T.SYSTEM_EVENT, "c", 2, minutes_ago=1)
    slow = Turn(tool_calls=[("drop_mailbox_item", {"item_id": b.id, "reason": "a duplicate of a"})], delay=0.3)
    brain = ScriptedProvider(
        [Turn(text="c done"), Turn(text="a done"), Turn(text="newcomer done")],
        deliberation=[
            slow,
            Turn(tool_calls=[("complete_deliberation", {"process_item_id": c.id, "reasoning": "c first"})]),
            # Once c is done, a and the newcomer wait: a deliberation of its own weighs them.
            lambda candidates: Turn(
                tool_calls=[("complete_deliberation", {"process_item_id": candidates[0]["id"], "reasoning": "next"})]
            ),
        ],
    )
    set_provider_override(brain)
    arrived: list[MailboxItem] = []

    def arrives():
        slow.started.wait(5)
        try:
            arrived.append(enqueue(agent, kind, "the newcomer", 2, **sender))
        finally:
            connection.close()  # this thread's own (a test database left open cannot be dropped)

    thread = threading.Thread(target=arrives)
    thread.start()
    try:
        loop.run_attention(agent.id, budget=4)
    finally:
        thread.join()
        set_provider_override(None)

    (newcomer,) = arrived
    # The deliberation ran both its turns to its decision, nothing aborted, its drop applied;
    # the newcomer was weighed only by the next deliberation, after c.
    assert len(brain.deliberation_calls) == 3
    first, _, second = brain.deliberation_calls
    assert len(brain.deliberation_calls[1]["messages"]) > 1  # the first one's second turn, not a new start
    assert "the newcomer" not in first["messages"][0]["content"]
    assert "the newcomer" in second["messages"][0]["content"] and len(second["messages"]) == 1
    assert not AgentDecision.objects.filter(outcome="aborted, results discarded").exists()
    deliberations = AgentActivity.objects.filter(label__startswith="Deliberation").order_by("started_at", "id")
    assert [d.success for d in deliberations] == [True, True]
    assert status(b) == "dropped"
    order = picked(agent)
    assert order[0] == "c"
    assert set(order) == {"c", "a", "the newcomer"}
    assert status(a) == status(c) == status(newcomer) == "completed"
