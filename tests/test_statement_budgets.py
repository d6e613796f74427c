"""Statement budgets of the pages and lists (issue 12): each is read at two data sizes
and must cost the same, fixed number of SQL statements at both. Counts, never times.

- the mailbox timeline over the API, the first page and a page by cursor (10 and 1,000 rows);
- the mind view and its "Load earlier" page by cursor (50 and 1,000 rows);
- the task list (2 and 20 tasks, each depending on the one before);
- the console's (Django admin's) agent list (2 and 20 agents, each with a focus, a
  queue and a bus message).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from agentbus.services import send_agent_message
from attention.models import AgentActivity, AgentAttention, AgentDecision, AttentionState, DecisionType
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue
from markus.agents.models import Agent
from markus.agents.services import agent_create
from markus.core.actors import Actor
from markus.work.models import Task
from markus.work.services import task_create

from .conftest import client_for

pytestmark = pytest.mark.django_db

SMALL, LARGE = 10, 1000
# The budgets: SQL statements per request, at both sizes.
TIMELINE_API = 5, 6  # the first page (its counts read with the page), a page by cursor
MIND_PAGE = 21  # session, user, the agent twice, attention, queue depth, the tool calls waiting for
# an approval, page, decisions, activities, pending reminders, latest daily reports, the main
# session and its last messages (the chat box), the main session's activity-log lines (seed 20),
# the usage panel's sums and the agent's budgets (issue 26; one more per budget it has), its
# failing tool servers (issue 37), its stall (attention.stalls: its attention row, its oldest
# pending approvals; its focus's last tool calls when focused), its open tasks (one page and
# whether there are more)
MIND_EARLIER = 7  # session, user, the agent, the cursor's item, page, decisions, activities
TASK_LIST = 3
CONSOLE_AGENTS = 6  # session, user, the counts (filtered and all), the page, the filter sidebar's teams


def statements(read: Callable[[], object]) -> int:
    with CaptureQueriesContext(connection) as queries:
        read()
    return len(queries)


def history(agent_id: str, n: int, *, start: int = 0) -> list[MailboxItem]:
    """``n`` handled items (oldest first, one second apart), each with a decision and
    an activity, in three statements."""
    base = timezone.now() - timedelta(days=30)
    items = MailboxItem.objects.bulk_create(
        MailboxItem(
            agent_id=agent_id,
            source_type=MailboxType.SYSTEM_EVENT if i % 2 else MailboxType.HEARTBEAT,
            status=Status.COMPLETED,
            payload={"summary": f"item {i}", "content": f"content {i}"},
            queued_at=base + timedelta(seconds=i),
            started_at=base + timedelta(seconds=i),
            completed_at=base + timedelta(seconds=i),
        )
        for i in range(start, start + n)
    )
    AgentDecision.objects.bulk_create(
        AgentDecision(agent_id=agent_id, mailbox_item=item, decision_type=DecisionType.PICK, reasoning="picked")
        for item in items
    )
    AgentActivity.objects.bulk_create(
        AgentActivity(agent_id=agent_id, mailbox_item=item, type="heartbeat", label=f"Heartbeat {item.summary}")
        for item in items
    )
    return items


def grow_history(agent_id: str, to: int) -> None:
    have = MailboxItem.objects.filter(agent_id=agent_id).count()
    history(agent_id, to - have, start=have)


# ---------------------------------------------------------------- the timeline (API)


def test_the_timeline_page_costs_the_same_statements_for_10_and_1000_rows(agent, alice):
    client = client_for(alice)
    mailbox_enqueue(agent_id=agent.id, source_type=MailboxType.HUMAN_CHAT, payload={"summary": "queued"})

    def first_page() -> object:
        response = client.get(f"/api/agents/{agent.id}/mailbox", {"limit": 5})
        assert response.status_code == 200 and len(response.json()["history"]) == 5
        return response.json()

    def cursor_page() -> object:
        response = client.get(f"/api/agents/{agent.id}/mailbox", {"limit": 5, "before": oldest_but_one.id})
        assert response.status_code == 200 and len(response.json()["history"]) == 1
        return response.json()

    oldest_but_one = history(agent.id, SMALL)[1]
    small = statements(first_page), statements(cursor_page)
    grow_history(agent.id, LARGE)
    assert (statements(first_page), statements(cursor_page)) == small
    # the agent, the page, its decisions and activities, the queue; the first page's
    # bounded count is read in the page's statement, a cursor page reads the cursor's item
    assert small == TIMELINE_API


# ---------------------------------------------------------------- the mind view


def test_the_mind_view_costs_the_same_statements_for_50_and_1000_rows(agent, alice):
    client = Client()
    client.force_login(alice)
    mailbox_enqueue(agent_id=agent.id, source_type=MailboxType.HUMAN_CHAT, payload={"summary": "queued"})

    def page() -> object:
        response = client.get(f"/agents/{agent.id}/mind/")
        assert response.status_code == 200
        return response

    def earlier() -> object:
        response = client.get(f"/agents/{agent.id}/mind/timeline/", {"before": anchor.id})
        assert response.status_code == 200 and b"Load earlier" in response.content
        return response

    anchor = history(agent.id, SMALL + 40)[-5]  # a full first page, and a full page below the anchor
    small = statements(page), statements(earlier)
    grow_history(agent.id, LARGE)
    assert (statements(page), statements(earlier)) == small == (MIND_PAGE, MIND_EARLIER)


# ---------------------------------------------------------------- the task list


def tasks(alice, ada: Agent, bea: Agent, n: int) -> None:
    """``n`` more tasks, each depending on the one made before it."""
    actor = Actor.for_user(alice)
    previous = Task.objects.order_by("-created_at", "-id").first()
    for i in range(n):
        previous = task_create(
            actor=actor,
            title=f"Task {i}",
            assignee_id=ada.id,
            reviewer_agent_id=bea.id,
            depends_on=[previous.id] if previous else [],
            start=False,
        )


def test_the_task_list_costs_the_same_statements_for_2_and_20_tasks(agent, alice, team):
    bea, _ = agent_create(name="Bea", role="reviewer", owner=alice, team=team, agent_id="bea")
    client = client_for(alice)

    def listed() -> object:
        response = client.get("/api/tasks/")
        assert response.status_code == 200
        return response.json()

    tasks(alice, agent, bea, 2)
    small = statements(listed)
    tasks(alice, agent, bea, 18)
    assert len(listed()["tasks"]) == 20
    assert statements(listed) == small == TASK_LIST  # the page, its dependencies, the count


# ---------------------------------------------------------------- the console's agent list


def busy_agents(owner, team, n: int, *, start: int = 0) -> None:
    """``n`` agents, each focused (live lease) on a chat, with a queued heartbeat and a
    bus message from the previous one."""
    now = timezone.now()
    previous = Agent.objects.filter(id=f"a{start - 1:02d}").first()
    for i in range(start, start + n):
        agent, _ = agent_create(name=f"Agent {i}", owner=owner, team=team, agent_id=f"a{i:02d}")
        chat = mailbox_enqueue(agent_id=agent.id, source_type=MailboxType.HUMAN_CHAT, payload={"summary": f"hi {i}"})
        mailbox_enqueue(agent_id=agent.id, source_type=MailboxType.HEARTBEAT, payload={"summary": "beat"})
        AgentAttention.objects.update_or_create(
            agent=agent,
            defaults={
                "state": AttentionState.FOCUSED,
                "lease_owner": "worker-1",
                "lease_expires_at": now + timedelta(minutes=5),
                "current_item": chat,
                "focus_started_at": now,
            },
        )
        if previous is not None:
            send_agent_message(sender=previous, recipient=agent, text="ping")
        previous = agent


def test_the_console_agent_list_costs_the_same_statements_for_2_and_20_agents(django_user_model, alice, team):
    operator = Client()
    operator.force_login(django_user_model.objects.create_superuser("operator", "op@example.com", "pw"))

    def changelist() -> object:
        response = operator.get(reverse("admin:agents_agent_changelist"))
        assert response.status_code == 200
        return response

    busy_agents(alice, team, 2)
    small = statements(changelist)
    busy_agents(alice, team, 18, start=2)
    assert changelist().context["cl"].result_count == 20
    assert statements(changelist) == small == CONSOLE_AGENTS


def test_the_agents_task_list_tool_costs_the_same_statements_for_2_and_20_tasks(agent, alice, team):
    from attention.toolbox import ToolContext, execute_tool

    bea, _ = agent_create(name="Bea", role="reviewer", owner=alice, team=team, agent_id="bea")
    ctx = ToolContext(agent_id=agent.id, agent_name=agent.name, scenario="task_execution")

    def listed() -> object:
        ok, text = execute_tool(ctx, "task_list", {})
        assert ok, text
        return text

    tasks(alice, agent, bea, 2)
    small = statements(listed)
    tasks(alice, agent, bea, 18)
    assert statements(listed) == small == 3, small  # the actor, the page, its dependencies
