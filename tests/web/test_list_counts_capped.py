"""Every list's total is counted up to one cap (``markus.core.counting.COUNT_CAP``),
through one helper: the APIs answer ``totalCount`` (the cap past it) with
``totalCountCapped``, the pages say "10,000+". Below the cap the counts are exact. A
full count read every matching row on each request, whatever the page."""

from __future__ import annotations

import pytest

from markus.core import counting
from markus.core.actors import Actor
from markus.work.services import task_create
from notifications.models import UserNotification

pytestmark = [pytest.mark.django_db, pytest.mark.pg]


@pytest.fixture
def five_notifications(alice):
    for i in range(5):
        UserNotification.objects.create(user=alice, type="task_created", title=f"note {i}")


def test_below_the_cap_the_lists_count_exactly(alice_client, five_notifications):
    body = alice_client.get("/api/notifications", {"limit": 2}).json()
    assert (body["totalCount"], body["totalCountCapped"]) == (5, False)


def test_the_notifications_api_caps_its_count(alice_client, five_notifications, monkeypatch):
    monkeypatch.setattr(counting, "COUNT_CAP", 3)
    body = alice_client.get("/api/notifications", {"limit": 2}).json()
    assert (body["totalCount"], body["totalCountCapped"], len(body["notifications"])) == (3, True, 2)


def test_the_notifications_page_says_the_count_is_capped(client, alice, five_notifications, monkeypatch):
    monkeypatch.setattr(counting, "COUNT_CAP", 3)
    client.force_login(alice)
    page = client.get("/notifications/").content.decode()
    assert ">3+ notifications" in page


def test_the_task_list_caps_its_count(alice_client, alice, agent, monkeypatch):
    actor = Actor.for_user(alice)
    for i in range(4):
        task_create(actor=actor, title=f"task {i}", assignee_id=agent.id)
    monkeypatch.setattr(counting, "COUNT_CAP", 2)
    body = alice_client.get("/api/tasks", {"limit": 1}).json()
    assert (body["totalCount"], body["totalCountCapped"]) == (2, True)
