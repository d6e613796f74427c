"""What each task transition does besides changing the status (issue 4, seed 3.4, 23):
asserted on the agents' mailbox rows and the users' notifications."""

from __future__ import annotations

import pytest

from mailbox import lifecycle
from mailbox.registry import MailboxType, Priority, Status
from markus.core.actors import Actor
from markus.core.signals import task_status_changed
from markus.work.execution import execution_cancelled
from markus.work.models import Task, TaskState
from markus.work.services import task_create, task_transition
from notifications.models import Approval, UserNotification
from notifications.services import approval_respond

from .conftest import executions, force_status, infos, items

S = TaskState
pytestmark = pytest.mark.django_db


def test_creating_a_task_for_an_agent_starts_its_execution_through_the_mailbox(as_alice, ada, bea):
    task = task_create(
        actor=as_alice, title="Write the report", description="Two pages.", assignee_id=ada.id, reviewer_agent_id=bea.id
    )
    assert task.status == S.IN_PROGRESS and task.execution_round == 1
    [item] = items(ada)
    assert item.source_type == MailboxType.TASK_STATUS_UPDATE
    assert item.priority == Priority.HIGH
    assert item.payload["taskId"] == task.id
    assert item.payload["extra"] == {"triggerExecution": True, "executionRound": 1}
    # Not "Execute task: …": a small model read that as a call of a tool named after the title.
    assert item.payload["summary"] == "Task assigned to you: Write the report"
    assert "Two pages." in item.payload["content"]
    assert items(bea) == []


def test_a_task_waiting_for_dependencies_tells_its_assignee_it_was_assigned(make_task, ada):
    first = make_task(title="first", start=True)
    second = make_task(title="second", depends_on=[first.id], start=True)
    assert second.status == S.PENDING
    [info] = infos(ada, second)
    assert info.payload["summary"] == "Task assigned: second"
    assert first.id in info.payload["content"]
    assert executions(ada, second) == []


def test_entering_in_progress_resets_the_cancel_flag_and_bumps_the_round(make_task, as_alice, ada):
    task = make_task(start=True)
    task_transition(task_id=task.id, to_status=S.BLOCKED, actor=as_alice)
    assert execution_cancelled(task.id)
    task_transition(task_id=task.id, to_status=S.IN_PROGRESS, actor=as_alice)
    task.refresh_from_db()
    assert task.cancel_requested_at is None and task.execution_round == 2
    assert not execution_cancelled(task.id, execution_round=2)
    assert execution_cancelled(task.id, execution_round=1)  # the old round is stale
    assert [i.payload["extra"]["executionRound"] for i in executions(ada, task)] == [1, 2]


def test_submitting_for_review_lets_the_running_execution_wrap_up(make_task, as_alice):
    task = make_task(start=True)
    task_transition(task_id=task.id, to_status=S.REVIEW, actor=as_alice)
    task.refresh_from_db()
    assert task.cancel_requested_at is None and not execution_cancelled(task.id, execution_round=1)


def test_a_review_that_completes_the_task_lets_the_execution_wrap_up_too(make_task, as_alice):
    """The reviewer may approve while the execution that submitted still finishes its last
    turns (its note, its memory): the work succeeded, so the execution is not cancelled."""
    task = make_task(start=True)
    task_transition(task_id=task.id, to_status=S.REVIEW, actor=as_alice)
    task_transition(task_id=task.id, to_status=S.COMPLETED, actor=as_alice)
    assert not execution_cancelled(task.id, execution_round=1)


@pytest.mark.parametrize("to_status", [S.BLOCKED, S.FAILED, S.CANCELLED])
def test_leaving_in_progress_flags_the_running_execution_as_cancelled(make_task, as_alice, to_status):
    task = make_task(start=True)
    assert not execution_cancelled(task.id, execution_round=1)
    task_transition(task_id=task.id, to_status=to_status, actor=as_alice)
    task.refresh_from_db()
    assert task.cancel_requested_at is not None
    assert execution_cancelled(task.id) and execution_cancelled(task.id, execution_round=1)


