"""Cascade cancellation (seed section 7): cancelling a task whose dependents wait on it
can cancel them too (``cascade: true``), each dependent's assignee told as a
cancellation tells it; the task says how many wait on it (``dependents``), and a cancel
without a decision about them is a 409 that says how many and what may be chosen."""

from __future__ import annotations

import pytest
from django.urls import reverse

from markus.core.actors import Actor
from markus.work.models import StatusChange, Task, TaskState
from markus.work.services import task_create, task_transition

from .conftest import infos

pytestmark = [pytest.mark.django_db, pytest.mark.pg]  # row locks: PostgreSQL too
S = TaskState


@pytest.fixture
def chain(as_alice, ada, bea, cyd):
    """first ← second (cyd) ← third (ada); and an unrelated finished dependent."""
    first = task_create(actor=as_alice, title="First", assignee_id=ada.id, reviewer_agent_id=bea.id)
    second = task_create(
        actor=as_alice, title="Second", assignee_id=cyd.id, reviewer_agent_id=bea.id, depends_on=[first.id]
    )
    third = task_create(
        actor=as_alice, title="Third", assignee_id=ada.id, reviewer_agent_id=bea.id, depends_on=[second.id]
    )
    return first, second, third


def status(task):
    return Task.objects.get(id=task.id).status


def test_the_task_says_how_many_wait_on_it(alice_client, chain):
    first, second, third = chain
    assert alice_client.get(f"/api/tasks/{first.id}/").json()["dependents"] == 1
    assert alice_client.get(f"/api/tasks/{third.id}/").json()["dependents"] == 0
    listed = {t["id"]: t["dependents"] for t in alice_client.get("/api/tasks/").json()["tasks"]}
    assert listed == {first.id: 1, second.id: 1, third.id: 0}


def test_cancelling_without_a_decision_is_a_409_that_counts_the_dependents(alice_client, chain):
    first, second, third = chain
    response = alice_client.post(f"/api/tasks/{first.id}/transition", {"status": "cancelled"}, format="json")
    assert response.status_code == 409, response.content
    body = response.json()
    assert body["code"] == "dependents_waiting"
    assert body["dependents"] == 1  # as the task's representation counts them: the direct ones
    assert body["wouldCancel"] == sorted([second.id, third.id])  # and what waits on those
    assert body["allowed"] == [{"cascade": True}, {"cascade": False}]
    assert status(first) == S.IN_PROGRESS


def test_cascade_true_cancels_every_waiting_dependent_and_tells_their_assignees(alice_client, chain, ada, cyd):
    first, second, third = chain
    response = alice_client.post(
        f"/api/tasks/{first.id}/transition",
        {"status": "cancelled", "cascade": True, "note": "scope cut"},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "cancelled" and response.json()["cascaded"] == sorted([second.id, third.id])
    assert (status(first), status(second), status(third)) == (S.CANCELLED, S.CANCELLED, S.CANCELLED)
    [told_cyd] = [i for i in infos(cyd, second) if i.payload["extra"]["toStatus"] == "cancelled"]
    assert told_cyd.payload["extra"] == {"fromStatus": "pending", "toStatus": "cancelled"}
    assert first.id in told_cyd.payload["content"]
    assert [i.payload["extra"]["toStatus"] for i in infos(ada, third)] == ["pending", "cancelled"]  # assigned, then
    change = StatusChange.objects.get(entity_id=second.id, to_status="cancelled")
    assert change.actor_kind == "user" and first.id in change.note


def test_cascade_false_cancels_only_the_task(alice_client, chain):
    first, second, third = chain
    response = alice_client.post(
        f"/api/tasks/{first.id}/transition", {"status": "cancelled", "cascade": False}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["cascaded"] == []
    assert (status(first), status(second), status(third)) == (S.CANCELLED, S.PENDING, S.PENDING)


def test_a_task_without_waiting_dependents_cancels_as_before(alice_client, chain):
    third = chain[2]
    response = alice_client.post(f"/api/tasks/{third.id}/transition", {"status": "cancelled"}, format="json")
    assert response.status_code == 200 and status(third) == S.CANCELLED


def test_a_dependent_that_also_waits_elsewhere_is_cancelled_too(as_alice, ada, bea, chain):
    first = chain[0]
    other = task_create(actor=as_alice, title="Other", assignee_id=bea.id, reviewer_agent_id=ada.id)
    both = task_create(
        actor=as_alice, title="Both", assignee_id=ada.id, reviewer_agent_id=bea.id, depends_on=[first.id, other.id]
    )
    task_transition(task_id=first.id, to_status=S.CANCELLED, actor=as_alice, cascade=True)
    assert status(both) == S.CANCELLED and status(other) == S.IN_PROGRESS


def test_finished_dependents_are_left_alone(as_alice, ada, bea, chain):
    first, second, third = chain
    Task.objects.filter(id=second.id).update(status=S.COMPLETED)
    task_transition(task_id=first.id, to_status=S.CANCELLED, actor=as_alice, cascade=True)
    assert status(second) == S.COMPLETED and status(third) == S.PENDING


def test_the_work_page_offers_the_cascade_when_dependents_wait(client, alice, chain):
    client.force_login(alice)
    first = chain[0]
    html = client.get(f"/work?task={first.id}").content.decode()
    assert 'name="cascade"' in html and "1 task waits on it" in html
    response = client.post(reverse("work-task-move", args=[first.id]), {"status": "cancelled", "cascade": "on"})
    assert response.status_code == 302
    assert all(status(t) == S.CANCELLED for t in chain)


def test_the_agents_tool_cancels_alone_unless_it_asks_for_the_cascade(chain, ada):
    """The service's default (the tools', the admin's) keeps today's behaviour."""
    first, second, _ = chain
    task_transition(task_id=first.id, to_status=S.CANCELLED, actor=Actor.for_agent(ada))
    assert status(second) == S.PENDING


def test_the_agents_tool_cancels_with_the_cascade_when_asked(chain, ada):
    from attention.toolbox import ToolContext, execute_tool

    first, second, third = chain
    ctx = ToolContext(agent_id=ada.id, agent_name=ada.name, scenario="task_execution")
    ok, text = execute_tool(ctx, "task_update", {"task_id": first.id, "status": "cancelled", "cascade": True})
    assert ok, text
    assert (status(second), status(third)) == (S.CANCELLED, S.CANCELLED)
