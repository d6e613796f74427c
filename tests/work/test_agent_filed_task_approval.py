"""Approval of work an agent files (upstream's human-in-the-loop gate): with its team's
``agentTaskApproval`` on (the default), a task an agent files for itself or a teammate
stays pending with an approval request to a person (the agent's owner, else the team's
owner); approving starts it, declining rejects it with the comment. A person's task,
or a team with the setting off, starts at once as before."""

from __future__ import annotations

import pytest

from markus.agents.models import Team
from markus.core.actors import Actor
from markus.work.errors import IllegalTransition
from markus.work.models import StatusChange, Task, TaskState
from markus.work.services import task_create, task_transition
from notifications.models import Approval, UserNotification
from notifications.services import approval_respond

from ..conftest import client_for
from .conftest import agent_client, executions, infos


def signed_in(client, user):
    """A page client with the person's session."""
    client.force_login(user)
    return client


pytestmark = [pytest.mark.django_db, pytest.mark.pg]  # row locks: PostgreSQL too
S = TaskState


@pytest.fixture
def filed(ada, cyd):
    """Ada files a task for her teammate Cyd."""
    return task_create(actor=Actor.for_agent(ada), title="Port the parser", assignee_id=cyd.id, description="to Rust")


def test_a_task_an_agent_files_waits_for_a_persons_approval(filed, alice, cyd):
    filed.refresh_from_db()
    assert filed.status == S.PENDING and filed.filing_approval is not None
    approval = Approval.objects.get(id=filed.filing_approval_id)
    assert approval.user == alice and approval.status == Approval.State.PENDING
    assert [o["id"] for o in approval.options] == ["approve", "decline"]
    assert "Port the parser" in approval.title and "Ada" in approval.description
    note = UserNotification.objects.get(user=alice, metadata__approvalId=approval.id)
    assert note.action_target == {"path": f"/work?task={filed.id}"}
    assert executions(cyd, filed) == []


def test_approving_starts_it_and_the_assignee_gets_it(filed, alice, cyd):
    approval_respond(user=alice, approval_id=filed.filing_approval_id, selected_option="approve")
    filed.refresh_from_db()
    assert filed.status == S.IN_PROGRESS and filed.filing_approval is None
    assert len(executions(cyd, filed)) == 1
    change = StatusChange.objects.filter(entity_id=filed.id).order_by("at", "id").last()
    assert change.actor_kind == "user" and change.to_status == S.IN_PROGRESS


def test_declining_rejects_it_with_the_comment(filed, alice, ada):
    approval_respond(user=alice, approval_id=filed.filing_approval_id, selected_option="decline", comment="Not now.")
    filed.refresh_from_db()
    assert filed.status == S.REJECTED and filed.filing_approval is None
    assert filed.comments.get().content == "Not now."
    [told] = infos(ada, filed)  # the filing agent hears why
    assert told.payload["extra"]["toStatus"] == S.REJECTED and "Not now." in told.payload["content"]


def test_an_agent_cannot_start_its_task_past_the_gate(ada):
    task = task_create(actor=Actor.for_agent(ada), title="Self-serve", assignee_id=ada.id, start=False)
    with pytest.raises(IllegalTransition, match="waits for a person's approval"):
        task_transition(task_id=task.id, to_status=S.IN_PROGRESS, actor=Actor.for_agent(ada))


def test_a_person_moving_it_withdraws_the_approval(filed, as_alice):
    approval_id = filed.filing_approval_id
    task_transition(task_id=filed.id, to_status=S.CANCELLED, actor=as_alice)
    assert Approval.objects.get(id=approval_id).status == Approval.State.CANCELLED
    assert Task.objects.get(id=filed.id).filing_approval is None


def test_a_gated_dependent_does_not_start_when_its_dependency_completes(as_alice, ada, bea, cyd):
    first = task_create(actor=as_alice, title="First", assignee_id=ada.id, reviewer_agent_id=bea.id)
    gated = task_create(actor=Actor.for_agent(ada), title="After", assignee_id=cyd.id, depends_on=[first.id])
    task_transition(task_id=first.id, to_status=S.REVIEW, actor=Actor.for_agent(ada))
    task_transition(task_id=first.id, to_status=S.COMPLETED, actor=Actor.for_agent(bea))
    assert Task.objects.get(id=gated.id).status == S.PENDING