def test_leaving_in_progress_drops_an_execution_item_not_yet_started(make_task, as_alice, ada):
    task = make_task(start=True)
    task_transition(task_id=task.id, to_status=S.CANCELLED, actor=as_alice)
    [execution] = executions(ada, task)
    assert execution.status == Status.DROPPED
    assert "left in_progress" in execution.drop_reason


def test_an_execution_already_running_is_left_to_the_cancel_flag(make_task, as_alice, ada):
    task = make_task(start=True)
    claimed = lifecycle.claim_next(agent_id=ada.id)
    assert claimed.task_id == task.id
    task_transition(task_id=task.id, to_status=S.CANCELLED, actor=as_alice)
    claimed.refresh_from_db()
    assert claimed.status == Status.PROCESSING
    assert execution_cancelled(task.id, execution_round=1)


def test_a_missing_task_counts_as_a_cancelled_execution():
    assert execution_cancelled("tsk_missing")


def test_submitting_for_review_asks_the_reviewer_agent_and_tells_the_assignee_nothing(make_task, ada, bea):
    task = make_task(start=True)
    before = len(items(ada))
    task_transition(task_id=task.id, to_status=S.REVIEW, actor=Actor.for_agent(ada))
    assert len(items(ada)) == before
    [request] = items(bea, MailboxType.REVIEW_REQUEST)
    assert request.payload["taskId"] == task.id
    assert request.priority == Priority.HIGH
    assert request.metadata["senderId"] == ada.id
    assert items(bea, MailboxType.TASK_STATUS_UPDATE) == []


def test_a_human_reviewer_gets_an_approval_and_a_task_review_notification(
    as_alice, alice, ada, sent_events, django_capture_on_commit_callbacks
):
    task = task_create(actor=as_alice, title="Ship it", assignee_id=ada.id, reviewer_user_id=alice.pk)
    with django_capture_on_commit_callbacks(execute=True):
        task_transition(task_id=task.id, to_status=S.REVIEW, actor=Actor.for_agent(ada))
    approval = Approval.objects.get(user=alice)
    assert approval.status == Approval.State.PENDING and approval.agent_id == ada.id
    assert [o["id"] for o in approval.options] == ["approve", "request_changes"]
    notification = UserNotification.objects.get(user=alice, type="task_review")
    assert notification.metadata == {"taskId": task.id, "approvalId": approval.id, "agentId": ada.id}
    assert notification.action_target == {"path": f"/work?task={task.id}"}
    pushed = [e["notification"] for g, e in sent_events if g == f"user.{alice.pk}" and e["type"] == "notification"]
    assert [n["id"] for n in pushed] == [notification.id]


def test_approving_a_human_review_completes_the_task(as_alice, alice, ada):
    task = task_create(actor=as_alice, title="Ship it", assignee_id=ada.id, reviewer_user_id=alice.pk)
    task_transition(task_id=task.id, to_status=S.REVIEW, actor=Actor.for_agent(ada))
    approval = Approval.objects.get(user=alice)
    approval_respond(user=alice, approval_id=approval.id, selected_option="approve")
    task.refresh_from_db()
    assert task.status == S.COMPLETED and "reviewApprovalId" not in task.metadata
    [info] = infos(ada, task)
    assert info.payload["extra"] == {"fromStatus": S.REVIEW, "toStatus": S.COMPLETED}


def test_requesting_changes_sends_the_task_back_with_the_feedback(as_alice, alice, ada):
    task = task_create(actor=as_alice, title="Ship it", assignee_id=ada.id, reviewer_user_id=alice.pk)
    task_transition(task_id=task.id, to_status=S.REVIEW, actor=Actor.for_agent(ada))
    approval = Approval.objects.get(user=alice)
    approval_respond(user=alice, approval_id=approval.id, selected_option="request_changes", comment="Add the totals.")
    task.refresh_from_db()
    assert task.status == S.IN_PROGRESS and task.execution_round == 2
    second = executions(ada, task)[-1]
    assert "sent it back for revision" in second.payload["content"]
    assert "Add the totals." in second.payload["content"]
    assert task.comments.get().content == "Add the totals."


