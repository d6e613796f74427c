"""The work pages that act: filing a task or a requirement on /work, moving a task
with the state machine's refusals shown, comments with mentions and replies, the
status history, a review answered where its notification leads, the approvals inbox;
and their live events (``/ws/board/``: only to who may see the task). alice owns ada
(team Core, bob a member); charlie is an outsider."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from markus.agents.services import agent_create
from markus.core.actors import Actor
from markus.work.models import StatusChange, Task, TaskState
from markus.work.services import task_create, task_transition
from notifications.models import Approval, UserNotification
from notifications.services import approval_create

from .conftest import session_cookie, ws_connect

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(alice) -> Client:
    c = Client(enforce_csrf_checks=False)
    c.force_login(alice)
    return c


def test_a_task_filed_on_the_work_page_starts_with_its_assignee_and_its_history(client, agent):
    response = client.post(
        reverse("work-task-new"),
        {"title": "Write the notes", "description": "For **1.2**", "assigneeId": agent.id, "start": "on"},
    )
    task = Task.objects.get(title="Write the notes")
    assert response.status_code == 302 and response["Location"] == f"/work?task={task.id}"
    assert task.assignee_id == agent.id and task.status == TaskState.IN_PROGRESS
    page = client.get(response["Location"]).content.decode()
    assert "<strong>1.2</strong>" in page  # the description is rendered markdown
    assert "filed as pending" in page and "pending → in_progress" in page
    changes = list(StatusChange.objects.filter(entity_id=task.id).values_list("from_status", "to_status", "actor_name"))
    assert changes == [("", "pending", "alice"), ("pending", "in_progress", "alice")]


def test_a_refused_task_keeps_the_input_and_says_why(client, agent, charlie):
    zed = agent_create(name="Zed", owner=charlie, agent_id="zed")[0]
    response = client.post(reverse("work-task-new"), {"title": "Sneaky", "assigneeId": zed.id})
    assert response.status_code == 400
    page = response.content.decode()
    assert "assigneeId: no such agent &#x27;zed&#x27;" in page and 'value="Sneaky"' in page
    assert not Task.objects.filter(title="Sneaky").exists()
    empty = client.post(reverse("work-task-new"), {"title": ""})
    assert empty.status_code == 400 and "title:" in empty.content.decode()


def test_a_transition_the_state_machine_refuses_answers_409_with_the_allowed_ones(client, alice, agent):
    task = task_create(actor=Actor.for_user(alice), title="T", assignee_id=agent.id)
    page = client.get(f"/work?task={task.id}").content.decode()
    assert 'name="status" value="review"' in page and 'name="status" value="archived"' not in page
    refused = client.post(reverse("work-task-move", args=[task.id]), {"status": "archived"})
    assert refused.status_code == 409
    assert "cannot move from in_progress to archived (allowed: " in refused.content.decode()
    moved = client.post(reverse("work-task-move", args=[task.id]), {"status": "cancelled", "note": "not needed"})
    assert moved.status_code == 302
    task.refresh_from_db()
    assert task.status == TaskState.CANCELLED
    assert "not needed" in client.get(f"/work?task={task.id}").content.decode()


def test_a_task_the_caller_may_not_see_is_404_on_every_work_page(alice, charlie, agent):
    task = task_create(actor=Actor.for_user(alice), title="T", assignee_id=agent.id)
    c = Client()
    c.force_login(charlie)
    assert c.get(f"/work?task={task.id}").status_code == 404
    assert c.post(reverse("work-task-move", args=[task.id]), {"status": "cancelled"}).status_code == 404
    assert c.post(reverse("work-task-comment", args=[task.id]), {"content": "hi"}).status_code == 404
    assert Task.objects.get(id=task.id).status == TaskState.IN_PROGRESS


def test_a_comment_with_a_mention_rings_the_mentioned_persons_bell_and_a_reply_quotes(client, alice, bob, agent):
    task = task_create(actor=Actor.for_user(alice), title="T", assignee_id=agent.id)
    first = client.post(reverse("work-task-comment", args=[task.id]), {"content": "What do you think, @bob?"})
    assert first.status_code == 302
    assert UserNotification.objects.filter(user=bob, title__contains="mentioned").exists()
    comment_id = first["Location"].split("#comment-")[1]
    client.post(
        reverse("work-task-comment", args=[task.id]), {"content": "Answering myself", "replyToCommentId": comment_id}
    )
    page = client.get(f"/work?task={task.id}").content.decode()
    assert "↪ alice: What do you think, @bob?" in page


def test_a_review_is_answered_on_the_task_page_its_notification_opens(client, alice, agent):
    task = task_create(actor=Actor.for_user(alice), title="T", assignee_id=agent.id, reviewer_user_id=alice.pk)
    task_transition(task_id=task.id, to_status=TaskState.REVIEW, actor=Actor.for_agent(agent), note="done")
    note = UserNotification.objects.get(user=alice, type="task_review")
    opened = client.get(f"/notifications/{note.id}/open/", follow=True)
    page = opened.content.decode()
    assert opened.redirect_chain[-1][0] == f"/work?task={task.id}"
    assert "Your review" in page and 'value="request_changes"' in page
    approval_id = Task.objects.get(id=task.id).metadata["reviewApprovalId"]
    answer = client.post(
        f"/approvals/{approval_id}/answer/",
        {"selectedOption": "request_changes", "comment": "add the dates", "next": f"/work?task={task.id}"},
    )
    assert answer.status_code == 302 and answer["Location"] == f"/work?task={task.id}"
    task.refresh_from_db()
    assert task.status == TaskState.IN_PROGRESS
    again = client.post(f"/approvals/{approval_id}/answer/", {"selectedOption": "approve"})
    assert again.status_code == 409 and "already answered" in again.content.decode()


def test_the_approvals_page_answers_options_and_free_form(client, alice, agent):
    approval = approval_create(
        user=alice,
        title="Which day?",
        options=[{"id": "mon", "label": "Monday"}, {"id": "tue", "label": "Tuesday"}],
        allow_freeform=True,
        agent=agent,
    )
    note = UserNotification.objects.get(metadata__approvalId=approval.id)
    assert client.get(f"/notifications/{note.id}/open/")["Location"] == f"/approvals/#approval-{approval.id}"
    page = client.get("/approvals/").content.decode()
    assert "Which day?" in page and ">Monday<" in page and "answer in your own words" in page
    bad = client.post(f"/approvals/{approval.id}/answer/", {"selectedOption": "__freeform__", "answer": ""})
    assert bad.status_code == 400 and "selectedOption is required" in bad.content.decode()
    client.post(f"/approvals/{approval.id}/answer/", {"selectedOption": "__freeform__", "answer": "Friday"})
    approval.refresh_from_db()
    assert approval.status == Approval.State.ANSWERED and approval.selected_option == "Friday"


def test_a_requirement_is_filed_and_decided_on_its_page(client, alice, agent):
    response = client.post(reverse("work-requirement-new"), {"title": "Docs site", "agentId": agent.id})
    assert response.status_code == 302
    rid = response["Location"].split("requirement=")[1]
    page = client.get(response["Location"]).content.decode()
    assert "filed as in_progress" in page and "step-complete" in page
    refused = client.post(reverse("work-requirement-step", args=[rid, "reject"]))  # (approving it again is a no-op)
    assert refused.status_code == 409
    client.post(reverse("work-requirement-step", args=[rid, "cancel"]), {"reason": "out of scope"})
    page = client.get(f"/work?requirement={rid}").content.decode()
    assert "in_progress → cancelled" in page and "out of scope" in page


def _count(client: Client, path: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(path).status_code == 200, path
    return len(ctx.captured_queries)


def test_the_work_pages_read_in_a_fixed_number_of_queries(client, alice, agent):
    actor = Actor.for_user(alice)

    def grow(n: int) -> Task:
        last = None
        for i in range(n):
            last = task_create(actor=actor, title=f"T{i}", assignee_id=agent.id, reviewer_user_id=alice.pk)
            client.post(reverse("work-task-comment", args=[last.id]), {"content": f"c{i}"})
            approval_create(user=alice, title=f"Q{i}", agent=agent)
        return last

    task = grow(2)
    small = {p: _count(client, p) for p in ("/work", f"/work?task={task.id}", "/approvals/")}
    grow(8)
    for i in range(6):
        client.post(reverse("work-task-comment", args=[task.id]), {"content": f"more {i}"})
        task_transition(task_id=task.id, to_status="blocked" if i % 2 == 0 else "in_progress", actor=actor)
    large = {p: _count(client, p) for p in small}
    assert large == small


def test_work_events_reach_only_those_who_see_the_task(transactional_db, alice, charlie, agent):
    task = task_create(actor=Actor.for_user(alice), title="T", assignee_id=agent.id)

    alice_cookie, charlie_cookie = session_cookie(alice), session_cookie(charlie)

    async def run():
        mine, ok = await ws_connect("/ws/board/", cookie=alice_cookie)
        theirs, ok2 = await ws_connect("/ws/board/", cookie=charlie_cookie)
        nobody, ok3 = await ws_connect("/ws/board/")
        assert ok and ok2 and ok3
        refused = await nobody.receive_output(timeout=2)
        from channels.db import database_sync_to_async

        await database_sync_to_async(task_transition)(
            task_id=task.id, to_status="cancelled", actor=Actor.for_user(alice)
        )
        got = await mine.receive_json_from(timeout=3)
        silent = await theirs.receive_nothing(timeout=0.5)
        await mine.disconnect()
        await theirs.disconnect()
        return refused, got, silent

    refused, got, silent = async_to_sync(run)()
    assert refused["type"] == "websocket.close" and refused["code"] == 4401 and refused["reason"] == "not signed in"
    assert got == {"type": "task:status", "taskId": task.id, "fromStatus": "in_progress", "status": "cancelled"}
    assert silent
