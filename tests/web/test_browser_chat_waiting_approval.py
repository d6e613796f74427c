"""The chat says when the agent waits for the person (issue 37, point 3): while a chat
item of the session shown is parked for an approval, the chat page shows "waiting for
your approval" with a link to it on /approvals/, live, and clears it once answered. At
a desktop's width and a phone's.

alice owns agent ada (team Core) and is the one asked."""

from __future__ import annotations

import pytest

from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue
from notifications.services import approval_create, approval_respond

from .test_browser_work_chat import signed_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TIMEOUT = 20_000


def _parked_chat(agent, alice):
    """A chat message of alice's main session whose tool call waits for her approval
    (the loop parks it so: ``settle.park``)."""
    item = mailbox_enqueue(
        agent_id=agent.id,
        source_type=MailboxType.HUMAN_CHAT,
        payload={"summary": "push it", "content": "Push the release branch"},
        metadata={"senderId": str(alice.pk), "senderName": alice.username, "senderRole": "user"},
    )
    approval = approval_create(
        user=alice, title=f"{agent.name} asks to call git_push on git", agent=agent, mailbox_item=item
    )
    marks = {**item.marks, "waitingForApproval": True, "approvalId": approval.id}
    MailboxItem.objects.filter(id=item.id).update(status=Status.DEFERRED, marks=marks)
    lifecycle.emit_item(MailboxItem.objects.get(id=item.id))  # what the park sends
    return approval


@pytest.mark.parametrize("width", [1280, 390])
def test_the_chat_says_it_waits_for_your_approval_live_and_clears_it_when_answered(
    daphne_server, browser, alice, agent, width, test_output
):
    base = daphne_server.url
    errors: list[str] = []
    page = signed_in(browser, base, alice, errors, viewport={"width": width, "height": 900})
    page.goto(f"{base}/agents/{agent.id}/chat/")
    page.wait_for_selector("#chat-live[data-live=on]", timeout=TIMEOUT)
    assert page.locator("#chat-waiting").is_hidden()
    approval = _parked_chat(agent, alice)
    link = page.locator(f'#chat-waiting a[href="/approvals/#approval-{approval.id}"]')
    link.wait_for(timeout=TIMEOUT)
    assert "waiting for your approval" in page.locator("#chat-waiting").inner_text()
    assert page.evaluate("document.documentElement.scrollWidth") <= width  # no horizontal scroll
    page.screenshot(path=str(test_output / f"chat-waiting-approval-{width}.png"), full_page=True)
    page.reload()  # the page says it too, before any event
    link.wait_for(timeout=TIMEOUT)
    approval_respond(user=alice, approval_id=approval.id, selected_option="approve")
    page.wait_for_selector("#chat-waiting", state="hidden", timeout=TIMEOUT)
    assert errors == []
