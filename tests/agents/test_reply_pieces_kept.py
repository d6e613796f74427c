"""The pieces of a chat's reply are kept for a stream that resumes
(``markus.agents.chat_stream``): numbered in the order written, per item, the last
``KEEP`` of them, in this process's memory or in Redis alike; other items' pieces are not
kept at all."""

from __future__ import annotations

import os
import uuid

import pytest

from markus.agents import chat_stream
from tests.web.conftest import enqueue_chat


def _exercise(store, monkeypatch) -> None:
    monkeypatch.setattr(chat_stream, "KEEP", 4)
    assert [store.append("mbx_a", f"a{n}", "act_1") for n in range(6)] == [1, 2, 3, 4, 5, 6]
    assert store.append("mbx_b", "b0", None) == 1  # numbered per item

    kept = store.after("mbx_a", 3)
    assert (kept.last, kept.first) == (6, 3)  # 1 and 2 are no longer kept
    assert [(p.seq, p.text, p.run) for p in kept.pieces] == [(4, "a3", "act_1"), (5, "a4", "act_1"), (6, "a5", "act_1")]
    assert store.after("mbx_a", 6).pieces == []
    nothing = store.after("mbx_none", 0)
    assert (nothing.pieces, nothing.last, nothing.first) == ([], 0, 1)


def test_pieces_are_numbered_per_item_and_the_last_ones_kept_in_memory(monkeypatch):
    _exercise(chat_stream._Memory(), monkeypatch)


@pytest.mark.redis
def test_pieces_are_numbered_per_item_and_the_last_ones_kept_in_redis(monkeypatch):
    url = os.environ.get("REDIS_URL")
    if not url:
        pytest.fail("this test needs Redis (REDIS_URL)")
    store = chat_stream._Redis(url, f"test-{uuid.uuid4().hex}")
    try:
        _exercise(store, monkeypatch)
    finally:
        keys = store.client.keys(f"{store.prefix}:*")
        if keys:
            store.client.delete(*keys)


@pytest.mark.django_db
def test_only_a_persons_chat_keeps_its_pieces(agent, monkeypatch):
    from mailbox.registry import MailboxType
    from mailbox.services import mailbox_enqueue

    monkeypatch.setattr(chat_stream, "_memory", chat_stream._Memory())
    chat = enqueue_chat(agent.id, "hello")
    event = mailbox_enqueue(
        agent_id=agent.id, source_type=MailboxType.SYSTEM_EVENT, payload={"summary": "tick", "content": "tick"}
    )
    assert chat_stream.log_delta(chat, "Hi ", "act_1") == 1
    assert chat_stream.log_delta(event, "noted", "act_2") is None
    assert [p.text for p in chat_stream.deltas_after(chat.id, 0).pieces] == ["Hi "]
