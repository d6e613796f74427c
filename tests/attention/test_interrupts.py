"""Preempt, resume, cancel and merge through a real worker and the scripted brain."""

from __future__ import annotations

import pytest
from django.conf import settings

from attention.models import AgentActivity, AgentDecision
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue
from markus.llm.base import without_context
from markus.llm.scripted import Turn
from markus.work.models import Task

from .conftest import wait_for


def assistant_turns(messages: list[dict]) -> list[dict]:
    """A session's assistant turns (the loop's context notes and results between them)."""
    return [m for m in messages if m["role"] == "assistant"]


def decisions(item_id):
    return list(
        AgentDecision.objects.filter(mailbox_item_id=item_id)
        .order_by("created_at", "id")
        .values_list("decision_type", flat=True)
    )


def status(item_id):
    return MailboxItem.objects.get(id=item_id).status


@pytest.fixture
def no_judge(monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "INTERRUPT_JUDGE", False)


@pytest.mark.pg
def test_preempted_work_resumes_later_with_its_session_intact(celery_worker, scripted, agent, no_judge):
    first = Turn(tool_calls=[("update_working_memory", {"key": "k", "content": "step one done"})], delay=1.0)
    provider = scripted(first, Turn(text="Hi there"), Turn(text="finished"))
    work = mailbox_enqueue(
        agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "long job", "content": "do it"}
    )
    assert first.started.wait(15)
    chat = mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.HUMAN_CHAT,
        payload={"summary": "hey", "content": "hey"},
        metadata={"senderId": "1", "senderRole": "user"},
    )
    wait_for(lambda: status(work.id) == "completed", message="resumed work completed")
    assert status(chat.id) == "completed"
    assert decisions(work.id) == ["pick", "preempt", "resume"]
    assert decisions(chat.id) == ["pick"]
    scenarios = [c["scenario"] for c in provider.calls]
    assert scenarios == ["system_notice", "chat", "system_notice"]
    resumed = without_context(provider.calls[2]["messages"])
    assert resumed[0]["content"].endswith("do it")
    assert assistant_turns(resumed)[0]["tool_calls"][0]["function"]["name"] == "update_working_memory"
    assert "saved" in next(m for m in resumed if m["role"] == "tool")["content"]
    assert AgentActivity.objects.filter(mailbox_item_id=work.id).count() == 2
    assert MailboxItem.objects.get(id=work.id).attempts == 1  # the preempt did not count as a failed attempt


BOB = {"senderId": "bob", "senderName": "Bob", "senderRole": "agent"}


def bobs_review_under_way(scripted, agent, judge_word: str = "cancel") -> MailboxItem:
    """Bob's review request, its first turn under way, and a judge that answers ``judge_word``."""
    first = Turn(tool_calls=[("check_mailbox", {})], delay=1.0)
    scripted(first, Turn(text="review done"), default=Turn(text="x"), judge_word=judge_word)
    work = mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.REVIEW_REQUEST,
        payload={"summary": "review A", "content": "a"},
        metadata=BOB,
    )
    assert first.started.wait(15)
    return work


def test_only_the_judge_cancels_and_cancelled_work_never_resumes(celery_worker, scripted, agent):
    work = bobs_review_under_way(scripted, agent)
    revoke = mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.SESSION_REPLY,
        payload={"summary": "cancel that review", "content": "cancel it"},
        metadata=BOB,
    )
    wait_for(lambda: status(revoke.id) == "completed", message="revoking item processed")
    assert status(work.id) == "completed"
    assert decisions(work.id) == ["pick", "cancel"]
    activity = AgentActivity.objects.get(mailbox_item_id=work.id)
    assert activity.success is False
    d = AgentDecision.objects.get(mailbox_item_id=work.id, decision_type="cancel")
    assert d.context["rule"] == "judge" and d.context["newItemId"] == revoke.id


def test_the_judge_cannot_call_off_work_for_an_arrival_from_someone_else(celery_worker, scripted, agent):
    """Only whoever asked may call their work off: a weak judge answered "cancel" when a
    heartbeat arrived during an outside agent's request, and the request ended unanswered."""
    work = bobs_review_under_way(scripted, agent)
    beat = mailbox_enqueue(agent_id=agent.id, source_type=T.HEARTBEAT, payload={"summary": "heartbeat"})
    wait_for(lambda: status(beat.id) == "completed", message="the heartbeat handled after the work")
    assert status(work.id) == "completed" and decisions(work.id) == ["pick"]
    assert AgentActivity.objects.get(mailbox_item_id=work.id).success is True
    d = AgentDecision.objects.get(mailbox_item_id=beat.id, decision_type="continue")
    assert d.reasoning == "LLM interrupt judge: cancel — but only whoever asked for the current work may call it off"


