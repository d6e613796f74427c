"""Working memory and the deliberation's edges, through the real loop with the scripted
brain: the bound holds for triage's and deliberation's own keys too; a deliberation that
never decides falls back and the item still runs; the listing says how many more wait
beyond the 50 it shows."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from attention import loop
from attention.models import AgentActivity, AgentActivityLog, AgentDecision
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue
from markus.agents.models import WorkingMemory
from markus.llm.base import set_provider_override
from markus.llm.scripted import ScriptedProvider, Turn

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.pg]


@pytest.fixture(autouse=True)
def _reset():
    yield
    set_provider_override(None)


def enqueue(agent, summary: str, priority: int = 2, minutes_ago: float = 0) -> MailboxItem:
    item = mailbox_enqueue(
        agent_id=agent.id, source_type=T.SYSTEM_EVENT, priority=priority, payload={"summary": summary, "content": "x"}
    )
    if minutes_ago:
        MailboxItem.objects.filter(id=item.id).update(queued_at=timezone.now() - timedelta(minutes=minutes_ago))
    return item


def fill(agent) -> None:
    """Three entries of 100 characters or so, the oldest three days old: 302 in all."""
    now = timezone.now()
    for key, ago in (("oldest", timedelta(days=3)), ("older", timedelta(days=1)), ("recent", timedelta(minutes=5))):
        WorkingMemory.objects.create(agent=agent, key=key, content=key[0] * 95, updated_at=now - ago)


def total(agent) -> int:
    return sum(len(k) + len(v) for k, v in WorkingMemory.objects.filter(agent=agent).values_list("key", "content"))


def test_the_mini_triage_reasoning_stays_within_the_bound(agent, monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "DELIBERATION", False)
    monkeypatch.setitem(settings.MARKUS, "WORKING_MEMORY_MAX_CHARS", 400)
    fill(agent)
    a = enqueue(agent, "a", minutes_ago=2)
    enqueue(agent, "b", minutes_ago=1)
    set_provider_override(
        ScriptedProvider(
            default=Turn(text="ok"),
            triage_answer=lambda c: {"processItemId": a.id, "reasoning": "r" * 100},
        )
    )
    loop.run_attention(agent.id, budget=1)
    keys = set(WorkingMemory.objects.filter(agent=agent).values_list("key", flat=True))
    assert "triage-decision" in keys and "oldest" not in keys  # 302 + 15 + 100 > 400
    assert total(agent) <= 400


def test_the_deliberations_awareness_stays_within_the_bound(agent, monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "WORKING_MEMORY_MAX_CHARS", 400)
    fill(agent)
    a = enqueue(agent, "a", minutes_ago=2)
    enqueue(agent, "b", minutes_ago=1)
    decide = Turn(
        tool_calls=[
            (
                "complete_deliberation",
                {"process_item_id": a.id, "reasoning": "a first", "situational_awareness": "s" * 100},
            )
        ]
    )
    set_provider_override(ScriptedProvider(default=Turn(text="ok"), deliberation=[decide]))
    loop.run_attention(agent.id, budget=1)
    keys = set(WorkingMemory.objects.filter(agent=agent).values_list("key", flat=True))
    assert "deliberation" in keys and "oldest" not in keys
    assert total(agent) <= 400


def test_a_deliberation_that_never_decides_falls_back_and_the_head_still_runs(agent, monkeypatch):
    """Turn after turn without complete_deliberation: after its turn limit it is
    discarded and the mini triage (here: none) leaves the head to run; no stall."""
    from attention.deliberation import MAX_TURNS

    a = enqueue(agent, "a", minutes_ago=2)
    b = enqueue(agent, "b", minutes_ago=1)
    chatter = [Turn(text="thinking…") for _ in range(MAX_TURNS - 1)] + [Turn(tool_calls=[("check_mailbox", {})])]
    provider = ScriptedProvider(default=Turn(text="ok"), deliberation=list(chatter))
    set_provider_override(provider)
    result = loop.run_attention(agent.id, budget=1)
    assert result.processed == 1
    assert MailboxItem.objects.get(id=a.id).status == "completed"
    assert MailboxItem.objects.get(id=b.id).status == "queued"
    assert len(provider.deliberation_calls) == MAX_TURNS
    # Each text-only turn was answered with a nudge to decide.
    assert provider.deliberation_calls[1]["messages"][-1]["content"].startswith("Call complete_deliberation")
    activity = AgentActivity.objects.get(label__startswith="Deliberation")
    assert activity.success is False and activity.total_tokens == 15 * MAX_TURNS
    assert AgentActivityLog.objects.filter(
        activity=activity, content__contains=f"no decision after {MAX_TURNS}"
    ).exists()
    assert AgentDecision.objects.get(mailbox_item_id=a.id, decision_type="pick").reasoning.startswith("Idle")


def test_the_listing_shows_at_most_50_items_and_says_how_many_more(agent):
    from attention.scenarios import PROMPT_QUEUE_LIMIT

    items = [enqueue(agent, f"n{i}", minutes_ago=200 - i) for i in range(PROMPT_QUEUE_LIMIT + 3)]
    provider = ScriptedProvider(
        default=Turn(text="ok"),
        deliberation=[
            Turn(tool_calls=[("complete_deliberation", {"process_item_id": items[0].id, "reasoning": "oldest"})])
        ],
    )
    set_provider_override(provider)
    loop.run_attention(agent.id, budget=1)
    listing = provider.deliberation_calls[0]["messages"][0]["content"]
    assert listing.startswith(f"[DELIBERATION MODE] {PROMPT_QUEUE_LIMIT + 3} item(s)")
    assert items[PROMPT_QUEUE_LIMIT - 1].id in listing and items[PROMPT_QUEUE_LIMIT].id not in listing
    assert "… and 3 more" in listing
    assert "queued 3 h ago" in listing  # each with its age
