"""A deliberation is a plan span inside the item span it chose for, with its own LLM and
tool calls beneath it; work an agent's tool hands to another agent (a review request)
carries the trace on, so one trace follows a task across agents."""

from __future__ import annotations

import pytest

from attention.loop import run_attention
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from markus.agents.services import agent_create
from markus.core.actors import Actor
from markus.work.services import task_create
from tests.attention.helpers import enqueue


def _children(finished, parent):
    return [s for s in finished if s.parent is not None and s.parent.span_id == parent.context.span_id]


@pytest.mark.django_db
def test_a_deliberation_is_a_plan_span_inside_the_item_span_with_its_calls_beneath(spans, agent, settings):
    settings.MARKUS = {**settings.MARKUS, "DELIBERATION": True, "TRIAGE": True}
    for n in range(3):  # rivals: one priority, none a person's
        enqueue(agent, T.SYSTEM_EVENT, f"event {n}", 2, minutes_ago=3 - n)
    result = run_attention(agent.id, budget=1)
    chosen, *batch = result.items  # the deliberation may take the others along as a batch
    finished = spans.get_finished_spans()
    [root] = [s for s in finished if s.name == "invoke_agent Ada"]
    assert root.attributes["markus.mailbox.item_id"] == chosen
    assert list(root.attributes.get("markus.mailbox.batch", ())) == batch
    [plan] = [s for s in _children(finished, root) if s.name == "plan Ada"]
    assert plan.attributes["gen_ai.operation.name"] == "plan"
    assert plan.attributes["markus.plan.kind"] == "deliberation"
    assert plan.attributes["markus.plan.result"] == "Plan"
    beneath = _children(finished, plan)
    assert any(s.name.startswith("chat ") and s.attributes["markus.scenario"] == "deliberation" for s in beneath)
    assert "execute_tool complete_deliberation" in {s.name for s in beneath}
    assert plan.end_time <= min(s.start_time for s in _children(finished, root) if s.name.startswith("chat "))


@pytest.mark.django_db
def test_a_review_request_an_agent_files_for_another_joins_the_trace_of_its_task(spans, agent, alice, team):
    reviewer, _ = agent_create(name="Bea", agent_id="bea", owner=alice, team=team)
    task = task_create(
        actor=Actor.for_user(alice), title="Write the parser", assignee_id=agent.id, reviewer_agent_id=reviewer.id
    )
    run_attention(agent.id)
    review = MailboxItem.objects.get(agent=reviewer, source_type=T.REVIEW_REQUEST, payload__taskId=task.id)
    run_attention(reviewer.id)
    finished = spans.get_finished_spans()
    [ada] = [s for s in finished if s.name == "invoke_agent Ada"]
    [bea] = [s for s in finished if s.name == "invoke_agent Bea"]
    assert bea.attributes["markus.mailbox.item_id"] == review.id
    assert bea.context.trace_id == ada.context.trace_id
    [submit] = [s for s in finished if s.name == "execute_tool task_submit_review"]
    assert bea.parent.span_id == submit.context.span_id  # enqueued by that tool call


@pytest.mark.django_db
def test_a_mini_triage_is_a_plan_span_with_its_llm_call_beneath(spans, agent, settings):
    settings.MARKUS = {**settings.MARKUS, "DELIBERATION": False, "TRIAGE": True}
    for n in range(3):
        enqueue(agent, T.SYSTEM_EVENT, f"event {n}", 2, minutes_ago=3 - n)
    run_attention(agent.id, budget=1)
    finished = spans.get_finished_spans()
    [root] = [s for s in finished if s.name == "invoke_agent Ada"]
    [plan] = [s for s in _children(finished, root) if s.name == "plan Ada"]
    assert plan.attributes["markus.plan.kind"] == "mini_triage"
    assert [s.attributes["markus.scenario"] for s in _children(finished, plan)] == ["triage"]
