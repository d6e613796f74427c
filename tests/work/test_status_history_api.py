"""GET /api/tasks/{id}/history and /api/requirements/{id}/history: every transition of
one task or requirement, oldest first, paged like the other lists, each row naming who
moved it (a person, an agent or the system) and the note or reason given."""

from __future__ import annotations

import pytest

from markus.core.actors import Actor
from markus.work.models import TaskState
from markus.work.services import requirement_create, requirement_reject, task_create, task_transition

from ..conftest import client_for
from .conftest import agent_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def moved(as_alice, ada, bea):
    """Filed by alice (pending), started by her, submitted by Ada."""
    task = task_create(actor=as_alice, title="Write", assignee_id=ada.id, reviewer_agent_id=bea.id, start=False)
    task_transition(task_id=task.id, to_status=TaskState.IN_PROGRESS, actor=as_alice, note="go")
    task_transition(task_id=task.id, to_status=TaskState.REVIEW, actor=Actor.for_agent(ada), note="done, see PR 7")
    return task


def test_the_task_history_lists_every_transition_with_who_and_why(alice_client, moved):
    response = alice_client.get(f"/api/tasks/{moved.id}/history")
    assert response.status_code == 200, response.content
    data = response.json()
    assert data["totalCount"] == 3
    rows = data["history"]
    assert [(r["from"], r["to"]) for r in rows] == [
        (None, "pending"),
        ("pending", "in_progress"),
        ("in_progress", "review"),
    ]
    assert rows[0]["entity"] == {"kind": "task", "id": moved.id}
    assert rows[1]["who"] == {"kind": "user", "id": str(moved.created_by_user_id), "name": "alice"}
    assert rows[1]["note"] == "go"
    assert rows[2]["who"] == {"kind": "agent", "id": "ada", "name": "Ada"}
    assert rows[2]["note"] == "done, see PR 7"
    assert rows[0]["at"] <= rows[1]["at"] <= rows[2]["at"]


def test_the_system_is_named_as_the_mover_of_a_cascade(as_alice, ada, bea, alice_client):
    first = task_create(actor=as_alice, title="First", assignee_id=ada.id, reviewer_agent_id=bea.id)
    second = task_create(
        actor=as_alice, title="Then", assignee_id=ada.id, reviewer_agent_id=bea.id, depends_on=[first.id]
    )
    task_transition(task_id=first.id, to_status=TaskState.REVIEW, actor=Actor.for_agent(ada))
    task_transition(task_id=first.id, to_status=TaskState.COMPLETED, actor=Actor.for_agent(bea))
    rows = alice_client.get(f"/api/tasks/{second.id}/history").json()["history"]
    assert rows[-1]["who"]["kind"] == "system" and rows[-1]["to"] == "in_progress"
    assert first.id in rows[-1]["note"]


def test_the_history_is_paged_with_limit_and_offset(alice_client, moved):
    page = alice_client.get(f"/api/tasks/{moved.id}/history?limit=2&offset=1").json()
    assert page["totalCount"] == 3
    assert [r["to"] for r in page["history"]] == ["in_progress", "review"]
    assert alice_client.get(f"/api/tasks/{moved.id}/history?limit=0").status_code == 400


def test_a_task_the_caller_may_not_see_answers_404(charlie_client, moved):
    assert charlie_client.get(f"/api/tasks/{moved.id}/history").status_code == 404
    assert charlie_client.get("/api/tasks/tsk_nope/history").status_code == 404


def test_an_agent_token_reads_the_history_of_its_own_task(moved, bea_and_token, zed_and_token):
    assert agent_client(bea_and_token[1]).get(f"/api/tasks/{moved.id}/history").status_code == 200
    assert agent_client(zed_and_token[1]).get(f"/api/tasks/{moved.id}/history").status_code == 404


def test_the_requirement_history_carries_the_rejection_reason(cyd, alice, alice_client, as_alice):
    proposal = requirement_create(actor=Actor.for_agent(cyd), title="Faster builds")
    requirement_reject(requirement_id=proposal.id, actor=as_alice, reason="Not this quarter.")
    response = alice_client.get(f"/api/requirements/{proposal.id}/history")
    assert response.status_code == 200, response.content
    data = response.json()
    assert data["totalCount"] == 2
    filed, rejected = data["history"]
    assert filed["entity"] == {"kind": "requirement", "id": proposal.id}
    assert filed["who"] == {"kind": "agent", "id": "cyd", "name": "Cyd"} and filed["to"] == "pending"
    assert (rejected["from"], rejected["to"]) == ("pending", "rejected")
    assert rejected["note"] == "Not this quarter." and rejected["who"]["name"] == "alice"


def test_a_requirement_the_caller_may_not_see_answers_404(cyd, charlie_client):
    proposal = requirement_create(actor=Actor.for_agent(cyd), title="Faster builds")
    assert charlie_client.get(f"/api/requirements/{proposal.id}/history").status_code == 404


def test_the_history_endpoints_are_in_the_schema(alice_client):
    schema = alice_client.get("/api/schema/?format=json").json()
    assert "/api/tasks/{task_id}/history/" in schema["paths"]
    assert "/api/requirements/{requirement_id}/history/" in schema["paths"]


def test_the_history_answers_a_person_who_sees_the_agent(moved, bob):
    assert client_for(bob).get(f"/api/tasks/{moved.id}/history").status_code == 200


def test_the_history_costs_the_same_statements_for_3_and_30_changes(alice_client, moved, as_alice):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def count() -> tuple[int, int]:
        with CaptureQueriesContext(connection) as ctx:
            rows = alice_client.get(f"/api/tasks/{moved.id}/history?limit=100").json()["history"]
        return len(rows), len(ctx.captured_queries)

    rows_before, few = count()
    for _ in range(9):  # review → in_progress → blocked → in_progress → review: 4 changes a round
        task_transition(task_id=moved.id, to_status=TaskState.IN_PROGRESS, actor=as_alice)
        task_transition(task_id=moved.id, to_status=TaskState.BLOCKED, actor=as_alice)
        task_transition(task_id=moved.id, to_status=TaskState.IN_PROGRESS, actor=as_alice)
        task_transition(task_id=moved.id, to_status=TaskState.REVIEW, actor=as_alice)
    rows_after, many = count()
    assert (rows_before, rows_after) == (3, 39)
    assert many == few, f"{few} statements for 3 changes, {many} for 39"
