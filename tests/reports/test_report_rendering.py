"""The daily report as people read it: its markdown rendered as sanitised HTML (on its
page and in the mind view), and every time on the report page in the agent's time
zone, labelled (its date is the agent's local date already)."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from django.test import Client

from markus.reports.models import DailyReport
from markus.reports.rendering import render_markdown
from markus.reports.services import report_store

from .conftest import make_agent

pytestmark = pytest.mark.django_db

TEXT = """## Done today

- **shipped** the *login* fix
- reviewed `tsk_12`

| task | state |
| --- | --- |
| tsk_12 | done |

<script>alert("x")</script>
<img src=x onerror="alert(1)">
[a link](https://example.org/x) and [a trap](javascript:alert(1))
"""


@pytest.fixture
def paris(alice, team):
    return make_agent(alice, team, "pia", role="manager", zone="Europe/Paris")


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_markdown_is_rendered_and_sanitised():
    html = render_markdown(TEXT)
    assert "<h2>Done today</h2>" in html
    assert "<li><strong>shipped</strong> the <em>login</em> fix</li>" in html
    assert "<code>tsk_12</code>" in html and "<table>" in html and "<td>tsk_12</td>" in html
    # Raw HTML stays text (escaped), and no link leads to a script.
    assert "<script" not in html and "<img" not in html and "&lt;script&gt;" in html
    assert 'href="javascript:' not in html and "<a" not in html.split("a link</a>", 1)[1]
    assert 'href="https://example.org/x"' in html and 'rel="noopener noreferrer nofollow"' in html
    assert "**" not in html


def test_the_report_page_shows_the_markdown_as_html(alice, paris):
    report_store(agent=paris, day=date(2026, 3, 10), content=TEXT, activity={})
    html = signed_in(alice).get(f"/agents/{paris.id}/reports/2026-03-10/").content.decode()
    assert "<li><strong>shipped</strong> the <em>login</em> fix</li>" in html
    assert "## Done today" not in html and "**shipped**" not in html
    assert "<script>alert" not in html and 'href="javascript:' not in html


def test_the_mind_view_shows_reports_as_html(alice, paris):
    report_store(agent=paris, day=date(2026, 3, 10), content=TEXT, activity={})
    html = signed_in(alice).get(f"/agents/{paris.id}/mind/").content.decode()
    section = html.split('id="mind-daily-reports"', 1)[1].split("</div>", 1)[0]
    assert "<li><strong>shipped</strong> the <em>login</em> fix</li>" in section
    assert "**shipped**" not in section and "<script>alert" not in section


def test_every_time_on_the_report_page_is_in_the_agents_zone_labelled(alice, paris):
    # Written at 22:30 UTC on the 10th: 23:30 in Paris (CET), still the 10th there;
    # revised at 23:15 UTC: 00:15 on the 11th in Paris.
    report, _ = report_store(agent=paris, day=date(2026, 3, 10), content="fine", activity={})
    DailyReport.objects.filter(pk=report.pk).update(
        created_at=datetime(2026, 3, 10, 22, 30, tzinfo=UTC), updated_at=datetime(2026, 3, 10, 23, 15, tzinfo=UTC)
    )
    html = signed_in(alice).get(f"/agents/{paris.id}/reports/2026-03-10/").content.decode()
    assert "2026-03-10 23:30" in html and "2026-03-11 00:15" in html
    assert "22:30" not in html and "23:15" not in html and "UTC" not in html
    assert "Europe/Paris" in html  # the zone, named


def test_an_agent_without_a_zone_gets_the_servers_labelled(alice, team):
    agent = make_agent(alice, team, "uma", role="manager")
    report, _ = report_store(agent=agent, day=date(2026, 3, 10), content="fine", activity={})
    DailyReport.objects.filter(pk=report.pk).update(created_at=datetime(2026, 3, 10, 22, 30, tzinfo=UTC))
    html = signed_in(alice).get(f"/agents/{agent.id}/reports/2026-03-10/").content.decode()
    assert "2026-03-10 22:30" in html and "UTC" in html
