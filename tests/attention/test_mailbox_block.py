"""The mailbox block of an item's prompt (``## Mailbox (N waiting)``): the waiting items
the agent weighs while it works (seed section 4: the prompt carries the mailbox queue,
so the agent is aware of what waits). It lists up to ``PROMPT_QUEUE_LIMIT`` (50) of
them in the order they will be taken (priority, then oldest first), each as
``- [priority] type: summary``, then ``- … and N more`` for the rest (``check_mailbox``
pages them). The first turn lists as many as every later one: not only the few the
loop read to choose the item. A deliberation has one listing of what it weighs, its
first message; its system prompt does not repeat it as a second block."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from attention import loop
from attention.scenarios import PROMPT_QUEUE_LIMIT, mailbox_lines
from mailbox.models import MailboxItem
from mailbox.registry import Status
from markus.llm.base import CONTEXT_MARK
from markus.llm.scripted import ScriptedProvider, Turn

from .helpers import enqueue

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _plain(monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "COALESCE_WINDOW_MS", 0)
    monkeypatch.setitem(settings.MARKUS, "INTERRUPT_JUDGE", False)


def block(call) -> list[str]:
    """The mailbox block of the context note a model call carried."""
    note = next(m["content"] for m in call["messages"] if CONTEXT_MARK in str(m.get("content")))
    lines = note[note.index(CONTEXT_MARK) :].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("## Mailbox ("))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("- ")), len(lines))
    return lines[start:end]


def test_the_first_turn_lists_every_waiting_item_up_to_the_cap_in_the_order_they_will_be_taken(scripted, agent):
    provider = scripted(default=Turn(text="done"))
    enqueue(agent, "human_chat", "the item being worked on", senderRole="user")
    waiting = [enqueue(agent, "system_event", f"notice {n}", priority=3, minutes_ago=60 - n) for n in range(27)]
    urgent = enqueue(agent, "mention", "urgent mention", priority=1)
    oldest = enqueue(agent, "system_event", "oldest notice", priority=3, minutes_ago=90)

    loop.run_attention(agent.id, budget=1)

    lines = block(provider.calls[0])
    assert lines[0] == "## Mailbox (29 waiting)"
    listed = lines[1:]
    assert len(listed) == 29 and not any(line.startswith("- … and") for line in listed)
    assert listed[0] == f"- [1] mention: {urgent.summary}"  # the most urgent first
    assert listed[1] == f"- [3] system_event: {oldest.summary}"  # then the oldest of a priority
    assert listed[2:] == [f"- [3] system_event: {w.summary}" for w in waiting]


def test_past_the_cap_the_block_says_how_many_more_wait(scripted, agent):
    provider = scripted(default=Turn(text="done"))
    enqueue(agent, "human_chat", "the item being worked on", senderRole="user")
    for n in range(PROMPT_QUEUE_LIMIT + 5):
        enqueue(agent, "system_event", f"notice {n}", priority=3, minutes_ago=100 - n)

    loop.run_attention(agent.id, budget=1)

    lines = block(provider.calls[0])
    assert lines[0] == f"## Mailbox ({PROMPT_QUEUE_LIMIT + 5} waiting)"
    assert len(lines) == 1 + PROMPT_QUEUE_LIMIT + 1
    assert lines[-2] == f"- [3] system_event: notice {PROMPT_QUEUE_LIMIT - 1}"
    assert lines[-1] == "- … and 5 more"


def test_nothing_else_waiting_is_said_as_such(scripted, agent):
    provider = scripted(default=Turn(text="done"))
    enqueue(agent, "human_chat", "alone", senderRole="user")

    loop.run_attention(agent.id)

    assert block(provider.calls[0]) == ["## Mailbox (0 waiting)"]


def test_a_deliberation_lists_what_it_weighs_once(agent, monkeypatch):
    from markus.llm.base import set_provider_override

    enqueue(agent, "system_event", "first notice", priority=2, minutes_ago=10)
    enqueue(agent, "system_event", "second notice", priority=2, minutes_ago=5)

    def decide(cands):
        first = next(c["id"] for c in cands if c["summary"] == "first notice")
        return Turn(tool_calls=[("complete_deliberation", {"process_item_id": first, "reasoning": "oldest"})])

    brain = ScriptedProvider([Turn(text="done")], deliberation=[decide])
    set_provider_override(brain)
    try:
        loop.run_attention(agent.id, budget=1)
    finally:
        set_provider_override(None)

    first = brain.deliberation_calls[0]
    assert "first notice" in first["messages"][0]["content"]  # the listing
    assert "## Mailbox (" not in first["system"]  # not a second block of the same items
    assert "first notice" not in first["system"] and "second notice" not in first["system"]


def test_the_first_turn_past_the_cap_reads_the_queue_once_and_takes_its_depth_from_the_loop(agent):
    """The loop's read counted the queue (up to its cap) when it began the item: the first
    turn's block reads only the listed items, one statement, and does not count again."""
    item = enqueue(agent, "human_chat", "the item being worked on", senderRole="user")
    MailboxItem.objects.filter(id=item.id).update(status=Status.PROCESSING)  # claimed
    for n in range(PROMPT_QUEUE_LIMIT + 5):
        enqueue(agent, "system_event", f"notice {n}", priority=3, minutes_ago=100 - n)

    with CaptureQueriesContext(connection) as queries:
        lines = mailbox_lines(agent, item, depth=PROMPT_QUEUE_LIMIT + 5)

    assert len(queries) == 1, [q["sql"] for q in queries]
    assert lines[0] == f"## Mailbox ({PROMPT_QUEUE_LIMIT + 5} waiting)"
    assert lines[-1] == "- … and 5 more"


def test_a_long_summary_is_shortened_in_every_listing_of_the_queue(agent):
    """A summary is the caller's (the mailbox API takes one of any length within the
    payload's limit): each listing of waiting items in a prompt (the mailbox block, a
    deliberation's rivals, the mini triage's candidates) shows at most
    ``SUMMARY_IN_PROMPT`` characters of it, so 50 listed items stay a bounded block."""
    from datetime import UTC, datetime

    from attention import deliberation_prompt, triage
    from attention.scenarios import SUMMARY_IN_PROMPT, item_brief

    item = enqueue(agent, "human_chat", "the item being worked on", senderRole="user")
    MailboxItem.objects.filter(id=item.id).update(status=Status.PROCESSING)
    long = enqueue(agent, "system_event", "x" * 5000, priority=3)

    [line] = mailbox_lines(agent, item, depth=1)[1:]
    assert len(line) < SUMMARY_IN_PROMPT + 40 and line.endswith("…")
    rival = deliberation_prompt._line(long, datetime.now(UTC))
    assert len(rival.splitlines()[0]) < SUMMARY_IN_PROMPT + 120
    brief = {**item_brief(long), "ageSeconds": 60}
    candidates = triage._prompt([brief]).splitlines()[1]
    assert len(candidates) < SUMMARY_IN_PROMPT + 120
