"""Reminders and reports listings and far-off times:

- a pending reminder set long ago stays listed (API, ``list_reminders``) however many
  reminders fired after it;
- a ``when`` too far out for a date ("in 99999999999 weeks", a number of thousands of
  digits) is a tool error the LLM can read, not "schedule_reminder failed";
- the reminders and reports listings (API and mind view) cost the same queries for 2
  reminders and reports as for 25."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext

from attention.toolbox import ToolContext, execute_tool
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from markus.reports.models import DailyReport

pytestmark = [pytest.mark.django_db, pytest.mark.pg]
T0 = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)  # 12:00 in Tokyo


def call(agent, name: str, args: dict) -> tuple[bool, dict]:
    ctx = ToolContext(agent_id=agent.id, agent_name=agent.name, scenario="check_in")
    ok, result = execute_tool(ctx, name, args)
    return ok, json.loads(result)


def schedule(agent, when: str, text: str) -> str:
    ok, result = call(agent, "schedule_reminder", {"text": text, "when": when})
    assert ok, result
    return result["reminderId"]


def test_a_pending_reminder_stays_listed_behind_many_that_fired(tokyo, alice_client):
    with time_machine.travel(T0, tick=False) as clock:
        far = schedule(tokyo, "in 300 days", "renew the vendor contract")
        clock.shift(timedelta(minutes=1))
        fired = [schedule(tokyo, "in 1h", f"stand-up note {i}") for i in range(201)]
        MailboxItem.objects.filter(id__in=fired).update(status=Status.COMPLETED, deferred_until=None)

        listed = alice_client.get(f"/api/agents/{tokyo.id}/reminders").json()["reminders"]
        assert listed[0]["id"] == far and listed[0]["state"] == "pending"
        ok, mine = call(tokyo, "list_reminders", {})
        assert ok and [r["id"] for r in mine["reminders"]] == [far]


@pytest.mark.parametrize("when", ["in 99999999999 weeks", "in " + "9" * 5000 + " days", "in 999999999 days"])
def test_a_when_beyond_any_date_is_a_tool_error(tokyo, when):
    with time_machine.travel(T0, tick=False):
        ok, result = call(tokyo, "schedule_reminder", {"text": "someday", "when": when})
    assert not ok
    assert result["error"].startswith("schedule_reminder: ") and "failed" not in result["error"]
    assert "365 days" in result["error"]
    assert not MailboxItem.objects.filter(source_type=MailboxType.REMINDER).exists()


def _listing_queries(agent, client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return len(queries)


def _more(agent, n: int, start: int) -> None:
    with time_machine.travel(T0, tick=False):
        for i in range(start, start + n):
            schedule(agent, f"in {i + 1}h", f"reminder {i}")
    DailyReport.objects.bulk_create(
        DailyReport(agent=agent, date=date(2026, 1, 1) + timedelta(days=start + i), content=f"day {i}")
        for i in range(n)
    )


def test_the_listings_cost_the_same_queries_for_many_reminders_and_reports(tokyo, alice, alice_client, client):
    client.force_login(alice)
    _more(tokyo, 2, 0)
    urls = [f"/api/agents/{tokyo.id}/reminders", f"/api/agents/{tokyo.id}/reports", f"/agents/{tokyo.id}/mind/"]
    few = [_listing_queries(tokyo, alice_client if u.startswith("/api") else client, u) for u in urls]
    _more(tokyo, 23, 2)
    many = [_listing_queries(tokyo, alice_client if u.startswith("/api") else client, u) for u in urls]
    assert many == few
