"""The edges of the deliberation, batches, the mailbox tools, the mini triage and working
memory: what the deciding turn writes, stages and reprioritises is kept and seen, its
reads are bounded, a batch cannot be forged or silently trimmed, and the triage reads a
decision wrapped in prose."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from attention import loop
from attention.models import AgentActivityLog, AgentDecision
from attention.scenarios import DELIBERATION
from attention.toolbox import ToolContext, execute_tool
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue
from markus.agents.models import WorkingMemory
from markus.llm.base import set_provider_override
from markus.llm.scripted import ScriptedProvider, Turn
from tests.attention.helpers import picked
from tests.conftest import client_for


@pytest.fixture(autouse=True)
def _no_override():
    yield
    set_provider_override(None)


def enqueue(agent, summary, priority=2, minutes_ago=0, kind=T.SYSTEM_EVENT, **meta):
    item = mailbox_enqueue(
        agent_id=agent.id,
        source_type=kind,
        priority=priority,
        payload={"summary": summary, "content": summary},
        metadata=meta or None,
    )
    if minutes_ago:
        MailboxItem.objects.filter(id=item.id).update(queued_at=timezone.now() - timedelta(minutes=minutes_ago))
    return item


def status(item):
    return MailboxItem.objects.get(id=item.id).status


def run(agent, brain, **kw):
    set_provider_override(brain)
    return loop.run_attention(agent.id, **kw)


# ---------------------------------------------------------------------------- working memory


@pytest.mark.django_db(transaction=True)
def test_memory_written_in_the_deciding_turn_counts_toward_the_bound_and_reaches_the_next_prompt(agent, monkeypatch):
    """update_working_memory in the turn that calls complete_deliberation is ignored by the
    loop's cached copy: the bound is exceeded and the next prompt misses the entry."""
    monkeypatch.setitem(settings.MARKUS, "WORKING_MEMORY_MAX_CHARS", 400)  # an entry: at most 100
    now = timezone.now()
    for key, ago in (("oldest", timedelta(days=3)), ("older", timedelta(days=1))):
        WorkingMemory.objects.create(agent=agent, key=key, content=key[0] * 94, updated_at=now - ago)
    a = enqueue(agent, "a", minutes_ago=2)
    enqueue(agent, "b", minutes_ago=1)
    brain = ScriptedProvider(
        [Turn(text="ok")],
        deliberation=[
            Turn(
                tool_calls=[
                    ("update_working_memory", {"key": "fresh", "content": "f" * 95}),
                    (
                        "complete_deliberation",
                        {"process_item_id": a.id, "reasoning": "r", "situational_awareness": "s" * 95},
                    ),
                ]
            )
        ],
    )
    run(agent, brain, budget=1)
    total = sum(len(k) + len(v) for k, v in WorkingMemory.objects.filter(agent=agent).values_list("key", "content"))
    assert total <= 400, f"working memory holds {total} characters, over its bound of 400"
    assert "- fresh (just now): " in json.dumps(brain.calls[0]["messages"])  # the loop's context note


@pytest.mark.django_db
def test_the_working_memory_tools_answer_a_null_key_with_a_tool_error(agent):
    """update_working_memory / clear_working_memory with key null crash (AttributeError)
    instead of a ToolError the LLM can act on."""
    ctx = ToolContext(agent_id=agent.id, agent_name="Ada", scenario=DELIBERATION)
    for name, args in (
        ("update_working_memory", {"key": None, "content": "x"}),
        ("clear_working_memory", {"key": None}),
    ):
        ok, result = execute_tool(ctx, name, args)
        error = json.loads(result)["error"]
        assert not ok
        assert "failed: AttributeError" not in error and "key" in error, f"{name}: {error}"


# ---------------------------------------------------------------------------- the deliberation's decision


