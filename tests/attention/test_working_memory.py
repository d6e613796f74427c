"""Working memory (issue 15, seed section 21 "Working Memory Injection"): every request
carries ``## Working Memory`` (in the loop's context note, issue 34) with each entry's age; the agent's tools, triage
and deliberation write it; it is bounded (``WORKING_MEMORY_MAX_CHARS``), the oldest
entries forgotten first."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from attention import loop
from attention.session_messages import last_context
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue
from markus.agents import memory
from markus.agents.models import WorkingMemory
from markus.llm.base import set_provider_override, without_context
from markus.llm.scripted import ScriptedProvider, Turn


@pytest.fixture(autouse=True)
def no_deliberation(monkeypatch):
    """Triage here is the one-call kind the scripted brain answers (``triage_answer``)."""
    monkeypatch.setitem(settings.MARKUS, "DELIBERATION", False)


@pytest.fixture
def brain():
    def install(*turns: Turn, **kw) -> ScriptedProvider:
        provider = ScriptedProvider(list(turns), **kw)
        set_provider_override(provider)
        return provider

    yield install
    set_provider_override(None)


def enqueue(agent, summary: str, priority: int = 2, minutes_ago: float = 0) -> MailboxItem:
    item = mailbox_enqueue(
        agent_id=agent.id, source_type=T.SYSTEM_EVENT, priority=priority, payload={"summary": summary, "content": "x"}
    )
    if minutes_ago:
        MailboxItem.objects.filter(id=item.id).update(queued_at=timezone.now() - timedelta(minutes=minutes_ago))
    return item


def entry(agent, key: str, content: str, ago: timedelta) -> None:
    WorkingMemory.objects.create(agent=agent, key=key, content=content, updated_at=timezone.now() - ago)


def context_of(call: dict) -> str:
    """What the call was told of the agent's context: the loop's latest context note."""
    return last_context(call["messages"])


def tool_results(call: dict) -> list[dict]:
    return [json.loads(m["content"]) for m in without_context(call["messages"]) if m.get("role") == "tool"]


# ---------------------------------------------------------------------------- in the prompt


@pytest.mark.pg
@pytest.mark.django_db(transaction=True)
def test_every_prompt_shows_working_memory_with_the_age_of_each_entry(agent, brain):
    entry(agent, "deliberation", "three reviews wait; the release is Friday", timedelta(minutes=12, seconds=30))
    entry(agent, "task-priorities", "tsk_1 before tsk_2", timedelta(hours=3, minutes=5))
    entry(agent, "user-prefs", "Alice wants short answers", timedelta(days=2, hours=1))
    provider = brain(
        Turn(tool_calls=[("update_working_memory", {"key": "now", "content": "checking the build"})]),
        Turn(text="done"),
    )
    enqueue(agent, "job")

    loop.run_attention(agent.id)

    first = context_of(provider.calls[0])
    assert "## Working Memory" in first
    assert "- deliberation (12 min ago): three reviews wait; the release is Friday" in first
    assert "- task-priorities (3 h ago): tsk_1 before tsk_2" in first
    assert "- user-prefs (2 days ago): Alice wants short answers" in first
    # The agent's own write is in the next turn's prompt, as new.
    assert "- now (just now): checking the build" in context_of(provider.calls[1])
    assert WorkingMemory.objects.get(agent=agent, key="now").content == "checking the build"


@pytest.mark.django_db(transaction=True)
def test_a_prompt_without_working_memory_has_no_section(agent, brain):
    provider = brain(Turn(text="done"))
    enqueue(agent, "job")
    loop.run_attention(agent.id)
    assert "Working Memory" not in context_of(provider.calls[0])


@pytest.mark.django_db(transaction=True)
def test_triage_reasoning_lands_in_working_memory_and_in_the_next_prompt_with_its_age(agent, brain):
    entry(agent, "triage-decision", "an old reasoning", timedelta(hours=5))
    a = enqueue(agent, "a", minutes_ago=2)
    enqueue(agent, "b", minutes_ago=1)
    provider = brain(
        default=Turn(text="ok"),
        triage_answer=lambda cands: {"processItemId": a.id, "reasoning": "a is older"},
    )

    loop.run_attention(agent.id, budget=1)

    prompt = context_of(provider.calls[0])
    assert "- triage-decision (just now): a is older" in prompt
    assert "an old reasoning" not in prompt
    assert WorkingMemory.objects.get(agent=agent, key="triage-decision").content == "a is older"


# ---------------------------------------------------------------------------- bounded


@pytest.mark.django_db(transaction=True)
def test_triage_writes_through_the_same_bound(agent, brain, monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "WORKING_MEMORY_MAX_CHARS", 400)
    a = enqueue(agent, "a", minutes_ago=2)
    enqueue(agent, "b", minutes_ago=1)
    provider = brain(
        default=Turn(text="ok"),
        triage_answer=lambda cands: {"processItemId": a.id, "reasoning": "r" * 1500},
    )
    loop.run_attention(agent.id, budget=1)
    stored = WorkingMemory.objects.get(agent=agent, key="triage-decision").content
    assert len(stored) == 100 and stored.endswith("[truncated]")
    assert f"- triage-decision (just now): {stored}" in context_of(provider.calls[0])


@pytest.mark.django_db(transaction=True)
def test_the_tool_keeps_working_memory_bounded_oldest_entries_forgotten_first(agent, brain, monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "WORKING_MEMORY_MAX_CHARS", 400)  # an entry: at most 100 characters
    entry(agent, "oldest", "o" * 95, timedelta(days=3))
    entry(agent, "older", "p" * 95, timedelta(days=1))
    entry(agent, "recent", "q" * 95, timedelta(minutes=5))
    provider = brain(
        Turn(tool_calls=[("update_working_memory", {"key": "huge", "content": "h" * 5000})]),
        Turn(tool_calls=[("update_working_memory", {"key": "more", "content": "m" * 100})]),
        Turn(text="done"),
    )
    enqueue(agent, "job")

    loop.run_attention(agent.id)

    huge = WorkingMemory.objects.get(agent=agent, key="huge").content
    assert len(huge) == 100 and huge.endswith("[truncated]")
    first, second = tool_results(provider.calls[2])
    assert "100 characters" in first["truncated"]
    assert first["forgotten"] == ["oldest"]  # 6+95 + 5+95 + 6+95 + 4+100 > 400
    assert second["forgotten"] == ["older"]  # 5+95 + 6+95 + 4+100 + 4+100 > 400
    rows = dict(WorkingMemory.objects.filter(agent=agent).values_list("key", "content"))
    assert sorted(rows) == ["huge", "more", "recent"]
    assert sum(len(k) + len(v) for k, v in rows.items()) <= 400
    last = context_of(provider.calls[2])
    assert "oldest" not in last and "older" not in last and "- more (just now)" in last


@pytest.mark.django_db(transaction=True)
def test_clear_working_memory_forgets_one_entry_or_all(agent, brain):
    entry(agent, "a", "1", timedelta(minutes=1))
    entry(agent, "b", "2", timedelta(minutes=1))
    entry(agent, "c", "3", timedelta(minutes=1))
    provider = brain(
        Turn(tool_calls=[("clear_working_memory", {"key": "a"})]),
        Turn(tool_calls=[("clear_working_memory", {"key": "*"})]),
        Turn(text="done"),
    )
    enqueue(agent, "job")
    loop.run_attention(agent.id)
    assert [r["cleared"] for r in tool_results(provider.calls[2])] == [1, 2]
    assert not WorkingMemory.objects.filter(agent=agent).exists()
    assert "Working Memory" not in context_of(provider.calls[2])


@pytest.mark.django_db
def test_remember_is_the_one_bounded_writer(agent, settings):
    settings.MARKUS = {**settings.MARKUS, "WORKING_MEMORY_MAX_CHARS": 200}
    assert memory.entry_cap() == 50
    now = timezone.now()
    first = memory.remember(agent.id, "  a  ", "x" * 10, now=now - timedelta(hours=2))
    assert first.entry.key == "a" and not first.truncated and first.evicted == []
    memory.remember(agent.id, "b", "y" * 60, now=now - timedelta(hours=1))
    written = memory.remember(agent.id, "c", "z" * 50, now=now)
    assert written.evicted == []  # 11 + 51 + 51 fits in 200
    memory.remember(agent.id, "d", "w" * 50, now=now)
    replaced = memory.remember(agent.id, "a", "v" * 50, now=now + timedelta(seconds=1))
    # Rewriting "a" makes it the newest; "b" is now the oldest and goes.
    assert replaced.evicted == ["b"]
    assert [e.key for e in memory.read(agent.id)] == ["a", "c", "d"]
    with pytest.raises(ValueError):
        memory.remember(agent.id, "   ", "x")


def test_age_labels():
    now = timezone.now()
    labels = [memory.age_label(now - d, now) for d in (timedelta(seconds=5), timedelta(minutes=12), timedelta(hours=3))]
    assert labels == ["just now", "12 min ago", "3 h ago"]
    assert memory.age_label(now - timedelta(hours=30), now) == "1 day ago"
    assert memory.age_label(now - timedelta(days=2, hours=5), now) == "2 days ago"
    assert memory.age_label(now + timedelta(minutes=5), now) == "just now"  # a clock skew is no negative age


def test_trim_keeps_the_entry_just_written_even_when_it_is_alone_over_the_bound(settings):
    settings.MARKUS = {**settings.MARKUS, "WORKING_MEMORY_MAX_CHARS": 10}
    now = timezone.now()
    entries = [memory.Entry("old", "1234", now - timedelta(hours=1)), memory.Entry("new", "x" * 20, now)]
    kept, dropped = memory.trim(entries, keep="new")
    assert [e.key for e in kept] == ["new"] and dropped == ["old"]
