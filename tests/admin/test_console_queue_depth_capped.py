"""The console counts each agent's queue up to the loop's cap, for the dashboard's chart
and table and the agents list: a long queue reads "1,000+" (here, with the cap lowered,
"3+"), never a count of every queued item."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from mailbox import selectors as mailbox_selectors
from tests.items import many_items

pytestmark = [pytest.mark.django_db, pytest.mark.pg]


def queue_of(agent, n: int) -> None:
    many_items(agent.id, n)


def test_the_dashboard_shows_a_capped_depth(operator, agent, bea, monkeypatch):
    monkeypatch.setattr(mailbox_selectors, "QUEUE_DEPTH_CAP", 3)
    queue_of(agent, 6)
    queue_of(bea, 2)
    with CaptureQueriesContext(connection) as q:
        html = operator.get(reverse("console:dashboard")).content.decode()
    assert '<td class="depth" data-agent="ada">3+</td>' in html
    assert '<td class="depth" data-agent="bea">2</td>' in html
    counts = [s["sql"] for s in q.captured_queries if "COUNT(" in s["sql"].upper() and "mailbox_items" in s["sql"]]
    assert counts and all("LIMIT 4" in sql for sql in counts if "'queued'" in sql)


def test_the_agents_list_shows_a_capped_depth(operator, agent, monkeypatch):
    monkeypatch.setattr(mailbox_selectors, "QUEUE_DEPTH_CAP", 3)
    queue_of(agent, 6)
    html = operator.get(reverse("admin:agents_agent_changelist")).content.decode()
    assert "3+" in html
