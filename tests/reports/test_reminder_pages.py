"""Reminders past the first page (``limit``/``offset``/``totalCount`` in the API, the
true pending count in the mind view), a reminder in flight at a worker crash, and a
daily report lost in one. Time is frozen (time-machine)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from mailbox import lifecycle
from mailbox.lifecycle import MAX_RECOVERY_ATTEMPTS, resurface_due
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_recover
from markus.reports import reminders
from markus.reports.services import enqueue_due_reports

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.pg]
T0 = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)  # 12:00 in Tokyo


def at(moment: datetime) -> time_machine.travel:
    return time_machine.travel(moment, tick=False)


def test_the_api_pages_through_reminders_of_every_state(tokyo, alice_client):
    with at(T0):
        made = [reminders.reminder_schedule(agent=tokyo, text=f"r{n}", when=f"in {n + 1}h").id for n in range(12)]
    with at(T0 + timedelta(hours=3, minutes=1)):  # r0..r2 fire
        resurface_due(tokyo.id)
    reminders.reminder_cancel(agent_id=tokyo.id, item_id=made[5], by="alice")
    url = f"/api/agents/{tokyo.id}/reminders"

    seen: list[dict] = []
    while True:
        page = alice_client.get(url, {"limit": 5, "offset": len(seen)}).json()
        assert page["totalCount"] == 12
        if not page["reminders"]:
            break
        seen += page["reminders"]
    assert sorted(r["id"] for r in seen) == sorted(made)  # none twice, none missed
    states = [r["state"] for r in seen]
    assert states[:8] == ["pending"] * 8  # the waiting ones first, soonest first
    assert [r["text"] for r in seen[:8]] == ["r3", "r4", "r6", "r7", "r8", "r9", "r10", "r11"]
    assert sorted(states[8:]) == ["cancelled", "fired", "fired", "fired"]

    assert len(alice_client.get(url).json()["reminders"]) == 12  # the default page holds them
    for bad in ({"limit": 0}, {"limit": "x"}, {"offset": -1}, {"limit": 10**6}):
        answer = alice_client.get(url, bad)
        assert answer.status_code == 400, (bad, answer.status_code)


def test_the_mind_view_counts_every_pending_reminder(tokyo, alice, client):
    with at(T0):
        made = [reminders.reminder_schedule(agent=tokyo, text=f"#{n}", when=f"in {n + 1}h").id for n in range(105)]
    reminders.reminder_cancel(agent_id=tokyo.id, item_id=made[0], by="alice")
    assert reminders.pending_count(tokyo.id) == 104
    client.force_login(alice)
    page = client.get(f"/agents/{tokyo.id}/mind/").content.decode()
    assert "Reminders (104 pending)" in page
    assert page.count('class="reminder-row"') == 50
    assert "… and 54 more" in page
    MailboxItem.objects.filter(id__in=made[1:60]).delete()  # a short list: all of it seen in one query
    page = client.get(f"/agents/{tokyo.id}/mind/").content.decode()
    assert "Reminders (45 pending)" in page and "more, due later" not in page


def test_a_reminder_in_flight_at_crashes_is_requeued_then_dropped_with_the_reason(tokyo):
    with at(T0):
        item = reminders.reminder_schedule(agent=tokyo, text="call the vendor", when="in 1h")
    for crash in range(1, MAX_RECOVERY_ATTEMPTS + 1):
        MailboxItem.objects.filter(id=item.id).update(status=Status.PROCESSING, deferred_until=None)
        report = mailbox_recover(tokyo.id)
        item.refresh_from_db()
        if crash < MAX_RECOVERY_ATTEMPTS:
            assert report.requeued == [item.id] and item.status == Status.QUEUED
        else:
            assert report.dropped == [item.id] and item.status == Status.DROPPED
            assert item.drop_reason.startswith("recovery: a reminder in flight at a crash")


def test_only_a_recovery_drop_lets_the_daily_report_be_asked_for_again(tokyo):
    with at(datetime(2026, 12, 1, 11, 0, tzinfo=UTC)):  # 20:00 in Tokyo
        assert enqueue_due_reports() == 1
    [item] = MailboxItem.objects.filter(agent=tokyo, source_type=MailboxType.DAILY_REPORT)
    lifecycle.drop(item.id, reason="dropped by an operator")
    with at(datetime(2026, 12, 1, 11, 15, tzinfo=UTC)):
        assert enqueue_due_reports() == 0  # dropped on purpose: once per day still
