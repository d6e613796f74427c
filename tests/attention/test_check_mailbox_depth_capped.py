"""check_mailbox counts the queue up to the cap the loop uses (``QUEUE_DEPTH_CAP``):
an agent's tool call must not count every queued item. Past the cap it answers the
cap with ``queueDepthCapped`` (and ``moreCapped``: at least ``more`` follow); below it
the depth is exact, as before."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from attention.scenarios import CHAT
from attention.toolbox import ToolContext, execute_tool
from mailbox.selectors import QUEUE_DEPTH_CAP
from tests.items import many_items

pytestmark = [pytest.mark.django_db, pytest.mark.pg]


def check(agent, **args):
    ok, result = execute_tool(ToolContext(agent_id=agent.id, agent_name="Ada", scenario=CHAT), "check_mailbox", args)
    assert ok, result
    return json.loads(result)


def queue_of(agent, n: int) -> None:
    many_items(agent.id, n)


def test_below_the_cap_the_depth_is_exact(agent):
    queue_of(agent, 30)
    answer = check(agent, limit=10)
    assert (answer["queueDepth"], answer["queueDepthCapped"], answer["more"], answer["moreCapped"]) == (
        30,
        False,
        20,
        False,
    )


def test_past_the_cap_the_tool_says_so_and_counts_no_further(agent):
    queue_of(agent, QUEUE_DEPTH_CAP + 40)
    with CaptureQueriesContext(connection) as q:
        answer = check(agent, limit=10)
    assert (answer["queueDepth"], answer["queueDepthCapped"], answer["moreCapped"]) == (QUEUE_DEPTH_CAP, True, True)
    assert answer["more"] >= QUEUE_DEPTH_CAP - 10
    counts = [s["sql"] for s in q.captured_queries if "COUNT(" in s["sql"].upper()]
    assert counts and all(f"LIMIT {QUEUE_DEPTH_CAP + 1}" in sql for sql in counts)
