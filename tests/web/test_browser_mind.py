"""The mind view as a control room, in a real browser (the system Chromium driven by
Playwright against daphne, with a real Celery worker in a thread and the offline brain):
chat from the box and see the reply stream in; a preempt happening live in demo mode;
pause and resume; a phone-sized viewport in the dark scheme.

alice owns agent ada; she signs in on the login page (see ``open_mind``).
"""

from __future__ import annotations

import re

import pytest
from django.conf import settings

from attention.models import AgentDecision, DecisionType
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue
from markus.agents.models import Agent
from tests.attention.conftest import celery_worker, wait_for, wake_on_enqueue  # noqa: F401 (fixtures)

from .test_browser import open_mind, seed_history

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_chat_from_the_box_preempts_a_background_item_live_in_demo_mode(
    daphne_server, browser, celery_worker, alice, agent, test_output, monkeypatch
):
    # Demo mode, short: each offline turn takes 400 ms, so the heartbeat (three turns)
    # is still in hand when the chat arrives, and the reply streams over 400 ms.
    monkeypatch.setitem(settings.MARKUS, "OFFLINE_THINK_MS", 400)
    errors: list[str] = []
    page = open_mind(browser, daphne_server.url, agent, errors)

    heartbeat = mailbox_enqueue(
        agent_id=agent.id, source_type=MailboxType.HEARTBEAT, payload={"summary": "Heartbeat check-in"}
    )
    page.locator(f'#item-{heartbeat.id}-head[data-status="processing"]').wait_for(timeout=15_000)
    header = page.locator("#mind-header")
    header.locator(".focus-clock .elapsed").wait_for(timeout=5_000)
    assert re.fullmatch(r"\d+s", header.locator(".focus-clock .elapsed").inner_text())
    assert "Heartbeat check-in" in header.locator(".focus").inner_text()

    page.fill("#chat-text", "Is the build green?")
    page.click("#chat button[type=submit]")
    # A user interaction comes first: the heartbeat is preempted at its next yield point.
    page.locator(f"#item-{heartbeat.id}-detail .decision-preempt").wait_for(state="attached", timeout=15_000)
    # Deferred only until the chat is answered (400 ms), then it resumes: the live view
    # showed the preempt; the stored decision says what happened to the heartbeat.
    assert AgentDecision.objects.filter(mailbox_item_id=heartbeat.id, decision_type=DecisionType.PREEMPT).exists()
    page.screenshot(path=str(test_output / "mind-control-preempt.png"), full_page=True)

    # The reply streams into the chat box and ends.
    page.locator("#chat-reply .chat-pair.done").wait_for(timeout=30_000)
    reply = page.locator("#chat-reply .chat-pair.done .chat-answer").inner_text()
    assert "I read your message: “Is the build green?”" in reply
    chat = MailboxItem.objects.get(agent=agent, source_type=MailboxType.HUMAN_CHAT)
    assert chat.status == Status.COMPLETED
    page.screenshot(path=str(test_output / "mind-control-chat.png"), full_page=True)
    assert errors == []
    page.close()


def test_pause_and_resume_then_a_phone_in_the_dark(daphne_server, browser, alice, agent, test_output):
    seed_history(agent)
    errors: list[str] = []
    page = open_mind(browser, daphne_server.url, agent, errors)
    header = page.locator("#mind-header")

    page.click("#mind-controls .ctl-pause")
    header.locator('.run-status[data-run-status="paused"]').wait_for(timeout=10_000)
    assert page.locator("#mind-controls .ctl-resume").is_visible()
    assert not page.locator("#mind-controls .ctl-pause").is_visible()
    page.locator("#mind-flash", has_text="Ada paused").wait_for(timeout=10_000)  # the answer to the POST
    agent.refresh_from_db()
    assert agent.status == Agent.RunStatus.PAUSED
    page.screenshot(path=str(test_output / "mind-control-paused.png"), full_page=True)

    page.click("#mind-controls .ctl-resume")
    page.locator("#mind-flash", has_text="Ada resumed").wait_for(timeout=10_000)
    header.locator('.run-status[data-run-status="running"]').wait_for(timeout=10_000)
    agent.refresh_from_db()
    assert agent.status == Agent.RunStatus.RUNNING
    assert errors == []
    cookies = page.context.cookies()
    page.close()

    # A phone, dark scheme: the summaries stay visible, the page follows the system.
    phone = browser.new_context(viewport={"width": 390, "height": 844}, color_scheme="dark", is_mobile=True)
    phone.add_cookies(cookies)
    small = phone.new_page()
    small.goto(f"{daphne_server.url}/agents/{agent.id}/mind/")
    small.locator("#live.on").wait_for(timeout=15_000)
    summaries = small.locator("#timeline-items .item-head .summary")
    assert summaries.count() == 5
    assert all(summaries.nth(i).is_visible() for i in range(summaries.count()))
    assert summaries.first.bounding_box()["width"] > 150
    width = small.evaluate("document.documentElement.scrollWidth")
    assert width <= 390  # nothing wider than the screen
    background = small.evaluate("getComputedStyle(document.body).backgroundColor")
    red, green, blue = (int(v) for v in background[background.index("(") + 1 : -1].split(",")[:3])
    assert red + green + blue < 120, background  # a dark page
    panel = small.evaluate("getComputedStyle(document.getElementById('mind-header')).backgroundColor")
    assert panel != "rgb(255, 255, 255)", panel
    small.screenshot(path=str(test_output / "mind-control-phone-dark.png"), full_page=True)
    phone.close()