def test_a_persons_task_starts_at_once(as_alice, cyd):
    task = task_create(actor=as_alice, title="Do it", assignee_id=cyd.id)
    assert task.status == S.IN_PROGRESS and task.filing_approval is None


def test_with_the_setting_off_an_agents_task_starts_at_once(team, ada, cyd):
    Team.objects.filter(id=team.id).update(agent_task_approval=False)
    task = task_create(actor=Actor.for_agent(ada), title="Do it", assignee_id=cyd.id)
    assert task.status == S.IN_PROGRESS and not Approval.objects.exists()


def test_the_team_owner_patches_the_setting(alice_client, team):
    response = alice_client.patch(f"/api/teams/{team.id}/", {"agentTaskApproval": False}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["agentTaskApproval"] is False
    assert Team.objects.get(id=team.id).agent_task_approval is False
    assert alice_client.get(f"/api/teams/{team.id}/").json()["agentTaskApproval"] is False
    assert [t["id"] for t in alice_client.get("/api/teams/").json()["teams"]] == [team.id]


def test_the_team_answer_carries_its_budget_and_the_owner_sets_it(alice_client, team):
    assert alice_client.get(f"/api/teams/{team.id}/").json()["budget"] == {"dailyTokens": None, "monthlyCost": None}
    response = alice_client.patch(f"/api/teams/{team.id}/", {"budget": {"dailyTokens": 5000}}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["budget"]["dailyTokens"] == 5000
    assert response.json()["agentTaskApproval"] is True


def test_a_member_reads_but_may_not_change_it(bob, team, charlie_client):
    bob_client = client_for(bob)
    assert bob_client.get(f"/api/teams/{team.id}/").json()["agentTaskApproval"] is True
    response = bob_client.patch(f"/api/teams/{team.id}/", {"agentTaskApproval": False}, format="json")
    assert response.status_code == 403
    assert charlie_client.get(f"/api/teams/{team.id}/").status_code == 404
    assert (
        charlie_client.patch(f"/api/teams/{team.id}/", {"agentTaskApproval": False}, format="json").status_code == 404
    )


def test_unknown_fields_are_refused(alice_client, team):
    response = alice_client.patch(f"/api/teams/{team.id}/", {"agentTaskApproval": False, "owner": 3}, format="json")
    assert response.status_code == 400 and "owner" in response.json()["fields"]


def test_an_agent_token_may_not_change_its_team(agent_with_token, team):
    response = agent_client(agent_with_token[1]).patch(
        f"/api/teams/{team.id}/", {"agentTaskApproval": False}, format="json"
    )
    assert response.status_code == 403
    assert Team.objects.get(id=team.id).agent_task_approval is True


def test_the_approvals_page_links_the_task(filed, alice, client):
    html = signed_in(client, alice).get("/approvals/").content.decode()
    assert "Port the parser" in html and f"/work?task={filed.id}" in html


def test_the_task_page_answers_the_approval(filed, alice, client):
    client = signed_in(client, alice)
    html = client.get(f"/work?task={filed.id}").content.decode()
    assert "waits for your approval" in html
    response = client.post(
        f"/approvals/{filed.filing_approval_id}/answer/",
        {"selectedOption": "approve", "next": f"/work?task={filed.id}"},
    )
    assert response.status_code == 302
    assert Task.objects.get(id=filed.id).status == S.IN_PROGRESS


def test_approving_a_task_filed_not_to_start_leaves_it_pending_and_tells_the_assignee(ada, cyd, alice):
    task = task_create(actor=Actor.for_agent(ada), title="Later", assignee_id=cyd.id, start=False)
    approval_respond(user=alice, approval_id=task.filing_approval_id, selected_option="approve")
    task.refresh_from_db()
    assert task.status == S.PENDING and task.filing_approval is None  # approved, not started
    assert executions(cyd, task) == []
    [assigned] = infos(cyd, task)  # the assignee hears it is theirs, as for any unstarted task
    assert "assigned" in assigned.payload["content"].lower()
