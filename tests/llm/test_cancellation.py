"""Pause/stop aborts an LLM call in flight (issue 13): the provider closes the stream
and raises ``LLMCancelled``, which the loop records as stopped. Against local stubs of
both wire formats, streaming slowly; each stub records what it wrote and when, so the
checks count what it sent after the cancel instead of timing anything."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from attention import loop, services
from attention.models import AgentActivity
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue
from markus.llm.base import CallContext, LLMCancelled, get_provider

from ..attention.conftest import wait_for
from .stub_anthropic import StubAnthropic
from .stub_openai import StubOpenAI

# 2000 word chunks 20 ms apart: forty seconds of answer. "Within a second" is at most
# 50 chunks written after the cancel.
LONG = "word " * 2000
DELAY = 0.02
WITHIN_A_SECOND = 50

STUBS = {"openai": (StubOpenAI, "/v1"), "anthropic": (StubAnthropic, "")}


@pytest.fixture(params=sorted(STUBS))
def slow_server(request, settings, monkeypatch):
    """A stub of one provider's wire format, with the settings pointing at it."""
    stub_class, _ = STUBS[request.param]

    def start(replies):
        stub = stub_class(replies).__enter__()
        request.addfinalizer(lambda: stub.__exit__(None, None, None))
        for key, value in {
            "LLM_PROVIDER": request.param,
            "LLM_BASE_URL": stub.url,
            "LLM_API_KEY": "sk-test",
            "LLM_MODEL": "stub-model",
        }.items():
            monkeypatch.setitem(settings.MARKUS, key, value)
        return stub

    start.provider = request.param
    return start


def test_a_cancel_mid_stream_closes_the_connection(slow_server):
    stub = slow_server([{"content": LONG, "chunk_delay": DELAY}])
    stop = threading.Event()
    mark: list[int] = []
    deltas: list[str] = []

    def on_delta(text: str) -> None:
        deltas.append(text)
        if len(deltas) == 20:  # well into the answer: cancel
            mark.append(stub.wire.chunks_sent)
            stop.set()

    provider = get_provider()
    assert provider.name == slow_server.provider
    with pytest.raises(LLMCancelled):
        provider.complete(
            system="s",
            messages=[{"role": "user", "content": "talk"}],
            tools=[],
            context=CallContext(cancelled=stop.is_set, on_delta=on_delta),
        )
    assert stub.wire.closed.wait(10), "the stub never saw the connection closed"
    after = stub.wire.chunks_sent - mark[0]
    assert after <= WITHIN_A_SECOND, f"{after} chunks sent after the cancel"
    assert not stub.wire.finished.is_set()
    assert 20 <= len(deltas) < 2000


def test_a_cancel_while_the_server_stalls_closes_the_connection(slow_server):
    """No chunk arrives to check between: the watcher shuts the socket the read waits on."""
    stub = slow_server([{"content": LONG, "stall_after": 5, "stall": 120.0}])
    stop = threading.Event()

    def cancel_when_stalled() -> None:
        wait_for(lambda: stub.wire.chunks_sent >= 5, message="the stub to stall")
        stop.set()

    helper = threading.Thread(target=cancel_when_stalled, daemon=True)
    helper.start()
    with pytest.raises(LLMCancelled):
        get_provider().complete(
            system="s",
            messages=[{"role": "user", "content": "talk"}],
            tools=[],
            context=CallContext(cancelled=stop.is_set),
        )
    helper.join(5)
    assert stub.wire.closed.wait(10), "the stub never saw the connection closed"
    assert stub.wire.chunks_sent == 5 and not stub.wire.finished.is_set()


@pytest.mark.django_db(transaction=True)
def test_a_pause_while_the_model_streams_stops_the_call_and_requeues_the_item(slow_server, agent):
    stub = slow_server([{"content": LONG, "chunk_delay": DELAY}])
    item = mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "job", "content": "x"})
    results: list[loop.RunResult] = []

    def run() -> None:
        try:
            results.append(loop.run_attention(agent.id))
        finally:
            connection.close()  # this thread's own

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    wait_for(lambda: stub.wire.chunks_sent >= 20, message="the answer to stream")
    mark = stub.wire.chunks_sent
    services.agent_pause(agent)
    assert stub.wire.closed.wait(10), "the stub never saw the connection closed"
    after = stub.wire.chunks_sent - mark
    worker.join(30)
    assert not worker.is_alive()
    assert after <= WITHIN_A_SECOND, f"{after} chunks sent after the pause"
    assert not stub.wire.finished.is_set()
    assert results[0].status == "stopped"
    stored = MailboxItem.objects.get(id=item.id)
    assert stored.status == "queued" and stored.attempts == 0  # a pause is not a failed attempt
    activity = AgentActivity.objects.get(mailbox_item_id=item.id)
    assert activity.ended_at is not None and activity.success is False
