"""Triage (seed section 21): tier 0 processes the head; tier 1 lets the brain choose among
items of equal priority, defer or drop redundant ones — never a human's item."""

from __future__ import annotations

import pytest
from django.utils import timezone

from attention import loop
from attention.models import AgentDecision
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from markus.agents.models import WorkingMemory
from markus.llm.base import set_provider_override
from markus.llm.offline import OfflineProvider
from markus.llm.scripted import ScriptedProvider, Turn
from tests.attention.helpers import enqueue, picked


@pytest.fixture
def provider():
    yield lambda p: set_provider_override(p)
    set_provider_override(None)


@pytest.mark.django_db(transaction=True)
def test_tier_one_lets_the_brain_choose_defer_and_drop_among_equals(agent, provider, sent_events):
    a = enqueue(agent, T.SYSTEM_EVENT, "a", 2, minutes_ago=3)
    b = enqueue(agent, T.SYSTEM_EVENT, "b", 2, minutes_ago=2)
    c = enqueue(agent, T.SYSTEM_EVENT, "c", 2, minutes_ago=1)
    brain = ScriptedProvider(
        default=Turn(text="ok"),
        triage_answer=lambda cands: {
            "processItemId": cands[2]["id"],
            "deferItemIds": [cands[1]["id"]],
            "dropItemIds": [cands[0]["id"]],
            "reasoning": "c is what matters now",
        },
    )
    provider(brain)
    loop.run_attention(agent.id, budget=1)
    assert [c["summary"] for c in brain.triage_calls[0]] == ["a", "b", "c"]  # oldest first, with ages
    assert all("ageSeconds" in cand for cand in brain.triage_calls[0])
    assert picked(agent) == ["c"]
    assert MailboxItem.objects.get(id=a.id).status == "dropped"
    assert MailboxItem.objects.get(id=b.id).status == "deferred"
    assert MailboxItem.objects.get(id=b.id).deferred_until > timezone.now()
    assert MailboxItem.objects.get(id=c.id).status == "completed"
    assert MailboxItem.objects.get(id=a.id).attempts == 0  # the put-back head did not count an attempt
    assert list(AgentDecision.objects.filter(mailbox_item=a).values_list("decision_type", flat=True)) == ["drop"]
    assert WorkingMemory.objects.get(agent=agent, key="triage-decision").content == "c is what matters now"
    event = next(e for _, e in sent_events if e["type"] == "agent:triage")
    assert event["processItemId"] == c.id and event["dropItemIds"] == [a.id] and event["deferItemIds"] == [b.id]


@pytest.mark.django_db(transaction=True)
def test_triage_never_drops_or_defers_a_humans_item_and_ignores_unknown_ids(agent, provider):
    human = enqueue(agent, T.TASK_COMMENT, "human says", 2, minutes_ago=2, senderRole="agent")
    MailboxItem.objects.filter(id=human.id).update(metadata={"senderRole": "user"})
    enqueue(agent, T.SYSTEM_EVENT, "other", 2, minutes_ago=3)
    brain = ScriptedProvider(
        default=Turn(text="ok"),
        triage_answer=lambda cands: {
            "processItemId": "mbx_nope",
            "dropItemIds": [human.id, "mbx_ghost"],
            "deferItemIds": [human.id],
        },
    )
    provider(brain)
    loop.run_attention(agent.id, budget=1)
    assert picked(agent) == ["other"]  # the unknown choice falls back to the head
    assert MailboxItem.objects.get(id=human.id).status == "queued"


@pytest.mark.django_db(transaction=True)
def test_tier_zero_skips_triage_when_priorities_are_clearly_separate_or_a_user_waits(agent, provider):
    # A brain that can deliberate (deliberation on, the default) and triage: it is asked neither.
    brain = ScriptedProvider(default=Turn(text="ok"), triage_answer={"processItemId": "x"}, deliberation=[])
    provider(brain)
    enqueue(agent, T.SYSTEM_EVENT, "urgent", 1)
    enqueue(agent, T.SYSTEM_EVENT, "later", 3)
    loop.run_attention(agent.id, budget=1)
    enqueue(agent, T.HUMAN_CHAT, "hi", senderId="1", senderRole="user")
    enqueue(agent, T.HUMAN_CHAT, "hello", senderId="2", senderRole="user")
    loop.run_attention(agent.id, budget=1)
    assert brain.triage_calls == [] and brain.deliberation_calls == []
    assert picked(agent) == ["urgent", "hi"]


