"""The mind view lists the agent's open tasks, blocked ones first with why, each linked to
its task page, and links to all of them on /work; a fixed number of statements."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from markus.web import mind
from markus.work.models import Task, TaskState

pytestmark = pytest.mark.django_db


def make_task(agent, title: str, status: str, *, minutes_ago: int = 0, blocked_reason: str = "") -> Task:
    return Task.objects.create(
        title=title,
        status=status,
        assignee=agent,
        team_id=agent.team_id,
        blocked_reason=blocked_reason,
        updated_at=timezone.now() - timedelta(minutes=minutes_ago),
    )


def tasks_panel(client: Client, agent_id: str) -> str:
    response = client.get(f"/agents/{agent_id}/mind/")
    assert response.status_code == 200
    found = re.search(r'<section id="mind-tasks".*?</section>', response.content.decode(), re.S)
    assert found, "the mind view has a tasks panel"
    return found.group(0)


def test_the_open_tasks_are_listed_blocked_first_with_why(agent, alice):
    working = make_task(agent, "Write the release notes", TaskState.IN_PROGRESS, minutes_ago=1)
    waiting = make_task(agent, "Tag the release", TaskState.PENDING, minutes_ago=2)
    stuck = make_task(agent, "Publish the build", TaskState.BLOCKED, minutes_ago=30)
    dead_end = make_task(
        agent, "Announce it", TaskState.PENDING, minutes_ago=40, blocked_reason="its dependency Publish failed"
    )
    make_task(agent, "Old finished work", TaskState.COMPLETED)
    client = Client()
    client.force_login(alice)

    panel = tasks_panel(client, agent.id)

    titles = re.findall(r'<a class="task-link" href="/work\?task=([^"]+)">', panel)
    assert titles == [stuck.id, dead_end.id, working.id, waiting.id]
    assert "Old finished work" not in panel
    assert "Can never start: its dependency Publish failed" in panel
    assert 'data-status="blocked"' in panel
    assert f'href="/work?assigneeId={agent.id}"' in panel


def test_no_open_task_says_so(agent, alice):
    make_task(agent, "Done already", TaskState.COMPLETED)
    client = Client()
    client.force_login(alice)
    panel = tasks_panel(client, agent.id)
    assert "No open tasks." in panel


def test_past_the_cap_the_panel_says_more_and_costs_the_same_statements(agent, alice):
    client = Client()
    client.force_login(alice)
    make_task(agent, "one", TaskState.IN_PROGRESS)

    def statements() -> int:
        with CaptureQueriesContext(connection) as queries:
            tasks_panel(client, agent.id)
        return len(queries)

    few = statements()
    for i in range(mind.TASKS_SHOWN + 5):
        make_task(agent, f"task {i}", TaskState.PENDING, minutes_ago=i + 1)
    assert statements() == few
    panel = tasks_panel(client, agent.id)
    assert len(re.findall(r'class="task-link"', panel)) == mind.TASKS_SHOWN
    assert "More open tasks" in panel


def test_a_teammate_sees_the_panel_and_an_outsider_sees_no_mind_view(agent, bob, charlie):
    make_task(agent, "Publish the build", TaskState.BLOCKED)
    teammate, outsider = Client(), Client()
    teammate.force_login(bob)
    outsider.force_login(charlie)
    assert "Publish the build" in tasks_panel(teammate, agent.id)
    assert outsider.get(f"/agents/{agent.id}/mind/").status_code == 404
