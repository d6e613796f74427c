"""The task state machine of issue 4: every pair of states, legal and illegal, and the
rules a legal move must still pass."""

from __future__ import annotations

import itertools

import pytest

from markus.core.actors import Actor
from markus.work.errors import IllegalTransition, WorkError
from markus.work.models import Task, TaskState
from markus.work.services import task_create, task_transition

from .conftest import force_status

S = TaskState
# Written out from the issue, not imported, so the table in code is checked against it.
LEGAL = {
    S.PENDING: {S.IN_PROGRESS, S.BLOCKED, S.REJECTED, S.CANCELLED, S.COMPLETED},
    S.IN_PROGRESS: {S.REVIEW, S.BLOCKED, S.FAILED, S.CANCELLED},
    S.BLOCKED: {S.IN_PROGRESS, S.CANCELLED},
    S.REVIEW: {S.COMPLETED, S.IN_PROGRESS, S.CANCELLED},
    S.COMPLETED: {S.ARCHIVED, S.IN_PROGRESS},
    S.FAILED: {S.IN_PROGRESS, S.ARCHIVED},
    S.REJECTED: {S.ARCHIVED},
    S.CANCELLED: {S.ARCHIVED, S.IN_PROGRESS},
    S.ARCHIVED: set(),
}
PAIRS = list(itertools.product(S.values, S.values))

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("from_status", "to_status"), [p for p in PAIRS if p[1] in LEGAL[p[0]]])
def test_legal_transition_moves_the_task(make_task, as_alice, from_status, to_status):
    task = force_status(make_task(), from_status)
    task_transition(task_id=task.id, to_status=to_status, actor=as_alice)
    task.refresh_from_db()
    assert task.status == to_status


@pytest.mark.parametrize(("from_status", "to_status"), [p for p in PAIRS if p[1] not in LEGAL[p[0]]])
def test_illegal_transition_is_a_conflict_and_changes_nothing(make_task, as_alice, from_status, to_status):
    task = force_status(make_task(), from_status)
    with pytest.raises(IllegalTransition, match=f"cannot move from {from_status} to {to_status}"):
        task_transition(task_id=task.id, to_status=to_status, actor=as_alice)
    task.refresh_from_db()
    assert task.status == from_status


def test_archived_is_final(make_task, as_alice):
    task = force_status(make_task(), S.ARCHIVED)
    for target in S.values:
        with pytest.raises(IllegalTransition):
            task_transition(task_id=task.id, to_status=target, actor=as_alice)


def test_unknown_status_is_bad_input_not_a_conflict(make_task, as_alice):
    task = make_task()
    with pytest.raises(WorkError, match="unknown status 'done'") as caught:
        task_transition(task_id=task.id, to_status="done", actor=as_alice)
    assert not isinstance(caught.value, IllegalTransition)


@pytest.mark.parametrize("from_status", [S.PENDING, S.REVIEW])
def test_a_worker_cannot_complete_its_own_task(make_task, ada, from_status):
    task = force_status(make_task(), from_status)
    with pytest.raises(IllegalTransition, match="cannot complete its own task"):
        task_transition(task_id=task.id, to_status=S.COMPLETED, actor=Actor.for_agent(ada))
    assert Task.objects.get(id=task.id).status == from_status


def test_the_reviewer_agent_can_complete_a_task_in_review(make_task, bea):
    task = force_status(make_task(), S.REVIEW)
    task_transition(task_id=task.id, to_status=S.COMPLETED, actor=Actor.for_agent(bea))
    assert Task.objects.get(id=task.id).status == S.COMPLETED


def test_the_reviewer_cannot_be_the_assignee_at_creation(as_alice, ada):
    with pytest.raises(WorkError, match="reviewer cannot be the assignee"):
        task_create(actor=as_alice, title="x", assignee_id=ada.id, reviewer_agent_id=ada.id)
    assert not Task.objects.exists()


def test_the_reviewer_cannot_be_the_assignee_at_submission(make_task, as_alice, ada):
    task = force_status(make_task(), S.IN_PROGRESS)
    Task.objects.filter(id=task.id).update(reviewer_agent=ada)  # e.g. edited in the admin
    with pytest.raises(IllegalTransition, match="reviewer cannot be the assignee"):
        task_transition(task_id=task.id, to_status=S.REVIEW, actor=as_alice)


def test_submitting_for_review_needs_a_reviewer(ada, ungated):
    task = task_create(actor=Actor.for_agent(ada), title="solo", assignee_id=ada.id, start=True)
    with pytest.raises(IllegalTransition, match="has no reviewer"):
        task_transition(task_id=task.id, to_status=S.REVIEW, actor=Actor.for_agent(ada))


def test_without_a_named_reviewer_the_human_creator_reviews(as_alice, ada):
    task = task_create(actor=as_alice, title="t", assignee_id=ada.id, start=True)
    task_transition(task_id=task.id, to_status=S.REVIEW, actor=Actor.for_agent(ada))
    task.refresh_from_db()
    assert task.status == S.REVIEW and task.metadata["reviewApprovalId"].startswith("apr_")


def test_starting_needs_an_assignee(as_alice):
    task = task_create(actor=as_alice, title="nobody's")
    with pytest.raises(IllegalTransition, match="no assignee"):
        task_transition(task_id=task.id, to_status=S.IN_PROGRESS, actor=as_alice)


def test_starting_waits_for_unfinished_dependencies(make_task, as_alice):
    first = make_task(title="first")
    second = make_task(title="second", depends_on=[first.id])
    with pytest.raises(IllegalTransition, match=f"waits for unfinished tasks: {first.id}"):
        task_transition(task_id=second.id, to_status=S.IN_PROGRESS, actor=as_alice)


def test_creation_rejects_unknown_references(as_alice, ada):
    with pytest.raises(WorkError, match="assigneeId: no such agent 'ghost'"):
        task_create(actor=as_alice, title="x", assignee_id="ghost")
    with pytest.raises(WorkError, match="dependsOn: no such task 'tsk_nope'"):
        task_create(actor=as_alice, title="x", depends_on=["tsk_nope"])
    with pytest.raises(WorkError, match="title is required"):
        task_create(actor=as_alice, title="   ")
    with pytest.raises(WorkError, match="watchers"):
        task_create(actor=as_alice, title="x", metadata={"watchers": "ada"})
    assert not Task.objects.exists()
