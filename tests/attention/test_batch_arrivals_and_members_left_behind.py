"""Batches, through the real loop with the scripted brain:

1. A yield point weighs a new arrival against the most urgent item of the batch, not
   against its lead alone.
2. A batch member processed by itself while its lead waited (deferred by a
   deliberation) is not handled again when the lead resumes its saved session: the
   session is told that it left the batch.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from attention import loop
from attention.models import AgentDecision, LLMSession
from attention.session import session_id
from attention.triage import Plan
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue
from markus.llm.base import set_provider_override, without_context
from markus.llm.scripted import ScriptedProvider, Turn

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.pg]


@pytest.fixture(autouse=True)
def plain_loop(monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "TRIAGE", False)
    monkeypatch.setitem(settings.MARKUS, "INTERRUPT_JUDGE", False)
    monkeypatch.setitem(settings.MARKUS, "PREEMPT_RESUME_DELAY_S", 0.0)
    yield
    set_provider_override(None)


def enqueue(agent, summary: str, *, kind: str = T.SYSTEM_EVENT, priority: int = 2, **meta) -> MailboxItem:
    return mailbox_enqueue(
        agent_id=agent.id,
        source_type=kind,
        priority=priority,
        payload={"summary": summary, "content": f"content of {summary}"},
        metadata=meta or None,
    )


def plan_batch(monkeypatch, lead: MailboxItem, members: list[MailboxItem]) -> None:
    """The next item the loop begins is ``lead`` with ``members``, as a deliberation's
    plan would say (the loop's own triage is off)."""
    original = loop._begin
    used: list[int] = []

    def begin(run, chosen, view, plan, **kwargs):
        if not used:
            used.append(1)
            fresh = MailboxItem.objects.get(id=lead.id)
            plan = Plan(chosen=fresh, candidates=[fresh], batch=[m.id for m in members])
            chosen = fresh
        return original(run, chosen, view, plan, **kwargs)

    monkeypatch.setattr(loop, "_begin", begin)


def after_call(monkeypatch, provider: ScriptedProvider, n: int, action: Callable[[], None]) -> None:
    original = provider.complete

    def complete(**kw):
        response = original(**kw)
        if len(provider.calls) == n:
            action()
        return response

    monkeypatch.setattr(provider, "complete", complete)


def status(item: MailboxItem) -> str:
    return MailboxItem.objects.get(id=item.id).status


def test_an_arrival_is_weighed_against_the_most_urgent_item_of_the_batch(agent, monkeypatch):
    """The lead is a low-priority notice (3), a member is urgent (1): a normal-priority
    notice (2) arriving is less urgent than the batch, so the batch continues."""
    lead = enqueue(agent, "routine", priority=3)
    urgent = enqueue(agent, "urgent", priority=1)
    provider = ScriptedProvider(
        [Turn(tool_calls=[("check_mailbox", {})]), Turn(text="batch done")],
        default=Turn(text="later one done"),
    )
    set_provider_override(provider)
    plan_batch(monkeypatch, lead, [urgent])
    late: list[MailboxItem] = []
    after_call(monkeypatch, provider, 1, lambda: late.append(enqueue(agent, "normal notice", priority=2)))

    loop.run_attention(agent.id, budget=1)

    assert status(lead) == status(urgent) == "completed"  # not preempted
    assert not AgentDecision.objects.filter(mailbox_item_id=lead.id, decision_type="preempt").exists()
    cont = AgentDecision.objects.get(mailbox_item_id=late[0].id, decision_type="continue")
    assert cont.context["currentItemId"] == lead.id
    assert status(late[0]) == "queued"


def test_a_more_urgent_arrival_still_preempts_a_batch(agent, monkeypatch):
    lead = enqueue(agent, "routine", priority=3)
    member = enqueue(agent, "also routine", priority=2)
    provider = ScriptedProvider([Turn(tool_calls=[("check_mailbox", {})])], default=Turn(text="done"))
    set_provider_override(provider)
    plan_batch(monkeypatch, lead, [member])
    after_call(monkeypatch, provider, 1, lambda: enqueue(agent, "urgent notice", priority=1))

    loop.run_attention(agent.id, budget=1)

    assert status(lead) == status(member) == "deferred"
    assert AgentDecision.objects.filter(mailbox_item_id=lead.id, decision_type="preempt").exists()


def test_a_member_handled_alone_while_its_lead_waited_is_not_handled_again_by_the_lead(agent, monkeypatch):
    lead = enqueue(agent, "lead notice")
    member = enqueue(agent, "member notice")
    provider = ScriptedProvider(
        [
            Turn(tool_calls=[("check_mailbox", {})]),  # the batch's first turn, then a chat preempts it
            Turn(text="hello person"),
            Turn(text="member handled"),
            Turn(text="lead handled"),
        ],
        deliberation=[
            lambda cands: Turn(
                tool_calls=[
                    (
                        "complete_deliberation",
                        {
                            "process_item_id": member.id,
                            "defer": [{"item_id": lead.id, "minutes": 60, "reason": "later"}],
                            "reasoning": "the member cannot wait",
                        },
                    )
                ]
            )
        ],
    )
    set_provider_override(provider)
    plan_batch(monkeypatch, lead, [member])
    after_call(
        monkeypatch,
        provider,
        1,
        lambda: enqueue(agent, "are you there?", kind=T.HUMAN_CHAT, priority=0, senderId="1", senderRole="user"),
    )
    loop.run_attention(agent.id, budget=1)
    assert status(lead) == status(member) == "deferred"  # preempted together

    # The chat first, then a deliberation processes the member alone and defers the lead.
    monkeypatch.setitem(settings.MARKUS, "TRIAGE", True)
    loop.run_attention(agent.id, budget=2)
    assert status(member) == "completed" and status(lead) == "deferred"
    assert "member notice" in without_context(provider.calls[2]["messages"])[0]["content"]

    # The lead comes due and resumes its saved session, which quoted the member.
    MailboxItem.objects.filter(id=lead.id).update(deferred_until=timezone.now() - timedelta(seconds=1))
    loop.run_attention(agent.id)

    assert status(lead) == "completed"
    resumed = provider.calls[3]["messages"]
    notes = [m["content"] for m in resumed if m["role"] == "user" and member.id in m["content"]]
    assert len(notes) == 2, notes  # the opening that quoted it, and the note that it left the batch
    assert "no longer part of this batch" in notes[1] and "already handled" in notes[1]
    assert "do not handle" in notes[1].lower()
    session = LLMSession.objects.get(id=session_id(lead))
    assert member.id not in session.absorbed_ids
