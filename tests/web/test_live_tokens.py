"""The mind view shows the turn being produced: each ``agent:delta`` of the agent's
group becomes an htmx out-of-band append to a live line of the item, escaped, sent
without a database query or a thread hop; a new turn starts a new line and the focus
ending clears them. One test runs the real loop with a streaming scripted turn."""

from __future__ import annotations

import re

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.db import database_sync_to_async

from markus.agents.services import user_token_create
from markus.core.events import agent_group, send_event_on_commit
from markus.llm.scripted import Turn
from markus.web import consumers
from markus.web.live import MindStream
from markus.web.mind import MindFilters
from tests.attention.conftest import celery_worker, scripted, wake_on_enqueue  # noqa: F401 (fixtures)

from .conftest import enqueue_chat, session_cookie, ws_connect
from .test_browser import enqueue_over_api, open_mind

pytestmark = pytest.mark.django_db(transaction=True)

APPEND = re.compile(r'hx-swap-oob="beforeend:#live-turn-([^"]+)"')


def delta(agent_id: str, item_id: str, activity_id: str, turn: int, text: str) -> dict:
    return {"agentId": agent_id, "mailboxItemIds": [item_id], "activityId": activity_id, "turn": turn, "text": text}


async def receive_until(communicator, pattern: str) -> str:
    """Frames until one matches the regex ``pattern``; returns them all, joined."""
    got = []
    while True:
        text = await communicator.receive_from(timeout=20)
        got.append(text)
        if re.search(pattern, text):
            return "".join(got)


@pytest.mark.pg  # also through the Redis channel layer, where events arrive encoded
def test_deltas_are_appended_in_order_escaped_and_cost_no_query(alice, agent, monkeypatch):
    hops: list[object] = []

    def counted(fn):  # the consumer's thread hops (each one a database call)
        hops.append(fn)
        return database_sync_to_async(fn)

    monkeypatch.setattr(consumers, "database_sync_to_async", counted)
    cookie = session_cookie(alice)
    send = sync_to_async(send_event_on_commit)

    async def go():
        communicator, connected = await ws_connect(f"/ws/agents/{agent.id}/mind/", cookie=cookie)
        assert connected
        try:
            await communicator.receive_from(timeout=10)  # the refresh
            item = await database_sync_to_async(enqueue_chat)(agent.id, "Write a haiku")
            await receive_until(communicator, f'id="item-{item.id}"')
            before = len(hops)
            frames = []
            for turn, text in [(1, "Old pond, "), (1, "<script>alert(1)</script>"), (1, " & frog"), (2, "Splash.")]:
                await send(agent_group(agent.id), "agent:delta", delta(agent.id, item.id, "act1", turn, text))
                frames.append(await communicator.receive_from(timeout=10))
            during = len(hops) - before
            await send(agent_group(agent.id), "agent:focus", {"agentId": agent.id, "focus": None, "mailboxDepth": 0})
            after = await receive_until(communicator, 'id="mind-header"')
            return item, frames, during, after
        finally:
            await communicator.disconnect()

    item, frames, during, after = async_to_sync(go)()
    assert during == 0
    first, second, third, fourth = frames
    # The first delta of a turn creates its line in the item's live area, with the text.
    assert f'hx-swap-oob="beforeend:#live-{item.id}"' in first
    assert 'id="live-turn-act1-1"' in first and "Old pond, " in first
    # The next ones append to that line, escaped: markup stays text.
    assert APPEND.findall(second) == ["act1-1"] and APPEND.findall(third) == ["act1-1"]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in second and "<script>" not in second
    assert "&amp; frog" in third
    # A new turn is a new line.
    assert 'id="live-turn-act1-2"' in fourth and "Splash." in fourth and "act1-1" not in fourth
    # The focus ended: the live lines go.
    assert f'<div id="live-{item.id}" class="live-turns" hx-swap-oob="innerHTML"></div>' in after


def test_the_item_holds_an_empty_live_area_and_unknown_items_get_nothing(agent):
    item = enqueue_chat(agent.id, "Hello")
    stream = MindStream(agent.id, MindFilters())
    assert f'<div id="live-{item.id}" class="live-turns"' in stream.refresh()
    assert stream.apply({"type": "agent:delta", **delta(agent.id, "not-on-the-page", "a", 1, "hi")}) == ""
    assert stream.apply({"type": "agent:delta", **delta(agent.id, item.id, "a", 1, "")}) == ""
    assert "hi" in stream.apply({"type": "agent:delta", **delta(agent.id, item.id, "a", 1, "hi")})
    # The focus moving on clears the live area once.
    html = stream.apply({"type": "agent:attention", "agentId": agent.id, "state": "idle", "currentFocus": None})
    assert f'id="live-{item.id}" class="live-turns" hx-swap-oob="innerHTML"' in html
    html = stream.apply({"type": "agent:attention", "agentId": agent.id, "state": "idle", "currentFocus": None})
    assert f"live-{item.id}" not in html