@pytest.mark.django_db(transaction=True)
def test_a_drop_staged_after_complete_deliberation_in_the_same_turn_is_not_silently_lost(agent):
    """drop_mailbox_item after complete_deliberation in one turn answers "applied when you call
    complete_deliberation" but is never applied (nor refused)."""
    a = enqueue(agent, "a", minutes_ago=2)
    b = enqueue(agent, "b", minutes_ago=1)
    brain = ScriptedProvider(
        [Turn(text="ok")],
        deliberation=[
            Turn(
                tool_calls=[
                    ("complete_deliberation", {"process_item_id": a.id, "reasoning": "a first"}),
                    ("drop_mailbox_item", {"item_id": b.id, "reason": "duplicate of a"}),
                ]
            )
        ],
    )
    run(agent, brain, budget=1)
    end = AgentActivityLog.objects.get(type="tool_end", metadata__name="drop_mailbox_item")
    assert status(b) == "dropped" or end.metadata["ok"] is False, (
        f"the drop was accepted ({end.content}) but {b.id} is still {status(b)}"
    )


@pytest.mark.django_db(transaction=True)
def test_a_reprioritisation_by_the_deliberation_is_a_decision_visible_on_the_item(agent):
    """prioritize_mailbox_item during a deliberation changes the item's priority with no
    decision recorded (nothing in the mind view, nor in the deliberate decision)."""
    a = enqueue(agent, "a", minutes_ago=3)
    b = enqueue(agent, "b", minutes_ago=2)
    enqueue(agent, "c", minutes_ago=1)
    brain = ScriptedProvider(
        [Turn(text="ok")],
        deliberation=[
            Turn(
                tool_calls=[
                    ("prioritize_mailbox_item", {"item_id": b.id, "priority": 0}),
                    ("complete_deliberation", {"process_item_id": a.id, "reasoning": "a now, b is urgent next"}),
                ]
            )
        ],
    )
    run(agent, brain, budget=1)
    assert MailboxItem.objects.get(id=b.id).priority == 0
    assert AgentDecision.objects.filter(mailbox_item_id=b.id).exists(), "no decision records b's new priority"


@pytest.mark.django_db
def test_complete_deliberation_reads_the_items_it_names_in_a_bounded_number_of_queries(agent):
    """check_decision reads each named item with its own query (N+1): 40 items, 40 queries."""
    items = [enqueue(agent, f"n{i}") for i in range(40)]
    ctx = ToolContext(agent_id=agent.id, agent_name="Ada", scenario=DELIBERATION)

    def queries(n: int) -> int:
        args = {
            "process_item_id": items[0].id,
            "reasoning": "clean up",
            "drop": [{"item_id": i.id, "reason": "dup"} for i in items[1:n]],
        }
        with CaptureQueriesContext(connection) as q:
            ok, result = execute_tool(ctx, "complete_deliberation", args)
        assert ok, result
        return len(q.captured_queries)

    few, many = queries(3), queries(40)
    assert many - few <= 2, f"naming 3 items took {few} queries, naming 40 took {many}"


# ---------------------------------------------------------------------------- batches


@pytest.mark.django_db(transaction=True)
def test_an_api_caller_cannot_forge_a_batch_through_item_metadata(agent, bob, monkeypatch):
    """POST /mailbox keeps metadata.batch / batchLead as given: a teammate drags another
    queued item (here an agent's message) into his item's session, unchosen."""
    monkeypatch.setitem(settings.MARKUS, "TRIAGE", False)
    other = enqueue(agent, "a colleague's question", kind=T.A2A_MESSAGE, senderId="zed", senderName="Zed")
    response = client_for(bob).post(
        f"/api/agents/{agent.id}/mailbox",
        data=json.dumps(
            {
                "sourceType": "human_chat",  # what a teammate may post (system_event: 403)
                "priority": 1,
                "payload": {"summary": "hi", "content": "hi"},
                "metadata": {"batch": [other.id]},
            }
        ),
        content_type="application/json",
    )
    assert response.status_code in (201, 400)
    if response.status_code == 400:  # refused, with a reason (nothing was enqueued)
        assert "batch" in response.json()["detail"]
        assert MailboxItem.objects.filter(agent_id=agent.id).count() == 1
        return
    brain = ScriptedProvider([Turn(text="ok")], default=Turn(text="ok"))
    run(agent, brain, budget=1)
    assert status(other) == "queued", "the colleague's message was processed inside the forged batch"


# ---------------------------------------------------------------------------- the mini triage


