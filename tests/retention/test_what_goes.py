"""What a prune removes and what it never removes: finished items past the policy go with
their decisions, activities, logs, tool calls and session; open work, parked approvals,
a task's history, the A2A door's items and pending reminders stay."""

from __future__ import annotations

import pytest

from attention.models import (
    AgentActivity,
    AgentActivityLog,
    AgentAttention,
    AgentDecision,
    LLMSession,
    ToolCallRecord,
    ToolCallState,
)
from attention.scenarios import SESSION_RESPONSE, TASK_EXECUTION
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from markus.a2a.models import A2ATask
from markus.agents.models import ChatSession
from markus.retention.services import prune
from markus.work.models import StatusChange, Task, TaskComment, TaskState
from notifications.models import Approval

from .rows import OLD, RECENT, days_ago, exists, item, with_history

pytestmark = [pytest.mark.django_db, pytest.mark.pg]


def test_an_old_finished_item_goes_with_everything_that_hangs_off_it(agent):
    gone = with_history(item(agent), logs=3)
    kept = with_history(item(agent, age=RECENT))

    run = prune()

    assert not exists(gone) and exists(kept)
    assert run.counts == {
        "agent_activity_logs": 3,
        "agent_activities": 1,
        "agent_decisions": 1,
        "tool_calls": 1,
        "llm_sessions": 1,
        "mailbox_items": 1,
        "agentbus_chunks": 0,
        "agentbus_outbox": 0,
        "agentbus_audit": 0,
    }
    assert AgentDecision.objects.filter(mailbox_item=kept).count() == 1
    assert AgentActivityLog.objects.filter(activity__mailbox_item=kept).count() == 2
    assert LLMSession.objects.filter(mailbox_item=kept).count() == 1
    assert ToolCallRecord.objects.filter(mailbox_item=kept).count() == 1


@pytest.mark.parametrize("status", [Status.DROPPED, Status.MERGED])
def test_dropped_and_merged_items_go_like_completed_ones(agent, status):
    it = item(agent, status=status)
    prune()
    assert not exists(it)


@pytest.mark.parametrize("status", [Status.QUEUED, Status.PROCESSING, Status.DEFERRED])
def test_open_work_stays_however_old(agent, status):
    it = with_history(item(agent, status=status))
    prune()
    assert exists(it)
    assert AgentActivity.objects.filter(mailbox_item=it).exists()
    assert LLMSession.objects.filter(mailbox_item=it).exists()


def test_a_pending_reminder_stays(agent):
    reminder = item(agent, status=Status.DEFERRED, source_type=MailboxType.REMINDER, deferred_until=days_ago(-3))
    prune()
    assert exists(reminder)


def test_an_item_merged_into_open_work_stays_until_that_work_ends(agent):
    survivor = item(agent, status=Status.QUEUED)
    absorbed = item(agent, status=Status.MERGED, merged_into=survivor)
    prune()
    assert exists(absorbed)

    MailboxItem.objects.filter(pk=survivor.pk).update(status=Status.COMPLETED, completed_at=days_ago(OLD))
    prune()
    assert not exists(absorbed) and not exists(survivor)


def test_the_item_an_agent_is_focused_on_stays(agent):
    it = item(agent)
    AgentAttention.objects.update_or_create(agent=agent, defaults={"current_item": it})
    prune()
    assert exists(it)


def test_an_item_a_pending_approval_names_stays_and_an_answered_one_does_not_keep_it(agent, alice):
    parked = item(agent)
    waiting_by_mark = item(agent, marks={"approvalId": "apr_wait"})
    answered = item(agent)
    Approval.objects.create(user=alice, agent=agent, mailbox_item=parked, title="Deploy?")
    Approval.objects.create(id="apr_wait", user=alice, agent=agent, title="Spend?")
    done = Approval.objects.create(
        user=alice, agent=agent, mailbox_item=answered, title="Merge?", status=Approval.State.ANSWERED
    )

    prune()

    assert exists(parked) and exists(waiting_by_mark) and not exists(answered)
    done.refresh_from_db()
    assert done.mailbox_item_id is None  # the answered approval itself stays, unlinked


def test_an_item_with_a_tool_call_awaiting_a_person_stays(agent):
    it = item(agent)
    ToolCallRecord.objects.create(
        mailbox_item=it, attempt="att_1", turn=1, position=0, name="deploy", state=ToolCallState.AWAITING
    )
    prune()
    assert exists(it)


def test_items_about_an_open_task_stay(agent):
    task = Task.objects.create(title="Fix the build", status=TaskState.IN_PROGRESS, assignee=agent)
    about = with_history(item(agent, source_type=MailboxType.TASK_COMMENT, payload={"taskId": task.id}))
    unrelated = item(agent)
    prune()
    assert exists(about) and not exists(unrelated)


@pytest.fixture
def shipped(agent, alice):
    """A finished task with its status history and a comment, 40 days old."""
    task = Task.objects.create(title="Ship it", status=TaskState.COMPLETED, assignee=agent)
    StatusChange.objects.create(
        entity=StatusChange.Entity.TASK,
        entity_id=task.id,
        to_status=TaskState.COMPLETED,
        actor_kind="user",
        actor_id=str(alice.pk),
        actor_name="alice",
        at=days_ago(OLD),
    )
    TaskComment.objects.create(task=task, author_user=alice, content="thanks", created_at=days_ago(OLD))
    return task


