"""A bounded count (the queue's depth, a timeline's ``totalCount``) reads index entries
only, never the rows: its capped subselect selects nothing of the row, so SQLite takes
the index as covering. Selecting the primary key made the queue's depth read up to
1,001 rows through the index ``(agent, status)`` (the text id is not in it): 1.3 ms
against 0.09 ms at 100,000 queued over 100 agents, where an agent's rows are spread
over the table, and every timeline page and every loop's queue read paid it. SQLite's
plans (PostgreSQL's planner chooses by its statistics: not asserted here)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from attention.queue_read import read_queue
from attention.selectors import timeline
from mailbox.models import MailboxItem
from mailbox.registry import Status
from mailbox.selectors import queue_depth
from markus.core.counting import capped_count
from tests.items import many_items

pytestmark = pytest.mark.django_db


def items(agent, n: int, status: str) -> None:
    many_items(agent.id, n, status=status)


def counted_searches(call) -> list[str]:
    """Every search of a table inside a count's subselect, in the plans of the
    statements ``call`` runs that count."""
    with CaptureQueriesContext(connection) as ctx:
        call()
    searches = []
    for query in ctx.captured_queries:
        if "COUNT(" not in query["sql"].upper():
            continue
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN QUERY PLAN {query['sql']}")
            plan = cursor.fetchall()
        subselects = {row[0] for row in plan if row[3].startswith(("CO-ROUTINE", "MATERIALIZE"))}
        searches += [row[3] for row in plan if row[1] in subselects and row[3].startswith(("SEARCH", "SCAN"))]
    return searches


@pytest.mark.parametrize(
    "count",
    [
        pytest.param(lambda agent: queue_depth(agent.id), id="the queue's depth"),
        pytest.param(lambda agent: read_queue(agent.id), id="the loop's queue read"),
        pytest.param(lambda agent: timeline(agent.id, limit=2, queued_limit=2), id="a timeline's first page"),
        pytest.param(
            lambda agent: capped_count(MailboxItem.objects.filter(agent=agent, status=Status.QUEUED), 5),
            id="a list's capped count",
        ),
    ],
)
def test_a_bounded_count_reads_the_index_only(agent, count):
    items(agent, 12, Status.QUEUED)
    items(agent, 12, Status.COMPLETED)
    searches = counted_searches(lambda: count(agent))
    assert searches, "no bounded count was read"
    assert all("COVERING INDEX" in s for s in searches), searches
