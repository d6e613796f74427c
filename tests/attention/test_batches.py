"""Batches (issue 15, seed section 21 "Batch Processing"): items processed together share
one LLM session; a successful settle completes all of them; an interruption (preempt,
cancel, pause, a lost lease) puts every one of them back, none completed alone, none
lost.

The loop runs for real (``run_attention`` with the scripted brain). Deliberation, which
names a batch in its plan, is switched off (``TRIAGE`` False); each test hands the loop
the plan a deliberation would have made, by wrapping ``attention.loop._begin``.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from attention import loop, services
from attention.batch import BATCH, BATCH_LEAD
from attention.lease import lease_take
from attention.models import AgentActivity, AgentAttention, AgentDecision, LLMSession
from attention.session import session_id
from attention.triage import Plan
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.registry import Status
from mailbox.services import mailbox_enqueue
from markus.agents.models import Agent
from markus.llm.base import CONTEXT_MARK, set_provider_override, without_context
from markus.llm.scripted import ScriptedProvider, Turn

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def plain_loop(monkeypatch):
    """No triage of the loop's own (the tests bring the plan), no judge unless asked."""
    monkeypatch.setitem(settings.MARKUS, "TRIAGE", False)
    monkeypatch.setitem(settings.MARKUS, "INTERRUPT_JUDGE", False)
    monkeypatch.setitem(settings.MARKUS, "PREEMPT_RESUME_DELAY_S", 0.0)
    yield
    set_provider_override(None)


def assistant_turns(messages: list[dict]) -> list[dict]:
    """A session's assistant turns (the loop's context notes and results between them)."""
    return [m for m in messages if m["role"] == "assistant"]


def brain(*turns: Turn, default: Turn | None = None, judge_word: str | None = None) -> ScriptedProvider:
    provider = ScriptedProvider(list(turns), default=default, judge_word=judge_word)
    set_provider_override(provider)
    return provider


def after_call(monkeypatch, provider: ScriptedProvider, n: int, action: Callable[[], None]) -> None:
    """Run ``action`` when the provider's ``n``-th call returns (between two turns)."""
    original = provider.complete

    def complete(**kw):
        response = original(**kw)
        if len(provider.calls) == n:
            action()
        return response

    monkeypatch.setattr(provider, "complete", complete)


def plan_batch(monkeypatch, lead: MailboxItem, members: list[MailboxItem], **extra) -> list[int]:
    """The next time the loop begins an item, it begins ``lead`` with ``members`` as its
    batch, as a deliberation's plan would say. Returns a counter of plans handed out."""
    original = loop._begin
    used: list[int] = []

    def begin(run, chosen, view, plan, **kwargs):
        if not used:
            used.append(1)
            fresh = MailboxItem.objects.get(id=lead.id)
            plan = Plan(chosen=fresh, candidates=[fresh], batch=[m.id for m in members], **extra)
            chosen = fresh
        return original(run, chosen, view, plan, **kwargs)

    monkeypatch.setattr(loop, "_begin", begin)
    return used


OPS = "ops"  # the sender of the items a batch is made of, and of the item that calls them off


def enqueue(agent, summary: str, *, kind: str = T.SYSTEM_EVENT, priority: int | None = 2, **meta) -> MailboxItem:
    return mailbox_enqueue(
        agent_id=agent.id,
        source_type=kind,
        priority=priority,
        payload={"summary": summary, "content": f"content of {summary}"},
        metadata=meta or None,
    )


def chat(agent, text: str = "hi") -> MailboxItem:
    return mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.HUMAN_CHAT,
        payload={"summary": text, "content": text},
        metadata={"senderId": "1", "senderRole": "user"},
    )


def statuses(*items: MailboxItem) -> list[str]:
    by_id = dict(MailboxItem.objects.filter(id__in=[i.id for i in items]).values_list("id", "status"))
    return [by_id[i.id] for i in items]


def decisions(item: MailboxItem) -> list[str]:
    return list(
        AgentDecision.objects.filter(mailbox_item_id=item.id)
        .order_by("created_at", "id")
        .values_list("decision_type", flat=True)
    )


def opening(call: dict) -> str:
    """What the session opened with: its user messages, not the loop's context notes."""
    said = [str(m.get("content") or "") for m in call["messages"] if m.get("role") == "user"]
    return "\n".join(s for s in said if not s.startswith(CONTEXT_MARK))


