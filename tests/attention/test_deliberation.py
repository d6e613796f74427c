"""Tier 2 of triage (seed section 21, issue 15): the agent deliberates as itself over its
queue before it begins an item, through the real loop with the scripted provider."""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from attention import loop
from attention.deliberation import DELIBERATION_ALLOWED_TOOLS, READ_ONLY_TOOLS
from attention.models import AgentActivity, AgentActivityLog, AgentDecision
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from markus.agents.models import WorkingMemory
from markus.llm.base import set_provider_override
from markus.llm.scripted import ScriptedProvider, Turn
from markus.memory import selectors as memory_selectors
from tests.attention.helpers import enqueue, picked

pytestmark = pytest.mark.pg  # both databases


def status(item):
    return MailboxItem.objects.get(id=item.id).status


def decisions(item):
    return list(
        AgentDecision.objects.filter(mailbox_item_id=item.id)
        .order_by("created_at", "id")
        .values_list("decision_type", "reasoning")
    )


def tool_results(call):
    return [json.loads(m["content"]) for m in call["messages"] if m["role"] == "tool"]


@pytest.fixture
def provider():
    yield lambda p: set_provider_override(p)
    set_provider_override(None)


def by_summary(candidates, summary):
    return next(c["id"] for c in candidates if c["summary"] == summary)


@pytest.mark.django_db(transaction=True)
def test_the_agent_deliberates_as_itself_and_every_choice_is_a_decision(agent, provider, sent_events):
    WorkingMemory.objects.create(agent=agent, key="focus", content="ship the release")
    stale = enqueue(agent, T.SYSTEM_EVENT, "old notice", 2, minutes_ago=40)
    later = enqueue(agent, T.SYSTEM_EVENT, "can wait", 2, minutes_ago=12)
    now = enqueue(agent, T.A2A_MESSAGE, "urgent question", 2, minutes_ago=1)

    def decide(cands):
        return Turn(
            tool_calls=[
                (
                    "complete_deliberation",
                    {
                        "process_item_id": by_summary(cands, "urgent question"),
                        "defer": [{"item_id": by_summary(cands, "can wait"), "minutes": 90, "reason": "after lunch"}],
                        "drop": [{"item_id": by_summary(cands, "old notice"), "reason": "already handled"}],
                        "reasoning": "the question blocks a colleague",
                        "situational_awareness": "a colleague waits on me; the release is next",
                        "memory_updates": [
                            {"key": "colleague", "content": "Bob waits on an answer"},
                            {"type": "longterm", "key": "Team", "content": "Bob owns the release notes"},
                        ],
                    },
                )
            ]
        )

    brain = ScriptedProvider(
        [Turn(text="answered")],
        deliberation=[Turn(tool_calls=[("check_mailbox", {})]), decide],
    )
    provider(brain)
    loop.run_attention(agent.id, budget=1)

    first = brain.deliberation_calls[0]
    assert "You are Ada, engineer." in first["system"]  # as itself, with its identity
    assert "## Working Memory" in first["system"] and "ship the release" in first["system"]
    listing = first["messages"][0]["content"]
    assert listing.startswith("[DELIBERATION MODE] 3 item(s)")
    assert f"{stale.id} [priority 2] system_event: old notice — queued 40 min ago" in listing
    assert "can wait — queued 12 min ago" in listing and "urgent question — queued 1 min ago" in listing
    assert tool_results(brain.deliberation_calls[1])[0]["queueDepth"] == 3  # the read-only tool ran

    assert picked(agent) == ["urgent question"]
    assert status(now) == "completed"
    assert status(stale) == "dropped"
    assert MailboxItem.objects.get(id=stale.id).drop_reason == "deliberation: already handled"
    deferred = MailboxItem.objects.get(id=later.id)
    assert deferred.status == "deferred"
    assert timedelta(minutes=89) < deferred.deferred_until - timezone.now() <= timedelta(minutes=90)
    assert decisions(stale) == [("drop", "Deliberation: already handled")]
    assert decisions(later) == [("defer", "Deliberation: after lunch")]
    chosen = dict(decisions(now))
    assert chosen["deliberate"] == "Deliberation: the question blocks a colleague"
    deliberated = AgentDecision.objects.get(decision_type="deliberate")
    memory = dict(WorkingMemory.objects.filter(agent=agent).values_list("key", "content"))
    assert memory["deliberation"] == "a colleague waits on me; the release is next"
    assert memory["colleague"] == "Bob waits on an answer"
    assert "Team" not in memory  # a long-term update goes to MEMORY.md, not working memory
    assert "## Team\n\nBob owns the release notes" in memory_selectors.markdown(agent.id)
    # Its token usage is an activity of its own (two turns of 15 tokens), named by its decision.
    activity = AgentActivity.objects.get(agent=agent, type="internal", label__startswith="Deliberation")
    assert (activity.total_tokens, activity.total_tools, activity.success) == (30, 2, True)
    assert activity.ended_at is not None and activity.mailbox_item_id is None
    assert deliberated.context["activityId"] == activity.id
    event = next(e for _, e in sent_events if e["type"] == "agent:triage")
    assert event["tier"] == 2 and event["processItemId"] == now.id and event["dropItemIds"] == [stale.id]


