"""The task and requirement API: shapes, status codes and visibility."""

from __future__ import annotations

import pytest

from attention.models import AgentActivity
from mailbox.registry import MailboxType
from markus.core.actors import Actor
from markus.work.models import Requirement, Task, TaskState
from markus.work.services import requirement_create, task_create

from ..conftest import client_for
from .conftest import agent_client, force_status, items

pytestmark = pytest.mark.django_db


@pytest.fixture
def task(make_task):
    return make_task(title="Write the report", start=True)


def test_a_user_creates_a_task_and_it_starts(alice_client, ada, bea):
    response = alice_client.post(
        "/api/tasks/", {"title": "Write", "assigneeId": ada.id, "reviewerId": bea.id}, format="json"
    )
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["status"] == "in_progress" and data["assigneeId"] == "ada" and data["reviewerId"] == "bea"
    assert data["executionRound"] == 1 and data["createdByUserId"] is not None
    assert "pendingInbox" in data
    assert items(ada, MailboxType.TASK_STATUS_UPDATE)[0].payload["taskId"] == data["id"]


def test_a_task_can_be_created_pending_with_dependencies_and_watchers(alice_client, task, ada, cyd):
    body = {"title": "Next", "assigneeId": cyd.id, "dependsOn": [task.id], "metadata": {"watchers": [ada.id]}}
    data = alice_client.post("/api/tasks/", body, format="json").json()
    assert data["status"] == "pending" and data["dependsOn"] == [task.id]
    assert data["metadata"] == {"watchers": ["ada"]}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "title"),
        ({"title": "x", "assigneeId": "zed"}, "assigneeId: no such agent 'zed'"),
        ({"title": "x", "assigneeId": "ada", "reviewerId": "ada"}, "reviewer cannot be the assignee"),
        ({"title": "x", "dependsOn": "tsk_1"}, "dependsOn"),
        ({"title": "x", "dependsOn": ["tsk_nope"]}, "dependsOn: no such task"),
        ({"title": "x", "metadata": {"watchers": ["zed"]}}, "metadata.watchers: no such agent"),
        ({"title": "x", "metadata": []}, "metadata"),
        ({"title": "x", "requirementId": "req_nope"}, "requirementId: no such requirement"),
    ],
)
def test_bad_task_input_is_a_400_with_a_message(alice_client, ada, zed_and_token, body, message):
    response = alice_client.post("/api/tasks/", body, format="json")
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not Task.objects.exists()


def test_a_body_that_is_not_an_object_is_a_400(alice_client):
    response = alice_client.post("/api/tasks/", ["title"], format="json")
    assert response.status_code == 400


def test_an_illegal_transition_over_the_api_is_a_409(alice_client, task):
    response = alice_client.post(f"/api/tasks/{task.id}/transition", {"status": "archived"}, format="json")
    assert response.status_code == 409
    assert "cannot move from in_progress to archived" in response.json()["detail"]


def test_a_legal_transition_over_the_api_returns_the_task(alice_client, task):
    response = alice_client.post(f"/api/tasks/{task.id}/transition", {"status": "blocked"}, format="json")
    assert response.status_code == 200 and response.json()["status"] == "blocked"


def test_an_unknown_status_is_a_400(alice_client, task):
    response = alice_client.post(f"/api/tasks/{task.id}/transition", {"status": "done"}, format="json")
    assert response.status_code == 400
    assert Task.objects.get(id=task.id).status == TaskState.IN_PROGRESS


def test_the_assignee_cannot_complete_its_own_task_over_the_api(as_alice, agent_with_token, bea):
    worker, token = agent_with_token
    mine = force_status(
        task_create(actor=as_alice, title="mine", assignee_id=worker.id, reviewer_agent_id=bea.id), TaskState.REVIEW
    )
    response = agent_client(token).post(f"/api/tasks/{mine.id}/transition", {"status": "completed"}, format="json")
    assert response.status_code == 409
    assert "cannot complete its own task" in response.json()["detail"]
    assert Task.objects.get(id=mine.id).status == TaskState.REVIEW