def check_never_alone(items: list[MailboxItem]) -> None:
    """The invariant: an item marked as a batch member is completed only with its lead,
    and a lead only with all its members; nothing is dropped or merged away."""
    rows = {i.id: i for i in MailboxItem.objects.filter(id__in=[i.id for i in items])}
    assert all(r.status not in (Status.DROPPED, Status.MERGED) for r in rows.values()), {
        r.id: r.status for r in rows.values()
    }
    for row in rows.values():
        meta = row.metadata or {}
        if meta.get(BATCH_LEAD) and row.status == Status.COMPLETED:
            lead = MailboxItem.objects.get(id=meta[BATCH_LEAD])
            assert lead.status == Status.COMPLETED, f"{row.id} completed without its lead {lead.id}"
            assert row.id in lead.marks.get(BATCH, []), f"{row.id} completed outside its lead's batch"
        if meta.get(BATCH) and row.status == Status.COMPLETED:
            members = MailboxItem.objects.filter(id__in=meta[BATCH])
            assert all(m.status == Status.COMPLETED for m in members), f"lead {row.id} completed alone"


# ---------------------------------------------------------------------------- the core


@pytest.mark.pg
def test_a_batch_is_processed_in_one_session_and_completed_together(agent, monkeypatch):
    a, b, c = enqueue(agent, "alpha"), enqueue(agent, "beta"), enqueue(agent, "gamma")
    other = enqueue(agent, "unrelated", priority=3)
    provider = brain(Turn(text="all three handled"))
    plan_batch(monkeypatch, a, [b, c])

    result = loop.run_attention(agent.id, budget=1)

    assert result.items == [a.id, b.id, c.id]
    assert statuses(a, b, c, other) == ["completed", "completed", "completed", "queued"]
    assert len(provider.calls) == 1  # one LLM session for all three
    prompt = opening(provider.calls[0])
    for summary in ("alpha", "beta", "gamma"):
        assert f"content of {summary}" in prompt
    assert "Batch item 3 of 3" in prompt
    assert "unrelated" not in prompt.split("BATCH")[1]  # the batch lists only its items
    assert decisions(a) == ["pick"] and decisions(b) == ["pick"] and decisions(c) == ["pick"]
    pick = AgentDecision.objects.get(mailbox_item_id=a.id)
    assert pick.context["batch"] == [b.id, c.id]
    assert AgentDecision.objects.get(mailbox_item_id=b.id).context["batchLeadId"] == a.id
    activity = AgentActivity.objects.get(mailbox_item_id=a.id)  # one activity for the batch
    assert activity.success and activity.label.endswith("(+2 batched)")
    assert not AgentActivity.objects.filter(mailbox_item_id__in=[b.id, c.id]).exists()
    session = LLMSession.objects.get(id=session_id(a))
    assert {b.id, c.id} <= set(session.absorbed_ids)
    assert MailboxItem.objects.get(id=b.id).attempts == 1
    check_never_alone([a, b, c, other])


def test_only_queued_items_that_may_join_are_batched(agent, monkeypatch):
    from mailbox import lifecycle

    a, gone = enqueue(agent, "alpha"), enqueue(agent, "gone")
    lifecycle.drop(gone.id, reason="operator")
    trigger = mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.TASK_STATUS_UPDATE,
        priority=2,
        payload={"summary": "run task", "content": "go", "taskId": "tsk_x", "extra": {"triggerExecution": True}},
    )
    talk = chat(agent)
    ok = enqueue(agent, "beta", kind=T.A2A_MESSAGE, senderName="Bo")
    provider = brain(Turn(text="done"), default=Turn(text="x"))
    # The chat goes first by itself; then the plan names ineligible items.
    loop.run_attention(agent.id, budget=1)
    assert statuses(talk) == ["completed"]
    plan_batch(monkeypatch, a, [gone, trigger, talk, ok, a])

    loop.run_attention(agent.id, budget=1)

    assert statuses(a, ok, trigger, gone) == ["completed", "completed", "queued", "dropped"]
    assert AgentDecision.objects.get(mailbox_item_id=a.id, decision_type="pick").context["batch"] == [ok.id]
    assert "content of beta" in opening(provider.calls[-1])


