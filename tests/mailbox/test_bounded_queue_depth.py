"""A queue's depth is counted up to a cap (``QUEUE_DEPTH_CAP``), never in full: the
loop reads the queue twice an item, and a full count made every read grow with the
queue (26 ms a read at 100,000 queued on SQLite, 37 ms on PostgreSQL). Below the cap the
depth is exact; past it the depth reads as cap + 1 and is shown "1000+"; the read stays
one statement whatever the queue holds."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from attention.loop import read_queue
from mailbox.registry import Status
from mailbox.selectors import QUEUE_DEPTH_CAP, depth_fields, depth_label, queue_depth
from tests.items import many_items

pytestmark = [pytest.mark.django_db, pytest.mark.pg]


def queue_of(agent, n: int, status: str = Status.QUEUED) -> None:
    many_items(agent.id, n, status=status)


def test_a_short_queue_is_counted_exactly(agent):
    queue_of(agent, 7)
    queue_of(agent, 3, Status.COMPLETED)
    assert queue_depth(agent.id) == 7
    assert depth_fields(7) == {"queueDepth": 7, "queueDepthCapped": False}
    assert depth_label(7) == "7"
    view = read_queue(agent.id)
    assert view.depth == 7
    assert view.complete == (len(view.items) == 7)


def test_a_queue_past_the_cap_reads_as_the_cap_plus_one(agent):
    queue_of(agent, QUEUE_DEPTH_CAP + 25)
    assert queue_depth(agent.id) == QUEUE_DEPTH_CAP + 1
    assert depth_fields(queue_depth(agent.id)) == {"queueDepth": QUEUE_DEPTH_CAP, "queueDepthCapped": True}
    assert depth_label(queue_depth(agent.id)) == f"{QUEUE_DEPTH_CAP}+"
    view = read_queue(agent.id)
    assert view.depth == QUEUE_DEPTH_CAP + 1
    assert not view.complete  # the loop still knows it did not read the whole queue


def test_the_queue_read_is_one_statement_at_any_depth(agent, other_agent):
    queue_of(agent, 1)
    queue_of(other_agent, QUEUE_DEPTH_CAP + 5)
    read_queue(agent.id)  # the statement is compiled once per connection
    with CaptureQueriesContext(connection) as one:
        read_queue(agent.id)
    with CaptureQueriesContext(connection) as many:
        read_queue(other_agent.id)
    assert len(one) == len(many) == 1
    assert f"LIMIT {QUEUE_DEPTH_CAP + 1}" in many[0]["sql"]  # the depth: a count of at most cap + 1 rows
