"""The requirement state machine and its notifications (issue 4, seed 3.4)."""

from __future__ import annotations

import itertools

import pytest

from mailbox.registry import MailboxType, Priority
from markus.core.actors import Actor
from markus.work.errors import IllegalTransition, WorkError, WorkPermissionError
from markus.work.models import Requirement, RequirementState, TaskState
from markus.work.services import (
    requirement_approve,
    requirement_cancel,
    requirement_complete,
    requirement_create,
    requirement_reject,
    requirement_resubmit,
    requirement_transition,
    task_create,
    task_transition,
)
from notifications.models import UserNotification

from .conftest import items

R = RequirementState
LEGAL = {
    R.PENDING: {R.IN_PROGRESS, R.REJECTED, R.CANCELLED},
    R.REJECTED: {R.PENDING, R.CANCELLED},
    R.IN_PROGRESS: {R.COMPLETED, R.CANCELLED},
    R.COMPLETED: {R.CANCELLED},
    R.CANCELLED: set(),
}
PAIRS = list(itertools.product(R.values, R.values))
pytestmark = pytest.mark.django_db


def updates(agent):
    return items(agent, MailboxType.REQUIREMENT_UPDATE)


@pytest.fixture
def proposal(cyd):
    return requirement_create(actor=Actor.for_agent(cyd), title="Faster builds", description="CI takes 40 min.")


def _in(requirement, status):
    Requirement.objects.filter(id=requirement.id).update(status=status)
    return requirement


@pytest.mark.parametrize(("from_status", "to_status"), [p for p in PAIRS if p[1] in LEGAL[p[0]]])
def test_legal_requirement_transition_moves_it(proposal, as_alice, from_status, to_status):
    _in(proposal, from_status)
    requirement_transition(requirement_id=proposal.id, to_status=to_status, actor=as_alice)
    assert Requirement.objects.get(id=proposal.id).status == to_status


# The status it already has is a no-op (test_requirement_rejection.py, beside this file).
@pytest.mark.parametrize(("from_status", "to_status"), [p for p in PAIRS if p[1] not in LEGAL[p[0]] and p[0] != p[1]])
def test_illegal_requirement_transition_is_a_conflict(proposal, as_alice, from_status, to_status):
    _in(proposal, from_status)
    with pytest.raises(IllegalTransition, match=f"cannot move from {from_status} to {to_status}"):
        requirement_transition(requirement_id=proposal.id, to_status=to_status, actor=as_alice)
    assert Requirement.objects.get(id=proposal.id).status == from_status


def test_an_agents_proposal_starts_pending_and_tells_its_owner(proposal, cyd, alice):
    assert proposal.status == R.PENDING and proposal.created_by_agent_id == cyd.id
    notification = UserNotification.objects.get(user=alice, type="requirement_created")
    assert notification.title == "Cyd proposes: Faster builds" and notification.priority == "high"
    assert notification.metadata == {"requirementId": proposal.id, "agentId": cyd.id}


def test_an_agent_may_have_at_most_three_pending_proposals(cyd, ada):
    for n in range(3):
        requirement_create(actor=Actor.for_agent(cyd), title=f"idea {n}")
    with pytest.raises(WorkError, match="already have 3 pending requirements"):
        requirement_create(actor=Actor.for_agent(cyd), title="one too many")
    requirement_create(actor=Actor.for_agent(ada), title="someone else's")  # per agent
    assert Requirement.objects.filter(created_by_agent=cyd).count() == 3


def test_a_humans_requirement_starts_in_progress_and_asks_its_agent_for_tasks(as_alice, ada):
    requirement = requirement_create(actor=as_alice, title="Dark mode", agent_id=ada.id)
    assert requirement.status == R.IN_PROGRESS and requirement.metadata == {"agentId": ada.id}
    [update] = updates(ada)
    assert update.priority == Priority.HIGH
    assert update.payload["extra"]["actionRequired"] is True
    assert "task_create" in update.payload["content"]


def test_approval_asks_the_creator_agent_to_create_tasks_at_high_priority(proposal, as_alice, cyd):
    requirement_approve(requirement_id=proposal.id, actor=as_alice)
    [update] = updates(cyd)
    assert update.priority == Priority.HIGH
    assert update.payload["requirementId"] == proposal.id
    assert update.payload["extra"] == {"fromStatus": R.PENDING, "toStatus": R.IN_PROGRESS, "actionRequired": True}
    assert "approved by alice" in update.payload["content"]


def test_rejection_asks_the_creator_agent_to_resubmit_or_abandon(proposal, as_alice, cyd):
    requirement_reject(requirement_id=proposal.id, actor=as_alice, reason="Too vague")
    [update] = updates(cyd)
    assert update.priority == Priority.HIGH and update.payload["extra"]["actionRequired"] is True
    assert "Reason: Too vague" in update.payload["content"]
    assert "requirement_resubmit" in update.payload["content"]