# ---------------------------------------------------------------------------- interruptions


@pytest.mark.pg
def test_a_batch_preempted_by_a_chat_is_deferred_together_then_resumed_together(agent, monkeypatch):
    a, b, c = enqueue(agent, "alpha"), enqueue(agent, "beta"), enqueue(agent, "gamma")
    provider = brain(
        Turn(tool_calls=[("update_working_memory", {"key": "batch", "content": "started"})]),
        Turn(text="Hello, person"),
        Turn(text="batch finished"),
    )
    # The lead is the newest: when the batch comes back, the oldest member is at the
    # head of the queue and the loop resumes the batch under its lead.
    plan_batch(monkeypatch, c, [a, b])
    talk: list[MailboxItem] = []
    after_call(monkeypatch, provider, 1, lambda: talk.append(chat(agent, "quick question")))

    loop.run_attention(agent.id, budget=1)

    assert statuses(a, b, c) == ["deferred", "deferred", "deferred"]  # none left alone in flight
    assert statuses(talk[0]) == ["queued"]
    until = set(MailboxItem.objects.filter(id__in=[a.id, b.id, c.id]).values_list("deferred_until", flat=True))
    assert len(until) == 1  # they come back together
    assert [MailboxItem.objects.get(id=i.id).attempts for i in (a, b, c)] == [0, 0, 0]
    check_never_alone([a, b, c])

    loop.run_attention(agent.id)

    assert statuses(talk[0], a, b, c) == ["completed"] * 4
    assert [call["scenario"] for call in provider.calls] == ["system_notice", "chat", "system_notice"]
    resumed = without_context(provider.calls[2]["messages"])
    assert all(f"content of {s}" in resumed[0]["content"] for s in ("alpha", "beta", "gamma"))
    assert assistant_turns(resumed)[0]["tool_calls"][0]["function"]["name"] == "update_working_memory"
    assert decisions(c) == ["pick", "preempt", "resume"]
    assert decisions(a) == ["pick", "preempt", "resume"] and decisions(b) == ["pick", "preempt", "resume"]
    assert AgentDecision.objects.filter(mailbox_item_id=c.id, decision_type="resume").last().context["batch"] == [
        a.id,
        b.id,
    ]
    check_never_alone([a, b, c])


def test_a_cancelled_batch_is_requeued_whole_and_its_items_run_again(agent, monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "INTERRUPT_JUDGE", True)
    # One sender's three requests, then that sender calls them off (only the sender may).
    a, b, c = (enqueue(agent, s, senderId=OPS) for s in ("alpha", "beta", "gamma"))
    provider = brain(
        Turn(tool_calls=[("check_mailbox", {})]),
        default=Turn(text="handled"),
        judge_word="cancel",
    )
    plan_batch(monkeypatch, a, [b, c])
    late: list[MailboxItem] = []
    after_call(
        monkeypatch, provider, 1, lambda: late.append(enqueue(agent, "cancel all that", priority=4, senderId=OPS))
    )

    loop.run_attention(agent.id, budget=1)

    assert statuses(a, b, c) == ["queued", "queued", "queued"]  # none completed, none lost
    for item in MailboxItem.objects.filter(id__in=[a.id, b.id, c.id]):
        assert BATCH not in item.marks and BATCH_LEAD not in item.marks
        assert item.attempts == 0
    assert not LLMSession.objects.filter(id=session_id(a)).exists()  # triage decides afresh
    cancel = AgentDecision.objects.get(mailbox_item_id=a.id, decision_type="cancel")
    assert cancel.context["batch"] == [b.id, c.id] and "re-queued" in cancel.outcome
    assert decisions(b) == ["pick", "cancel"]

    loop.run_attention(agent.id)

    assert statuses(a, b, c, late[0]) == ["completed"] * 4


