"""The timeline's first page counts the history only up to a cap (``totalCount`` with
``totalCountCapped``, shown "1,000+"), and the queue beside it only up to its own
(``queueDepth``, ``queueDepthCapped``): a full count made the first page of a long
history cost 2-3 times that of a short one. Below the caps the counts are exact; the
page's statements are the same for 1 row and for 1,000 (with a queue longer than its page);
the decisions list counts the same way."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from attention import selectors as attention_selectors
from attention.models import AgentDecision, DecisionType
from mailbox import selectors as mailbox_selectors
from mailbox.models import MailboxItem
from mailbox.registry import Status
from markus.core import counting
from tests.items import many_items

pytestmark = [pytest.mark.django_db, pytest.mark.pg]


def history(agent, n: int, status: str = Status.COMPLETED) -> list[MailboxItem]:
    return many_items(agent.id, n, status=status)


def first_page(client, agent, **params):
    response = client.get(f"/api/agents/{agent.id}/mailbox", {"limit": 5, **params})
    assert response.status_code == 200, response.content
    return response.json()


def test_below_the_cap_the_count_is_exact(agent, alice_client):
    history(agent, 12)
    body = first_page(alice_client, agent)
    assert (body["totalCount"], body["totalCountCapped"]) == (12, False)
    assert (body["queueDepth"], body["queueDepthCapped"]) == (0, False)


def test_past_the_cap_the_count_stops_and_says_so(agent, alice_client, monkeypatch):
    monkeypatch.setattr(attention_selectors, "TIMELINE_COUNT_CAP", 10)
    monkeypatch.setattr(mailbox_selectors, "QUEUE_DEPTH_CAP", 6)
    history(agent, 9)
    history(agent, 9, Status.QUEUED)
    body = first_page(alice_client, agent, queuedLimit=2)
    assert (body["totalCount"], body["totalCountCapped"]) == (10, True)
    assert (body["queueDepth"], body["queueDepthCapped"]) == (6, True)
    assert body["nextCursor"]  # the pages go on past the cap
    later = first_page(alice_client, agent, before=body["nextCursor"])
    assert later["totalCount"] is None and later["totalCountCapped"] is False


def test_the_decisions_list_counts_up_to_the_cap(agent, alice_client, monkeypatch):
    monkeypatch.setattr(counting, "COUNT_CAP", 3)
    for item in history(agent, 5):
        AgentDecision.objects.create(agent=agent, mailbox_item=item, decision_type=DecisionType.PICK)
    body = alice_client.get(f"/api/agents/{agent.id}/decisions", {"limit": 2}).json()
    assert (body["totalCount"], body["totalCountCapped"], len(body["decisions"])) == (3, True, 2)


def test_the_first_page_costs_the_same_statements_for_1_row_and_1000(agent, alice_client):
    history(agent, 1)
    first_page(alice_client, agent)
    with CaptureQueriesContext(connection) as one:
        first_page(alice_client, agent)
    history(agent, 999)
    history(agent, 60, Status.QUEUED)
    with CaptureQueriesContext(connection) as thousand:
        first_page(alice_client, agent)
    # Both bounded counts (the history's, and the depth of a queue longer than its page)
    # are read with the page: no statement of their own.
    assert len(thousand) == len(one)
    counts = [q["sql"] for q in thousand if "COUNT(" in q["sql"].upper()]
    assert counts and all("LIMIT" in sql.upper() for sql in counts)  # every count is bounded


def test_a_page_without_rows_still_counts_the_queue_and_the_history(agent, alice_client, monkeypatch):
    monkeypatch.setattr(mailbox_selectors, "QUEUE_DEPTH_CAP", 6)
    history(agent, 9, Status.QUEUED)
    # No completed row: the page has none to carry the counts, which are still read.
    body = first_page(alice_client, agent, queuedLimit=2, status="completed")
    assert body["history"] == [] and (body["totalCount"], body["totalCountCapped"]) == (0, False)
    assert (body["queueDepth"], body["queueDepthCapped"]) == (6, True)
    history(agent, 3)
    past_the_end = first_page(alice_client, agent, queuedLimit=2, status="completed", offset=3)
    assert past_the_end["history"] == [] and past_the_end["totalCount"] == 3
    assert (past_the_end["queueDepth"], past_the_end["queueDepthCapped"]) == (6, True)
    queued = first_page(alice_client, agent, queuedLimit=2, status="queued", limit=2)
    assert (queued["totalCount"], queued["queueDepth"], queued["queueDepthCapped"]) == (9, 6, True)