def test_only_a_human_approves_or_rejects(proposal, cyd, ada):
    for step in (requirement_approve, requirement_reject):
        with pytest.raises(WorkPermissionError, match="only a human"):
            step(requirement_id=proposal.id, actor=Actor.for_agent(cyd))
    with pytest.raises(WorkPermissionError):
        requirement_cancel(requirement_id=proposal.id, actor=Actor.for_agent(ada))
    assert Requirement.objects.get(id=proposal.id).status == R.PENDING


def test_the_creator_agent_resubmits_a_rejected_proposal_with_changes(proposal, as_alice, cyd, alice):
    requirement_reject(requirement_id=proposal.id, actor=as_alice)
    requirement_resubmit(requirement_id=proposal.id, actor=Actor.for_agent(cyd), title="Faster builds: cache deps")
    proposal.refresh_from_db()
    assert proposal.status == R.PENDING and proposal.title == "Faster builds: cache deps"
    assert len(updates(cyd)) == 1  # the rejection; not its own resubmission
    titles = list(
        UserNotification.objects.filter(user=alice, type="requirement_created").values_list("title", flat=True)
    )
    assert titles == ["Cyd proposes: Faster builds", "Requirement resubmitted: Faster builds: cache deps"]


def test_resubmitting_respects_the_pending_quota(proposal, as_alice, cyd):
    requirement_reject(requirement_id=proposal.id, actor=as_alice)
    for n in range(3):
        requirement_create(actor=Actor.for_agent(cyd), title=f"idea {n}")
    with pytest.raises(WorkError, match="already have 3 pending"):
        requirement_resubmit(requirement_id=proposal.id, actor=Actor.for_agent(cyd))


def test_only_a_rejected_requirement_can_be_resubmitted(proposal, cyd):
    with pytest.raises(IllegalTransition, match="only a rejected one"):
        requirement_resubmit(requirement_id=proposal.id, actor=Actor.for_agent(cyd))


def test_all_linked_tasks_terminal_asks_the_agent_for_a_review_at_normal_priority(
    proposal, as_alice, cyd, ada, bea, ungated
):
    requirement_approve(requirement_id=proposal.id, actor=as_alice)
    first = task_create(
        actor=Actor.for_agent(cyd),
        title="cache",
        assignee_id=ada.id,
        reviewer_agent_id=bea.id,
        requirement_id=proposal.id,
    )
    second = task_create(
        actor=Actor.for_agent(cyd),
        title="split",
        assignee_id=ada.id,
        reviewer_agent_id=bea.id,
        requirement_id=proposal.id,
    )
    task_transition(task_id=first.id, to_status=TaskState.CANCELLED, actor=as_alice)
    assert len(updates(cyd)) == 1  # only the approval so far
    task_transition(task_id=second.id, to_status=TaskState.REVIEW, actor=Actor.for_agent(ada))
    task_transition(task_id=second.id, to_status=TaskState.COMPLETED, actor=Actor.for_agent(bea))
    review = updates(cyd)[-1]
    assert review.priority == Priority.NORMAL
    assert review.payload["summary"] == "Review needed: Faster builds"
    assert review.payload["extra"]["actionRequired"] is True
    assert "1 cancelled, 1 completed" in review.payload["content"]
    assert Requirement.objects.get(id=proposal.id).status == R.IN_PROGRESS  # the agent decides
    task_transition(task_id=second.id, to_status=TaskState.ARCHIVED, actor=as_alice)
    assert updates(cyd)[-1].id == review.id  # archiving a finished task asks nothing again


def test_tasks_need_an_approved_requirement(proposal, as_alice, ada):
    with pytest.raises(WorkError, match="tasks need an approved one"):
        task_create(actor=as_alice, title="early", assignee_id=ada.id, requirement_id=proposal.id)


def test_the_agent_completing_its_requirement_tells_the_human_not_itself(proposal, as_alice, cyd, alice):
    requirement_approve(requirement_id=proposal.id, actor=as_alice)
    requirement_complete(requirement_id=proposal.id, actor=Actor.for_agent(cyd))
    assert len(updates(cyd)) == 1
    decision = UserNotification.objects.get(user=alice, type="requirement_decision")
    assert decision.title == "Requirement completed: Faster builds"


def test_other_changes_inform_the_creator_agent_without_action(proposal, as_alice, cyd):
    requirement_cancel(requirement_id=proposal.id, actor=as_alice, reason="Not now")
    [update] = updates(cyd)
    assert update.payload["extra"] == {"fromStatus": R.PENDING, "toStatus": R.CANCELLED}
    assert "Informational" in update.payload["content"]
