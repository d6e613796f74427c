"""Who may see and do what on the work pages and the chat page: alice owns ada (team
Core) and solo (no team); bob is a member of Core, not its owner; charlie is an
outsider. The pages follow the API's rules (``tasks_*``, ``approvals_*``, ``page:*``
in markus/agents/permissions.py): a teammate sees and moves the team's tasks, comments
on them and talks with the team's agents; a review or an approval is answered only by
the person it asks; what a caller may not see is a 404 and never shows on a page."""

from __future__ import annotations

import pytest
from django.urls import reverse

from markus.agents.models import ChatMessage, ChatSession
from markus.agents.services import main_session
from markus.core.actors import Actor
from markus.work.models import Requirement, StatusChange, Task, TaskComment, TaskState
from markus.work.requirement_services import requirement_create
from markus.work.services import task_create, task_transition
from notifications.models import Approval
from notifications.services import approval_create
from tests.conftest import client_for

from .conftest import signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def team_task(alice, agent) -> Task:
    return task_create(actor=Actor.for_user(alice), title="Team notes", assignee_id=agent.id)


@pytest.fixture
def private_task(alice, solo) -> Task:
    return task_create(actor=Actor.for_user(alice), title="Solo secret plan", assignee_id=solo.id)


# ---------------------------------------------------------------------------- /work


def test_the_board_shows_a_teammate_the_teams_tasks_and_an_outsider_nothing(
    bob, charlie, agent, solo, team_task, private_task
):
    board = signed_in(bob).get("/work").content.decode()
    assert f"?task={team_task.id}" in board and "Team notes" in board
    assert "Solo secret plan" not in board and private_task.id not in board
    assert f'<option value="{agent.id}">' in board and f'value="{solo.id}"' not in board  # assignable: what bob sees
    outside = signed_in(charlie).get("/work").content.decode()
    assert "No tasks you can see." in outside
    assert "Team notes" not in outside and "Solo secret plan" not in outside and f'value="{agent.id}"' not in outside


def test_a_teammate_opens_a_team_task_and_an_outsider_or_a_hidden_task_is_404(bob, charlie, team_task, private_task):
    page = signed_in(bob).get(f"/work?task={team_task.id}")
    assert page.status_code == 200
    assert 'name="status" value="cancelled"' in page.content.decode()  # the moves the state machine allows
    assert signed_in(bob).get(f"/work?task={private_task.id}").status_code == 404
    assert signed_in(charlie).get(f"/work?task={team_task.id}").status_code == 404
    assert signed_in(charlie).get("/work?task=tsk_missing").status_code == 404  # exactly like a missing one


def test_a_teammate_moves_and_comments_on_a_team_task_as_the_api_lets_them(bob, team_task):
    bob_page = signed_in(bob)
    moved = bob_page.post(
        reverse("work-task-move", args=[team_task.id]), {"status": "blocked", "note": "waiting on legal"}
    )
    assert moved.status_code == 302 and moved["Location"] == f"/work?task={team_task.id}"
    assert Task.objects.get(id=team_task.id).status == TaskState.BLOCKED
    change = StatusChange.objects.filter(entity_id=team_task.id).latest("at")
    assert (change.to_status, change.actor_name, change.note) == ("blocked", "bob", "waiting on legal")
    commented = bob_page.post(reverse("work-task-comment", args=[team_task.id]), {"content": "I will chase it"})
    assert commented.status_code == 302
    comment = TaskComment.objects.get(task_id=team_task.id)
    assert comment.author_user == bob and comment.content == "I will chase it"
    # The API answers the teammate the same way (the same service, the same rule).
    api = client_for(bob).post(f"/api/tasks/{team_task.id}/transition", {"status": "in_progress"}, format="json")
    assert api.status_code == 200


