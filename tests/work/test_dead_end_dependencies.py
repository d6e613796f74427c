"""Dependencies that can never be met are seen (``markus.work.dead_ends``): a task waiting
on a task that failed, was rejected or cancelled, or waiting in a cycle, is marked with
the reason (``blockedReason`` in the API, the task page, the board), its creator is told
once, and the mark goes when the dependency is fixed or dropped. The beat's check finds
what a transition did not mark."""

from __future__ import annotations

import pytest

from markus.core.actors import Actor
from markus.work import dead_ends
from markus.work.dependencies import task_set_dependencies
from markus.work.models import StatusChange, Task, TaskState
from markus.work.services import task_create, task_retry, task_transition
from notifications.models import UserNotification
from notifications.registry import NotificationType

from .conftest import force_status

pytestmark = [pytest.mark.django_db, pytest.mark.pg]  # row locks: PostgreSQL too
S = TaskState


@pytest.fixture
def waiting(as_alice, ada, bea, cyd):
    """first (ada, running) ← second (cyd, pending: waits on first)."""
    first = task_create(actor=as_alice, title="First", assignee_id=ada.id, reviewer_agent_id=bea.id)
    second = task_create(
        actor=as_alice, title="Second", assignee_id=cyd.id, reviewer_agent_id=bea.id, depends_on=[first.id]
    )
    assert (first.status, Task.objects.get(id=second.id).status) == (S.IN_PROGRESS, S.PENDING)
    return first, second


def reason(task) -> str:
    return Task.objects.get(id=task.id).blocked_reason


def told(user) -> list[UserNotification]:
    return list(UserNotification.objects.filter(user=user, type=NotificationType.TASK_BLOCKED))


@pytest.mark.parametrize("end", [S.CANCELLED, S.FAILED])
def test_a_dependency_that_ends_badly_marks_its_dependent_and_tells_the_creator_once(
    waiting, as_alice, alice, alice_client, end
):
    first, second = waiting
    task_transition(task_id=first.id, to_status=end, actor=as_alice)
    assert reason(second) == f"its dependency {first.id} (First) is {end}"
    body = alice_client.get(f"/api/tasks/{second.id}/").json()
    assert body["blockedReason"] == reason(second) and body["status"] == S.PENDING
    [note] = told(alice)
    assert note.metadata["taskId"] == second.id and first.id in note.body
    assert StatusChange.objects.filter(entity_id=second.id, note__startswith="can never start").count() == 1
    dead_ends.sweep()  # the beat finds it already marked: nobody is told twice
    assert len(told(alice)) == 1


def test_a_rejected_dependency_and_an_archived_unfinished_one_are_dead_ends_too(as_alice, alice, ada, cyd):
    first = task_create(actor=as_alice, title="First", assignee_id=ada.id, start=False)
    second = task_create(actor=as_alice, title="Second", assignee_id=cyd.id, depends_on=[first.id])
    task_transition(task_id=first.id, to_status=S.REJECTED, actor=as_alice)
    assert "is rejected" in reason(second)
    task_transition(task_id=first.id, to_status=S.ARCHIVED, actor=as_alice)
    assert "is archived" in reason(second)
    assert len(told(alice)) == 1  # still the same dead end


def test_retrying_the_dependency_lifts_the_mark_and_a_new_dead_end_tells_again(waiting, as_alice, alice, alice_client):
    first, second = waiting
    task_transition(task_id=first.id, to_status=S.FAILED, actor=as_alice)
    assert reason(second)
    task_retry(task_id=first.id, actor=as_alice)
    assert reason(second) == ""
    assert alice_client.get(f"/api/tasks/{second.id}/").json()["blockedReason"] is None
    assert StatusChange.objects.filter(entity_id=second.id, note__startswith="can start again").count() == 1
    task_transition(task_id=first.id, to_status=S.CANCELLED, actor=as_alice)
    assert "is cancelled" in reason(second)
    assert len(told(alice)) == 2