@pytest.mark.django_db(transaction=True)
def test_the_mini_triage_reads_a_json_decision_with_braces_in_the_prose_around_it(agent, monkeypatch):
    """parse_answer's greedy {.*} spans from the first brace to the last: a valid JSON decision
    with a brace in the surrounding text is taken as malformed and the head runs instead."""
    monkeypatch.setitem(settings.MARKUS, "DELIBERATION", False)
    enqueue(agent, "a", minutes_ago=2)
    b = enqueue(agent, "b", minutes_ago=1)
    answer = (
        f'Decision: {{"processItemId": "{b.id}", "deferItemIds": [], "dropItemIds": [], '
        '"reasoning": "b blocks the release"} — I will get back to {a} afterwards.'
    )
    brain = ScriptedProvider([Turn(text="ok")], triage_turns=[Turn(text=answer)])
    run(agent, brain, budget=1)
    assert picked(agent) == ["b"]


# ---------------------------------------------------------------------------- the offline brain


@pytest.mark.django_db(transaction=True)
def test_the_offline_deliberation_does_not_drop_the_report_request_of_an_earlier_day(agent):
    """Daily reports are "periodic": the offline deliberation drops yesterday's report request
    as superseded by today's, though each asks for its own day (that day's report is lost)."""
    from markus.llm.offline import OfflineProvider

    yesterday = enqueue(
        agent,
        "Daily report for 2026-11-30",
        3,
        minutes_ago=30,
        kind=T.DAILY_REPORT,
    )
    MailboxItem.objects.filter(id=yesterday.id).update(
        payload={**yesterday.payload, "extra": {"period": "2026-11-30", "date": "2026-11-30"}}
    )
    today = enqueue(agent, "Daily report for 2026-12-01", 3, minutes_ago=1, kind=T.DAILY_REPORT)
    MailboxItem.objects.filter(id=today.id).update(
        payload={**today.payload, "extra": {"period": "2026-12-01", "date": "2026-12-01"}}
    )
    run(agent, OfflineProvider(), budget=1)
    item = MailboxItem.objects.get(id=yesterday.id)
    assert item.status != "dropped", f"the report request for 2026-11-30 was dropped: {item.drop_reason}"


@pytest.mark.django_db(transaction=True)
def test_the_mini_triage_offers_a_stale_informational_item_behind_ten_others(agent, monkeypatch):
    """The mini triage sees only the loop's read of the queue (10 items): a stale informational
    item behind them is never offered as a stale candidate."""
    monkeypatch.setitem(settings.MARKUS, "DELIBERATION", False)
    enqueue(agent, "urgent", 1, minutes_ago=1)
    enqueue(agent, "urgent too", 1, minutes_ago=0.5)  # a rival: a head alone in its priority goes at once
    for i in range(10):
        enqueue(agent, f"work {i}", 2, minutes_ago=2)
    stale = enqueue(agent, "status: in review", 3, minutes_ago=5 * 60, kind=T.TASK_STATUS_UPDATE)
    MailboxItem.objects.filter(id=stale.id).update(payload={**stale.payload, "taskId": "t9"})
    brain = ScriptedProvider(
        [Turn(text="ok")],
        triage_answer=lambda c: {"processItemId": c[0]["id"], "dropItemIds": [], "reasoning": "head"},
    )
    run(agent, brain, budget=1)
    offered = [c["id"] for call in brain.triage_calls for c in call]
    assert stale.id in offered, "the stale informational item was never offered to the mini triage"


@pytest.mark.django_db
def test_a_batch_over_its_limit_is_a_tool_error_not_silently_trimmed(agent):
    """complete_deliberation accepted more batch ids than a batch may hold (MAX_BATCH) and
    answered "accepted"; the claim then left the extra ones out without a word."""
    from attention.batch import MAX_BATCH

    items = [enqueue(agent, f"notice {i}") for i in range(MAX_BATCH + 2)]
    ctx = ToolContext(agent_id=agent.id, agent_name="Ada", scenario=DELIBERATION)
    args = {"process_item_id": items[0].id, "batch_item_ids": [i.id for i in items[1:]], "reasoning": "all notices"}
    ok, result = execute_tool(ctx, "complete_deliberation", args)
    assert not ok and f"at most {MAX_BATCH}" in json.loads(result)["error"]
    args["batch_item_ids"] = args["batch_item_ids"][:MAX_BATCH]
    ok, result = execute_tool(ctx, "complete_deliberation", args)
    assert ok, result