def test_withdrawing_a_review_cancels_the_pending_approval(as_alice, alice, ada):
    task = task_create(actor=as_alice, title="Ship it", assignee_id=ada.id, reviewer_user_id=alice.pk)
    task_transition(task_id=task.id, to_status=S.REVIEW, actor=Actor.for_agent(ada))
    task_transition(task_id=task.id, to_status=S.CANCELLED, actor=as_alice)
    assert Approval.objects.get(user=alice).status == Approval.State.CANCELLED


def test_withdrawing_a_review_drops_the_reviewer_agents_queued_request(make_task, as_alice, ada, bea):
    task = make_task(start=True)
    task_transition(task_id=task.id, to_status=S.REVIEW, actor=Actor.for_agent(ada))
    task_transition(task_id=task.id, to_status=S.CANCELLED, actor=as_alice)
    [request] = items(bea, MailboxType.REVIEW_REQUEST)
    assert request.status == Status.DROPPED


def test_blocking_and_unblocking_are_silent(make_task, as_alice, ada):
    task = make_task(start=True)
    task_transition(task_id=task.id, to_status=S.BLOCKED, actor=as_alice)
    assert infos(ada, task) == []
    task_transition(task_id=task.id, to_status=S.IN_PROGRESS, actor=as_alice)
    assert infos(ada, task) == []
    assert len(executions(ada, task)) == 2


@pytest.mark.parametrize(
    ("from_status", "to_status"),
    [
        (S.PENDING, S.CANCELLED),
        (S.PENDING, S.REJECTED),
        (S.PENDING, S.COMPLETED),
        (S.PENDING, S.BLOCKED),
        (S.IN_PROGRESS, S.FAILED),
        (S.IN_PROGRESS, S.CANCELLED),
        (S.BLOCKED, S.CANCELLED),
        (S.REVIEW, S.COMPLETED),
        (S.REVIEW, S.CANCELLED),
        (S.COMPLETED, S.ARCHIVED),
        (S.FAILED, S.ARCHIVED),
        (S.REJECTED, S.ARCHIVED),
        (S.CANCELLED, S.ARCHIVED),
    ],
)
def test_other_transitions_tell_the_assignee_without_invoking_the_llm(make_task, as_alice, ada, from_status, to_status):
    task = force_status(make_task(), from_status)
    before = {i.id for i in infos(ada, task)}
    task_transition(task_id=task.id, to_status=to_status, actor=as_alice)
    [info] = [i for i in infos(ada, task) if i.id not in before]
    assert info.payload["extra"] == {"fromStatus": from_status, "toStatus": to_status}
    assert "triggerExecution" not in info.payload["extra"]
    assert info.priority == Priority.HIGH
    assert info.metadata["senderId"] == str(as_alice.id)


def test_an_agent_is_not_told_about_a_change_it_made_itself(make_task, ada):
    task = make_task(start=True)
    task_transition(task_id=task.id, to_status=S.FAILED, actor=Actor.for_agent(ada))
    assert infos(ada, task) == []


def test_completion_and_failure_notify_the_human_who_created_the_task(
    make_task, alice, ada, bea, sent_events, django_capture_on_commit_callbacks
):
    done = make_task(title="done", start=True)
    broken = make_task(title="broken", start=True)
    task_transition(task_id=done.id, to_status=S.REVIEW, actor=Actor.for_agent(ada))
    with django_capture_on_commit_callbacks(execute=True):
        task_transition(task_id=done.id, to_status=S.COMPLETED, actor=Actor.for_agent(bea))
        task_transition(task_id=broken.id, to_status=S.FAILED, actor=Actor.for_agent(ada), note="disk full")
    completed = UserNotification.objects.get(user=alice, type="task_completed")
    failed = UserNotification.objects.get(user=alice, type="task_failed")
    assert completed.metadata["taskId"] == done.id and completed.priority == "normal"
    assert failed.metadata["taskId"] == broken.id and failed.priority == "high" and "disk full" in failed.body
    notified = [e["notification"]["type"] for g, e in sent_events if e["type"] == "notification"]
    assert notified == ["task_completed", "task_failed"]


