"""The console shows a task's and a requirement's status history (read-only, on their
change pages and as a list of its own), a requirement's rejection reason, a task's
pending filing approval and its team's setting, and cancels with the cascade."""

from __future__ import annotations

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse

from markus.core.actors import Actor
from markus.work.models import Task, TaskState
from markus.work.services import requirement_create, requirement_reject, task_create, task_transition

from .test_admin import admin_client, run_action  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db


def test_the_task_page_shows_its_history(admin_client, as_alice, ada, bea):
    task = task_create(actor=as_alice, title="Write", assignee_id=ada.id, reviewer_agent_id=bea.id)
    task_transition(task_id=task.id, to_status=TaskState.REVIEW, actor=Actor.for_agent(ada), note="see PR 9")
    html = admin_client.get(reverse("admin:work_task_change", args=[quote(task.id)])).content.decode()
    assert "Status history" in html and "in_progress → review" in html and "see PR 9" in html


def test_the_requirement_page_shows_its_history_and_rejection_reason(admin_client, cyd, as_alice):
    proposal = requirement_create(actor=Actor.for_agent(cyd), title="Faster builds")
    requirement_reject(requirement_id=proposal.id, actor=as_alice, reason="Not this quarter.")
    html = admin_client.get(reverse("admin:work_requirement_change", args=[quote(proposal.id)])).content.decode()
    assert "pending → rejected" in html and html.count("Not this quarter.") >= 2


def test_the_status_changes_are_listed_read_only(admin_client, make_task):
    task = make_task()
    listing = admin_client.get(reverse("admin:work_statuschange_changelist") + f"?q={task.id}")
    assert listing.status_code == 200 and task.id in listing.content.decode()
    assert admin_client.get(reverse("admin:work_statuschange_add")).status_code == 403


def test_the_cascade_action_cancels_the_waiting_dependents(admin_client, make_task):
    first = make_task(title="first", start=True)
    then = make_task(title="then", depends_on=[first.id])
    run_action(admin_client, reverse("admin:work_task_changelist"), "task_cancel_cascade", [first.id])
    assert Task.objects.get(id=then.id).status == TaskState.CANCELLED


def test_the_team_list_shows_the_approval_setting(admin_client, team):
    html = admin_client.get(reverse("admin:agents_team_changelist")).content.decode()
    assert "agent_task_approval" in html or "Agent task approval" in html
