"""The mind view in a real browser: the system Chromium driven by Playwright against
daphne serving the ASGI app in this process, with a real Celery worker in a thread.

alice (staff, so the admin login lets her in) watches her agent ada.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from attention.models import AgentActivity, AgentActivityLog, AgentDecision
from mailbox.models import MailboxItem
from mailbox.registry import ActivityType, MailboxType, Status
from markus.agents.services import user_token_create
from markus.llm.scripted import Turn
from tests.attention.conftest import celery_worker, scripted, wait_for, wake_on_enqueue  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def seed_history(agent) -> None:
    """Items the loop handled earlier, in every colour, so the page has a past."""
    now = timezone.now()
    rows = [
        (MailboxType.HEARTBEAT, "Heartbeat check-in", Status.COMPLETED, 50),
        (MailboxType.TASK_COMMENT, "Comment on task: flaky login test", Status.MERGED, 40),
        (MailboxType.REQUIREMENT_UPDATE, "Requirement approved: SSO", Status.COMPLETED, 30),
        (MailboxType.DAILY_REPORT, "Daily report", Status.DEFERRED, 20),
        (MailboxType.A2A_MESSAGE, "Grace: can you review PR 12?", Status.DROPPED, 10),
    ]
    for kind, summary, status, minutes in rows:
        item = MailboxItem.objects.create(
            agent=agent,
            source_type=kind,
            status=status,
            payload={"summary": summary},
            queued_at=now - timedelta(minutes=minutes),
            completed_at=now - timedelta(minutes=minutes - 1),
            deferred_until=now + timedelta(days=1) if status == Status.DEFERRED else None,
            drop_reason="stale after restart" if status == Status.DROPPED else "",
        )
        AgentDecision.objects.create(
            agent=agent,
            mailbox_item=item,
            decision_type="pick",
            reasoning="Idle — picked from queue",
            created_at=item.queued_at,
        )
        if status == Status.COMPLETED:
            activity = AgentActivity.objects.create(
                agent=agent,
                mailbox_item=item,
                type=ActivityType.INTERNAL.value,
                label=summary,
                total_tokens=1850,
                total_tools=2,
                started_at=item.queued_at,
                ended_at=item.completed_at,
            )
            AgentActivityLog.objects.create(activity=activity, seq=1, type="status", content="started")


def open_mind(browser, base: str, agent, errors: list[str]):
    """Log in as alice on the login page, which sends her on to the mind view;
    returns the page once its socket is live."""
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    # htmx logs a swap that found no target as a console error; failed requests are
    # collected with their address below instead (the login page asks for a favicon).
    page.on(
        "console",
        lambda msg: (
            errors.append(msg.text)
            if msg.type == "error" and not msg.text.startswith("Failed to load resource")
            else None
        ),
    )
    page.on(
        "response",
        lambda r: (
            errors.append(f"{r.status} {r.url}") if r.status >= 400 and not r.url.endswith("/favicon.ico") else None
        ),
    )
    page.goto(f"{base}/agents/{agent.id}/mind/")
    assert "/accounts/login/" in page.url
    page.fill("#id_username", "alice")
    page.fill("#id_password", "pw-alice")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/agents/{agent.id}/mind/")
    page.locator("#live.on").wait_for(timeout=15_000)
    page.evaluate("window.__sameDocument = true")  # gone if the page ever reloads
    return page


def enqueue_over_api(page, base: str, agent, token: str, summary: str, content: str) -> str:
    response = page.request.post(
        f"{base}/api/agents/{agent.id}/mailbox",
        headers={"Authorization": f"Token {token}"},
        data={"sourceType": MailboxType.HUMAN_CHAT.value, "payload": {"summary": summary, "content": content}},
    )
    assert response.status == 201, response.text()
    return response.json()["id"]


def test_a_new_item_appears_live_filters_work_and_logs_load(
    daphne_server,
    browser,
    celery_worker,
    alice,
    agent,
    test_output,
):
    seed_history(agent)
    token = user_token_create(alice)[1]
    base = daphne_server.url
    errors: list[str] = []
    page = open_mind(browser, base, agent, errors)
    assert page.locator(".brain-offline").is_visible()

    # Enqueue over the API: the item appears and is processed, without a reload.
    item_id = enqueue_over_api(page, base, agent, token, "What's the status of the release?", "What's the status?")
    page.locator(f"#item-{item_id}").wait_for(timeout=15_000)
    page.locator(f'#item-{item_id}-head[data-status="completed"]').wait_for(timeout=30_000)
    wait_for(
        lambda: MailboxItem.objects.filter(id=item_id, status=Status.COMPLETED).exists(),
        message="the worker to complete the chat",
    )
    assert page.evaluate("window.__sameDocument") is True
    first = page.locator("#timeline-items > .item").first
    assert first.get_attribute("id") == f"item-{item_id}"  # newest first

    # Expand the item: decisions, the activity, and its logs on demand.
    page.click(f"#item-{item_id}-head")
    detail = page.locator(f"#item-{item_id}-detail")
    assert detail.locator(".decision-pick").is_visible()
    assert "Activity:" in detail.inner_text()
    detail.locator("button.load-logs").click()
    logs = page.locator(f"#logs-{item_id} .log-list .log")
    logs.first.wait_for(timeout=10_000)
    assert logs.count() >= 2
    page.screenshot(path=str(test_output / "mind-view.png"), full_page=True)

    # Filter by category: only system items, then only interactions.
    page.click("label.pill[data-category=system]")
    page.locator(f"#item-{item_id}").wait_for(state="detached", timeout=10_000)
    heads = page.locator("#timeline-items .item-head")
    assert heads.count() == 2
    assert set(heads.evaluate_all("els => els.map(e => e.dataset.category)")) == {"system"}
    assert "category=system" in page.url
    page.locator("#live.on").wait_for(timeout=15_000)  # a socket for the new filters
    page.click("label.pill[data-category=interaction]")
    page.locator(f"#item-{item_id}").wait_for(timeout=10_000)
    assert set(heads.evaluate_all("els => els.map(e => e.dataset.category)")) == {"interaction"}
    page.screenshot(path=str(test_output / "mind-view-filtered.png"), full_page=True)
    assert page.evaluate("window.__sameDocument") is True
    assert errors == []
    page.close()


def test_focus_and_state_changes_appear_in_the_header_without_a_reload(
    daphne_server,
    browser,
    celery_worker,
    scripted,
    alice,
    agent,
    test_output,
):
    slow = Turn(text="All green.", delay=2.5)
    scripted(slow)
    token = user_token_create(alice)[1]
    errors: list[str] = []
    page = open_mind(browser, daphne_server.url, agent, errors)
    assert "Brain: scripted" in page.locator("#mind-header").inner_text()
    header_state = page.locator("#mind-header .state")
    assert header_state.get_attribute("data-state") == "idle"

    item_id = enqueue_over_api(page, daphne_server.url, agent, token, "Is the build green?", "Is the build green?")
    page.locator('#mind-header .state[data-state="focused"]').wait_for(timeout=15_000)
    focus = page.locator("#mind-header .focus").inner_text()
    assert "Focused on:" in focus and "Chat" in focus and "Is the build green?" in focus
    page.locator(f'#item-{item_id}-head[data-status="processing"]').wait_for(timeout=10_000)
    page.screenshot(path=str(test_output / "mind-view-focused.png"), full_page=True)

    page.locator('#mind-header .state[data-state="idle"]').wait_for(timeout=20_000)
    page.locator(f'#item-{item_id}-head[data-status="completed"]').wait_for(timeout=10_000)
    assert "Not focused" in page.locator("#mind-header .focus").inner_text()
    assert page.evaluate("window.__sameDocument") is True
    assert errors == []
    page.close()


def test_load_earlier_appends_the_next_page(daphne_server, browser, alice, agent):
    start = timezone.now() - timedelta(hours=2)
    MailboxItem.objects.bulk_create(
        [
            MailboxItem(
                agent=agent,
                source_type=MailboxType.HEARTBEAT,
                status=Status.COMPLETED,
                payload={"summary": f"beat {n}"},
                queued_at=start + timedelta(minutes=n),
            )
            for n in range(33)
        ]
    )
    errors: list[str] = []
    page = open_mind(browser, daphne_server.url, agent, errors)
    items = page.locator("#timeline-items > .item")
    assert items.count() == 30
    page.click("#load-earlier button")
    page.locator("#timeline-items > .item:nth-child(33)").wait_for(timeout=10_000)
    assert items.count() == 33
    assert page.locator("#timeline-items .summary").last.inner_text() == "beat 0"
    assert page.locator("#load-earlier button").count() == 0
    assert errors == []

    # The page says so when its socket goes away (htmx reconnects by itself).
    page.evaluate("htmx.trigger('#timeline', 'htmx:wsClose')")
    assert page.locator("#live").inner_text() == "offline, reconnecting"
    page.close()