@pytest.mark.django_db(transaction=True)
def test_the_offline_brain_takes_the_stalest_and_drops_superseded_check_ins(agent, provider):
    provider(OfflineProvider())
    old_report = enqueue(agent, T.DAILY_REPORT, "old report", 3, minutes_ago=30)
    new_report = enqueue(agent, T.DAILY_REPORT, "new report", 3, minutes_ago=1)
    enqueue(agent, T.MEMORY_CONSOLIDATION, "dream", 3, minutes_ago=10)
    loop.run_attention(agent.id, budget=1)
    assert MailboxItem.objects.get(id=old_report.id).status == "dropped"
    assert "superseded" in MailboxItem.objects.get(id=old_report.id).drop_reason
    assert picked(agent) == ["dream"]  # the stalest that remains
    assert MailboxItem.objects.get(id=new_report.id).status == "queued"


# ---------------------------------------------------------------------------- the mini triage (issue 15)


@pytest.mark.pg
@pytest.mark.django_db(transaction=True)
def test_the_mini_triage_looks_things_up_with_read_only_tools_then_answers_json(agent, provider):
    a = enqueue(agent, T.SYSTEM_EVENT, "a", 2, minutes_ago=2)
    b = enqueue(agent, T.SYSTEM_EVENT, "b", 2, minutes_ago=1)
    brain = ScriptedProvider(
        default=Turn(text="ok"),
        triage_turns=[
            Turn(tool_calls=[("check_mailbox", {})]),
            Turn(tool_calls=[("task_create", {"title": "no"})]),
            Turn(text=f'Decided: {{"processItemId": "{b.id}", "dropItemIds": ["{a.id}"], "reasoning": "a is moot"}}'),
        ],
    )
    provider(brain)
    loop.run_attention(agent.id, budget=1)
    assert len(brain.triage_calls) == 3
    assert picked(agent) == ["b"] and MailboxItem.objects.get(id=a.id).status == "dropped"
    assert AgentDecision.objects.get(mailbox_item=a).reasoning == "Triage: a is moot"


@pytest.mark.pg
@pytest.mark.django_db(transaction=True)
def test_the_mini_triage_gets_six_rounds_of_tools_and_a_malformed_answer_processes_the_head(agent, provider):
    enqueue(agent, T.SYSTEM_EVENT, "a", 2, minutes_ago=2)
    enqueue(agent, T.SYSTEM_EVENT, "b", 2, minutes_ago=1)
    looking = [Turn(tool_calls=[("recall_activity", {})]) for _ in range(7)]
    brain = ScriptedProvider(default=Turn(text="ok"), triage_turns=looking)
    provider(brain)
    loop.run_attention(agent.id, budget=1)
    assert len(brain.triage_calls) == 7  # six rounds of tools, then an answer was due
    assert picked(agent) == ["a"]
    brain = ScriptedProvider(default=Turn(text="ok"), triage_turns=[Turn(text="I would take b, I think")])
    provider(brain)
    enqueue(agent, T.SYSTEM_EVENT, "c", 2)
    loop.run_attention(agent.id, budget=1)
    assert picked(agent) == ["a", "b"]  # no JSON: the head


@pytest.mark.pg
@pytest.mark.django_db(transaction=True)
def test_stale_informational_items_are_offered_to_the_mini_triage(agent, provider, settings):
    settings.MARKUS = {**settings.MARKUS, "DELIBERATION": False}
    provider(OfflineProvider())
    enqueue(agent, T.SYSTEM_EVENT, "work", 2, minutes_ago=1)
    enqueue(agent, T.SYSTEM_EVENT, "more work", 2, minutes_ago=0.5)  # a rival: else tier 0, no triage
    old = enqueue(agent, T.TASK_STATUS_UPDATE, "status: done long ago", 3, minutes_ago=5 * 60)
    fresh = enqueue(agent, T.TASK_STATUS_UPDATE, "status: just now", 3, minutes_ago=1)
    loop.run_attention(agent.id, budget=1)
    assert picked(agent) == ["work"]
    assert MailboxItem.objects.get(id=old.id).status == "dropped"
    assert "stale" in MailboxItem.objects.get(id=old.id).drop_reason
    assert MailboxItem.objects.get(id=fresh.id).status == "queued"
    assert not AgentDecision.objects.filter(decision_type="deliberate").exists()  # deliberation is off