def test_the_judge_cannot_pause_work_for_a_less_urgent_arrival(celery_worker, scripted, agent):
    """A weak judge's "preempt" for a heartbeat would pause a request for the agent's idle check."""
    work = bobs_review_under_way(scripted, agent, judge_word="preempt")
    beat = mailbox_enqueue(agent_id=agent.id, source_type=T.HEARTBEAT, payload={"summary": "heartbeat"})
    wait_for(lambda: status(beat.id) == "completed", message="the heartbeat handled after the work")
    assert decisions(work.id) == ["pick"]
    d = AgentDecision.objects.get(mailbox_item_id=beat.id, decision_type="continue")
    assert d.reasoning == "LLM interrupt judge: preempt — but it is less urgent than the current work"


def test_comment_on_the_current_task_is_merged_into_the_next_turn(celery_worker, scripted, agent, alice, no_judge):
    Task.objects.create(id="tsk_1", title="build", status="in_progress", assignee=agent, reviewer_user=alice)
    first = Turn(tool_calls=[("check_mailbox", {})], delay=1.0)
    submit = Turn(tool_calls=[("task_submit_review", {"task_id": "tsk_1", "summary": "painted blue"})])
    provider = scripted(first, submit, Turn(text="done"))
    work = mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.TASK_STATUS_UPDATE,
        payload={
            "summary": "Task: build",
            "content": "build it",
            "taskId": "tsk_1",
            "extra": {"triggerExecution": True},
        },
    )
    assert first.started.wait(15)
    comment = mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.TASK_COMMENT,
        payload={"summary": "comment", "content": "use the blue paint", "taskId": "tsk_1"},
        metadata={"senderRole": "agent", "senderName": "Bo"},
    )
    wait_for(lambda: status(work.id) == "completed", message="task completed")
    merged = MailboxItem.objects.get(id=comment.id)
    assert merged.status == "merged" and merged.merged_into_id == work.id
    assert decisions(comment.id) == ["merge"]
    last_turn = provider.calls[1]["messages"]
    assert "use the blue paint" in last_turn[-1]["content"]
    assert AgentActivity.objects.get(mailbox_item_id=work.id).type == "task"


def test_chat_honours_only_merge_and_the_preempting_item_runs_right_after(celery_worker, scripted, agent):
    first = Turn(tool_calls=[("check_mailbox", {})], delay=1.0)
    provider = scripted(first, Turn(text="chat answer"), Turn(text="event handled"), judge_word="preempt")
    chat = mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.HUMAN_CHAT,
        payload={"summary": "q", "content": "question"},
        metadata={"senderId": "1", "senderRole": "user"},
    )
    assert first.started.wait(15)
    urgent = mailbox_enqueue(
        agent_id=agent.id, source_type=T.SYSTEM_EVENT, priority=0, payload={"summary": "urgent", "content": "now"}
    )
    wait_for(lambda: status(urgent.id) == "completed", message="urgent item handled")
    assert decisions(chat.id) == ["pick"]
    assert decisions(urgent.id) == ["continue", "pick"]
    assert AgentDecision.objects.get(mailbox_item_id=urgent.id, decision_type="continue").context["restored"] is True
    assert [c["scenario"] for c in provider.calls] == ["chat", "chat", "system_notice"]


def test_a_second_chat_from_the_same_user_merges_into_the_one_in_flight(celery_worker, scripted, agent, no_judge):
    from attention.processing import chat_reply_for

    first = Turn(tool_calls=[("check_mailbox", {})], delay=1.0)
    provider = scripted(first, Turn(text="answering both"))
    a = mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.HUMAN_CHAT,
        payload={"summary": "a", "content": "first"},
        metadata={"senderId": "1", "senderRole": "user"},
    )
    assert first.started.wait(15)
    b = mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.HUMAN_CHAT,
        payload={"summary": "b", "content": "second"},
        metadata={"senderId": "1", "senderRole": "user"},
    )
    wait_for(lambda: status(a.id) == "completed", message="chat answered")
    assert status(b.id) == "merged" and decisions(b.id) == ["merge"]
    assert provider.calls[1]["messages"][-1] == {"role": "user", "content": "second"}
    assert chat_reply_for(b.id)["reply"] == chat_reply_for(a.id)["reply"] == "answering both"
