"""The dashboard's per-agent figures for the last 24 h (failures, median wait and
processing time), in a fixed number of queries, and its htmx refresh."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from attention.models import AgentActivity
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue
from markus.agents.services import agent_create

pytestmark = pytest.mark.django_db
URL = reverse("console:dashboard")


def item(agent, *, status, queued_ago, wait, run=None):
    """An item queued ``queued_ago`` seconds ago, started ``wait`` seconds later and
    (with ``run``) ended ``run`` seconds after that."""
    now = timezone.now()
    row = mailbox_enqueue(agent_id=agent.id, source_type=MailboxType.SYSTEM_EVENT, payload={"summary": "x"})
    queued = now - timedelta(seconds=queued_ago)
    started = queued + timedelta(seconds=wait) if wait is not None else None
    ended = started + timedelta(seconds=run) if run is not None and started else None
    MailboxItem.objects.filter(id=row.id).update(
        status=status, queued_at=queued, started_at=started, completed_at=ended
    )
    return row


def health(response, agent_id):
    return next(row for row in response.context["agent_health"] if row.id == agent_id)


def test_failures_wait_and_processing_per_agent(operator, agent, bea):
    item(agent, status=Status.COMPLETED, queued_ago=600, wait=10, run=30)
    item(agent, status=Status.COMPLETED, queued_ago=500, wait=20, run=50)
    item(agent, status=Status.COMPLETED, queued_ago=400, wait=60, run=70)
    item(agent, status=Status.COMPLETED, queued_ago=3 * 86400, wait=1, run=1)  # before the window
    dropped = item(agent, status=Status.DROPPED, queued_ago=300, wait=None)
    MailboxItem.objects.filter(id=dropped.id).update(completed_at=timezone.now() - timedelta(seconds=100))
    AgentActivity.objects.create(agent=agent, type="chat", label="broke", success=False)
    AgentActivity.objects.create(agent=agent, type="chat", label="fine", success=True)
    AgentActivity.objects.create(
        agent=agent, type="chat", label="old", success=False, started_at=timezone.now() - timedelta(days=2)
    )
    response = operator.get(URL)
    ada = health(response, agent.id)
    assert (ada.failed_activities, ada.dropped, ada.failures) == (1, 1, 2)
    assert ada.started == 3 and ada.wait_p50 == timedelta(seconds=20)
    assert ada.completed == 3 and ada.processing_p50 == timedelta(seconds=50)
    idle = health(response, bea.id)
    assert (idle.failures, idle.wait_p50, idle.processing_p50) == (0, None, None)
    html = response.content.decode()
    assert f'<tr data-agent="{agent.id}">' in html and '<td class="wait">20.0 s</td>' in html
    assert '<td class="processing">50.0 s</td>' in html and f"/agents/{agent.id}/mind/" in html


def test_the_dashboard_costs_the_same_queries_for_more_agents_and_items(operator, agent, alice, team):
    item(agent, status=Status.COMPLETED, queued_ago=100, wait=1, run=2)
    with CaptureQueriesContext(connection) as small:
        assert operator.get(URL).status_code == 200
    for n in range(4):
        other, _ = agent_create(name=f"Extra {n}", owner=alice, team=team, agent_id=f"extra{n}")
        for k in range(5):
            item(other, status=Status.COMPLETED, queued_ago=200 + k, wait=k, run=k + 1)
        AgentActivity.objects.create(agent=other, type="chat", label="broke", success=False)
    with CaptureQueriesContext(connection) as large:
        response = operator.get(URL)
    assert len(response.context["agent_health"]) == 5
    assert len(large.captured_queries) == len(small.captured_queries)


def test_the_dashboard_polls_itself_and_answers_htmx_with_its_body(operator, agent):
    page = operator.get(URL).content.decode()
    assert 'hx-trigger="every 10s"' in page and "htmx" in page
    body = operator.get(URL, headers={"HX-Request": "true"})
    text = body.content.decode()
    assert text.lstrip().startswith('<div id="console-dashboard"') and "<html" not in text