def test_the_reviewer_agent_completes_a_task_with_its_token(task, bea_and_token, ada):
    force_status(task, TaskState.REVIEW)
    response = agent_client(bea_and_token[1]).post(
        f"/api/tasks/{task.id}/transition", {"status": "completed"}, format="json"
    )
    assert response.status_code == 200 and response.json()["status"] == "completed"


def test_retry_over_the_api(alice_client, task):
    assert alice_client.post(f"/api/tasks/{task.id}/retry").status_code == 409
    force_status(task, TaskState.FAILED)
    response = alice_client.post(f"/api/tasks/{task.id}/retry", {}, format="json")
    assert response.status_code == 200 and response.json()["executionRound"] == 2


def test_comments_over_the_api(alice_client, task, ada):
    first = alice_client.post(f"/api/tasks/{task.id}/comments", {"content": "Hi"}, format="json")
    assert first.status_code == 201
    reply = alice_client.post(
        f"/api/tasks/{task.id}/comments", {"content": "Also", "replyToCommentId": first.json()["id"]}, format="json"
    )
    assert reply.json()["replyToAuthor"] == "alice" and reply.json()["replyToContent"] == "Hi"
    listed = alice_client.get(f"/api/tasks/{task.id}/comments").json()["comments"]
    assert [c["content"] for c in listed] == ["Hi", "Also"]
    bad = alice_client.post(
        f"/api/tasks/{task.id}/comments", {"content": "x", "replyToCommentId": "cmt_nope"}, format="json"
    )
    assert bad.status_code == 400 and "not a comment on this task" in bad.json()["detail"]
    assert alice_client.post(f"/api/tasks/{task.id}/comments", {}, format="json").status_code == 400


def test_an_agent_comment_over_the_api_keeps_its_activity_id(task, bea_and_token):
    AgentActivity.objects.create(id="act_9", agent=bea_and_token[0], type="task", label="Reviewing")
    response = agent_client(bea_and_token[1]).post(
        f"/api/tasks/{task.id}/comments", {"content": "Reviewing", "activityId": "act_9"}, format="json"
    )
    assert response.status_code == 201
    assert response.json()["activityId"] == "act_9" and response.json()["authorKind"] == "agent"


# ---------------------------------------------------------------------------- visibility


def test_an_outsider_gets_404_for_everything_about_a_task(charlie_client, task):
    for method, path in [
        ("get", f"/api/tasks/{task.id}/"),
        ("post", f"/api/tasks/{task.id}/transition"),
        ("get", f"/api/tasks/{task.id}/comments"),
        ("post", f"/api/tasks/{task.id}/comments"),
        ("post", f"/api/tasks/{task.id}/retry"),
    ]:
        response = getattr(charlie_client, method)(path, {"status": "cancelled", "content": "x"}, format="json")
        assert response.status_code == 404, (method, path)
    assert charlie_client.get("/api/tasks/").json() == {"tasks": [], "totalCount": 0, "totalCountCapped": False}
    assert Task.objects.get(id=task.id).status == TaskState.IN_PROGRESS


def test_a_missing_task_answers_like_a_foreign_one(alice_client):
    assert alice_client.get("/api/tasks/tsk_nope/").status_code == 404


def test_a_teammate_sees_the_tasks_of_the_teams_agents(bob, task):
    response = client_for(bob).get(f"/api/tasks/{task.id}/")
    assert response.status_code == 200 and response.json()["id"] == task.id


def test_an_agent_token_sees_only_tasks_it_takes_part_in(task, agent_with_token, bea_and_token):
    outsider = agent_client(agent_with_token[1])  # "tok": same team, not on the task
    assert outsider.get(f"/api/tasks/{task.id}/").status_code == 404
    assert outsider.get("/api/tasks/").json()["totalCount"] == 0
    reviewer = agent_client(bea_and_token[1])
    assert reviewer.get(f"/api/tasks/{task.id}/").status_code == 200
    assert [t["id"] for t in reviewer.get("/api/tasks/").json()["tasks"]] == [task.id]


