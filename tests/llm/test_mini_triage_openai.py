"""The mini triage (seed section 21, the fallback when deliberation is off) and the
deliberation through the real openai SDK against the local stub server: read-only tool
rounds through the provider's ordinary ``complete`` call, then a JSON answer; a malformed
answer processes the head; at most TRIAGE_MAX_TOOL_ITERATIONS rounds of tools."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from attention import loop
from attention.models import AgentActivity, AgentDecision
from attention.triage import TRIAGE_ALLOWED_TOOLS, TRIAGE_MAX_TOOL_ITERATIONS
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue
from markus.agents.models import WorkingMemory

from .stub_openai import StubOpenAI

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def openai_settings(model_server):
    def use(url, *, deliberation: bool = False):
        model_server(url, DELIBERATION=deliberation, INTERRUPT_JUDGE=False)

    return use


def two_items(agent) -> tuple[MailboxItem, MailboxItem]:
    items = []
    for n, summary in enumerate(("old notice", "new notice")):
        item = mailbox_enqueue(
            agent_id=agent.id, source_type=T.SYSTEM_EVENT, priority=2, payload={"summary": summary, "content": summary}
        )
        MailboxItem.objects.filter(id=item.id).update(queued_at=timezone.now() - timedelta(minutes=5 - n))
        items.append(item)
    return items[0], items[1]


def status(item: MailboxItem) -> str:
    return MailboxItem.objects.get(id=item.id).status


def test_the_mini_triage_runs_read_only_tools_then_answers_json(openai_settings, agent):
    old, new = two_items(agent)
    answer = {"processItemId": new.id, "dropItemIds": [old.id], "reasoning": "the new one replaces the old"}
    replies = [
        {"tool_calls": [("check_mailbox", {})]},
        {"content": "Here is my decision: " + json.dumps(answer)},
        {"content": "handled"},
    ]
    with StubOpenAI(replies) as stub:
        openai_settings(stub.url)
        loop.run_attention(agent.id, budget=1)

    assert status(new) == "completed" and status(old) == "dropped"
    first = stub.requests[0]["body"]
    assert first["messages"][0]["content"].startswith("You are Ada, engineer.")
    assert {t["function"]["name"] for t in first["tools"]} == {*TRIAGE_ALLOWED_TOOLS, "triage_decision"}
    assert old.id in first["messages"][1]["content"] and "waited 5 min" in first["messages"][1]["content"]
    second = stub.requests[1]["body"]["messages"]
    assert second[-2]["tool_calls"][0]["function"]["name"] == "check_mailbox"
    assert second[-1]["role"] == "tool" and json.loads(second[-1]["content"])["queueDepth"] == 2
    assert WorkingMemory.objects.get(agent=agent, key="triage-decision").content == "the new one replaces the old"
    assert AgentDecision.objects.get(mailbox_item_id=old.id, decision_type="drop").reasoning.startswith("Triage:")


def test_the_mini_triage_takes_its_decision_as_a_tool_call_with_the_same_checks(openai_settings, agent):
    old, new = two_items(agent)
    decision = {"processItemId": new.id, "dropItemIds": [old.id, "mbx_unknown"], "reasoning": "newer"}
    with StubOpenAI([{"tool_calls": [("triage_decision", decision)]}, {"content": "handled"}]) as stub:
        openai_settings(stub.url)
        loop.run_attention(agent.id, budget=1)
    assert status(new) == "completed" and status(old) == "dropped"
    assert len(stub.requests) == 2  # the decision, then the chosen item's turn


def test_a_malformed_answer_processes_the_head(openai_settings, agent):
    old, new = two_items(agent)
    with StubOpenAI([{"content": "I would rather not say"}, {"content": "handled"}]) as stub:
        openai_settings(stub.url)
        loop.run_attention(agent.id, budget=1)
    assert status(old) == "completed" and status(new) == "queued"
    assert len(stub.requests) == 2


def test_at_most_six_rounds_of_tools_then_a_last_call_for_the_answer(openai_settings, agent):
    old, new = two_items(agent)
    rounds = [{"tool_calls": [("task_list", {})]} for _ in range(TRIAGE_MAX_TOOL_ITERATIONS)]
    final = {"content": json.dumps({"processItemId": new.id, "reasoning": "after looking around"})}
    with StubOpenAI([*rounds, final, {"content": "handled"}]) as stub:
        openai_settings(stub.url)
        loop.run_attention(agent.id, budget=1)
    assert status(new) == "completed" and status(old) == "queued"
    triage_calls = stub.requests[: TRIAGE_MAX_TOOL_ITERATIONS + 1]
    assert all("tools" in r["body"] for r in triage_calls)  # a history with tool calls names its tools
    last = triage_calls[-1]["body"]
    assert "JSON" in last["messages"][-1]["content"] and last["messages"][-1]["role"] == "user"


def test_a_tool_call_in_the_last_round_is_no_answer_the_head_goes_first(openai_settings, agent):
    old, new = two_items(agent)
    rounds = [{"tool_calls": [("task_list", {})]} for _ in range(TRIAGE_MAX_TOOL_ITERATIONS + 1)]
    with StubOpenAI([*rounds, {"content": "handled"}]) as stub:
        openai_settings(stub.url)
        loop.run_attention(agent.id, budget=1)
    assert status(old) == "completed" and status(new) == "queued"
    assert len(stub.requests) == TRIAGE_MAX_TOOL_ITERATIONS + 2


def test_the_deliberation_runs_through_the_sdk_with_its_toolset(openai_settings, agent):
    from attention.deliberation import DELIBERATION_ALLOWED_TOOLS

    old, new = two_items(agent)
    decision = {
        "process_item_id": new.id,
        "defer": [{"item_id": old.id, "minutes": 30, "reason": "after this"}],
        "reasoning": "the new one first",
        "situational_awareness": "two notices; the old one later",
    }
    replies = [
        {"tool_calls": [("task_create", {"title": "no"})]},  # refused while deliberating
        {"tool_calls": [("complete_deliberation", decision)]},
        {"content": "handled"},
    ]
    with StubOpenAI(replies) as stub:
        openai_settings(stub.url, deliberation=True)
        loop.run_attention(agent.id, budget=1)

    assert status(new) == "completed" and status(old) == "deferred"
    offered = {t["function"]["name"] for t in stub.requests[0]["body"]["tools"]}
    assert offered <= DELIBERATION_ALLOWED_TOOLS and "complete_deliberation" in offered
    assert "task_create" not in offered
    refused = stub.requests[1]["body"]["messages"][-1]
    assert refused["role"] == "tool" and "not available while you deliberate" in refused["content"]
    activity = AgentActivity.objects.get(label__startswith="Deliberation")
    assert activity.total_tokens == 56 and activity.success  # two calls of 28 tokens
    assert WorkingMemory.objects.get(agent=agent, key="deliberation").content == "two notices; the old one later"
