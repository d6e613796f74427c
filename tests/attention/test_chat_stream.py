"""The chat as server-sent events: ``delta`` events as the reply is produced, then one
``done`` with the stored reply (the JSON of the plain answer); the refusals (a bad
``Accept``, a session that is not the agent's) stay plain JSON errors. One test runs
the whole path over HTTP against ``manage.py up`` with the offline brain."""

from __future__ import annotations

import dataclasses
import http.client
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient

from attention.chat import DELTA_EVENT, WORDS_PER_DELTA, wants_stream
from mailbox.models import MailboxItem
from markus.agents.models import ChatMessage
from markus.agents.services import user_token_create
from markus.core.events import agent_group, send_event_on_commit
from markus.llm.base import word_chunks
from markus.llm.scripted import ScriptedProvider, Turn

ROOT = Path(__file__).resolve().parents[2]
SSE = "text/event-stream"


def parse_sse(text: str) -> list[tuple[str, dict[str, Any]]]:
    """The ``(event, data)`` pairs of an event stream."""
    events = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            events.append((fields["event"], json.loads(fields.get("data", "{}"))))
    return events


def post_chat(user, agent_id: str, body: dict[str, Any], accept: str = SSE) -> tuple[int, str, str]:
    """POST the chat through the ASGI stack in one event loop and read the whole
    answer: (status, content type, body text)."""
    _, raw = user_token_create(user)

    async def go() -> tuple[int, str, str]:
        r = await AsyncClient().post(
            f"/api/agents/{agent_id}/chat",
            json.dumps(body),
            content_type="application/json",
            headers={"authorization": f"Token {raw}", "accept": accept},
        )
        if r.streaming:
            text = b"".join([chunk async for chunk in r.streaming_content]).decode()
        else:
            text = r.content.decode()
        return r.status_code, r["Content-Type"], text

    return async_to_sync(go)()


# ---------------------------------------------------------------------------- the pieces


@pytest.mark.parametrize(
    "accept,expected",
    [
        ("", False),
        ("application/json", False),
        ("*/*", False),
        ("text/event-stream", True),
        ("text/html, text/event-stream;q=0.9", True),
        ("text/html", None),
        ("application/xml, text/plain", None),
    ],
)
def test_accept_picks_the_stream_the_json_or_neither(accept, expected):
    assert wants_stream(accept) is expected


