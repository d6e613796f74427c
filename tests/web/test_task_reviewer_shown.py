"""A task's page names who reviews it (issue 37, point 8): with no reviewer named, the
person who filed it reviews it (``task_reviewer``), and the page says so instead of
"Reviewer —" (a task reviewed from the bell showed a dash).

alice owns agent ada; bea is another of her agents."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from markus.agents.services import agent_create
from markus.core.actors import Actor
from markus.work.services import task_create

pytestmark = pytest.mark.django_db


def reviewer_shown(user, task) -> str:
    client = Client()
    client.force_login(user)
    html = client.get(f"/work?task={task.id}").content.decode()
    return re.sub(r"<[^>]+>", "", re.search(r"<dt>Reviewer</dt><dd>(.*?)</dd>", html, re.S).group(1)).strip()


def test_the_filer_is_shown_as_the_reviewer_when_none_is_named(alice, agent):
    task = task_create(actor=Actor.for_user(alice), title="Notes", assignee_id=agent.id)
    assert reviewer_shown(alice, task) == "alice (filed it; no reviewer named)"


def test_a_filing_agent_is_shown_as_the_reviewer(alice, agent):
    bea = agent_create(name="Bea", owner=alice, agent_id="bea")[0]
    task = task_create(actor=Actor.for_agent(bea), title="Notes", assignee_id=agent.id)
    assert reviewer_shown(alice, task) == "Bea (filed it; no reviewer named)"


def test_nobody_reviews_an_agents_own_task(alice, agent):
    task = task_create(actor=Actor.for_agent(agent), title="Notes", assignee_id=agent.id)
    assert reviewer_shown(alice, task) == "—"
