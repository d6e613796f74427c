"""Retry in the mind view only where it makes sense, and only after a confirmation.

A finished chat is not retryable: a retry would queue a copy and the agent would answer
the chat again. Retry is offered (and accepted by the server) for an item whose last
attempt failed, a dropped item (a fresh copy) and a deferred one not parked for an
approval (resurfaced now); everything else answers 409 with why, whatever the page
showed. The button asks first (``hx-confirm``).
"""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.utils import timezone

from attention.models import AgentActivity
from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import Status

from .conftest import enqueue_chat

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def retry_url(agent_id: str, item_id: str) -> str:
    return f"/agents/{agent_id}/mind/items/{item_id}/retry/"


def finished(item: MailboxItem, *, success: bool | None) -> MailboxItem:
    """Completed, with an activity that succeeded or failed (``None``: no activity)."""
    now = timezone.now()
    MailboxItem.objects.filter(id=item.id).update(status=Status.COMPLETED, started_at=now, completed_at=now)
    if success is not None:
        AgentActivity.objects.create(
            agent_id=item.agent_id,
            mailbox_item_id=item.id,
            type="chat",
            label="answering",
            started_at=now,
            ended_at=now,
            success=success,
        )
    item.refresh_from_db()
    return item


def retry_button(html: str, agent_id: str, item_id: str) -> str | None:
    match = re.search(r"<button[^>]*" + re.escape(retry_url(agent_id, item_id)) + r"[^>]*>", html)
    return match.group(0) if match else None


def page(client: Client, agent_id: str) -> str:
    return client.get(f"/agents/{agent_id}/mind/").content.decode()


def test_a_finished_chat_offers_no_retry_and_the_server_refuses_it(alice, agent):
    item = finished(enqueue_chat(agent.id, "What's the status?"), success=True)
    client = signed_in(alice)
    assert retry_button(page(client, agent.id), agent.id, item.id) is None
    refused = client.post(retry_url(agent.id, item.id), **HTMX)
    assert refused.status_code == 409
    text = refused.content.decode()
    assert f"{item.id} completed" in text and "only a failed, dropped or deferred item can be retried" in text
    assert MailboxItem.objects.filter(metadata__retryOf=item.id).count() == 0
    assert MailboxItem.objects.filter(agent_id=agent.id).count() == 1
    # Without htmx the refusal is the same 409, as plain text.
    plain = client.post(retry_url(agent.id, item.id))
    assert plain.status_code == 409 and "only a failed, dropped or deferred item" in plain.content.decode()


def test_an_item_completed_without_any_activity_is_not_retryable(alice, agent):
    item = finished(enqueue_chat(agent.id, "Hi"), success=None)
    client = signed_in(alice)
    assert retry_button(page(client, agent.id), agent.id, item.id) is None
    assert client.post(retry_url(agent.id, item.id), **HTMX).status_code == 409


def test_an_item_whose_attempt_failed_offers_retry_with_a_confirmation(alice, agent):
    item = finished(enqueue_chat(agent.id, "Deploy it"), success=False)
    client = signed_in(alice)
    button = retry_button(page(client, agent.id), agent.id, item.id)
    assert button is not None and "hx-confirm=" in button
    done = client.post(retry_url(agent.id, item.id), **HTMX)
    assert done.status_code == 200
    copy = MailboxItem.objects.get(metadata__retryOf=item.id)
    assert copy.status == Status.QUEUED
    # A second click while the copy is still in hand: 409, no second copy.
    again = client.post(retry_url(agent.id, item.id), **HTMX)
    assert again.status_code == 409 and f"retried already as {copy.id}" in again.content.decode()
    assert MailboxItem.objects.filter(metadata__retryOf=item.id).count() == 1


def test_a_dropped_item_offers_retry_with_a_confirmation(alice, agent):
    item = enqueue_chat(agent.id, "Status?")
    assert lifecycle.drop(item.id, reason="test", from_statuses=[Status.QUEUED])
    button = retry_button(page(signed_in(alice), agent.id), agent.id, item.id)
    assert button is not None and "hx-confirm=" in button


def test_a_deferred_item_offers_retry_unless_it_waits_for_an_approval(alice, agent):
    item = enqueue_chat(agent.id, "Later")
    MailboxItem.objects.filter(id=item.id).update(status=Status.DEFERRED)
    client = signed_in(alice)
    button = retry_button(page(client, agent.id), agent.id, item.id)
    assert button is not None and "hx-confirm=" in button
    MailboxItem.objects.filter(id=item.id).update(marks={"waitingForApproval": True, "approvalId": "apr_1"})
    assert retry_button(page(client, agent.id), agent.id, item.id) is None
    refused = client.post(retry_url(agent.id, item.id), **HTMX)
    assert refused.status_code == 409 and "apr_1" in refused.content.decode()


def test_queued_processing_and_merged_items_offer_no_retry(alice, agent):
    queued = enqueue_chat(agent.id, "One")
    processing = enqueue_chat(agent.id, "Two")
    MailboxItem.objects.filter(id=processing.id).update(status=Status.PROCESSING, started_at=timezone.now())
    html = page(signed_in(alice), agent.id)
    assert retry_button(html, agent.id, queued.id) is None
    assert retry_button(html, agent.id, processing.id) is None
