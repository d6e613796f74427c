"""Sending from the chat page in a real browser (the system Chromium against daphne, a
Celery worker in a thread, the offline brain): Enter sends to the session shown, the
reply streams into a pending pair, and when it is done the stored messages take the
pair's place, so a reload shows the same conversation. The chat page and the mind
view's box send through one script (web/chat_stream.js).

alice owns agent ada (team Core)."""

from __future__ import annotations

import pytest

from markus.agents.models import ChatMessage, ChatSession
from tests.attention.conftest import celery_worker, wake_on_enqueue  # noqa: F401 (fixtures)

from .test_browser_work_chat import signed_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TIMEOUT = 30_000


def test_a_message_sent_on_the_chat_page_streams_its_reply_then_stays_after_a_reload(
    daphne_server, browser, celery_worker, alice, agent, test_output
):
    base = daphne_server.url
    errors: list[str] = []
    session = ChatSession.objects.create(agent=agent, user=alice, title="Release")
    page = signed_in(browser, base, alice, errors)
    page.goto(f"{base}/agents/{agent.id}/chat/?session={session.id}")
    page.wait_for_selector("#chat-live[data-live=on]", timeout=TIMEOUT)
    page.fill("#chat-text", "Is the release ready?")
    page.press("#chat-text", "Enter")
    # The pending pair gives way to the stored messages of this session.
    page.wait_for_selector(".msg-assistant >> text=Is the release ready?", timeout=TIMEOUT)
    page.wait_for_selector("#chat-reply", state="hidden", timeout=TIMEOUT)
    assert page.locator("#chat-reply .chat-pair").count() == 0
    rows = ChatMessage.objects.filter(session=session).order_by("created_at", "id")
    stored = list(rows.values_list("role", flat=True))
    assert stored[:1] == ["user"] and "assistant" in stored
    shown = page.locator("#messages li.msg").count()
    page.reload()
    page.wait_for_selector(".msg-user >> text=Is the release ready?")
    assert page.locator("#messages li.msg").count() == shown
    page.screenshot(path=str(test_output / "chat-page-sent.png"), full_page=True)
    assert errors == []