def test_an_outsider_neither_moves_nor_comments_on_a_task_and_nothing_changes(charlie, team_task):
    page = signed_in(charlie)
    assert page.post(reverse("work-task-move", args=[team_task.id]), {"status": "cancelled"}).status_code == 404
    assert page.post(reverse("work-task-comment", args=[team_task.id]), {"content": "hello"}).status_code == 404
    assert Task.objects.get(id=team_task.id).status == TaskState.IN_PROGRESS
    assert not TaskComment.objects.filter(task_id=team_task.id).exists()
    assert StatusChange.objects.filter(entity_id=team_task.id, actor_name="charlie").count() == 0


def test_a_teammate_sees_no_title_of_a_dependency_or_requirement_they_may_not_see(alice, bob, agent, private_task):
    requirement = requirement_create(actor=Actor.for_user(alice), title="Solo roadmap", agent_id="solo")
    task = task_create(
        actor=Actor.for_user(alice),
        title="Team follow-up",
        assignee_id=agent.id,
        depends_on=[private_task.id],
        requirement_id=requirement.id,
        start=False,
    )
    page = signed_in(bob).get(f"/work?task={task.id}").content.decode()
    assert "Team follow-up" in page
    assert "Solo secret plan" not in page and private_task.id not in page
    assert "Solo roadmap" not in page and requirement.id not in page
    assert "1 task you may not see" in page  # why it waits, without what it waits for
    owner = signed_in(alice).get(f"/work?task={task.id}").content.decode()
    assert "Solo secret plan" in owner and "Solo roadmap" in owner


def test_a_teammate_files_and_decides_requirements_of_the_team_and_an_outsider_gets_404(bob, charlie, agent):
    filed = signed_in(bob).post(reverse("work-requirement-new"), {"title": "Team wiki", "agentId": agent.id})
    assert filed.status_code == 302
    requirement = Requirement.objects.get(title="Team wiki")
    outsider = signed_in(charlie)
    assert outsider.get(f"/work?requirement={requirement.id}").status_code == 404
    assert outsider.post(reverse("work-requirement-step", args=[requirement.id, "cancel"])).status_code == 404
    assert (
        outsider.post(reverse("work-requirement-comment", args=[requirement.id]), {"content": "x"}).status_code == 404
    )
    assert "Team wiki" not in outsider.get("/work").content.decode()
    assert (
        signed_in(bob)
        .post(reverse("work-requirement-step", args=[requirement.id, "cancel"]), {"reason": "dup"})
        .status_code
        == 302
    )
    requirement.refresh_from_db()
    assert requirement.status == "cancelled"


# ---------------------------------------------------------------------------- reviews and approvals


@pytest.fixture
def in_review(alice, agent, team_task) -> tuple[Task, str]:
    """team_task, reviewed by alice, submitted by ada: (the task, alice's approval id)."""
    Task.objects.filter(id=team_task.id).update(reviewer_user=alice)
    task_transition(task_id=team_task.id, to_status=TaskState.REVIEW, actor=Actor.for_agent(agent), note="done")
    task = Task.objects.get(id=team_task.id)
    return task, task.metadata["reviewApprovalId"]


def test_only_the_reviewer_is_offered_the_review_on_the_task_page(alice, bob, in_review):
    task, approval_id = in_review
    teammate = signed_in(bob).get(f"/work?task={task.id}").content.decode()
    assert "Team notes" in teammate
    assert "Your review" not in teammate and approval_id not in teammate
    assert "Your review" in signed_in(alice).get(f"/work?task={task.id}").content.decode()


@pytest.mark.parametrize("option", ["approve", "request_changes"])
def test_answering_someone_elses_review_is_404_and_leaves_the_task_in_review(bob, charlie, in_review, option):
    task, approval_id = in_review
    for user in (bob, charlie):
        answer = signed_in(user).post(
            f"/approvals/{approval_id}/answer/", {"selectedOption": option, "next": f"/work?task={task.id}"}
        )
        assert answer.status_code == 404, user
    assert Approval.objects.get(id=approval_id).status == Approval.State.PENDING
    assert Task.objects.get(id=task.id).status == TaskState.REVIEW


