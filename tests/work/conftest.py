"""Work fixtures: Ada works, Bea reviews, Cyd is a teammate, Zed belongs to charlie
(an outsider). Alice (the owner) and bob (a teammate) are the humans."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from mailbox.models import MailboxItem
from mailbox.registry import MailboxType
from markus.agents.models import Team
from markus.agents.services import agent_create
from markus.core.actors import Actor
from markus.work.models import Task
from markus.work.services import task_create


@pytest.fixture
def ada(agent):
    return agent


@pytest.fixture
def bea_and_token(alice, team):
    return agent_create(name="Bea Reviewer", role="reviewer", owner=alice, team=team, agent_id="bea")


@pytest.fixture
def bea(bea_and_token):
    return bea_and_token[0]


@pytest.fixture
def cyd(alice, team):
    return agent_create(name="Cyd", role="engineer", owner=alice, team=team, agent_id="cyd")[0]


@pytest.fixture
def zed_and_token(charlie):
    return agent_create(name="Zed", owner=charlie, agent_id="zed")


@pytest.fixture
def ungated(team):
    """The team lets its agents' tasks start at once (no approval of what they file)."""
    Team.objects.filter(id=team.id).update(agent_task_approval=False)
    return team


@pytest.fixture
def as_alice(alice):
    return Actor.for_user(alice)


def agent_client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def items(agent, source_type: MailboxType | None = None, **filters):
    """The agent's mailbox rows, oldest first."""
    rows = MailboxItem.objects.filter(agent_id=getattr(agent, "id", agent), **filters)
    if source_type is not None:
        rows = rows.filter(source_type=source_type)
    return list(rows.order_by("queued_at", "id"))


def executions(agent, task: Task):
    return [i for i in items(agent, MailboxType.TASK_STATUS_UPDATE) if i.task_id == task.id and i.triggers_execution]


def infos(agent, task: Task):
    return [
        i for i in items(agent, MailboxType.TASK_STATUS_UPDATE) if i.task_id == task.id and not i.triggers_execution
    ]


def force_status(task: Task, status: str) -> Task:
    """Test setup only: put a task in a state without running the side effects."""
    Task.objects.filter(id=task.id).update(status=status)
    task.refresh_from_db()
    return task


@pytest.fixture
def make_task(as_alice, ada, bea):
    def make(**kwargs):
        kwargs.setdefault("actor", as_alice)
        kwargs.setdefault("title", "Write the report")
        kwargs.setdefault("assignee_id", ada.id)
        kwargs.setdefault("reviewer_agent_id", bea.id)
        kwargs.setdefault("start", False)
        return task_create(**kwargs)

    return make
