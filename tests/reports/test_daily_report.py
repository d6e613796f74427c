"""Daily reports (issue 16, deliverable 5): manager agents after 20:00 in their own time
zone, once per local day, through the mailbox; the offline brain writes the report from
the day's activities; it is stored, listed in the API, shown in the mind view and sent
to the owner as an ``agent_report`` notification. Time is frozen (time-machine)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import time_machine

from attention import loop
from attention.tasks import daily_report_all
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue
from markus.reports.models import DailyReport
from markus.reports.services import enqueue_due_reports, is_manager
from notifications.models import UserNotification

from .conftest import make_agent

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.pg]


def at(*args: int) -> time_machine.travel:
    return time_machine.travel(datetime(*args, tzinfo=UTC), tick=False)


def asked(agent) -> list[MailboxItem]:
    return list(MailboxItem.objects.filter(agent=agent, source_type=MailboxType.DAILY_REPORT).order_by("queued_at"))


def test_tokyo_owes_its_report_at_20_local_not_at_19_59(tokyo, new_york):
    with at(2026, 12, 1, 10, 59):  # 19:59 in Tokyo, 05:59 in New York
        assert daily_report_all() == 0
    with at(2026, 12, 1, 11, 0):  # 20:00 in Tokyo
        assert daily_report_all() == 1
    [item] = asked(tokyo)
    assert item.extra["date"] == "2026-12-01" and item.extra["timezone"] == "Asia/Tokyo"
    assert item.status == Status.QUEUED and item.summary == "Daily report for 2026-12-01"
    assert asked(new_york) == []


def test_new_york_owes_its_report_at_20_local_which_is_the_next_utc_day(tokyo, new_york):
    with at(2026, 12, 2, 0, 59):  # 19:59 on Dec 1 in New York (EST), 09:59 on Dec 2 in Tokyo
        daily_report_all()
        assert asked(new_york) == []
    with at(2026, 12, 2, 1, 0):  # 20:00 on Dec 1 in New York
        daily_report_all()
    [item] = asked(new_york)
    assert item.extra["date"] == "2026-12-01"  # the local date, not the UTC one
    assert asked(tokyo) == []  # 10:00 in Tokyo


def test_non_managers_never_owe_a_report(agent, tokyo):
    assert not is_manager(agent) and is_manager(tokyo)
    for hour in (11, 14, 20, 23):
        with at(2026, 12, 1, hour, 30):
            daily_report_all()
    assert asked(agent) == []
    assert len(asked(tokyo)) == 1


def test_a_paused_manager_is_not_asked(tokyo):
    tokyo.status = tokyo.RunStatus.PAUSED
    tokyo.save(update_fields=["status"])
    with at(2026, 12, 1, 12, 0):
        assert daily_report_all() == 0


def test_once_per_local_day_whatever_became_of_the_item_and_again_the_next_day(tokyo):
    with at(2026, 12, 1, 11, 0):
        daily_report_all()
        daily_report_all()  # a second beat at the same moment
    with at(2026, 12, 1, 11, 15):
        daily_report_all()
    [first] = asked(tokyo)
    MailboxItem.objects.filter(id=first.id).update(status=Status.DROPPED)  # an operator dropped it
    with at(2026, 12, 1, 14, 45):  # 23:45 in Tokyo
        assert daily_report_all() == 0
    with at(2026, 12, 1, 15, 0):  # 00:00 on Dec 2 in Tokyo: before 20:00
        assert daily_report_all() == 0
    with at(2026, 12, 2, 11, 0):
        assert daily_report_all() == 1
    assert [i.extra["date"] for i in asked(tokyo)] == ["2026-12-01", "2026-12-02"]


def test_an_existing_report_for_the_day_means_no_item(tokyo):
    DailyReport.objects.create(agent=tokyo, date=datetime(2026, 12, 1).date(), content="written by hand")
    with at(2026, 12, 1, 12, 0):
        assert enqueue_due_reports() == 0


def test_an_agent_without_a_time_zone_lives_in_the_servers(alice, team, settings):
    settings.TIME_ZONE = "UTC"
    plain = make_agent(alice, team, "uma", role="Product Manager")
    with at(2026, 12, 1, 19, 59):
        assert enqueue_due_reports() == 0
    with at(2026, 12, 1, 20, 0):
        assert enqueue_due_reports() == 1
    assert asked(plain)[0].extra["timezone"] == "UTC"


def _work_during_the_day(agent) -> None:
    for summary in ("Deploy finished", "Backup failed overnight"):
        mailbox_enqueue(
            agent_id=agent.id,
            source_type=MailboxType.SYSTEM_EVENT,
            payload={"summary": summary, "content": summary},
        )
        loop.run_attention(agent.id)


def test_the_offline_brain_writes_the_report_it_is_stored_listed_shown_and_sent_to_the_owner(
    tokyo, offline, alice, alice_client, client
):
    with at(2026, 12, 1, 2, 0):  # 11:00 in Tokyo
        _work_during_the_day(tokyo)
    with at(2026, 12, 1, 11, 5):  # 20:05 in Tokyo
        assert daily_report_all() == 1
        loop.run_attention(tokyo.id)
    [item] = asked(tokyo)
    item.refresh_from_db()
    assert item.status == Status.COMPLETED
    report = DailyReport.objects.get(agent=tokyo)
    assert report.date.isoformat() == "2026-12-01"
    assert "Deploy finished" in report.content and "Backup failed overnight" in report.content
    assert report.activity["total"] == 2 and report.activity["writtenBy"]["mailboxItemId"] == item.id

    # The owner is told, once.
    [note] = UserNotification.objects.filter(user=alice, type="agent_report")
    assert note.title == "Kenji: daily report for 2026-12-01"
    assert "Deploy finished" in note.body and note.metadata["agentId"] == tokyo.id

    # The API lists it and answers it by date.
    listed = alice_client.get(f"/api/agents/{tokyo.id}/reports").json()
    assert listed["totalCount"] == 1 and listed["reports"][0]["date"] == "2026-12-01"
    one = alice_client.get(f"/api/agents/{tokyo.id}/reports/2026-12-01")
    assert one.status_code == 200 and one.json()["content"] == report.content
    assert alice_client.get(f"/api/agents/{tokyo.id}/reports/2026-12-02").status_code == 404
    assert alice_client.get(f"/api/agents/{tokyo.id}/reports/yesterday").status_code == 400

    # The mind view shows it.
    client.force_login(alice)
    page = client.get(f"/agents/{tokyo.id}/mind/").content.decode()
    assert 'id="report-2026-12-01"' in page and "Deploy finished" in page

    # A second beat that evening asks nothing more.
    with at(2026, 12, 1, 13, 0):
        assert daily_report_all() == 0


def test_a_second_submission_replaces_the_text_without_a_second_notification(tokyo, alice):
    from attention.toolbox import ToolContext, execute_tool

    with at(2026, 12, 1, 11, 0):
        daily_report_all()
        [item] = asked(tokyo)
        ctx = ToolContext(
            agent_id=tokyo.id, agent_name=tokyo.name, mailbox_item_id=item.id, scenario="daily_report_writing"
        )
        ok, first = execute_tool(ctx, "submit_daily_report", {"content": "first draft"})
        assert ok, first
        ok, second = execute_tool(ctx, "submit_daily_report", {"content": "final text"})
        assert ok and '"replaced": true' in second
        ok, empty = execute_tool(ctx, "submit_daily_report", {"content": "  "})
        assert not ok and "empty" in empty
    assert DailyReport.objects.get(agent=tokyo).content == "final text"
    assert UserNotification.objects.filter(user=alice, type="agent_report").count() == 1
    # Offered only while writing the report.
    ok, refused = execute_tool(
        ToolContext(agent_id=tokyo.id, agent_name=tokyo.name, scenario="chat"), "submit_daily_report", {"content": "x"}
    )
    assert not ok and "unknown tool" in refused


def test_reports_of_an_agent_one_may_not_see_are_404(tokyo, charlie_client):
    assert charlie_client.get(f"/api/agents/{tokyo.id}/reports").status_code == 404
    assert charlie_client.get(f"/api/agents/{tokyo.id}/reports/2026-12-01").status_code == 404


@pytest.mark.postgres
def test_two_beats_at_the_same_moment_on_postgresql_ask_once(tokyo, new_york):
    """Two beat processes firing together: the agent's lock for the job makes the second
    find the first one's item."""
    import threading

    from django.db import connection

    # Routed by its marker (`postgres`: only the PostgreSQL pass runs it): never skipped.
    assert connection.vendor == "postgresql", "the advisory lock is PostgreSQL's"
    barrier = threading.Barrier(2)
    counts: list[int] = []
    now = datetime(2026, 12, 2, 1, 30, tzinfo=UTC)  # 20:30 in New York, 10:30 in Tokyo

    def beat() -> None:
        from django.db import connections

        try:
            barrier.wait()
            counts.append(enqueue_due_reports(now=now))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=beat) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(counts) == [0, 1]
    assert len(asked(new_york)) == 1 and asked(tokyo) == []