@pytest.mark.pg
def test_a_batch_paused_mid_turn_is_requeued_together_and_resumes_as_a_batch(agent, monkeypatch):
    a, b, c = enqueue(agent, "alpha"), enqueue(agent, "beta"), enqueue(agent, "gamma")
    provider = brain(
        Turn(tool_calls=[("check_mailbox", {})]),
        Turn(text="never finished", delay=10.0),  # cancelled by the pause
        Turn(text="finished after resume"),
    )
    plan_batch(monkeypatch, a, [b, c])
    after_call(monkeypatch, provider, 1, lambda: services.agent_pause(Agent.objects.get(id=agent.id)))

    result = loop.run_attention(agent.id)

    assert result.status == "stopped"
    assert statuses(a, b, c) == ["queued", "queued", "queued"]
    assert [MailboxItem.objects.get(id=i.id).attempts for i in (a, b, c)] == [0, 0, 0]
    assert MailboxItem.objects.get(id=b.id).marks[BATCH_LEAD] == a.id  # still a batch
    assert LLMSession.objects.filter(id=session_id(a)).exists()
    assert AgentActivity.objects.get(mailbox_item_id=a.id).success is False
    check_never_alone([a, b, c])

    services.agent_resume(Agent.objects.get(id=agent.id))
    loop.run_attention(agent.id)

    assert statuses(a, b, c) == ["completed"] * 3
    resumed = without_context(provider.calls[-1]["messages"])
    assert all(f"content of {s}" in resumed[0]["content"] for s in ("alpha", "beta", "gamma"))
    assert assistant_turns(resumed)[0]["tool_calls"][0]["function"]["name"] == "check_mailbox"
    assert decisions(b) == ["pick", "pause", "resume"]
    check_never_alone([a, b, c])


