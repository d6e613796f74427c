"""Tier 0 of triage (seed section 21, issue 26): when the head's priority is more urgent
than every other queued item, the head goes at once, with no LLM call to choose it; a
deliberation (or the mini triage) is held only over the head's rivals, the items that tie
with it. Through the real openai SDK against the local model stub, which counts the
calls of each kind."""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from attention import loop
from attention.models import AgentDecision
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue
from markus.llm.base import CONTEXT_MARK
from tests.llm.stub_openai import StubOpenAI

pytestmark = pytest.mark.django_db(transaction=True)
LISTED = re.compile(r"^- (\S+) \[priority", re.M)


class CountingModel:
    """A model behind the stub that tells the kinds of calls apart by what they offer:
    a deliberation (``complete_deliberation`` among the tools; it chooses the first item
    listed), the mini triage (its system prompt; it answers JSON for the first
    candidate), or an item's own run (done at once)."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.listings: list[str] = []
        self.items: list[str] = []

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        tools = {t["function"]["name"] for t in body.get("tools") or []}
        system = body["messages"][0]["content"]
        # The item's own opening, past the loop's context note before it.
        first = next(m["content"] for m in body["messages"][1:] if CONTEXT_MARK not in m["content"])
        if "complete_deliberation" in tools:
            self.calls["deliberation"] += 1
            self.listings.append(first)
            decision = {"process_item_id": LISTED.findall(first)[0], "reasoning": "the first one listed"}
            return {"tool_calls": [("complete_deliberation", decision)]}
        if "decide what to work on next" in system:
            self.calls["triage"] += 1
            self.listings.append(first)
            return {"content": json.dumps({"processItemId": LISTED.findall(first)[0], "reasoning": "first"})}
        self.calls["item"] += 1
        self.items.append(first)
        return {"content": "done"}


@pytest.fixture
def model(settings, monkeypatch):
    counting = CountingModel()
    with StubOpenAI([], chooser=counting) as stub:

        def use(*, deliberation: bool = True) -> CountingModel:
            for key, value in {
                "LLM_PROVIDER": "openai",
                "LLM_BASE_URL": stub.url,
                "LLM_API_KEY": "sk-test",
                "LLM_MODEL": "stub-model",
                "DELIBERATION": deliberation,
                "INTERRUPT_JUDGE": False,
            }.items():
                monkeypatch.setitem(settings.MARKUS, key, value)
            return counting

        yield use


def notice(agent, summary: str, priority: int, minutes_ago: float = 1) -> MailboxItem:
    item = mailbox_enqueue(
        agent_id=agent.id, source_type=T.SYSTEM_EVENT, priority=priority, payload={"summary": summary}
    )
    MailboxItem.objects.filter(id=item.id).update(queued_at=timezone.now() - timedelta(minutes=minutes_ago))
    return item


def completed_in_order(agent) -> list[str]:
    done = MailboxItem.objects.filter(agent=agent, status="completed").order_by("started_at", "id")
    return [item.summary for item in done]


def test_a_priority_1_head_over_priority_3_items_goes_without_deliberation(agent, model):
    calls = model()
    notice(agent, "low a", 3, minutes_ago=30)
    notice(agent, "low b", 3, minutes_ago=20)
    notice(agent, "urgent", 1, minutes_ago=1)

    loop.run_attention(agent.id, budget=1)

    assert completed_in_order(agent) == ["urgent"]
    assert calls.calls == Counter({"item": 1})  # no deliberation, no triage: tier 0
    pick = AgentDecision.objects.get(decision_type="pick")
    assert AgentDecision.objects.filter(decision_type="deliberate").count() == 0
    assert pick.mailbox_item.summary == "urgent"


def test_a_priority_1_head_over_priority_3_items_makes_no_triage_call_either(agent, model):
    calls = model(deliberation=False)
    notice(agent, "low a", 3, minutes_ago=30)
    notice(agent, "low b", 3, minutes_ago=20)
    notice(agent, "urgent", 1, minutes_ago=1)

    loop.run_attention(agent.id, budget=1)

    assert completed_in_order(agent) == ["urgent"]
    assert calls.calls == Counter({"item": 1})


def test_separated_priorities_run_in_priority_order_with_no_choosing_call(agent, model):
    calls = model()
    notice(agent, "background", 4, minutes_ago=50)
    notice(agent, "low", 3, minutes_ago=40)
    notice(agent, "normal", 2, minutes_ago=30)
    notice(agent, "high", 1, minutes_ago=20)
    notice(agent, "critical", 0, minutes_ago=10)

    loop.run_attention(agent.id, budget=10)

    assert completed_in_order(agent) == ["critical", "high", "normal", "low", "background"]
    assert calls.calls == Counter({"item": 5})
    assert [first.split("\n")[0] for first in calls.items] == [
        "[System Event] critical",
        "[System Event] high",
        "[System Event] normal",
        "[System Event] low",
        "[System Event] background",
    ]


def test_rivals_that_tie_with_the_head_are_deliberated_and_only_they_are_listed(agent, model):
    calls = model()
    first = notice(agent, "first of two", 1, minutes_ago=20)
    second = notice(agent, "second of two", 1, minutes_ago=10)
    low = notice(agent, "low", 3, minutes_ago=30)

    loop.run_attention(agent.id, budget=1)

    assert calls.calls == Counter({"deliberation": 1, "item": 1})
    listing = calls.listings[0]
    assert LISTED.findall(listing) == [first.id, second.id]  # the rivals, not the priority-3 item
    assert low.id not in listing
    assert listing.startswith("[DELIBERATION MODE] 3 item(s) wait in your mailbox")
    assert "1 less urgent" in listing
    assert completed_in_order(agent) == ["first of two"]
    assert AgentDecision.objects.filter(decision_type="deliberate").count() == 1


def test_rivals_are_the_mini_triages_only_candidates(agent, model):
    calls = model(deliberation=False)
    first = notice(agent, "first of two", 2, minutes_ago=20)
    second = notice(agent, "second of two", 2, minutes_ago=10)
    notice(agent, "low", 3, minutes_ago=30)

    loop.run_attention(agent.id, budget=1)

    assert calls.calls == Counter({"triage": 1, "item": 1})
    assert LISTED.findall(calls.listings[0]) == [first.id, second.id]


def test_a_burst_costs_one_deliberation_per_tie_not_one_per_item(agent, model):
    """One priority-1 item over three priority-3 items: before tier 0, three
    deliberations (at depths 4, 3 and 2); now two: over the three that tie, then over
    the two left (the last one left is alone)."""
    calls = model()
    for n in range(3):
        notice(agent, f"low {n}", 3, minutes_ago=30 - n)
    notice(agent, "urgent", 1, minutes_ago=1)

    loop.run_attention(agent.id, budget=10)

    assert completed_in_order(agent) == ["urgent", "low 0", "low 1", "low 2"]
    assert calls.calls == Counter({"item": 4, "deliberation": 2})


def test_rivals_beyond_the_loops_read_of_ten_are_listed_and_the_less_urgent_counted(agent, model):
    calls = model()
    tied = [notice(agent, f"tied {n}", 2, minutes_ago=60 - n) for n in range(12)]
    low = notice(agent, "low", 3, minutes_ago=90)

    loop.run_attention(agent.id, budget=1)

    listing = calls.listings[0]
    assert LISTED.findall(listing) == [t.id for t in tied]  # all twelve, though the loop read ten
    assert low.id not in listing
    assert "These 12 tie for first (priority 2)" in listing
    assert "1 less urgent item(s) wait their turn" in listing


def test_the_backlog_threshold_counts_the_items_that_tie_with_the_head(agent, model, settings, monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "TRIAGE_BACKLOG_THRESHOLD", 3)
    calls = model()
    notice(agent, "first", 2, minutes_ago=20)
    notice(agent, "second", 2, minutes_ago=10)
    for n in range(3):
        notice(agent, f"low {n}", 3, minutes_ago=30)

    loop.run_attention(agent.id, budget=1)  # two tie, three wait less urgent: under the threshold

    assert calls.calls == Counter({"item": 1})
    assert completed_in_order(agent) == ["first"]
