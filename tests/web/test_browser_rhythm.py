"""The agent's rhythm, reminders, deliberation and daily reports in the mind view, in a
real browser (the system Chromium driven by Playwright against daphne in this process;
the loop runs in the test's thread with the offline brain, its events reach the page
over the socket):

1. the rhythm line, and how it follows the operator's PATCH of the interval;
2. a reminder the agent set from a chat shows up live; the owner cancels it, a teammate
   has no button;
3. a deliberation's choices in the decision list, with their reasoning, styled;
4. a daily report reached from the bell in two clicks and read in full;
5. a phone in the dark with all of it: no sideways scroll.

alice owns agent ada (and manager mia); bob is in the team.
"""

from __future__ import annotations

import re
from datetime import date

import pytest

from attention import loop
from attention.models import AgentDecision, DecisionType
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue
from markus.agents.services import agent_create, user_token_create
from markus.llm.base import set_provider_override
from markus.llm.offline import OfflineProvider
from markus.reports.reminders import reminder_schedule
from markus.reports.services import report_store

from .test_browser import open_mind

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

REPORT = "\n".join(
    [
        "## Done today",
        "- Reviewed PR 12 and merged it after the second round.",
        "- Unblocked the release: " + "the flaky login test now retries once, " * 6,
        "## Open",
        "- The SSO requirement waits for approval.",
        "## Next",
        "- Ship the release notes tomorrow at 10:00 (the very last line).",
    ]
)


@pytest.fixture
def offline():
    set_provider_override(OfflineProvider())
    yield
    set_provider_override(None)


@pytest.fixture
def manager(alice, team):
    mia, _ = agent_create(name="Mia", role="Engineering Manager", owner=alice, team=team, agent_id="mia")
    return mia


def sign_in(page, base: str, user: str, path: str) -> None:
    page.goto(f"{base}{path}")
    page.fill("#id_username", user)
    page.fill("#id_password", f"pw-{user}")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}{path}")


def chat(agent, user, text: str) -> None:
    mailbox_enqueue(
        agent_id=agent.id,
        source_type=MailboxType.HUMAN_CHAT,
        payload={"summary": text[:40], "content": text},
        metadata={"senderRole": "user", "senderId": str(user.pk), "senderName": user.username},
    )
    loop.run_attention(agent.id)


def test_the_rhythm_line_follows_the_operators_interval(daphne_server, browser, alice, agent, test_output):
    base = daphne_server.url
    errors: list[str] = []
    page = open_mind(browser, base, agent, errors)
    rhythm = page.locator("#mind-header #rhythm")
    assert rhythm.is_visible()
    assert re.search(r"Next heartbeat: .+ · every 6 h · sleep depth 0 \(awake\)", rhythm.inner_text())

    page.locator("#live.on").wait_for(timeout=15_000)
    page.evaluate("window.__sameDocument = true")  # gone if the page ever reloads
    token = user_token_create(alice)[1]
    response = page.request.patch(
        f"{base}/api/agents/{agent.id}/",
        headers={"Authorization": f"Token {token}"},
        data={"heartbeatIntervalMinutes": 150},
    )
    assert response.status == 200, response.text()
    assert response.json()["heartbeatIntervalMinutes"] == 150
    # The PATCH sends ``agent:rhythm``; the socket answers with the header: live, no reload.
    page.locator("#rhythm .heartbeat-interval", has_text="every 2 h 30 min").wait_for(timeout=10_000)
    assert page.evaluate("window.__sameDocument") is True
    assert "sleep depth 0 (awake)" in page.locator("#rhythm").inner_text()
    page.screenshot(path=str(test_output / "mind-rhythm.png"))
    assert errors == []
    page.close()


def test_a_reminder_from_a_chat_is_listed_live_and_the_owner_cancels_it(
    daphne_server, browser, alice, bob, agent, offline, test_output
):
    base = daphne_server.url
    errors: list[str] = []
    page = open_mind(browser, base, agent, errors)
    assert "No pending reminders." in page.locator("#mind-reminders").inner_text()

    chat(agent, alice, "remind me to review the Q4 plan in 2h")
    [item] = MailboxItem.objects.filter(agent=agent, source_type=MailboxType.REMINDER)
    assert item.status == Status.DEFERRED
    row = page.locator(f"#reminder-{item.id}")
    row.wait_for(timeout=10_000)  # live, no reload
    assert "review the Q4 plan" in row.inner_text()
    assert page.locator("#mind-reminders h3").text_content() == "Reminders (1 pending)"
    page.screenshot(path=str(test_output / "mind-reminder.png"), full_page=True)

    # A teammate watches the same agent: the reminder, no button.
    other = browser.new_page()
    sign_in(other, base, "bob", f"/agents/{agent.id}/mind/")
    assert other.locator(f"#reminder-{item.id}").is_visible()
    assert other.locator(f"#reminder-{item.id} .ctl-cancel-reminder").count() == 0
    other.close()

    row.locator("button.ctl-cancel-reminder").click()
    row.wait_for(state="detached", timeout=10_000)
    assert page.locator("#mind-reminders", has_text=f"Reminder {item.id} cancelled.").is_visible()
    assert "No pending reminders." in page.locator("#mind-reminders").inner_text()
    token = user_token_create(alice)[1]
    listed = page.request.get(f"{base}/api/agents/{agent.id}/reminders", headers={"Authorization": f"Token {token}"})
    assert [(r["id"], r["state"]) for r in listed.json()["reminders"]] == [(item.id, "cancelled")]
    assert errors == []
    page.close()