@pytest.mark.django_db(transaction=True)
def test_deliberation_is_offered_only_its_allowed_tools(agent, provider):
    enqueue(agent, T.SYSTEM_EVENT, "a", 2, minutes_ago=2)
    enqueue(agent, T.SYSTEM_EVENT, "b", 2, minutes_ago=1)
    brain = ScriptedProvider(
        [Turn(text="ok")],
        deliberation=[
            Turn(tool_calls=[("task_create", {"title": "x"})]),
            lambda c: Turn(tool_calls=[("complete_deliberation", {"process_item_id": c[0]["id"], "reasoning": "r"})]),
        ],
    )
    provider(brain)
    loop.run_attention(agent.id, budget=1)
    assert "not available while you deliberate" in tool_results(brain.deliberation_calls[1])[0]["error"]
    assert not {"task_create", "task_update", "requirement_propose", "agent_delegate_task"} & DELIBERATION_ALLOWED_TOOLS
    assert READ_ONLY_TOOLS <= DELIBERATION_ALLOWED_TOOLS and "complete_deliberation" in DELIBERATION_ALLOWED_TOOLS
    assert picked(agent) == ["a"]


@pytest.mark.django_db(transaction=True)
def test_protected_items_are_refused_with_an_error_the_llm_can_act_on(agent, provider):
    mention = enqueue(agent, T.MENTION, "you were mentioned", 2, minutes_ago=3)
    human = enqueue(agent, T.TASK_COMMENT, "a person asks", 2, minutes_ago=2, senderRole="user")
    plain = enqueue(agent, T.SYSTEM_EVENT, "notice", 2, minutes_ago=1)
    brain = ScriptedProvider(
        [Turn(text="ok")],
        deliberation=[
            Turn(
                tool_calls=[
                    (
                        "complete_deliberation",
                        {"process_item_id": plain.id, "drop": [{"item_id": mention.id}], "reasoning": "noise"},
                    ),
                    ("defer_mailbox_item", {"item_id": human.id, "minutes": 5}),
                    (
                        "complete_deliberation",
                        {"process_item_id": plain.id, "inline_completed_ids": [human.id], "reasoning": "r"},
                    ),
                ]
            ),
            Turn(
                tool_calls=[("complete_deliberation", {"process_item_id": plain.id, "reasoning": "the notice first"})]
            ),
        ],
    )
    provider(brain)
    loop.run_attention(agent.id, budget=1)
    refused = [r["error"] for r in tool_results(brain.deliberation_calls[1])]
    assert refused[0].startswith(f"{mention.id} is a direct mention: it is protected and cannot be dropped")
    assert refused[1].startswith(f"{human.id} is a human's comment: it is protected and cannot be deferred")
    assert "cannot be completed inline" in refused[2]
    assert picked(agent) == ["notice"]
    assert status(mention) == "queued" and status(human) == "queued"


