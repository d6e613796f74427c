"""Admin actions run the transition services and report refusals as messages."""

from __future__ import annotations

import pytest
from django.contrib.admin.utils import quote
from django.contrib.messages import get_messages
from django.urls import reverse

from markus.core.actors import Actor
from markus.work.models import Requirement, Task, TaskState
from markus.work.services import requirement_create

from .conftest import executions

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, django_user_model):
    root = django_user_model.objects.create_superuser("root", password="pw-root")
    client.force_login(root)
    return client


def run_action(client, url, action, ids):
    response = client.post(url, {"action": action, "_selected_action": ids}, follow=True)
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_the_start_action_starts_a_pending_task_and_refuses_an_archived_one(admin_client, make_task, ada):
    pending = make_task(title="pending")
    archived = make_task(title="archived")
    Task.objects.filter(id=archived.id).update(status=TaskState.ARCHIVED)
    messages = run_action(
        admin_client, reverse("admin:work_task_changelist"), "task_to_in_progress", [pending.id, archived.id]
    )
    assert Task.objects.get(id=pending.id).status == TaskState.IN_PROGRESS
    assert len(executions(ada, pending)) == 1
    assert Task.objects.get(id=archived.id).status == TaskState.ARCHIVED
    assert "Start (in progress): 1 done." in messages
    assert any(
        m.startswith(f"Start (in progress) refused for {archived.id}: ") and "cannot move" in m for m in messages
    )


@pytest.mark.parametrize(
    ("action", "from_status", "to_status"),
    [
        ("task_to_review", TaskState.IN_PROGRESS, TaskState.REVIEW),
        ("task_to_completed", TaskState.REVIEW, TaskState.COMPLETED),
        ("task_to_cancelled", TaskState.BLOCKED, TaskState.CANCELLED),
        ("task_to_archived", TaskState.FAILED, TaskState.ARCHIVED),
        ("task_retry", TaskState.FAILED, TaskState.IN_PROGRESS),
    ],
)
def test_each_transition_action_moves_the_task(admin_client, make_task, action, from_status, to_status):
    task = make_task()
    Task.objects.filter(id=task.id).update(status=from_status)
    messages = run_action(admin_client, reverse("admin:work_task_changelist"), action, [task.id])
    assert Task.objects.get(id=task.id).status == to_status
    assert any(m.endswith("1 done.") for m in messages)


def test_the_requirement_approve_action(admin_client, cyd):
    requirement = requirement_create(actor=Actor.for_agent(cyd), title="Idea")
    run_action(admin_client, reverse("admin:work_requirement_changelist"), "requirement_in_progress", [requirement.id])
    assert Requirement.objects.get(id=requirement.id).status == "in_progress"
    messages = run_action(
        admin_client, reverse("admin:work_requirement_changelist"), "requirement_rejected", [requirement.id]
    )
    assert any("refused" in m for m in messages)


def test_the_task_change_page_renders_with_read_only_comments(admin_client, make_task):
    task = make_task()
    response = admin_client.get(reverse("admin:work_task_change", args=[quote(task.id)]))
    assert response.status_code == 200
    assert b"Write the report" in response.content


def test_add_task_goes_through_the_task_service(admin_client, ada, bea):
    response = admin_client.post(
        reverse("admin:work_task_add"),
        {"title": "Ship the report", "description": "by Friday", "assignee": ada.id, "reviewer_agent": bea.id},
    )
    assert response.status_code == 302, getattr(response, "context", None) and response.context["adminform"].errors
    task = Task.objects.get(title="Ship the report")
    assert task.team_id == ada.team_id and task.team_id is not None
    assert task.created_by_user.username == "root"
    assert task.status == TaskState.IN_PROGRESS  # the service started it for its assignee
    assert len(executions(ada, task)) == 1


def test_add_task_refuses_the_assignee_as_reviewer_on_the_form(admin_client, ada):
    response = admin_client.post(
        reverse("admin:work_task_add"),
        {"title": "Self review", "assignee": ada.id, "reviewer_agent": ada.id},
    )
    assert response.status_code == 200
    errors = str(response.context["adminform"].form.errors)
    assert "reviewer cannot be the assignee" in errors
    assert not Task.objects.filter(title="Self review").exists()


def test_the_add_task_page_shows_only_what_the_service_takes(admin_client):
    response = admin_client.get(reverse("admin:work_task_add"))
    assert response.status_code == 200
    fields = set(response.context["adminform"].form.fields)
    expected = {"title", "description", "assignee", "reviewer_agent", "reviewer_user", "requirement", "depends_on"}
    assert fields == expected


def test_editing_a_task_refuses_the_assignee_as_reviewer(admin_client, make_task, ada):
    task = make_task()
    url = reverse("admin:work_task_change", args=[quote(task.id)])
    form = admin_client.get(url).context["adminform"].form
    data = {k: v for k, v in form.initial.items() if v is not None and k in form.fields}
    data.update(assignee=ada.id, reviewer_agent=ada.id, depends_on=[], metadata="{}")
    data.update({"comments-TOTAL_FORMS": 0, "comments-INITIAL_FORMS": 0})
    response = admin_client.post(url, data)
    assert response.status_code == 200
    assert "reviewer cannot be the assignee" in str(response.context["adminform"].form.errors)
    task.refresh_from_db()
    assert task.reviewer_agent_id != ada.id
