"""The mind view's reminders, daily reports and rhythm line as the live stream and the
pages serve them: a reminder set or cancelled redraws the pending list over the socket
(the message of a cancel is left alone), ``agent:rhythm`` redraws the header, and an
``agent_report`` notification leads to a page with the report in full."""

from __future__ import annotations

import re
from datetime import date

import pytest
from django.test import Client

from attention.heartbeat import rhythm_update
from markus.agents.services import agent_create
from markus.reports.reminders import reminder_cancel, reminder_schedule
from markus.reports.services import report_store
from markus.web.live import MindStream
from markus.web.mind import MindFilters
from notifications.models import UserNotification

from .test_live_stream import apply_all

pytestmark = [pytest.mark.django_db, pytest.mark.pg]  # both databases


@pytest.fixture
def events(sent_events, django_capture_on_commit_callbacks):
    from contextlib import contextmanager

    @contextmanager
    def capture():
        sent_events.clear()
        got: list[dict] = []
        with django_capture_on_commit_callbacks(execute=True):
            yield got
        got.extend(event for _, event in sent_events)

    return capture


@pytest.fixture
def manager(alice, team):
    mia, _ = agent_create(name="Mia", role="Engineering Manager", owner=alice, team=team, agent_id="mia")
    return mia


def test_a_reminder_set_and_cancelled_redraws_the_pending_list_live(agent, events):
    stream = MindStream(agent.id, MindFilters(), can_control=True)
    stream.refresh()
    with events() as got:
        item = reminder_schedule(agent=agent, text="call the vendor", when="in 2h")
    html = apply_all(stream, got)
    listed = re.search(r'<div id="mind-reminder-list"[^>]*>.*?</div>', html, re.S)
    assert listed and 'hx-swap-oob="true"' in listed.group(0)
    assert f'id="reminder-{item.id}"' in listed.group(0) and "call the vendor" in listed.group(0)
    assert f"/agents/{agent.id}/mind/reminders/{item.id}/cancel/" in listed.group(0)
    assert 'id="mind-reports"' not in html and "reminder-flash" not in html  # the cancel's message stays
    assert 'id="mind-daily-reports" class="daily-reports" hx-swap-oob="true"' in html

    with events() as got:
        reminder_cancel(agent_id=agent.id, item_id=item.id, by="alice")
    html = apply_all(stream, got)
    assert "Reminders (0 pending)" in html and f'id="reminder-{item.id}"' not in html


def test_a_watcher_gets_no_cancel_button_over_the_socket(agent, events):
    stream = MindStream(agent.id, MindFilters(), can_control=False)
    stream.refresh()
    with events() as got:
        item = reminder_schedule(agent=agent, text="call the vendor", when="in 2h")
    html = apply_all(stream, got)
    assert f'id="reminder-{item.id}"' in html and "/cancel/" not in html


def test_a_new_interval_redraws_the_rhythm_line(agent):
    stream = MindStream(agent.id, MindFilters())
    stream.refresh()
    rhythm_update(agent.id, interval_minutes=150)
    html = stream.apply({"type": "agent:rhythm", "agentId": agent.id})
    assert 'id="mind-header" class="mind-header" hx-swap-oob="true"' in html
    assert "every 2 h 30 min" in html


def test_an_agent_report_notification_leads_to_the_report_in_full(alice, charlie, manager):
    text = "## Done\n" + "- a line of the report\n" * 40 + "- the last line"
    report_store(agent=manager, day=date(2026, 11, 30), content=text, activity={})
    report_store(agent=manager, day=date(2026, 11, 28), content="an earlier one", activity={})
    note = UserNotification.objects.get(user=alice, title="Mia: daily report for 2026-11-30")
    client = Client()
    client.force_login(alice)
    home = client.get("/").content.decode()
    assert f'<a href="/notifications/{note.id}/open/">Mia: daily report for 2026-11-30</a>' in home
    assert client.get(f"/notifications/{note.id}/open/")["Location"] == "/agents/mia/reports/2026-11-30/"
    assert note.body not in home  # the list shows the start only

    page = client.get("/agents/mia/reports/2026-11-30/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "the last line" in html and html.count("a line of the report") == 40
    assert 'href="/agents/mia/reports/2026-11-28/"' in html and 'href="/agents/mia/mind/"' in html
    # The mind view links each report to its page.
    assert 'href="/agents/mia/reports/2026-11-30/"' in client.get("/agents/mia/mind/").content.decode()

    assert client.get("/agents/mia/reports/2026-11-29/").status_code == 404  # no report that day
    assert client.get("/agents/mia/reports/2026-13-45/").status_code == 404  # not a date
    assert client.get("/agents/mia/reports/yesterday/").status_code == 404
    client.force_login(charlie)  # not in the team: like a missing agent
    assert client.get("/agents/mia/reports/2026-11-30/").status_code == 404


def test_a_notification_link_never_leaves_the_site_or_breaks_the_page(alice, manager):
    from markus.web.pages import notification_link

    def link(target):
        return notification_link(UserNotification(user=alice, type="agent_report", title="t", action_target=target))

    assert link({"agentId": "mia", "reportDate": "2026-11-30"}) == "/agents/mia/reports/2026-11-30/"
    assert link({"agentId": "mia"}) == "/agents/mia/mind/"
    assert link({"path": "/work?task=t1"}) == "/work?task=t1"
    assert link({"path": "//evil.example/x"}) == ""
    assert link({"agentId": "a/b", "reportDate": "2026-11-30"}) == ""
    assert link({"agentId": "mia", "reportDate": "soon"}) == ""
    assert link({"agentId": 3}) == "" and link(None) == ""


def test_a_daily_report_item_redraws_the_reports_live(manager, events):
    from mailbox.registry import MailboxType
    from mailbox.services import mailbox_enqueue

    stream = MindStream(manager.id, MindFilters())
    stream.refresh()
    report_store(agent=manager, day=date(2026, 11, 30), content="Shipped the notes.", activity={})
    with events() as got:
        mailbox_enqueue(agent_id=manager.id, source_type=MailboxType.DAILY_REPORT, payload={"summary": "Daily report"})
    html = apply_all(stream, got)
    reports = re.search(r'<div id="mind-daily-reports"[^>]*hx-swap-oob="true">.*?</div>', html, re.S)
    assert reports and 'id="report-2026-11-30"' in reports.group(0) and "Shipped the notes." in reports.group(0)


def test_a_long_reasoning_reads_in_full_on_demand(alice, agent):
    from attention.models import AgentDecision, DecisionType
    from mailbox.registry import MailboxType
    from mailbox.services import mailbox_enqueue

    item = mailbox_enqueue(agent_id=agent.id, source_type=MailboxType.SYSTEM_EVENT, payload={"summary": "deploy"})
    reasoning = "Deliberation: " + "weighed the queue; " * 30 + "the end of the reasoning."
    AgentDecision.objects.create(
        agent=agent, mailbox_item=item, decision_type=DecisionType.DELIBERATE, reasoning=reasoning
    )
    client = Client()
    client.force_login(alice)
    html = client.get(f"/agents/{agent.id}/mind/").content.decode()
    assert '<details class="reasoning"><summary>Deliberation: weighed the queue;' in html
    assert f'<p class="reasoning-full">{reasoning}</p>' in html