@pytest.mark.django_db(transaction=True)
def test_a_human_chat_aborts_the_deliberation_goes_first_and_the_deliberation_runs_again(agent, provider, sent_events):
    a = enqueue(agent, T.SYSTEM_EVENT, "a", 2, minutes_ago=2)
    b = enqueue(agent, T.SYSTEM_EVENT, "b", 2, minutes_ago=1)
    slow = Turn(tool_calls=[("drop_mailbox_item", {"item_id": b.id, "reason": "dup"})], delay=0.3)
    brain = ScriptedProvider(
        [Turn(text="hello person"), Turn(text="b done"), Turn(text="a done")],
        deliberation=[
            slow,
            Turn(tool_calls=[("complete_deliberation", {"process_item_id": b.id, "reasoning": "b first"})]),
        ],
    )
    provider(brain)

    def chat_arrives():
        slow.started.wait(5)
        try:
            enqueue(agent, T.HUMAN_CHAT, "are you there?", senderId="1", senderRole="user")
        finally:
            connection.close()  # this thread's own (a test database left open cannot be dropped)

    thread = threading.Thread(target=chat_arrives)
    thread.start()
    loop.run_attention(agent.id, budget=3)
    thread.join()

    assert picked(agent) == ["are you there?", "b", "a"]  # the chat first, then as deliberated
    assert status(a) == status(b) == "completed"  # the aborted deliberation's staged drop was discarded
    assert len(brain.deliberation_calls) == 2
    # The second deliberation started afresh (not the aborted one's messages).
    assert len(brain.deliberation_calls[1]["messages"]) == 1
    aborted = AgentDecision.objects.get(decision_type="deliberate", outcome="aborted, results discarded")
    assert aborted.mailbox_item_id == a.id and "a human's chat" in aborted.reasoning
    first, second = AgentActivity.objects.filter(label__startswith="Deliberation").order_by("started_at", "id")
    assert first.success is False and second.success is True
    assert AgentActivityLog.objects.filter(activity=first, content__startswith="deliberation aborted").exists()
    # The attention state went back before the chat was taken up.
    states = [e["state"] for _, e in sent_events if e["type"] == "agent:attention"]
    i = states.index("deciding")
    assert states[i + 1] != "deciding" and states[i + 2] == "focused"


@pytest.mark.django_db(transaction=True)
def test_items_handled_inline_are_completed_without_a_run_of_their_own(agent, provider):
    a = enqueue(agent, T.SYSTEM_EVENT, "a", 2, minutes_ago=2)
    b = enqueue(agent, T.SYSTEM_EVENT, "b", 2, minutes_ago=1)
    brain = ScriptedProvider(
        [Turn(text="a done")],
        deliberation=[
            Turn(
                tool_calls=[
                    (
                        "complete_deliberation",
                        {"process_item_id": a.id, "inline_completed_ids": [b.id], "reasoning": "b is a quick one"},
                    )
                ]
            )
        ],
    )
    provider(brain)
    result = loop.run_attention(agent.id)
    assert result.processed == 1 and len(brain.calls) == 1
    assert status(a) == status(b) == "completed"
    assert decisions(b) == [("inline", "Deliberation: Handled inline while deliberating: b is a quick one")]


@pytest.mark.django_db(transaction=True)
def test_a_batch_is_processed_in_one_session(agent, provider):
    a = enqueue(agent, T.SYSTEM_EVENT, "a", 2, minutes_ago=2)
    b = enqueue(agent, T.SYSTEM_EVENT, "b", 2, minutes_ago=1)
    brain = ScriptedProvider(
        [Turn(text="both done")],
        deliberation=[
            Turn(
                tool_calls=[
                    (
                        "complete_deliberation",
                        {
                            "process_item_id": a.id,
                            "batch_item_ids": [b.id],
                            "batch_context": "same",
                            "reasoning": "together",
                        },
                    )
                ]
            )
        ],
    )
    provider(brain)
    loop.run_attention(agent.id)
    assert len(brain.calls) == 1 and status(a) == status(b) == "completed"
    context = AgentDecision.objects.get(decision_type="deliberate").context
    assert context["batchItemIds"] == [b.id] and context["batchContext"] == "same"


@pytest.mark.django_db(transaction=True)
def test_below_the_backlog_threshold_or_with_a_human_at_the_head_no_deliberation(agent, provider, settings):
    brain = ScriptedProvider(default=Turn(text="ok"), deliberation=[])
    provider(brain)
    settings.MARKUS = {**settings.MARKUS, "TRIAGE_BACKLOG_THRESHOLD": 3}
    enqueue(agent, T.SYSTEM_EVENT, "a", 2)
    enqueue(agent, T.SYSTEM_EVENT, "b", 2)
    loop.run_attention(agent.id)
    settings.MARKUS = {**settings.MARKUS, "TRIAGE_BACKLOG_THRESHOLD": 2}
    enqueue(agent, T.HUMAN_CHAT, "hi", senderId="1", senderRole="user")
    enqueue(agent, T.SYSTEM_EVENT, "c", 2)
    loop.run_attention(agent.id, budget=1)
    assert brain.deliberation_calls == []
    assert picked(agent) == ["a", "b", "hi"]


