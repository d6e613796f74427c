"""The chat box after Pause and Resume (issue 37, point 5), in a real browser: the item
is answered by a new run, whose deltas carry a new ``run``; the box starts the reply over
instead of showing the first partial reply followed by the new one, and ``done`` leaves
the stored reply. The server's stream is stubbed in the page (``fetch``), as
attention.chat sends it.

alice owns agent ada."""

from __future__ import annotations

import json

import pytest

from .test_browser_work_chat import signed_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# window.fetch answering the chat with the given server-sent events.
STUB = """(events) => { window.fetch = async () => new Response(
  new ReadableStream({start(c) { c.enqueue(new TextEncoder().encode(events)); c.close(); }}),
  {status: 200, headers: {"Content-Type": "text/event-stream"}}); }"""


def sse(*events: tuple[str, dict]) -> str:
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)


FIRST = ("delta", {"text": "Shipping on Fri", "run": "act_first"})
SECOND = [("delta", {"text": "Shipping ", "run": "act_second"}), ("delta", {"text": "on Friday.", "run": "act_second"})]


@pytest.mark.parametrize("done", [False, True])
def test_a_new_run_starts_the_reply_over(daphne_server, browser, alice, agent, done):
    errors: list[str] = []
    page = signed_in(browser, daphne_server.url, alice, errors)
    page.goto(f"{daphne_server.url}/agents/{agent.id}/mind/")
    ending = [("done", {"reply": "Shipping on Friday.", "mailboxItemId": "mbx_1", "sessionId": "s"})] if done else []
    page.evaluate(STUB, sse(("queued", {"mailboxItemId": "mbx_1", "sessionId": "s"}), FIRST, *SECOND, *ending))
    page.fill("#chat-text", "When do we ship?")
    page.click("#chat button[type=submit]")
    page.wait_for_selector("#chat-reply .chat-pair.done")
    assert page.inner_text("#chat-reply .chat-answer") == "Shipping on Friday."
