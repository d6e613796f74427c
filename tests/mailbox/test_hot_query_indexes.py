"""The indexes the seed lists (section 6.2) serve the hot queries: the plan of each
query, as the code builds it, uses its index (PostgreSQL: ``EXPLAIN`` with sequential
scans priced out after ``ANALYZE``; SQLite: ``EXPLAIN QUERY PLAN``), and the queue's
head and the timeline are read in index order, without a sort.

Mailbox items: ``idx_mailbox_agent_status`` (agent, status), the timeline
``idx_mailbox_agent_timeline`` (the seed's ``idx_mailbox_agent_queued``, with the id
that breaks ties), ``idx_mailbox_agent_type`` (agent, source_type, queued_at desc),
and our queue head ``idx_mailbox_queue_head``; decisions ``idx_decisions_agent`` and
``idx_decisions_mailbox_item``; activities ``idx_activities_agent`` and
``idx_activities_mailbox_item``; logs ``idx_activity_logs_activity``."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import QuerySet
from django.utils import timezone

from attention.models import AgentActivity, AgentActivityLog, AgentDecision
from mailbox.lifecycle import queued
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.selectors import timeline_queryset
from markus.agents.services import agent_create

pytestmark = [pytest.mark.django_db, pytest.mark.pg]
ROWS_PER_AGENT = 1500
LOGS_PER_ACTIVITY = 12  # a run with a few tool rounds: started, requests, calls, results, text, end
STATUSES = [Status.COMPLETED, Status.QUEUED, Status.DEFERRED, Status.DROPPED, Status.MERGED]
TYPES = [MailboxType.SYSTEM_EVENT, MailboxType.HEARTBEAT, MailboxType.A2A_MESSAGE, MailboxType.TASK_COMMENT]


def plan(qs: QuerySet) -> str:
    sql, params = qs.query.sql_with_params()
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL enable_seqscan = off")  # inside the test's transaction
            cursor.execute("EXPLAIN " + sql, params)
        else:
            cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
        return "\n".join(str(row[-1] if connection.vendor == "sqlite" else row[0]) for row in cursor.fetchall())


def sorted_in_memory(text: str) -> bool:
    return "TEMP B-TREE" in text if connection.vendor == "sqlite" else "Sort" in text


@pytest.fixture
def busy(alice, team):
    """Three agents with ROWS_PER_AGENT items each of mixed types and statuses, a
    decision and an activity per item, a third of them with their logs; statistics taken."""
    now = timezone.now()
    agents = [agent_create(name=n, agent_id=n.lower(), owner=alice, team=team)[0] for n in ("Ada", "Bea", "Cy")]
    items, decisions, activities, logs = [], [], [], []
    for a in agents:
        for i in range(ROWS_PER_AGENT):
            item = MailboxItem(
                id=f"mbx_{a.id}_{i:04d}",
                agent=a,
                source_type=TYPES[i % len(TYPES)],
                priority=i % 5,
                status=STATUSES[i % len(STATUSES)],
                payload={"summary": f"item {i}"},
                queued_at=now - timedelta(minutes=i),
            )
            items.append(item)
            decisions.append(AgentDecision(id=f"dec_{item.id}", agent=a, decision_type="pick", mailbox_item=item))
            activity = AgentActivity(
                id=f"act_{item.id}",
                agent=a,
                mailbox_item=item,
                type="internal",
                label=item.id,
                started_at=item.queued_at,
            )
            activities.append(activity)
            if i % 3 == 0:
                logs += [
                    AgentActivityLog(activity=activity, seq=s, type="text", content="x")
                    for s in range(1, LOGS_PER_ACTIVITY + 1)
                ]
    MailboxItem.objects.bulk_create(items)
    AgentDecision.objects.bulk_create(decisions)
    AgentActivity.objects.bulk_create(activities)
    AgentActivityLog.objects.bulk_create(logs)
    with connection.cursor() as cursor:
        tables = ["mailbox_items", "agent_decisions", "agent_activities", "agent_activity_logs"]
        if connection.vendor == "postgresql":
            cursor.execute("ANALYZE " + ", ".join(tables))
        else:
            cursor.execute("ANALYZE")
    return agents[1]


def test_the_head_of_the_queue_is_read_in_order_from_its_partial_index(busy):
    text = plan(queued(busy.id)[:1])
    assert "idx_mailbox_queue_head" in text, text
    assert not sorted_in_memory(text), text


def test_the_timeline_page_is_read_in_order_from_the_timeline_index(busy):
    text = plan(timeline_queryset(busy.id)[:30])
    assert "idx_mailbox_agent_timeline" in text, text
    assert not sorted_in_memory(text), text


def test_the_timeline_filtered_by_type_uses_the_agent_type_index(busy):
    text = plan(timeline_queryset(busy.id, types=[MailboxType.HEARTBEAT])[:30])
    assert "idx_mailbox_agent_type" in text, text


def test_items_of_a_status_are_counted_from_the_agent_status_index(busy):
    qs = MailboxItem.objects.filter(agent_id=busy.id, status=Status.DEFERRED).values("id")
    text = plan(qs)
    assert "idx_mailbox_agent_status" in text, text


def test_an_agents_decisions_newest_first_use_the_decisions_index(busy):
    # As GET /api/agents/{id}/decisions reads them.
    text = plan(AgentDecision.objects.filter(agent=busy).order_by("-created_at", "-id")[:50])
    assert "idx_decisions_agent" in text, text


def test_an_items_decisions_and_activity_are_found_by_an_index_on_the_item(busy):
    """The seed's ``idx_decisions_mailbox_item`` / ``idx_activities_mailbox_item``, or
    the index Django makes for the foreign key on the same one column (both exist: the
    planner may take either; they are the same index twice)."""
    item_id = f"mbx_{busy.id}_0007"
    for model, seed_index in (
        (AgentDecision, "idx_decisions_mailbox_item"),
        (AgentActivity, "idx_activities_mailbox_item"),
    ):
        text = plan(model.objects.filter(mailbox_item_id=item_id))
        table = model._meta.db_table
        assert seed_index in text or re.search(rf"{table}_mailbox_item_id_\w+", text), text


def test_an_agents_activities_newest_first_use_the_activities_index(busy):
    text = plan(AgentActivity.objects.filter(agent=busy).order_by("-started_at")[:50])
    assert "idx_activities_agent" in text, text
    assert not sorted_in_memory(text), text


def test_an_activitys_logs_in_order_use_the_logs_index_without_a_sort(busy):
    # As GET /api/agents/{id}/activity-logs?activityId= reads them.
    text = plan(AgentActivityLog.objects.filter(activity_id=f"act_mbx_{busy.id}_0009").order_by("seq"))
    assert "idx_activity_logs_activity" in text, text
    assert not sorted_in_memory(text), text