@pytest.mark.django_db(transaction=True)
def test_a_failed_deliberation_falls_back_to_the_mini_triage(agent, provider):
    enqueue(agent, T.SYSTEM_EVENT, "a", 2, minutes_ago=2)
    enqueue(agent, T.SYSTEM_EVENT, "b", 2, minutes_ago=1)
    brain = ScriptedProvider(
        [Turn(text="ok")],
        deliberation=[Turn(error=RuntimeError("the model is down"))],
        triage_answer=lambda c: {"processItemId": c[1]["id"], "reasoning": "b by the mini triage"},
    )
    provider(brain)
    loop.run_attention(agent.id, budget=1)
    assert picked(agent) == ["b"]
    activity = AgentActivity.objects.get(label__startswith="Deliberation")
    assert activity.success is False
    assert AgentActivityLog.objects.filter(activity=activity, content__contains="the model is down").exists()
    assert WorkingMemory.objects.get(agent=agent, key="triage-decision").content == "b by the mini triage"


@pytest.mark.django_db(transaction=True)
def test_the_cheaper_triage_model_is_used_while_few_items_wait(agent, provider, settings):
    settings.MARKUS = {**settings.MARKUS, "TRIAGE_MODEL": "small-model", "TRIAGE_MODEL_MAX_ITEMS": 2}

    def first(c):
        return Turn(tool_calls=[("complete_deliberation", {"process_item_id": c[0]["id"], "reasoning": "r"})])

    brain = ScriptedProvider(default=Turn(text="ok"), deliberation=[first, first])
    provider(brain)
    enqueue(agent, T.SYSTEM_EVENT, "a", 2, minutes_ago=2)
    enqueue(agent, T.SYSTEM_EVENT, "b", 2, minutes_ago=1)
    loop.run_attention(agent.id, budget=1)
    for name in "cde":
        enqueue(agent, T.SYSTEM_EVENT, name, 2)
    loop.run_attention(agent.id, budget=1)
    assert [c["model"] for c in brain.deliberation_calls] == ["small-model", ""]
    requests = AgentActivityLog.objects.filter(type="llm_request", activity__label__startswith="Deliberation")
    log = requests.order_by("id").first()
    assert log.metadata["model"] == "small-model"


@pytest.mark.django_db
def test_get_provider_builds_the_provider_for_a_calls_model(settings):
    from markus.llm.base import get_provider

    settings.MARKUS = {**settings.MARKUS, "LLM_PROVIDER": "openai", "LLM_MODEL": "big-model", "LLM_API_KEY": "k"}
    assert get_provider().model == "big-model"
    assert get_provider(model="small-model").model == "small-model"
    assert get_provider().model == "big-model"


@pytest.mark.django_db(transaction=True)
def test_a_pause_mid_deliberation_stops_the_run_and_discards_it(agent, provider):
    from markus.agents.models import Agent

    a = enqueue(agent, T.SYSTEM_EVENT, "a", 2, minutes_ago=2)
    b = enqueue(agent, T.SYSTEM_EVENT, "b", 2, minutes_ago=1)
    slow = Turn(tool_calls=[("drop_mailbox_item", {"item_id": b.id, "reason": "dup"})], delay=5)
    brain = ScriptedProvider([], deliberation=[slow])
    provider(brain)

    def pause():
        slow.started.wait(5)
        try:
            Agent.objects.filter(id=agent.id).update(status=Agent.RunStatus.PAUSED)
        finally:
            connection.close()

    thread = threading.Thread(target=pause)
    thread.start()
    result = loop.run_attention(agent.id)
    thread.join()
    assert result.status == "stopped" and result.processed == 0
    assert status(a) == status(b) == "queued"  # nothing claimed, the staged drop discarded
    activity = AgentActivity.objects.get(label__startswith="Deliberation")
    assert activity.success is False and activity.ended_at is not None