def test_the_real_loop_streams_a_chat_turn_to_the_mind_view(alice, agent, celery_worker, scripted):
    words = "Five small words to stream, then done."
    scripted(Turn(text=f"{words}", chunk_delay=0.05))
    cookie = session_cookie(alice)

    async def go():
        communicator, connected = await ws_connect(f"/ws/agents/{agent.id}/mind/", cookie=cookie)
        assert connected
        try:
            await communicator.receive_from(timeout=10)
            item = await database_sync_to_async(enqueue_chat)(agent.id, "Say something")
            # Until the focus has ended (the live area cleared).
            frames = await receive_until(
                communicator, f'id="live-{item.id}" class="live-turns" hx-swap-oob="innerHTML"'
            )
            return item, frames
        finally:
            await communicator.disconnect()

    item, frames = async_to_sync(go)()
    lines = set(re.findall(r'id="live-turn-([^"]+)"', frames))
    assert len(lines) == 1
    appends = APPEND.findall(frames)
    assert len(appends) >= 2 and set(appends) == lines  # more than one piece, on the line
    shown = "".join(re.findall(r'hx-swap-oob="beforeend:#live-[^"]+">(?:<p [^>]*>)?([^<]*)<', frames))
    assert shown.strip() == words
    # Every piece came while the item was still being worked on.
    done = re.search(rf'id="item-{item.id}-head"[^>]*\s+[^>]*data-status="completed"', frames)
    last_piece = max(m.end() for m in APPEND.finditer(frames))
    assert done is None or last_piece < done.start()


@pytest.mark.browser
def test_the_browser_shows_the_turn_while_it_streams(daphne_server, browser, celery_worker, scripted, alice, agent):
    words = "Checking the build logs now, one step at a time, all green."
    scripted(Turn(text=f"{words}", chunk_delay=0.25))
    token = user_token_create(alice)[1]
    errors: list[str] = []
    page = open_mind(browser, daphne_server.url, agent, errors)
    item_id = enqueue_over_api(page, daphne_server.url, agent, token, "Is the build green?", "Is the build green?")
    page.locator(f"#item-{item_id}-head").click()  # open the item
    line = page.locator(f"#live-{item_id} .live-turn")
    line.filter(has_text="Checking the build").wait_for(timeout=15_000)
    assert line.count() == 1 and line.get_attribute("data-turn") == "1"
    # The focus ends: the live line goes, the item is done, the page never reloaded.
    page.locator(f'#item-{item_id}-head[data-status="completed"]').wait_for(timeout=20_000)
    page.locator('#mind-header .state[data-state="idle"]').wait_for(timeout=20_000)
    page.locator(f"#live-{item_id} .live-turn").wait_for(state="detached", timeout=10_000)
    assert page.evaluate("window.__sameDocument") is True
    assert errors == []
    page.close()


# ------------------------------------------------------------------ demo mode: think time


def _offline_chat(think_ms: int, cancelled) -> tuple[list[str], object]:
    from django.conf import settings
    from django.test import override_settings

    from markus.llm.base import CallContext
    from markus.llm.offline import OfflineProvider

    pieces: list[str] = []
    context = CallContext(
        scenario="chat", agent_name="Ada", item={"content": "hello there"}, cancelled=cancelled, on_delta=pieces.append
    )
    with override_settings(MARKUS={**settings.MARKUS, "OFFLINE_THINK_MS": think_ms}):
        provider = OfflineProvider()
        local = provider.local
        response = provider.complete(
            system="s", messages=[{"role": "user", "content": "hello there"}], tools=[], context=context
        )
    return pieces, (response, local)


def test_without_think_time_the_offline_brain_answers_at_once_and_never_polls():
    polls: list[int] = []
    pieces, (response, local) = _offline_chat(0, lambda: polls.append(1) or False)
    assert local is True  # answered at once: no lease keeper, activity written with the outcome
    assert polls == []
    assert "".join(pieces) == response.text


def test_with_think_time_the_turn_streams_its_words_and_checks_for_a_pause_between_steps():
    polls: list[int] = []
    pieces, (response, local) = _offline_chat(200, lambda: polls.append(1) or False)
    assert local is False  # it takes time: the loop keeps the lease and shows the activity live
    assert "".join(pieces) == response.text
    assert len(pieces) > 3
    assert len(polls) >= len(pieces)  # a check before every streamed piece at least


def test_a_pause_during_the_think_time_cancels_the_turn():
    from markus.llm.base import LLMCancelled

    polls: list[int] = []

    def cancelled() -> bool:
        polls.append(1)
        return len(polls) > 2

    with pytest.raises(LLMCancelled):
        _offline_chat(60_000, cancelled)  # a minute of thinking, stopped at the third check
    assert len(polls) == 3
