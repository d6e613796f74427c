"""Reports and reminders are not lost: a daily report or a reminder in flight when its
worker crashed is asked for again, and all of an agent's reminders can be listed, page by
page, through the API."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import time_machine

from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_recover
from markus.agents.services import agent_create
from markus.reports.services import enqueue_due_reports
from tests.conftest import client_for


def _at(*args: int) -> time_machine.travel:
    return time_machine.travel(datetime(*args, tzinfo=UTC), tick=False)


@pytest.fixture
def kenji(alice, team):
    """A manager agent in Tokyo (owes a daily report from 20:00 local = 11:00 UTC)."""
    a, _ = agent_create(name="Kenji", role="Engineering Manager", owner=alice, team=team, agent_id="kenji")
    a.timezone = "Asia/Tokyo"
    a.save(update_fields=["timezone"])
    return a


# ---------------------------------------------------------------------------- daily report


@pytest.mark.django_db(transaction=True)
@pytest.mark.pg
def test_a_daily_report_lost_in_a_worker_crash_is_asked_for_again_that_day(kenji):
    """A daily_report item in flight when its worker died is dropped by recovery, and no
    report is ever asked for that day again (the dream cycle does not count such a drop,
    the daily report does): the owner never gets the day's report."""
    with _at(2026, 12, 1, 11, 0):  # 20:00 in Tokyo
        assert enqueue_due_reports() == 1
    [item] = MailboxItem.objects.filter(agent=kenji, source_type=MailboxType.DAILY_REPORT)
    MailboxItem.objects.filter(id=item.id).update(status=Status.PROCESSING)  # its worker dies in it
    report = mailbox_recover(kenji.id)
    assert report.dropped == [item.id]

    with _at(2026, 12, 1, 11, 15):  # 20:15 in Tokyo, the next check
        assert enqueue_due_reports() == 1


# ---------------------------------------------------------------------------- reminders


@pytest.mark.django_db(transaction=True)
@pytest.mark.pg
def test_a_reminder_in_flight_at_a_worker_crash_is_not_lost(agent):
    """A reminder that came due and was in flight when its worker stopped is dropped by
    restart recovery (only chats, human comments, execution triggers and reviews are
    re-queued): the reminder a person asked for is silently never acted on."""
    from markus.reports.reminders import reminder_schedule

    with _at(2026, 12, 1, 8, 0):
        item = reminder_schedule(agent=agent, text="remind alice about the review", when="in 1h")
    with _at(2026, 12, 1, 9, 1):  # due: the sweep brought it back and a worker began it
        MailboxItem.objects.filter(id=item.id).update(status=Status.PROCESSING, deferred_until=None)
        mailbox_recover(agent.id)
    item.refresh_from_db()
    assert item.status in (Status.QUEUED, Status.DEFERRED), (item.status, item.drop_reason)


@pytest.mark.django_db
def test_the_reminders_of_an_agent_can_all_be_listed(agent, alice):
    """GET /api/agents/{id}/reminders stops at 100 with no totalCount and no limit/offset
    (reports have both): reminders beyond the 100th can never be seen or cancelled by id."""
    from markus.reports.reminders import reminder_schedule

    with _at(2026, 12, 1, 8, 0):
        made = {reminder_schedule(agent=agent, text=f"follow up #{n}", when=f"in {n + 1}h").id for n in range(105)}
    client = client_for(alice)
    seen: set[str] = set()
    for _ in range(10):  # pages, as the API offers them
        page = client.get(f"/api/agents/{agent.id}/reminders", {"limit": 50, "offset": len(seen)}).json()
        new = {r["id"] for r in page["reminders"]} - seen
        if not new:
            break
        seen |= new
    assert seen == made
