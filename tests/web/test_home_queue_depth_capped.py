"""The home page's agent cards count each queue up to the loop's cap: a long queue reads
"1000+" (here, with the cap lowered, "3+"), a short one its exact depth, in one
statement for every card, never a count of every queued item."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from mailbox import selectors as mailbox_selectors
from markus.agents.services import agent_create
from tests.items import many_items

pytestmark = [pytest.mark.django_db, pytest.mark.pg]


def queue_of(agent_id: str, n: int) -> None:
    many_items(agent_id, n)


def test_the_cards_show_a_capped_depth(client, alice, monkeypatch):
    monkeypatch.setattr(mailbox_selectors, "QUEUE_DEPTH_CAP", 3)
    long = agent_create(name="Long", owner=alice, agent_id="long")[0]
    short = agent_create(name="Short", owner=alice, agent_id="short")[0]
    queue_of(long.id, 6)
    queue_of(short.id, 2)
    client.force_login(alice)
    with CaptureQueriesContext(connection) as q:
        page = client.get("/home/agents/").content.decode()
    assert "Queue: <b>3+</b>" in page and "Queue: <b>2</b>" in page
    counts = [s["sql"] for s in q.captured_queries if "COUNT(" in s["sql"].upper() and "mailbox_items" in s["sql"]]
    assert len(counts) == 1 and "LIMIT 4" in counts[0]