def _steal_lease(agent_id: str) -> None:
    """Another worker takes the agent's lease (this one stalled past its expiry): every
    later write of the old holder is fenced out."""
    AgentAttention.objects.filter(agent_id=agent_id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert lease_take(agent_id, seconds=60) is not None
    # ... and then that worker dies too: its lease runs out.
    AgentAttention.objects.filter(agent_id=agent_id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


@pytest.mark.pg
def test_a_lost_lease_mid_batch_is_recovered_by_requeueing_the_whole_batch(agent, monkeypatch):
    a, b, c = enqueue(agent, "alpha"), enqueue(agent, "beta"), enqueue(agent, "gamma")
    provider = brain(Turn(tool_calls=[("check_mailbox", {})]), Turn(text="done after recovery"))
    plan_batch(monkeypatch, a, [b, c])
    after_call(monkeypatch, provider, 1, lambda: _steal_lease(agent.id))

    lost = loop.run_attention(agent.id)

    assert lost.status == "stale"
    assert statuses(a, b, c) == ["processing"] * 3  # the dead worker's: nobody's now

    loop.run_attention(agent.id)

    assert statuses(a, b, c) == ["completed"] * 3  # re-queued together, none dropped
    assert [MailboxItem.objects.get(id=i.id).marks["crashes"] for i in (a, b, c)] == [1, 1, 1]
    assert "content of gamma" in opening(provider.calls[-1])  # processed together again
    dead = AgentActivity.objects.filter(mailbox_item_id=a.id).order_by("started_at").first()
    assert dead.success is False
    assert "re-queued" in dead.logs.order_by("-seq").first().content
    assert decisions(b) == ["pick", "pick"]
    check_never_alone([a, b, c])


def test_a_plain_item_in_flight_at_a_crash_is_still_dropped(agent, monkeypatch):
    """The contrast (unchanged behaviour): an item nobody waits for, not in a batch, is
    dropped by recovery with a reason."""
    a = enqueue(agent, "alpha")
    provider = brain(Turn(tool_calls=[("check_mailbox", {})]))
    after_call(monkeypatch, provider, 1, lambda: _steal_lease(agent.id))
    assert loop.run_attention(agent.id).status == "stale"
    loop.run_attention(agent.id)
    assert statuses(a) == ["dropped"]


def test_a_batch_that_fails_is_dissolved_and_each_item_runs_by_itself(agent, monkeypatch):
    a, b = enqueue(agent, "alpha"), enqueue(agent, "beta")
    provider = brain(Turn(text=""), default=Turn(text="ok"))
    plan_batch(monkeypatch, a, [b])

    loop.run_attention(agent.id, budget=1)

    assert statuses(a, b) == ["queued", "queued"]
    assert [MailboxItem.objects.get(id=i.id).marks.get("markerRetries") for i in (a, b)] == [1, 1]

    loop.run_attention(agent.id)

    assert statuses(a, b) == ["completed", "completed"]
    assert len(provider.calls) == 3  # the failed batch, then each by itself


def test_a_batch_waiting_for_an_approval_waits_together_and_resumes_together(agent, alice, monkeypatch):
    from notifications.models import Approval
    from notifications.services import approval_respond

    a = enqueue(agent, "alpha", kind=T.A2A_MESSAGE, senderName="Bo")
    b = enqueue(agent, "beta", kind=T.A2A_MESSAGE, senderName="Cy")
    provider = brain(
        Turn(tool_calls=[("request_user_approval", {"title": "ok?", "description": "may I"})]),
        Turn(text="approved, done"),
    )
    plan_batch(monkeypatch, a, [b])

    loop.run_attention(agent.id)

    assert statuses(a, b) == ["deferred", "deferred"]
    approval = Approval.objects.get(mailbox_item_id=a.id)
    assert MailboxItem.objects.get(id=b.id).marks["approvalId"] == approval.id
    approval_respond(user=approval.user, approval_id=approval.id, selected_option="approve")
    assert statuses(a, b) == ["queued", "queued"]

    loop.run_attention(agent.id)

    assert statuses(a, b) == ["completed", "completed"]
    assert "content of beta" in opening(provider.calls[-1])


# ---------------------------------------------------------------------------- trying to break it


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_batches_are_never_lost_nor_completed_alone_whatever_interrupts_them(agent, monkeypatch, seed, sent_events):
    """Rounds of batches, each interrupted in a random way (a chat preempts it, the
    agent is paused and resumed, a judge cancels it, its lease is lost, its answer
    fails) or not at all, with the batch's items re-chosen in random order; after every
    run no batch item is completed without the rest of its batch and nothing is
    dropped; at the end every item is completed exactly once."""
    rng = random.Random(seed)
    monkeypatch.setitem(settings.MARKUS, "INTERRUPT_JUDGE", True)
    everything: list[MailboxItem] = []
    interruptions = ["chat", "pause", "cancel", "lease", "fail", "none"]
    rng.shuffle(interruptions)
    for n, how in enumerate(interruptions):
        items = [
            enqueue(agent, f"r{n} item {i}", priority=rng.choice([2, 3]), senderId=OPS)
            for i in range(rng.randint(2, 4))
        ]
        everything.extend(items)
        rng.shuffle(items)
        lead, members = items[0], items[1:]
        provider = brain(
            Turn(tool_calls=[("check_mailbox", {})]),
            default=Turn(text="handled"),
            judge_word="cancel" if how == "cancel" else None,
        )
        after_call(monkeypatch, provider, 1, _interruption(how, agent, provider, everything, n))
        monkeypatch.setattr(loop, "_begin", ORIGINAL_BEGIN)
        plan_batch(monkeypatch, lead, members)

        loop.run_attention(agent.id, budget=1)
        check_never_alone(everything)
        done = {s == Status.COMPLETED for s in statuses(lead, *members)}
        assert len(done) == 1, f"{how}: part of the batch completed, part not"
        assert done == {how == "none"}, how
        if how == "pause":
            services.agent_resume(Agent.objects.get(id=agent.id))
        for _ in range(6):
            loop.run_attention(agent.id)
            check_never_alone(everything)
        assert statuses(*everything) == ["completed"] * len(everything), how

    # Every item completed exactly once: one completion announced for each.
    completions = Counter(
        e["item"]["id"]
        for _, e in sent_events
        if e.get("type") == "agent:mailbox" and e["item"]["status"] == Status.COMPLETED
    )
    assert completions == Counter({i.id: 1 for i in everything})


def _interruption(
    how: str, agent: Agent, provider: ScriptedProvider, everything: list[MailboxItem], n: int
) -> Callable[[], None]:
    """What happens between the batch's first and second turn."""
    if how == "chat":
        return lambda: everything.append(chat(agent, f"chat {n}"))
    if how == "pause":

        def pause() -> None:
            services.agent_pause(Agent.objects.get(id=agent.id))
            time.sleep(0.15)  # past the loop's cached look at the agent's status

        return pause
    if how == "cancel":
        return lambda: everything.append(enqueue(agent, f"cancel {n}", priority=4, senderId=OPS))
    if how == "lease":
        return lambda: _steal_lease(agent.id)
    if how == "fail":
        return lambda: provider.turns.insert(0, Turn(text=""))
    return lambda: None


ORIGINAL_BEGIN = loop._begin