def test_the_task_list_filters_by_status(alice_client, task, make_task):
    make_task(title="other")
    data = alice_client.get("/api/tasks/?status=in_progress").json()
    assert [t["id"] for t in data["tasks"]] == [task.id]
    assert alice_client.get("/api/tasks/?status=nope").status_code == 400
    assert alice_client.get("/api/tasks/?limit=zero").status_code == 400


def test_an_unauthenticated_caller_is_refused(task):
    from rest_framework.test import APIClient

    assert APIClient().get(f"/api/tasks/{task.id}/").status_code in (401, 403)


# ---------------------------------------------------------------------------- requirements


def test_a_user_creates_a_requirement_in_progress(alice_client, ada):
    response = alice_client.post("/api/requirements/", {"title": "Dark mode", "agentId": ada.id}, format="json")
    assert response.status_code == 201
    assert response.json()["status"] == "in_progress" and response.json()["agentId"] == "ada"


def test_an_agent_proposes_a_requirement_and_a_user_approves_it(bea_and_token, alice_client, bea):
    client = agent_client(bea_and_token[1])
    proposal = client.post("/api/requirements/", {"title": "Lint rules"}, format="json").json()
    assert proposal["status"] == "pending" and proposal["createdByAgentId"] == "bea"
    assert client.post(f"/api/requirements/{proposal['id']}/approve").status_code == 403
    response = alice_client.post(f"/api/requirements/{proposal['id']}/approve")
    assert response.status_code == 200 and response.json()["status"] == "in_progress"
    again = alice_client.post(f"/api/requirements/{proposal['id']}/approve")  # the status it has: a no-op
    assert again.status_code == 200 and again.json()["status"] == "in_progress"


def test_reject_and_resubmit_over_the_api(bea_and_token, alice_client):
    client = agent_client(bea_and_token[1])
    proposal = client.post("/api/requirements/", {"title": "Lint"}, format="json").json()
    rejected = alice_client.post(f"/api/requirements/{proposal['id']}/reject", {"reason": "vague"}, format="json")
    assert rejected.json()["status"] == "rejected"
    resubmitted = client.post(f"/api/requirements/{proposal['id']}/resubmit", {"title": "Lint: ruff"}, format="json")
    assert resubmitted.status_code == 200
    assert resubmitted.json()["status"] == "pending" and resubmitted.json()["title"] == "Lint: ruff"


def test_requirement_comments_over_the_api(alice_client, cyd):
    requirement = requirement_create(actor=Actor.for_agent(cyd), title="Idea")
    posted = alice_client.post(f"/api/requirements/{requirement.id}/comments", {"content": "Why?"}, format="json")
    assert posted.status_code == 201 and posted.json()["requirementId"] == requirement.id
    listed = alice_client.get(f"/api/requirements/{requirement.id}/comments").json()["comments"]
    assert [c["content"] for c in listed] == ["Why?"]
    assert len(items(cyd, MailboxType.REQUIREMENT_COMMENT)) == 1


def test_an_outsider_gets_404_for_a_requirement(charlie_client, cyd):
    requirement = requirement_create(actor=Actor.for_agent(cyd), title="Idea")
    for path in ("", "approve", "reject", "resubmit", "comments"):
        method = charlie_client.get if path in ("", "comments") else charlie_client.post
        assert method(f"/api/requirements/{requirement.id}/{path}").status_code == 404, path
    assert charlie_client.get("/api/requirements/").json()["totalCount"] == 0
    assert Requirement.objects.get(id=requirement.id).status == "pending"


def test_a_requirement_cannot_name_a_foreign_agent(alice_client, zed_and_token):
    response = alice_client.post("/api/requirements/", {"title": "x", "agentId": "zed"}, format="json")
    assert response.status_code == 400 and "no such agent" in response.json()["detail"]
