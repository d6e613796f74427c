"""The mind page's live stream: the events the loop really sends, turned into htmx
swaps rendered from the same partials as the page. Updating a stale page with them
gives what a reload would show."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from attention import records
from attention.lease import fenced, lease_take
from attention.models import AttentionState
from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import emit_item, mailbox_enqueue
from markus.web.live import MindStream
from markus.web.mind import MindFilters

from .conftest import enqueue_chat

pytestmark = pytest.mark.django_db


@pytest.fixture
def events(sent_events, django_capture_on_commit_callbacks):
    """``with events() as got:`` runs the block, commits, and yields the events sent."""
    from contextlib import contextmanager

    @contextmanager
    def capture():
        sent_events.clear()
        got: list[dict] = []
        with django_capture_on_commit_callbacks(execute=True):
            yield got
        got.extend(event for _, event in sent_events)

    return capture


def apply_all(stream: MindStream, events: list[dict]) -> str:
    return "".join(stream.apply(e) for e in events)


def head(html: str, item_id: str) -> str:
    match = re.search(rf'<summary id="item-{item_id}-head".*?</summary>', html, re.S)
    assert match, f"no head for {item_id}"
    return match.group(0).replace(' hx-swap-oob="true"', "")


def detail(html: str, item_id: str) -> str:
    match = re.search(rf'<div id="item-{item_id}-detail".*?</ul>', html, re.S)
    assert match, f"no detail for {item_id}"
    return match.group(0).replace(' hx-swap-oob="true"', "")


def pick_and_focus(agent_id: str):
    lease = lease_take(agent_id)
    item = lifecycle.claim_next(agent_id=agent_id, epoch=lease.epoch)
    records.enter_state(lease, AttentionState.FOCUSED, item)
    with fenced(lease) as tx:
        records.record_decision(tx, item=item, decision_type="pick", reasoning="Idle — picked from queue")
    return lease, item


def test_a_new_item_is_inserted_once_then_swapped_in_place(agent, events):
    stream = MindStream(agent.id, MindFilters())
    assert 'id="timeline-body" hx-swap-oob="true"' in stream.refresh()
    with events() as got:
        item = enqueue_chat(agent.id, "Status?")
    html = apply_all(stream, got)
    assert html.count('hx-swap-oob="afterbegin:#timeline-items"') == 1 and f'id="item-{item.id}"' in html
    assert 'id="queue-depth">1<' in html

    with events() as got:
        pick_and_focus(agent.id)
    html = apply_all(stream, got)
    assert "afterbegin" not in html
    assert f'<summary id="item-{item.id}-head" class="item-head" hx-swap-oob="true"' in html
    assert 'data-state="focused"' in html and "Focused on:" in html and "Status?" in html
    assert '<span class="badge decision-pick">pick</span>' in html


def test_stale_page_plus_events_equals_a_fresh_page(agent, mind_client, events):
    first = enqueue_chat(agent.id, "First")
    stale = mind_client.get(f"/agents/{agent.id}/mind/").content.decode()
    stream = MindStream(agent.id, MindFilters())
    stream.refresh()
    with events() as got:
        second = enqueue_chat(agent.id, "Second")
        lease, item = pick_and_focus(agent.id)
        lifecycle.complete(item.id, epoch=lease.epoch, fenced=True)
        records.enter_state(lease, AttentionState.IDLE)
    live = apply_all(stream, got)
    fresh = mind_client.get(f"/agents/{agent.id}/mind/").content.decode()
    assert head(stale, first.id) != head(fresh, first.id)  # the page did go stale
    for one in (first, second):
        assert head(live, one.id) == head(fresh, one.id)
        assert detail(live, one.id) == detail(fresh, one.id)
    last_header = live[live.rindex('<section id="mind-header"') :]
    last_header = last_header[: last_header.index("</section>")]
    assert 'data-state="idle"' in last_header and 'id="queue-depth">1<' in last_header


def test_an_item_that_leaves_the_status_filter_is_removed(agent, events):
    stream = MindStream(agent.id, MindFilters(statuses=("queued",)))
    stream.refresh()
    with events() as got:
        item = enqueue_chat(agent.id, "Queued for now")
    assert f'id="item-{item.id}"' in apply_all(stream, got)
    with events() as got:
        pick_and_focus(agent.id)
    html = apply_all(stream, got)
    assert f'<details id="item-{item.id}" hx-swap-oob="delete"></details>' in html
    assert f"item-{item.id}-head" not in html


def test_items_outside_the_category_filter_are_not_sent(agent, events):
    stream = MindStream(agent.id, MindFilters(category="system"))
    stream.refresh()
    with events() as got:
        chat = enqueue_chat(agent.id, "Hello")
        beat = mailbox_enqueue(agent_id=agent.id, source_type=MailboxType.HEARTBEAT, payload={"summary": "beat"})
    html = apply_all(stream, got)
    assert f"item-{chat.id}" not in html
    assert f'id="item-{beat.id}"' in html


def test_an_item_older_than_the_first_page_is_swapped_not_inserted(agent, events):
    old = enqueue_chat(agent.id, "Old one")
    MailboxItem.objects.filter(id=old.id).update(queued_at=timezone.now() - timedelta(hours=1))
    enqueue_chat(agent.id, "Newer one")
    enqueue_chat(agent.id, "Newest one")
    stream = MindStream(agent.id, MindFilters(), limit=2)
    stream.refresh()
    assert old.id not in stream.known
    with events() as got:
        MailboxItem.objects.filter(id=old.id).update(status=Status.DROPPED)
        emit_item(MailboxItem.objects.get(id=old.id))
    html = apply_all(stream, got)
    assert "afterbegin" not in html
    assert f'<summary id="item-{old.id}-head" class="item-head" hx-swap-oob="true"' in html


# ------------------------------------------------------- refusals: a close code and a reason


def _refusal(path: str, *, cookie: bytes | None = None) -> dict:
    """The first thing the server sends on ``path``: accepted, then closed."""
    from asgiref.sync import async_to_sync

    from .conftest import ws_connect

    async def go():
        communicator, connected = await ws_connect(path, cookie=cookie)
        try:
            assert connected  # accepted, so the browser gets the close code, not 1006
            return await communicator.receive_output(timeout=5)
        finally:
            await communicator.disconnect()

    return async_to_sync(go)()


@pytest.mark.django_db(transaction=True)
def test_the_mind_socket_refuses_with_a_close_code_and_a_reason(alice, charlie, agent, agent_with_token):
    from markus.agents.services import agent_create

    from .conftest import session_cookie

    agent_create(name="Zed", owner=charlie, agent_id="zed")
    anonymous = _refusal(f"/ws/agents/{agent.id}/mind/")
    assert (anonymous["type"], anonymous["code"], anonymous["reason"]) == ("websocket.close", 4401, "not signed in")

    foreign = _refusal(f"/ws/agents/{agent.id}/mind/", cookie=session_cookie(charlie))
    missing = _refusal("/ws/agents/no-such-agent/mind/", cookie=session_cookie(alice))
    # A foreign agent answers exactly like a missing one.
    assert (foreign["code"], foreign["reason"]) == (missing["code"], missing["reason"]) == (4404, "no such agent")

    other, raw = agent_with_token
    by_token = _refusal(f"/ws/agents/{agent.id}/mind/?token={raw}")
    assert other.id != agent.id
    assert (by_token["code"], by_token["reason"]) == (4403, "an agent token sees only its own agent")
