"""A message whose answer the network lost is sent again by the page and stored once
(web/chat_stream.js, ``mailbox.idempotency``): the first POST reaches the server (the
message is stored, the agent answers) but its answer never reaches the page; the page
sends it again with the same ``Idempotency-Key``, the server answers that send as the
first (``Idempotent-Replayed``), and the person sees one message and one reply. A real
browser (the system Chromium against daphne, a Celery worker in a thread, the offline
brain). alice owns agent ada (team Core)."""

from __future__ import annotations

import pytest

from mailbox.models import MailboxItem
from markus.agents.models import ChatMessage, ChatSession
from tests.attention.conftest import celery_worker, wake_on_enqueue  # noqa: F401 (fixtures)

from .test_browser_work_chat import signed_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TIMEOUT = 30_000


def test_a_message_whose_answer_was_lost_is_sent_again_with_its_key_and_stored_once(
    daphne_server, browser, celery_worker, alice, agent
):
    base = daphne_server.url
    errors: list[str] = []
    session = ChatSession.objects.create(agent=agent, user=alice, title="Release")
    keys: list[str | None] = []
    replayed: list[str | None] = []

    def lose_the_first_answer(route, request):
        if request.method != "POST":
            route.continue_()
            return
        keys.append(request.headers.get("idempotency-key"))
        if len(keys) == 1:
            route.fetch()  # the server stores the message and answers it...
            route.abort("connectionreset")  # ...but the answer never reaches the page
        else:
            response = route.fetch()
            replayed.append(response.headers.get("idempotent-replayed"))
            route.fulfill(response=response)

    page = signed_in(browser, base, alice, errors)
    page.route(f"{base}/api/agents/{agent.id}/chat", lose_the_first_answer)
    page.goto(f"{base}/agents/{agent.id}/chat/?session={session.id}")
    page.wait_for_selector("#chat-live[data-live=on]", timeout=TIMEOUT)
    page.fill("#chat-text", "Is the release ready?")
    page.press("#chat-text", "Enter")
    page.wait_for_selector(".msg-assistant >> text=Is the release ready?", timeout=TIMEOUT)
    page.wait_for_selector("#chat-reply", state="hidden", timeout=TIMEOUT)

    assert len(keys) == 2 and keys[0] == keys[1] and keys[0] and len(keys[0]) == 32
    assert replayed == ["true"]
    assert MailboxItem.objects.filter(agent=agent, source_type="human_chat").count() == 1
    roles = list(ChatMessage.objects.filter(session=session).values_list("role", flat=True))
    assert roles.count("user") == 1 and roles.count("assistant") == 1
    assert page.locator(".msg-user >> text=Is the release ready?").count() == 1
    assert [e for e in errors if "ERR_CONNECTION_RESET" not in e] == []
