"""The chat page resumes a reply stream that dropped (web/chat_stream.js): the POST's
stream ends after one piece without ``done`` (the network went away), the page GETs the
chat with ``Last-Event-ID`` and shows the rest of the reply, once.

alice owns agent ada (team Core); the loop does not run: the reply and its pieces are
put in place by the test, as the loop would have written them."""

from __future__ import annotations

import json

import pytest

from attention.replies import post_chat_reply
from mailbox.registry import MailboxType
from mailbox.services import mailbox_enqueue
from markus.agents import chat_stream
from markus.agents.models import ChatSession

from .test_browser_work_chat import signed_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TIMEOUT = 30_000
PIECES = ["The release ", "is on ", "Friday."]


def _sse(event_id: str, event: str, data: dict) -> str:
    return f"id: {event_id}\nevent: {event}\ndata: {json.dumps(data)}\n\n"


def test_the_chat_page_resumes_a_dropped_reply_stream_with_last_event_id(daphne_server, browser, alice, agent):
    base = daphne_server.url
    errors: list[str] = []
    session = ChatSession.objects.create(agent=agent, user=alice, title="Release")
    item = mailbox_enqueue(
        agent_id=agent.id,
        source_type=MailboxType.HUMAN_CHAT,
        payload={"summary": "When?", "content": "When?"},
        metadata={"senderId": str(alice.pk), "senderRole": "user", "sessionId": session.id},
    )
    for piece in PIECES:
        chat_stream.log_delta(item, piece, "act_1")
    post_chat_reply(agent.id, session.id, "".join(PIECES), answered=[item.id], metadata={})

    resumed: list[str | None] = []
    deltas: list[str] = []

    def drop_after_one_piece(route, request):
        if request.method == "POST":  # the stream as far as it got before the network dropped
            route.fulfill(
                status=200,
                headers={"Content-Type": "text/event-stream"},
                body=_sse(f"{item.id}:0", "queued", {"mailboxItemId": item.id, "sessionId": session.id})
                + _sse(f"{item.id}:1", "delta", {"text": PIECES[0], "run": "act_1"}),
            )
        else:
            resumed.append(request.headers.get("last-event-id"))
            route.continue_()

    page = signed_in(browser, base, alice, errors)
    page.route(f"{base}/api/agents/{agent.id}/chat", drop_after_one_piece)
    page.on("response", lambda r: deltas.append(r.text()) if r.request.method == "GET" and "/chat" in r.url else None)
    page.goto(f"{base}/agents/{agent.id}/chat/?session={session.id}")
    page.wait_for_selector("#chat-live[data-live=on]", timeout=TIMEOUT)
    page.fill("#chat-text", "When?")
    page.press("#chat-text", "Enter")
    for _ in range(100):  # the page waits half a second before it resumes
        if any("event: done" in d for d in deltas):
            break
        page.wait_for_timeout(100)
    page.wait_for_selector(".msg-assistant >> text=The release is on Friday.", timeout=TIMEOUT)

    assert resumed == [f"{item.id}:1"]
    body = next(d for d in deltas if "event: delta" in d)
    assert [e.split("\n")[0] for e in body.strip().split("\n\n")] == [
        f"id: {item.id}:2",
        f"id: {item.id}:3",
        f"id: {item.id}:4",
    ]
    assert errors == []
