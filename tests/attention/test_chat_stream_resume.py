"""A chat's reply stream resumes after a dropped connection: every event of the stream
has an ``id:`` (``<mailboxItemId>:<n>``), and ``GET /api/agents/{id}/chat`` with
``Last-Event-ID`` replays what the client missed, then goes on live, so a reply in
progress is read whole, each piece exactly once, over a flaky network."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.test import AsyncClient

from markus.agents.models import ChatMessage
from markus.agents.services import user_token_create
from markus.llm.scripted import ScriptedProvider, Turn
from tests.listening import listening

SSE = "text/event-stream"
REPLY = " ".join(f"word{n}" for n in range(40))  # 14 deltas of three words


def sse_events(text: str) -> list[dict[str, Any]]:
    """Each event of a stream: ``{"id", "event", "data"}``."""
    events = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            events.append({"id": fields.get("id"), "event": fields["event"], "data": json.loads(fields["data"])})
    return events


async def _read(response, *, until) -> tuple[list[dict[str, Any]], bool]:
    """Read a stream until ``until(events)`` holds; then drop it (close the stream, as a
    network that goes away does). Returns the events and whether the stream ended."""
    buffer, events = "", []
    stream = response.streaming_content
    async for chunk in stream:
        buffer += chunk.decode() if isinstance(chunk, bytes) else chunk
        while "\n\n" in buffer:
            block, buffer = buffer.split("\n\n", 1)
            events += sse_events(block + "\n\n")
            if until(events):
                await stream.aclose()
                return events, False
    return events, True


@pytest.mark.pg
def test_a_stream_dropped_mid_reply_resumes_with_last_event_id_and_gets_the_rest_once(celery_worker, agent, alice):
    from markus.llm.base import set_provider_override

    _, raw = user_token_create(alice)
    auth = {"authorization": f"Token {raw}", "accept": SSE}
    set_provider_override(ScriptedProvider([Turn(text=REPLY, chunk_delay=0.05)]))

    async def go() -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
        client = AsyncClient()
        first = await client.post(
            f"/api/agents/{agent.id}/chat",
            json.dumps({"text": "count for me"}),
            content_type="application/json",
            headers=auth,
        )
        assert first.status_code == 200
        before, ended = await _read(first, until=lambda evs: sum(e["event"] == "delta" for e in evs) == 3)
        assert not ended
        time.sleep(0.3)  # the reply goes on while nobody listens
        again = await client.get(f"/api/agents/{agent.id}/chat", headers={**auth, "last-event-id": before[-1]["id"]})
        after, ended = await _read(again, until=lambda evs: evs[-1]["event"] == "done")
        return before, after, again.status_code

    try:
        before, after, status = async_to_sync(go)()
    finally:
        set_provider_override(None)

    assert status == 200
    item_id = before[0]["data"]["mailboxItemId"]
    assert before[0]["event"] == "queued" and before[0]["id"] == f"{item_id}:0"
    assert after[-1]["event"] == "done" and [e["event"] for e in after].count("done") == 1
    deltas = [e for e in before + after if e["event"] == "delta"]
    ids = [e["id"] for e in before + after]
    assert len(ids) == len(set(ids)), "an event came twice"
    assert [int(i.split(":")[1]) for i in ids] == list(range(len(ids))), "an event is missing"
    assert "".join(d["data"]["text"] for d in deltas) == REPLY == after[-1]["data"]["reply"]
    assert ChatMessage.objects.get(reply_to=item_id).content == REPLY
    assert any(e["event"] == "delta" for e in after), "the rest came on the resumed stream"


# ---------------------------------------------------------------------------- the pieces


def _live(agent_id: str, item_id: str, events: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, Any, Any]]:
    """What ``_follow`` yields after ``after=1`` for a channel that receives ``events``."""
    from attention.chat import _follow
    from attention.replies import chat_group
    from markus.core.events import agent_group, send_event_on_commit

    async def go() -> list[tuple[str, Any, Any]]:
        async with listening(agent_group(agent_id), chat_group(agent_id)) as channel:
            for kind, data in events:
                group = chat_group(agent_id) if kind == "chat:reply" else agent_group(agent_id)
                await sync_to_async(send_event_on_commit)(group, kind, data)
            return [row async for row in _follow(item_id, channel, 2.0, after=1)]

    return async_to_sync(go)()


@pytest.mark.django_db(transaction=True)
def test_a_resumed_stream_skips_what_it_replayed_fills_a_gap_and_takes_the_reply_from_its_event(agent):
    from attention.chat import DELTA_EVENT
    from markus.agents.chat_stream import log_delta
    from tests.web.conftest import enqueue_chat

    item = enqueue_chat(agent.id, "count")
    for text in ["one ", "two ", "three ", "four ", "five"]:
        log_delta(item, text, "act_1")  # seq 1..5; the events of 4 never arrive
    delta = {"agentId": agent.id, "mailboxItemIds": [item.id], "activityId": "act_1", "turn": 1}
    rows = _live(
        agent.id,
        item.id,
        [
            (DELTA_EVENT, {**delta, "text": "three ", "seq": 3}),  # replayed already
            (DELTA_EVENT, {**delta, "text": "five", "seq": 5}),  # 4 comes from the kept pieces
            ("chat:reply", {"agentId": agent.id, "mailboxItemIds": [item.id], "sessionId": "ses_x", "reply": "done"}),
        ],
    )

    assert [(kind, value["text"], seq) for kind, value, seq in rows[:-1]] == [
        ("delta", "two ", 2),
        ("delta", "three ", 3),
        ("delta", "four ", 4),
        ("delta", "five", 5),
    ]
    # The reply is the event's: nothing is stored, the view does not look it up again.
    assert rows[-1] == ("reply", {"reply": "done", "sessionId": "ses_x", "mailboxItemId": item.id}, 5)
    assert not ChatMessage.objects.filter(reply_to=item.id).exists()


def _get(user, agent_id: str, last_event_id: str, accept: str = SSE) -> tuple[int, dict[str, Any]]:
    _, raw = user_token_create(user)

    async def go():
        r = await AsyncClient().get(
            f"/api/agents/{agent_id}/chat",
            headers={"authorization": f"Token {raw}", "accept": accept, "last-event-id": last_event_id},
        )
        if not r.streaming:
            return r.status_code, json.loads(r.content)
        stream = r.streaming_content
        first = await anext(aiter(stream))  # the first event, then the client goes away
        await stream.aclose()
        return r.status_code, {"first": first}

    return async_to_sync(go)()


@pytest.mark.django_db(transaction=True)
def test_only_who_said_the_chat_resumes_it_and_a_bad_id_is_a_400(agent, alice, bob):
    from mailbox.api import sender_metadata
    from tests.web.conftest import enqueue_chat

    class Who:
        user = alice
        auth = None

    item = enqueue_chat(agent.id, "mine", metadata=sender_metadata(Who(), {}))

    assert _get(bob, agent.id, f"{item.id}:0")[0] == 404  # bob sees the agent, not alice's chat
    assert _get(alice, agent.id, "mbx_nope:0")[0] == 404
    status, body = _get(alice, agent.id, "not an id")
    assert status == 400 and "Last-Event-ID" in body["detail"]


@pytest.mark.django_db(transaction=True)
def test_a_resume_past_the_kept_pieces_is_a_409_naming_the_alternatives(agent, alice, monkeypatch):
    from mailbox.api import sender_metadata
    from markus.agents import chat_stream
    from tests.web.conftest import enqueue_chat

    class Who:
        user = alice
        auth = None

    monkeypatch.setattr(chat_stream, "KEEP", 3)
    monkeypatch.setattr(chat_stream, "_memory", chat_stream._Memory())
    item = enqueue_chat(agent.id, "long", metadata=sender_metadata(Who(), {}))
    for n in range(10):
        chat_stream.log_delta(item, f"piece{n} ", "act_1")  # 8, 9, 10 kept

    status, body = _get(alice, agent.id, f"{item.id}:2")
    assert status == 409 and "no longer kept" in body["detail"]
    assert "Accept: application/json" in body["alternatives"]
    status, body = _get(alice, agent.id, f"{item.id}:7")  # 8 is the first it missed: kept
    assert status == 200 and body["first"].decode().startswith(f"id: {item.id}:8\n")