def test_a_human_completing_their_own_task_gets_no_notification_about_it(make_task, as_alice, alice):
    task = make_task()
    task_transition(task_id=task.id, to_status=S.COMPLETED, actor=as_alice)
    assert not UserNotification.objects.filter(user=alice).exists()


def test_a_delegating_agent_hears_when_its_task_ends_and_its_owner_when_it_was_created(ada, cyd, bea, alice, ungated):
    task = task_create(actor=Actor.for_agent(cyd), title="sub", assignee_id=ada.id, reviewer_agent_id=bea.id)
    assert UserNotification.objects.get(user=alice, type="task_created").metadata["agentId"] == cyd.id
    task_transition(task_id=task.id, to_status=S.FAILED, actor=Actor.for_agent(ada))
    [info] = infos(cyd, task)
    assert info.payload["extra"]["toStatus"] == S.FAILED


def test_completing_a_task_starts_dependents_whose_dependencies_are_all_completed(make_task, as_alice, ada, cyd):
    first = make_task(title="first")
    second = make_task(title="second")
    both = make_task(title="both", depends_on=[first.id, second.id], assignee_id=cyd.id, start=True)
    task_transition(task_id=first.id, to_status=S.COMPLETED, actor=as_alice)
    assert Task.objects.get(id=both.id).status == S.PENDING
    task_transition(task_id=second.id, to_status=S.COMPLETED, actor=as_alice)
    both.refresh_from_db()
    assert both.status == S.IN_PROGRESS
    [execution] = executions(cyd, both)
    assert execution.metadata["senderRole"] == "system"
    assert second.id in execution.payload["content"]


def test_a_blocked_dependent_is_started_too(make_task, as_alice, cyd):
    first = make_task(title="first")
    later = force_status(make_task(title="later", depends_on=[first.id], assignee_id=cyd.id), S.BLOCKED)
    task_transition(task_id=first.id, to_status=S.COMPLETED, actor=as_alice)
    assert Task.objects.get(id=later.id).status == S.IN_PROGRESS


@pytest.mark.parametrize("ending", [S.CANCELLED, S.REJECTED])
def test_a_dependency_that_ends_without_completing_keeps_dependents_waiting(make_task, as_alice, cyd, ending):
    first = make_task(title="first")
    later = make_task(title="later", depends_on=[first.id], assignee_id=cyd.id, start=True)
    task_transition(task_id=first.id, to_status=ending, actor=as_alice)
    assert Task.objects.get(id=later.id).status == S.PENDING
    assert executions(cyd, later) == []


def test_a_dependent_without_an_assignee_stays_pending(make_task, as_alice):
    first = make_task(title="first")
    orphan = task_create(actor=as_alice, title="orphan", depends_on=[first.id])
    task_transition(task_id=first.id, to_status=S.COMPLETED, actor=as_alice)
    assert Task.objects.get(id=orphan.id).status == S.PENDING


def test_an_archived_completed_dependency_still_counts_as_done(make_task, as_alice, ada):
    first = make_task(title="first")
    task_transition(task_id=first.id, to_status=S.COMPLETED, actor=as_alice)
    task_transition(task_id=first.id, to_status=S.ARCHIVED, actor=as_alice)
    later = make_task(title="later", depends_on=[first.id], start=True)
    assert later.status == S.IN_PROGRESS


def test_filing_and_every_transition_send_the_status_changed_signal(make_task, as_alice):
    seen = []

    def receiver(sender, task, from_status, to_status, actor, **kwargs):
        seen.append((task.id, from_status, to_status, actor.kind))

    task_status_changed.connect(receiver)
    try:
        task = make_task()
        task_transition(task_id=task.id, to_status=S.CANCELLED, actor=as_alice)
    finally:
        task_status_changed.disconnect(receiver)
    assert seen == [(task.id, None, S.PENDING, "user"), (task.id, S.PENDING, S.CANCELLED, "user")]