def execution(agent, task: Task, age: float) -> MailboxItem:
    payload = {"taskId": task.id, "extra": {"triggerExecution": True}}
    return item(agent, age=age, source_type=MailboxType.TASK_STATUS_UPDATE, payload=payload)


def test_a_finished_tasks_last_execution_stays_and_its_history_is_untouched(agent, shipped):
    first, last = execution(agent, shipped, 60), execution(agent, shipped, 45)
    info = item(agent, age=50, source_type=MailboxType.TASK_STATUS_UPDATE, payload={"taskId": shipped.id})

    prune()

    assert not exists(first) and not exists(info)
    assert exists(last)  # a person's later comment names it (comment_services._last_execution)
    assert StatusChange.objects.filter(entity_id=shipped.id).count() == 1
    assert TaskComment.objects.filter(task=shipped).count() == 1


def test_a_finished_tasks_latest_session_stays_with_its_item(agent, shipped):
    run = with_history(execution(agent, shipped, 60), scenario=TASK_EXECUTION)
    reply_payload = {"taskId": shipped.id, "summary": "a comment after the end"}
    reply = item(agent, age=45, source_type=MailboxType.SESSION_REPLY, payload=reply_payload)
    with_history(reply, scenario=SESSION_RESPONSE)

    prune()

    # The next comment continues the newest task session (attention.session.resumed_messages).
    assert exists(reply) and LLMSession.objects.filter(mailbox_item=reply).exists()
    assert exists(run)  # the last execution
    assert not LLMSession.objects.filter(mailbox_item=run).exists()  # an older session: ended


def test_an_item_the_a2a_door_follows_stays_and_so_does_the_item_it_was_merged_into(agent):
    survivor = item(agent)
    merged = item(agent, status=Status.MERGED, merged_into=survivor)
    A2ATask.objects.create(id=merged.id, agent=agent, caller="user:1", message_id="m1", context_id="c1", item=merged)
    prune()
    assert exists(merged) and exists(survivor)


def test_an_activity_of_no_item_goes_once_ended_unless_running_or_on_an_open_task(agent):
    task = Task.objects.create(title="Open", status=TaskState.REVIEW, assignee=agent)

    def activity(**fields) -> AgentActivity:
        at = days_ago(OLD)
        return AgentActivity.objects.create(agent=agent, type="deliberation", label="x", started_at=at, **fields)

    ended = activity(ended_at=days_ago(OLD))
    running = activity(ended_at=None)
    on_task = activity(ended_at=days_ago(OLD), task_id=task.id)
    recent = activity(ended_at=days_ago(RECENT))
    AgentActivityLog.objects.create(activity=ended, seq=1, type="text")

    run = prune()

    left = set(AgentActivity.objects.values_list("pk", flat=True))
    assert left == {running.pk, on_task.pk, recent.pk}
    assert run.counts["agent_activities"] == 1 and run.counts["agent_activity_logs"] == 1


def test_an_ended_session_goes_after_its_days_and_an_open_items_session_stays(agent):
    kept_item = item(agent, status=Status.MERGED)
    A2ATask.objects.create(
        id=kept_item.id, agent=agent, caller="user:1", message_id="m", context_id="c", item=kept_item
    )
    ended = LLMSession.objects.create(
        id=f"ls_{kept_item.id}", agent=agent, mailbox_item=kept_item, updated_at=days_ago(OLD)
    )
    orphan = LLMSession.objects.create(id="ls_gone", agent=agent, mailbox_item=None, updated_at=days_ago(OLD))
    open_item = item(agent, status=Status.DEFERRED)
    parked = LLMSession.objects.create(
        id=f"ls_{open_item.id}", agent=agent, mailbox_item=open_item, updated_at=days_ago(OLD)
    )
    fresh = LLMSession.objects.create(id="ls_fresh", agent=agent, mailbox_item=None, updated_at=days_ago(RECENT))

    prune()

    assert set(LLMSession.objects.values_list("pk", flat=True)) == {parked.pk, fresh.pk}
    assert not LLMSession.objects.filter(pk__in=[ended.pk, orphan.pk]).exists()
    assert exists(kept_item)


def test_chat_history_is_not_retentions_business(agent):
    session = ChatSession.objects.get(agent=agent, is_main=True)
    session.messages.create(role="user", content="hello", created_at=days_ago(OLD))
    prune()
    assert session.messages.count() == 1


def test_zero_days_keeps_a_kind_for_ever_while_the_others_keep_their_own_days(agent, settings):
    settings.MARKUS = {**settings.MARKUS, "RETENTION": {**settings.MARKUS["RETENTION"], "ITEMS_DAYS": 0}}
    it = with_history(item(agent, age=400))
    run = prune()
    assert exists(it) and AgentDecision.objects.filter(mailbox_item=it).exists()
    assert run.counts["mailbox_items"] == run.counts["agent_decisions"] == run.counts["agent_activities"] == 0
    assert run.counts["llm_sessions"] == 1  # an ended session goes after SESSIONS_DAYS all the same
