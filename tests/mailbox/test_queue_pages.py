"""The queue is paged like the history: ``GET …/mailbox`` and ``GET …/mind`` answer one
page of it (``queuedLimit``, default 50) with its depth and a cursor, however long it
is (with 2,000 queued items ``?limit=1`` answered 850 KB before)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from mailbox.models import MailboxItem
from mailbox.registry import MailboxType
from tests.conftest import client_for

pytestmark = pytest.mark.django_db

QUEUED = 600


@pytest.fixture
def long_queue(agent):
    now = timezone.now()
    MailboxItem.objects.bulk_create(
        MailboxItem(
            agent=agent,
            source_type=MailboxType.TASK_COMMENT,
            priority=i % 3,
            status="queued",
            payload={"summary": f"comment {i}", "content": "x" * 1000},
            queued_at=now - timedelta(seconds=i % 7),
        )
        for i in range(QUEUED)
    )
    return list(
        MailboxItem.objects.filter(agent=agent, status="queued")
        .order_by("priority", "queued_at", "id")
        .values_list("id", flat=True)
    )


@pytest.mark.parametrize("path,key", [("mailbox", "queued"), ("mind", "queue")])
def test_the_queue_comes_in_pages_with_its_depth_and_a_cursor(alice, agent, long_queue, path, key):
    client = client_for(alice)
    first = client.get(f"/api/agents/{agent.id}/{path}", {"limit": 1})
    assert first.status_code == 200
    body = first.json()
    assert len(body[key]) == 50 and body["queueDepth"] == QUEUED
    assert len(first.content) < 120_000  # 600 items of 1 KB were all in it
    seen, cursor = [], None
    while True:
        params = {"queuedLimit": 128, **({"queuedAfter": cursor} if cursor else {})}
        page = client.get(f"/api/agents/{agent.id}/{path}", params).json()
        seen += [i["id"] for i in page[key]]
        cursor = page["queuedNextCursor"]
        if cursor is None:
            break
    assert seen == long_queue  # every item once, in dequeue order


def test_a_page_survives_its_last_item_being_claimed(alice, agent, long_queue):
    client = client_for(alice)
    page = client.get(f"/api/agents/{agent.id}/mailbox", {"queuedLimit": 10}).json()
    MailboxItem.objects.filter(id=page["queued"][-1]["id"]).update(status="processing")
    following = client.get(f"/api/agents/{agent.id}/mailbox", {"queuedAfter": page["queuedNextCursor"]}).json()
    assert following["queued"][0]["id"] == long_queue[10]


@pytest.mark.parametrize("params", [{"queuedLimit": 0}, {"queuedLimit": 501}, {"queuedAfter": "nope"}])
def test_a_bad_queue_page_is_a_400_that_says_why(alice, agent, params):
    response = client_for(alice).get(f"/api/agents/{agent.id}/mailbox", params)
    assert response.status_code == 400
    assert "queued" in response.json()["detail"]