@pytest.mark.parametrize("text", ["one", "one two three four five six seven", "  lead and\ttrail  ", "a\n\nb c d"])
def test_word_chunks_join_back_to_the_text(text):
    chunks = word_chunks(text, WORDS_PER_DELTA)
    assert "".join(chunks) == text and all(chunks)
    assert len(chunks) == max(1, -(-len(text.split()) // 3))


# ---------------------------------------------------------------------------- refusals


@pytest.mark.pg
@pytest.mark.django_db(transaction=True)
def test_an_accept_that_is_neither_json_nor_the_stream_is_a_406_and_enqueues_nothing(agent, alice):
    status, ctype, body = post_chat(alice, agent.id, {"text": "hi"}, accept="text/html")
    assert status == 406 and ctype.startswith("application/json")
    assert "text/event-stream" in json.loads(body)["detail"]
    assert not MailboxItem.objects.filter(agent=agent).exists()


@pytest.mark.pg
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "body", [{"text": "hi", "sessionId": "ses_nope"}, {"text": ""}, {"text": "hi", "sessionId": 4}]
)
def test_a_streamed_chat_with_a_bad_body_is_a_plain_400(agent, alice, body):
    status, ctype, text = post_chat(alice, agent.id, body)
    assert status == 400 and ctype.startswith("application/json") and json.loads(text)["detail"]


@pytest.mark.pg
@pytest.mark.django_db(transaction=True)
def test_a_streamed_chat_nobody_answers_ends_with_done_pending(agent, alice, monkeypatch, settings):
    monkeypatch.setitem(settings.MARKUS, "CHAT_TIMEOUT_S", 0.3)
    status, ctype, text = post_chat(alice, agent.id, {"text": "anyone there?"})
    assert status == 200 and ctype.startswith(SSE)
    events = parse_sse(text)
    assert [e for e, _ in events] == ["queued", "done"]
    done = events[-1][1]
    assert done["pending"] is True and done["reply"] is None and done["mailboxItemId"] == events[0][1]["mailboxItemId"]


# ---------------------------------------------------------------------------- through the loop


class SilentProvider(ScriptedProvider):
    """A provider that announces no delta (answers whole, like a non-streaming one)."""

    def complete(self, *, system, messages, tools, context):
        quiet = dataclasses.replace(context, on_delta=None)
        return super().complete(system=system, messages=messages, tools=tools, context=quiet)


@pytest.mark.pg
def test_a_reply_from_a_provider_that_does_not_stream_comes_as_word_deltas_then_done(celery_worker, agent, alice):
    from markus.llm.base import set_provider_override

    set_provider_override(SilentProvider([Turn(text="The release is on Friday at noon, after the review.")]))
    try:
        status, ctype, text = post_chat(alice, agent.id, {"text": "when is the release?"})
    finally:
        set_provider_override(None)
    assert status == 200 and ctype.startswith(SSE)
    events = parse_sse(text)
    kinds = [e for e, _ in events]
    assert kinds[0] == "queued" and kinds[-1] == "done" and kinds.count("done") == 1
    deltas = [d["text"] for e, d in events if e == "delta"]
    done = events[-1][1]
    assert "".join(deltas) == done["reply"] == "The release is on Friday at noon, after the review."
    assert deltas == word_chunks(done["reply"], WORDS_PER_DELTA) and len(deltas) > 1  # a few words each
    stored = ChatMessage.objects.get(session_id=done["sessionId"], role="assistant")
    assert stored.content == done["reply"] and done["mailboxItemId"] == events[0][1]["mailboxItemId"]


class DeltaProvider(ScriptedProvider):
    """Streams its turn's text in the given pieces through the loop's delta hook (which
    keeps a person's chat's pieces and sends them as ``agent:delta``), after a delta of
    another item sent straight to the agent's group. Kept, the pieces reach the stream
    the same whether it receives them live or, when the reply was stored before it
    first read, from the kept ones."""

    def __init__(self, agent_id: str, pieces: list[str]) -> None:
        super().__init__([Turn(text="".join(pieces))])
        self.agent_id, self.pieces = agent_id, pieces

    def complete(self, *, system, messages, tools, context):
        send_event_on_commit(
            agent_group(self.agent_id),
            DELTA_EVENT,
            {"agentId": self.agent_id, "mailboxItemIds": ["mbx_other"], "text": "X"},
        )
        for piece in self.pieces:
            context.on_delta(piece)
        quiet = dataclasses.replace(context, on_delta=None)  # no second stream of the same text
        return super().complete(system=system, messages=messages, tools=tools, context=quiet)


@pytest.mark.pg
def test_the_items_deltas_are_forwarded_as_they_come_and_others_are_not(celery_worker, agent, alice):
    from markus.llm.base import set_provider_override

    pieces = ["Shipping ", "on ", "Fri", "day."]
    set_provider_override(DeltaProvider(agent.id, pieces))
    try:
        status, _, text = post_chat(alice, agent.id, {"text": "when?"})
    finally:
        set_provider_override(None)
    events = parse_sse(text)
    assert status == 200 and [e for e, _ in events] == ["queued", "delta", "delta", "delta", "delta", "done"]
    assert [d["text"] for e, d in events if e == "delta"] == pieces  # as sent: no re-chunking, no "X"
    assert events[-1][1]["reply"] == "Shipping on Friday."


@pytest.mark.django_db(transaction=True)
def test_a_reply_stored_before_the_streams_first_read_comes_as_its_kept_pieces_then_done(agent):
    """The worker may answer before the stream first reads (the stream found the reply
    stored, and the live deltas wait unread in its channel): the pieces come from the
    kept ones, each with its id, not the reply cut again into word deltas."""
    from attention.chat import _stream
    from attention.replies import chat_group
    from markus.agents.chat_stream import log_delta
    from markus.agents.services import main_session
    from tests.listening import listening
    from tests.web.conftest import enqueue_chat

    item = enqueue_chat(agent.id, "when?")
    pieces = ["Shipping ", "on ", "Fri", "day."]
    for piece in pieces:
        log_delta(item, piece, "act_1")
    session = main_session(agent.id)
    ChatMessage.objects.create(session=session, role="assistant", content="".join(pieces), reply_to=item.id)

    async def go() -> str:
        async def release() -> None:
            pass

        async with listening(agent_group(agent.id), chat_group(agent.id)) as channel:
            return "".join([chunk async for chunk in _stream(item.id, session.id, channel, 2.0, 0, release)])

    text = async_to_sync(go)()
    events = parse_sse(text)
    assert [e for e, _ in events] == ["queued", "delta", "delta", "delta", "delta", "done"]
    assert [d["text"] for e, d in events if e == "delta"] == pieces
    assert events[-1][1]["reply"] == "Shipping on Friday."
    ids = [line.split(": ", 1)[1] for line in text.splitlines() if line.startswith("id: ")]
    assert ids == [f"{item.id}:{n}" for n in range(6)]


# ---------------------------------------------------------------------------- over HTTP against `up`


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_sse_over_http_against_up_streams_deltas_before_done(tmp_path):
    port = _free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "markus.settings",
        "MARKUS_DATA_DIR": str(tmp_path),
        "MARKUS_LLM_PROVIDER": "offline",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'sse.sqlite3'}",
    }
    env.pop("REDIS_URL", None)
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "-v0"], env=env, check=True, cwd=ROOT)
    subprocess.run([*manage, "demo"], env=env, check=True, cwd=ROOT, capture_output=True)
    token = subprocess.run(
        [*manage, "drf_create_token", "admin"], env=env, check=True, cwd=ROOT, capture_output=True, text=True
    ).stdout.split()[2]
    server = subprocess.Popen(
        [*manage, "up", "--port", str(port)], env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/schema/", timeout=5)
                break
            except OSError:
                assert server.poll() is None, server.stderr.read().decode()[-2000:] if server.stderr else ""
                assert time.monotonic() < deadline, "server did not come up"
                time.sleep(0.3)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        text = "Hello Ada, please tell me how the release preparations are going this week"
        conn.request(
            "POST",
            "/api/agents/ada/chat",
            body=json.dumps({"text": text}),
            headers={"Authorization": f"Token {token}", "Accept": SSE, "Content-Type": "application/json"},
        )
        response = conn.getresponse()
        assert response.status == 200 and response.getheader("Content-Type", "").startswith(SSE)
        # Read event by event, as a browser's EventSource does, until done.
        events: list[tuple[str, dict[str, Any]]] = []
        buffer = b""
        while not events or events[-1][0] != "done":
            chunk = response.read1(4096)
            assert chunk, f"the stream ended before done: {events}"
            buffer += chunk
            while b"\n\n" in buffer:
                block, buffer = buffer.split(b"\n\n", 1)
                events += parse_sse(block.decode() + "\n\n")
        conn.close()
        kinds = [e for e, _ in events]
        assert kinds[0] == "queued" and kinds[-1] == "done"
        deltas = [d["text"] for e, d in events if e == "delta"]
        assert len(deltas) > 1, events
        done = events[-1][1]
        assert text in done["reply"] and "offline brain" in done["reply"]
        assert "".join(deltas) == done["reply"]
        # The reply is stored: the session's messages list it, read back over HTTP.
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/agents/ada/sessions/{done['sessionId']}/messages?limit=1",
            headers={"Authorization": f"Token {token}"},
        )
        page = json.loads(urllib.request.urlopen(req, timeout=10).read())
        assert page["messages"][0]["content"] == done["reply"]
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=5)