def test_dropping_the_dead_dependency_lifts_the_mark_and_starts_the_task(waiting, as_alice):
    first, second = waiting
    task_transition(task_id=first.id, to_status=S.CANCELLED, actor=as_alice)
    task_set_dependencies(task_id=second.id, depends_on=[], actor=as_alice)
    second.refresh_from_db()
    assert (second.blocked_reason, second.status) == ("", S.IN_PROGRESS)


def test_a_task_an_agent_filed_tells_the_agents_owner(as_alice, alice, ada, cyd, ungated):
    first = task_create(actor=as_alice, title="First", assignee_id=ada.id)
    second = task_create(actor=Actor.for_agent(cyd), title="Second", assignee_id=ada.id, depends_on=[first.id])
    task_transition(task_id=first.id, to_status=S.CANCELLED, actor=as_alice)
    assert reason(second)
    assert [n.metadata["taskId"] for n in told(alice)] == [second.id]  # cyd's owner


def test_the_beat_marks_a_cycle_and_what_changed_behind_the_services_back(as_alice, alice, ada, cyd):
    one = task_create(actor=as_alice, title="One", assignee_id=ada.id, start=False)
    two = task_create(actor=as_alice, title="Two", assignee_id=cyd.id, depends_on=[one.id], start=False)
    one.depends_on.add(two)  # two changes at once can close a cycle neither refused
    third = task_create(actor=as_alice, title="Third", assignee_id=ada.id)
    fourth = task_create(actor=as_alice, title="Fourth", assignee_id=cyd.id, depends_on=[third.id])
    force_status(third, S.FAILED)  # without the transition's side effects
    assert sorted(dead_ends.sweep()) == sorted([one.id, two.id, fourth.id])
    assert "it waits in a cycle" in reason(one) and "it waits in a cycle" in reason(two)
    assert "is failed" in reason(fourth)
    assert len(told(alice)) == 3
    assert dead_ends.sweep() == [] and len(told(alice)) == 3  # once per dead end
    task_set_dependencies(task_id=one.id, depends_on=[], actor=as_alice)  # the cycle broken: one starts
    assert (reason(one), reason(two)) == ("", "")  # and two waits on a running task
    assert Task.objects.get(id=one.id).status == S.IN_PROGRESS
    assert dead_ends.sweep() == []


def test_the_task_page_and_the_board_show_the_mark(waiting, as_alice, alice, client):
    first, second = waiting
    task_transition(task_id=first.id, to_status=S.CANCELLED, actor=as_alice)
    client.force_login(alice)
    html = client.get(f"/work?task={second.id}").content.decode()
    assert 'id="task-blocked-reason"' in html and f"Can never start: its dependency {first.id}" in html
    assert "⛔ blocked" in client.get("/").content.decode()


def test_a_cascade_cancel_marks_nobody_and_tells_nobody(waiting, as_alice, alice):
    first, second = waiting
    task_transition(task_id=first.id, to_status=S.CANCELLED, actor=as_alice, cascade=True)
    assert (Task.objects.get(id=second.id).status, reason(second)) == (S.CANCELLED, "")
    assert told(alice) == []
    assert not StatusChange.objects.filter(entity_id=second.id, note__regex=r"^can (never start|start again)").exists()


def test_the_tasks_waiting_on_a_marked_task_are_marked_in_turn_and_unmarked_with_it(as_alice, alice, ada, cyd):
    first = task_create(actor=as_alice, title="First", assignee_id=ada.id)
    second = task_create(actor=as_alice, title="Second", assignee_id=cyd.id, depends_on=[first.id])
    third = task_create(actor=as_alice, title="Third", assignee_id=ada.id, depends_on=[second.id])
    task_transition(task_id=first.id, to_status=S.FAILED, actor=as_alice)
    assert "is failed" in reason(second)
    assert reason(third) == f"its dependency {second.id} (Second) can never start"
    assert [n.metadata["taskId"] for n in told(alice)] == [second.id]  # the first dead end is the news
    assert dead_ends.sweep() == []
    task_retry(task_id=first.id, actor=as_alice)
    assert (reason(second), reason(third)) == ("", "")