def test_a_deliberations_choices_show_with_their_reasoning(daphne_server, browser, alice, agent, offline, test_output):
    errors: list[str] = []
    page = open_mind(browser, daphne_server.url, agent, errors)
    # One priority for all three: they tie, so the agent deliberates (a head more urgent
    # than the rest would go at once, tier 0).
    beat = mailbox_enqueue(
        agent_id=agent.id, source_type=MailboxType.HEARTBEAT, priority=2, payload={"summary": "heartbeat"}
    )
    deploy = mailbox_enqueue(
        agent_id=agent.id, source_type=MailboxType.SYSTEM_EVENT, priority=2, payload={"summary": "deploy window opens"}
    )
    message = mailbox_enqueue(
        agent_id=agent.id,
        source_type=MailboxType.A2A_MESSAGE,
        priority=2,
        payload={"summary": "about the demo: no rush, hold off until tomorrow"},
        metadata={"senderName": "Dee"},
    )
    loop.run_attention(agent.id)

    page.locator(f'#item-{message.id}-head[data-status="deferred"]').wait_for(timeout=15_000)
    page.locator(f'#item-{beat.id}-head[data-status="completed"]').wait_for(timeout=15_000)
    page.locator(f'#item-{deploy.id}-head[data-status="completed"]').wait_for(timeout=15_000)
    page.click(f"#item-{message.id}-head")
    detail = page.locator(f"#item-{message.id}-detail")
    defer = detail.locator(".decision", has=page.locator(".decision-defer"))
    assert "Deliberation: the sender asked to hold off" in defer.inner_text()
    # The deliberation's own choice sits on the item it chose to process.
    chosen = AgentDecision.objects.filter(agent=agent, decision_type=DecisionType.DELIBERATE).first()
    assert chosen is not None
    page.click(f"#item-{chosen.mailbox_item_id}-head")
    first = page.locator(f"#item-{chosen.mailbox_item_id}-detail .decision-deliberate").first
    reasoning = first.locator("xpath=..").inner_text()
    assert reasoning.startswith("deliberate Deliberation:") and "waiting" in reasoning, reasoning
    # Styled: the badge has its own colours, not the plain badge's.
    colour = first.evaluate("e => getComputedStyle(e).backgroundColor")
    plain = page.evaluate(
        "() => { const b = document.createElement('span'); b.className = 'badge'; document.body.append(b);"
        " const c = getComputedStyle(b).backgroundColor; b.remove(); return c; }"
    )
    assert colour != plain, colour
    page.screenshot(path=str(test_output / "mind-deliberation.png"), full_page=True)
    assert errors == []
    page.close()


def test_a_daily_report_is_two_clicks_from_the_bell_and_reads_in_full(
    daphne_server, browser, alice, manager, test_output
):
    base = daphne_server.url
    day = date(2026, 11, 30)
    report_store(agent=manager, day=day, content=REPORT, activity={"total": 4})
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    sign_in(page, base, "alice", "/work")

    page.click("#bell")  # 1
    page.wait_for_url(f"{base}/#notifications")
    note = page.locator("#notifications .note", has_text="Mia: daily report for 2026-11-30")
    note.locator("a").click()  # 2
    page.wait_for_url(f"{base}/agents/{manager.id}/reports/{day.isoformat()}/")
    report = page.locator(f"#report-{day.isoformat()}")
    report.wait_for(timeout=10_000)
    text = report.inner_text()
    assert "Reviewed PR 12" in text and "(the very last line)." in text  # all of it
    assert report.locator(".report-content").is_visible()
    page.screenshot(path=str(test_output / "daily-report.png"), full_page=True)

    # The mind view lists it too, linked to the same page.
    page.goto(f"{base}/agents/{manager.id}/mind/")
    page.locator(f"#mind-daily-reports a[href$='/reports/{day.isoformat()}/']").click()
    page.locator(f"#report-{day.isoformat()}").wait_for(timeout=10_000)
    page.close()


def test_a_phone_in_the_dark_with_rhythm_reminders_and_reports(daphne_server, browser, alice, manager, test_output):
    base = daphne_server.url
    report_store(agent=manager, day=date(2026, 11, 30), content=REPORT, activity={})
    reminder_schedule(agent=manager, text="Follow up on the SSO approval " + "with the whole team " * 8, when="in 3h")
    context = browser.new_context(viewport={"width": 375, "height": 740}, color_scheme="dark", is_mobile=True)
    page = context.new_page()
    for path in (f"/agents/{manager.id}/mind/", f"/agents/{manager.id}/reports/2026-11-30/"):
        if path.endswith("/mind/"):
            sign_in(page, base, "alice", path)
            page.locator("#live.on").wait_for(timeout=15_000)
            for part in ("#rhythm", "#mind-reminders .reminder-row", "#mind-daily-reports .report-content"):
                assert page.locator(part).first.is_visible(), part
        else:
            page.goto(f"{base}{path}")
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{path} scrolls sideways by {overflow}px"
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        rgb = [int(v) for v in background[background.index("(") + 1 : background.index(")")].split(",")[:3]]
        assert sum(rgb) < 120, background
        name = "mind-rhythm-phone-dark.png" if path.endswith("/mind/") else "daily-report-phone-dark.png"
        page.screenshot(path=str(test_output / name), full_page=True)
    context.close()