def test_the_approvals_page_lists_only_the_callers_own_and_a_foreign_answer_is_404(alice, bob, charlie, agent):
    mine = approval_create(user=alice, title="Ship on Friday?", agent=agent)
    theirs = approval_create(user=bob, title="Bob may deploy?", agent=agent)
    bob_page = signed_in(bob).get("/approvals/").content.decode()
    assert "Bob may deploy?" in bob_page and "Ship on Friday?" not in bob_page and mine.id not in bob_page
    outsider = signed_in(charlie).get("/approvals/").content.decode()
    assert "Ship on Friday?" not in outsider and "Bob may deploy?" not in outsider
    assert signed_in(bob).post(f"/approvals/{mine.id}/answer/", {"selectedOption": "approve"}).status_code == 404
    assert signed_in(charlie).post(f"/approvals/{theirs.id}/answer/", {"selectedOption": "approve"}).status_code == 404
    assert signed_in(bob).post("/approvals/apr_missing/answer/", {"selectedOption": "approve"}).status_code == 404
    assert Approval.objects.filter(status=Approval.State.PENDING).count() == 2
    assert signed_in(bob).post(f"/approvals/{theirs.id}/answer/", {"selectedOption": "approve"}).status_code == 302


# ---------------------------------------------------------------------------- the chat page


def test_a_teammate_talks_on_the_chat_page_but_never_reads_anothers_private_session(alice, bob, agent):
    session = main_session(agent.id)
    first = ChatMessage.objects.create(session=session, role="user", content="hello team")
    ChatMessage.objects.create(session=session, role="assistant", content="hello bob")
    private = ChatSession.objects.create(agent=agent, user=alice, title="Alice salary talk")
    ChatMessage.objects.create(session=private, role="user", content="my private words")
    page = signed_in(bob)
    chat = page.get(f"/agents/{agent.id}/chat/").content.decode()
    assert "hello team" in chat and "Alice salary talk" not in chat and private.id not in chat
    base = f"/agents/{agent.id}/chat/messages/?session="
    newer = page.get(f"{base}{session.id}&after={first.pk}")
    assert newer.status_code == 200 and "hello bob" in newer.content.decode()
    assert page.get(f"/agents/{agent.id}/chat/?session={private.id}").status_code == 404
    assert page.get(f"{base}{private.id}").status_code == 404
    assert page.get(f"{base}{private.id}&after=1").status_code == 404
    opened = page.post(f"/agents/{agent.id}/chat/sessions/new/", {"title": "Bob asks"})
    assert opened.status_code == 302
    assert ChatSession.objects.get(title="Bob asks").user == bob


def test_an_outsider_gets_404_on_every_chat_door_of_the_agent(charlie, agent):
    session = main_session(agent.id)
    ChatMessage.objects.create(session=session, role="user", content="hello team")
    page = signed_in(charlie)
    assert page.get(f"/agents/{agent.id}/chat/").status_code == 404
    assert page.get(f"/agents/{agent.id}/chat/messages/?session={session.id}").status_code == 404
    assert page.post(f"/agents/{agent.id}/chat/sessions/new/", {"title": "x"}).status_code == 404
    assert page.get("/agents/nobody/chat/").status_code == 404
    assert not ChatSession.objects.filter(title="x").exists()


def test_a_teammates_own_session_is_private_from_the_agents_owner_too(alice, bob, agent):
    signed_in(bob).post(f"/agents/{agent.id}/chat/sessions/new/", {"title": "Bob private"})
    session = ChatSession.objects.get(title="Bob private")
    ChatMessage.objects.create(session=session, role="user", content="between me and ada", metadata={})
    owner = signed_in(alice)
    assert "Bob private" not in owner.get(f"/agents/{agent.id}/chat/").content.decode()
    assert owner.get(f"/agents/{agent.id}/chat/?session={session.id}").status_code == 404
    assert owner.get(f"/agents/{agent.id}/chat/messages/?session={session.id}").status_code == 404
    mine = signed_in(bob).get(f"/agents/{agent.id}/chat/?session={session.id}").content.decode()
    assert "between me and ada" in mine
