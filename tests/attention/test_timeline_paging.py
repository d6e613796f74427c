"""Keyset paging of the mailbox timeline (issue 12): ``before`` (an item id, the
``nextCursor`` of the page above) reads the next page by an index seek instead of
skipping ``offset`` rows. Both walk the same order, ties on ``queued_at`` included;
``offset`` stays as it was; bad cursors answer 400 with a message."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from attention.models import AgentActivity, AgentDecision, DecisionType
from attention.selectors import timeline
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from markus.agents.services import agent_create
from markus.core.errors import MarkusError

T = MailboxType
pytestmark = pytest.mark.django_db


def url(agent_id: str) -> str:
    return f"/api/agents/{agent_id}/mailbox"


@pytest.fixture
def items(agent) -> list[MailboxItem]:
    """Eleven handled items, newest first in the returned list. Three pairs share a
    ``queued_at`` (the id breaks the tie); odd ones are heartbeats, even ones system
    events; each has a decision and an activity."""
    base = timezone.now() - timedelta(hours=1)
    seconds = [0, 1, 1, 2, 3, 3, 4, 5, 6, 6, 7]
    rows = MailboxItem.objects.bulk_create(
        MailboxItem(
            agent=agent,
            source_type=T.HEARTBEAT if n % 2 else T.SYSTEM_EVENT,
            status=Status.COMPLETED,
            payload={"summary": f"item {n}"},
            queued_at=base + timedelta(seconds=s),
        )
        for n, s in enumerate(seconds)
    )
    for item in rows:
        AgentDecision.objects.create(agent=agent, mailbox_item=item, decision_type=DecisionType.PICK, reasoning="r")
        AgentActivity.objects.create(agent=agent, mailbox_item=item, type="heartbeat", label=item.summary)
    return sorted(rows, key=lambda i: (i.queued_at, i.id), reverse=True)


def walk(agent_id: str, limit: int, **filters) -> list[list[str]]:
    """Every page of the timeline, following ``nextCursor`` from the first page."""
    pages, page = [], timeline(agent_id, limit=limit, **filters)
    pages.append([h["id"] for h in page["history"]])
    while page["nextCursor"] is not None:
        assert page["nextCursor"] == pages[-1][-1]
        page = timeline(agent_id, limit=limit, before=page["nextCursor"], **filters)
        pages.append([h["id"] for h in page["history"]])
    return pages


@pytest.mark.parametrize("limit", [1, 2, 3, 5, 11, 50])
def test_paging_by_cursor_walks_the_whole_timeline_once_in_order(agent, items, limit):
    pages = walk(agent.id, limit)
    assert [i for page in pages for i in page] == [i.id for i in items]
    assert all(len(page) == limit for page in pages[:-1]) and 0 < len(pages[-1]) <= limit


@pytest.mark.parametrize("limit", [1, 3, 4])
def test_offset_pages_are_unchanged_and_match_the_cursor_pages(agent, items, limit):
    by_offset = []
    for offset in range(0, len(items), limit):
        page = timeline(agent.id, limit=limit, offset=offset)
        assert page["totalCount"] == len(items)
        by_offset.append([h["id"] for h in page["history"]])
    assert by_offset == walk(agent.id, limit)
    past_the_end = timeline(agent.id, limit=limit, offset=len(items))
    assert past_the_end["history"] == [] and past_the_end["nextCursor"] is None


def test_a_cursor_page_carries_details_and_no_count(agent, items):
    page = timeline(agent.id, limit=4, before=items[2].id)
    assert [h["id"] for h in page["history"]] == [i.id for i in items[3:7]]
    assert page["totalCount"] is None and page["nextCursor"] == items[6].id
    entry = page["history"][0]
    assert [d["decisionType"] for d in entry["decisions"]] == ["pick"]
    assert entry["activity"]["label"] == items[3].summary


def test_the_cursor_pages_filtered_timelines(agent, items):
    heartbeats = [i.id for i in items if i.source_type == T.HEARTBEAT]
    assert [i for page in walk(agent.id, 2, types=[T.HEARTBEAT]) for i in page] == heartbeats
    # A cursor is a position in the order, whatever the filter: an item outside it works too.
    system = next(i for i in items if i.source_type == T.SYSTEM_EVENT)
    page = timeline(agent.id, limit=50, before=system.id, types=[T.HEARTBEAT])
    older = [i.id for i in items[items.index(system) + 1 :] if i.source_type == T.HEARTBEAT]
    assert [h["id"] for h in page["history"]] == older


def test_a_deep_page_costs_the_same_statements_as_the_first(agent, items):
    def count(**params) -> int:
        with CaptureQueriesContext(connection) as queries:
            timeline(agent.id, limit=2, **params)
        return len(queries)

    # first: the queue, the page (its bounded count read with it), two detail queries;
    # by cursor: the anchor too; by offset: the position, then as the first.
    assert count() == 4
    assert count(before=items[-3].id) == count(offset=len(items) - 2) == 5


@pytest.mark.parametrize(
    ("before", "message"),
    [
        ("mbx_nope", "no item 'mbx_nope' in this agent's timeline"),
        ("x" * 65, "before must be the id of an item of this timeline"),
        ("tab\there", "before must be the id of an item of this timeline"),
    ],
)
def test_a_bad_cursor_is_refused_with_a_message(agent, items, before, message):
    with pytest.raises(MarkusError, match=message):
        timeline(agent.id, before=before)


def test_another_agents_item_is_no_cursor_here(agent, items, alice):
    other, _ = agent_create(name="Other", owner=alice, agent_id="other")
    with pytest.raises(MarkusError, match="no item"):
        timeline(other.id, before=items[0].id)


def test_before_and_offset_do_not_combine(agent, items):
    with pytest.raises(MarkusError, match="before and offset cannot be combined"):
        timeline(agent.id, before=items[0].id, offset=3)


# ---------------------------------------------------------------- over the API


def test_the_api_pages_by_cursor(agent, items, alice_client):
    first = alice_client.get(url(agent.id), {"limit": 4}).json()
    assert first["totalCount"] == len(items) and first["nextCursor"] == items[3].id
    second = alice_client.get(url(agent.id), {"limit": 4, "before": first["nextCursor"]})
    assert second.status_code == 200
    assert [h["id"] for h in second.json()["history"]] == [i.id for i in items[4:8]]
    last = alice_client.get(url(agent.id), {"limit": 4, "before": items[7].id}).json()
    assert [h["id"] for h in last["history"]] == [i.id for i in items[8:]] and last["nextCursor"] is None


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"before": "mbx_nope"}, "no item 'mbx_nope'"),
        ({"before": "y" * 200}, "before must be the id of an item"),
        ({"before": "ITEM", "offset": "2"}, "before and offset cannot be combined"),
    ],
)
def test_bad_cursors_over_the_api_answer_400_with_a_message(agent, items, alice_client, params, message):
    params = {k: items[0].id if v == "ITEM" else v for k, v in params.items()}
    response = alice_client.get(url(agent.id), params)
    assert response.status_code == 400
    assert message in response.json()["detail"]


def test_an_empty_before_is_no_cursor(agent, items, alice_client):
    body = alice_client.get(url(agent.id), {"limit": 2, "before": ""}).json()
    assert [h["id"] for h in body["history"]] == [i.id for i in items[:2]] and body["totalCount"] == len(items)
