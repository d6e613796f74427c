"""The dashboard: queue depth per agent and items handled per hour, as inline SVG,
with numbers that match the database; staff only."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue

T = MailboxType
pytestmark = pytest.mark.django_db
URL = reverse("console:dashboard")


def enqueue(agent, n: int) -> list[MailboxItem]:
    return [
        mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": f"b{i}"}) for i in range(n)
    ]


def finish(items: list[MailboxItem], hours_ago: int, status=Status.COMPLETED) -> None:
    at = timezone.now() - timedelta(hours=hours_ago)
    MailboxItem.objects.filter(id__in=[i.id for i in items]).update(status=status, completed_at=at)


def test_the_dashboard_shows_queue_depth_per_agent_from_the_database(operator, agent, bea):
    enqueue(agent, 3)
    enqueue(bea, 1)
    response = operator.get(URL)
    assert response.status_code == 200
    depths = {row["id"]: row["value"] for row in response.context["queue_depths"]}
    expected = {a.id: MailboxItem.objects.filter(agent=a, status=Status.QUEUED).count() for a in (agent, bea)}
    assert depths == expected == {"ada": 3, "bea": 1}
    html = response.content.decode()
    assert '<td class="depth" data-agent="ada">3</td>' in html
    assert html.count('<figure class="console-chart"') == 2
    assert 'src="http' not in html  # no CDN: the charts are inline SVG


def test_the_dashboard_counts_items_handled_in_each_of_the_last_24_hours(operator, agent):
    items = enqueue(agent, 9)
    finish(items[:2], 0)
    finish(items[2:5], 5)
    finish(items[5:6], 30)  # older than the window
    finish(items[6:7], 1, status=Status.DROPPED)  # not handled
    response = operator.get(URL)
    hourly = response.context["handled_per_hour"]
    assert len(hourly) == 24 and sum(h["value"] for h in hourly) == 5
    for bucket in hourly:
        start = bucket["start"]
        assert (
            bucket["value"]
            == MailboxItem.objects.filter(
                status=Status.COMPLETED, completed_at__gte=start, completed_at__lt=start + timedelta(hours=1)
            ).count()
        )
    assert sorted(h["value"] for h in hourly)[-2:] == [2, 3]
    html = response.content.decode()
    assert html.count('<td class="handled">3</td>') == 1 and html.count('<td class="handled">2</td>') == 1
    assert "total 5" in html


def test_the_dashboard_is_closed_to_users_who_are_not_staff(alice_browser, client):
    for visitor in (alice_browser, client):
        response = visitor.get(URL)
        assert response.status_code == 302 and "/admin/login/" in response["Location"]
