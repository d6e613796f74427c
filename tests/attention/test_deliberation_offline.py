"""The offline brain deliberates too (issue 15), deterministically: priorities, staleness,
superseded check-ins, "cancel" / "hold off"; and the issue's scenario, a burst of mixed
items, through the real loop."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from attention import loop
from attention.deliberation_decision import check_decision
from attention.models import AgentActivity, AgentDecision
from attention.toolbox import ToolContext, ToolError, execute_tool
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from markus.agents.models import WorkingMemory
from markus.llm.base import set_provider_override
from markus.llm.offline import OfflineProvider
from markus.llm.offline_deliberation import decide
from tests.attention.helpers import enqueue

pytestmark = pytest.mark.pg  # both databases


def fresh(item):
    return MailboxItem.objects.get(id=item.id)


def decisions_of(agent):
    rows = AgentDecision.objects.filter(agent=agent).select_related("mailbox_item").order_by("created_at", "id")
    return [(d.decision_type, d.mailbox_item.summary) for d in rows]


@pytest.fixture
def offline():
    set_provider_override(OfflineProvider())
    yield
    set_provider_override(None)


@pytest.mark.django_db(transaction=True)
def test_a_burst_of_mixed_items_ends_in_the_expected_decisions(agent, offline, alice):
    """Two comments on one task, a status update on it, a heartbeat, an urgent agent
    message (asking to hold off) and a chat: the chat first (tier 0), the task items
    consolidated into one (the status update made it urgent) and deliberated with the
    agent message that ties with it (the heartbeat is less urgent, tier 0 leaves it out),
    the agent message deferred as asked, the task processed, then the heartbeat."""
    task = {"taskId": "tsk_burst"}
    first = enqueue(agent, T.TASK_COMMENT, "comment one", payload=task, senderRole="agent", senderName="Bob")
    second = enqueue(agent, T.TASK_COMMENT, "comment two", payload=task, senderRole="agent", senderName="Cy")
    update = enqueue(agent, T.TASK_STATUS_UPDATE, "status: blocked", payload=task)
    beat = enqueue(agent, T.HEARTBEAT, "heartbeat")
    message = enqueue(agent, T.A2A_MESSAGE, "about the demo: no rush, hold off until tomorrow", 1, senderName="Dee")
    chat = enqueue(agent, T.HUMAN_CHAT, "how is it going?", senderId="1", senderRole="user")

    loop.run_attention(agent.id)

    # The two comments merged at enqueue; the status update folded in before triage.
    assert fresh(second).merged_into_id == first.id and fresh(update).merged_into_id == first.id
    assert fresh(first).status == "completed" and fresh(first).priority == 1
    assert fresh(chat).status == fresh(beat).status == "completed"
    assert fresh(message).status == "deferred" and fresh(message).deferred_until > timezone.now()
    picks = [s for t, s in decisions_of(agent) if t == "pick"]
    assert picks == ["how is it going?", "comment one (+2)", "heartbeat"]
    deliberated = AgentDecision.objects.filter(agent=agent, decision_type="deliberate").order_by("created_at")
    assert [d.mailbox_item_id for d in deliberated] == [first.id]  # the agent message deferred in it
    assert "is the most urgent" in deliberated[0].reasoning
    (defer,) = AgentDecision.objects.filter(agent=agent, decision_type="defer")
    assert defer.mailbox_item_id == message.id and "hold off" in defer.reasoning
    assert "deferred" in WorkingMemory.objects.get(agent=agent, key="deliberation").content
    # Each deliberation is an activity with its tokens.
    assert all(a.total_tokens > 0 for a in AgentActivity.objects.filter(label__startswith="Deliberation"))
    # The mind view shows every choice with its reasoning.
    client = Client()
    client.force_login(alice)
    html = client.get(f"/agents/{agent.id}/mind/").content.decode()
    assert (
        '<span class="badge decision-deliberate">deliberate</span> Deliberation: 2 items waiting' in html
    )  # the two it weighed
    assert '<span class="badge decision-defer">defer</span> Deliberation: the sender asked to hold off' in html


@pytest.mark.django_db(transaction=True)
def test_the_offline_deliberation_drops_superseded_and_stale_items_and_follows_a_cancel(agent, offline):
    # The reports tie with the deploy and the cancel (else tier 0 takes the head without
    # deliberating); the stale status update of a lower priority is offered all the same.
    old_beat = enqueue(agent, T.DAILY_REPORT, "old report", 2, minutes_ago=30)
    enqueue(agent, T.DAILY_REPORT, "new report", 2, minutes_ago=1)
    stale = enqueue(agent, T.TASK_STATUS_UPDATE, "status: in review", 3, minutes_ago=5 * 60, payload={"taskId": "t9"})
    work = enqueue(agent, T.SYSTEM_EVENT, "deploy window", 2, minutes_ago=20)
    cancel = enqueue(
        agent, T.A2A_MESSAGE, "please stop the deploy, cancel it", 2, minutes_ago=1, payload={"requirementId": "r1"}
    )
    loop.run_attention(agent.id, budget=1)
    assert "superseded" in fresh(old_beat).drop_reason
    assert fresh(stale).status == "dropped" and "stale" in fresh(stale).drop_reason
    # A cancel goes first among its priority, though the deploy waited longer.
    assert fresh(cancel).status == "completed" and fresh(work).status == "queued"


def briefs(*specs):
    now = timezone.now()
    out = []
    for n, (kind, priority, minutes, extra) in enumerate(specs):
        out.append(
            {
                "id": f"m{n}",
                "type": kind,
                "summary": extra.get("summary", f"item {n}"),
                "content": extra.get("content", ""),
                "priority": priority,
                "queuedAt": (now - timedelta(minutes=minutes)).isoformat(),
                "ageSeconds": minutes * 60,
                "periodic": kind in ("heartbeat", "daily_report"),
                "protected": extra.get("protected", False),
                "batchable": kind == "system_event",
                "strict": extra.get("strict", False),
                "informational": extra.get("informational", False),
                "taskId": extra.get("taskId"),
            }
        )
    return out


def test_the_offline_decision_rules():
    d = decide(
        briefs(
            ("system_event", 1, 5, {}),
            ("system_event", 1, 3, {}),
            ("a2a_message", 1, 9, {"content": "hold off please", "protected": True}),
            ("a2a_message", 2, 9, {"content": "hold off please"}),
            ("task_comment", 2, 1, {"content": "never mind, cancel it", "taskId": "t"}),
            ("mention", 2, 8, {"taskId": "t", "protected": True}),
            ("system_event", 2, 7, {"taskId": "t"}),
        ),
        deliberating=True,
    )
    assert d["process"] == "m2"  # most urgent, waited longest; protected: never deferred
    assert d["defer"] == {"m3": "the sender asked to hold off"}
    assert d["drop"] == {"m6": "redundant: m4 cancels it"}  # the mention is protected
    assert d["batch"] == []  # the chosen one is an agent message: no batch
    d = decide(
        briefs(("system_event", 3, 5, {}), ("system_event", 3, 3, {}), ("system_event", 4, 9, {})), deliberating=True
    )
    assert (d["process"], d["batch"]) == ("m0", ["m1"])  # system events of one priority go together
    d = decide(briefs(("system_event", 1, 5, {}), ("system_event", 1, 3, {})), deliberating=True)
    assert (d["process"], d["batch"]) == ("m0", [])  # not urgent ones


@pytest.mark.django_db
def test_complete_deliberation_refuses_an_execution_trigger_and_a_review_request(agent):
    trigger = enqueue(
        agent, T.TASK_STATUS_UPDATE, "run it", payload={"taskId": "t1", "extra": {"triggerExecution": True}}
    )
    review = enqueue(agent, T.REVIEW_REQUEST, "review it", payload={"taskId": "t2"})
    plain = enqueue(agent, T.SYSTEM_EVENT, "plain")
    ctx = ToolContext(agent_id=agent.id, agent_name=agent.name, scenario="deliberation")
    with pytest.raises(ToolError, match=r"an execution trigger .* cannot be deferred"):
        check_decision(ctx, {"process_item_id": plain.id, "defer": [{"item_id": trigger.id}], "reasoning": "r"})
    with pytest.raises(ToolError, match="a review request: it is protected and cannot be dropped"):
        check_decision(ctx, {"process_item_id": plain.id, "drop": [review.id], "reasoning": "r"})
    with pytest.raises(ToolError, match="runs by itself, not in a batch"):
        check_decision(ctx, {"process_item_id": plain.id, "batch_item_ids": [trigger.id], "reasoning": "r"})
    with pytest.raises(ToolError, match="named in both"):
        check_decision(ctx, {"process_item_id": plain.id, "drop": [plain.id], "reasoning": "r"})
    with pytest.raises(ToolError, match="no item 'mbx_nope'"):
        check_decision(ctx, {"process_item_id": "mbx_nope", "reasoning": "r"})
    with pytest.raises(ToolError, match="reasoning"):
        check_decision(ctx, {"process_item_id": plain.id})
    assert "deliberation" not in ctx.effects


@pytest.mark.django_db
def test_the_mailbox_tools_refuse_protected_items_outside_the_deliberation_too(agent):
    trigger = enqueue(
        agent, T.TASK_STATUS_UPDATE, "run it", payload={"taskId": "t1", "extra": {"triggerExecution": True}}
    )
    mention = enqueue(agent, T.MENTION, "hey @Ada")
    ctx = ToolContext(agent_id=agent.id, agent_name=agent.name, scenario="check_in")  # tidying up the mailbox
    ok, result = execute_tool(ctx, "drop_mailbox_item", {"item_id": trigger.id})
    assert not ok and "an execution trigger" in result and "protected" in result
    ok, result = execute_tool(ctx, "defer_mailbox_item", {"item_id": mention.id})
    assert not ok and "a direct mention" in result
    ok, result = execute_tool(ctx, "complete_deliberation", {"process_item_id": mention.id, "reasoning": "r"})
    assert not ok and "unknown tool" in result  # only while deliberating
    assert fresh(trigger).status == fresh(mention).status == "queued"
